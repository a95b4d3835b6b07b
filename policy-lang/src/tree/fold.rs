//! Constant folding over the checked tree.
//!
//! String concatenations of literals, arithmetic and comparisons of constants, `!` of
//! constants and `if` branches with constant conditions.

use std::borrow::Cow;

use super::{Expr, Stmt};
use crate::vocab::{arith, compare, ArithOp, Value, ValueType};

pub(crate) fn stmt(s: Stmt) -> Stmt {
    match s {
        Stmt::SetVar(v, e) => Stmt::SetVar(v, expr(e)),
        Stmt::SetHeader(sc, n, e) => Stmt::SetHeader(sc, n, expr(e)),
        Stmt::If(branches, otherwise) => {
            let mut out = Vec::new();
            for (c, body) in branches {
                let c = expr(c);
                let body: Vec<Stmt> = body.into_iter().map(stmt).collect();
                match &c {
                    Expr::Const(v) if !v.truthy() => continue,
                    Expr::Const(_) if out.is_empty() => return Stmt::Block(body),
                    _ => out.push((c, body)),
                }
            }
            let otherwise: Vec<Stmt> = otherwise.into_iter().map(stmt).collect();
            if out.is_empty() {
                Stmt::Block(otherwise)
            } else {
                Stmt::If(out, otherwise)
            }
        }
        Stmt::HashData(e) => Stmt::HashData(expr(e)),
        Stmt::Synthetic(e) => Stmt::Synthetic(expr(e)),
        Stmt::Ban(e) => Stmt::Ban(expr(e)),
        Stmt::Log(e) => Stmt::Log(expr(e)),
        Stmt::Eval(e) => Stmt::Eval(expr(e)),
        Stmt::Block(b) => Stmt::Block(b.into_iter().map(stmt).collect()),
        Stmt::Timed(subs, s) => Stmt::Timed(subs, Box::new(stmt(*s))),
        other => other,
    }
}

pub(crate) fn expr(e: Expr) -> Expr {
    match e {
        Expr::Concat(parts) => {
            let mut out: Vec<Expr> = Vec::with_capacity(parts.len());
            for p in parts.into_iter().map(expr) {
                if let (Some(Expr::Const(Value::Str(prev))), Expr::Const(Value::Str(s))) =
                    (out.last_mut(), &p)
                {
                    prev.to_mut().push_str(s);
                    continue;
                }
                out.push(p);
            }
            if out.len() == 1 {
                if let Some(Expr::Const(Value::Str(_))) = out.first() {
                    return out.pop().unwrap_or(Expr::Const(Value::Unset));
                }
            }
            if out.is_empty() {
                return Expr::Const(Value::Str(Cow::Borrowed("")));
            }
            Expr::Concat(out)
        }
        Expr::Arith(op, a, b) => {
            let (a, b) = (expr(*a), expr(*b));
            if let (Expr::Const(x), Expr::Const(y)) = (&a, &b) {
                if op != ArithOp::Div && op != ArithOp::Rem {
                    if let Some(v) = arith(op, x, y) {
                        return Expr::Const(v);
                    }
                }
            }
            Expr::Arith(op, Box::new(a), Box::new(b))
        }
        Expr::Cmp(op, a, b) => {
            let (a, b) = (expr(*a), expr(*b));
            if let (Expr::Const(x), Expr::Const(y)) = (&a, &b) {
                return Expr::Const(Value::Bool(compare(op, x, y)));
            }
            match (a, b) {
                (subject, Expr::Const(Value::Str(lit))) if is_str_subject(&subject) => Expr::StrCmp {
                    op,
                    subject: Box::new(subject),
                    lit: lit.into(),
                },
                (Expr::Const(Value::Str(lit)), subject) if is_str_subject(&subject) => Expr::StrCmp {
                    op: op.flipped(),
                    subject: Box::new(subject),
                    lit: lit.into(),
                },
                (a, b) => Expr::Cmp(op, Box::new(a), Box::new(b)),
            }
        }
        Expr::Not(a) => match expr(*a) {
            Expr::Const(v) => Expr::Const(Value::Bool(!v.truthy())),
            a => Expr::Not(Box::new(a)),
        },
        Expr::And(a, b) => match (expr(*a), expr(*b)) {
            (Expr::Const(v), _) if !v.truthy() => Expr::Const(Value::Bool(false)),
            (Expr::Const(_), b) => Expr::Not(Box::new(Expr::Not(Box::new(b)))),
            (a, b) => Expr::And(Box::new(a), Box::new(b)),
        },
        Expr::Or(a, b) => match (expr(*a), expr(*b)) {
            (Expr::Const(v), _) if v.truthy() => Expr::Const(Value::Bool(true)),
            (Expr::Const(_), b) => Expr::Not(Box::new(Expr::Not(Box::new(b)))),
            (a, b) => Expr::Or(Box::new(a), Box::new(b)),
        },
        Expr::Neg(a) => match expr(*a) {
            Expr::Const(Value::Int(i)) => Expr::Const(Value::Int(i.wrapping_neg())),
            Expr::Const(Value::Real(r)) => Expr::Const(Value::Real(-r)),
            Expr::Const(Value::Duration(d)) => Expr::Const(Value::Duration(-d)),
            a => Expr::Neg(Box::new(a)),
        },
        Expr::Match {
            subject,
            matcher,
            negate,
        } => Expr::Match {
            subject: Box::new(expr(*subject)),
            matcher,
            negate,
        },
        Expr::Acl { subject, acl, negate } => Expr::Acl {
            subject: Box::new(expr(*subject)),
            acl,
            negate,
        },
        Expr::Call(f, args) => Expr::Call(f, args.into_iter().map(expr).collect()),
        Expr::Regsub {
            subject,
            regex,
            replacement,
            all,
        } => Expr::Regsub {
            subject: Box::new(expr(*subject)),
            regex,
            replacement,
            all,
        },
        other => other,
    }
}

/// A header, or a variable of type STRING: evaluates to a string or unset.
fn is_str_subject(e: &Expr) -> bool {
    match e {
        Expr::Header(..) => true,
        Expr::Var(v) => v.value_type() == ValueType::Str,
        _ => false,
    }
}
