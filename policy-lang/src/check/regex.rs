//! Regex compilation at check time. VCL regexes are PCRE2; we use Rust's
//! `regex`, which lacks look-around and back-references. Those get their
//! own diagnostic with a rewrite hint instead of the raw parser error.

use regex::{Regex, RegexBuilder};

use crate::diagnostics::{Code, Diagnostic, Span};

/// Compiled-size cap: keeps pathological patterns from slowing loads. Unicode classes repeated
/// with a count (`\w{23,}`, seen in real VCL) need a few MiB.
const SIZE_LIMIT: usize = 16 << 20;

pub(crate) fn compile(pattern: &str, span: Span) -> Result<Regex, Diagnostic> {
    if let Some((what, hint)) = pcre_only_feature(pattern) {
        return Err(Diagnostic::new(
            Code::UnsupportedRegex,
            span,
            format!("regex uses {what}, which edgecache's regex engine does not support"),
        )
        .label(format!("{what} in this pattern"))
        .hint(hint));
    }
    RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let detail = match &e {
                regex::Error::Syntax(s) => s
                    .lines()
                    .rev()
                    .find(|l| l.starts_with("error:"))
                    .map(|l| l.trim_start_matches("error:").trim().to_string())
                    .unwrap_or_else(|| s.clone()),
                regex::Error::CompiledTooBig(_) => "pattern is too large".to_string(),
                other => other.to_string(),
            };
            let hint = if matches!(e, regex::Error::CompiledTooBig(_)) {
                "classes such as `\\w`, `\\d` and `\\s` are Unicode-aware here and grow large when \
                 repeated; PCRE's (and Varnish's) are ASCII: write `(?-u:\\w)` or `[A-Za-z0-9_]`"
            } else {
                "VCL regexes use PCRE syntax; edgecache compiles them with Rust's `regex` crate (https://docs.rs/regex)"
            };
            Diagnostic::new(Code::BadRegex, span, "regex does not compile")
                .label(detail)
                .hint(hint)
        })
}

/// Detects look-around and back-references outside character classes.
fn pcre_only_feature(p: &str) -> Option<(&'static str, String)> {
    let b = p.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if !in_class {
                    if let Some(&n) = b.get(i + 1) {
                        if (b'1'..=b'9').contains(&n) {
                            return Some((
                                "a back-reference (`\\N`)",
                                "match the candidates explicitly, e.g. `(a|b)x(a|b)` plus a \
                                 comparison in VCL, or split the test into two conditions"
                                    .into(),
                            ));
                        }
                        if n == b'k' && matches!(b.get(i + 2), Some(b'<' | b'{' | b'\'')) {
                            return Some((
                                "a named back-reference (`\\k<name>`)",
                                "split the test into two conditions".into(),
                            ));
                        }
                    }
                }
                i += 2;
                continue;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'(' if !in_class => {
                let rest = &p[i..];
                if rest.starts_with("(?=") || rest.starts_with("(?!") {
                    let neg = rest.starts_with("(?!");
                    return Some((
                        if neg {
                            "a negative look-ahead `(?!...)`"
                        } else {
                            "a look-ahead `(?=...)`"
                        },
                        if neg {
                            "test the excluded part separately: instead of \
                             `req.url ~ \"^/(?!admin)\"` write `req.url ~ \"^/\" && req.url !~ \"^/admin\"`"
                                .into()
                        } else {
                            "match the look-ahead text as part of the pattern, or add a second \
                             `~` condition joined with `&&`"
                                .into()
                        },
                    ));
                }
                if rest.starts_with("(?<=") || rest.starts_with("(?<!") {
                    let neg = rest.starts_with("(?<!");
                    return Some((
                        if neg {
                            "a negative look-behind `(?<!...)`"
                        } else {
                            "a look-behind `(?<=...)`"
                        },
                        if neg {
                            "test the excluded part separately with `!~`, joined with `&&`".into()
                        } else {
                            "include the look-behind text in the match (use a capture group and \
                             `\\1` in regsub to keep only the part you need)"
                                .into()
                        },
                    ));
                }
                if rest.starts_with("(?>") {
                    return Some(("an atomic group `(?>...)`", "use a plain group `(?:...)`".into()));
                }
            }
            b'+' | b'*' | b'?' | b'}' if !in_class && b.get(i + 1) == Some(&b'+') => {
                return Some(("a possessive quantifier", "drop the trailing `+`".into()));
            }
            _ => {}
        }
        i += 1;
    }
    None
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
        assert!(pcre_only_feature("^/(?!admin)").is_some());
        assert!(pcre_only_feature("(?<=foo)bar").is_some());
        assert!(pcre_only_feature(r"(a)\1").is_some());
        assert!(pcre_only_feature(r"[\1]").is_none());
        assert!(pcre_only_feature(r"^/(?i)foo\.(jpg|png)$").is_none());
    }

    #[test]
    fn counted_unicode_classes_from_real_vcl_compile() {
        let span = Span::default();
        assert!(compile(r"^\w{23,}\b", span).is_ok());
        let too_big = compile(r"\w{2000}\w{2000}\w{2000}", span).unwrap_err();
        let hint = too_big.hint.unwrap_or_default();
        assert!(hint.contains("(?-u:\\w)"), "{hint}");
    }
}
