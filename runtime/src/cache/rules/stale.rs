//! Reusing a stored response: fresh, stale with permission, or not without revalidation
//! (RFC 9111 §4.2, §4.2.4, §5.2.1; RFC 5861).

use std::time::Duration;

use super::control::{MaxStale, RequestDirectives, ResponseDirectives};

#[cfg(test)]
mod tests;

/// Whether a stored response may answer a request without contacting the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Fresh and acceptable to the client: serve it (`X-Cache: HIT`).
    Fresh,
    /// Stale, but the client's `max-stale` accepts it and the response does not forbid it
    /// (§4.2.4, §5.2.1.2): serve it (`X-Cache: STALE`); the caller may refresh it in the
    /// background.
    StaleAllowed,
    /// Must be validated (or fetched) first. The caller may still serve it stale under
    /// [`may_serve_stale`] (`stale-while-revalidate`, or on error).
    Revalidate,
}

/// Decides whether a stored response can be reused for a request as it is (RFC 9111 §4.2,
/// §5.2.1, §5.2.2.4).
///
/// With `lifetime` the response's freshness lifetime and `age` its current age:
/// 1. Unqualified response `no-cache` → `Revalidate` (§5.2.2.4). (The qualified form was
///    handled by stripping the named fields before storing.)
/// 2. Request `no-cache` (or `Pragma: no-cache`) → `Revalidate` (§5.2.1.4, §5.4).
/// 3. Request `max-age=N` with `age > N` → `Revalidate` (§5.2.1.1).
/// 4. Fresh (`lifetime > age`, §4.2) and, with request `min-fresh=N`, still fresh for `N`
///    more seconds (`lifetime >= age + N`, §5.2.1.3) → `Fresh`; fresh but too close to
///    expiry for `min-fresh` → `Revalidate`.
/// 5. Stale, with request `max-stale` (any, or `age - lifetime <= N`) and no response
///    directive forbidding stale use (`must-revalidate`, `proxy-revalidate`, `s-maxage`,
///    `no-cache`; §4.2.4) → `StaleAllowed` (§5.2.1.2).
/// 6. Otherwise `Revalidate`.
///
/// With `ignore_request_cache_control` (`--ignore-request-cache-control`, as Varnish and
/// LiteSpeed do) steps 2, 3, 5 and the `min-fresh` part of 4 are skipped: clients cannot force
/// refreshes nor accept stale content.
pub(crate) fn freshness_for_request(
    lifetime: Duration,
    age: Duration,
    dirs: &ResponseDirectives,
    req: &RequestDirectives,
    ignore_request_cache_control: bool,
) -> Reuse {
    if dirs.no_cache.is_all() {
        return Reuse::Revalidate;
    }
    let honour = !ignore_request_cache_control;
    if honour && req.no_cache {
        return Reuse::Revalidate;
    }
    if honour {
        if let Some(max_age) = req.max_age {
            if age > Duration::from_secs(max_age) {
                return Reuse::Revalidate;
            }
        }
    }
    if lifetime > age {
        let min_fresh = match req.min_fresh {
            Some(n) if honour => Duration::from_secs(n),
            _ => Duration::ZERO,
        };
        return if lifetime >= age.saturating_add(min_fresh) {
            Reuse::Fresh
        } else {
            Reuse::Revalidate
        };
    }
    if honour && !dirs.forbids_stale() && max_stale_allows(req.max_stale, lifetime, age) {
        return Reuse::StaleAllowed;
    }
    Reuse::Revalidate
}

/// When a stale response is being considered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaleSituation {
    /// A revalidation is needed and could run in the background (RFC 5861 §3).
    Revalidating,
    /// As `Revalidating`, for an object a soft purge made stale: the operator asked for it to
    /// be refreshed while it is still served, so its grace covers the refresh as
    /// `stale-while-revalidate` would (Varnish's grace, which soft purges rely on).
    SoftPurged,
    /// The origin failed: connection refused, timeout, a broken response, or a 5xx
    /// (RFC 5861 §4: "500, 502, 503, or 504").
    OriginError,
}

/// What permits serving a stale response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaleGrant {
    /// `stale-while-revalidate` window (RFC 5861 §3).
    WhileRevalidate,
    /// `stale-if-error` window (RFC 5861 §4).
    IfError,
    /// The configured grace (an out-of-band permission, RFC 9111 §4.2.4).
    Grace,
    /// The client's `max-stale` (§5.2.1.2).
    MaxStale,
}

impl StaleGrant {
    /// Short name for logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StaleGrant::WhileRevalidate => "stale-while-revalidate",
            StaleGrant::IfError => "stale-if-error",
            StaleGrant::Grace => "grace",
            StaleGrant::MaxStale => "max-stale",
        }
    }
}

/// Whether a stale stored response may be served (RFC 9111 §4.2.4; RFC 5861), and why.
///
/// Never (`None`) when the response has `must-revalidate`, `proxy-revalidate`, `s-maxage`
/// or any `no-cache` (§4.2.4, §5.2.2.2, §5.2.2.4, §5.2.2.8, §5.2.2.10), whatever the grace;
/// nor when the request has `no-cache` (the client asked for validation, §5.2.1.4) unless
/// `ignore_request_cache_control`.
///
/// Otherwise, with `staleness = age - lifetime` (windows are inclusive, "up to N seconds"):
/// - `Revalidating`: `stale-while-revalidate` covers it → `WhileRevalidate`.
/// - `SoftPurged`: `stale-while-revalidate` covers it → `WhileRevalidate`; else a non-zero
///   `grace` covers it → `Grace`.
/// - `OriginError`: `stale-if-error` covers it → `IfError`; else a non-zero `grace` covers
///   it → `Grace`.
/// - Either situation: the client's `max-stale` covers it → `MaxStale` (unless
///   `ignore_request_cache_control`).
///
/// A response that is still fresh has staleness 0.
pub(crate) fn may_serve_stale(
    situation: StaleSituation,
    lifetime: Duration,
    age: Duration,
    dirs: &ResponseDirectives,
    req: &RequestDirectives,
    grace: Duration,
    ignore_request_cache_control: bool,
) -> Option<StaleGrant> {
    if dirs.forbids_stale() {
        return None;
    }
    let honour = !ignore_request_cache_control;
    if honour && req.no_cache {
        return None;
    }
    let staleness = age.saturating_sub(lifetime);
    let within = |secs: Option<u32>| secs.is_some_and(|s| staleness <= Duration::from_secs(s.into()));
    let in_grace = !grace.is_zero() && staleness <= grace;
    match situation {
        StaleSituation::Revalidating => {
            if within(dirs.stale_while_revalidate) {
                return Some(StaleGrant::WhileRevalidate);
            }
        }
        StaleSituation::SoftPurged => {
            if within(dirs.stale_while_revalidate) {
                return Some(StaleGrant::WhileRevalidate);
            }
            if in_grace {
                return Some(StaleGrant::Grace);
            }
        }
        StaleSituation::OriginError => {
            if within(dirs.stale_if_error) {
                return Some(StaleGrant::IfError);
            }
            if in_grace {
                return Some(StaleGrant::Grace);
            }
        }
    }
    if honour && max_stale_allows(req.max_stale, lifetime, age) {
        return Some(StaleGrant::MaxStale);
    }
    None
}

fn max_stale_allows(max_stale: Option<MaxStale>, lifetime: Duration, age: Duration) -> bool {
    match max_stale {
        Some(MaxStale::Any) => true,
        Some(MaxStale::Secs(n)) => age.saturating_sub(lifetime) <= Duration::from_secs(n),
        None => false,
    }
}
