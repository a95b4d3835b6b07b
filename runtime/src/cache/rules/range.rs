//! Range requests on a stored representation (RFC 9110 §14, §13.1.5).
//!
//! Ranges are half-open `start..end` byte offsets into the stored body.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderValue, IF_RANGE, RANGE};
use http::Method;

use super::conditional::if_range_matches;
use super::syntax::{list_members, trim_ows};
use crate::cache::body::StoredBody;

#[cfg(test)]
mod tests;

/// At most this many parts in a multipart answer; more (after coalescing) is treated as a
/// broken or hostile client and answered with the full representation (RFC 9110 §14.2 lets a
/// server ignore such a `Range`).
pub(crate) const MAX_PARTS: usize = 32;

/// What to send for a request against a stored representation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeOutcome {
    /// 200 with the whole representation (no `Range`, or it is ignored).
    Full,
    /// 206 with one range and `Content-Range`.
    Single(Range<u64>),
    /// 206 `multipart/byteranges`, parts in this order (at least two, non-overlapping).
    Multi(Vec<Range<u64>>),
    /// 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Decides how to answer a request from a stored representation of `len` bytes
/// (RFC 9110 §14.2, §13.1.5).
///
/// `Range` is honoured only for GET (§14.2), only when there is exactly one `Range` field
/// line, and only when `If-Range` (if any) matches the stored validators
/// ([`if_range_matches`]); otherwise [`RangeOutcome::Full`]. The value is then read with
/// [`parse_range`].
pub(crate) fn evaluate_range(method: &Method, req: &HeaderMap, stored: &HeaderMap, len: u64) -> RangeOutcome {
    if method != Method::GET {
        return RangeOutcome::Full;
    }
    let mut lines = req.get_all(RANGE).iter();
    let (Some(range), None) = (lines.next(), lines.next()) else {
        return RangeOutcome::Full;
    };
    if let Some(if_range) = req.get(IF_RANGE) {
        if !if_range_matches(if_range, stored) {
            return RangeOutcome::Full;
        }
    }
    parse_range(range, len)
}

/// Reads a `Range` value against a representation of `len` bytes (RFC 9110 §14.1.1, §14.2).
///
/// - A unit other than `bytes` (compared case-insensitively), or an invalid ranges-specifier
///   (no ranges, `first > last`, a non-digit, whitespace around `=`), is ignored: `Full`.
/// - An int-range is satisfiable when `first < len` (its end is clamped to `len`); a
///   suffix-range when its length is non-zero (the last `min(n, len)` bytes).
/// - None satisfiable: `Unsatisfiable`. A zero-length representation: `Full` (nothing to
///   slice; a 200 with an empty body is always correct).
/// - Overlapping or adjacent satisfiable ranges are coalesced (then ordered by offset);
///   otherwise the request order is kept (§14.6). More than [`MAX_PARTS`] parts, or parts
///   adding up to more than `len` bytes before coalescing when there are many of them
///   (a sign of abuse), give `Full`.
pub(crate) fn parse_range(value: &HeaderValue, len: u64) -> RangeOutcome {
    let bytes = trim_ows(value.as_bytes());
    let Some(eq) = bytes.iter().position(|b| *b == b'=') else {
        return RangeOutcome::Full;
    };
    if !bytes[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut ranges: Vec<Range<u64>> = Vec::new();
    let mut any = false;
    let mut requested: u64 = 0;
    for spec in list_members(&bytes[eq + 1..]) {
        any = true;
        let Some(dash) = spec.iter().position(|b| *b == b'-') else {
            return RangeOutcome::Full;
        };
        let (first, last) = (&spec[..dash], &spec[dash + 1..]);
        if first.is_empty() {
            let Some(n) = digits(last) else {
                return RangeOutcome::Full;
            };
            if n > 0 && len > 0 {
                ranges.push(len - n.min(len)..len);
                requested = requested.saturating_add(n.min(len));
            }
        } else {
            let Some(first) = digits(first) else {
                return RangeOutcome::Full;
            };
            let last = if last.is_empty() {
                None
            } else {
                match digits(last) {
                    Some(l) if l >= first => Some(l),
                    _ => return RangeOutcome::Full,
                }
            };
            if first < len {
                let end = last.map_or(len, |l| l.saturating_add(1).min(len));
                requested = requested.saturating_add(end - first);
                ranges.push(first..end);
            }
        }
    }
    if !any {
        return RangeOutcome::Full;
    }
    if len == 0 {
        return RangeOutcome::Full;
    }
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    let many = ranges.len() > 2;
    if coalesce(&mut ranges) && many && requested > len {
        return RangeOutcome::Full;
    }
    match ranges.len() {
        1 => RangeOutcome::Single(ranges.remove(0)),
        n if n > MAX_PARTS => RangeOutcome::Full,
        _ => RangeOutcome::Multi(ranges),
    }
}

/// Sorts and merges overlapping or adjacent ranges when there are any; returns whether it did.
fn coalesce(ranges: &mut Vec<Range<u64>>) -> bool {
    let mut sorted = ranges.clone();
    sorted.sort_by_key(|r| r.start);
    let touching = sorted.windows(2).any(|w| w[1].start <= w[0].end);
    if !touching {
        return false;
    }
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    *ranges = merged;
    true
}

/// `1*DIGIT`, saturating at `u64::MAX`.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |v, d| {
        v.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// `Content-Range: bytes first-last/len` for a 206 part (RFC 9110 §14.4). `range` must be
/// non-empty.
pub(crate) fn content_range(range: &Range<u64>, len: u64) -> HeaderValue {
    let s = format!("bytes {}-{}/{}", range.start, range.end.saturating_sub(1), len);
    HeaderValue::from_str(&s).expect("digits and ASCII")
}

/// `Content-Range: bytes */len` for a 416 (RFC 9110 §14.4, §15.5.17).
pub(crate) fn unsatisfied_content_range(len: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("bytes */{len}")).expect("digits and ASCII")
}

/// `Content-Type: multipart/byteranges; boundary=...` (RFC 9110 §14.6). The boundary is the
/// caller's (1 to 70 characters of `bchars`, RFC 2046 §5.1.1; pure code picks no randomness).
pub(crate) fn multipart_content_type(boundary: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("multipart/byteranges; boundary={boundary}")).ok()
}

/// The body of a `multipart/byteranges` 206 (RFC 9110 §14.6): one part per range, each with
/// the representation's `Content-Type` (if any) and its `Content-Range`. Ranges come from
/// [`parse_range`] with `len == body.len()`; anything outside `body` is clamped, never a panic.
pub(crate) fn multipart_body(
    body: &StoredBody,
    ranges: &[Range<u64>],
    content_type: Option<&[u8]>,
    boundary: &str,
) -> Bytes {
    let len = body.len();
    let data: usize = ranges.iter().map(|r| (r.end - r.start) as usize).sum();
    let mut out = BytesMut::with_capacity(data + ranges.len() * 128 + boundary.len() + 8);
    for r in ranges {
        out.put_slice(b"--");
        out.put_slice(boundary.as_bytes());
        out.put_slice(b"\r\n");
        if let Some(ct) = content_type {
            out.put_slice(b"Content-Type: ");
            out.put_slice(ct);
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"Content-Range: ");
        out.put_slice(content_range(r, len).as_bytes());
        out.put_slice(b"\r\n\r\n");
        body.copy_range(r.clone(), &mut out);
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"--");
    out.put_slice(boundary.as_bytes());
    out.put_slice(b"--\r\n");
    out.freeze()
}
