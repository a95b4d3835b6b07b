//! Directors in sub bodies: `d.add_backend(...)` in `vcl_init` and `d.backend()`.

use super::{Expect, Lowerer, E};
use crate::ast::{self, Arg};
use crate::check::ty::Ty;
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::tree::{fold, DirectorKind, Expr, Stmt};
use crate::vocab::sub::mask;
use crate::vocab::{BackendId, Value};

/// One `d.add_backend(member[, weight])` in `vcl_init`.
pub(crate) struct DirectorAdd {
    pub director: usize,
    pub member: AddedMember,
    pub weight: f64,
    pub span: Span,
}

/// What lowering finds beyond the bodies: what `vcl_init` does to directors, in the order the
/// calls were lowered, and the largest `std.cache_req_body` size.
#[derive(Default)]
pub(crate) struct InitCalls {
    pub adds: Vec<DirectorAdd>,
    pub shard: Vec<super::ShardCall>,
    pub req_body_limit: Option<u64>,
    pub rolls_back: bool,
    pub rolls_back_bereq: bool,
    /// What `vcl_init`'s `p.set(...)` / `p.clear()` leave in each shard parameter set.
    pub shard_params: Vec<crate::tree::shard::ShardParams>,
}

/// What `add_backend` adds: a backend, or another director (`d2.backend()`).
pub(crate) enum AddedMember {
    Backend(BackendId),
    Director(usize),
}

impl Lowerer<'_> {
    pub(super) fn add_backend(
        &mut self,
        id: usize,
        kind: DirectorKind,
        func: &ast::Ident,
        args: &[Arg],
        span: Span,
    ) -> Option<Stmt> {
        if !self.scope_check(
            mask::INIT,
            func.span,
            "`add_backend`",
            "allowed",
            Code::NotAllowedHere,
        ) {
            return None;
        }
        if self.depth > 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    span,
                    "`add_backend` inside a condition is not supported",
                )
                .label("move this to the top level of `vcl_init`"),
            );
            return None;
        }
        let max = if kind.weighted() { 2 } else { 1 };
        if args.is_empty() || args.len() > max {
            self.arg_count(
                span,
                "add_backend",
                if max == 2 {
                    "1 or 2 (backend[, weight])"
                } else {
                    "1 (backend)"
                },
            );
            return None;
        }
        let (b, bt) = self.expr_expect(&args[0].value, Expect::Backend);
        let weight = match args.get(1) {
            Some(w) => match fold::expr(self.expr(&w.value).0) {
                Expr::Const(v) => v.as_real().unwrap_or(1.0),
                _ => {
                    self.sink.push(
                        Diagnostic::new(
                            Code::TypeMismatch,
                            w.value.span,
                            "weight must be a constant number",
                        )
                        .label("expected e.g. `1.0`"),
                    );
                    1.0
                }
            },
            None => 1.0,
        };
        let member = match (b, bt) {
            (Expr::Const(Value::Backend(Some(be))), Ty::Backend) => AddedMember::Backend(be),
            (Expr::Director(d, None), Ty::Backend) => AddedMember::Director(d),
            (Expr::Shard(_), Ty::Backend) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        args[0].value.span,
                        "a `shard` director cannot be a member of another director",
                    )
                    .label("its pick depends on each request's key")
                    .hint("add its backends to this director instead, or pick from it in `vcl_recv`"),
                );
                return None;
            }
            (Expr::Director(..), Ty::Backend) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        args[0].value.span,
                        "a `hash` director cannot be a member of another director",
                    )
                    .label("its pick depends on each request's key")
                    .hint("add its backends to this director instead, or pick from it in `vcl_recv`"),
                );
                return None;
            }
            (_, Ty::Err) => return None,
            (_, bt) => {
                self.mismatch(args[0].value.span, "a backend name", bt, None);
                return None;
            }
        };
        self.init.adds.push(DirectorAdd {
            director: id,
            member,
            weight,
            span,
        });
        None
    }

    /// `d.backend()` (`d.backend(key)` for a `hash` director): the director as a BACKEND value.
    pub(super) fn director_backend(
        &mut self,
        id: usize,
        kind: DirectorKind,
        name: &str,
        args: &[Arg],
        span: Span,
    ) -> (Expr, Ty) {
        let key = match (kind, args) {
            (DirectorKind::Hash, [k]) => {
                let (x, t) = self.expr(&k.value);
                match self.stringify(x, t, k.value.span) {
                    Some(x) => Some(Box::new(x)),
                    None => return E,
                }
            }
            (DirectorKind::Hash, _) => {
                self.arg_count(span, name, "1 (the hash key)");
                return E;
            }
            (_, []) => None,
            _ => {
                self.arg_count(span, name, "0");
                return E;
            }
        };
        (Expr::Director(id, key), Ty::Backend)
    }
}
