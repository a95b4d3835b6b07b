//! Compiling a VCL regex from its source, and the `\1` replacement syntax.
//!
//! For policies and ban expressions. VCL regexes are PCRE2: a pattern runs on Rust's `regex`
//! when it compiles there and uses nothing whose meaning differs (look-around,
//! back-references, atomic groups, possessive quantifiers), otherwise on PCRE2
//! (`pattern.rs`). A pattern neither compiles is explained with PCRE2's message, as
//! Varnish would.

use regex::RegexBuilder;

use super::pattern::Pattern;
use crate::diagnostics::{Code, Diagnostic, Span};

/// Compiled-size cap for the `regex` crate: keeps pathological patterns from slowing loads.
/// Past it (Unicode classes repeated with a count, `\w{2000}`), PCRE2's ASCII classes take over.
const SIZE_LIMIT: usize = 16 << 20;

pub(crate) fn compile(pattern: &str, span: Span) -> Result<Pattern, Diagnostic> {
    let linear = if needs_pcre(pattern) {
        None
    } else {
        RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build().ok()
    };
    Pattern::new(pattern, linear).map_err(|e| {
        let at = e
            .offset
            .map(|o| format!(" (at byte {o} of the pattern)"))
            .unwrap_or_default();
        Diagnostic::new(Code::BadRegex, span, "regex does not compile")
            .label(format!("{}{at}", e.message))
            .hint("VCL regexes are PCRE2 patterns, as in Varnish (https://www.pcre.org/current/doc/html/pcre2pattern.html)")
    })
}

/// Whether `p` uses, outside character classes, a PCRE construct that Rust's `regex` lacks or
/// reads differently: look-around, back-references, atomic groups, possessive quantifiers.
fn needs_pcre(p: &str) -> bool {
    let b = p.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if !in_class {
                    match b.get(i + 1) {
                        Some(b'1'..=b'9') => return true,
                        Some(b'k') if matches!(b.get(i + 2), Some(b'<' | b'{' | b'\'')) => return true,
                        _ => {}
                    }
                }
                i += 2;
                continue;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class => {
                let rest = &p[i..];
                if ["(?=", "(?!", "(?<=", "(?<!", "(?>"]
                    .iter()
                    .any(|g| rest.starts_with(g))
                {
                    return true;
                }
            }
            b'+' | b'*' | b'?' | b'}' if !in_class && b.get(i + 1) == Some(&b'+') => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// VCL regsub replacement (`\0`, `\&`, `\1`..`\9`) -> `regex` syntax (`${N}`).
pub(crate) fn convert_replacement(vcl: &str) -> String {
    let mut out = String::with_capacity(vcl.len() + 8);
    let mut chars = vcl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d @ '0'..='9') => {
                    chars.next();
                    out.push_str("${");
                    out.push(d);
                    out.push('}');
                }
                Some('&') => {
                    chars.next();
                    out.push_str("${0}");
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacement_syntax() {
        assert_eq!(convert_replacement(r"\1-\0$x\&"), "${1}-${0}$$x${0}");
    }

    #[test]
    fn pcre_features_detected() {
        assert!(needs_pcre("^/(?!admin)"));
        assert!(needs_pcre("(?<=foo)bar"));
        assert!(needs_pcre(r"(a)\1"));
        assert!(needs_pcre("^a++"));
        assert!(!needs_pcre(r"[\1]"));
        assert!(!needs_pcre(r"^/(?i)foo\.(jpg|png)$"));
    }

    #[test]
    fn counted_unicode_classes_from_real_vcl_compile() {
        let span = Span::default();
        assert!(!compile(r"^\w{23,}\b", span).unwrap().is_pcre());
        // Too large for `regex` with Unicode classes; PCRE2's are ASCII, as in Varnish.
        let big = compile(r"\w{2000}\w{2000}\w{2000}", span).unwrap();
        assert!(big.is_pcre());
        assert!(big.is_match(&"a".repeat(6000)));
    }

    #[test]
    fn a_pattern_neither_engine_compiles_gets_pcres_message() {
        let d = compile("^/(unclosed", Span::default()).unwrap_err();
        assert_eq!(d.code, Code::BadRegex);
        assert!(
            d.primary.message.contains("missing closing parenthesis"),
            "{}",
            d.primary.message
        );
    }
}
