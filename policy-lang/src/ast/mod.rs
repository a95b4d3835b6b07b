//! The spanned syntax tree, built by `lower.rs` and read by `check/`.

pub(crate) mod lower;

use crate::diagnostics::Span;
use crate::vocab::{ArithOp, CmpOp};

#[derive(Debug, Clone)]
pub(crate) struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct Module {
    pub decls: Vec<Decl>,
}

#[derive(Debug, Clone)]
pub(crate) enum Decl {
    Version { version: String, span: Span },
    Import { name: Ident },
    Include { path: String, span: Span },
    Backend(BackendDef),
    Probe(ProbeDef),
    Plugin(PluginDef),
    Acl(AclDef),
    Sub(SubDef),
}

#[derive(Debug, Clone)]
pub(crate) struct BackendDef {
    pub name: Ident,
    /// `backend NAME none;`
    pub none: bool,
    pub attrs: Vec<Attr>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct ProbeDef {
    pub name: Ident,
    pub attrs: Vec<Attr>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

/// `plugin NAME { .path = "..."; ... }`.
#[derive(Debug, Clone)]
pub(crate) struct PluginDef {
    pub name: Ident,
    pub attrs: Vec<Attr>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct Attr {
    /// Without the leading dot.
    pub name: Ident,
    pub value: AttrValue,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) enum AttrValue {
    Block(Vec<Attr>, Span),
    Strings(Vec<(String, Span)>),
    Expr(Expr),
}

impl AttrValue {
    pub fn span(&self) -> Span {
        match self {
            AttrValue::Block(_, s) => *s,
            AttrValue::Strings(v) => v[0].1.to(v[v.len() - 1].1),
            AttrValue::Expr(e) => e.span,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct AclDef {
    pub name: Ident,
    pub entries: Vec<AclEntry>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct AclEntry {
    pub negated: bool,
    /// Parenthesised: ignored when it does not resolve.
    pub optional: bool,
    pub addr: String,
    pub addr_span: Span,
    pub mask: Option<(u32, Span)>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct SubDef {
    pub name: Ident,
    pub body: Vec<Stmt>,
    #[allow(dead_code)] // whole-declaration span, kept for future diagnostics
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AssignOp {
    Set,
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone)]
pub(crate) enum StmtKind {
    Set {
        target: Ident,
        op: AssignOp,
        value: Expr,
    },
    Unset {
        target: Ident,
        /// Spelled `remove` (Varnish 3).
        legacy: bool,
    },
    If {
        branches: Vec<(Expr, Vec<Stmt>)>,
        otherwise: Option<Vec<Stmt>>,
    },
    Return(Option<ReturnAction>),
    Call(Ident),
    New {
        name: Ident,
        ctor: Expr,
    },
    Block(Vec<Stmt>),
    /// A function call used as a statement: `hash_data(...)`, `std.log(...)`.
    Expr(Expr),
    /// `include "file.vcl";` inside a sub: replaced by the file's statements when loading.
    Include(String),
}

#[derive(Debug, Clone)]
pub(crate) struct ReturnAction {
    pub name: Ident,
    pub args: Option<Vec<Arg>>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
}

#[derive(Debug, Clone)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// A binary operator as written; comparison and arithmetic are the vocabulary's operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Or,
    And,
    Cmp(CmpOp),
    Match,
    NotMatch,
    Arith(ArithOp),
}

impl BinOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Cmp(op) => op.as_str(),
            BinOp::Match => "~",
            BinOp::NotMatch => "!~",
            BinOp::Arith(op) => op.as_str(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum ExprKind {
    Str(String),
    Int(i64),
    Real(f64),
    /// Seconds.
    Duration(f64),
    Bytes(u64),
    Bool(bool),
    /// The bytes `std.blobread("PATH")` read when the policy loaded, as lowercase hex (how a
    /// BLOB travels).
    Blob(String),
    /// A dotted name: variable, backend, ACL, object.
    Name(String),
    Call {
        func: Ident,
        args: Vec<Arg>,
    },
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary {
        op: BinOp,
        op_span: Span,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
}
