//! Statements: `set`, `unset`, `if`, `call`, `new` and blocks.
//!
//! Each is checked against the variables of the subs it runs in.

use http::HeaderName;

use super::{Expect, Lowerer};
use crate::ast::{self, AssignOp, ExprKind, StmtKind};
use crate::check::ty::Ty;
use crate::check::vars::{self, VarRef};
use crate::check::SymKind;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Span};
use crate::tree::{Expr, Func, Stmt};
use crate::vocab::sub::mask;
use crate::vocab::{ArithOp, ValueType, Var};

impl Lowerer<'_> {
    // === statements ===

    pub(crate) fn body(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            if let Some(s) = self.stmt(s) {
                out.push(s);
            }
        }
        out
    }

    pub(super) fn stmt(&mut self, s: &ast::Stmt) -> Option<Stmt> {
        // The `std.timed_call`s of this statement (not of the statements nested in it).
        let outer = std::mem::take(&mut self.timed);
        let lowered = self.untimed_stmt(s);
        let timed = std::mem::replace(&mut self.timed, outer);
        match lowered {
            Some(lowered) if !timed.is_empty() => Some(Stmt::Timed(timed, Box::new(lowered))),
            other => other,
        }
    }

    fn untimed_stmt(&mut self, s: &ast::Stmt) -> Option<Stmt> {
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
                for (i, (c, b)) in branches.iter().enumerate() {
                    let (timed, cond_span) = (self.timed.len(), c.span);
                    let c = self.cond(c);
                    if i > 0 && self.timed.len() > timed {
                        // Its sub would have to run before the `if`, whichever branch is taken.
                        self.sink.push(
                            Diagnostic::new(
                                Code::Unsupported,
                                cond_span,
                                "`std.timed_call` in an `elsif` condition is not supported",
                            )
                            .label("timed here")
                            .hint("time the sub before the `if`: `set req.http.X-T = std.timed_call(s);`, then test the header"),
                        );
                    }
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

    pub(super) fn resolve_target(&mut self, target: &ast::Ident) -> Option<VarRef> {
        match vars::resolve(&target.name) {
            Some(v) => Some(v),
            None => {
                self.unknown_variable(&target.name, target.span);
                None
            }
        }
    }

    pub(super) fn header_name(&mut self, name: &str, span: Span) -> Option<HeaderName> {
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

    pub(super) fn set(&mut self, target: &ast::Ident, op: AssignOp, value: &ast::Expr) -> Option<Stmt> {
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
            VarRef::Var(v) => {
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

    pub(super) fn bad_assign_op(&mut self, op: AssignOp, target: &ast::Ident, ty: &str) {
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

    pub(super) fn unset(&mut self, target: &ast::Ident) -> Option<Stmt> {
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
        }
    }
}
