//! The checked, typed tree: what `check` produces, `compile` folds and `eval` runs.
//!
//! Declarations and resolved sub bodies.
//!
//! Variables are [`Var`] slots, headers pre-parsed [`HeaderName`]s, regexes compiled, subs
//! referenced by index.

mod decl;
pub(crate) mod fold;
pub(crate) mod shard;

pub(crate) use decl::{Acl, AclName, AclRule, Director, DirectorKind, Member};
pub use decl::{BackendDecl, BackendTls, CaFile, OnError, PluginDecl, PluginIsolation, ProbeDecl};

use http::HeaderName;

use crate::diagnostics::{FileId, Span};
use crate::vocab::pattern::Pattern;
use crate::vocab::{
    Action, ArithOp, BackendId, CmpOp, ConnectionValue, PluginId, PluginPhase, Scope, Sub, Value, ValueType,
    Var,
};

/// A policy that passed every check: its declarations and the resolved body of each sub.
pub(crate) struct Checked {
    pub backends: Vec<BackendDecl>,
    pub default_backend: Option<BackendId>,
    pub acls: Vec<Acl>,
    pub directors: Vec<Director>,
    /// `.path` still as written; `finish` resolves it against the file.
    pub plugins: Vec<PluginDecl>,
    /// The file that declares each plugin (parallel to `plugins`).
    pub plugin_files: Vec<FileId>,
    pub bodies: Vec<Vec<Stmt>>,
    pub methods: [Option<usize>; Sub::ALL.len()],
    pub user_methods: u16,
    /// The body of the builtin's `vcl_builtin_recv`, when no user sub extends it.
    pub builtin_recv: Option<usize>,
    /// The body of the builtin's `vcl_builtin_backend_response`, when no user sub extends it.
    pub builtin_backend_response: Option<usize>,
    /// Whether a vmod with per-task state (`cookie`, `var`) is imported.
    pub task_vmods: bool,
    /// The largest `std.cache_req_body` size.
    pub req_body_limit: Option<u64>,
    /// Whether `std.rollback(req)` is called.
    pub rolls_back: bool,
    /// Whether `std.rollback(bereq)` is called.
    pub rolls_back_bereq: bool,
    /// The `directors.shard_param()` sets as `vcl_init` leaves them, by id.
    pub shard_params: Vec<shard::ShardParams>,
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
    Random,
    Now,
    Round,
    Ban,
    Fnmatch,
    Strftime,
    Real2Integer,
    Real2Time,
    Time2Integer,
    Time2Real,
    /// `proxy.*()` / `tls.*()`.
    Connection(ConnectionValue),
    /// `cookie.*` (Varnish's vmod_cookie).
    Cookie(CookieFn),
    /// `var.*` (varnish-modules' vmod_var).
    Var(VarFn),
    /// `header.*` (varnish-modules' vmod_header).
    Header(HeaderFn),
    /// `blob.*` (Varnish's vmod_blob).
    Blob(BlobFn),
    /// `shard.key(STRING)`: the 32-bit key the shard director hashes strings to.
    ShardKey,
    /// `std.cache_req_body(BYTES)`: whether the request body is buffered (within the size).
    CacheReqBody,
    /// `std.syntax(REAL)`: whether the VCL syntax is at least that version.
    Syntax,
    /// `std.ban_error()`: why the task's last `std.ban()` failed, or `""`.
    BanError,
    /// `std.late_100_continue(BOOL)`, `std.set_ip_tos(INT)`: accepted, nothing to do (see
    /// docs/policy-language.md).
    Accepted,
    /// `bodyaccess.*` (varnish-modules' vmod_bodyaccess).
    Bodyaccess(BodyFn),
    /// `xkey.purge` / `xkey.softpurge` (varnish-modules' vmod_xkey): a value with an effect on
    /// the cache, run where the expression is evaluated.
    Xkey(XkeyFn),
    /// `std.rollback(req|bereq)`: the request back as received, or the backend request as built.
    Rollback,
    /// `std.port(IP)` of one of the connection's addresses (`client.ip`, `server.ip`, ...).
    Port(Var),
    /// `std.file_exists(STRING)`: asked of the runtime at each call.
    FileExists,
    /// `purge.hard()` / `purge.soft()` (Varnish's vmod_purge): every variant of the request's
    /// cache key, in `vcl_hit` / `vcl_miss`.
    Purge(PurgeFn),
    /// `h2.is()` (Varnish's vmod_h2): whether the request came over HTTP/2.
    H2Is,
    /// `unix.*` (Varnish's vmod_unix): the peer's credentials on a Unix socket listener.
    Unix(UnixFn),
    /// `p.set(...)` of shard parameter set `p` on the backend side or in `vcl_pipe`: for this
    /// backend request only (the arguments as `.backend()`'s: by, key, key_blob, alt, warmup,
    /// rampup, healthy).
    ShardParamSet(usize),
    /// `p.clear()` there: back to what `vcl_init` left.
    ShardParamClear(usize),
    /// `p.get_by()`, `p.get_key()`, ...: what a shard director using set `p` would use.
    ShardParamGet(usize, shard::ParamField),
    /// `std.timed_call(SUB)`: the seconds the sub took, which [`Stmt::Timed`] measured; the
    /// argument counts the statement's timings from the last (1 is the last).
    TimedCall,
}

impl Func {
    /// Whether it is a VOID function, run for its effect on the request or the task's state.
    pub fn is_effect(self) -> bool {
        match self {
            Func::Cookie(f) => !matches!(
                f,
                CookieFn::FormatDate
                    | CookieFn::Get
                    | CookieFn::GetRe
                    | CookieFn::GetString
                    | CookieFn::Isset
            ),
            Func::Var(f) => matches!(f, VarFn::Set(_) | VarFn::GlobalSet | VarFn::Clear),
            Func::Header(f) => f != HeaderFn::Get,
            Func::Bodyaccess(f) => matches!(f, BodyFn::Hash | BodyFn::Log),
            Func::Accepted | Func::Rollback | Func::ShardParamSet(_) | Func::ShardParamClear(_) => true,
            _ => false,
        }
    }
}

/// `purge.hard()` removes; `purge.soft()` makes stale (the cache's soft purge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PurgeFn {
    Hard,
    Soft,
}

/// What `unix.*` asks of the peer process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnixFn {
    User,
    Group,
    Uid,
    Gid,
}

/// The functions of `cookie`, which edit the task's cookie jar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CookieFn {
    Clean,
    Delete,
    Filter,
    FilterRe,
    Keep,
    KeepRe,
    FormatDate,
    Get,
    GetRe,
    GetString,
    Isset,
    Parse,
    Set,
}

/// The functions of `var`: task variables of one type each, and global strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarFn {
    /// `var.set` (STRING), `var.set_int`, `var.set_real`, ...
    Set(ValueType),
    /// `var.get` (STRING), `var.get_int`, `var.get_real`, ...
    Get(ValueType),
    GlobalSet,
    GlobalGet,
    Clear,
}

/// The functions of `header`, which see each value (line) of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderFn {
    Append,
    Copy,
    Get,
    Remove,
}

/// The functions of `bodyaccess`, reading the body `std.cache_req_body` buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFn {
    Hash,
    Len,
    Rematch,
    Log,
}

/// The functions of `xkey`: purges by surrogate key, each returning how many objects it purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XkeyFn {
    Purge,
    Softpurge,
}

/// The functions of `blob`. A BLOB value is carried as a string of lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlobFn {
    Decode,
    Encode,
    Transcode,
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
    /// A REGEX argument of a vmod function, compiled when the policy loads.
    Pattern(Box<Pattern>),
    Var(Var),
    Header(Scope, HeaderName),
    /// String concatenation; each part is stringified.
    Concat(Vec<Expr>),
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// A comparison of a string header or variable with a string literal
    /// (`req.http.host == "example.com"`), made by `fold` from `Cmp`: the
    /// subject is read as a `&str` (unset reads as `""`) and compared with
    /// no `Value` in between.
    StrCmp {
        op: CmpOp,
        subject: Box<Expr>,
        lit: Box<str>,
    },
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
        regex: Box<Pattern>,
        replacement: Replacement,
        all: bool,
    },
    /// `director.backend()`.
    Director(usize, Option<Box<Expr>>),
    /// `shard.backend(...)`.
    Shard(Box<shard::ShardPick>),
    /// `p.use()` of shard parameter set `p`: only ever a `param` argument, taken apart there.
    ShardParam(usize),
}

#[derive(Debug)]
pub(crate) enum Ret {
    Const(Action),
    Synth(Expr, Option<Expr>),
    Error(Expr, Option<Expr>),
    Fail(Option<Expr>),
    /// `return (pass(DURATION))`: a duration expression.
    HitForPass(Expr),
}

#[derive(Debug)]
pub(crate) enum Stmt {
    SetVar(Var, Expr),
    UnsetVar(Var),
    SetHeader(Scope, HeaderName, Expr),
    UnsetHeader(Scope, HeaderName),
    If(Vec<(Expr, Vec<Stmt>)>, Vec<Stmt>),
    /// `return (...)`, with where it is written (for tracing: [`Context::returned`](crate::Context::returned)).
    Return(Ret, Span),
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
    /// A statement whose expressions use `std.timed_call(SUB)`: the subs (by index) run first,
    /// in order, each timed, then the statement, reading the timings ([`Func::TimedCall`]).
    Timed(Vec<usize>, Box<Stmt>),
}

/// A compiled `~` pattern. Literal patterns (`"^/admin"`, `"\\.css$"`,
/// `"wordpress_logged_in"`) and anchored alternations of literals
/// (`"(?i)\\.(jpg|png|gif)$"`, `"^/(wp-admin|wp-login)"`) skip the regex
/// engine; the results are the regex's, exactly.
#[derive(Debug)]
pub(crate) enum Matcher {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    /// One of several literals at the start, the end or as the whole
    /// subject. With `ci` (`(?i)`), the literals are ASCII and lowercase, and
    /// a subject that is not all ASCII goes to `regex` (Unicode case folding
    /// maps some non-ASCII characters to ASCII letters: `K` (Kelvin) is `k`).
    Literals {
        anchor: Anchor,
        lits: Box<[Box<str>]>,
        ci: bool,
        regex: Box<Pattern>,
    },
    /// `[[:upper:]]` / `[A-Z]`: any ASCII upper-case letter.
    AsciiUpper,
    Regex(Box<Pattern>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anchor {
    Exact,
    Prefix,
    Suffix,
}

impl Matcher {
    pub fn new(pattern: &str, regex: Pattern) -> Matcher {
        if regex.is_pcre() {
            return Matcher::Regex(Box::new(regex));
        }
        if matches!(pattern, "[[:upper:]]" | "[A-Z]") {
            return Matcher::AsciiUpper;
        }
        match literal_form(pattern) {
            Some((true, lit, true)) => return Matcher::Exact(lit),
            Some((true, lit, false)) => return Matcher::Prefix(lit),
            Some((false, lit, true)) => return Matcher::Suffix(lit),
            Some((false, lit, false)) => return Matcher::Contains(lit),
            None => {}
        }
        match alternation_form(pattern) {
            Some((anchor, lits, ci)) => Matcher::Literals {
                anchor,
                lits,
                ci,
                regex: Box::new(regex),
            },
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
            Matcher::Literals {
                anchor,
                lits,
                ci,
                regex,
            } => {
                if *ci && !s.is_ascii() {
                    return regex.is_match(s);
                }
                let s = s.as_bytes();
                lits.iter().any(|l| {
                    let l = l.as_bytes();
                    let part = match anchor {
                        Anchor::Exact if s.len() == l.len() => s,
                        Anchor::Prefix if s.len() >= l.len() => &s[..l.len()],
                        Anchor::Suffix if s.len() >= l.len() => &s[s.len() - l.len()..],
                        _ => return false,
                    };
                    if *ci {
                        part.eq_ignore_ascii_case(l)
                    } else {
                        part == l
                    }
                })
            }
            Matcher::AsciiUpper => s.bytes().any(|b| b.is_ascii_uppercase()),
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

/// `(anchor, literals, case-insensitive)`.
type Alternation = (Anchor, Box<[Box<str>]>, bool);

/// `[(?i)][^]PREFIX(A|B|...)SUFFIX[$]` (the group may be `(?:...)`), anchored
/// at one end at least, every part a plain literal: the anchor, the literals
/// `PREFIX + A + SUFFIX`, ... and whether it is case-insensitive. `None`
/// for anything else, and for `(?i)` with non-ASCII literals.
fn alternation_form(p: &str) -> Option<Alternation> {
    let (ci, p) = match p.strip_prefix("(?i)") {
        Some(rest) => (true, rest),
        None => (false, p),
    };
    let (start, p) = match p.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, p),
    };
    let (p, end) = match p.strip_suffix('$') {
        // `\$` is a literal dollar, not the anchor.
        Some(rest) if !ends_with_odd_backslashes(rest) => (rest, true),
        _ => (p, false),
    };
    let anchor = match (start, end) {
        (true, true) => Anchor::Exact,
        (true, false) => Anchor::Prefix,
        (false, true) => Anchor::Suffix,
        (false, false) => return None,
    };
    let (prefix, group, suffix) = match (p.find('('), p.rfind(')')) {
        (Some(open), Some(close)) if open < close => {
            let group = &p[open + 1..close];
            (
                plain_literal(&p[..open])?,
                group.strip_prefix("?:").unwrap_or(group),
                plain_literal(&p[close + 1..])?,
            )
        }
        (None, None) => (String::new(), p, String::new()),
        _ => return None,
    };
    if group.contains('|') && !p.contains('(') {
        // `^a|b$` is `(^a)|(b$)`, not an alternation between anchors.
        return None;
    }
    let mut lits = Vec::new();
    for alt in group.split('|') {
        let mut lit = prefix.clone();
        lit.push_str(&plain_literal(alt)?);
        lit.push_str(&suffix);
        if ci {
            if !lit.is_ascii() {
                return None;
            }
            lit.make_ascii_lowercase();
        }
        lits.push(lit.into_boxed_str());
    }
    Some((anchor, lits.into_boxed_slice(), ci))
}

/// A literal with `\`-escaped punctuation and no other metacharacter.
fn plain_literal(p: &str) -> Option<String> {
    let mut lit = String::with_capacity(p.len());
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_punctuation() => lit.push(e),
                _ => return None,
            },
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => return None,
            c => lit.push(c),
        }
    }
    Some(lit)
}

fn ends_with_odd_backslashes(p: &str) -> bool {
    p.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;

    fn m(p: &str) -> Matcher {
        Matcher::new(p, Pattern::new(p, Regex::new(p).ok()).unwrap())
    }

    fn kind(m: &Matcher) -> &'static str {
        match m {
            Matcher::Exact(_) => "exact",
            Matcher::Prefix(_) => "prefix",
            Matcher::Suffix(_) => "suffix",
            Matcher::Contains(_) => "contains",
            Matcher::Literals { .. } => "literals",
            Matcher::AsciiUpper => "upper",
            Matcher::Regex(_) => "regex",
        }
    }

    const HAYSTACKS: &[&str] = &[
        "/admin",
        "/admin/x",
        "/ADMIN/x",
        "/x.css",
        "/x.CSS",
        "/x.Css?v=1",
        "/exact",
        "/EXACT",
        "a wordpress_logged_in=1",
        "/a.b",
        "/axb",
        "12",
        "",
        "/img/a.png",
        "/img/a.PnG",
        "/img/a.jpeg",
        "/img/a.jpg",
        "/img/a.gif.bak",
        "/wp-admin/",
        "/wp-login.php",
        "/wp-",
        "wp-admin",
        ".png",
        "png",
        "/x.\u{212A}",
        "/x.k",
        "/x.K",
        "/ſ.css",
        "/x.ſ",
        "/x.s",
        "/ü.png",
        "/ü.PNG",
        "/a$",
        "/Host",
        "host",
        "HOST",
        "hoSt.example.com",
        "ÄÖ",
        "a|b",
        "^a",
    ];

    #[test]
    fn literal_fast_paths_agree_with_regex() {
        for (p, want) in [
            ("^/admin", "prefix"),
            ("\\.css$", "suffix"),
            ("^/exact$", "exact"),
            ("wordpress_logged_in", "contains"),
            ("(?i)\\.css$", "literals"),
            ("(?i)^/exact$", "literals"),
            ("(?i)\\.(jpg|jpeg|png|gif)$", "literals"),
            ("\\.(jpg|png)$", "literals"),
            ("^/(wp-admin|wp-login)", "literals"),
            ("^/(?:wp-admin|wp-login\\.php)$", "literals"),
            ("(?i)\\.(k|s)$", "literals"),
            ("(?i)^/(ü)", "regex"),
            ("\\.(ü|png)$", "literals"),
            ("(a|b)", "regex"),
            ("^a|b$", "regex"),
            ("\\$$", "suffix"),
            ("a\\$", "contains"),
            ("(?i)a\\$", "regex"),
            ("^(a(b)|c)", "regex"),
            ("^(a)(b)", "regex"),
            ("(?i)\\.(a|)$", "literals"),
            ("[[:upper:]]", "upper"),
            ("[A-Z]", "upper"),
            ("(?i)[A-Z]", "regex"),
            ("^/a.b", "regex"),
            ("\\d+", "regex"),
        ] {
            let matcher = m(p);
            assert_eq!(kind(&matcher), want, "{p}");
            let re = Regex::new(p).unwrap();
            for s in HAYSTACKS {
                assert_eq!(matcher.is_match(s), re.is_match(s), "{p} on {s:?}");
            }
        }
    }

    #[test]
    fn generated_patterns_agree_with_regex() {
        // Alternations built from pieces, against haystacks built from the same pieces.
        let pieces = ["a", "B", "\\.", "png", "PNG", "/", "ß", "k", "\\$", ""];
        let hay = [
            "a", "b", "B", ".", "png", "PNG", "/", "ß", "K", "k", "\u{212A}", "$", "x",
        ];
        for (i, a) in pieces.iter().enumerate() {
            for b in &pieces[i..] {
                for (ci, start, end) in [
                    ("", "^", ""),
                    ("", "", "$"),
                    ("(?i)", "^", "$"),
                    ("(?i)", "", "$"),
                    ("(?i)", "^", ""),
                ] {
                    let p = format!("{ci}{start}/({a}|{b}){end}");
                    let Ok(re) = Regex::new(&p) else { continue };
                    let matcher = Matcher::new(&p, Pattern::new(&p, Some(re.clone())).unwrap());
                    for x in hay {
                        for y in hay {
                            let s = format!("/{x}{y}");
                            assert_eq!(matcher.is_match(&s), re.is_match(&s), "{p} on {s:?}");
                            let s = format!("{x}/{y}");
                            assert_eq!(matcher.is_match(&s), re.is_match(&s), "{p} on {s:?}");
                        }
                    }
                }
            }
        }
    }
}
