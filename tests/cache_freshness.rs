//! Freshness (RFC 9111 §4.2): each source of a freshness lifetime, in its order of precedence,
//! `Age` computed with a received `Age` counted, the origin's `Date` kept, and expiry.
//!
//! Reuse is asserted with the origin's request counter, not only `X-Cache`.

mod support;

use std::time::Duration;

use support::{get, http_date_from_now, shared_clock, start_proxy, Origin, OriginReply};

#[tokio::test]
async fn max_age_is_reused_with_age() {
    let origin = Origin::fixed(OriginReply::ok("fresh").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let first = get(addr, "/m", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.cache(), "MISS");
    assert_eq!(first.body, "fresh");
    let second = get(addr, "/m", &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.body, "fresh");
    let age = second.age().expect("a cached response carries Age");
    assert!(age < 60, "Age {age}");
    assert_eq!(origin.requests(), 1, "the second request was served from cache");
}

#[tokio::test]
async fn s_maxage_beats_max_age() {
    let origin = Origin::start(|request| match request.uri().path() {
        // A shared cache uses s-maxage and ignores max-age (§5.2.2.10).
        "/shared-long" => OriginReply::ok("a").cache_control("max-age=0, s-maxage=60"),
        "/shared-zero" => OriginReply::ok("b").cache_control("max-age=60, s-maxage=0"),
        _ => OriginReply::with_status(404, ""),
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    get(addr, "/shared-long", &[]).await;
    let second = get(addr, "/shared-long", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(
        origin.requests_for("/shared-long"),
        1,
        "s-maxage=60 made it reusable despite max-age=0"
    );

    get(addr, "/shared-zero", &[]).await;
    let second = get(addr, "/shared-zero", &[]).await;
    assert_ne!(second.cache(), "HIT");
    assert_eq!(second.body, "b");
    assert_eq!(
        origin.requests_for("/shared-zero"),
        2,
        "s-maxage=0 made it stale despite max-age=60"
    );
}

#[tokio::test]
async fn expires_minus_date() {
    let origin = Origin::start(|request| {
        let date = http_date_from_now(0);
        match request.uri().path() {
            "/expires-later" => OriginReply::ok("e")
                .header("date", &date)
                .header("expires", http_date_from_now(60)),
            // Expires equal to Date: lifetime 0, never reused.
            "/expires-now" => OriginReply::ok("n")
                .header("date", &date)
                .header("expires", &date),
            // An invalid Expires means "already expired" (§5.3).
            "/expires-invalid" => OriginReply::ok("i").header("date", &date).header("expires", "0"),
            _ => OriginReply::with_status(404, ""),
        }
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for path in ["/expires-later", "/expires-now", "/expires-invalid"] {
        let first = get(addr, path, &[]).await;
        assert_eq!(first.status, 200, "{path}");
        let second = get(addr, path, &[]).await;
        assert_eq!(second.status, 200, "{path}");
        if path == "/expires-later" {
            assert_eq!(second.cache(), "HIT", "{path}");
            assert_eq!(origin.requests_for(path), 1, "{path}");
        } else {
            assert_ne!(second.cache(), "HIT", "{path}");
            assert_eq!(origin.requests_for(path), 2, "{path}");
        }
    }
}

#[tokio::test]
async fn heuristic_from_last_modified() {
    let origin = Origin::start(|request| {
        // Modified 1000 s ago: 10% gives 100 s of heuristic freshness (§4.2.2).
        let last_modified = http_date_from_now(-1000);
        match request.uri().path() {
            "/heuristic" => OriginReply::ok("h").header("last-modified", &last_modified),
            // 302 is not heuristically cacheable: no reuse without explicit freshness.
            "/heuristic-302" => OriginReply::with_status(302, "r")
                .header("location", "/elsewhere")
                .header("last-modified", &last_modified),
            _ => OriginReply::with_status(404, ""),
        }
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    get(addr, "/heuristic", &[]).await;
    let second = get(addr, "/heuristic", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(origin.requests_for("/heuristic"), 1);

    let first = get(addr, "/heuristic-302", &[]).await;
    assert_eq!(first.status, 302);
    let second = get(addr, "/heuristic-302", &[]).await;
    assert_eq!(second.status, 302);
    assert_ne!(second.cache(), "HIT");
    assert_eq!(origin.requests_for("/heuristic-302"), 2);
}

#[tokio::test]
async fn default_ttl_applies_to_responses_without_freshness_information() {
    let origin = Origin::fixed(OriginReply::ok("plain")).await;
    let (_proxy, addr) =
        start_proxy(origin.addr, |config| config.default_ttl = Duration::from_secs(60)).await;

    assert_eq!(get(addr, "/plain", &[]).await.cache(), "MISS");
    let second = get(addr, "/plain", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.body, "plain");
    assert_eq!(origin.requests(), 1, "-t 60 made the response reusable");
}

#[tokio::test]
async fn no_freshness_information_is_not_reused_by_default() {
    let origin = Origin::fixed(OriginReply::ok("plain")).await;
    // default_ttl stays 0, as RFC 9111 requires.
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for round in 1..=3 {
        let reply = get(addr, "/plain", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "plain");
        assert_ne!(reply.cache(), "HIT", "round {round}");
        assert_eq!(origin.requests(), round, "every request goes to the origin");
    }
}

#[tokio::test]
async fn received_age_counts() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/aged" => OriginReply::ok("aged")
            .cache_control("max-age=100")
            .header("age", "30"),
        // Already older than its lifetime when it arrives: not reusable.
        "/too-old" => OriginReply::ok("old")
            .cache_control("max-age=10")
            .header("age", "20"),
        _ => OriginReply::with_status(404, ""),
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let first = get(addr, "/aged", &[]).await;
    let age = first.age().expect("Age on the response that filled the cache");
    assert!((30..100).contains(&age), "first Age {age}");
    let second = get(addr, "/aged", &[]).await;
    assert_eq!(second.cache(), "HIT");
    let age = second.age().expect("Age on a hit");
    assert!((30..100).contains(&age), "the origin's Age 30 counts: got {age}");
    assert_eq!(second.headers.get_all("age").iter().count(), 1, "one Age field");
    assert_eq!(origin.requests_for("/aged"), 1);

    get(addr, "/too-old", &[]).await;
    let second = get(addr, "/too-old", &[]).await;
    assert_ne!(second.cache(), "HIT");
    assert_eq!(origin.requests_for("/too-old"), 2);
}

#[tokio::test]
async fn origin_date_is_kept_and_apparent_age_counts() {
    // The origin's clock says the response is 5 s old (§4.2.3 apparent_age).
    let date = http_date_from_now(-5);
    let reply = OriginReply::ok("dated")
        .cache_control("max-age=60")
        .header("date", &date);
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    get(addr, "/dated", &[]).await;
    let second = get(addr, "/dated", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(
        second.header("date"),
        Some(date.as_str()),
        "the origin's Date is kept"
    );
    let age = second.age().expect("Age");
    assert!((5..60).contains(&age), "Age {age} includes the apparent age");
    assert_eq!(origin.requests(), 1);
}

/// The origin sends `max-age=2` with `Age: 1`: the object arrives with one second of freshness
/// left whatever the sub-second offset of `Date`, so moving the cache's clock just over 1 s
/// forward expires it.
#[tokio::test]
async fn expired_object_is_fetched_again() {
    let origin = Origin::fixed(
        OriginReply::ok("short")
            .cache_control("max-age=2")
            .header("age", "1"),
    )
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let clock = shared_clock(&proxy, &origin);

    assert_eq!(get(addr, "/short", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/short", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 1);

    clock.advance(Duration::from_millis(1100));
    let after = get(addr, "/short", &[]).await;
    assert_eq!(after.cache(), "MISS", "expired after its 2 s lifetime");
    assert_eq!(origin.requests(), 2);
    assert_eq!(
        get(addr, "/short", &[]).await.cache(),
        "HIT",
        "the refetched object is stored again"
    );
    assert_eq!(origin.requests(), 2);
}
