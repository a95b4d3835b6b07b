//! `std.fnmatch`: shell wildcard matching as fnmatch(3) does it.
//!
//! glibc's rules for `*`, `?`, bracket expressions with `!`/`^` negation, ranges and
//! `[:class:]`, and the FNM_PATHNAME, FNM_NOESCAPE and FNM_PERIOD flags, on bytes.

/// fnmatch(3)'s flags, named as `std.fnmatch`'s arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flags {
    /// `/` is matched only by `/` (FNM_PATHNAME).
    pub pathname: bool,
    /// `\` is an ordinary character (FNM_NOESCAPE).
    pub noescape: bool,
    /// A leading `.` (at the start, or after `/` with `pathname`) is matched only by `.`
    /// (FNM_PERIOD).
    pub period: bool,
}

pub(crate) fn fnmatch(pattern: &str, subject: &str, flags: Flags) -> bool {
    matches(pattern.as_bytes(), subject.as_bytes(), flags)
}

/// Whether `s` matches `p`. A failure backtracks to the most recent `*` only, as
/// glibc does (a later star can absorb whatever an earlier one could), so matching is linear
/// in practice.
fn matches(p: &[u8], s: &[u8], flags: Flags) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The last `*`: the pattern index after it and the subject index it has absorbed up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if step(p, s, &mut pi, &mut si, &mut star, flags) {
            continue;
        }
        if pi == p.len() && si == s.len() {
            return true;
        }
        // Let the last star absorb one more byte, if it may.
        match &mut star {
            Some((sp, ss)) if *ss < s.len() && !(flags.pathname && s[*ss] == b'/') => {
                *ss += 1;
                pi = *sp;
                si = *ss;
            }
            _ => return false,
        }
    }
}

/// Advances over one pattern element that matches at `si`; false when none does (or the
/// pattern is used up).
fn step(
    p: &[u8],
    s: &[u8],
    pi: &mut usize,
    si: &mut usize,
    star: &mut Option<(usize, usize)>,
    flags: Flags,
) -> bool {
    let Some(&pc) = p.get(*pi) else { return false };
    let c = s.get(*si).copied();
    let leading_period =
        flags.period && c == Some(b'.') && (*si == 0 || (flags.pathname && s[*si - 1] == b'/'));
    // What a wildcard may stand for here.
    let wild_ok = c.is_some_and(|c| !(flags.pathname && c == b'/')) && !leading_period;
    match pc {
        b'*' if !leading_period => {
            while p.get(*pi) == Some(&b'*') {
                *pi += 1;
            }
            *star = Some((*pi, *si));
            true
        }
        b'*' => false,
        b'?' if wild_ok => {
            *pi += 1;
            *si += 1;
            true
        }
        b'?' => false,
        b'[' => match bracket(p, *pi, c, flags) {
            Some((matched, next)) => {
                if matched && wild_ok {
                    *pi = next;
                    *si += 1;
                }
                matched && wild_ok
            }
            // Not a bracket expression: a literal `[`.
            None => literal(b'[', 1, c, pi, si),
        },
        b'\\' if !flags.noescape => match p.get(*pi + 1) {
            Some(&escaped) => literal(escaped, 2, c, pi, si),
            None => literal(b'\\', 1, c, pi, si),
        },
        _ => literal(pc, 1, c, pi, si),
    }
}

fn literal(want: u8, width: usize, c: Option<u8>, pi: &mut usize, si: &mut usize) -> bool {
    if c != Some(want) {
        return false;
    }
    *pi += width;
    *si += 1;
    true
}

/// The bracket expression at `p[start] == '['` against `c` (no byte never matches): whether
/// it matches and where the pattern continues, or `None` when it is not closed (then `[` is
/// literal).
fn bracket(p: &[u8], start: usize, c: Option<u8>, flags: Flags) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let b = *p.get(i)?;
        if b == b']' && !first {
            i += 1;
            break;
        }
        first = false;
        if b == b'[' && p.get(i + 1) == Some(&b':') {
            let end = p[i + 2..].windows(2).position(|w| w == b":]")? + i + 2;
            matched |= c.is_some_and(|c| class(&p[i + 2..end], c));
            i = end + 2;
            continue;
        }
        let lo = if b == b'\\' && !flags.noescape {
            i += 1;
            *p.get(i)?
        } else {
            b
        };
        i += 1;
        if p.get(i) == Some(&b'-') && p.get(i + 1).is_some_and(|n| *n != b']') {
            let mut hi = p[i + 1];
            i += 2;
            if hi == b'\\' && !flags.noescape {
                hi = *p.get(i)?;
                i += 1;
            }
            matched |= c.is_some_and(|c| (lo..=hi).contains(&c));
        } else {
            matched |= c == Some(lo);
        }
    }
    Some((c.is_some() && matched != negate, i))
}

fn class(name: &[u8], c: u8) -> bool {
    match name {
        b"alnum" => c.is_ascii_alphanumeric(),
        b"alpha" => c.is_ascii_alphabetic(),
        b"blank" => c == b' ' || c == b'\t',
        b"cntrl" => c.is_ascii_control(),
        b"digit" => c.is_ascii_digit(),
        b"graph" => c.is_ascii_graphic(),
        b"lower" => c.is_ascii_lowercase(),
        b"print" => c.is_ascii_graphic() || c == b' ',
        b"punct" => c.is_ascii_punctuation(),
        b"space" => c.is_ascii_whitespace() || c == 0x0b,
        b"upper" => c.is_ascii_uppercase(),
        b"xdigit" => c.is_ascii_hexdigit(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Flags = Flags {
        pathname: true,
        noescape: false,
        period: false,
    };

    fn m(p: &str, s: &str) -> bool {
        fnmatch(p, s, DEFAULT)
    }

    #[test]
    fn examples_from_the_std_documentation() {
        // vmod_std.vcc, std.fnmatch (patterns as VCL strings, where `\*` is `*`).
        assert!(m("/foo/*", "/foo/bar") && m("/foo/*", "/foo/baz"));
        assert!(m("/foo/*/*", "/foo/bar/baz") && m("/foo/*/*", "/foo/baz/quux"));
        assert!(m("/foo/*/quux", "/foo/bar/quux"));
        assert!(!m("/foo/*/quux", "/foo/bar/baz/quux"));
        let no_pathname = Flags {
            pathname: false,
            ..DEFAULT
        };
        assert!(fnmatch("/foo/*/quux", "/foo/bar/quux", no_pathname));
        assert!(fnmatch("/foo/*/quux", "/foo/bar/baz/quux", no_pathname));
        for s in ["/foo/bar", "/foo/car", "/foo/far"] {
            assert!(m("/foo/?ar", s), "{s}");
        }
        assert!(m("/foo/[!0-9]", "/foo/x"));
        assert!(!m("/foo/[!0-9]", "/foo/5"));
        // `\\` matches `\` when noescape is true, and `\\` when false.
        let noescape = Flags {
            noescape: true,
            ..DEFAULT
        };
        assert!(fnmatch("a\\b", "a\\b", noescape) && !fnmatch("a\\b", "ab", noescape));
        assert!(m("a\\b", "ab") && m("a\\*", "a*") && !m("a\\*", "ab"));
    }

    #[test]
    fn wildcards_classes_and_periods() {
        assert!(m("*.css", "site.css") && !m("*.css", "a/site.css"));
        assert!(m("*", "") && !m("?", ""));
        assert!(m("*a*b*c", "xxaxxbxxc") && !m("*a*b*c", "xxaxxcxxb"));
        assert!(m("[[:upper:]]*", "Hello") && !m("[[:upper:]]*", "hello"));
        assert!(m("[]x]", "]") && m("[a-c]", "b") && m("[^a-c]", "d"));
        assert!(m("[abc", "[abc"), "an unclosed bracket is literal");
        let period = Flags {
            period: true,
            ..DEFAULT
        };
        assert!(!fnmatch("*", ".hidden", period) && fnmatch(".*", ".hidden", period));
        assert!(!fnmatch("/x/*", "/x/.git", period) && fnmatch("/x/*", "/x/.git", DEFAULT));
        assert!(!m("/*", "/a/b") && m("/*/*", "/a/b"));
    }
}
