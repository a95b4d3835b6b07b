//! Rewrite rules -> VCL: each directive of the LSCache subset of mod_rewrite read into a
//! [`Rules`] set, then written out as the VCL 4.1 policy that behaves the same.
//!
//! The rules run in a custom sub called from `vcl_recv`; what they decide for the cache is
//! carried in `X-Rewrite-*` request headers (LiteSpeed passes `E=` variables to the origin as
//! environment; here the origin sees them as headers), which `vcl_recv` first removes from
//! what the client sent, and which `vcl_hash`, `vcl_backend_response` and `vcl_synth` act on.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::parse::{Line, Word};
use crate::diagnostics::{Code, Diagnostic, FileId, Sink, SourceFile, Span};
use crate::vocab::regex;

/// The request headers the rules decide through (removed from the client's request first).
const CACHE_CONTROL: &str = "X-Rewrite-Cache-Control";
const CACHE_VARY: &str = "X-Rewrite-Cache-Vary";
const CACHE_TAG: &str = "X-Rewrite-Cache-Tag";
const ESI: &str = "X-Rewrite-Esi";
const NO_VARY: &str = "X-Rewrite-No-Vary";
const LOCATION: &str = "X-Rewrite-Location";
const REDIRECT: &str = "X-Rewrite-Redirect";

/// The part of the URL a rule's pattern sees: the path without its leading `/` and without
/// the query (a per-directory rule of the document root's `.htaccess`).
const RULE_SUBJECT: &str = r#"regsub(req.url, "^/?([^?]*).*$", "\1")"#;
/// `%{QUERY_STRING}`: empty when the URL has none.
const QUERY_STRING: &str = r#"regsub(req.url, "^[^?]*\??", "")"#;
/// The TLS test behind `%{HTTPS}`: edgecache's own TLS, or a load balancer's PROXY header.
const IS_HTTPS: &str = "(tls.is_tls() || proxy.is_ssl())";
/// The TTL that `ignoreRespCacheCtrl on` gives without `expireInSeconds` (edgecache's
/// `--default-ttl`).
const DEFAULT_EXPIRE: u64 = 120;

/// A piece of a test string or substitution.
#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    /// `$N`: group N of the rule's pattern.
    RuleGroup(u8),
    /// `%N`: group N of the rule's last condition.
    CondGroup(u8),
    /// `%{VAR}` as a VCL string expression.
    Var(String),
    /// `%{HTTPS}`, which VCL has as a BOOL: only a condition's whole test string.
    Https,
}

#[derive(Debug, Clone)]
enum CondTest {
    Regex(String),
    Equals(String),
}

#[derive(Debug, Clone)]
struct Cond {
    test: Vec<Piece>,
    pattern: CondTest,
    negated: bool,
    nocase: bool,
    or_next: bool,
    span: Span,
}

/// What a rule does when it matches.
#[derive(Debug, Clone, Default)]
struct Actions {
    /// `E=Cache-Control:max-age=N|no-cache|private|public`, the last one given.
    cache: Option<String>,
    esi: Option<bool>,
    no_vary: bool,
    vary_cookies: Vec<String>,
    tags: Vec<Vec<Piece>>,
    purges: Vec<String>,
    target: Target,
    qsa: bool,
    qsd: bool,
    /// `F` (403) or `G` (410).
    refuse: Option<u16>,
    last: bool,
    skip: usize,
}

#[derive(Debug, Clone, Default)]
enum Target {
    /// `-`: the URL is left as it is.
    #[default]
    Keep,
    Rewrite(Vec<Piece>),
    Redirect(Vec<Piece>, u16),
}

#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    negated: bool,
    conds: Vec<Cond>,
    actions: Actions,
    /// `file:line: the directive`, written above the rule's VCL.
    origin: String,
}

/// LiteSpeed's cache switches (`None`: not given, edgecache's own behaviour).
#[derive(Debug, Clone, Default)]
struct Switches {
    lookup: Option<bool>,
    enable: Option<bool>,
    query_string: Option<bool>,
    request_cookie: Option<bool>,
    response_cookie: Option<bool>,
    ignore_request_cc: Option<bool>,
    ignore_response_cc: Option<bool>,
    expire: Option<u64>,
    stale: Option<u64>,
}

/// Everything the file says.
#[derive(Debug, Default)]
struct Rules {
    engine: bool,
    base: String,
    rules: Vec<Rule>,
    switches: Switches,
}

/// Reads `lines` of file `name` (`text`) into the VCL that behaves as they do; `None` when a
/// diagnostic in `sink` is an error.
pub(crate) fn lower(file: FileId, source: &SourceFile, lines: &[Line], sink: &mut Sink) -> Option<String> {
    let mut reader = Reader {
        source,
        name: &source.name,
        text: &source.text,
        sink,
        rules: Rules {
            base: "/".to_string(),
            ..Rules::default()
        },
        conds: Vec::new(),
        sections: Vec::new(),
        failed: false,
        first_rule: Span::new(file, 0, 0),
    };
    for line in lines {
        reader.line(line);
    }
    reader.finish();
    let Reader { rules, failed, .. } = reader;
    (!failed).then(|| write_vcl(&source.name, &rules))
}

/// An open `<Section>`: its name, where, and whether its lines are read.
struct Section {
    name: Word,
    read: bool,
}

struct Reader<'a> {
    source: &'a SourceFile,
    name: &'a str,
    text: &'a str,
    sink: &'a mut Sink,
    rules: Rules,
    /// `RewriteCond`s waiting for their `RewriteRule`.
    conds: Vec<Cond>,
    sections: Vec<Section>,
    failed: bool,
    /// Where the first `RewriteRule` is (for the warning when the engine is off).
    first_rule: Span,
}

impl Reader<'_> {
    fn error(&mut self, d: Diagnostic) {
        self.failed |= d.is_error();
        self.sink.push(d);
    }

    fn line(&mut self, line: &Line) {
        let skipping = self.sections.iter().any(|s| !s.read);
        match line {
            Line::Open { name, arg, span } => self.open(name, arg.as_ref(), *span, skipping),
            Line::Close { name, span } => self.close(name, *span),
            Line::Directive { .. } if skipping => {}
            Line::Directive { name, args, span } => self.directive(name, args, *span),
        }
    }

    fn open(&mut self, name: &Word, arg: Option<&Word>, span: Span, skipping: bool) {
        let module = arg.map_or("", |a| a.text.as_str());
        let read = match name.text.to_ascii_lowercase().as_str() {
            "ifmodule" => match module.to_ascii_lowercase().as_str() {
                "litespeed" | "mod_rewrite.c" | "mod_rewrite" => Some(true),
                // The modules edgecache stands for are there: a negated test is false.
                "!litespeed" | "!mod_rewrite.c" | "!mod_rewrite" => Some(false),
                _ => None,
            },
            _ => None,
        };
        if read.is_none() && !skipping {
            let what = match arg {
                Some(arg) => format!("<{} {}>", name.text, arg.text),
                None => format!("<{}>", name.text),
            };
            self.error(
                Diagnostic::new(Code::Unsupported, span, format!("`{what}` is not read by edgecache"))
                    .label("its lines are not checked")
                    .hint("only `<IfModule LiteSpeed>` and `<IfModule mod_rewrite.c>` blocks are read; move what the origin server needs (headers, expiry, PHP settings) to its own configuration, and the cache rules out of the block"),
            );
        }
        self.sections.push(Section {
            name: name.clone(),
            read: read.unwrap_or(false),
        });
    }

    fn close(&mut self, name: &Word, span: Span) {
        match self.sections.pop() {
            Some(open) if open.name.text.eq_ignore_ascii_case(&name.text) => {}
            Some(open) => {
                let message = format!("`</{}>` closes `<{}>`", name.text, open.name.text);
                self.error(
                    Diagnostic::new(Code::Syntax, span, message)
                        .secondary(open.name.span, "opened here")
                        .label(format!("`</{}>` expected", open.name.text)),
                );
            }
            None => self.error(
                Diagnostic::new(Code::Syntax, span, format!("`</{}>` closes nothing", name.text))
                    .label("no section is open"),
            ),
        }
    }

    fn finish(&mut self) {
        if let Some(cond) = self.conds.first() {
            let span = cond.span;
            self.error(
                Diagnostic::new(Code::Syntax, span, "`RewriteCond` with no `RewriteRule` after it")
                    .label("conditions apply to the next rule")
                    .hint("add the `RewriteRule` these conditions guard, or remove them"),
            );
        }
        if let Some(open) = self.sections.pop() {
            let message = format!("`<{}>` is never closed", open.name.text);
            self.error(
                Diagnostic::new(Code::Syntax, open.name.span, message).label(format!(
                    "`</{}>` expected before the end of the file",
                    open.name.text
                )),
            );
        }
        if !self.rules.engine && !self.rules.rules.is_empty() {
            self.sink.push(
                Diagnostic::new(Code::NoEffect, self.first_rule, "the rewrite rules are not applied")
                    .label("`RewriteEngine` is not `on`")
                    .hint("add `RewriteEngine on` (as in Apache and LiteSpeed, the last `RewriteEngine` of the file decides)"),
            );
            self.rules.rules.clear();
        }
    }
}

/// Whether `word` is `on` / `off` (LiteSpeed also writes `1` / `0`).
fn switch_value(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "on" | "1" | "yes" => Some(true),
        "off" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// The hint for a directive edgecache does not read.
fn unsupported_hint(name: &str) -> &'static str {
    match name {
        "rewritemap" => "RewriteMap is server configuration Apache reads at start; write the mapping out as `RewriteRule`s, or move to VCL (`edgecache check --explain FILE`) and use a table there",
        "rewriteoptions" => "edgecache reads one rules file, with nothing to inherit: remove `RewriteOptions`",
        "php_value" | "php_flag" | "php_admin_value" | "php_admin_flag" => "PHP settings belong to the origin's PHP (php.ini, the PHP-FPM pool or LSAPI); edgecache does not run PHP",
        _ => "edgecache reads `RewriteEngine`, `RewriteBase`, `RewriteCond`, `RewriteRule` and LiteSpeed's cache switches (`CacheLookup`, `enableCache`, `expireInSeconds`, `maxStaleAge`, `qsCache`, `reqCookieCache`, `respCookieCache`, `ignoreReqCacheCtrl`, `ignoreRespCacheCtrl`); leave the rest to the origin server's configuration",
    }
}

impl Reader<'_> {
    fn directive(&mut self, name: &Word, args: &[Word], span: Span) {
        let lower = name.text.to_ascii_lowercase();
        match lower.as_str() {
            "rewriteengine" => {
                if let Some(on) = self.one_switch(name, args, span) {
                    self.rules.engine = on;
                }
            }
            "rewritebase" => {
                if let [base] = args {
                    if base.text.starts_with('/') {
                        let mut path = base.text.clone();
                        if !path.ends_with('/') {
                            path.push('/');
                        }
                        self.rules.base = path;
                    } else {
                        self.error(
                            Diagnostic::new(Code::Syntax, base.span, "`RewriteBase` takes a URL path")
                                .label("does not start with `/`")
                                .hint("for example `RewriteBase /blog/`"),
                        );
                    }
                } else {
                    self.arity(name, span, "RewriteBase /PATH/");
                }
            }
            "rewritecond" => self.cond(name, args, span),
            "rewriterule" => self.rule(name, args, span),
            "cachelookup" => self.switch(name, args, span, |s| &mut s.lookup),
            "enablecache" => self.switch(name, args, span, |s| &mut s.enable),
            "qscache" => self.switch(name, args, span, |s| &mut s.query_string),
            "reqcookiecache" => self.switch(name, args, span, |s| &mut s.request_cookie),
            "respcookiecache" => self.switch(name, args, span, |s| &mut s.response_cookie),
            "ignorereqcachectrl" => self.switch(name, args, span, |s| &mut s.ignore_request_cc),
            "ignorerespcachectrl" => self.switch(name, args, span, |s| &mut s.ignore_response_cc),
            "expireinseconds" | "maxstaleage" => {
                let seconds = match args {
                    [value] => value.text.parse::<u64>().ok(),
                    _ => None,
                };
                match seconds {
                    Some(seconds) if lower == "expireinseconds" => self.rules.switches.expire = Some(seconds),
                    Some(seconds) => self.rules.switches.stale = Some(seconds),
                    None => self.arity(name, span, &format!("{} SECONDS", name.text)),
                }
            }
            _ => {
                let message = format!("`{}` is not a directive edgecache reads", name.text);
                self.error(
                    Diagnostic::new(Code::Unsupported, name.span, message)
                        .label("not in the rewrite subset")
                        .hint(unsupported_hint(&lower)),
                );
            }
        }
    }

    /// The text of `span`, as written.
    fn written(&self, span: Span) -> &str {
        &self.text[span.start as usize..span.end as usize]
    }

    fn arity(&mut self, name: &Word, span: Span, usage: &str) {
        self.error(
            Diagnostic::new(
                Code::Syntax,
                span,
                format!("`{}` is not written as edgecache reads it", name.text),
            )
            .label("wrong arguments")
            .hint(format!("write `{usage}`")),
        );
    }

    fn one_switch(&mut self, name: &Word, args: &[Word], span: Span) -> Option<bool> {
        let value = match args {
            [value] => switch_value(&value.text),
            _ => None,
        };
        if value.is_none() {
            self.arity(name, span, &format!("{} on|off", name.text));
        }
        value
    }

    fn switch(
        &mut self,
        name: &Word,
        args: &[Word],
        span: Span,
        slot: fn(&mut Switches) -> &mut Option<bool>,
    ) {
        if let Some(on) = self.one_switch(name, args, span) {
            *slot(&mut self.rules.switches) = Some(on);
        }
    }

    /// The pieces of a test string or substitution, or `None` after reporting what is wrong.
    fn pieces(&mut self, word: &Word) -> Option<Vec<Piece>> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let bytes = word.text.as_bytes();
        let mut i = 0;
        let at = |i: usize, len: usize| {
            Span::new(
                word.span.file,
                word.span.start as usize + i,
                word.span.start as usize + i + len,
            )
        };
        // A quoted word's offsets are shifted by its opening quote.
        let shift = usize::from(self.text.as_bytes().get(word.span.start as usize) == Some(&b'"'));
        let at = |i: usize, len: usize| at(i + shift, len);
        while i < bytes.len() {
            let c = bytes[i];
            let next = bytes.get(i + 1).copied();
            match (c, next) {
                (b'\\', Some(escaped @ (b'$' | b'%' | b'\\'))) => {
                    text.push(escaped as char);
                    i += 2;
                }
                (b'$' | b'%', Some(digit @ b'0'..=b'9')) => {
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    let group = digit - b'0';
                    pieces.push(if c == b'$' {
                        Piece::RuleGroup(group)
                    } else {
                        Piece::CondGroup(group)
                    });
                    i += 2;
                }
                (b'%', Some(b'{')) => {
                    let Some(len) = word.text[i..].find('}') else {
                        self.error(
                            Diagnostic::new(Code::Syntax, at(i, 2), "`%{` is not closed")
                                .label("`}` expected")
                                .hint("variables are written `%{NAME}`, e.g. `%{HTTP_HOST}`"),
                        );
                        return None;
                    };
                    let var = &word.text[i + 2..i + len];
                    let piece = self.variable(var, at(i, len + 1))?;
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(piece);
                    i += len + 1;
                }
                (b'$', Some(b'{')) => {
                    self.error(
                        Diagnostic::new(
                            Code::Unsupported,
                            at(i, 2),
                            "`${map:key}` looks up a RewriteMap, which edgecache does not read",
                        )
                        .label("map lookup")
                        .hint(unsupported_hint("rewritemap")),
                    );
                    return None;
                }
                _ => {
                    let ch = word.text[i..].chars().next().expect("inside the word");
                    text.push(ch);
                    i += ch.len_utf8();
                }
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Some(pieces)
    }

    /// `%{NAME}` as a VCL string expression.
    fn variable(&mut self, name: &str, span: Span) -> Option<Piece> {
        let expr = match name {
            "REQUEST_URI" => r#"regsub(req.url, "\?.*$", "")"#.to_string(),
            "QUERY_STRING" => QUERY_STRING.to_string(),
            "REQUEST_METHOD" => "req.method".to_string(),
            "HTTP_HOST" => "req.http.Host".to_string(),
            "HTTP_COOKIE" => "req.http.Cookie".to_string(),
            "HTTP_USER_AGENT" => "req.http.User-Agent".to_string(),
            "HTTP_REFERER" => "req.http.Referer".to_string(),
            "HTTP_ACCEPT" => "req.http.Accept".to_string(),
            "REMOTE_ADDR" => r#"("" + client.ip)"#.to_string(),
            "HTTPS" => return Some(Piece::Https),
            _ => match name.strip_prefix("HTTP:") {
                Some(header) if is_token(header) => format!("req.http.{header}"),
                _ => {
                    let hint = if matches!(name, "REQUEST_FILENAME" | "DOCUMENT_ROOT" | "SCRIPT_FILENAME") {
                        "edgecache has no file system to map URLs to: test `%{REQUEST_URI}` instead"
                            .to_string()
                    } else {
                        "edgecache knows REQUEST_URI, QUERY_STRING, REQUEST_METHOD, HTTP_HOST, HTTP_COOKIE, HTTP_USER_AGENT, HTTP_REFERER, HTTP_ACCEPT, HTTP:Header-Name, HTTPS and REMOTE_ADDR".to_string()
                    };
                    self.error(
                        Diagnostic::new(
                            Code::UnknownVariable,
                            span,
                            format!("`%{{{name}}}` is not a variable edgecache has"),
                        )
                        .label("unknown variable")
                        .hint(hint),
                    );
                    return None;
                }
            },
        };
        Some(Piece::Var(expr))
    }

    /// Checks `pattern` (with `(?i)` for `NC`) as the VCL checker would; the diagnostic points
    /// at the word in this file.
    fn regex(&mut self, pattern: &str, word: &Word) -> bool {
        match regex::compile(pattern, word.span) {
            Ok(_) => true,
            Err(d) => {
                self.error(d.hint("patterns are PCRE2, as Apache's and LiteSpeed's"));
                false
            }
        }
    }

    /// `[A,B=C,...]`: each flag's name (lower case), its value and its span.
    fn flags(&mut self, word: Option<&Word>) -> Option<Vec<(String, String, Span)>> {
        let Some(word) = word else { return Some(Vec::new()) };
        let Some(inner) = word.text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
            self.error(
                Diagnostic::new(Code::Syntax, word.span, "flags are written in brackets")
                    .label("`[FLAG,FLAG=VALUE]` expected")
                    .hint("for example `[E=Cache-Control:max-age=45,L]`"),
            );
            return None;
        };
        let base = word.span.start as usize + 1;
        let mut flags = Vec::new();
        let mut start = 0;
        let mut quoted = false;
        let mut split = Vec::new();
        for (i, c) in inner.char_indices() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    split.push((start, i));
                    start = i + 1;
                }
                _ => {}
            }
        }
        split.push((start, inner.len()));
        for (from, to) in split {
            let flag = inner[from..to].trim().replace('"', "");
            let span = Span::new(word.span.file, base + from, base + to);
            let (name, value) = match flag.split_once('=') {
                Some((name, value)) => (name.to_ascii_lowercase(), value.to_string()),
                None => (flag.to_ascii_lowercase(), String::new()),
            };
            flags.push((name, value, span));
        }
        Some(flags)
    }

    fn cond(&mut self, name: &Word, args: &[Word], span: Span) {
        let (test, pattern, flags) = match args {
            [test, pattern] => (test, pattern, None),
            [test, pattern, flags] => (test, pattern, Some(flags)),
            _ => return self.arity(name, span, "RewriteCond TESTSTRING CONDPATTERN [NC,OR]"),
        };
        let Some(flags) = self.flags(flags) else { return };
        let (mut nocase, mut or_next) = (false, false);
        for (flag, _, flag_span) in flags {
            match flag.as_str() {
                "nc" | "nocase" => nocase = true,
                "or" | "ornext" => or_next = true,
                _ => self.error(
                    Diagnostic::new(
                        Code::Unsupported,
                        flag_span,
                        format!(
                            "`{}` is not a condition flag edgecache reads",
                            self.written(flag_span)
                        ),
                    )
                    .label("unknown flag")
                    .hint("a `RewriteCond` takes `NC` (case-insensitive) and `OR` (or the next condition)"),
                ),
            }
        }
        let (negated, body) = match pattern.text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, pattern.text.as_str()),
        };
        let cond_test = if let Some(value) = body.strip_prefix('=') {
            // As Apache: `=""` is the empty string.
            CondTest::Equals(if value == "\"\"" {
                String::new()
            } else {
                value.to_string()
            })
        } else if matches!(body, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge") {
            return self.error(
                Diagnostic::new(Code::Unsupported, pattern.span, "integer comparisons are not supported")
                    .label("integer comparison")
                    .hint("use a regex, e.g. `^[0-9]{1,2}$` for numbers below 100, or move to VCL (`edgecache check --explain FILE`)"),
            );
        } else if body.starts_with('-')
            && body.len() > 1
            && body[1..].chars().all(|c| c.is_ascii_alphabetic())
        {
            let message = format!("`{body}` tests the file system, which edgecache does not have");
            return self.error(
                Diagnostic::new(Code::Unsupported, pattern.span, message)
                    .label("file test")
                    .hint("edgecache is a proxy: it cannot see the origin's files. The usual `-f`/`-d` guard (\"unless the file exists\") can be dropped when the rule's pattern only matches what the origin generates; or match the paths with a pattern on `%{REQUEST_URI}`"),
            );
        } else if body.starts_with('<') || body.starts_with('>') {
            return self.error(
                Diagnostic::new(
                    Code::Unsupported,
                    pattern.span,
                    "lexical comparisons are not supported",
                )
                .label("`<` / `>` comparison")
                .hint("use a regex or `=STRING`"),
            );
        } else {
            let source = if nocase {
                format!("(?i){body}")
            } else {
                body.to_string()
            };
            if !self.regex(&source, pattern) {
                return;
            }
            CondTest::Regex(source)
        };
        let Some(test_pieces) = self.pieces(test) else {
            return;
        };
        if let Some(group) = test_pieces.iter().find_map(|p| match p {
            Piece::CondGroup(n) => Some(*n),
            _ => None,
        }) {
            return self.error(
                Diagnostic::new(
                    Code::Unsupported,
                    test.span,
                    format!("`%{group}` in a test string is not supported"),
                )
                .label("a condition's group, read by another condition")
                .hint(
                    "use `%N` in the `RewriteRule`'s substitution, which reads the last condition's groups",
                ),
            );
        }
        if test_pieces.iter().any(|p| matches!(p, Piece::Https)) && test_pieces.len() != 1 {
            return self.error(
                Diagnostic::new(
                    Code::Unsupported,
                    test.span,
                    "`%{HTTPS}` must be the whole test string",
                )
                .label("joined with other text")
                .hint("test `%{HTTPS}` in a condition of its own"),
            );
        }
        self.conds.push(Cond {
            test: test_pieces,
            pattern: cond_test,
            negated,
            nocase,
            or_next,
            span,
        });
    }

    fn rule(&mut self, name: &Word, args: &[Word], span: Span) {
        let conds = std::mem::take(&mut self.conds);
        if self.rules.rules.is_empty() {
            self.first_rule = span;
        }
        let (pattern, target, flags) = match args {
            [pattern, target] => (pattern, target, None),
            [pattern, target, flags] => (pattern, target, Some(flags)),
            _ => return self.arity(name, span, "RewriteRule PATTERN TARGET [FLAGS]"),
        };
        let Some(flags) = self.flags(flags) else { return };
        let (negated, body) = match pattern.text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, pattern.text.as_str()),
        };
        let mut actions = Actions::default();
        let mut nocase = false;
        let mut redirect = None;
        let mut ok = true;
        for (flag, value, flag_span) in flags {
            match flag.as_str() {
                "nc" | "nocase" => nocase = true,
                "l" | "last" | "end" => actions.last = true,
                "ne" | "noescape" => {}
                "qsa" | "qsappend" => actions.qsa = true,
                "qsd" | "qsdiscard" => actions.qsd = true,
                "f" | "forbidden" => actions.refuse = Some(403),
                "g" | "gone" => actions.refuse = Some(410),
                "s" | "skip" => match value.parse::<usize>() {
                    Ok(n) if n > 0 => actions.skip = n,
                    _ => {
                        ok = false;
                        self.error(
                            Diagnostic::new(Code::Syntax, flag_span, "`S` takes how many rules to skip")
                                .label("a number from 1 expected")
                                .hint("for example `[S=2]`"),
                        );
                    }
                },
                "r" | "redirect" => {
                    let status = if value.is_empty() {
                        Some(302)
                    } else {
                        value.parse::<u16>().ok()
                    };
                    match status {
                        Some(status @ (301 | 302 | 303 | 307 | 308)) => redirect = Some(status),
                        _ => {
                            ok = false;
                            self.error(
                                Diagnostic::new(Code::Syntax, flag_span, format!("`R={value}` is not a redirect status edgecache sends"))
                                    .label("301, 302, 303, 307 or 308 expected")
                                    .hint("`[R=301,L]` for a permanent redirect, `[R=302,L]` (or `[R,L]`) for a temporary one"),
                            );
                        }
                    }
                }
                "e" | "env" => ok &= self.env(&value, flag_span, &mut actions),
                "p" | "proxy" => {
                    ok = false;
                    self.error(
                        Diagnostic::new(Code::Unsupported, flag_span, "`[P]` proxies to another server, which rewrite rules cannot do here")
                            .label("proxy flag")
                            .hint("declare the other server as a backend in VCL and route to it (`edgecache check --explain FILE` writes these rules as VCL to start from)"),
                    );
                }
                "or" | "ornext" => {
                    ok = false;
                    self.error(
                        Diagnostic::new(Code::Syntax, flag_span, "`OR` belongs to a `RewriteCond`")
                            .label("not a rule flag")
                            .hint("put `[OR]` on the condition to be or-ed with the next one"),
                    );
                }
                _ => {
                    ok = false;
                    self.error(
                        Diagnostic::new(
                            Code::Unsupported,
                            flag_span,
                            format!("`{}` is not a rule flag edgecache reads", self.written(flag_span)),
                        )
                        .label("unknown flag")
                        .hint("rule flags: E=VAR:VALUE, NC, L, END, S=N, R=301|302, QSA, QSD, NE, F, G"),
                    );
                }
            }
        }
        let source = if nocase {
            format!("(?i){body}")
        } else {
            body.to_string()
        };
        ok &= self.regex(&source, pattern);
        if target.text != "-" {
            let Some(pieces) = self.pieces(target) else { return };
            let absolute = target.text.starts_with("http://") || target.text.starts_with("https://");
            let mut pieces = pieces;
            if !absolute && !target.text.starts_with('/') && !target.text.starts_with('%') {
                pieces.insert(0, Piece::Text(self.rules.base.clone()));
            }
            if pieces.iter().any(|p| matches!(p, Piece::Https)) {
                ok = false;
                self.error(
                    Diagnostic::new(
                        Code::Unsupported,
                        target.span,
                        "`%{HTTPS}` in a substitution is not supported",
                    )
                    .label("only in a condition")
                    .hint(
                        "test `%{HTTPS}` in a `RewriteCond` and write `https://` or `http://` in each rule",
                    ),
                );
            }
            if negated && pieces.iter().any(|p| matches!(p, Piece::RuleGroup(_))) {
                ok = false;
                self.error(
                    Diagnostic::new(Code::Syntax, target.span, "`$N` of a negated pattern")
                        .label("a pattern with `!` captures nothing")
                        .hint("remove `!` from the pattern, or the `$N` from the substitution"),
                );
            }
            if pieces.iter().any(|p| matches!(p, Piece::CondGroup(_))) && !groups_readable(&conds) {
                ok = false;
                self.error(
                    Diagnostic::new(Code::Unsupported, target.span, "`%N` needs the rule's last condition to be a regex that matched")
                        .label("no condition's groups to read")
                        .hint("`%N` reads the last `RewriteCond`, which must be a regex, not negated, and not or-ed with the one before"),
                );
            }
            actions.target = match (redirect, absolute) {
                (Some(status), _) => Target::Redirect(pieces, status),
                (None, true) => Target::Redirect(pieces, 302),
                (None, false) => Target::Rewrite(pieces),
            };
        } else if redirect.is_some() {
            ok = false;
            self.error(
                Diagnostic::new(Code::Syntax, target.span, "a redirect needs a target")
                    .label("`-` keeps the URL")
                    .hint("write where to redirect to, e.g. `RewriteRule ^old$ /new [R=301,L]`"),
            );
        }
        if !ok {
            return;
        }
        let (line, _) = self.source.line_col(span.start);
        let written = self.text[span.start as usize..span.end as usize].replace("\\\n", " ");
        self.rules.rules.push(Rule {
            pattern: source,
            negated,
            conds,
            actions,
            origin: format!(
                "{}:{line}: {}",
                self.name,
                written.split_whitespace().collect::<Vec<_>>().join(" ")
            ),
        });
    }

    /// `E=VAR:VALUE`: LiteSpeed's cache variables; other variables are for the origin's
    /// scripts and are reported as doing nothing here.
    fn env(&mut self, value: &str, span: Span, actions: &mut Actions) -> bool {
        let (var, val) = value.split_once(':').unwrap_or((value, ""));
        match var.to_ascii_lowercase().as_str() {
            "cache-control" => match val.to_ascii_lowercase().as_str() {
                v @ ("no-cache" | "private" | "public") => actions.cache = Some(v.to_string()),
                "no-vary" => actions.no_vary = true,
                "esi=on" => actions.esi = Some(true),
                "esi=off" => actions.esi = Some(false),
                v => match v.strip_prefix("max-age=").map(str::parse::<u64>) {
                    Some(Ok(seconds)) => actions.cache = Some(format!("max-age={seconds}")),
                    _ => {
                        self.error(
                            Diagnostic::new(Code::Unsupported, span, format!("`Cache-Control:{val}` is not a LiteSpeed cache setting edgecache knows"))
                                .label("unknown cache setting")
                                .hint("`E=Cache-Control:` takes max-age=SECONDS, no-cache, private, public, no-vary, esi=on or esi=off"),
                        );
                        return false;
                    }
                },
            },
            "cache-vary" => {
                let names: Vec<String> = val.split([',', ' ']).filter(|n| !n.is_empty()).map(str::to_string).collect();
                if names.is_empty() || !names.iter().all(|n| is_token(n)) {
                    self.error(
                        Diagnostic::new(Code::Syntax, span, "`Cache-Vary` takes cookie names")
                            .label("cookie names expected")
                            .hint("for example `[E=Cache-Vary:lang]`; quote a list: `[E=\"Cache-Vary:lang,currency\"]`"),
                    );
                    return false;
                }
                actions.vary_cookies.extend(names);
            }
            "cache-tag" => {
                let word = Word { text: val.to_string(), span };
                let Some(pieces) = self.pieces(&word) else { return false };
                actions.tags.push(pieces);
            }
            "cache-purge" => {
                for item in val.split([',', ' ']).filter(|i| !i.is_empty()) {
                    let known = item == "*" || item.starts_with('/') || item.strip_prefix("tag=").is_some_and(|t| !t.is_empty());
                    if !known || item.contains('"') {
                        self.error(
                            Diagnostic::new(Code::Syntax, span, format!("`{item}` is not something `Cache-Purge` purges"))
                                .label("a purge target expected")
                                .hint("`Cache-Purge` takes `tag=NAME` (the objects tagged NAME), a URL path such as `/index.php`, or `*` (everything)"),
                        );
                        return false;
                    }
                    actions.purges.push(item.to_string());
                }
            }
            _ => self.sink.push(
                Diagnostic::new(Code::NoEffect, span, format!("`E={var}` sets a variable for the origin's scripts"))
                    .label("ignored")
                    .hint("edgecache passes the request's headers to the origin, not environment variables; only LiteSpeed's Cache-Control, Cache-Vary, cache-tag and Cache-Purge act here"),
            ),
        }
        true
    }
}

/// Whether a rule with `conds` may read `%N`: its last condition is a regex that matched.
fn groups_readable(conds: &[Cond]) -> bool {
    let before_or = conds.len() >= 2 && conds[conds.len() - 2].or_next;
    matches!(
        conds.last(),
        Some(Cond {
            pattern: CondTest::Regex(_),
            negated: false,
            ..
        })
    ) && !before_or
}

/// An HTTP token (header or cookie name).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A VCL string literal of `s`: `"..."`, or pieces joined around each `"` (which no VCL string
/// literal spells in `"..."`).
fn lit(s: &str) -> String {
    s.split('"')
        .map(|part| format!("\"{part}\""))
        .collect::<Vec<_>>()
        .join(r#" + {"""} + "#)
}

/// A regex literal (VCL takes a literal there): `"..."`, or `{"..."}` when it holds a `"`.
fn regex_lit(s: &str) -> String {
    if s.contains('"') {
        format!("{{\"{s}\"}}")
    } else {
        format!("\"{s}\"")
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        403 => "Forbidden",
        _ => "Gone",
    }
}

/// Writes the VCL of `rules`, remembering the vmods it uses.
struct Writer {
    out: String,
    imports: BTreeSet<&'static str>,
}

impl Writer {
    fn line(&mut self, depth: usize, text: &str) {
        let _ = writeln!(self.out, "{:width$}{text}", "", width = depth * 4);
    }

    /// The STRING expression of `pieces` in `rule`.
    fn expr(&mut self, pieces: &[Piece], rule: Option<&Rule>) -> String {
        if pieces.is_empty() {
            return "\"\"".to_string();
        }
        let mut merged: Vec<Piece> = Vec::with_capacity(pieces.len());
        for piece in pieces {
            match (merged.last_mut(), piece) {
                (Some(Piece::Text(before)), Piece::Text(text)) => before.push_str(text),
                _ => merged.push(piece.clone()),
            }
        }
        let parts: Vec<String> = merged
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => lit(text),
                Piece::Var(expr) => expr.clone(),
                Piece::RuleGroup(n) => {
                    let pattern = rule.map_or("", |r| r.pattern.as_str());
                    format!(
                        r#"regsub({RULE_SUBJECT}, {}, "\{n}")"#,
                        regex_lit(&format!("(?s)^.*?(?:{pattern}).*$"))
                    )
                }
                Piece::CondGroup(n) => {
                    let Some(Cond {
                        test,
                        pattern: CondTest::Regex(pattern),
                        ..
                    }) = rule.and_then(|r| r.conds.last())
                    else {
                        unreachable!("checked by groups_readable")
                    };
                    let subject = self.expr(test, None);
                    format!(
                        r#"regsub({subject}, {}, "\{n}")"#,
                        regex_lit(&format!("(?s)^.*?(?:{pattern}).*$"))
                    )
                }
                Piece::Https => unreachable!("%{{HTTPS}} is only a condition's whole test string"),
            })
            .collect();
        parts.join(" + ")
    }

    fn cond(&mut self, cond: &Cond, rule: &Rule) -> String {
        if let [Piece::Https] = cond.test.as_slice() {
            let matches = |value: &str| {
                let hit = match &cond.pattern {
                    CondTest::Regex(p) => regex::compile(p, cond.span).is_ok_and(|p| p.is_match(value)),
                    CondTest::Equals(v) if cond.nocase => v.eq_ignore_ascii_case(value),
                    CondTest::Equals(v) => v == value,
                };
                hit != cond.negated
            };
            self.imports.extend(["tls", "proxy"]);
            return match (matches("on"), matches("off")) {
                (true, true) => "true".to_string(),
                (false, false) => "false".to_string(),
                (true, false) => IS_HTTPS.to_string(),
                (false, true) => format!("!{IS_HTTPS}"),
            };
        }
        let subject = self.expr(&cond.test, Some(rule));
        match &cond.pattern {
            CondTest::Regex(pattern) => {
                let op = if cond.negated { "!~" } else { "~" };
                format!("{subject} {op} {}", regex_lit(pattern))
            }
            CondTest::Equals(value) => {
                let op = if cond.negated { "!=" } else { "==" };
                if cond.nocase {
                    self.imports.insert("std");
                    format!("std.tolower({subject}) {op} {}", lit(&value.to_lowercase()))
                } else {
                    format!("{subject} {op} {}", lit(value))
                }
            }
        }
    }

    /// The test of `rule`: its pattern, then its conditions (`OR` binds tighter than the
    /// implied `AND`, as in mod_rewrite).
    fn test(&mut self, rule: &Rule) -> String {
        let op = if rule.negated { "!~" } else { "~" };
        let mut test = format!("{RULE_SUBJECT} {op} {}", regex_lit(&rule.pattern));
        let mut group: Vec<String> = Vec::new();
        for cond in &rule.conds {
            group.push(self.cond(cond, rule));
            if !cond.or_next {
                let joined = match group.len() {
                    1 => group.remove(0),
                    _ => format!("({})", std::mem::take(&mut group).join(" || ")),
                };
                let _ = write!(test, " && {joined}");
            }
        }
        if !group.is_empty() {
            let _ = write!(test, " && ({})", group.join(" || "));
        }
        test
    }

    fn rules(&mut self, rules: &[Rule], depth: usize) {
        let mut i = 0;
        while i < rules.len() {
            let rule = &rules[i];
            self.line(depth, &format!("# {}", rule.origin));
            let test = self.test(rule);
            self.line(depth, &format!("if ({test}) {{"));
            self.actions(rule, depth + 1);
            let skipped = &rules[i + 1..(i + 1 + rule.actions.skip).min(rules.len())];
            if skipped.is_empty() {
                self.line(depth, "}");
            } else {
                self.line(depth, "} else {");
                self.rules(skipped, depth + 1);
                self.line(depth, "}");
            }
            i += 1 + skipped.len();
        }
    }

    fn actions(&mut self, rule: &Rule, depth: usize) {
        let actions = &rule.actions;
        if let Some(cache) = &actions.cache {
            self.line(depth, &format!("set req.http.{CACHE_CONTROL} = \"{cache}\";"));
        }
        match actions.esi {
            Some(true) => self.line(depth, &format!("set req.http.{ESI} = \"on\";")),
            Some(false) => self.line(depth, &format!("unset req.http.{ESI};")),
            None => {}
        }
        if actions.no_vary {
            self.line(depth, &format!("set req.http.{NO_VARY} = \"1\";"));
        }
        if !actions.vary_cookies.is_empty() {
            self.imports.insert("cookie");
            self.line(depth, "cookie.parse(req.http.Cookie);");
            let values: Vec<String> = actions
                .vary_cookies
                .iter()
                .map(|name| format!("\"{name}=\" + cookie.get(\"{name}\") + \";\""))
                .collect();
            self.line(
                depth,
                &format!(
                    "set req.http.{CACHE_VARY} = req.http.{CACHE_VARY} + {};",
                    values.join(" + ")
                ),
            );
        }
        for tag in &actions.tags {
            let value = self.expr(tag, Some(rule));
            self.line(
                depth,
                &format!("set req.http.{CACHE_TAG} = req.http.{CACHE_TAG} + \" \" + {value};"),
            );
        }
        for purge in &actions.purges {
            if let Some(tag) = purge.strip_prefix("tag=") {
                self.imports.insert("xkey");
                self.line(depth, &format!("xkey.purge({});", lit(tag)));
            } else if purge == "*" {
                self.imports.insert("std");
                self.line(depth, "std.ban(\"obj.status != 0\");");
            } else {
                self.imports.insert("std");
                self.line(
                    depth,
                    &format!("std.ban({});", lit(&format!("req.url == {purge}"))),
                );
            }
        }
        match &actions.target {
            Target::Keep => {}
            Target::Rewrite(pieces) => self.assign_url(depth, "req.url", pieces, rule),
            Target::Redirect(pieces, status) => {
                self.assign_url(depth, &format!("req.http.{LOCATION}"), pieces, rule);
                self.line(depth, &format!("set req.http.{REDIRECT} = \"{status}\";"));
            }
        }
        if let Some(status) = actions.refuse {
            self.line(
                depth,
                &format!("return (synth({status}, \"{}\"));", reason(status)),
            );
        } else if actions.last {
            self.line(depth, "return;");
        }
    }

    /// `set LHS = the substitution;` with mod_rewrite's query string rules: the request's query
    /// is kept unless the substitution has its own (`QSA` appends it then), `QSD` drops it, and a
    /// substitution ending in `?` ends with none.
    fn assign_url(&mut self, depth: usize, lhs: &str, pieces: &[Piece], rule: &Rule) {
        let query_at = pieces
            .iter()
            .position(|p| matches!(p, Piece::Text(t) if t.contains('?')));
        let Some(at) = query_at else {
            let path = self.expr(pieces, Some(rule));
            let rhs = if rule.actions.qsd {
                path
            } else {
                format!(r#"{path} + regsub(req.url, "^[^?]*", "")"#)
            };
            return self.line(depth, &format!("set {lhs} = {rhs};"));
        };
        let Piece::Text(text) = &pieces[at] else {
            unreachable!("found as text")
        };
        let (before, after) = text.split_once('?').expect("found with a `?`");
        let query_empty = after.is_empty() && at + 1 == pieces.len();
        if query_empty {
            let mut path = pieces[..at].to_vec();
            path.push(Piece::Text(before.to_string()));
            let path = self.expr(&path, Some(rule));
            return self.line(depth, &format!("set {lhs} = {path};"));
        }
        let full = self.expr(pieces, Some(rule));
        if rule.actions.qsa {
            self.line(depth, r#"if (req.url ~ "\?.") {"#);
            self.line(
                depth + 1,
                &format!("set {lhs} = {full} + \"&\" + {QUERY_STRING};"),
            );
            self.line(depth, "} else {");
            self.line(depth + 1, &format!("set {lhs} = {full};"));
            self.line(depth, "}");
        } else {
            self.line(depth, &format!("set {lhs} = {full};"));
        }
    }
}

/// The VCL policy that behaves as `rules` (read from file `name`).
fn write_vcl(name: &str, rules: &Rules) -> String {
    let mut w = Writer {
        out: String::new(),
        imports: BTreeSet::new(),
    };
    let all: Vec<&Rule> = rules.rules.iter().collect();
    let any = |f: fn(&Actions) -> bool| all.iter().any(|r| f(&r.actions));
    let mut headers = Vec::new();
    if any(|a| a.cache.is_some()) {
        headers.push(CACHE_CONTROL);
    }
    if any(|a| !a.vary_cookies.is_empty()) {
        headers.push(CACHE_VARY);
    }
    if any(|a| !a.tags.is_empty()) {
        headers.push(CACHE_TAG);
    }
    if any(|a| a.esi.is_some()) {
        headers.push(ESI);
    }
    if any(|a| a.no_vary) {
        headers.push(NO_VARY);
    }
    let statuses: BTreeSet<u16> = all
        .iter()
        .filter_map(|r| match r.actions.target {
            Target::Redirect(_, status) => Some(status),
            _ => None,
        })
        .collect();
    if !statuses.is_empty() {
        headers.extend([LOCATION, REDIRECT]);
    }
    let ttls: BTreeSet<u64> = all
        .iter()
        .filter_map(|r| r.actions.cache.as_deref()?.strip_prefix("max-age=")?.parse().ok())
        .collect();
    let switches = &rules.switches;

    // The rules, in a sub of their own: `L` is its `return;`.
    let mut body = Writer {
        out: String::new(),
        imports: BTreeSet::new(),
    };
    body.rules(&rules.rules, 1);
    w.imports.append(&mut body.imports);
    if !rules.rules.is_empty() {
        w.line(0, "sub rewrite_rules {");
        w.out.push_str(&body.out);
        w.line(0, "}");
        w.line(0, "");
    }

    w.line(0, "sub vcl_recv {");
    if !headers.is_empty() {
        w.line(1, "# The rules decide through these headers: not the client.");
        for header in &headers {
            w.line(1, &format!("unset req.http.{header};"));
        }
    }
    if !rules.rules.is_empty() {
        w.line(1, "call rewrite_rules;");
    }
    for status in &statuses {
        w.line(1, &format!("if (req.http.{REDIRECT} == \"{status}\") {{"));
        w.line(2, &format!("return (synth({status}, \"{}\"));", reason(*status)));
        w.line(1, "}");
    }
    let has = |value: &str| all.iter().any(|r| r.actions.cache.as_deref() == Some(value));
    let passes: Vec<&str> = ["no-cache", "private"].into_iter().filter(|v| has(v)).collect();
    if !passes.is_empty() {
        w.line(
            1,
            "# no-cache; private (edgecache keeps no per-visitor copies): not stored.",
        );
        w.line(
            1,
            &format!("if (req.http.{CACHE_CONTROL} ~ \"^({})$\") {{", passes.join("|")),
        );
        w.line(2, "return (pass);");
        w.line(1, "}");
    }
    if switches.lookup == Some(false) {
        w.line(1, "# CacheLookup off: nothing is looked up.");
        w.line(1, "return (pass);");
    } else {
        let cached_by_rule = !ttls.is_empty() || has("public");
        if switches.enable == Some(false) {
            w.line(1, "# enableCache off: only what a rule caches is cached.");
            let test = if cached_by_rule {
                format!("req.http.{CACHE_CONTROL} !~ \"^(max-age=|public$)\"")
            } else {
                "true".to_string()
            };
            w.line(1, &format!("if ({test}) {{"));
            w.line(2, "return (pass);");
            w.line(1, "}");
        }
        if switches.query_string == Some(false) {
            w.line(1, "# qsCache off: URLs with a query string are not cached.");
            w.line(1, "if (req.url ~ \"\\?\") {");
            w.line(2, "return (pass);");
            w.line(1, "}");
        }
        if switches.ignore_request_cc == Some(false) {
            w.line(
                1,
                "# ignoreReqCacheCtrl off: a client's no-cache fetches a fresh copy.",
            );
            w.line(1, "if (req.http.Cache-Control ~ \"(?i)no-cache|max-age=0\") {");
            w.line(2, "set req.hash_always_miss = true;");
            w.line(1, "}");
        }
        let lookup = "req.method ~ \"^(GET|HEAD)$\" && !req.http.Authorization && !req.http.Upgrade";
        if switches.request_cookie == Some(true) {
            w.line(1, "# reqCookieCache on: requests with cookies are looked up too.");
            w.line(1, &format!("if ({lookup}) {{"));
            w.line(2, "return (hash);");
            w.line(1, "}");
        } else if cached_by_rule {
            w.line(
                1,
                "# A rule caches this request: looked up even with cookies when the rule varies on them.",
            );
            let vary = if headers.contains(&CACHE_VARY) {
                format!(" && (!req.http.Cookie || req.http.{CACHE_VARY})")
            } else {
                " && !req.http.Cookie".to_string()
            };
            w.line(
                1,
                &format!("if (req.http.{CACHE_CONTROL} ~ \"^(max-age=|public$)\" && {lookup}{vary}) {{"),
            );
            w.line(2, "return (hash);");
            w.line(1, "}");
        }
    }
    w.line(0, "}");

    if headers.contains(&CACHE_VARY) {
        w.line(0, "");
        w.line(0, "sub vcl_hash {");
        w.line(1, "# Cache-Vary: one variant per value of the named cookies.");
        w.line(1, &format!("if (req.http.{CACHE_VARY}) {{"));
        w.line(2, &format!("hash_data(req.http.{CACHE_VARY});"));
        w.line(1, "}");
        w.line(0, "}");
    }

    let mut response = Writer {
        out: String::new(),
        imports: BTreeSet::new(),
    };
    if switches.response_cookie == Some(true) {
        response.line(
            1,
            "# respCookieCache on: responses setting cookies are stored without them.",
        );
        response.line(1, "unset beresp.http.Set-Cookie;");
    }
    if headers.contains(&ESI) {
        response.line(1, &format!("if (bereq.http.{ESI} == \"on\") {{"));
        response.line(2, "set beresp.do_esi = true;");
        response.line(1, "}");
    }
    if headers.contains(&NO_VARY) {
        response.line(1, &format!("if (bereq.http.{NO_VARY}) {{"));
        response.line(2, "unset beresp.http.Vary;");
        response.line(1, "}");
    }
    if headers.contains(&CACHE_TAG) {
        response.line(
            1,
            "# cache-tag: surrogate keys, purged with xkey.purge or PURGE with an xkey header.",
        );
        response.line(1, &format!("if (bereq.http.{CACHE_TAG}) {{"));
        response.line(
            2,
            &format!("set beresp.http.xkey = beresp.http.xkey + bereq.http.{CACHE_TAG};"),
        );
        response.line(1, "}");
    }
    if let Some(stale) = switches.stale {
        response.line(1, &format!("set beresp.grace = {stale}s;"));
    }
    let keep_cookies = switches.response_cookie != Some(true);
    let deliver = |w: &mut Writer, depth: usize| {
        if keep_cookies {
            w.line(depth, "if (!beresp.http.Set-Cookie) {");
            w.line(depth + 1, "return (deliver);");
            w.line(depth, "}");
        } else {
            w.line(depth, "return (deliver);");
        }
    };
    for ttl in &ttls {
        response.line(
            1,
            &format!("if (bereq.http.{CACHE_CONTROL} == \"max-age={ttl}\") {{"),
        );
        response.line(2, &format!("set beresp.ttl = {ttl}s;"));
        deliver(&mut response, 2);
        response.line(1, "}");
    }
    if has("public") {
        response.line(1, &format!("if (bereq.http.{CACHE_CONTROL} == \"public\") {{"));
        if let Some(expire) = switches.expire {
            response.line(2, "if (!beresp.http.Cache-Control && !beresp.http.Expires) {");
            response.line(3, &format!("set beresp.ttl = {expire}s;"));
            response.line(2, "}");
        }
        deliver(&mut response, 2);
        response.line(1, "}");
    }
    if switches.ignore_response_cc == Some(true) {
        let expire = switches.expire.unwrap_or(DEFAULT_EXPIRE);
        response.line(
            1,
            "# ignoreRespCacheCtrl on: the origin's Cache-Control and Expires are not read.",
        );
        response.line(1, "unset beresp.http.Cache-Control;");
        response.line(1, "unset beresp.http.Expires;");
        response.line(1, &format!("set beresp.ttl = {expire}s;"));
        deliver(&mut response, 1);
    } else if let Some(expire) = switches.expire {
        response.line(
            1,
            "# expireInSeconds: the TTL of responses that give none (--default-ttl).",
        );
        response.line(1, "if (!beresp.http.Cache-Control && !beresp.http.Expires) {");
        response.line(2, &format!("set beresp.ttl = {expire}s;"));
        response.line(1, "}");
    }
    if !response.out.is_empty() {
        w.line(0, "");
        w.line(0, "sub vcl_backend_response {");
        w.out.push_str(&response.out);
        w.line(0, "}");
    }

    if !statuses.is_empty() {
        w.line(0, "");
        w.line(0, "sub vcl_synth {");
        w.line(
            1,
            &format!("if (req.http.{LOCATION} && resp.status >= 301 && resp.status <= 308) {{"),
        );
        w.line(2, &format!("set resp.http.Location = req.http.{LOCATION};"));
        w.line(1, "}");
        w.line(0, "}");
    }

    let mut vcl = String::new();
    let _ = writeln!(
        vcl,
        "# The rewrite rules of {name}, as VCL (`edgecache check --explain`)."
    );
    let _ = writeln!(
        vcl,
        "# Load it with `edgecache -f FILE.vcl`: it behaves as the rules do."
    );
    vcl.push_str("vcl 4.1;\n\n");
    for vmod in &w.imports {
        let _ = writeln!(vcl, "import {vmod};");
    }
    if !w.imports.is_empty() {
        vcl.push('\n');
    }
    vcl.push_str(&w.out);
    vcl
}
