//! Conditional requests: answering a client's from the cache (RFC 9111 §4.3.2; RFC 9110 §13),
//! making our own to revalidate (RFC 9111 §4.3.1), and applying a 304 (§4.3.3, §4.3.4, §3.2).

use std::time::SystemTime;

use http::header::{
    self, HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, VARY,
};
use http::StatusCode;

use super::date::http_date;
use super::syntax::{list_members, trim_ows};

#[cfg(test)]
mod tests;

/// Result of evaluating a client's conditional request against a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConditionalOutcome {
    /// Answer 304 with [`not_modified_headers`] (plus `Age`).
    NotModified,
    /// Serve the stored response as usual (200, or 206 for a range).
    Proceed,
}

// === entity tags (RFC 9110 §8.8.3) ===

/// A parsed entity-tag: `[W/]"opaque"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntityTag<'a> {
    pub weak: bool,
    /// The opaque-tag without its quotes.
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one entity-tag (RFC 9110 §8.8.3); OWS around it is allowed.
    pub(crate) fn parse(bytes: &'a [u8]) -> Option<EntityTag<'a>> {
        let bytes = trim_ows(bytes);
        let (weak, rest) = match bytes.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, bytes),
        };
        let opaque = rest.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        // etagc = %x21 / %x23-7E / obs-text
        if opaque
            .iter()
            .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
        {
            Some(EntityTag { weak, opaque })
        } else {
            None
        }
    }

    /// Strong comparison: both strong and identical (RFC 9110 §8.8.3.2).
    pub(crate) fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison: identical opaque-tags, weakness ignored (RFC 9110 §8.8.3.2).
    pub(crate) fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// The stored response's entity-tag (first `ETag` line), if valid.
pub(crate) fn stored_etag(stored: &HeaderMap) -> Option<EntityTag<'_>> {
    EntityTag::parse(stored.get(ETAG)?.as_bytes())
}

/// Evaluates a client's `If-None-Match` / `If-Modified-Since` against a stored response
/// (RFC 9111 §4.3.2; RFC 9110 §13.1.2, §13.1.3, §13.2.2). For GET and HEAD requests, which
/// are the only ones answered from the cache.
///
/// - Preconditions apply only when the stored response is 2xx (RFC 9110 §13.2.1); otherwise
///   [`ConditionalOutcome::Proceed`].
/// - `If-None-Match` takes precedence: when present, `If-Modified-Since` is ignored. `*`
///   matches (a stored response exists); otherwise the list is compared with the stored
///   `ETag` by weak comparison, invalid members are skipped; any match → `NotModified`.
/// - `If-Modified-Since` is ignored when it is not exactly one valid HTTP-date. The stored
///   response's modification time is its `Last-Modified`, else its `Date`, else
///   `stored_date` (when it was received, §4.3.2); `NotModified` when that is not later than
///   the given date.
/// - Origin-only preconditions (`If-Match`, `If-Unmodified-Since`) are not evaluated here
///   (§4.3.2); `If-Range` belongs to `range`.
pub(crate) fn evaluate_client_conditional(
    req: &HeaderMap,
    stored_status: StatusCode,
    stored: &HeaderMap,
    stored_date: SystemTime,
) -> ConditionalOutcome {
    if !stored_status.is_success() {
        return ConditionalOutcome::Proceed;
    }
    if req.contains_key(IF_NONE_MATCH) {
        let etag = stored_etag(stored);
        for line in req.get_all(IF_NONE_MATCH) {
            for member in list_members(line.as_bytes()) {
                if member == b"*" {
                    return ConditionalOutcome::NotModified;
                }
                if let (Some(tag), Some(etag)) = (EntityTag::parse(member), etag.as_ref()) {
                    if tag.weak_eq(etag) {
                        return ConditionalOutcome::NotModified;
                    }
                }
            }
        }
        return ConditionalOutcome::Proceed;
    }
    let mut ims = req.get_all(IF_MODIFIED_SINCE).iter();
    let (Some(value), None) = (ims.next(), ims.next()) else {
        return ConditionalOutcome::Proceed;
    };
    let Some(since) = http_date(value) else {
        return ConditionalOutcome::Proceed;
    };
    let modified = stored
        .get(LAST_MODIFIED)
        .and_then(http_date)
        .or_else(|| stored.get(DATE).and_then(http_date))
        .unwrap_or(stored_date);
    if modified <= since {
        ConditionalOutcome::NotModified
    } else {
        ConditionalOutcome::Proceed
    }
}

/// The header fields of a 304 answered from a stored response (RFC 9110 §15.4.5): those of
/// `Content-Location`, `Date`, `ETag`, `Vary`, `Cache-Control` and `Expires` present in the
/// stored response, and `Last-Modified` when there is no `ETag` (it then guides cache
/// updates). All field lines are copied. `Age` is the caller's (RFC 9111 §5.1).
pub(crate) fn not_modified_headers(stored: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    let last_modified = (!stored.contains_key(ETAG)).then_some(LAST_MODIFIED);
    let names = [CONTENT_LOCATION, DATE, ETAG, VARY, CACHE_CONTROL, EXPIRES];
    for name in names.into_iter().chain(last_modified) {
        for v in stored.get_all(&name) {
            out.append(name.clone(), v.clone());
        }
    }
    out
}

/// The validators to send when revalidating a stored response (RFC 9111 §4.3.1):
/// `If-None-Match` with its `ETag` (when a valid entity-tag) and `If-Modified-Since` with its
/// `Last-Modified` (when a valid HTTP-date). Empty when it has neither: the caller then makes
/// an unconditional request.
pub(crate) fn conditional_request_headers(stored: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    if let Some(etag) = stored.get(ETAG) {
        if EntityTag::parse(etag.as_bytes()).is_some() {
            out.insert(IF_NONE_MATCH, etag.clone());
        }
    }
    if let Some(lm) = stored.get(LAST_MODIFIED) {
        if http_date(lm).is_some() {
            out.insert(IF_MODIFIED_SINCE, lm.clone());
        }
    }
    out
}

/// Whether a 304 received while revalidating selects this stored response for update
/// (RFC 9111 §4.3.4). `false`: do not update; fetch again without conditions.
///
/// - A strong `ETag` in the 304 must strongly match the stored one.
/// - A weak `ETag` must weakly match it.
/// - No `ETag` but `Last-Modified`: must equal the stored `Last-Modified`.
/// - No validator at all: `true`. §4.3.4 only covers this for a stored response without
///   validators, but our request carried this response's validators, and origins commonly
///   omit them from 304s; treating the 304 as confirming the one response we asked about is
///   the established behaviour.
pub(crate) fn validates_stored(stored: &HeaderMap, not_modified: &HeaderMap) -> bool {
    if let Some(new) = not_modified.get(ETAG) {
        let (Some(new), Some(old)) = (EntityTag::parse(new.as_bytes()), stored_etag(stored)) else {
            return false;
        };
        return if new.weak {
            new.weak_eq(&old)
        } else {
            new.strong_eq(&old)
        };
    }
    if let Some(new) = not_modified.get(LAST_MODIFIED) {
        let old = stored.get(LAST_MODIFIED).and_then(http_date);
        return http_date(new).is_some() && http_date(new) == old;
    }
    true
}

/// Fields never taken from a 304 into a stored response (RFC 9111 §3.2, §3.1; RFC 9110
/// §7.6.1): `Content-Length` (§3.2), hop-by-hop and connection-specific fields, proxy
/// authentication fields (§3.1), `Content-Range` (processed by the recipient, §3.2), and
/// `Content-Encoding` / `Trailer`, which describe the stored body bytes and must stay
/// consistent with them (§3.2: fields "the cache's stored response depends upon").
const NOT_UPDATED: &[&str] = &[
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authentication-info",
    "proxy-authorization",
    "content-range",
    "content-encoding",
    "trailer",
];

/// Updates a stored response's header fields from a 304 (RFC 9111 §4.3.4, §3.2): every field
/// in the 304 replaces all stored lines of that field, except the [`NOT_UPDATED`] ones and
/// those named in the 304's `Connection`.
///
/// `Age` describes the message that carried it, so a stored `Age` is dropped when the 304
/// has none. The caller should first `age::ensure_date` the 304, then recompute directives,
/// `strip_field_scoped`, initial age, lifetime and the Vary rule from the merged headers with
/// the new request/response times.
pub(crate) fn merge_304(stored: &mut HeaderMap, not_modified: &HeaderMap) {
    let connection_named: Vec<HeaderName> = not_modified
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|line| list_members(line.as_bytes()))
        .filter_map(|m| HeaderName::from_bytes(m).ok())
        .collect();
    for name in not_modified.keys() {
        if NOT_UPDATED.contains(&name.as_str()) || connection_named.contains(name) {
            continue;
        }
        stored.remove(name);
        for v in not_modified.get_all(name) {
            stored.append(name.clone(), v.clone());
        }
    }
    if !not_modified.contains_key(header::AGE) {
        stored.remove(header::AGE);
    }
}

/// `true` if `value` is a strong validator match for `If-Range` (RFC 9110 §13.1.5): a strong
/// entity-tag equal to the stored strong `ETag`, or an HTTP-date exactly equal to the stored
/// `Last-Modified` when that is strong for a cache (at least 60 s before the stored `Date`,
/// RFC 9110 §8.8.2.2).
pub(crate) fn if_range_matches(value: &HeaderValue, stored: &HeaderMap) -> bool {
    let bytes = trim_ows(value.as_bytes());
    if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
        return match (EntityTag::parse(bytes), stored_etag(stored)) {
            (Some(tag), Some(etag)) => tag.strong_eq(&etag),
            _ => false,
        };
    }
    let (Some(date), Some(lm), Some(stored_date)) = (
        http_date(value),
        stored.get(LAST_MODIFIED).and_then(http_date),
        stored.get(DATE).and_then(http_date),
    ) else {
        return false;
    };
    let strong = stored_date.duration_since(lm).is_ok_and(|d| d.as_secs() >= 60);
    strong && date == lm
}
