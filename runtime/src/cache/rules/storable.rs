//! Whether a response may be stored by this shared cache (RFC 9111 §3, §3.5).

use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, AUTHORIZATION, CONTENT_LOCATION, ETAG, LAST_MODIFIED, SET_COOKIE};
use http::{Method, StatusCode, Uri};

use super::control::{RequestDirectives, ResponseDirectives};
use super::date::http_date;
use super::freshness::{has_explicit_expiration, is_heuristically_cacheable};
use super::invalidate::refers_to;
use super::vary::VaryRule;

#[cfg(test)]
mod tests;

/// Storage options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct StoreOptions {
    /// Store responses carrying `Set-Cookie`. Default `false`, as Varnish's builtin VCL does;
    /// RFC 9111 would allow storing them (`Set-Cookie` named in `no-cache="..."` /
    /// `private="..."` is stripped instead, so such responses are stored either way).
    pub store_set_cookie: bool,
    /// The configured default TTL (`-t`), see `FreshnessOptions::default_ttl`.
    pub default_ttl: Duration,
}

/// Why a response is not stored. `as_str` is the access-log / `X-Cache` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStorable {
    /// The request method is not GET (§3: "the request method is understood by the cache").
    Method,
    /// A response to HEAD: it has no body to serve a later GET with.
    Head,
    /// Not a final status, or 206 / 304, which are not stored whole (§3).
    Status,
    /// The request said `no-store` (§5.2.1.5).
    RequestNoStore,
    /// The response said `no-store` (§5.2.2.5).
    NoStore,
    /// `must-understand` with a status code this cache does not implement (§5.2.2.3).
    MustUnderstand,
    /// Unqualified `private` (§5.2.2.7).
    Private,
    /// The request had `Authorization` and the response did not allow sharing (§3.5).
    Authorization,
    /// `Vary: *`: no later request can ever match (§4.1).
    VaryStar,
    /// `Set-Cookie` with `store_set_cookie == false` (Varnish's builtin behaviour).
    SetCookie,
    /// No explicit expiration and not heuristically cacheable (§3), or nothing could ever
    /// reuse it: zero lifetime, no validator, no stale window.
    NoFreshness,
    /// Unqualified `no-cache` and no validator: every reuse would need a full fetch
    /// (§5.2.2.4), so storing is pointless.
    NoCacheWithoutValidator,
}

impl NotStorable {
    /// Short, stable name for logs and headers.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotStorable::Method => "method",
            NotStorable::Head => "head",
            NotStorable::Status => "status",
            NotStorable::RequestNoStore => "request-no-store",
            NotStorable::NoStore => "no-store",
            NotStorable::MustUnderstand => "must-understand",
            NotStorable::Private => "private",
            NotStorable::Authorization => "authorization",
            NotStorable::VaryStar => "vary-star",
            NotStorable::SetCookie => "set-cookie",
            NotStorable::NoFreshness => "no-freshness",
            NotStorable::NoCacheWithoutValidator => "no-cache-no-validator",
        }
    }
}

impl fmt::Display for NotStorable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decides whether a final response may be stored by this shared cache (RFC 9111 §3).
///
/// Checks, in order (the first failure is the reason):
/// 1. method GET (§3). HEAD responses are not stored ([`NotStorable::Head`]): GET and HEAD
///    share objects, and a HEAD response has no body; a HEAD request is answered from a stored
///    GET response instead (RFC 9110 §9.3.2).
/// 2. final status (§3; RFC 9110 §15), and not 206 or 304, which this cache does not store
///    (§3: only when the cache understands them; 206 is not combined, §3.3; 304 only updates,
///    §4.3.4). Interim 1xx responses are never stored.
/// 3. no `no-store` in the request (§5.2.1.5; honoured even with
///    `--ignore-request-cache-control`, since it is a privacy request, not a refresh).
/// 4. no `no-store` in the response, except that with `must-understand` it is ignored for
///    the status codes this cache implements, and without them the response is refused
///    (§5.2.2.3, §3).
/// 5. no unqualified `private` (§5.2.2.7; the qualified form strips fields, see
///    `strip_field_scoped`).
/// 6. no `Authorization` in the request unless `public`, `s-maxage` or `must-revalidate`
///    (§3.5).
/// 7. no `Vary: *` (§4.1: it never matches, so storing is useless).
/// 8. no `Set-Cookie` unless `opts.store_set_cookie`, or the response itself names
///    `Set-Cookie` in `no-cache="..."` / `private="..."` (it is stripped before storing).
/// 9. explicit expiration (`s-maxage`, `max-age`, `Expires`), or a heuristically cacheable
///    status, or `public` (§3, §4.2.2, §5.2.2.9). Any status may be stored when it has
///    explicit freshness. Without explicit expiration the response must also be reusable
///    somehow: a validator (`ETag` / `Last-Modified`), a non-zero `default_ttl`, or a
///    `stale-while-revalidate` / `stale-if-error` window; otherwise [`NotStorable::NoFreshness`].
/// 10. unqualified `no-cache` needs a validator (§5.2.2.4: every reuse is validated).
pub(crate) fn check_storable(
    method: &Method,
    req: &HeaderMap,
    status: StatusCode,
    resp: &HeaderMap,
    dirs: &ResponseDirectives,
    opts: &StoreOptions,
) -> Result<(), NotStorable> {
    if method == Method::HEAD {
        return Err(NotStorable::Head);
    }
    if method != Method::GET {
        return Err(NotStorable::Method);
    }
    if !status_storable(status) {
        return Err(NotStorable::Status);
    }
    if RequestDirectives::from_headers(req).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    if dirs.must_understand && !status_understood(status) {
        return Err(NotStorable::MustUnderstand);
    }
    if dirs.no_store && !dirs.must_understand {
        return Err(NotStorable::NoStore);
    }
    if dirs.private.is_all() {
        return Err(NotStorable::Private);
    }
    if req.contains_key(AUTHORIZATION) && !dirs.allows_authorized_reuse() {
        return Err(NotStorable::Authorization);
    }
    if matches!(VaryRule::from_response(resp), VaryRule::Star) {
        return Err(NotStorable::VaryStar);
    }
    if !opts.store_set_cookie && resp.contains_key(SET_COOKIE) && !set_cookie_stripped(dirs) {
        return Err(NotStorable::SetCookie);
    }
    let validator = has_validator(resp);
    if !has_explicit_expiration(resp, dirs) {
        if !(is_heuristically_cacheable(status) || dirs.public) {
            return Err(NotStorable::NoFreshness);
        }
        let stale_window =
            dirs.stale_while_revalidate.unwrap_or(0) > 0 || dirs.stale_if_error.unwrap_or(0) > 0;
        if !validator && opts.default_ttl.is_zero() && !stale_window {
            return Err(NotStorable::NoFreshness);
        }
    }
    if dirs.no_cache.is_all() && !validator {
        return Err(NotStorable::NoCacheWithoutValidator);
    }
    Ok(())
}

/// Whether a response to POST may be stored to answer later GET and HEAD requests for the
/// target URI (RFC 9110 §9.3.3, RFC 9111 §4): it has explicit freshness (`s-maxage`,
/// `max-age` or `Expires`, §4.2.1) and a `Content-Location` (first field line) that
/// identifies the target URI (`target`, the effective request URI, absolute; the reference is
/// resolved against it). The rest of [`check_storable`] applies as for a GET.
pub(crate) fn post_reusable_for_get(target: &Uri, resp: &HeaderMap, dirs: &ResponseDirectives) -> bool {
    has_explicit_expiration(resp, dirs)
        && resp
            .get(CONTENT_LOCATION)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|location| refers_to(target, location))
}

/// `true` when the response carries a validator usable for revalidation: an `ETag`, or a
/// `Last-Modified` that is a valid HTTP-date (RFC 9110 §8.8; RFC 9111 §4.3.1).
pub(crate) fn has_validator(resp: &HeaderMap) -> bool {
    resp.contains_key(ETAG) || resp.get(LAST_MODIFIED).and_then(http_date).is_some()
}

/// Final status codes this cache stores (RFC 9111 §3): not 1xx, not 206, not 304.
fn status_storable(status: StatusCode) -> bool {
    status.as_u16() >= 200 && status != StatusCode::PARTIAL_CONTENT && status != StatusCode::NOT_MODIFIED
}

/// Status codes whose caching requirements this cache implements, for `must-understand`
/// (RFC 9111 §5.2.2.3): the final codes defined by RFC 9110 §15 that it stores.
fn status_understood(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200..=205 | 300..=303 | 305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505
    )
}

fn set_cookie_stripped(dirs: &ResponseDirectives) -> bool {
    dirs.no_cache.fields().contains(&SET_COOKIE) || dirs.private.fields().contains(&SET_COOKIE)
}
