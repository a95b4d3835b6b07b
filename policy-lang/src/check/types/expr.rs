//! Expressions: literals, names, operators, and the conversions between types.

use std::borrow::Cow;
use std::net::IpAddr;

use super::{Expect, Lowerer, E};
use crate::ast::{self, BinOp, ExprKind};
use crate::check::ty::Ty;
use crate::check::vars::{self, VarRef};
use crate::check::SymKind;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Span};
use crate::tree::{fold, Expr, Matcher};
use crate::vocab::regex as re;
use crate::vocab::{ArithOp, BackendId, CmpOp, Value, ValueType};

impl Lowerer<'_> {
    // === expressions ===

    pub(super) fn cond(&mut self, e: &ast::Expr) -> Expr {
        let (x, t) = self.expr(e);
        match t {
            Ty::Acl | Ty::Probe | Ty::Blob | Ty::Void => {
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

    pub(super) fn mismatch(&mut self, span: Span, want: &str, got: Ty, hint: Option<String>) {
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
    pub(super) fn stringify(&mut self, e: Expr, t: Ty, span: Span) -> Option<Expr> {
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
    pub(super) fn coerce(
        &mut self,
        e: Expr,
        t: Ty,
        want: Ty,
        span: Span,
        target: Option<&str>,
    ) -> Option<Expr> {
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

    pub(crate) fn expr(&mut self, e: &ast::Expr) -> (Expr, Ty) {
        self.expr_expect(e, Expect::Any)
    }

    pub(super) fn expr_expect(&mut self, e: &ast::Expr, expect: Expect) -> (Expr, Ty) {
        match &e.kind {
            ExprKind::Str(s) => (Expr::Const(Value::Str(Cow::Owned(s.clone()))), Ty::Str),
            ExprKind::Int(i) => (Expr::Const(Value::Int(*i)), Ty::Int),
            ExprKind::Real(r) => (Expr::Const(Value::Real(*r)), Ty::Real),
            ExprKind::Duration(d) => (Expr::Const(Value::Duration(*d)), Ty::Duration),
            ExprKind::Bytes(b) => (Expr::Const(Value::Bytes(*b)), Ty::Bytes),
            ExprKind::Bool(b) => (Expr::Const(Value::Bool(*b)), Ty::Bool),
            ExprKind::Blob(hex) => (Expr::Const(Value::Str(Cow::Owned(hex.clone()))), Ty::Blob),
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
    pub(super) fn read(&mut self, v: VarRef, span: Span) -> (Expr, Ty) {
        match v {
            VarRef::Var(var) => (Expr::Var(var), Ty::of(var.value_type())),
            VarRef::Header(scope, h) => match self.header_name(&h, span) {
                Some(h) => (Expr::Header(scope, h), Ty::Str),
                None => E,
            },
        }
    }

    pub(super) fn name(&mut self, n: &str, span: Span, expect: Expect) -> (Expr, Ty) {
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
            Some(SymKind::ShardParam(_)) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        span,
                        format!("`{n}` is a shard parameter set, not a value"),
                    )
                    .label("a `directors.shard_param()` set")
                    .hint(format!("give it to a shard director with `param={n}.use()`")),
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

    pub(super) fn unknown_variable(&mut self, n: &str, span: Span) {
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

    pub(super) fn binary(
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
            BinOp::Cmp(cop) => {
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
            BinOp::Arith(aop) => {
                let (l, lt) = self.expr(lhs);
                let (r, rt) = self.expr(rhs);
                if lt == Ty::Err || rt == Ty::Err {
                    return E;
                }
                if aop == ArithOp::Add && (lt == Ty::Str || rt == Ty::Str) {
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
}
