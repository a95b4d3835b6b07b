use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::*;
use crate::cache::rules::control::{RequestDirectives, ResponseDirectives};

fn resp(cc: &str) -> ResponseDirectives {
    let mut h = HeaderMap::new();
    h.insert(
        HeaderName::from_static("cache-control"),
        HeaderValue::from_str(cc).unwrap(),
    );
    ResponseDirectives::from_headers(&h, None)
}

fn req(cc: &str) -> RequestDirectives {
    let mut h = HeaderMap::new();
    if !cc.is_empty() {
        h.insert(
            HeaderName::from_static("cache-control"),
            HeaderValue::from_str(cc).unwrap(),
        );
    }
    RequestDirectives::from_headers(&h)
}

#[test]
fn reuse_for_request() {
    use Reuse::{Fresh, Revalidate as R, StaleAllowed as S};
    #[rustfmt::skip]
    let table: &[(&str, &str, u64, u64, bool, Reuse)] = &[
        // (response CC, request CC, lifetime, age, ignore flag, outcome)
        // §4.2: fresh while lifetime > age
        ("max-age=60", "", 60, 59, false, Fresh),
        // §4.2: stale at lifetime == age
        ("max-age=60", "", 60, 60, false, R),
        // §5.2.2.4: no-cache response always revalidated, even fresh
        ("no-cache, max-age=60", "", 60, 0, false, R),
        // §5.2.2.4: qualified no-cache does not (fields were stripped)
        ("no-cache=\"x\", max-age=60", "", 60, 0, false, Fresh),
        // §5.2.1.4: request no-cache
        ("max-age=60", "no-cache", 60, 0, false, R),
        // §5.2.1.4: ... ignored with the flag
        ("max-age=60", "no-cache", 60, 0, true, Fresh),
        // §5.2.1.1: request max-age older than allowed
        ("max-age=60", "max-age=10", 60, 11, false, R),
        // §5.2.1.1: age equal to max-age is acceptable
        ("max-age=60", "max-age=10", 60, 10, false, Fresh),
        // §5.2.1.1: max-age=0 forces revalidation of anything with age
        ("max-age=60", "max-age=0", 60, 1, false, R),
        // §5.2.1.1: ignored with the flag
        ("max-age=60", "max-age=0", 60, 1, true, Fresh),
        // §5.2.1.3: min-fresh satisfied
        ("max-age=60", "min-fresh=10", 60, 50, false, Fresh),
        // §5.2.1.3: min-fresh not satisfied
        ("max-age=60", "min-fresh=10", 60, 51, false, R),
        // §5.2.1.3: ignored with the flag
        ("max-age=60", "min-fresh=10", 60, 51, true, Fresh),
        // §5.2.1.2: max-stale without value accepts any staleness
        ("max-age=60", "max-stale", 60, 1000, false, S),
        // §5.2.1.2: within max-stale
        ("max-age=60", "max-stale=10", 60, 70, false, S),
        // §5.2.1.2: beyond max-stale
        ("max-age=60", "max-stale=10", 60, 71, false, R),
        // §4.2.4: must-revalidate forbids it
        ("max-age=60, must-revalidate", "max-stale", 60, 61, false, R),
        // §4.2.4: proxy-revalidate forbids it in a shared cache
        ("max-age=60, proxy-revalidate", "max-stale", 60, 61, false, R),
        // §4.2.4: s-maxage forbids it in a shared cache
        ("s-maxage=60", "max-stale", 60, 61, false, R),
        // §5.2.1.2: ignored with the flag
        ("max-age=60", "max-stale", 60, 61, true, R),
    ];
    for (rcc, qcc, life, age, ignore, want) in table {
        let got = freshness_for_request(
            Duration::from_secs(*life),
            Duration::from_secs(*age),
            &resp(rcc),
            &req(qcc),
            *ignore,
        );
        assert_eq!(got, *want, "{rcc} / {qcc} / {life} / {age} / {ignore}");
    }
}

/// (situation, response CC, request CC, lifetime, age, grace, ignore flag, grant)
type StaleRow = (
    StaleSituation,
    &'static str,
    &'static str,
    u64,
    u64,
    u64,
    bool,
    Option<StaleGrant>,
);

#[test]
fn serving_stale() {
    use StaleGrant::{Grace as G, IfError as E, MaxStale as M, WhileRevalidate as W};
    use StaleSituation::{OriginError as Err, Revalidating as Rev, SoftPurged as Soft};
    #[rustfmt::skip]
    let table: &[StaleRow] = &[
        // (situation, response CC, request CC, lifetime, age, grace, ignore, grant)
        // RFC 5861 §3: within stale-while-revalidate
        (Rev, "max-age=60, stale-while-revalidate=30", "", 60, 90, 0, false, Some(W)),
        // RFC 5861 §3: beyond it
        (Rev, "max-age=60, stale-while-revalidate=30", "", 60, 91, 0, false, None),
        // RFC 5861 §3: stale-if-error does not allow serving while revalidating
        (Rev, "max-age=60, stale-if-error=300", "", 60, 61, 0, false, None),
        // §4.2.4: grace is for errors only
        (Rev, "max-age=60", "", 60, 61, 300, false, None),
        // ... and for soft-purged objects, refreshed while served (Varnish's grace)
        (Soft, "max-age=60", "", 60, 61, 300, false, Some(G)),
        (Soft, "max-age=60", "", 60, 361, 300, false, None),
        (Soft, "max-age=60", "", 60, 61, 0, false, None),
        (Soft, "max-age=60, stale-while-revalidate=30", "", 60, 61, 0, false, Some(W)),
        // §4.2.4: a soft purge does not override must-revalidate or s-maxage
        (Soft, "s-maxage=60", "", 60, 61, 300, false, None),
        // RFC 5861 §4: within stale-if-error
        (Err, "max-age=60, stale-if-error=300", "", 60, 360, 0, false, Some(E)),
        // RFC 5861 §4: beyond it, grace covers
        (Err, "max-age=60, stale-if-error=300", "", 60, 361, 600, false, Some(G)),
        // §4.2.4: configured grace
        (Err, "max-age=60", "", 60, 100, 300, false, Some(G)),
        // §4.2.4: beyond grace
        (Err, "max-age=60", "", 60, 400, 300, false, None),
        // §4.2.4: no grace, no directive
        (Err, "max-age=60", "", 60, 61, 0, false, None),
        // §4.2.4 + §5.2.2.2: must-revalidate beats stale-if-error and grace
        (Err, "max-age=60, must-revalidate, stale-if-error=300", "", 60, 61, 300, false, None),
        // §4.2.4 + §5.2.2.8: proxy-revalidate
        (Err, "max-age=60, proxy-revalidate", "", 60, 61, 300, false, None),
        // §4.2.4 + §5.2.2.4: no-cache
        (Err, "no-cache, stale-if-error=300", "", 0, 1, 300, false, None),
        // §4.2.4 + §5.2.2.10: s-maxage
        (Err, "s-maxage=60, stale-if-error=300", "", 60, 61, 300, false, None),
        // §4.2.4 + §5.2.2.2: must-revalidate beats stale-while-revalidate
        (Rev, "max-age=60, must-revalidate, stale-while-revalidate=30", "", 60, 61, 0, false, None),
        // §5.2.1.2: client max-stale permits it on error
        (Err, "max-age=60", "max-stale=100", 60, 100, 0, false, Some(M)),
        // §5.2.1.2: client max-stale permits it while revalidating
        (Rev, "max-age=60", "max-stale", 60, 1000, 0, false, Some(M)),
        // §5.2.1.2: ... not with the flag
        (Rev, "max-age=60", "max-stale", 60, 1000, 0, true, None),
        // §5.2.1.4: client no-cache: no stale answer
        (Err, "max-age=60, stale-if-error=300", "no-cache", 60, 61, 300, false, None),
        // §5.2.1.4: ... unless the flag ignores it
        (Err, "max-age=60, stale-if-error=300", "no-cache", 60, 61, 300, true, Some(E)),
    ];
    for (situation, rcc, qcc, life, age, grace, ignore, want) in table {
        let got = may_serve_stale(
            *situation,
            Duration::from_secs(*life),
            Duration::from_secs(*age),
            &resp(rcc),
            &req(qcc),
            Duration::from_secs(*grace),
            *ignore,
        );
        assert_eq!(
            got, *want,
            "{situation:?} {rcc} / {qcc} / {life} / {age} / {grace}"
        );
    }
    assert_eq!(StaleGrant::IfError.as_str(), "stale-if-error");
}
