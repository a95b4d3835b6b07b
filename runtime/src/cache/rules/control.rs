//! Cache directives: `Cache-Control` (RFC 9111 §5.2), `Pragma` (§5.4) and targeted fields such
//! as `CDN-Cache-Control` (RFC 9213).
//!
//! Parsing is done once per response, at store time, into [`ResponseDirectives`]; the hit path
//! only reads the parsed struct. Request parsing ([`RequestDirectives`]) never allocates.
//!
//! Decisions taken where the RFCs leave a choice (all in the conservative direction):
//! - Directive names are compared case-insensitively (§5.2); unknown directives are ignored
//!   (§5.2.3). Arguments are accepted as token or quoted-string (§5.2), and whitespace around `=`
//!   is tolerated.
//! - Duplicated directives (§4.2.1): the first occurrence counts, like `Age` (§5.1).
//! - A `max-age` / `s-maxage` whose argument is missing or invalid (non-numeric, negative,
//!   float, trailing garbage) makes the response stale: the value is `0` (§4.2.1).
//! - An invalid `stale-while-revalidate` / `stale-if-error` argument is ignored (no stale
//!   serving is granted).
//! - `no-cache` / `private` with an unparseable or empty field list behave as their unqualified
//!   forms (§5.2.2.4, §5.2.2.7); `no-cache` and `no-cache="x"` together mean `no-cache`.
//! - delta-seconds saturate at 2^31 (§1.2.2).

use http::header::{HeaderMap, HeaderName, CACHE_CONTROL, PRAGMA};

use super::syntax::{is_tchar, parse_delta, quoted_end, trim_ows, DELTA_SECONDS_MAX};

#[cfg(test)]
mod tests;

// === impl FieldScope ===

/// Reach of a directive that optionally lists field names (`no-cache`, `private`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum FieldScope {
    /// The directive is absent.
    #[default]
    None,
    /// The unqualified directive: it applies to the whole response.
    All,
    /// The qualified form: it applies to these fields only (lowercase, deduplicated). Behind
    /// a thin pointer, so the scope is 16 bytes: every stored object keeps two in its head,
    /// nearly always without a list.
    #[expect(clippy::box_collection, reason = "a thin pointer keeps the scope at 16 bytes")]
    Fields(Box<Vec<HeaderName>>),
}

impl FieldScope {
    /// `true` unless the directive is absent.
    pub(crate) fn is_present(&self) -> bool {
        !matches!(self, FieldScope::None)
    }

    /// `true` for the unqualified form.
    pub(crate) fn is_all(&self) -> bool {
        matches!(self, FieldScope::All)
    }

    /// The listed field names (empty unless qualified).
    pub(crate) fn fields(&self) -> &[HeaderName] {
        match self {
            FieldScope::Fields(f) => f,
            _ => &[],
        }
    }

    fn widen_to_all(&mut self) {
        *self = FieldScope::All;
    }

    fn add_fields(&mut self, fields: Vec<HeaderName>) {
        match self {
            FieldScope::All => {}
            FieldScope::None => *self = FieldScope::Fields(Box::new(fields)),
            FieldScope::Fields(have) => {
                for f in fields {
                    if !have.contains(&f) {
                        have.push(f);
                    }
                }
            }
        }
    }

    fn apply(&mut self, list: Option<Vec<HeaderName>>) {
        match list {
            Some(fields) => self.add_fields(fields),
            None => self.widen_to_all(),
        }
    }
}

// === impl ResponseDirectives ===

/// The response cache directives that apply to this (shared) cache.
///
/// Built from the targeted field when it is present and valid (RFC 9213 §2.2), otherwise from
/// `Cache-Control` (RFC 9111 §5.2.2, RFC 5861, RFC 8246). Every stored object keeps one, so
/// its seconds are `u32`: delta-seconds stop at 2^31 (RFC 9111 §1.2.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResponseDirectives {
    /// `no-store` (§5.2.2.5), as received; `check_storable` ignores it for understood status
    /// codes when `must-understand` is present (§5.2.2.3).
    pub no_store: bool,
    /// `no-cache` (§5.2.2.4): store, but revalidate before every reuse; the qualified form
    /// only forbids reusing the listed fields (they are stripped before storing).
    pub no_cache: FieldScope,
    /// `private` (§5.2.2.7): a shared cache must not store the response; the qualified form
    /// only forbids storing the listed fields.
    pub private: FieldScope,
    /// `public` (§5.2.2.9).
    pub public: bool,
    /// `max-age` in seconds (§5.2.2.1); `Some(0)` when invalid.
    pub max_age: Option<u32>,
    /// `s-maxage` in seconds (§5.2.2.10); `Some(0)` when invalid.
    pub s_maxage: Option<u32>,
    /// `must-revalidate` (§5.2.2.2).
    pub must_revalidate: bool,
    /// `proxy-revalidate` (§5.2.2.8).
    pub proxy_revalidate: bool,
    /// `must-understand` (§5.2.2.3).
    pub must_understand: bool,
    /// `stale-while-revalidate` in seconds (RFC 5861 §3).
    pub stale_while_revalidate: Option<u32>,
    /// `stale-if-error` in seconds (RFC 5861 §4).
    pub stale_if_error: Option<u32>,
    /// `immutable` (RFC 8246).
    pub immutable: bool,
    /// The directives came from the targeted field, so `Expires` must be ignored too
    /// (RFC 9213 §2.2).
    pub from_targeted: bool,
}

impl ResponseDirectives {
    /// Parses the directives this cache obeys (RFC 9111 §5.2.2; RFC 9213 §2.2).
    ///
    /// When `targeted` names a field (e.g. `CDN-Cache-Control`) that is present with a valid,
    /// non-empty Structured Fields Dictionary value, it replaces `Cache-Control` entirely and
    /// [`ResponseDirectives::from_targeted`] is set. Otherwise `Cache-Control` is parsed with
    /// the rules in the module doc.
    pub(crate) fn from_headers(headers: &HeaderMap, targeted: Option<&HeaderName>) -> ResponseDirectives {
        if let Some(name) = targeted {
            if let Some(dirs) = parse_targeted(headers, name) {
                return dirs;
            }
        }
        let mut dirs = ResponseDirectives::default();
        let mut seen = Seen::default();
        for line in headers.get_all(CACHE_CONTROL) {
            for d in Directives::new(line.as_bytes()) {
                dirs.apply_cache_control(&d, &mut seen);
            }
        }
        dirs
    }

    /// `true` when a shared cache may reuse the response for a request with `Authorization`:
    /// `public`, `s-maxage` or `must-revalidate` is present (RFC 9111 §3.5).
    pub(crate) fn allows_authorized_reuse(&self) -> bool {
        self.public || self.s_maxage.is_some() || self.must_revalidate
    }

    /// `true` when the response forbids serving it stale from a shared cache:
    /// `must-revalidate`, `proxy-revalidate`, `s-maxage` or any `no-cache` (RFC 9111 §4.2.4,
    /// §5.2.2.2, §5.2.2.4, §5.2.2.8, §5.2.2.10).
    pub(crate) fn forbids_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some() || self.no_cache.is_present()
    }

    fn apply_cache_control(&mut self, d: &Directive<'_>, seen: &mut Seen) {
        let name = d.name;
        if name.eq_ignore_ascii_case(b"no-store") {
            self.no_store = true;
        } else if name.eq_ignore_ascii_case(b"no-cache") {
            self.no_cache.apply(field_list(&d.arg));
        } else if name.eq_ignore_ascii_case(b"private") {
            self.private.apply(field_list(&d.arg));
        } else if name.eq_ignore_ascii_case(b"public") {
            self.public |= matches!(d.arg, Arg::None);
        } else if name.eq_ignore_ascii_case(b"max-age") {
            if self.max_age.is_none() {
                self.max_age = Some(delta_seconds(&d.arg).unwrap_or(0));
            }
        } else if name.eq_ignore_ascii_case(b"s-maxage") {
            if self.s_maxage.is_none() {
                self.s_maxage = Some(delta_seconds(&d.arg).unwrap_or(0));
            }
        } else if name.eq_ignore_ascii_case(b"must-revalidate") {
            self.must_revalidate = true;
        } else if name.eq_ignore_ascii_case(b"proxy-revalidate") {
            self.proxy_revalidate = true;
        } else if name.eq_ignore_ascii_case(b"must-understand") {
            self.must_understand = true;
        } else if name.eq_ignore_ascii_case(b"stale-while-revalidate") {
            if !seen.swr {
                seen.swr = true;
                self.stale_while_revalidate = delta_seconds(&d.arg);
            }
        } else if name.eq_ignore_ascii_case(b"stale-if-error") {
            if !seen.sie {
                seen.sie = true;
                self.stale_if_error = delta_seconds(&d.arg);
            }
        } else if name.eq_ignore_ascii_case(b"immutable") {
            self.immutable |= matches!(d.arg, Arg::None);
        }
    }
}

#[derive(Default)]
struct Seen {
    swr: bool,
    sie: bool,
}

// === impl RequestDirectives ===

/// Value of the `max-stale` request directive (RFC 9111 §5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxStale {
    /// `max-stale` without a value: any staleness is accepted.
    Any,
    /// `max-stale=N`: stale by at most N seconds.
    Secs(u64),
}

/// The request cache directives (RFC 9111 §5.2.1), plus `Pragma: no-cache` (§5.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestDirectives {
    /// `no-cache` (§5.2.1.4), or `Pragma: no-cache` when there is no `Cache-Control` (§5.4).
    pub no_cache: bool,
    /// `no-store` (§5.2.1.5).
    pub no_store: bool,
    /// `max-age` (§5.2.1.1); an invalid argument counts as `0`.
    pub max_age: Option<u64>,
    /// `max-stale` (§5.2.1.2); an invalid argument is ignored.
    pub max_stale: Option<MaxStale>,
    /// `min-fresh` (§5.2.1.3); an invalid argument is ignored.
    pub min_fresh: Option<u64>,
    /// `only-if-cached` (§5.2.1.7).
    pub only_if_cached: bool,
}

impl RequestDirectives {
    /// Parses request `Cache-Control` (RFC 9111 §5.2.1) and `Pragma` (§5.4). Never allocates.
    ///
    /// First occurrence wins for valued directives. `Pragma: no-cache` counts only when the
    /// request has no `Cache-Control` field at all (§5.4).
    pub(crate) fn from_headers(headers: &HeaderMap) -> RequestDirectives {
        let mut dirs = RequestDirectives::default();
        let mut any_cc = false;
        let mut seen_max_stale = false;
        let mut seen_min_fresh = false;
        for line in headers.get_all(CACHE_CONTROL) {
            any_cc = true;
            for d in Directives::new(line.as_bytes()) {
                let name = d.name;
                if name.eq_ignore_ascii_case(b"no-cache") {
                    dirs.no_cache = true;
                } else if name.eq_ignore_ascii_case(b"no-store") {
                    dirs.no_store = true;
                } else if name.eq_ignore_ascii_case(b"max-age") {
                    if dirs.max_age.is_none() {
                        dirs.max_age = Some(delta_seconds(&d.arg).map_or(0, u64::from));
                    }
                } else if name.eq_ignore_ascii_case(b"max-stale") {
                    if !seen_max_stale {
                        seen_max_stale = true;
                        dirs.max_stale = match d.arg {
                            Arg::None => Some(MaxStale::Any),
                            _ => delta_seconds(&d.arg).map(|delta| MaxStale::Secs(delta.into())),
                        };
                    }
                } else if name.eq_ignore_ascii_case(b"min-fresh") {
                    if !seen_min_fresh {
                        seen_min_fresh = true;
                        dirs.min_fresh = delta_seconds(&d.arg).map(u64::from);
                    }
                } else if name.eq_ignore_ascii_case(b"only-if-cached") {
                    dirs.only_if_cached = true;
                }
            }
        }
        if !any_cc {
            dirs.no_cache = headers.get_all(PRAGMA).iter().any(|line| {
                Directives::new(line.as_bytes()).any(|d| d.name.eq_ignore_ascii_case(b"no-cache"))
            });
        }
        dirs
    }
}

// === directive tokenizer (RFC 9111 §5.2, RFC 9110 §5.6) ===

/// One `token [ "=" ( token / quoted-string ) ]` list member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Directive<'a> {
    name: &'a [u8],
    arg: Arg<'a>,
}

/// A directive argument, not yet interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg<'a> {
    /// No `=`.
    None,
    /// A token.
    Token(&'a [u8]),
    /// The raw bytes between the quotes; quoted-pairs are not yet unescaped.
    Quoted(&'a [u8]),
    /// Something follows `=` (or the directive) that is neither a token nor a closed
    /// quoted-string.
    Invalid,
}

/// Iterator over the members of one `#cache-directive` field line. Empty members are skipped
/// (RFC 9110 §5.6.1); a member that does not start with a token is skipped entirely.
struct Directives<'a> {
    rest: &'a [u8],
}

impl<'a> Directives<'a> {
    fn new(value: &'a [u8]) -> Self {
        Directives { rest: value }
    }

    fn skip_ows(&mut self) {
        while let [b' ' | b'\t', rest @ ..] = self.rest {
            self.rest = rest;
        }
    }

    /// Skips to the next top-level comma (quoted commas do not count), leaving it unread.
    fn skip_member(&mut self) {
        let mut i = 0;
        let bytes = self.rest;
        while i < bytes.len() {
            match bytes[i] {
                b',' => break,
                b'"' => i = quoted_end(bytes, i).unwrap_or(bytes.len()),
                _ => i += 1,
            }
        }
        self.rest = &bytes[i..];
    }

    fn take_token(&mut self) -> &'a [u8] {
        let n = self.rest.iter().take_while(|b| is_tchar(**b)).count();
        let (tok, rest) = self.rest.split_at(n);
        self.rest = rest;
        tok
    }
}

impl<'a> Iterator for Directives<'a> {
    type Item = Directive<'a>;

    fn next(&mut self) -> Option<Directive<'a>> {
        loop {
            while let [b' ' | b'\t' | b',', rest @ ..] = self.rest {
                self.rest = rest;
            }
            if self.rest.is_empty() {
                return None;
            }
            let name = self.take_token();
            if name.is_empty() {
                self.skip_member();
                continue;
            }
            self.skip_ows();
            let mut arg = Arg::None;
            if let [b'=', rest @ ..] = self.rest {
                self.rest = rest;
                self.skip_ows();
                arg = if self.rest.first() == Some(&b'"') {
                    match quoted_end(self.rest, 0) {
                        Some(end) => {
                            let inner = &self.rest[1..end - 1];
                            self.rest = &self.rest[end..];
                            Arg::Quoted(inner)
                        }
                        None => {
                            self.rest = &[];
                            Arg::Invalid
                        }
                    }
                } else {
                    match self.take_token() {
                        [] => Arg::Invalid,
                        tok => Arg::Token(tok),
                    }
                };
                self.skip_ows();
            }
            if !matches!(self.rest, [] | [b',', ..]) {
                arg = Arg::Invalid;
                self.skip_member();
            }
            return Some(Directive { name, arg });
        }
    }
}

/// A delta-seconds argument, in token or quoted form (RFC 9111 §5.2: recipients accept both).
fn delta_seconds(arg: &Arg<'_>) -> Option<u32> {
    match arg {
        // At most `DELTA_SECONDS_MAX` (2^31), so it fits.
        Arg::Token(t) | Arg::Quoted(t) => parse_delta(t).map(|delta| delta as u32),
        Arg::None | Arg::Invalid => None,
    }
}

/// The field-name list of `no-cache` / `private` (RFC 9111 §5.2.2.4, §5.2.2.7). `None` means
/// "the unqualified form": no argument, or an argument that is not a non-empty list of valid
/// field names.
fn field_list(arg: &Arg<'_>) -> Option<Vec<HeaderName>> {
    match arg {
        Arg::None | Arg::Invalid => None,
        Arg::Token(t) => HeaderName::from_bytes(t).ok().map(|n| vec![n]),
        Arg::Quoted(q) => parse_field_names(&unescape(q)),
    }
}

/// Comma-separated field names; `None` if any is invalid or the list is empty.
fn parse_field_names(list: &[u8]) -> Option<Vec<HeaderName>> {
    let mut out: Vec<HeaderName> = Vec::new();
    for item in list.split(|b| *b == b',') {
        let item = trim_ows(item);
        if item.is_empty() {
            continue;
        }
        let name = HeaderName::from_bytes(item).ok()?;
        if !out.contains(&name) {
            out.push(name);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Removes quoted-pair escapes (RFC 9110 §5.6.4).
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut it = raw.iter();
    while let Some(&b) = it.next() {
        if b == b'\\' {
            if let Some(&n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(b);
        }
    }
    out
}

// === targeted fields (RFC 9213, Structured Fields RFC 8941) ===

/// A Structured Fields bare item, reduced to what cache directives need.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SfValue {
    Bool(bool),
    Integer(i64),
    String(Vec<u8>),
    Token(Vec<u8>),
    /// An inner list; only its string and token members are kept.
    List(Vec<Vec<u8>>),
    /// Decimal, byte sequence, date, display string.
    Other,
}

/// Parses the targeted field into directives, or `None` when it is absent, empty or not a
/// valid Dictionary (RFC 9213 §2.2: the cache then falls back to `Cache-Control`).
///
/// Type rules (RFC 9213 §2.1, "SHOULD NOT consume values that violate these inferred
/// constraints"): `max-age` / `s-maxage` must be non-negative Integers, otherwise the response
/// is stale (`0`), as for `Cache-Control`; `stale-*` must be non-negative Integers or are
/// ignored; `no-cache` / `private` take `?1`, a String or Token field list or an inner list of
/// them (anything else means the unqualified form); other flags count when not `?0`
/// (`public` and `immutable` only when exactly `?1`). Duplicate keys: the last one counts
/// (RFC 8941 §4.2.2).
fn parse_targeted(headers: &HeaderMap, name: &HeaderName) -> Option<ResponseDirectives> {
    let mut joined: Vec<u8> = Vec::new();
    for line in headers.get_all(name) {
        let v = trim_ows(line.as_bytes());
        if v.is_empty() {
            continue;
        }
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(v);
    }
    if joined.is_empty() {
        return None;
    }
    let members = sf::parse_dictionary(&joined)?;
    let mut dirs = ResponseDirectives {
        from_targeted: true,
        ..ResponseDirectives::default()
    };
    for (i, (key, value)) in members.iter().enumerate() {
        if members[i + 1..].iter().any(|(k, _)| k == key) {
            continue; // a later duplicate wins
        }
        let flag = !matches!(value, SfValue::Bool(false));
        let exact_true = matches!(value, SfValue::Bool(true));
        let delta = match value {
            SfValue::Integer(n) if *n >= 0 => Some((*n as u64).min(DELTA_SECONDS_MAX) as u32),
            _ => None,
        };
        match key.as_slice() {
            b"no-store" => dirs.no_store = flag,
            b"must-revalidate" => dirs.must_revalidate = flag,
            b"proxy-revalidate" => dirs.proxy_revalidate = flag,
            b"must-understand" => dirs.must_understand = flag,
            b"public" => dirs.public = exact_true,
            b"immutable" => dirs.immutable = exact_true,
            b"max-age" => dirs.max_age = Some(delta.unwrap_or(0)),
            b"s-maxage" => dirs.s_maxage = Some(delta.unwrap_or(0)),
            b"stale-while-revalidate" => dirs.stale_while_revalidate = delta,
            b"stale-if-error" => dirs.stale_if_error = delta,
            b"no-cache" if flag => dirs.no_cache.apply(sf_field_list(value)),
            b"private" if flag => dirs.private.apply(sf_field_list(value)),
            _ => {}
        }
    }
    Some(dirs)
}

fn sf_field_list(value: &SfValue) -> Option<Vec<HeaderName>> {
    match value {
        SfValue::String(s) | SfValue::Token(s) => parse_field_names(s),
        SfValue::List(items) => {
            let mut out: Vec<HeaderName> = Vec::new();
            for item in items {
                for n in parse_field_names(item)? {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
            (!out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

/// A minimal Structured Fields Dictionary parser (RFC 8941 §4.2.2; RFC 9651 items accepted).
/// Parameters are parsed and discarded (RFC 9213 §2.1).
mod sf {
    use super::SfValue;

    pub(super) fn parse_dictionary(input: &[u8]) -> Option<Vec<(Vec<u8>, SfValue)>> {
        let mut p = Parser { s: input, i: 0 };
        p.skip_sp();
        let mut out = Vec::new();
        while p.i < p.s.len() {
            let key = p.key()?;
            let value = if p.eat(b'=') {
                if p.peek() == Some(b'(') {
                    p.inner_list()?
                } else {
                    let v = p.bare_item()?;
                    p.parameters()?;
                    v
                }
            } else {
                p.parameters()?;
                SfValue::Bool(true)
            };
            out.push((key, value));
            p.skip_ows();
            if p.i >= p.s.len() {
                return Some(out);
            }
            if !p.eat(b',') {
                return None;
            }
            p.skip_ows();
            if p.i >= p.s.len() {
                return None; // trailing comma
            }
        }
        None // empty after leading whitespace
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }

        fn eat(&mut self, b: u8) -> bool {
            if self.peek() == Some(b) {
                self.i += 1;
                true
            } else {
                false
            }
        }

        fn skip_sp(&mut self) {
            while self.peek() == Some(b' ') {
                self.i += 1;
            }
        }

        fn skip_ows(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t')) {
                self.i += 1;
            }
        }

        fn key(&mut self) -> Option<Vec<u8>> {
            let start = self.i;
            match self.peek() {
                Some(b) if b.is_ascii_lowercase() || b == b'*' => self.i += 1,
                _ => return None,
            }
            while let Some(b) = self.peek() {
                if b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b) {
                    self.i += 1;
                } else {
                    break;
                }
            }
            Some(self.s[start..self.i].to_vec())
        }

        fn parameters(&mut self) -> Option<()> {
            while self.eat(b';') {
                self.skip_sp();
                self.key()?;
                if self.eat(b'=') {
                    self.bare_item()?;
                }
            }
            Some(())
        }

        fn inner_list(&mut self) -> Option<SfValue> {
            self.eat(b'(');
            let mut items = Vec::new();
            loop {
                self.skip_sp();
                if self.eat(b')') {
                    self.parameters()?;
                    return Some(SfValue::List(items));
                }
                match self.bare_item()? {
                    SfValue::String(s) | SfValue::Token(s) => items.push(s),
                    _ => {}
                }
                self.parameters()?;
                if !matches!(self.peek(), Some(b' ' | b')')) {
                    return None;
                }
            }
        }

        fn bare_item(&mut self) -> Option<SfValue> {
            match self.peek()? {
                b'-' | b'0'..=b'9' => self.number(),
                b'"' => self.string(),
                b'?' => {
                    self.i += 1;
                    let v = match self.peek()? {
                        b'0' => false,
                        b'1' => true,
                        _ => return None,
                    };
                    self.i += 1;
                    Some(SfValue::Bool(v))
                }
                b':' => {
                    self.i += 1;
                    while let Some(b) = self.peek() {
                        self.i += 1;
                        match b {
                            b':' => return Some(SfValue::Other),
                            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => {}
                            _ => return None,
                        }
                    }
                    None
                }
                b'@' => {
                    self.i += 1;
                    match self.number()? {
                        SfValue::Integer(_) => Some(SfValue::Other),
                        _ => None,
                    }
                }
                b'%' => {
                    self.i += 1;
                    match self.string()? {
                        SfValue::String(_) => Some(SfValue::Other),
                        _ => None,
                    }
                }
                b if b.is_ascii_alphabetic() || b == b'*' => {
                    let start = self.i;
                    self.i += 1;
                    while let Some(b) = self.peek() {
                        if super::is_tchar(b) || b == b':' || b == b'/' {
                            self.i += 1;
                        } else {
                            break;
                        }
                    }
                    Some(SfValue::Token(self.s[start..self.i].to_vec()))
                }
                _ => None,
            }
        }

        fn number(&mut self) -> Option<SfValue> {
            let neg = self.eat(b'-');
            let start = self.i;
            let mut dot = None;
            while let Some(b) = self.peek() {
                if b.is_ascii_digit() {
                    self.i += 1;
                } else if b == b'.' && dot.is_none() {
                    dot = Some(self.i);
                    self.i += 1;
                } else {
                    break;
                }
            }
            let digits = &self.s[start..self.i];
            match dot {
                None => {
                    if digits.is_empty() || digits.len() > 15 {
                        return None;
                    }
                    let mut v: i64 = 0;
                    for d in digits {
                        v = v * 10 + i64::from(d - b'0');
                    }
                    Some(SfValue::Integer(if neg { -v } else { v }))
                }
                Some(at) => {
                    let int_len = at - start;
                    let frac_len = self.i - at - 1;
                    if int_len == 0 || int_len > 12 || frac_len == 0 || frac_len > 3 {
                        return None;
                    }
                    Some(SfValue::Other)
                }
            }
        }

        fn string(&mut self) -> Option<SfValue> {
            if !self.eat(b'"') {
                return None;
            }
            let mut out = Vec::new();
            loop {
                let b = self.peek()?;
                self.i += 1;
                match b {
                    b'\\' => {
                        let n = self.peek()?;
                        if n != b'"' && n != b'\\' {
                            return None;
                        }
                        self.i += 1;
                        out.push(n);
                    }
                    b'"' => return Some(SfValue::String(out)),
                    0x20..=0x7e => out.push(b),
                    _ => return None,
                }
            }
        }
    }
}
