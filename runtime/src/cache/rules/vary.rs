//! Secondary keys from `Vary` (RFC 9111 §4.1).
//!
//! The rule is computed once from the stored response; each stored variant keeps its
//! fingerprint, and a lookup compares the request against it with [`VaryRule::matches`],
//! which does not allocate.

use http::header::{GetAll, HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, VARY};

use super::syntax::{is_tchar, list_members, quoted_end, trim_ows};

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
    /// `Accept-Language` and `Accept-Charset` are weighted lists whose meaning is the weight of
    /// each item, so they are written in canonical form (see [`write_weighted`]: `fr, EN;q=1.0`
    /// is `en,fr`), or lowercased when they do not parse. An absent field differs from an
    /// empty one.
    pub(crate) fn request_fingerprint(&self, req: &HeaderMap) -> Option<Box<[u8]>> {
        let mut out = Vec::new();
        self.write(req, &mut out)?;
        Some(out.into_boxed_slice())
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
                    } else if !(is_weighted_list(name) && write_weighted(req.get_all(name), out)) {
                        out.put(&[1]);
                        let lower = is_weighted_list(name);
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

/// The most items of a weighted list put in canonical order; a longer list is compared as
/// written (sorting it would need a buffer on the lookup path).
const MAX_WEIGHTED_ITEMS: usize = 16;

/// A weight in thousandths (RFC 9110 §12.4.2: at most three decimals); no weight is 1.
type Weight = u16;

/// Writes a weighted list in canonical form, so that requests meaning the same match
/// (RFC 9111 §4.1 lets a cache normalise "by the field's syntax"): items lowercased and sorted,
/// each with its weight written the shortest way and left out when it is 1 (`q=1.0`, `q=1`
/// and none are the same), whitespace dropped. A marker byte `2` tells this form from the
/// verbatim one. `false`, having written nothing, when a member is not `item [weight]` or
/// there are more than [`MAX_WEIGHTED_ITEMS`]: the caller then writes the value as usual.
fn write_weighted(lines: GetAll<'_, HeaderValue>, out: &mut impl Sink) -> bool {
    let mut items: [(&[u8], Weight); MAX_WEIGHTED_ITEMS] = [(&[], 0); MAX_WEIGHTED_ITEMS];
    let mut count = 0;
    for line in lines {
        for member in list_members(line.as_bytes()) {
            let (Some(parsed), Some(slot)) = (weighted_item(member), items.get_mut(count)) else {
                return false;
            };
            *slot = parsed;
            count += 1;
        }
    }
    let items = &mut items[..count];
    items.sort_unstable_by(|a, b| {
        a.0.iter()
            .map(u8::to_ascii_lowercase)
            .cmp(b.0.iter().map(u8::to_ascii_lowercase))
            .then(a.1.cmp(&b.1))
    });
    out.put(&[2]);
    for (i, (item, weight)) in items.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        for b in item.iter() {
            out.put(&[b.to_ascii_lowercase()]);
        }
        if *weight < 1000 {
            let digits = [
                b'0' + (weight / 100) as u8,
                b'0' + (weight / 10 % 10) as u8,
                b'0' + (weight % 10) as u8,
            ];
            let significant = digits.iter().rposition(|&d| d != b'0').map_or(0, |last| last + 1);
            out.put(b";q=0");
            if significant > 0 {
                out.put(b".");
                out.put(&digits[..significant]);
            }
        }
    }
    true
}

/// `item [ OWS ";" OWS "q" "=" qvalue ]` of a weighted list (RFC 9110 §12.4.2), OWS also
/// allowed around `=`: the item (a token, or a language range, which is one) and its weight.
/// `None` for anything else: another parameter, an invalid weight, a non-token item.
fn weighted_item(member: &[u8]) -> Option<(&[u8], Weight)> {
    let (item, weight) = match member.iter().position(|&b| b == b';') {
        None => (member, None),
        Some(at) => (trim_ows(&member[..at]), Some(trim_ows(&member[at + 1..]))),
    };
    if item.is_empty() || !item.iter().copied().all(is_tchar) {
        return None;
    }
    let Some(weight) = weight else {
        return Some((item, 1000));
    };
    let (name, value) = weight.split_at(weight.iter().position(|&b| b == b'=')?);
    if !trim_ows(name).eq_ignore_ascii_case(b"q") {
        return None;
    }
    Some((item, qvalue(trim_ows(&value[1..]))?))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` (RFC 9110 §12.4.2), in
/// thousandths.
fn qvalue(value: &[u8]) -> Option<Weight> {
    let (unit, decimals) = match value {
        [unit] => (*unit, &[][..]),
        [unit, b'.', decimals @ ..] if decimals.len() <= 3 => (*unit, decimals),
        _ => return None,
    };
    let mut thousandths: Weight = 0;
    for (i, &d) in decimals.iter().enumerate() {
        if !d.is_ascii_digit() {
            return None;
        }
        thousandths += Weight::from(d - b'0') * [100, 10, 1][i];
    }
    match unit {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Whether a request accepts gzip, as Varnish's `http_gzip_support` decides it
/// (`RFC2616_Req_Gzip`): `Accept-Encoding` names `x-gzip` (HTTP/1.0's name, which has no
/// weights, RFC 9110 §8.4.1.3), or `gzip` with a weight above 0 (§12.5.3). A coding's other
/// parameters are ignored; an invalid weight is not acceptance. `*` does not count: the
/// cache asks origins for gzip by name.
pub(crate) fn accepts_gzip(req: &HeaderMap) -> bool {
    req.get_all(ACCEPT_ENCODING).iter().any(|line| {
        list_members(line.as_bytes()).any(|member| {
            let mut parts = member.split(|&b| b == b';').map(trim_ows);
            let coding = parts.next().unwrap_or_default();
            if coding.eq_ignore_ascii_case(b"x-gzip") {
                return true;
            }
            if !coding.eq_ignore_ascii_case(b"gzip") {
                return false;
            }
            let weight = parts.find_map(|param| {
                let (name, value) = param.split_at(param.iter().position(|&b| b == b'=')?);
                trim_ows(name)
                    .eq_ignore_ascii_case(b"q")
                    .then(|| qvalue(trim_ows(&value[1..])).unwrap_or(0))
            });
            weight.unwrap_or(1000) > 0
        })
    })
}

/// Fields whose values are lists of case-insensitive items with an optional weight
/// (`item [ OWS ";" OWS "q=" qvalue ]`): `Accept-Encoding` (RFC 9110 §12.5.3),
/// `Accept-Language` (§12.5.4, RFC 4647) and `Accept-Charset` (§12.5.2). Their meaning does
/// not depend on the order of the items, only on the weight each one has (§12.4.2).
fn is_weighted_list(name: &HeaderName) -> bool {
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
