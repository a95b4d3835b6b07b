//! Ban expressions (`ban("obj.http.X-Url ~ ^/news && obj.status == 200")`): parsing and matching.
//!
//! Shared by VCL `ban()` and the admin API.
//!
//! Grammar (Varnish's, core subset): `COND ( && COND )*`, where
//! `COND = FIELD OP ARG`; FIELD is `obj.http.NAME`, `obj.status`, `req.url`
//! or `req.http.NAME`; OP is `==`, `!=`, `~`, `!~` (and `<`, `>`, `<=`, `>=`
//! for `obj.status`); ARG is a bare word or a `"..."` / `'...'` string.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::vocab::pattern::Pattern;
use http::HeaderName;

use crate::diagnostics::{Code, Diagnostic, Diagnostics, FileId, SourceMap, Span};

/// What a ban is tested against: a cached object and the request that
/// created it.
pub trait BanContext {
    fn obj_header(&self, name: &HeaderName) -> Option<Cow<'_, str>>;
    fn obj_status(&self) -> u16;
    fn req_url(&self) -> Option<Cow<'_, str>>;
    fn req_header(&self, name: &HeaderName) -> Option<Cow<'_, str>>;
}

#[derive(Debug, Clone)]
enum Field {
    ObjHeader(HeaderName),
    ObjStatus,
    ReqUrl,
    ReqHeader(HeaderName),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Match,
    NotMatch,
    Lt,
    Gt,
    Le,
    Ge,
}

#[derive(Debug, Clone)]
enum Arg {
    Str(String),
    Regex(Pattern),
    Int(i64),
}

#[derive(Debug, Clone)]
struct Cond {
    field: Field,
    op: Op,
    arg: Arg,
}

/// A parsed ban: every condition must hold for an object to be banned.
#[derive(Debug, Clone)]
pub struct BanExpr {
    text: Arc<str>,
    conds: Vec<Cond>,
}

impl BanExpr {
    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the ban only looks at the object (`obj.*`), so a background
    /// "lurker" can apply it without a request.
    pub fn is_lurker_friendly(&self) -> bool {
        self.conds
            .iter()
            .all(|c| matches!(c.field, Field::ObjHeader(_) | Field::ObjStatus))
    }

    pub fn matches(&self, ctx: &dyn BanContext) -> bool {
        self.conds.iter().all(|c| {
            if let Field::ObjStatus = c.field {
                let s = i64::from(ctx.obj_status());
                let Arg::Int(v) = c.arg else { return false };
                return match c.op {
                    Op::Eq => s == v,
                    Op::Ne => s != v,
                    Op::Lt => s < v,
                    Op::Gt => s > v,
                    Op::Le => s <= v,
                    Op::Ge => s >= v,
                    Op::Match | Op::NotMatch => false,
                };
            }
            let value = match &c.field {
                Field::ObjHeader(h) => ctx.obj_header(h),
                Field::ReqUrl => ctx.req_url(),
                Field::ReqHeader(h) => ctx.req_header(h),
                Field::ObjStatus => None,
            };
            let v = value.as_deref().unwrap_or("");
            match (&c.arg, c.op) {
                (Arg::Regex(r), Op::Match) => r.is_match(v),
                (Arg::Regex(r), Op::NotMatch) => !r.is_match(v),
                (Arg::Str(s), Op::Eq) => v == s,
                (Arg::Str(s), Op::Ne) => v != s,
                _ => false,
            }
        })
    }
}

impl fmt::Display for BanExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses a ban expression; errors point into the expression text.
pub fn parse_ban(expr: &str) -> Result<BanExpr, Diagnostics> {
    let mut p = BanParser {
        s: expr,
        pos: 0,
        errors: Vec::new(),
    };
    let mut conds = Vec::new();
    loop {
        match p.cond() {
            Some(c) => conds.push(c),
            None => break,
        }
        p.ws();
        if p.pos >= expr.len() {
            break;
        }
        if expr[p.pos..].starts_with("&&") {
            p.pos += 2;
            continue;
        }
        p.err(p.pos, p.pos + 1, "expected `&&` or end of ban expression");
        break;
    }
    if p.errors.is_empty() && conds.is_empty() {
        p.err(0, 0, "empty ban expression");
    }
    if p.errors.is_empty() {
        Ok(BanExpr {
            text: Arc::from(expr),
            conds,
        })
    } else {
        let mut sm = SourceMap::new();
        sm.add("<ban>", expr);
        Err(Diagnostics::new(Arc::new(sm), p.errors))
    }
}

struct BanParser<'a> {
    s: &'a str,
    pos: usize,
    errors: Vec<Diagnostic>,
}

impl<'a> BanParser<'a> {
    fn err(&mut self, start: usize, end: usize, msg: &str) {
        self.errors.push(
            Diagnostic::new(Code::Syntax, Span::new(FileId(0), start, end.min(self.s.len())), msg)
                .label("here")
                .hint("ban syntax: `obj.http.NAME ~ \"regex\" && obj.status == 200`; fields: obj.http.*, obj.status, req.url, req.http.*"),
        );
    }

    fn ws(&mut self) {
        while self.s[self.pos..].starts_with(|c: char| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn word(&mut self) -> (usize, &'a str) {
        self.ws();
        let s: &'a str = self.s;
        let start = self.pos;
        let rest = &s[start..];
        let end = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
        self.pos += end;
        (start, &s[start..start + end])
    }

    fn cond(&mut self) -> Option<Cond> {
        let (fstart, f) = self.word();
        let field = if let Some(h) = f.strip_prefix("obj.http.") {
            Field::ObjHeader(self.header(h, fstart)?)
        } else if let Some(h) = f.strip_prefix("req.http.") {
            Field::ReqHeader(self.header(h, fstart)?)
        } else {
            match f {
                "obj.status" => Field::ObjStatus,
                "req.url" => Field::ReqUrl,
                "" => {
                    self.err(fstart, fstart, "expected a field such as `obj.http.X-Url`");
                    return None;
                }
                _ => {
                    self.err(fstart, fstart + f.len(), &format!("unknown ban field `{f}`"));
                    return None;
                }
            }
        };
        let (ostart, o) = self.word();
        let op = match o {
            "==" => Op::Eq,
            "!=" => Op::Ne,
            "~" => Op::Match,
            "!~" => Op::NotMatch,
            "<" => Op::Lt,
            ">" => Op::Gt,
            "<=" => Op::Le,
            ">=" => Op::Ge,
            _ => {
                self.err(
                    ostart,
                    ostart + o.len().max(1),
                    "expected an operator (`==`, `!=`, `~`, `!~`)",
                );
                return None;
            }
        };
        self.ws();
        let astart = self.pos;
        let s: &'a str = self.s;
        let rest = &s[astart..];
        let arg_text: String = if let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
            match rest[1..].find(q) {
                Some(end) => {
                    self.pos += end + 2;
                    rest[1..end + 1].to_string()
                }
                None => {
                    self.err(astart, self.s.len(), "unterminated string");
                    return None;
                }
            }
        } else {
            let (_, w) = self.word();
            if w.is_empty() {
                self.err(astart, astart, "expected a value");
                return None;
            }
            w.to_string()
        };
        let arg = match (&field, op) {
            (Field::ObjStatus, Op::Match | Op::NotMatch) => {
                self.err(
                    ostart,
                    ostart + o.len(),
                    "`obj.status` cannot be matched with a regex",
                );
                return None;
            }
            (Field::ObjStatus, _) => match arg_text.parse() {
                Ok(i) => Arg::Int(i),
                Err(_) => {
                    self.err(astart, self.pos, "expected a status code");
                    return None;
                }
            },
            // Varnish's ban regexes are PCRE2, as its VCL's.
            (_, Op::Match | Op::NotMatch) => match crate::vocab::regex::compile(&arg_text, Span::default()) {
                Ok(r) => Arg::Regex(r),
                Err(_) => {
                    self.err(astart, self.pos, "regex does not compile");
                    return None;
                }
            },
            (_, Op::Eq | Op::Ne) => Arg::Str(arg_text),
            _ => {
                self.err(
                    ostart,
                    ostart + o.len(),
                    "ordering operators only apply to `obj.status`",
                );
                return None;
            }
        };
        Some(Cond { field, op, arg })
    }

    fn header(&mut self, h: &str, at: usize) -> Option<HeaderName> {
        match HeaderName::from_bytes(h.as_bytes()) {
            Ok(n) => Some(n),
            Err(_) => {
                self.err(at, at + h.len(), "invalid header name");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Obj;
    impl BanContext for Obj {
        fn obj_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
            (name == "x-url").then_some(Cow::Borrowed("/news/1"))
        }
        fn obj_status(&self) -> u16 {
            200
        }
        fn req_url(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed("/news/1"))
        }
        fn req_header(&self, _: &HeaderName) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed("example.com"))
        }
    }

    #[test]
    fn parses_and_matches() {
        let b = parse_ban("obj.http.X-Url ~ ^/news && obj.status == 200").unwrap();
        assert!(b.matches(&Obj));
        assert!(b.is_lurker_friendly());
        let b = parse_ban("req.url == \"/other\"").unwrap();
        assert!(!b.matches(&Obj));
        let b = parse_ban("req.http.host == example.com && obj.status >= 500").unwrap();
        assert!(!b.matches(&Obj));
    }

    #[test]
    fn reports_errors() {
        let e = parse_ban("obj.foo == 1").unwrap_err();
        assert!(e.render().contains("unknown ban field"), "{}", e.render());
        assert!(parse_ban("").is_err());
        assert!(parse_ban("req.url ~ \"(\"").is_err());
    }
}
