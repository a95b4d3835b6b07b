use std::time::Duration;

use http::header::HeaderName;
use http::StatusCode;

use super::*;
use crate::cache::rules::control::ResponseDirectives;
use crate::cache::rules::tests::{headers, Pairs};

const DATE: &str = "Mon, 01 Jan 2024 00:00:00 GMT";
const DATE_PLUS_1H: &str = "Mon, 01 Jan 2024 01:00:00 GMT";
const DATE_MINUS_1H: &str = "Sun, 31 Dec 2023 23:00:00 GMT";
const DATE_MINUS_10D: &str = "Fri, 22 Dec 2023 00:00:00 GMT";
const DATE_MINUS_100D: &str = "Sat, 23 Sep 2023 00:00:00 GMT";

#[test]
fn lifetime_sources() {
    use LifetimeSource as S;
    let opts = FreshnessOptions::default();
    #[rustfmt::skip]
    let table: &[(u16, Pairs, u64, LifetimeSource)] = &[
        // §4.2.1 + §5.2.2.10: s-maxage first in a shared cache
        (200, &[("date", DATE), ("cache-control", "max-age=10, s-maxage=20"), ("expires", DATE_PLUS_1H)], 20, S::SMaxAge),
        // §4.2.1 + §5.2.2.1: max-age over Expires
        (200, &[("date", DATE), ("cache-control", "max-age=10"), ("expires", DATE_PLUS_1H)], 10, S::MaxAge),
        // §5.3: Expires - Date
        (200, &[("date", DATE), ("expires", DATE_PLUS_1H)], 3600, S::Expires),
        // §5.3: Expires before Date: already expired
        (200, &[("date", DATE), ("expires", DATE_MINUS_1H)], 0, S::Expires),
        // §5.3: invalid Expires ("0") means already expired, not heuristic
        (200, &[("date", DATE), ("expires", "0"), ("last-modified", DATE_MINUS_10D)], 0, S::Expires),
        // §5.3: invalid Expires date format: expired
        (200, &[("date", DATE), ("expires", "2024-01-01")], 0, S::Expires),
        // §5.3 + RFC 9110 §5.6.7: Expires with day, month and zone in other letter cases
        (200, &[("date", DATE), ("expires", "MON, 01 jan 2024 01:00:00 gmt")], 3600, S::Expires),
        // §5.3 + RFC 9110 §5.6.7: a day name that does not match is ignored
        (200, &[("date", DATE), ("expires", "Fri, 01 Jan 2024 01:00:00 GMT")], 3600, S::Expires),
        // §5.3 + RFC 9110 §5.6.7: Expires in the RFC 850 and asctime forms
        (200, &[("date", DATE), ("expires", "Monday, 01-Jan-24 01:00:00 GMT")], 3600, S::Expires),
        (200, &[("date", "Mon Jan  1 00:00:00 2024"), ("expires", "Mon Jan  1 01:00:00 2024")], 3600, S::Expires),
        // §5.3: another zone is an invalid Expires: expired
        (200, &[("date", DATE), ("expires", "Mon, 01 Jan 2024 01:00:00 UTC")], 0, S::Expires),
        // §4.2.1: duplicate Expires, the first counts
        (200, &[("date", DATE), ("expires", DATE_PLUS_1H), ("expires", "0")], 3600, S::Expires),
        // §5.3: Expires without a valid Date (ensure_date not called): expired
        (200, &[("expires", DATE_PLUS_1H)], 0, S::Expires),
        // §4.2.1: any status may have explicit freshness
        (302, &[("date", DATE), ("cache-control", "max-age=30")], 30, S::MaxAge),
        // §4.2.1: invalid max-age means stale even with Expires
        (200, &[("date", DATE), ("cache-control", "max-age=abc"), ("expires", DATE_PLUS_1H)], 0, S::MaxAge),
        // §4.2.2: heuristic 10% of Date - Last-Modified (10 days → 1 day)
        (200, &[("date", DATE), ("last-modified", DATE_MINUS_10D)], 86_400, S::Heuristic),
        // §4.2.2: capped (100 days → 10 days, capped at 1 day)
        (200, &[("date", DATE), ("last-modified", DATE_MINUS_100D)], 86_400, S::Heuristic),
        // §4.2.2: 1 hour → 6 minutes
        (404, &[("date", DATE), ("last-modified", DATE_MINUS_1H)], 360, S::Heuristic),
        // §4.2.2: Last-Modified after Date → 0
        (200, &[("date", DATE), ("last-modified", DATE_PLUS_1H)], 0, S::Heuristic),
        // §4.2.2: invalid Last-Modified: no heuristic
        (200, &[("date", DATE), ("last-modified", "yesterday")], 0, S::None),
        // §4.2.2: 302 is not heuristically cacheable
        (302, &[("date", DATE), ("last-modified", DATE_MINUS_10D)], 0, S::None),
        // §4.2.2 + §5.2.2.9: public makes any status heuristically cacheable
        (302, &[("date", DATE), ("last-modified", DATE_MINUS_1H), ("cache-control", "public")], 360, S::Heuristic),
        // §4.2.2: every listed status code (RFC 9110 §15.1)
        (501, &[("date", DATE), ("last-modified", DATE_MINUS_1H)], 360, S::Heuristic),
        // §4.2.1: nothing → 0
        (200, &[("date", DATE)], 0, S::None),
    ];
    for (status, pairs, secs, source) in table {
        let h = headers(pairs);
        let dirs = ResponseDirectives::from_headers(&h, None);
        let got = freshness_lifetime(StatusCode::from_u16(*status).unwrap(), &h, &dirs, &opts);
        assert_eq!(got.value, Duration::from_secs(*secs), "{status} {pairs:?}");
        assert_eq!(got.source, *source, "{status} {pairs:?}");
    }
}

#[test]
fn default_ttl_only_where_heuristic() {
    let opts = FreshnessOptions {
        default_ttl: Duration::from_secs(120),
        ..FreshnessOptions::default()
    };
    #[rustfmt::skip]
    let table: &[(u16, Pairs, u64, LifetimeSource)] = &[
        // -t applies to a heuristically cacheable status without freshness information
        (200, &[("date", DATE)], 120, LifetimeSource::Default),
        // §4.2.2: not to other statuses
        (500, &[("date", DATE)], 0, LifetimeSource::None),
        // §5.2.2.9: public makes it heuristically cacheable
        (302, &[("date", DATE), ("cache-control", "public")], 120, LifetimeSource::Default),
        // §4.2.2: heuristic information comes before -t
        (200, &[("date", DATE), ("last-modified", DATE_MINUS_1H)], 360, LifetimeSource::Heuristic),
        // §4.2.1: explicit max-age=0 is not overridden by -t
        (200, &[("date", DATE), ("cache-control", "max-age=0")], 0, LifetimeSource::MaxAge),
    ];
    for (status, pairs, secs, source) in table {
        let h = headers(pairs);
        let dirs = ResponseDirectives::from_headers(&h, None);
        let got = freshness_lifetime(StatusCode::from_u16(*status).unwrap(), &h, &dirs, &opts);
        assert_eq!(
            (got.value, got.source),
            (Duration::from_secs(*secs), *source),
            "{status} {pairs:?}"
        );
    }
}

#[test]
fn targeted_field_ignores_expires() {
    // RFC 9213 §2.2: with a valid targeted field, Expires is ignored too
    let cdn = HeaderName::from_static("cdn-cache-control");
    let h = headers(&[
        ("date", DATE),
        ("expires", DATE_PLUS_1H),
        ("cdn-cache-control", "public"),
        ("last-modified", DATE_MINUS_1H),
    ]);
    let dirs = ResponseDirectives::from_headers(&h, Some(&cdn));
    let got = freshness_lifetime(StatusCode::OK, &h, &dirs, &FreshnessOptions::default());
    assert_eq!(got.source, LifetimeSource::Heuristic);
    assert!(!has_explicit_expiration(&h, &dirs));
    // Without the targeted field, Expires is explicit.
    let dirs = ResponseDirectives::from_headers(&h, None);
    assert!(has_explicit_expiration(&h, &dirs));
}

#[test]
fn heuristic_options_are_clamped() {
    let h = headers(&[("date", DATE), ("last-modified", DATE_MINUS_1H)]);
    let dirs = ResponseDirectives::default();
    #[rustfmt::skip]
    let table: &[(f64, u64)] = &[
        // §4.2.2: fraction NaN counts as 0
        (f64::NAN, 0),
        // §4.2.2: negative clamps to 0
        (-1.0, 0),
        // §4.2.2: more than 1 clamps to 1
        (5.0, 3600),
        // §4.2.2: 50%
        (0.5, 1800),
    ];
    for (fraction, secs) in table {
        let opts = FreshnessOptions {
            heuristic_fraction: *fraction,
            ..FreshnessOptions::default()
        };
        let got = freshness_lifetime(StatusCode::OK, &h, &dirs, &opts);
        assert_eq!(got.value, Duration::from_secs(*secs), "{fraction}");
    }
}

#[test]
fn retention_windows() {
    let s = Duration::from_secs;
    #[rustfmt::skip]
    let table: &[(&str, u64, u64, bool, u64, u64, u64)] = &[
        // (cache-control, lifetime, initial age, validator, grace, keep, expected)
        // §4.2.3: remaining freshness only
        ("max-age=100", 100, 10, false, 0, 0, 90),
        // RFC 5861: the longest stale window counts
        ("max-age=100, stale-while-revalidate=30, stale-if-error=60", 100, 0, false, 10, 0, 160),
        // configured grace
        ("max-age=100", 100, 0, false, 50, 0, 150),
        // §4.2.4: must-revalidate forbids stale: grace does not extend
        ("max-age=100, must-revalidate, stale-if-error=60", 100, 0, false, 50, 0, 100),
        // §4.3.1: keep only with a validator
        ("max-age=100", 100, 0, true, 10, 300, 400),
        // §4.3.1: no validator, keep useless
        ("max-age=100", 100, 0, false, 10, 300, 110),
        // §4.2.3: already older than its lifetime
        ("max-age=100", 100, 500, true, 0, 30, 30),
    ];
    for (line, life, age, validator, grace, keep, want) in table {
        let dirs = ResponseDirectives::from_headers(&headers(&[("cache-control", line)]), None);
        let got = retention(s(*life), s(*age), &dirs, *validator, s(*grace), s(*keep));
        assert_eq!(got, s(*want), "{line}");
    }
}
