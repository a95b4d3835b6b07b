//! Compiled VCL regexes: matching and replacing on Rust's `regex` or PCRE2.
//!
//! VCL regular expressions are PCRE2's. A pattern Rust's `regex` crate compiles runs
//! there (linear time, no backtracking); the others (look-around, back-references, atomic
//! groups, possessive quantifiers, ...) run on PCRE2 with its JIT and Varnish's limits
//! (`pcre2_match_limit` 10000, `pcre2_depth_limit` 20). A match that hits a limit is no
//! match, as in Varnish, and is counted ([`pcre_limit_hits`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Varnish's `pcre2_match_limit` and `pcre2_depth_limit` defaults, written at the start of
/// each PCRE2 pattern (a pattern may only lower the library's limits, which are higher).
const PCRE_LIMITS: &str = "(*LIMIT_MATCH=10000)(*LIMIT_DEPTH=20)";

static LIMIT_HITS: AtomicU64 = AtomicU64::new(0);

/// How many PCRE2 matches (`~`, `regsub`, `regsuball`) stopped at the match or depth limit,
/// and so counted as no match, since the process started.
pub fn pcre_limit_hits() -> u64 {
    LIMIT_HITS.load(Ordering::Relaxed)
}

/// A compiled VCL regex.
#[derive(Clone)]
pub(crate) enum Pattern {
    Linear(regex::Regex, Starts),
    Pcre(Box<pcre2::bytes::Regex>),
}

/// What every match of a linear pattern starts with, from its literal prefixes: a subject
/// without it cannot match, and is told so before the regex runs. On the short URLs and
/// header values policies test, most tests fail, and the `regex` crate's own prefilter costs
/// more to reach than the test itself.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Starts {
    /// Nothing known (an empty or unbounded prefix set).
    Anywhere,
    /// `^` patterns: the subject begins with one of these.
    AtStartWith(Vec<String>),
    /// The subject contains one of these one to three bytes.
    AtByte(Vec<u8>),
}

/// Subjects shorter than this are scanned byte by byte.
const SHORT_SUBJECT: usize = 32;

/// Where `byte` first occurs in `hay`: byte by byte on a short subject, where memchr's vector
/// search (and `str::find`'s, which is memchr behind a char searcher) costs more to set up.
pub(crate) fn find_byte(hay: &[u8], byte: u8) -> Option<usize> {
    if hay.len() < SHORT_SUBJECT {
        hay.iter().position(|h| *h == byte)
    } else {
        memchr::memchr(byte, hay)
    }
}

/// How many literal prefixes of a `^` pattern are worth comparing one by one.
const MAX_ANCHORED_PREFIXES: usize = 8;

impl Starts {
    /// From `pattern` as the `regex` crate parses it by default (what `RegexBuilder::new`
    /// compiles).
    fn of(pattern: &str) -> Starts {
        use regex_syntax::hir::literal::Extractor;
        use regex_syntax::hir::Look;
        let Ok(hir) = regex_syntax::parse(pattern) else {
            return Starts::Anywhere;
        };
        let prefixes = Extractor::new().extract(&hir);
        let Some(literals) = prefixes.literals() else {
            return Starts::Anywhere;
        };
        if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
            return Starts::Anywhere;
        }
        if hir.properties().look_set_prefix().contains(Look::Start) {
            if literals.len() > MAX_ANCHORED_PREFIXES {
                return Starts::Anywhere;
            }
            let texts: Option<Vec<String>> = literals
                .iter()
                .map(|l| String::from_utf8(l.as_bytes().to_vec()).ok())
                .collect();
            return texts.map_or(Starts::Anywhere, Starts::AtStartWith);
        }
        let mut first: Vec<u8> = literals.iter().map(|l| l.as_bytes()[0]).collect();
        first.sort_unstable();
        first.dedup();
        if first.len() > 3 {
            return Starts::Anywhere;
        }
        Starts::AtByte(first)
    }

    /// Whether `s` may match: `false` only when no match can start anywhere in it.
    #[inline]
    fn admits(&self, s: &str) -> bool {
        match self {
            Starts::Anywhere => true,
            Starts::AtStartWith(prefixes) => prefixes.iter().any(|p| s.starts_with(p.as_str())),
            Starts::AtByte(bytes) => {
                let hay = s.as_bytes();
                // memchr's vector search costs more to set up than a short URL takes to scan;
                // so does `bytes.contains`, a call per byte of the subject.
                if hay.len() < SHORT_SUBJECT {
                    return match bytes.as_slice() {
                        [a] => hay.iter().any(|h| h == a),
                        [a, b] => hay.iter().any(|h| h == a || h == b),
                        [a, b, c] => hay.iter().any(|h| h == a || h == b || h == c),
                        _ => true,
                    };
                }
                match bytes.as_slice() {
                    [a] => memchr::memchr(*a, hay).is_some(),
                    [a, b] => memchr::memchr2(*a, *b, hay).is_some(),
                    [a, b, c] => memchr::memchr3(*a, *b, *c, hay).is_some(),
                    _ => true,
                }
            }
        }
    }
}

/// Why a pattern compiles in neither engine: PCRE2's message and where it applies.
#[derive(Debug)]
pub(crate) struct PatternError {
    pub message: String,
    /// Byte offset in the pattern, when PCRE2 gives one.
    pub offset: Option<usize>,
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Linear(r, _) => f.debug_tuple("Linear").field(&r.as_str()).finish(),
            Pattern::Pcre(r) => f.debug_tuple("Pcre").field(&r.as_str()).finish(),
        }
    }
}

impl Pattern {
    /// `linear` is the `regex` crate's compilation of `pattern`, when it means the same
    /// there; otherwise PCRE2 compiles it.
    pub fn new(pattern: &str, linear: Option<regex::Regex>) -> Result<Pattern, PatternError> {
        if let Some(r) = linear {
            return Ok(Pattern::Linear(r, Starts::of(pattern)));
        }
        pcre2::bytes::RegexBuilder::new()
            .jit_if_available(true)
            .build(&format!("{PCRE_LIMITS}{pattern}"))
            .map(|r| Pattern::Pcre(Box::new(r)))
            .map_err(|e| PatternError {
                message: pcre_message(&e),
                offset: e.offset().and_then(|o| o.checked_sub(PCRE_LIMITS.len())),
            })
    }

    pub fn is_pcre(&self) -> bool {
        matches!(self, Pattern::Pcre(_))
    }

    #[inline]
    pub fn is_match(&self, s: &str) -> bool {
        match self {
            Pattern::Linear(r, starts) => starts.admits(s) && r.is_match(s),
            Pattern::Pcre(r) => r.is_match(s.as_bytes()).unwrap_or_else(|_| limit_hit()),
        }
    }

    /// `regsub` (`all` false) or `regsuball`: `replacement` in the `regex` crate's syntax
    /// (`${N}`, `$$`; see `regex::convert_replacement`).
    pub fn replace<'s>(&self, s: &'s str, replacement: &str, all: bool) -> Cow<'s, str> {
        match self {
            Pattern::Linear(_, starts) if !starts.admits(s) => Cow::Borrowed(s),
            Pattern::Linear(r, _) if all => r.replace_all(s, replacement),
            Pattern::Linear(r, _) => r.replace(s, replacement),
            Pattern::Pcre(r) => pcre_replace(r, s, replacement, all),
        }
    }
}

fn limit_hit() -> bool {
    LIMIT_HITS.fetch_add(1, Ordering::Relaxed);
    false
}

/// PCRE2's message without the crate's "PCRE2: error compiling pattern at offset N" prefix
/// (the offset counts our limit settings).
fn pcre_message(e: &pcre2::Error) -> String {
    let text = e.to_string();
    match text.split_once(": ").and_then(|(_, rest)| rest.split_once(": ")) {
        Some((_, message)) => message.to_string(),
        None => text,
    }
}

fn pcre_replace<'s>(r: &pcre2::bytes::Regex, s: &'s str, replacement: &str, all: bool) -> Cow<'s, str> {
    let mut out: Vec<u8> = Vec::new();
    let mut last = 0;
    for caps in r.captures_iter(s.as_bytes()) {
        let Ok(caps) = caps else {
            // As Varnish: a match that fails (a limit) leaves the rest of the string as it is.
            limit_hit();
            break;
        };
        let Some(whole) = caps.get(0) else { break };
        out.extend_from_slice(&s.as_bytes()[last..whole.start()]);
        expand(replacement, |i| caps.get(i).map(|m| m.as_bytes()), &mut out);
        last = whole.end();
        if !all {
            break;
        }
    }
    if last == 0 && out.is_empty() {
        return Cow::Borrowed(s);
    }
    out.extend_from_slice(&s.as_bytes()[last..]);
    // Without PCRE2's UTF mode a match may end inside a multi-byte character.
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Appends `replacement` with `${N}` replaced by group N (empty when it did not take part)
/// and `$$` by `$`.
fn expand<'a>(replacement: &str, group: impl Fn(usize) -> Option<&'a [u8]>, out: &mut Vec<u8>) {
    let mut rest = replacement;
    while let Some(at) = rest.find('$') {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push(b'$');
            rest = after;
        } else if let Some((n, after)) = tail
            .strip_prefix('{')
            .and_then(|t| t.split_once('}'))
            .and_then(|(n, after)| Some((n.parse::<usize>().ok()?, after)))
        {
            out.extend_from_slice(group(n).unwrap_or_default());
            rest = after;
        } else {
            out.push(b'$');
            rest = tail;
        }
    }
    out.extend_from_slice(rest.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> Pattern {
        super::super::regex::compile(p, crate::diagnostics::Span::default())
            .unwrap_or_else(|d| panic!("{p}: {}", d.primary.message))
    }

    #[test]
    fn look_ahead_and_look_behind_mean_what_pcre_means() {
        let not_admin = pattern("^/(?!admin)");
        assert!(not_admin.is_pcre());
        assert!(not_admin.is_match("/blog/post"));
        assert!(!not_admin.is_match("/admin/users"));
        let after_dot = pattern(r"(?<=\.)(jpe?g|png)$");
        assert!(after_dot.is_match("/a/b.jpeg"));
        assert!(!after_dot.is_match("/a/bjpeg"));
        let not_after_www = pattern(r"(?<!www\.)example\.com$");
        assert!(not_after_www.is_match("shop.example.com"));
        assert!(!not_after_www.is_match("www.example.com"));
        // Varnish's limits leave room for long subjects (an 8 KiB URL): a limit hit would be
        // no match.
        let long = format!("/{}/site.css?v=1", "a".repeat(8 << 10));
        assert!(pattern(r"^/(?!admin/).*\.css(?=\?|$)").is_match(&long));
        assert!(pattern(r"(?<=[?&])v=(\d+)").is_match(&long));
    }

    #[test]
    fn back_references_in_patterns_and_replacements() {
        // wikimedia's shape: the same word twice.
        let twice = pattern(r"^/(\w+)/\1(/|$)");
        assert!(twice.is_match("/wiki/wiki/Main_Page"));
        assert!(!twice.is_match("/wiki/w/Main_Page"));
        let swap = pattern(r"(?<=/)(\w+)-(\w+)(?=\.html)");
        let rep = super::super::regex::convert_replacement(r"\2-\1");
        assert_eq!(swap.replace("/a/foo-bar.html", &rep, false), "/a/bar-foo.html");
        let strip = pattern(r"(?<=[?&])utm_[a-z]+=[^&]*&?");
        assert_eq!(
            strip.replace("/p?utm_source=x&id=1&utm_medium=y", "", true),
            "/p?id=1&"
        );
        assert_eq!(strip.replace("/p?id=1", "", true), "/p?id=1");
    }

    #[test]
    fn atomic_groups_and_possessive_quantifiers_compile() {
        assert!(pattern("^(?>a+)b").is_match("aaab"));
        assert!(!pattern("^a++a").is_match("aaaa"));
    }

    #[test]
    fn a_catastrophic_pattern_stops_at_the_limit_as_no_match() {
        // Nested quantifiers with a look-behind (so it needs PCRE2): exponential backtracking
        // on a subject that almost matches.
        let bad = pattern(r"^(a+)+(?<!b)$");
        assert!(bad.is_pcre());
        let subject = format!("{}!", "a".repeat(40));
        let before = pcre_limit_hits();
        let started = std::time::Instant::now();
        assert!(!bad.is_match(&subject));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert!(pcre_limit_hits() > before);
        // regsub gives the subject back unchanged.
        assert_eq!(bad.replace(&subject, "x", false), subject);
        // The same pattern still matches what it should.
        assert!(bad.is_match("aaaa"));
    }

    #[test]
    fn a_pattern_neither_engine_compiles_is_explained_by_pcre() {
        let e = Pattern::new("(?<=a+)b", None).unwrap_err();
        assert!(e.message.contains("lookbehind"), "{e:?}");
        assert!(e.offset.is_some_and(|o| o <= "(?<=a+)b".len()), "{e:?}");
    }

    #[test]
    fn what_every_match_starts_with_is_known_from_literal_prefixes() {
        let starts = |p: &str| Starts::of(p);
        assert_eq!(starts("(\\?|&)preview=true"), Starts::AtByte(vec![b'&', b'?']));
        assert_eq!(
            starts("^/wp-(admin|login\\.php)"),
            Starts::AtStartWith(vec!["/wp-admin".into(), "/wp-login.php".into()])
        );
        assert_eq!(starts("(?i)\\.css$"), Starts::AtByte(vec![b'.']));
        // A match that may be empty or start with any of many bytes: nothing known. A multi-line
        // `^` still starts its matches with the literal.
        assert_eq!(starts("a*b"), Starts::AtByte(vec![b'a', b'b']));
        assert_eq!(starts("(x|y|=)_"), Starts::AtByte(vec![b'=', b'x', b'y']));
        assert_eq!(starts("(x|y|z|=)_"), Starts::Anywhere);
        assert_eq!(starts("x?"), Starts::Anywhere);
        assert_eq!(starts("[a-z]+="), Starts::Anywhere);
        assert_eq!(starts("(?m)^x"), Starts::AtByte(vec![b'x']));
    }

    #[test]
    fn rejecting_by_prefix_never_changes_a_match() {
        let patterns = [
            "(\\?|&)(utm_[a-z]+|fbclid|gclid|_ga)=",
            "^/wp-(admin|login\\.php|cron\\.php)",
            "(\\?|&)preview=true",
            "(?i)\\.(css|js|png|jpe?g)(\\?.*)?$",
            "wordpress_logged_in_|comment_author_",
            "^(GET|HEAD)$",
            "(?i)^/ADMIN",
            "(?m)^x",
            "é",
        ];
        let subjects = [
            "",
            "/",
            "/small",
            "/p?utm_source=x",
            "/p?id=1&fbclid=2",
            "/wp-admin/",
            "/wp-login.php",
            "/x/wp-admin",
            "/a?preview=true",
            "/a.CSS",
            "/a.jpeg?v=1",
            "wordpress_logged_in_1=2",
            "GET",
            "HEAD",
            "get",
            "/admin",
            "/Admin/x",
            "a\nx",
            "café",
            "x",
        ];
        for p in patterns {
            let linear = pattern(p);
            let plain = regex::Regex::new(p).unwrap();
            for s in subjects {
                assert_eq!(linear.is_match(s), plain.is_match(s), "{p} on {s:?}");
                assert_eq!(
                    linear.replace(s, "", true),
                    plain.replace_all(s, ""),
                    "{p} on {s:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn rejecting_by_prefix_agrees_with_the_regex_on_any_subject(s in "[a-zA-Z/?&=_.é-]{0,48}") {
            // One, two and three first bytes (each scanned on short and long subjects), and
            // four (nothing known).
            for p in ["(\\?|&)(utm_[a-z]+|fbclid)=", "^/wp-(admin|login)", "(?i)\\.(css|js)$", "^(GET|HEAD)$", "a*b", "(x|y|=)_", "(x|y|z|=)_"] {
                let plain = regex::Regex::new(p).unwrap();
                proptest::prop_assert_eq!(pattern(p).is_match(&s), plain.is_match(&s), "{} on {:?}", p, s);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn find_byte_agrees_with_str_find(s in "[a-z/?&=é]{0,80}", byte in proptest::sample::select(b"?&=/x".to_vec())) {
            proptest::prop_assert_eq!(find_byte(s.as_bytes(), byte), s.find(char::from(byte)));
        }
    }

    #[test]
    fn replacement_groups_expand() {
        let mut out = Vec::new();
        let groups = [Some(&b"whole"[..]), Some(&b"one"[..]), None];
        expand(
            "<${1}|${2}|$$|${0}|$x>",
            |i| groups.get(i).copied().flatten(),
            &mut out,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "<one||$|whole|$x>");
    }
}
