//! The resolved program tree: what `check` produces and `eval` runs.
//! Variables are [`Var`] slots, headers pre-parsed [`HeaderName`]s, regexes
//! compiled, subs referenced by index.

use http::HeaderName;
use regex::Regex;

use crate::eval::{Scope, Value, Var};
use crate::sub::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// Built-in functions that return a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    ToLower,
    ToUpper,
    Integer,
    Real,
    Duration,
    Bytes,
    Ip,
    Time,
    Healthy,
    Querysort,
    Strstr,
    Port,
    Random,
    Now,
    Round,
    Ban,
}

#[derive(Debug)]
pub(crate) enum Replacement {
    /// Already in `regex` syntax (`${1}`), `$` escaped.
    Const(String),
    /// VCL syntax (`\1`), converted per evaluation.
    Dynamic(Box<Expr>),
}

#[derive(Debug)]
pub(crate) enum Expr {
    Const(Value<'static>),
    Var(Var),
    Header(Scope, HeaderName),
    /// String concatenation; each part is stringified.
    Concat(Vec<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    Match {
        subject: Box<Expr>,
        regex: Box<Regex>,
        negate: bool,
    },
    Acl {
        subject: Box<Expr>,
        acl: usize,
        negate: bool,
    },
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Call(Func, Vec<Expr>),
    Regsub {
        subject: Box<Expr>,
        regex: Box<Regex>,
        replacement: Replacement,
        all: bool,
    },
    /// `director.backend()`.
    Director(usize, Option<Box<Expr>>),
}

#[derive(Debug)]
pub(crate) enum Ret {
    Const(Action),
    Synth(Expr, Option<Expr>),
    Error(Expr, Option<Expr>),
    Fail(Option<Expr>),
}

#[derive(Debug)]
pub(crate) enum Stmt {
    SetVar(Var, Expr),
    UnsetVar(Var),
    SetHeader(Scope, HeaderName, Expr),
    UnsetHeader(Scope, HeaderName),
    If(Vec<(Expr, Vec<Stmt>)>, Vec<Stmt>),
    Return(Ret),
    /// Bare `return;` leaving a custom sub.
    ReturnSub,
    Call(usize),
    HashData(Expr),
    Synthetic(Expr),
    Ban(Expr),
    Log(Expr),
    /// `std.collect(req.http.X)`: join every value into one header.
    Collect(Scope, HeaderName),
    /// A call evaluated for its effect.
    Eval(Expr),
    Block(Vec<Stmt>),
}
