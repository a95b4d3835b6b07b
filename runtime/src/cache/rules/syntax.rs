//! Shared lexical helpers for field values (RFC 9110 §5.6). Private to `rules`.

/// The largest delta-seconds value: larger ones saturate here (RFC 9111 §1.2.2).
pub(super) const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// `tchar` (RFC 9110 §5.6.2).
pub(super) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Trims optional whitespace (SP / HTAB) at both ends (RFC 9110 §5.6.3).
pub(super) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Parses `1*DIGIT` as delta-seconds, saturating at 2^31 (RFC 9111 §1.2.2). Anything else
/// (empty, sign, fraction, prefix or suffix, non-ASCII digits) is `None`.
pub(super) fn parse_delta(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for b in bytes {
        v = v * 10 + u64::from(b - b'0');
        if v >= DELTA_SECONDS_MAX {
            return Some(DELTA_SECONDS_MAX);
        }
    }
    Some(v)
}

/// Given `bytes[start] == b'"'`, the index just past the closing quote, honouring
/// quoted-pairs (RFC 9110 §5.6.4); `None` when unterminated.
pub(super) fn quoted_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The members of one `#list` field line (RFC 9110 §5.6.1), split on commas outside
/// quoted-strings, with OWS trimmed; empty members are skipped.
pub(super) fn list_members(line: &[u8]) -> ListMembers<'_> {
    ListMembers { rest: line }
}

/// Iterator returned by [`list_members`].
pub(super) struct ListMembers<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for ListMembers<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let bytes = self.rest;
            let mut i = 0;
            while i < bytes.len() && bytes[i] != b',' {
                i = if bytes[i] == b'"' {
                    quoted_end(bytes, i).unwrap_or(bytes.len())
                } else {
                    i + 1
                };
            }
            let i = i.min(bytes.len());
            let member = trim_ows(&bytes[..i]);
            self.rest = bytes.get(i + 1..).unwrap_or(&[]);
            if !member.is_empty() {
                return Some(member);
            }
        }
    }
}
