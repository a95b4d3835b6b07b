//! Secondary keys from `Vary` (RFC 9111 §4.1).
//!
//! The rule is computed once from the stored response; each stored variant keeps its
//! fingerprint, and a lookup compares the request against it with [`VaryRule::matches`],
//! which does not allocate.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, VARY};

use super::syntax::{list_members, quoted_end};

#[cfg(test)]
mod tests;

/// How a stored response selects the requests it may answer (RFC 9111 §4.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum VaryRule {
    /// No `Vary`: every request matches.
    #[default]
    None,
    /// `Vary: *` anywhere (any position, any field line), or a member that is not a valid
    /// field name: no request ever matches.
    Star,
    /// The selecting fields: lowercase, deduplicated, sorted by name.
    Fields(Vec<HeaderName>),
}

impl VaryRule {
    /// Reads every `Vary` field line of a response (RFC 9111 §4.1; RFC 9110 §12.5.5).
    /// Field names are case-insensitive, so they are lowercased; order and duplicates do not
    /// change the rule.
    pub(crate) fn from_response(resp: &HeaderMap) -> VaryRule {
        let mut fields: Vec<HeaderName> = Vec::new();
        for line in resp.get_all(VARY) {
            for member in list_members(line.as_bytes()) {
                if member == b"*" {
                    return VaryRule::Star;
                }
                match HeaderName::from_bytes(member) {
                    Ok(name) => fields.push(name),
                    Err(_) => return VaryRule::Star,
                }
            }
        }
        if fields.is_empty() {
            return VaryRule::None;
        }
        fields.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        fields.dedup();
        VaryRule::Fields(fields)
    }

    /// The canonical bytes of the request's selecting fields, or `None` for `Vary: *` (never
    /// matches). Two requests match under this rule iff their fingerprints are equal
    /// (RFC 9111 §4.1). Computed when storing a variant; see [`VaryRule::matches`] for lookups.
    ///
    /// Per field: all field lines are combined as one list (RFC 9110 §5.3); members are split
    /// on commas outside quoted-strings, empty members dropped; outside quoted-strings,
    /// whitespace next to `,` `;` `=` and at the ends is removed and other runs of SP / HTAB
    /// become one SP (whitespace "where allowed in the field's syntax"). `Accept-Encoding`,
    /// `Accept-Language` and `Accept-Charset` values are case-insensitive, so they are
    /// lowercased. An absent field differs from an empty one.
    pub(crate) fn request_fingerprint(&self, req: &HeaderMap) -> Option<Bytes> {
        let mut out = Vec::new();
        self.write(req, &mut out)?;
        Some(Bytes::from(out))
    }

    /// `true` when `req` has the same selecting fields as the request whose
    /// [`request_fingerprint`](VaryRule::request_fingerprint) is `fingerprint`. Never true for
    /// `Star`. Does not allocate.
    pub(crate) fn matches(&self, req: &HeaderMap, fingerprint: &[u8]) -> bool {
        let mut cmp = Compare {
            expected: fingerprint,
            ok: true,
        };
        self.write(req, &mut cmp).is_some() && cmp.ok && cmp.expected.is_empty()
    }

    fn write(&self, req: &HeaderMap, out: &mut impl Sink) -> Option<()> {
        match self {
            VaryRule::None => Some(()),
            VaryRule::Star => None,
            VaryRule::Fields(fields) => {
                for name in fields {
                    out.put(name.as_str().as_bytes());
                    out.put(b":");
                    let mut lines = req.get_all(name).iter().peekable();
                    if lines.peek().is_none() {
                        out.put(&[0]);
                    } else {
                        out.put(&[1]);
                        let lower = lowercase_values(name);
                        let mut first = true;
                        for line in lines {
                            for member in list_members(line.as_bytes()) {
                                if !first {
                                    out.put(b",");
                                }
                                first = false;
                                normalise_member(member, lower, out);
                            }
                        }
                    }
                    out.put(b"\n");
                }
                Some(())
            }
        }
    }
}

/// Fields whose values are wholly case-insensitive (RFC 9110 §12.5.3, §12.5.4; RFC 4647).
fn lowercase_values(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "accept-encoding" | "accept-language" | "accept-charset"
    )
}

/// Writes one trimmed list member with whitespace normalised outside quoted-strings.
fn normalise_member(member: &[u8], lower: bool, out: &mut impl Sink) {
    let mut i = 0;
    let mut pending_space = false;
    let mut after_delim = false;
    while i < member.len() {
        let b = member[i];
        match b {
            b' ' | b'\t' => {
                if !after_delim {
                    pending_space = true;
                }
                i += 1;
            }
            b';' | b'=' => {
                pending_space = false;
                after_delim = true;
                out.put(&[b]);
                i += 1;
            }
            b'"' => {
                if pending_space {
                    out.put(b" ");
                }
                pending_space = false;
                after_delim = false;
                let end = quoted_end(member, i).unwrap_or(member.len());
                out.put(&member[i..end]);
                i = end;
            }
            _ => {
                if pending_space {
                    out.put(b" ");
                }
                pending_space = false;
                after_delim = false;
                out.put(&[if lower { b.to_ascii_lowercase() } else { b }]);
                i += 1;
            }
        }
    }
}

/// Where normalised bytes go: a buffer, or a comparison against a stored fingerprint.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

struct Compare<'a> {
    expected: &'a [u8],
    ok: bool,
}

impl Sink for Compare<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if !self.ok {
            return;
        }
        match self.expected.strip_prefix(bytes) {
            Some(rest) => self.expected = rest,
            None => self.ok = false,
        }
    }
}
