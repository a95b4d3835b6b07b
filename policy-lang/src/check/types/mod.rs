//! The type checker of sub bodies: types, name resolution, scopes; produces the checked tree.
//!
//! Every expression gets a type, names resolve to variables / backends / ACLs, scope and
//! return legality are checked against the subs the body runs in, and the result is the
//! checked tree (`crate::tree`).
//!
//! Errors are pushed and checking goes on with a poison type (`Ty::Err`) so one mistake
//! does not cascade. One concern per file: `stmt.rs` (statements and assignments),
//! `returns.rs` (`return (...)`), `calls.rs` (functions and statement calls), `directors.rs`
//! (`add_backend`, `.backend()`), `shard.rs` (the `shard` director's methods), `expr.rs` (expressions, operators, conversions).

mod calls;
mod directors;
mod expr;
mod returns;
mod shard;
mod stmt;

use std::collections::HashMap;

pub(crate) use directors::{AddedMember, DirectorAdd, InitCalls};
pub(crate) use shard::{ShardCall, ShardOp};

use super::ty::Ty;
use super::Symbols;
use crate::diagnostics::{Code, Diagnostic, Sink, Span};
use crate::tree::Expr;
use crate::vocab::sub::mask;
use crate::vocab::{Scope, Sub, Value};

/// Where the body being lowered runs.
pub(crate) struct BodyCtx<'a> {
    pub sub_name: &'a str,
    /// Subs the body runs in (a method's own bit, or every method that calls a custom sub).
    pub mask: u16,
    pub is_method: bool,
    /// For custom subs: the call site that brings it into each method.
    pub via: &'a HashMap<Sub, Span>,
}

pub(crate) struct Lowerer<'a> {
    pub sink: &'a mut Sink,
    pub syms: &'a Symbols,
    pub cx: BodyCtx<'a>,
    /// Director `add_backend` calls (and shard changes) found in `vcl_init`.
    pub init: &'a mut InitCalls,
    depth: usize,
    /// The subs `std.timed_call` runs in the statement being lowered, in order.
    timed: Vec<usize>,
}

pub(super) const E: (Expr, Ty) = (Expr::Const(Value::Unset), Ty::Err);

impl<'a> Lowerer<'a> {
    pub fn new(
        sink: &'a mut Sink,
        syms: &'a Symbols,
        cx: BodyCtx<'a>,
        init: &'a mut InitCalls,
    ) -> Lowerer<'a> {
        Lowerer {
            sink,
            syms,
            cx,
            init,
            depth: 0,
            timed: Vec::new(),
        }
    }

    // === scope checks ===

    /// Reports use of something only legal in `allowed` subs. Returns false on error.
    pub(super) fn scope_check(
        &mut self,
        allowed: u16,
        span: Span,
        what: &str,
        verb: &str,
        code: Code,
    ) -> bool {
        let bad = self.cx.mask & !allowed;
        if bad == 0 {
            return true;
        }
        let first = Sub::ALL
            .iter()
            .copied()
            .find(|s| bad & s.bit() != 0)
            .unwrap_or(Sub::Recv);
        let mut d = Diagnostic::new(code, span, format!("{what} is not {verb} in `{}`", first.name()));
        if self.cx.is_method {
            d = d.label(format!("not {verb} here"));
        } else {
            d = d.label(format!(
                "not {verb} in `{}`, which calls `{}`",
                first.name(),
                self.cx.sub_name
            ));
            if let Some(site) = self.cx.via.get(&first) {
                d = d.secondary(
                    *site,
                    format!("`{}` is reached from `{}` here", self.cx.sub_name, first.name()),
                );
            }
        }
        let names = mask::names(allowed);
        let hint = if names.is_empty() {
            format!("{what} is not {verb} in any sub")
        } else {
            format!("{what} is {verb} in: {}", names.join(", "))
        };
        self.sink.push(d.hint(hint));
        false
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    Any,
    Backend,
    Acl,
}

pub(super) fn vars_name(scope: Scope, h: &str) -> String {
    format!("{}.http.{h}", scope.as_str())
}
