//! RFC 9111 decisions as pure functions: headers and times in, decisions out.
//!
//! Nothing here reads a clock, does I/O or keeps state; the time is always a parameter
//! (`SystemTime` for HTTP dates). Each public function cites the section it implements and has
//! table-driven tests in the sibling `tests.rs`.
//!
//! | module | decides | RFC |
//! |---|---|---|
//! | [`control`] | `Cache-Control` / `Pragma` / targeted (`CDN-Cache-Control`) directives | 9111 §5.2, §5.4; 9213 |
//! | [`date`] | HTTP-dates in the three formats, as deployed servers write them | 9110 §5.6.7 |
//! | [`age`] | `Age` parsing, corrected initial age, current age, `Date` on receipt | 9111 §4.2.3, §5.1; 9110 §6.6.1 |
//! | [`freshness`] | freshness lifetime and its source; how long to keep an object | 9111 §4.2.1, §4.2.2, §5.3 |
//! | [`storable`] | may this response be stored, and if not, why | 9111 §3, §3.5 |
//! | [`vary`] | secondary-key rule and request fingerprint | 9111 §4.1 |
//! | [`conditional`] | answering client conditionals, revalidation requests, 304 merge | 9111 §4.3; 9110 §13 |
//! | [`range`] | `Range` / `If-Range` on a stored object, `Content-Range` | 9110 §14, §13.1.5 |
//! | [`partial`] | `206` parts: `Content-Range` read, slices, strong validators, combining | 9111 §3.3, §3.4; 9110 §14.4, §15.3.7 |
//! | [`stale`] | reuse of a stored response for a request: fresh, stale allowed, revalidate | 9111 §4.2.4, §5.2.1; 5861 |
//! | [`invalidate`] | URIs invalidated by an unsafe method | 9111 §4.4 |
//!
//! Intended flow (the proxy owns the order):
//! 1. On a response from the origin: `age::ensure_date`, then
//!    `ResponseDirectives::from_headers`, `storable::check_storable`, [`strip_field_scoped`],
//!    `age::initial_age`, `freshness::freshness_lifetime`, `freshness::retention`,
//!    `VaryRule::from_response` + `request_fingerprint`; store all of them with the object.
//! 2. On a lookup: `VaryRule::matches`, `age::current_age`, `stale::freshness_for_request`,
//!    then `conditional::evaluate_client_conditional` and `range::evaluate_range`.
//! 3. On a stale object: `conditional::conditional_request_headers`; on a 304,
//!    `conditional::validates_stored` then `conditional::merge_304` and recompute (1).
//!    On origin failure: `stale::may_serve_stale`.
//! 4. After an unsafe request: `invalidate::invalidation_targets`.

// The proxy adopts these decisions step by step (issue 3: revalidation, conditionals, ranges,
// stale serving, invalidation); until every one is wired in, unused ones must not fail
// `clippy -D warnings`. Remove this once the proxy calls them all.
#![cfg_attr(not(test), allow(dead_code))]

use http::header::HeaderMap;

pub(crate) mod age;
pub(crate) mod conditional;
pub(crate) mod control;
pub(crate) mod date;
pub(crate) mod freshness;
pub(crate) mod invalidate;
pub(crate) mod partial;
pub(crate) mod range;
pub(crate) mod stale;
pub(crate) mod storable;
mod syntax;
pub(crate) mod vary;

#[cfg(test)]
mod tests;

/// Removes the fields a shared cache must not store or reuse without revalidation: those named
/// by qualified `no-cache="..."` (RFC 9111 §5.2.2.4) and `private="..."` (§5.2.2.7). Call on
/// the headers to be stored, after `check_storable` accepted them; the response forwarded to
/// the client that caused the fetch keeps them.
pub(crate) fn strip_field_scoped(headers: &mut HeaderMap, dirs: &control::ResponseDirectives) {
    for name in dirs.no_cache.fields().iter().chain(dirs.private.fields()) {
        headers.remove(name);
    }
}
