//! Partial content kept by the cache (RFC 9111 §3.3, §3.4; RFC 9110 §14.4, §15.3.7): reading a
//! `206`'s `Content-Range`, the fixed-size slices a representation is stored in, and whether
//! a new part may be combined with stored ones.
//!
//! A representation stored by parts is cut into slices of one size, each the byte range
//! `index * size ..= (index + 1) * size - 1` (the last one shorter), as nginx's `slice` module
//! does: every part the cache asks the origin for is one whole slice, so the parts it holds
//! never overlap and need no merging.

use std::ops::Range;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_RANGE, DATE, ETAG, LAST_MODIFIED};

use super::conditional::EntityTag;
use super::date::http_date;
use super::syntax::trim_ows;

#[cfg(test)]
mod tests;

/// A `Content-Range` of a `206` that can be stored: one satisfied range and the complete
/// length (RFC 9110 §14.4). `range` is half-open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentRange {
    pub range: Range<u64>,
    pub complete: u64,
}

/// Reads `Content-Range: bytes first-last/complete` (RFC 9110 §14.4). An unknown complete
/// length (`/*`), an unsatisfied range (`bytes */len`), another unit, `last < first` or
/// `last >= complete` (an invalid range, §14.4) give `None`: such a part cannot be placed in
/// a representation.
pub(crate) fn parse_content_range(value: &HeaderValue) -> Option<ContentRange> {
    let bytes = trim_ows(value.as_bytes());
    let space = bytes.iter().position(|b| *b == b' ')?;
    if !bytes[..space].eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let spec = &bytes[space + 1..];
    let slash = spec.iter().position(|b| *b == b'/')?;
    let dash = spec[..slash].iter().position(|b| *b == b'-')?;
    let first = digits(&spec[..dash])?;
    let last = digits(&spec[dash + 1..slash])?;
    let complete = digits(&spec[slash + 1..])?;
    (first <= last && last < complete).then(|| ContentRange {
        range: first..last + 1,
        complete,
    })
}

/// `1*DIGIT` that fits in a `u64`.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The first byte a single-range `Range` value asks for, before the representation's length is
/// known (RFC 9110 §14.1.2): `Some(n)` for `bytes=n-` and `bytes=n-m`, `None` for a suffix
/// range (`bytes=-n`, which counts from an end not yet known) and for anything that is not
/// exactly one valid byte range.
pub(crate) fn first_byte(value: &HeaderValue) -> Option<u64> {
    let bytes = trim_ows(value.as_bytes());
    if !is_single_range(value) {
        return None;
    }
    let spec = &bytes[6..];
    let dash = spec.iter().position(|b| *b == b'-')?;
    digits(&spec[..dash])
}

/// Whether a `Range` value names exactly one valid byte range (RFC 9110 §14.1.2): `bytes=`
/// then an int-range (`first-`, `first-last` with `first <= last`) or a suffix-range (`-n`),
/// so a cache can answer it from the slices of a representation.
pub(crate) fn is_single_range(value: &HeaderValue) -> bool {
    let bytes = trim_ows(value.as_bytes());
    if bytes.len() <= 6 || !bytes[..6].eq_ignore_ascii_case(b"bytes=") {
        return false;
    }
    let spec = &bytes[6..];
    let Some(dash) = spec.iter().position(|b| *b == b'-') else {
        return false;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    match (digits(first), last.is_empty()) {
        (None, _) => first.is_empty() && digits(last).is_some(),
        (Some(_), true) => true,
        (Some(first), false) => digits(last).is_some_and(|last| last >= first),
    }
}

/// The slice holding byte `offset`.
pub(crate) fn slice_of(offset: u64, slice_size: u64) -> u64 {
    offset / slice_size
}

/// The bytes of slice `index` in a representation of `complete` bytes (empty past the end).
pub(crate) fn slice_bounds(index: u64, slice_size: u64, complete: u64) -> Range<u64> {
    let start = index.saturating_mul(slice_size).min(complete);
    start..start.saturating_add(slice_size).min(complete)
}

/// The slices that hold `range` (non-empty), first to last.
pub(crate) fn slices_of(range: &Range<u64>, slice_size: u64) -> std::ops::RangeInclusive<u64> {
    slice_of(range.start, slice_size)..=slice_of(range.end - 1, slice_size)
}

/// The `Range` the cache sends for slice `index`: `bytes=first-last` of the whole slice, which
/// an origin clamps to the representation's end (RFC 9110 §14.1.2).
pub(crate) fn slice_request(index: u64, slice_size: u64) -> HeaderValue {
    let first = index.saturating_mul(slice_size);
    let last = first.saturating_add(slice_size - 1);
    HeaderValue::from_str(&format!("bytes={first}-{last}")).expect("digits and ASCII")
}

/// Whether a `206` answers the request for slice `index` exactly: its `Content-Range` is that
/// slice of its complete length (the origin clamped the end, nothing else).
pub(crate) fn answers_slice(got: &ContentRange, index: u64, slice_size: u64) -> bool {
    let want = slice_bounds(index, slice_size, got.complete);
    !want.is_empty() && got.range == want
}

/// A strong validator of a representation (RFC 9110 §8.8.1): what makes parts fetched at
/// different times parts of the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Validator {
    /// A strong entity-tag, its opaque-tag.
    ETag(Bytes),
    /// A `Last-Modified` that is strong: at least 60 s before the response's `Date`
    /// (RFC 9110 §8.8.2.2, with the margin `If-Range` uses here).
    LastModified(SystemTime),
}

/// The strong validator of a response (RFC 9110 §8.8.1): its `ETag` when strong; without an
/// `ETag`, its `Last-Modified` when that is strong. A weak `ETag` means no strong validator at
/// all, even with a `Last-Modified` (the origin says the bytes may differ).
pub(crate) fn strong_validator(headers: &HeaderMap) -> Option<Validator> {
    if let Some(etag) = headers.get(ETAG) {
        let tag = EntityTag::parse(etag.as_bytes())?;
        return (!tag.weak).then(|| Validator::ETag(Bytes::copy_from_slice(tag.opaque)));
    }
    let modified = headers.get(LAST_MODIFIED).and_then(http_date)?;
    let date = headers.get(DATE).and_then(http_date)?;
    date.duration_since(modified)
        .is_ok_and(|d| d.as_secs() >= 60)
        .then_some(Validator::LastModified(modified))
}

/// Whether a new part (`headers`, of a representation `complete` bytes long) may be combined
/// with the stored parts of the representation `stored` / `stored_complete` (RFC 9111 §3.4,
/// RFC 9110 §15.3.7.3): both have the same strong validator and the same complete length.
/// Otherwise the representation changed and the stored parts must not be used with it.
pub(crate) fn combinable(
    stored: &Validator,
    stored_complete: u64,
    headers: &HeaderMap,
    complete: u64,
) -> bool {
    stored_complete == complete && strong_validator(headers).as_ref() == Some(stored)
}

/// The fields of a stored part that describe the whole representation rather than the part:
/// `Content-Range` goes, and `Content-Length` becomes the complete length (RFC 9110
/// §15.3.7.3: a combined response that is the whole representation is a `200` with the
/// complete length).
pub(crate) fn representation_headers(part: &HeaderMap, complete: u64) -> HeaderMap {
    let mut headers = part.clone();
    headers.remove(CONTENT_RANGE);
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(complete));
    headers
}
