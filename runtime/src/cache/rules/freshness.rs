//! Freshness lifetime (RFC 9111 §4.2.1, §4.2.2, §5.3) and how long to keep an object.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, EXPIRES, LAST_MODIFIED};
use http::StatusCode;

use super::age::parse_date;
use super::control::ResponseDirectives;
use super::date::http_date;

#[cfg(test)]
mod tests;

/// Knobs for freshness the RFC leaves to the cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FreshnessOptions {
    /// Lifetime for a heuristically cacheable response without explicit freshness and without
    /// `Last-Modified` (`-t`). Default 0: such responses are not reused, as RFC 9111 requires.
    pub default_ttl: Duration,
    /// Fraction of `Date - Last-Modified` used as heuristic lifetime (§4.2.2 suggests at most
    /// 10%). Default `0.1`; values outside `0..=1` are clamped, NaN counts as 0.
    pub heuristic_fraction: f64,
    /// Upper bound of a heuristic lifetime. Default 1 day (86 400 s), the figure commonly used
    /// by caches (Squid's refresh_pattern max, RFC 7234's old Warning 113 threshold).
    pub heuristic_cap: Duration,
}

impl Default for FreshnessOptions {
    fn default() -> Self {
        FreshnessOptions {
            default_ttl: Duration::ZERO,
            heuristic_fraction: 0.1,
            heuristic_cap: Duration::from_secs(86_400),
        }
    }
}

/// Where a freshness lifetime came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LifetimeSource {
    /// `s-maxage` (§5.2.2.10).
    SMaxAge,
    /// `max-age` (§5.2.2.1).
    MaxAge,
    /// `Expires - Date` (§5.3).
    Expires,
    /// A fraction of `Date - Last-Modified` (§4.2.2).
    Heuristic,
    /// The configured default TTL.
    Default,
    /// No freshness information: lifetime 0.
    None,
}

impl LifetimeSource {
    /// Short name for logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LifetimeSource::SMaxAge => "s-maxage",
            LifetimeSource::MaxAge => "max-age",
            LifetimeSource::Expires => "expires",
            LifetimeSource::Heuristic => "heuristic",
            LifetimeSource::Default => "default",
            LifetimeSource::None => "none",
        }
    }
}

/// A freshness lifetime and its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lifetime {
    pub value: Duration,
    pub source: LifetimeSource,
}

/// Statuses that are heuristically cacheable (RFC 9110 §15.1; RFC 9111 §4.2.2).
pub(crate) fn is_heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// `true` when the response has explicit expiration for this cache: `s-maxage`, `max-age`,
/// or `Expires` (even an invalid one, which means "already expired"), except that `Expires`
/// does not count when the directives came from a targeted field (RFC 9111 §4.2.1, §5.3;
/// RFC 9213 §2.2).
pub(crate) fn has_explicit_expiration(resp: &HeaderMap, dirs: &ResponseDirectives) -> bool {
    dirs.s_maxage.is_some() || dirs.max_age.is_some() || (!dirs.from_targeted && resp.contains_key(EXPIRES))
}

/// The freshness lifetime of a stored response for this shared cache (RFC 9111 §4.2.1).
///
/// First match wins:
/// 1. `s-maxage` (§5.2.2.10), then `max-age` (§5.2.2.1).
/// 2. `Expires - Date` (§5.3), ignored when the directives come from a targeted field
///    (RFC 9213 §2.2). The first `Expires` line counts; an invalid date (e.g. `0`) means
///    already expired (lifetime 0); an `Expires` before `Date` gives 0. The lifetime is
///    relative to `Date`, never to now. A response without a valid `Date` gets 0: callers
///    add `Date` on receipt with `age::ensure_date` (RFC 9110 §6.6.1), so this only happens
///    when they did not.
/// 3. Heuristic (§4.2.2), only when the status is heuristically cacheable or the response is
///    `public` (§5.2.2.9), and it has a valid `Last-Modified` and `Date`:
///    `fraction * (Date - Last-Modified)` in whole seconds, at most `heuristic_cap`
///    (0 when `Last-Modified` is after `Date`).
/// 4. `default_ttl`, under the same status condition, when it is non-zero.
/// 5. Otherwise lifetime 0, source `None`.
pub(crate) fn freshness_lifetime(
    status: StatusCode,
    resp: &HeaderMap,
    dirs: &ResponseDirectives,
    opts: &FreshnessOptions,
) -> Lifetime {
    if let Some(s) = dirs.s_maxage {
        return lifetime(Duration::from_secs(s.into()), LifetimeSource::SMaxAge);
    }
    if let Some(s) = dirs.max_age {
        return lifetime(Duration::from_secs(s.into()), LifetimeSource::MaxAge);
    }
    let date = parse_date(resp);
    if !dirs.from_targeted {
        if let Some(expires) = resp.get(EXPIRES) {
            let value = match (http_date(expires), date) {
                (Some(expires), Some(date)) => since(expires, date),
                _ => Duration::ZERO,
            };
            return lifetime(value, LifetimeSource::Expires);
        }
    }
    if !(is_heuristically_cacheable(status) || dirs.public) {
        return lifetime(Duration::ZERO, LifetimeSource::None);
    }
    let last_modified = resp.get(LAST_MODIFIED).and_then(http_date);
    if let (Some(lm), Some(date)) = (last_modified, date) {
        let interval = since(date, lm).as_secs();
        let fraction = if opts.heuristic_fraction.is_nan() {
            0.0
        } else {
            opts.heuristic_fraction.clamp(0.0, 1.0)
        };
        // `as` saturates; whole seconds keep the result deterministic.
        let secs = (interval as f64 * fraction) as u64;
        let value = Duration::from_secs(secs).min(opts.heuristic_cap);
        return lifetime(value, LifetimeSource::Heuristic);
    }
    if !opts.default_ttl.is_zero() {
        return lifetime(opts.default_ttl, LifetimeSource::Default);
    }
    lifetime(Duration::ZERO, LifetimeSource::None)
}

/// How long the store should keep an object after storing it (the moka `expire_after`
/// value): the rest of its freshness, plus the longest window it may still be used in.
///
/// `remaining = lifetime - initial_age` (the age it had on arrival, §4.2.3), then the larger of
/// - the stale windows, unless the response forbids stale serving
///   (`ResponseDirectives::forbids_stale`, §4.2.4): `stale-while-revalidate`,
///   `stale-if-error` (RFC 5861) and the configured `grace`;
/// - `keep`, only when the response has a validator to revalidate with (§4.3.1).
pub(crate) fn retention(
    lifetime: Duration,
    initial_age: Duration,
    dirs: &ResponseDirectives,
    has_validator: bool,
    grace: Duration,
    keep: Duration,
) -> Duration {
    let remaining = lifetime.saturating_sub(initial_age);
    let stale = if dirs.forbids_stale() {
        Duration::ZERO
    } else {
        let swr = Duration::from_secs(dirs.stale_while_revalidate.unwrap_or(0).into());
        let sie = Duration::from_secs(dirs.stale_if_error.unwrap_or(0).into());
        swr.max(sie).max(grace)
    };
    let keep = if has_validator { keep } else { Duration::ZERO };
    remaining.saturating_add(stale.max(keep))
}

fn lifetime(value: Duration, source: LifetimeSource) -> Lifetime {
    Lifetime { value, source }
}

fn since(later: SystemTime, earlier: SystemTime) -> Duration {
    later.duration_since(earlier).unwrap_or(Duration::ZERO)
}
