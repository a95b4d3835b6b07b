//! Typing and resolution of sub bodies: every expression gets a type, names
//! resolve to variables / backends / ACLs, scope and return legality are
//! checked against the subs the body runs in, and the result is the
//! checked tree (`crate::tree`). Errors are pushed and lowering goes on
//! with a poison type (`Ty::Err`) so one mistake does not cascade.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use http::HeaderName;

use super::funcs::{self, Sig};
use super::vars::{self, VarRef};
use super::{SymKind, Symbols};
use crate::ast::{self, Arg, AssignOp, BinOp, ExprKind, StmtKind};
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Sink, Span};
use crate::tree::{fold, DirectorKind, Expr, Func, Matcher, Replacement, Ret, Stmt};
use crate::vocab::regex as re;
use crate::vocab::sub::{self, default_reason, mask};
use crate::vocab::{
    Action, ArithOp, BackendId, CmpOp, PluginId, PluginPhase, Scope, Sub, Value, ValueType, Var,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Str,
    Int,
    Real,
    Duration,
    Bytes,
    Time,
    Bool,
    Ip,
    Backend,
    Acl,
    Probe,
    /// Poison: an error was already reported.
    Err,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Str => "STRING",
            Ty::Int => "INT",
            Ty::Real => "REAL",
            Ty::Duration => "DURATION",
            Ty::Bytes => "BYTES",
            Ty::Time => "TIME",
            Ty::Bool => "BOOL",
            Ty::Ip => "IP",
            Ty::Backend => "BACKEND",
            Ty::Acl => "ACL",
            Ty::Probe => "PROBE",
            Ty::Err => "?",
        }
    }

    pub(super) fn of(v: ValueType) -> Ty {
        match v {
            ValueType::Str => Ty::Str,
            ValueType::Int => Ty::Int,
            ValueType::Real => Ty::Real,
            ValueType::Bool => Ty::Bool,
            ValueType::Duration => Ty::Duration,
            ValueType::Bytes => Ty::Bytes,
            ValueType::Time => Ty::Time,
            ValueType::Ip => Ty::Ip,
            ValueType::Backend => Ty::Backend,
            ValueType::Body => Ty::Str,
        }
    }

    fn stringifiable(self) -> bool {
        !matches!(self, Ty::Acl | Ty::Probe)
    }
}

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
    /// Director `add_backend` calls found in `vcl_init`.
    pub director_adds: &'a mut Vec<DirectorAdd>,
    depth: usize,
}

/// One `d.add_backend(member[, weight])` in `vcl_init`.
pub(crate) struct DirectorAdd {
    pub director: usize,
    pub member: AddedMember,
    pub weight: f64,
    pub span: Span,
}

/// What `add_backend` adds: a backend, or another director (`d2.backend()`).
pub(crate) enum AddedMember {
    Backend(BackendId),
    Director(usize),
}

const E: (Expr, Ty) = (Expr::Const(Value::Unset), Ty::Err);

impl<'a> Lowerer<'a> {
    pub fn new(
        sink: &'a mut Sink,
        syms: &'a Symbols,
        cx: BodyCtx<'a>,
        director_adds: &'a mut Vec<DirectorAdd>,
    ) -> Lowerer<'a> {
        Lowerer {
            sink,
            syms,
            cx,
            director_adds,
            depth: 0,
        }
    }

    // === scope checks ===

    /// Reports use of something only legal in `allowed` subs. Returns false on error.
    fn scope_check(&mut self, allowed: u16, span: Span, what: &str, verb: &str, code: Code) -> bool {
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

    // === statements ===

    pub fn body(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            if let Some(s) = self.stmt(s) {
                out.push(s);
            }
        }
        out
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Option<Stmt> {
        match &s.kind {
            StmtKind::Set { target, op, value } => self.set(target, *op, value),
            StmtKind::Unset { target, legacy } => {
                if *legacy {
                    self.sink.push(
                        Diagnostic::new(Code::Syntax, s.span, "`remove` is Varnish 3 syntax")
                            .label("not VCL 4")
                            .hint("use `unset`"),
                    );
                }
                self.unset(target)
            }
            StmtKind::If { branches, otherwise } => {
                let mut bs = Vec::with_capacity(branches.len());
                for (c, b) in branches {
                    let c = self.cond(c);
                    self.depth += 1;
                    let b = self.body(b);
                    self.depth -= 1;
                    bs.push((c, b));
                }
                self.depth += 1;
                let o = otherwise.as_ref().map(|o| self.body(o)).unwrap_or_default();
                self.depth -= 1;
                Some(Stmt::If(bs, o))
            }
            StmtKind::Return(action) => self.ret(action.as_ref(), s.span),
            StmtKind::Call(name) => match self.syms.get(&name.name) {
                Some(SymKind::Sub(id)) => Some(Stmt::Call(id)),
                _ => {
                    let cands = self.syms.names_of(|k| matches!(k, SymKind::Sub(_)));
                    let hint = did_you_mean(&name.name, cands.iter().map(|s| s.as_str()))
                        .map(|s| format!("did you mean `{s}`?"));
                    self.sink.push(
                        Diagnostic::new(
                            Code::UndefinedSub,
                            name.span,
                            format!("undefined sub `{}`", name.name),
                        )
                        .label("no sub with this name")
                        .maybe_hint(hint)
                        .undeclared(),
                    );
                    None
                }
            },
            StmtKind::New { name, ctor } => {
                if !self.scope_check(mask::INIT, s.span, "`new`", "allowed", Code::NotAllowedHere) {
                    return None;
                }
                if self.depth > 0 {
                    self.sink.push(
                        Diagnostic::new(
                            Code::Unsupported,
                            s.span,
                            "`new` inside a condition is not supported",
                        )
                        .label("move this to the top level of `vcl_init`"),
                    );
                }
                // The object was registered by the symbol pass; check the constructor args.
                if let ExprKind::Call { args, .. } = &ctor.kind {
                    for a in args {
                        let _ = self.expr(&a.value);
                    }
                }
                let _ = name;
                None
            }
            StmtKind::Block(b) => Some(Stmt::Block(self.body(b))),
            StmtKind::Expr(e) => self.call_stmt(e),
            // Replaced by the included statements when loading (or reported there).
            StmtKind::Include(_) => None,
        }
    }

    fn resolve_target(&mut self, target: &ast::Ident) -> Option<VarRef> {
        match vars::resolve(&target.name) {
            Some(v) => Some(v),
            None => {
                self.unknown_variable(&target.name, target.span);
                None
            }
        }
    }

    fn header_name(&mut self, name: &str, span: Span) -> Option<HeaderName> {
        match HeaderName::from_bytes(name.as_bytes()) {
            Ok(h) => Some(h),
            Err(_) => {
                self.sink.push(
                    Diagnostic::new(Code::Syntax, span, format!("invalid header name `{name}`"))
                        .label("not a valid HTTP header name"),
                );
                None
            }
        }
    }

    fn set(&mut self, target: &ast::Ident, op: AssignOp, value: &ast::Expr) -> Option<Stmt> {
        let var = self.resolve_target(target);
        let expect_backend = matches!(&var, Some(v) if v.value_type() == ValueType::Backend);
        let (rhs, rty) = if expect_backend {
            self.expr_expect(value, Expect::Backend)
        } else {
            self.expr(value)
        };
        let var = var?;
        let what = format!("`{}`", target.name);
        let ok = self.scope_check(
            var.access().write,
            target.span,
            &what,
            "writable",
            Code::NotWritable,
        );
        let vty = var.value_type();
        if rty == Ty::Err {
            return None;
        }
        match var {
            VarRef::Header(scope, name) => {
                let h = self.header_name(&name, target.span)?;
                let rhs = self.stringify(rhs, rty, value.span)?;
                let rhs = match op {
                    AssignOp::Set => rhs,
                    AssignOp::Add => Expr::Concat(vec![Expr::Header(scope, h.clone()), rhs]),
                    _ => {
                        self.bad_assign_op(op, target, "STRING");
                        return None;
                    }
                };
                ok.then_some(Stmt::SetHeader(scope, h, rhs))
            }
            VarRef::Var(v) if vty == ValueType::Body => {
                if op != AssignOp::Set {
                    self.bad_assign_op(op, target, "BODY");
                    return None;
                }
                let rhs = self.stringify(rhs, rty, value.span)?;
                ok.then_some(Stmt::Synthetic(rhs))
                    .filter(|_| matches!(v, Var::RespBody | Var::BerespBody))
            }
            // Read-only: `scope_check` above reported it.
            VarRef::Top(_) => None,
            VarRef::Var(v) => {
                if v == Var::BerespDoEsi && !matches!(rhs, Expr::Const(Value::Bool(false))) {
                    self.sink.push(
                        Diagnostic::new(
                            Code::NoEffect,
                            target.span,
                            "`beresp.do_esi` has no effect: edgecache does not process ESI",
                        )
                        .label("`<esi:include>` tags reach clients as they are")
                        .hint("assemble the page at the origin, or cache the fragments as separate URLs the page loads"),
                    );
                }
                let want = Ty::of(vty);
                let rhs = match (op, want) {
                    (AssignOp::Set, Ty::Str) => self.stringify(rhs, rty, value.span)?,
                    (AssignOp::Add, Ty::Str) => {
                        let rhs = self.stringify(rhs, rty, value.span)?;
                        Expr::Concat(vec![Expr::Var(v), rhs])
                    }
                    (AssignOp::Set, _) => self.coerce(rhs, rty, want, value.span, Some(&target.name))?,
                    (_, Ty::Int | Ty::Real | Ty::Duration | Ty::Bytes) => {
                        let aop = match op {
                            AssignOp::Add => ArithOp::Add,
                            AssignOp::Sub => ArithOp::Sub,
                            AssignOp::Mul => ArithOp::Mul,
                            _ => ArithOp::Div,
                        };
                        let rhs = if matches!(op, AssignOp::Mul | AssignOp::Div) {
                            if !matches!(rty, Ty::Int | Ty::Real) {
                                self.mismatch(value.span, "INT or REAL", rty, None);
                                return None;
                            }
                            rhs
                        } else {
                            self.coerce(rhs, rty, want, value.span, Some(&target.name))?
                        };
                        let e = Expr::Arith(aop, Box::new(Expr::Var(v)), Box::new(rhs));
                        if want == Ty::Int && matches!(rty, Ty::Real) {
                            Expr::Call(Func::Integer, vec![Expr::Concat(vec![e])])
                        } else {
                            e
                        }
                    }
                    _ => {
                        self.bad_assign_op(op, target, want.name());
                        return None;
                    }
                };
                ok.then_some(Stmt::SetVar(v, rhs))
            }
        }
    }

    fn bad_assign_op(&mut self, op: AssignOp, target: &ast::Ident, ty: &str) {
        let ops = match op {
            AssignOp::Add => "+=",
            AssignOp::Sub => "-=",
            AssignOp::Mul => "*=",
            AssignOp::Div => "/=",
            AssignOp::Set => "=",
        };
        self.sink.push(
            Diagnostic::new(
                Code::TypeMismatch,
                target.span,
                format!("`{ops}` cannot be used on `{}` ({ty})", target.name),
            )
            .label(format!("{ty} variable")),
        );
    }

    fn unset(&mut self, target: &ast::Ident) -> Option<Stmt> {
        let var = self.resolve_target(target)?;
        let what = format!("`{}`", target.name);
        let acc = var.access();
        if acc.unset == 0 && acc.write != 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::NotUnsettable,
                    target.span,
                    format!("{what} cannot be unset"),
                )
                .label("only headers and a few variables can be unset")
                .hint(format!("assign a value instead: `set {} = ...;`", target.name)),
            );
            return None;
        }
        if !self.scope_check(acc.unset, target.span, &what, "unset-able", Code::NotWritable) {
            return None;
        }
        match var {
            VarRef::Header(scope, name) => {
                let h = self.header_name(&name, target.span)?;
                Some(Stmt::UnsetHeader(scope, h))
            }
            VarRef::Var(v) => Some(Stmt::UnsetVar(v)),
            VarRef::Top(_) => None,
        }
    }

    fn ret(&mut self, action: Option<&ast::ReturnAction>, span: Span) -> Option<Stmt> {
        let Some(a) = action else {
            if self.cx.is_method {
                let legal = Sub::from_name(self.cx.sub_name)
                    .map(sub::legal_actions)
                    .unwrap_or_default();
                self.sink.push(
                    Diagnostic::new(
                        Code::UnknownReturn,
                        span,
                        format!("`return` in `{}` needs an action", self.cx.sub_name),
                    )
                    .label("bare `return` only leaves a custom sub")
                    .hint(format!(
                        "write `return (ACTION);` with one of: {}",
                        legal.join(", ")
                    )),
                );
                return None;
            }
            return Some(Stmt::ReturnSub);
        };
        let name = a.name.name.as_str();
        let args = a.args.as_deref().unwrap_or(&[]);
        match name {
            // builtin.vcl's own `vcl_req_method` pipes unknown methods; edgecache's builtin
            // passes them to the origin, so a copy of builtin.vcl means the same as no policy.
            "pipe" if self.cx.sub_name == "vcl_req_method" && self.cx.mask & !sub::mask::RECV == 0 => {
                self.sink.push(
                    Diagnostic::new(Code::NoEffect, a.span, "`return (pipe)` passes the request here")
                        .label("unknown methods go to the origin as ordinary requests")
                        .hint("edgecache's builtin passes methods it does not know (the origin decides); write `return (pass);` to say so, or `return (pipe);` in `vcl_recv` to tunnel them"),
                );
                return Some(Stmt::Return(Ret::Const(Action::Pass)));
            }
            "vcl" => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        a.span,
                        "`return (vcl(...))` is not supported by edgecache",
                    )
                    .label("VCL labels are not available"),
                );
                return None;
            }
            _ => {}
        }
        let Some(allowed) = sub::action_mask(name) else {
            let hint = match name {
                "miss" => Some("`return (miss)` was removed in Varnish 6.2: `set req.hash_always_miss = true;` and `return (restart);`".to_string()),
                "hit_for_pass" => Some("Varnish 3 syntax: in `vcl_backend_response` set `beresp.uncacheable = true;` and a `beresp.ttl`".to_string()),
                "error" => None,
                _ => {
                    let legal = Sub::from_name(self.cx.sub_name).map(sub::legal_actions);
                    did_you_mean(name, legal.clone().unwrap_or_default())
                        .map(|s| format!("did you mean `{s}`?"))
                        .or_else(|| legal.map(|l| format!("actions allowed in `{}`: {}", self.cx.sub_name, l.join(", "))))
                }
            };
            self.sink.push(
                Diagnostic::new(
                    Code::UnknownReturn,
                    a.name.span,
                    format!("unknown return action `{name}`"),
                )
                .label("not a VCL action")
                .maybe_hint(hint),
            );
            return None;
        };
        // Arguments first: `pass(DURATION)` is hit-for-pass, only in `vcl_backend_response`.
        let hit_for_pass = name == "pass" && a.args.is_some();
        if hit_for_pass && self.cx.mask & !sub::mask::BE_RESPONSE != 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::IllegalReturn,
                    a.span,
                    "`return (pass(DURATION))` is only allowed in `vcl_backend_response`",
                )
                .label("hit-for-pass is decided on the backend response")
                .hint("write `return (pass);` here"),
            );
            return None;
        }
        let takes_args = matches!(name, "synth" | "error" | "fail") || hit_for_pass;
        if !takes_args && a.args.is_some() {
            let hint = "this action takes no arguments";
            self.sink.push(
                Diagnostic::new(Code::BadArguments, a.span, format!("`{name}` takes no arguments"))
                    .label("unexpected arguments")
                    .hint(hint),
            );
            return None;
        }
        // Legal in every sub this body runs in?
        let bad = self.cx.mask & !allowed;
        if bad != 0 {
            let first = Sub::ALL
                .iter()
                .copied()
                .find(|s| bad & s.bit() != 0)
                .unwrap_or(Sub::Recv);
            let mut d = Diagnostic::new(
                Code::IllegalReturn,
                a.span,
                format!("`return ({name})` is not allowed in `{}`", first.name()),
            );
            d = if self.cx.is_method {
                d.label("illegal action for this sub")
            } else {
                let d = d.label(format!(
                    "illegal in `{}`, which calls `{}`",
                    first.name(),
                    self.cx.sub_name
                ));
                match self.cx.via.get(&first) {
                    Some(site) => d.secondary(*site, format!("called from `{}` here", first.name())),
                    None => d,
                }
            };
            let special = match (first, name) {
                (Sub::Hit, "fetch") => Some("`return (fetch)` from `vcl_hit` was removed in Varnish 6.0; use `return (pass)` or `return (restart)` with `req.hash_always_miss`".to_string()),
                (Sub::Recv, "lookup") => Some("in VCL 4, `vcl_recv` returns `hash` to look up the object".to_string()),
                _ => None,
            };
            let hint = special.unwrap_or_else(|| {
                format!(
                    "actions allowed in `{}`: {}",
                    first.name(),
                    sub::legal_actions(first).join(", ")
                )
            });
            self.sink.push(d.hint(hint));
            return None;
        }
        let action = match name {
            "hash" | "lookup" => Action::Lookup,
            "pass" if hit_for_pass => {
                if args.len() != 1 {
                    self.arg_count(a.span, "pass", "1 (a DURATION)");
                    return None;
                }
                let (d, t) = self.expr(&args[0].value);
                let d = self.coerce(d, t, Ty::Duration, args[0].value.span, None)?;
                return Some(Stmt::Return(Ret::HitForPass(fold::expr(d))));
            }
            "pass" => Action::Pass,
            "purge" => Action::Purge,
            "deliver" => Action::Deliver,
            "fetch" => Action::Fetch,
            "restart" => Action::Restart,
            "retry" => Action::Retry,
            "abandon" => Action::Abandon,
            "ok" => Action::Ok,
            "pipe" => Action::Pipe,
            "fail" => {
                if args.len() > 1 {
                    self.arg_count(a.span, "fail", "at most 1");
                    return None;
                }
                let reason = match args.first() {
                    Some(r) => {
                        let (e, t) = self.expr(&r.value);
                        Some(self.stringify(e, t, r.value.span)?)
                    }
                    None => None,
                };
                return Some(Stmt::Return(match reason.map(fold::expr) {
                    None => Ret::Const(Action::Fail { reason: None }),
                    Some(Expr::Const(Value::Str(s))) => Ret::Const(Action::Fail {
                        reason: Some(Arc::from(s.as_ref())),
                    }),
                    Some(e) => Ret::Fail(Some(e)),
                }));
            }
            _ => {
                // synth / error
                if args.is_empty() || args.len() > 2 {
                    self.arg_count(a.span, name, "1 or 2 (status, \"reason\")");
                    return None;
                }
                let (st, sty) = self.expr(&args[0].value);
                let st = self.coerce(st, sty, Ty::Int, args[0].value.span, None)?;
                let st = fold::expr(st);
                if let Expr::Const(Value::Int(i)) = st {
                    if !(100..=999).contains(&i) {
                        self.sink.push(
                            Diagnostic::new(
                                Code::BadArguments,
                                args[0].value.span,
                                format!("status {i} is out of range"),
                            )
                            .label("expected 100..=999"),
                        );
                        return None;
                    }
                }
                let reason = match args.get(1) {
                    Some(r) => {
                        let (e, t) = self.expr(&r.value);
                        Some(fold::expr(self.stringify(e, t, r.value.span)?))
                    }
                    None => None,
                };
                let is_synth = name == "synth";
                return Some(Stmt::Return(match (&st, &reason) {
                    (Expr::Const(Value::Int(i)), None | Some(Expr::Const(Value::Str(_)))) => {
                        let status = *i as u16;
                        let reason: Arc<str> = match &reason {
                            Some(Expr::Const(Value::Str(s))) => Arc::from(s.as_ref()),
                            _ => Arc::from(default_reason(status)),
                        };
                        Ret::Const(if is_synth {
                            Action::Synth { status, reason }
                        } else {
                            Action::Error { status, reason }
                        })
                    }
                    _ if is_synth => Ret::Synth(st, reason),
                    _ => Ret::Error(st, reason),
                }));
            }
        };
        Some(Stmt::Return(Ret::Const(action)))
    }

    fn arg_count(&mut self, span: Span, f: &str, want: &str) {
        self.sink.push(
            Diagnostic::new(
                Code::BadArguments,
                span,
                format!("wrong number of arguments to `{f}`"),
            )
            .label(format!("expected {want}")),
        );
    }

    fn call_stmt(&mut self, e: &ast::Expr) -> Option<Stmt> {
        let ExprKind::Call { func, args } = &e.kind else {
            return None;
        };
        let name = func.name.as_str();
        let one_string = |this: &mut Self, fname: &str| -> Option<Expr> {
            if args.len() != 1 {
                this.arg_count(e.span, fname, "1");
                return None;
            }
            let (x, t) = this.expr(&args[0].value);
            this.stringify(x, t, args[0].value.span)
        };
        match name {
            "hash_data" => {
                let ok = self.scope_check(
                    mask::HASH,
                    func.span,
                    "`hash_data`",
                    "allowed",
                    Code::NotAllowedHere,
                );
                let x = one_string(self, name)?;
                ok.then_some(Stmt::HashData(x))
            }
            "synthetic" => {
                let ok = self.scope_check(
                    mask::SYNTH | mask::BE_ERROR,
                    func.span,
                    "`synthetic`",
                    "allowed",
                    Code::NotAllowedHere,
                );
                let x = one_string(self, name)?;
                ok.then_some(Stmt::Synthetic(x))
            }
            "ban" => Some(Stmt::Ban(one_string(self, name)?)),
            "std.ban" => {
                self.need_import("std", func);
                Some(Stmt::Ban(one_string(self, name)?))
            }
            "std.log" => {
                self.need_import("std", func);
                Some(Stmt::Log(one_string(self, name)?))
            }
            "std.syslog" => {
                self.need_import("std", func);
                if args.len() != 2 {
                    self.arg_count(e.span, name, "2 (priority, message)");
                    return None;
                }
                let _ = self.expr(&args[0].value);
                let (x, t) = self.expr(&args[1].value);
                Some(Stmt::Log(self.stringify(x, t, args[1].value.span)?))
            }
            "std.timestamp" => {
                self.need_import("std", func);
                let _ = one_string(self, name);
                None
            }
            "std.collect" => {
                self.need_import("std", func);
                if args.is_empty() || args.len() > 2 {
                    self.arg_count(e.span, name, "1 or 2 (header[, separator])");
                    return None;
                }
                let a = &args[0].value;
                let hdr = match &a.kind {
                    ExprKind::Name(n) => vars::resolve(n),
                    _ => None,
                };
                match hdr {
                    Some(VarRef::Header(scope, h)) => {
                        let what = format!("`{}`", vars_name(scope, &h));
                        let ok = self.scope_check(
                            vars::header_access(scope, &h).write,
                            a.span,
                            &what,
                            "writable",
                            Code::NotWritable,
                        );
                        let h = self.header_name(&h, a.span)?;
                        ok.then_some(Stmt::Collect(scope, h))
                    }
                    _ => {
                        self.sink.push(
                            Diagnostic::new(Code::TypeMismatch, a.span, "`std.collect` expects a header")
                                .label("expected e.g. `req.http.Cookie`"),
                        );
                        None
                    }
                }
            }
            _ if name.starts_with("plugin.") => self.plugin_stmt(func, args, e.span),
            _ => {
                // `obj.add_backend(...)` in vcl_init.
                if let Some((obj, method)) = name.rsplit_once('.') {
                    if let Some(SymKind::Director(id, kind)) = self.syms.get(obj) {
                        if method == "add_backend" {
                            return self.add_backend(id, kind, func, args, e.span);
                        }
                    }
                }
                let (x, t) = self.expr(e);
                if t == Ty::Err {
                    return None;
                }
                Some(Stmt::Eval(x))
            }
        }
    }

    /// `plugin.request(NAME);` (vcl_recv) / `plugin.response(NAME);`
    /// (vcl_backend_response, vcl_deliver).
    fn plugin_stmt(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> Option<Stmt> {
        let name = func.name.as_str();
        let (phase, allowed) = match name {
            "plugin.request" => (PluginPhase::Request, mask::RECV),
            "plugin.response" => (PluginPhase::Response, mask::BE_RESPONSE | mask::DELIVER),
            _ => {
                let hint = did_you_mean(name, ["plugin.request", "plugin.response"])
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        "run a plugin with `plugin.request(NAME);` (vcl_recv) or `plugin.response(NAME);` (vcl_backend_response, vcl_deliver)".into()
                    });
                self.sink.push(
                    Diagnostic::new(
                        Code::UnknownFunction,
                        func.span,
                        format!("unknown function `{name}`"),
                    )
                    .label("not a plugin phase")
                    .hint(hint),
                );
                return None;
            }
        };
        let ok = self.scope_check(
            allowed,
            func.span,
            &format!("`{name}`"),
            "allowed",
            Code::NotAllowedHere,
        );
        let [arg] = args else {
            self.arg_count(span, name, "1 (a plugin name)");
            return None;
        };
        let a = &arg.value;
        let ExprKind::Name(n) = &a.kind else {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    a.span,
                    format!("`{name}` expects a plugin name"),
                )
                .label("expected the name of a `plugin` declaration")
                .hint(format!("e.g. `{name}(auth);` for `plugin auth {{ ... }}`")),
            );
            return None;
        };
        let id = match self.syms.get(n) {
            Some(SymKind::Plugin(id)) => id,
            other => {
                let names = self.syms.names_of(|k| matches!(k, SymKind::Plugin(_)));
                let mut d = Diagnostic::new(Code::UndefinedPlugin, a.span, format!("undefined plugin `{n}`"))
                    .undeclared();
                d = match other {
                    Some(k) => {
                        let what = k.describe();
                        let article = if what.starts_with(['A', 'a', 'e', 'i', 'o', 'u']) {
                            "an"
                        } else {
                            "a"
                        };
                        d.label(format!("`{n}` is {article} {what}, not a plugin"))
                    }
                    None => d.label("no plugin with this name"),
                };
                let hint = did_you_mean(n, names.iter().map(|s| s.as_str()))
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        if names.is_empty() {
                            format!("declare it at the top level: `plugin {n} {{ .path = \"plugins/{n}.wasm\"; }}`")
                        } else {
                            format!("declared plugins: {}", names.join(", "))
                        }
                    });
                self.sink.push(d.hint(hint));
                return None;
            }
        };
        ok.then_some(Stmt::Plugin(PluginId(id as u32), phase))
    }

    fn add_backend(
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
        self.director_adds.push(DirectorAdd {
            director: id,
            member,
            weight,
            span,
        });
        None
    }

    fn need_import(&mut self, vmod: &str, func: &ast::Ident) {
        if !self.syms.imports.iter().any(|i| i == vmod) {
            self.sink.push(
                Diagnostic::new(
                    Code::UnknownFunction,
                    func.span,
                    format!("`{}` needs `import {vmod};`", func.name),
                )
                .label(format!("vmod `{vmod}` is not imported"))
                .hint(format!("add `import {vmod};` after the `vcl 4.1;` line"))
                .undeclared(),
            );
        }
    }

    // === expressions ===

    fn cond(&mut self, e: &ast::Expr) -> Expr {
        let (x, t) = self.expr(e);
        match t {
            Ty::Acl | Ty::Probe => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        e.span,
                        format!("{} cannot be used as a condition", t.name()),
                    )
                    .label("expected a BOOL expression"),
                );
                Expr::Const(Value::Bool(false))
            }
            _ => x,
        }
    }

    fn mismatch(&mut self, span: Span, want: &str, got: Ty, hint: Option<String>) {
        if got == Ty::Err {
            return;
        }
        self.sink.push(
            Diagnostic::new(
                Code::TypeMismatch,
                span,
                format!("type mismatch: expected {want}, found {}", got.name()),
            )
            .label(format!("this is {}", got.name()))
            .maybe_hint(hint),
        );
    }

    /// Converts to STRING (anything but ACL/PROBE/VOID).
    fn stringify(&mut self, e: Expr, t: Ty, span: Span) -> Option<Expr> {
        match t {
            Ty::Str => Some(e),
            Ty::Err => None,
            t if t.stringifiable() => Some(Expr::Concat(vec![e])),
            t => {
                self.mismatch(span, "STRING", t, None);
                None
            }
        }
    }

    /// Converts `e: t` to `want`, or reports.
    fn coerce(&mut self, e: Expr, t: Ty, want: Ty, span: Span, target: Option<&str>) -> Option<Expr> {
        if t == want && t != Ty::Err {
            return Some(e);
        }
        match (t, want) {
            (Ty::Err, _) => None,
            (_, Ty::Str) => self.stringify(e, t, span),
            (Ty::Int, Ty::Real) => Some(Expr::Arith(
                ArithOp::Add,
                Box::new(e),
                Box::new(Expr::Const(Value::Real(0.0))),
            )),
            (Ty::Str, Ty::Ip) => match fold::expr(e) {
                Expr::Const(Value::Str(s)) => match s.parse::<IpAddr>() {
                    Ok(ip) => Some(Expr::Const(Value::Ip(ip))),
                    Err(_) => {
                        self.sink.push(
                            Diagnostic::new(Code::TypeMismatch, span, format!("`{s}` is not an IP address"))
                                .label("expected an IP address"),
                        );
                        None
                    }
                },
                _ => {
                    self.mismatch(
                        span,
                        "IP",
                        t,
                        Some("convert with `std.ip(STRING, FALLBACK)`".into()),
                    );
                    None
                }
            },
            _ => {
                let target_s = target
                    .map(|n| format!("`{n}` is {}; ", want.name()))
                    .unwrap_or_default();
                let hint = match (t, want) {
                    (Ty::Int | Ty::Real, Ty::Duration) => Some(format!("{target_s}add a unit to the number, e.g. `120s`, `5m`, `1h`")),
                    (Ty::Str, Ty::Duration) => Some(format!("{target_s}write a duration literal such as `120s`, or convert with `std.duration(STRING, 0s)`")),
                    (Ty::Str, Ty::Int) => Some(format!("{target_s}convert with `std.integer(STRING, 0)`")),
                    (Ty::Str, Ty::Real) => Some(format!("{target_s}convert with `std.real(STRING, 0.0)`")),
                    (Ty::Str, Ty::Bool) => Some(format!("{target_s}write `true` or `false`")),
                    (Ty::Str, Ty::Backend) => Some(format!("{target_s}name a backend without quotes")),
                    _ => None,
                };
                self.mismatch(span, want.name(), t, hint);
                None
            }
        }
    }

    pub fn expr(&mut self, e: &ast::Expr) -> (Expr, Ty) {
        self.expr_expect(e, Expect::Any)
    }

    fn expr_expect(&mut self, e: &ast::Expr, expect: Expect) -> (Expr, Ty) {
        match &e.kind {
            ExprKind::Str(s) => (Expr::Const(Value::Str(Cow::Owned(s.clone()))), Ty::Str),
            ExprKind::Int(i) => (Expr::Const(Value::Int(*i)), Ty::Int),
            ExprKind::Real(r) => (Expr::Const(Value::Real(*r)), Ty::Real),
            ExprKind::Duration(d) => (Expr::Const(Value::Duration(*d)), Ty::Duration),
            ExprKind::Bytes(b) => (Expr::Const(Value::Bytes(*b)), Ty::Bytes),
            ExprKind::Bool(b) => (Expr::Const(Value::Bool(*b)), Ty::Bool),
            ExprKind::Name(n) => self.name(n, e.span, expect),
            ExprKind::Call { func, args } => self.call(func, args, e.span),
            ExprKind::Not(x) => {
                let x = self.cond(x);
                (Expr::Not(Box::new(x)), Ty::Bool)
            }
            ExprKind::Neg(x) => {
                let (x, t) = self.expr(x);
                match t {
                    Ty::Int | Ty::Real | Ty::Duration | Ty::Err => (Expr::Neg(Box::new(x)), t),
                    _ => {
                        self.mismatch(e.span, "a number or DURATION", t, None);
                        E
                    }
                }
            }
            ExprKind::Binary {
                op,
                op_span,
                lhs,
                rhs,
            } => self.binary(*op, *op_span, lhs, rhs, e.span),
        }
    }

    /// A readable variable's value.
    fn read(&mut self, v: VarRef, span: Span) -> (Expr, Ty) {
        match v {
            VarRef::Var(var) => (Expr::Var(var), Ty::of(var.value_type())),
            VarRef::Header(scope, h) => match self.header_name(&h, span) {
                Some(h) => (Expr::Header(scope, h), Ty::Str),
                None => E,
            },
            VarRef::Top(req) => self.read(*req, span),
        }
    }

    fn name(&mut self, n: &str, span: Span, expect: Expect) -> (Expr, Ty) {
        if let Some(v) = vars::resolve(n) {
            let what = format!("`{n}`");
            let acc = v.access();
            if acc.read == 0 {
                self.sink.push(
                    Diagnostic::new(Code::NotReadable, span, format!("{what} cannot be read"))
                        .label("write-only")
                        .maybe_hint(
                            (v.value_type() == ValueType::Body).then(|| {
                                "bodies can only be set (`set resp.body = ...`) or unset".to_string()
                            }),
                        ),
                );
                return E;
            }
            if !self.scope_check(acc.read, span, &what, "readable", Code::NotReadable) {
                return E;
            }
            return self.read(v, span);
        }
        match self.syms.get(n) {
            Some(SymKind::Backend(id)) => {
                return (
                    Expr::Const(Value::Backend(Some(BackendId::new(id as u32)))),
                    Ty::Backend,
                )
            }
            Some(SymKind::Acl(id)) => return (Expr::Const(Value::Int(id as i64)), Ty::Acl),
            Some(SymKind::Probe(_)) => return (Expr::Const(Value::Unset), Ty::Probe),
            Some(SymKind::Director(..)) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        span,
                        format!("director `{n}` is not a backend"),
                    )
                    .label("a director object")
                    .hint(format!("pick a backend with `{n}.backend()`")),
                );
                return E;
            }
            Some(SymKind::Plugin(_)) => {
                self.sink.push(
                    Diagnostic::new(Code::TypeMismatch, span, format!("`{n}` is a plugin, not a value"))
                        .label("a plugin")
                        .hint(format!(
                            "run it with `plugin.request({n});` (vcl_recv) or `plugin.response({n});` (vcl_backend_response, vcl_deliver)"
                        )),
                );
                return E;
            }
            Some(SymKind::Sub(_)) => {
                self.sink.push(
                    Diagnostic::new(Code::TypeMismatch, span, format!("`{n}` is a sub, not a value"))
                        .label("a sub")
                        .hint(format!("run it with `call {n};`")),
                );
                return E;
            }
            None => {}
        }
        match expect {
            Expect::Backend if !n.contains('.') => {
                let names = self
                    .syms
                    .names_of(|k| matches!(k, SymKind::Backend(_) | SymKind::Director(..)));
                let hint = did_you_mean(n, names.iter().map(|s| s.as_str()))
                    .map(|s| format!("did you mean `{s}`?"))
                    .or_else(|| {
                        (!names.is_empty()).then(|| format!("declared backends: {}", names.join(", ")))
                    });
                self.sink.push(
                    Diagnostic::new(Code::UndefinedBackend, span, format!("undefined backend `{n}`"))
                        .label("no backend with this name")
                        .maybe_hint(hint)
                        .undeclared(),
                );
                E
            }
            Expect::Acl if !n.contains('.') => {
                let names = self.syms.names_of(|k| matches!(k, SymKind::Acl(_)));
                let hint =
                    did_you_mean(n, names.iter().map(|s| s.as_str())).map(|s| format!("did you mean `{s}`?"));
                self.sink.push(
                    Diagnostic::new(Code::UndefinedAcl, span, format!("undefined ACL `{n}`"))
                        .label("no ACL with this name")
                        .maybe_hint(hint)
                        .undeclared(),
                );
                E
            }
            _ => {
                self.unknown_variable(n, span);
                E
            }
        }
    }

    fn unknown_variable(&mut self, n: &str, span: Span) {
        let mut d = Diagnostic::new(Code::UnknownVariable, span, format!("unknown variable `{n}`"))
            .label("not a VCL variable");
        if let Some(note) = vars::known_unsupported(n) {
            d = d.hint(note);
        } else {
            let syms = self
                .syms
                .names_of(|k| matches!(k, SymKind::Backend(_) | SymKind::Acl(_)));
            let cands: Vec<&str> = vars::candidates()
                .map(|s| -> &str { s })
                .chain(syms.iter().map(|s| s.as_str()))
                .collect();
            let best = did_you_mean(n, cands.iter().copied());
            d = d.maybe_hint(best.map(|s| format!("did you mean `{s}`?")));
            if let Some((prefix, rest)) = n.split_once('.') {
                if ["req", "bereq", "beresp", "resp", "obj"].contains(&prefix)
                    && !rest.contains('.')
                    && d.hint.is_none()
                {
                    d = d.hint(format!("headers are written `{prefix}.http.{rest}`"));
                }
            }
        }
        self.sink.push(d);
    }

    fn binary(
        &mut self,
        op: BinOp,
        op_span: Span,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        span: Span,
    ) -> (Expr, Ty) {
        match op {
            BinOp::And | BinOp::Or => {
                let (a, b) = (self.cond(lhs), self.cond(rhs));
                let e = if op == BinOp::And {
                    Expr::And(Box::new(a), Box::new(b))
                } else {
                    Expr::Or(Box::new(a), Box::new(b))
                };
                (e, Ty::Bool)
            }
            BinOp::Match | BinOp::NotMatch => {
                let negate = op == BinOp::NotMatch;
                let (l, lt) = self.expr(lhs);
                if let ExprKind::Str(pat) = &rhs.kind {
                    if lt == Ty::Err {
                        let _ = re::compile(pat, rhs.span).map_err(|d| self.sink.push(d));
                        return E;
                    }
                    let Some(l) = self.stringify(l, lt, lhs.span) else {
                        return E;
                    };
                    return match re::compile(pat, rhs.span) {
                        Ok(regex) => (
                            Expr::Match {
                                subject: Box::new(l),
                                matcher: Matcher::new(pat, regex),
                                negate,
                            },
                            Ty::Bool,
                        ),
                        Err(d) => {
                            self.sink.push(d);
                            E
                        }
                    };
                }
                if let ExprKind::Name(_) = &rhs.kind {
                    let (r, rt) = self.expr_expect(rhs, Expect::Acl);
                    match (lt, rt) {
                        (Ty::Ip, Ty::Acl) => {
                            let Expr::Const(Value::Int(acl)) = r else { return E };
                            return (
                                Expr::Acl {
                                    subject: Box::new(l),
                                    acl: acl as usize,
                                    negate,
                                },
                                Ty::Bool,
                            );
                        }
                        (Ty::Err, _) | (_, Ty::Err) => return E,
                        (_, Ty::Acl) => {
                            self.mismatch(
                                lhs.span,
                                "IP (ACL match)",
                                lt,
                                Some("ACLs match IP addresses such as `client.ip`".into()),
                            );
                            return E;
                        }
                        _ => {}
                    }
                }
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        rhs.span,
                        format!(
                            "right side of `{}` must be a regex literal or an ACL",
                            op.as_str()
                        ),
                    )
                    .label("expected a string literal or an ACL name")
                    .hint("regexes are compiled when the policy loads, so they must be literal strings"),
                );
                E
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                let (l, lt) = self.expr(lhs);
                let expect = if lt == Ty::Backend {
                    Expect::Backend
                } else {
                    Expect::Any
                };
                let (r, rt) = self.expr_expect(rhs, expect);
                if lt == Ty::Err || rt == Ty::Err {
                    return E;
                }
                let cop = match op {
                    BinOp::Eq => CmpOp::Eq,
                    BinOp::Ne => CmpOp::Ne,
                    BinOp::Lt => CmpOp::Lt,
                    BinOp::Gt => CmpOp::Gt,
                    BinOp::Le => CmpOp::Le,
                    _ => CmpOp::Ge,
                };
                let ordered = !matches!(cop, CmpOp::Eq | CmpOp::Ne);
                let ok = match (lt, rt) {
                    (Ty::Str, Ty::Str) => true,
                    (Ty::Int | Ty::Real, Ty::Int | Ty::Real) => true,
                    (a, b) if a == b && matches!(a, Ty::Duration | Ty::Bytes | Ty::Time) => true,
                    (a, b) if a == b && matches!(a, Ty::Bool | Ty::Backend | Ty::Ip) => !ordered,
                    (Ty::Ip, Ty::Str) | (Ty::Str, Ty::Ip) if !ordered => {
                        // A string constant is parsed as an IP where an IP is expected.
                        let (ip_side, s_side, s_span) = if lt == Ty::Ip {
                            (l, r, rhs.span)
                        } else {
                            (r, l, lhs.span)
                        };
                        let Some(ipc) = self.coerce(s_side, Ty::Str, Ty::Ip, s_span, None) else {
                            return E;
                        };
                        return (Expr::Cmp(cop, Box::new(ip_side), Box::new(ipc)), Ty::Bool);
                    }
                    _ => false,
                };
                if !ok {
                    let hint = match (lt, rt) {
                        (Ty::Duration, Ty::Int | Ty::Real) | (Ty::Int | Ty::Real, Ty::Duration) => {
                            Some("give the number a unit, e.g. `0s`".to_string())
                        }
                        (Ty::Str, Ty::Int) | (Ty::Int, Ty::Str) => Some(
                            "compare with a string literal, or convert with `std.integer(STRING, 0)`".into(),
                        ),
                        _ => None,
                    };
                    self.sink.push(
                        Diagnostic::new(
                            Code::TypeMismatch,
                            op_span,
                            format!("cannot compare {} {} {}", lt.name(), op.as_str(), rt.name()),
                        )
                        .label("mismatched types")
                        .secondary(lhs.span, lt.name())
                        .secondary(rhs.span, rt.name())
                        .maybe_hint(hint),
                    );
                    return E;
                }
                (Expr::Cmp(cop, Box::new(l), Box::new(r)), Ty::Bool)
            }
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                let (l, lt) = self.expr(lhs);
                let (r, rt) = self.expr(rhs);
                if lt == Ty::Err || rt == Ty::Err {
                    return E;
                }
                if op == BinOp::Add && (lt == Ty::Str || rt == Ty::Str) {
                    let Some(l) = self.stringify(l, lt, lhs.span) else {
                        return E;
                    };
                    let Some(r) = self.stringify(r, rt, rhs.span) else {
                        return E;
                    };
                    let mut parts = match l {
                        Expr::Concat(p) => p,
                        other => vec![other],
                    };
                    match r {
                        Expr::Concat(p) => parts.extend(p),
                        other => parts.push(other),
                    }
                    return (Expr::Concat(parts), Ty::Str);
                }
                use Ty::*;
                let aop = match op {
                    BinOp::Add => ArithOp::Add,
                    BinOp::Sub => ArithOp::Sub,
                    BinOp::Mul => ArithOp::Mul,
                    BinOp::Div => ArithOp::Div,
                    _ => ArithOp::Rem,
                };
                let res = match (aop, lt, rt) {
                    (ArithOp::Rem, Int, Int) => Some(Int),
                    (ArithOp::Rem, ..) => None,
                    (_, Int, Int) => Some(Int),
                    (_, Int | Real, Int | Real) => Some(Real),
                    (ArithOp::Add | ArithOp::Sub, Duration, Duration) => Some(Duration),
                    (ArithOp::Add | ArithOp::Sub, Bytes, Bytes) => Some(Bytes),
                    (ArithOp::Add | ArithOp::Sub, Time, Duration) => Some(Time),
                    (ArithOp::Sub, Time, Time) => Some(Duration),
                    (ArithOp::Mul | ArithOp::Div, Duration, Int | Real) => Some(Duration),
                    (ArithOp::Mul, Int | Real, Duration) => Some(Duration),
                    (ArithOp::Mul | ArithOp::Div, Bytes, Int | Real) => Some(Bytes),
                    _ => None,
                };
                match res {
                    Some(t) => (Expr::Arith(aop, Box::new(l), Box::new(r)), t),
                    None => {
                        let hint = match (lt, rt) {
                            (Duration, Int | Real) | (Int | Real, Duration) => {
                                Some("give the number a unit, e.g. `10s`".into())
                            }
                            _ => None,
                        };
                        self.sink.push(
                            Diagnostic::new(
                                Code::TypeMismatch,
                                op_span,
                                format!(
                                    "cannot apply `{}` to {} and {}",
                                    op.as_str(),
                                    lt.name(),
                                    rt.name()
                                ),
                            )
                            .label("unsupported operand types")
                            .maybe_hint(hint),
                        );
                        let _ = span;
                        E
                    }
                }
            }
        }
    }

    fn call(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        let name = func.name.as_str();
        match name {
            "regsub" | "regsuball" => return self.regsub(name == "regsuball", args, span),
            _ => {}
        }
        if let Some(sig) = funcs::VALUE_FUNCS.iter().find(|s| s.name == name) {
            self.need_import("std", func);
            return self.sig_call(sig, func, args, span);
        }
        if let Some(sig) = funcs::connection_sig(name) {
            self.need_import(sig.name.split_once('.').map_or("", |(vmod, _)| vmod), func);
            // Varnish: "Restricted to: client" (the backend side has no client connection).
            let what = format!("`{name}()`");
            if !self.scope_check(mask::CLIENT, func.span, &what, "allowed", Code::NotAllowedHere) {
                return E;
            }
            return self.sig_call(&sig, func, args, span);
        }
        if funcs::STATEMENT_FUNCS.contains(&name) {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    func.span,
                    format!("`{name}` does not return a value"),
                )
                .label("used as a value")
                .hint(format!("call it as a statement: `{name}(...);`")),
            );
            return E;
        }
        if matches!(name, "plugin.request" | "plugin.response") {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    func.span,
                    format!("`{name}` does not return a value"),
                )
                .label("used as a value")
                .hint(format!("run the plugin as a statement: `{name}(NAME);`")),
            );
            return E;
        }
        if let Some(note) = funcs::unsupported(name) {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    func.span,
                    format!("`{name}` is not supported by edgecache"),
                )
                .label("not available")
                .hint(note),
            );
            return E;
        }
        // Methods: `<string>.lower()`, `<string>.upper()`, `<director>.backend()`.
        if let Some((recv, method)) = name.rsplit_once('.') {
            if let Some(SymKind::Director(id, kind)) = self.syms.get(recv) {
                if method == "backend" {
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
                    return (Expr::Director(id, key), Ty::Backend);
                }
            }
            if matches!(method, "lower" | "upper") && vars::resolve(recv).is_some() {
                if !args.is_empty() {
                    self.arg_count(span, name, "0");
                    return E;
                }
                let recv_span = Span {
                    end: func.span.start + recv.len() as u32,
                    ..func.span
                };
                let (x, t) = self.name(recv, recv_span, Expect::Any);
                let Some(x) = self.stringify(x, t, recv_span) else {
                    return E;
                };
                let f = if method == "lower" {
                    Func::ToLower
                } else {
                    Func::ToUpper
                };
                return (Expr::Call(f, vec![x]), Ty::Str);
            }
        }
        let vmod = name.split('.').next().unwrap_or("");
        let imported = self.syms.imports.iter().any(|i| i == vmod);
        // `OBJ.method()`: OBJ may be made with `new` in a file that includes this one.
        let maybe_object = name.contains('.') && !imported && !funcs::VMODS.contains(&vmod);
        let hint = did_you_mean(name, funcs::all_names()).map(|s| format!("did you mean `{s}`?"));
        let hint = hint.or_else(|| {
            (name.contains('.') && !funcs::VMODS.contains(&vmod)).then(|| {
                if imported {
                    format!("vmod `{vmod}` is not available in edgecache")
                } else {
                    format!(
                        "`{vmod}` is neither an imported vmod nor an object made with `new` in \
                         `vcl_init` (a `new` that failed is reported on its own line)"
                    )
                }
            })
        });
        let d = Diagnostic::new(
            Code::UnknownFunction,
            func.span,
            format!("unknown function `{name}`"),
        )
        .label("not a known function")
        .maybe_hint(hint);
        self.sink.push(if maybe_object { d.undeclared() } else { d });
        for a in args {
            let _ = self.expr(&a.value);
        }
        E
    }

    fn sig_call(&mut self, sig: &Sig, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        let mut slots: Vec<Option<&Arg>> = vec![None; sig.params.len()];
        let mut pos = 0;
        for a in args {
            let idx = match &a.name {
                Some(n) => match sig.params.iter().position(|p| p.name == n.name) {
                    Some(i) => i,
                    None => {
                        let names: Vec<&str> = sig.params.iter().map(|p| p.name).collect();
                        self.sink.push(
                            Diagnostic::new(
                                Code::BadArguments,
                                n.span,
                                format!("`{}` has no argument `{}`", sig.name, n.name),
                            )
                            .label("unknown argument")
                            .hint(format!("arguments: {}", names.join(", "))),
                        );
                        return E;
                    }
                },
                None => {
                    let i = pos;
                    pos += 1;
                    i
                }
            };
            if idx >= slots.len() {
                self.arg_count(span, sig.name, &format!("at most {}", sig.params.len()));
                return E;
            }
            slots[idx] = Some(a);
        }
        let mut out = Vec::with_capacity(slots.len());
        let mut failed = false;
        for (p, a) in sig.params.iter().zip(slots) {
            match a {
                Some(a) => {
                    let expect = if p.ty == Ty::Backend {
                        Expect::Backend
                    } else {
                        Expect::Any
                    };
                    let (x, t) = self.expr_expect(&a.value, expect);
                    match self.coerce(x, t, p.ty, a.value.span, None) {
                        Some(x) => out.push(x),
                        None => failed = true,
                    }
                }
                None if p.optional => out.push(Expr::Const(Value::Unset)),
                None => {
                    self.sink.push(
                        Diagnostic::new(
                            Code::BadArguments,
                            func.span,
                            format!("`{}` is missing argument `{}`", sig.name, p.name),
                        )
                        .label(format!("needs `{}` ({})", p.name, p.ty.name())),
                    );
                    failed = true;
                }
            }
        }
        if failed {
            return E;
        }
        (Expr::Call(sig.func, out), sig.ret)
    }

    fn regsub(&mut self, all: bool, args: &[Arg], span: Span) -> (Expr, Ty) {
        let fname = if all { "regsuball" } else { "regsub" };
        if args.len() != 3 {
            self.arg_count(span, fname, "3 (string, regex, replacement)");
            return E;
        }
        let (s, st) = self.expr(&args[0].value);
        let pat = &args[1].value;
        let regex = match &pat.kind {
            ExprKind::Str(p) => match re::compile(p, pat.span) {
                Ok(r) => Some(r),
                Err(d) => {
                    self.sink.push(d);
                    None
                }
            },
            _ => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        pat.span,
                        format!("the regex of `{fname}` must be a string literal"),
                    )
                    .label("expected a literal such as \"^/old/(.*)\""),
                );
                None
            }
        };
        let (r, rt) = self.expr(&args[2].value);
        let s = self.stringify(s, st, args[0].value.span);
        let r = self.stringify(r, rt, args[2].value.span);
        let (Some(s), Some(regex), Some(r)) = (s, regex, r) else {
            return E;
        };
        let replacement = match fold::expr(r) {
            Expr::Const(Value::Str(c)) => Replacement::Const(re::convert_replacement(&c)),
            other => Replacement::Dynamic(Box::new(other)),
        };
        (
            Expr::Regsub {
                subject: Box::new(s),
                regex: Box::new(regex),
                replacement,
                all,
            },
            Ty::Str,
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Any,
    Backend,
    Acl,
}

fn vars_name(scope: Scope, h: &str) -> String {
    format!("{}.http.{h}", scope.as_str())
}
