//! The resolved program tree: what `check` produces and `eval` runs.
//! Variables are [`Var`] slots, headers pre-parsed [`HeaderName`]s, regexes
//! compiled, subs referenced by index.

use http::HeaderName;
use regex::Regex;

use crate::eval::{PluginId, PluginPhase, Scope, Value, Var};
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
        matcher: Matcher,
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
    /// `plugin.request(NAME);` / `plugin.response(NAME);`.
    Plugin(PluginId, PluginPhase),
    Block(Vec<Stmt>),
}

/// A compiled `~` pattern. Literal patterns (`"^/admin"`, `"\\.css$"`,
/// `"wordpress_logged_in"`) skip the regex engine.
#[derive(Debug)]
pub(crate) enum Matcher {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(Box<Regex>),
}

impl Matcher {
    pub fn new(pattern: &str, regex: Regex) -> Matcher {
        match literal_form(pattern) {
            Some((true, lit, true)) => Matcher::Exact(lit),
            Some((true, lit, false)) => Matcher::Prefix(lit),
            Some((false, lit, true)) => Matcher::Suffix(lit),
            Some((false, lit, false)) => Matcher::Contains(lit),
            None => Matcher::Regex(Box::new(regex)),
        }
    }

    #[inline]
    pub fn is_match(&self, s: &str) -> bool {
        match self {
            Matcher::Exact(l) => s == l,
            Matcher::Prefix(l) => s.starts_with(l.as_str()),
            Matcher::Suffix(l) => s.ends_with(l.as_str()),
            Matcher::Contains(l) => s.contains(l.as_str()),
            Matcher::Regex(r) => r.is_match(s),
        }
    }
}

/// `(anchored at start, literal, anchored at end)` when the pattern is a
/// plain (possibly escaped) literal.
fn literal_form(p: &str) -> Option<(bool, String, bool)> {
    let (start, p) = match p.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, p),
    };
    let mut lit = String::with_capacity(p.len());
    let mut chars = p.chars().peekable();
    let mut end = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_punctuation() => lit.push(e),
                _ => return None,
            },
            '$' if chars.peek().is_none() => end = true,
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => return None,
            c => lit.push(c),
        }
    }
    Some((start, lit, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str) -> Matcher {
        Matcher::new(p, Regex::new(p).unwrap())
    }

    #[test]
    fn literal_fast_paths_agree_with_regex() {
        for (p, kind) in [
            ("^/admin", "prefix"),
            ("\\.css$", "suffix"),
            ("^/exact$", "exact"),
            ("wordpress_logged_in", "contains"),
            ("(?i)\\.css$", "regex"),
            ("^/a.b", "regex"),
            ("\\d+", "regex"),
        ] {
            let matcher = m(p);
            let got = match matcher {
                Matcher::Exact(_) => "exact",
                Matcher::Prefix(_) => "prefix",
                Matcher::Suffix(_) => "suffix",
                Matcher::Contains(_) => "contains",
                Matcher::Regex(_) => "regex",
            };
            assert_eq!(got, kind, "{p}");
            let re = Regex::new(p).unwrap();
            for s in [
                "/admin",
                "/admin/x",
                "/x.css",
                "/exact",
                "a wordpress_logged_in=1",
                "/a.b",
                "/axb",
                "12",
                "",
            ] {
                assert_eq!(matcher.is_match(s), re.is_match(s), "{p} on {s}");
            }
        }
    }
}
