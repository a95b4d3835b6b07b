//! Serving stale (RFC 9111 §4.2.4; RFC 5861): `stale-while-revalidate` answers at once and
//! refreshes in the background, once per object; `stale-if-error` and the configured grace
//! answer when the origin fails (down, timing out, or a 5xx); `must-revalidate`,
//! `proxy-revalidate`, `no-cache` and `s-maxage` forbid all of it, whatever the grace.
//!
//! Objects are made stale either on arrival (`max-age=0` with an `ETag`, kept for
//! revalidation) or by waiting just past a `max-age=1` lifetime; each such wait says so.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{get, shared_clock, start_proxy, Origin, OriginReply, Reply};

/// Longer than a `max-age=1` lifetime: the origin's `Date` has whole seconds, so an object
/// arrives with under a second of apparent age.
const PAST_ONE_SECOND: Duration = Duration::from_millis(1100);

/// Polls `done` until it holds, at most 5 s. For background work with no other signal.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// GETs `path` until the answer is a HIT (bounded), returning it.
async fn hit_eventually(addr: std::net::SocketAddr, path: &str) -> Reply {
    for _ in 0..1000 {
        let reply = get(addr, path, &[]).await;
        if reply.cache() == "HIT" {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{path} never became a HIT");
}

support::modes! {
    async fn stale_while_revalidate_answers_at_once_and_refreshes_once() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let counter = fetches.clone();
        let origin = Origin::start(move |_| {
            match counter.fetch_add(1, Ordering::SeqCst) {
                0 => OriginReply::ok("v1").cache_control("max-age=1, stale-while-revalidate=60"),
                // The refresh is slow: stale answers must not wait for it.
                _ => OriginReply::ok("v2")
                    .cache_control("max-age=60")
                    .delay(Duration::from_millis(500)),
            }
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let clock = shared_clock(&proxy, &origin);

        assert_eq!(get(addr, "/swr", &[]).await.body, "v1");
        // Wait just past the one second of freshness.
        clock.advance(PAST_ONE_SECOND);

        let replies = support::concurrently(8, |_| get(addr, "/swr", &[])).await;
        for reply in &replies {
            assert_eq!(reply.status, 200);
            assert_eq!(reply.cache(), "STALE");
            assert_eq!(
                reply.body, "v1",
                "answered from the stale object, not after the refresh"
            );
            assert!(reply.age().unwrap() >= 1);
        }
        let more = get(addr, "/swr", &[]).await;
        assert_eq!((more.cache(), more.text().as_str()), ("STALE", "v1"));

        eventually("the background refresh", || origin.requests() >= 2).await;
        let fresh = hit_eventually(addr, "/swr").await;
        assert_eq!(fresh.body, "v2");
        assert_eq!(
            origin.requests(),
            2,
            "exactly one background fetch for nine stale answers"
        );
        assert_eq!(origin.max_in_flight(), 1);
    }
}

support::modes! {
    async fn stale_while_revalidate_refreshes_with_a_conditional_request() {
        let origin = Origin::start(|request| {
            if request.headers().contains_key("if-none-match") {
                OriginReply::with_status(304, "")
                    .header("etag", "\"s\"")
                    .header("x-refreshed", "yes")
                    .cache_control("max-age=60")
            } else {
                OriginReply::ok("body")
                    .header("etag", "\"s\"")
                    .cache_control("max-age=0, stale-while-revalidate=60")
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        get(addr, "/swr-etag", &[]).await;
        let stale = get(addr, "/swr-etag", &[]).await;
        assert_eq!((stale.cache(), stale.text().as_str()), ("STALE", "body"));
        eventually("the background revalidation", || origin.requests() >= 2).await;
        assert_eq!(origin.last().header("if-none-match"), Some("\"s\""));
        let fresh = hit_eventually(addr, "/swr-etag").await;
        assert_eq!(fresh.body, "body");
        assert_eq!(fresh.header("x-refreshed"), Some("yes"));
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    /// RFC 5861 §3 allows serving a response stale as soon as it arrives when it says so:
    /// `max-age=0, stale-while-revalidate=60` without a validator is still worth storing.
    async fn stale_while_revalidate_without_validator_or_freshness_is_stored() {
        let origin =
            Origin::fixed(OriginReply::ok("swr").cache_control("max-age=0, stale-while-revalidate=60")).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        get(addr, "/swr0", &[]).await;
        eventually("the object stored", || proxy.cache_usage().keys >= 1).await;
        let second = get(addr, "/swr0", &[]).await;
        assert_eq!(second.cache(), "STALE");
        assert_eq!(second.body, "swr");
    }
}

/// Paths and the `Cache-Control` each stores; every object has an `ETag`, so it is kept
/// (`keep`) for revalidation and the stale rules alone decide.
const OBJECTS: &[(&str, &str, bool)] = &[
    // (path, Cache-Control, served stale when the origin is down)
    ("/sie", "max-age=1, stale-if-error=60", true),
    ("/grace", "max-age=1", true),
    (
        "/must-revalidate",
        "max-age=1, must-revalidate, stale-if-error=60",
        false,
    ),
    (
        "/proxy-revalidate",
        "max-age=1, proxy-revalidate, stale-if-error=60",
        false,
    ),
    ("/s-maxage", "s-maxage=1, stale-if-error=60", false),
    ("/no-cache", "max-age=1, no-cache, stale-if-error=60", false),
    (
        "/no-cache-field",
        "max-age=1, no-cache=\"x-foo\", stale-if-error=60",
        false,
    ),
];

fn object_origin() -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    |request| {
        let path = request.uri().path();
        let (_, cache_control, _) = OBJECTS.iter().find(|(p, _, _)| *p == path).expect("known path");
        OriginReply::ok(format!("stored {path}"))
            .header("etag", "\"e\"")
            .cache_control(cache_control)
    }
}

support::modes! {
    async fn origin_down_serves_stale_unless_forbidden() {
        let origin = Origin::start(object_origin()).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let clock = shared_clock(&proxy, &origin);
        for (path, _, _) in OBJECTS {
            assert_eq!(get(addr, path, &[]).await.cache(), "MISS", "{path}");
        }
        origin.stop().await;
        // Wait just past the one second of freshness.
        clock.advance(PAST_ONE_SECOND);

        for &(path, _, stale_ok) in OBJECTS {
            let reply = get(addr, path, &[]).await;
            if stale_ok {
                assert_eq!(reply.status, 200, "{path}");
                assert_eq!(reply.cache(), "STALE", "{path}");
                assert_eq!(reply.text(), format!("stored {path}"));
            } else {
                assert_eq!(reply.status, 503, "{path}: origin down, stale forbidden");
                assert_ne!(reply.text(), format!("stored {path}"), "{path}");
            }
        }
    }
}

support::modes! {
    async fn zero_grace_serves_stale_only_with_stale_if_error() {
        let origin = Origin::start(object_origin()).await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.grace = Duration::ZERO).await;
        let clock = shared_clock(&proxy, &origin);
        for path in ["/sie", "/grace"] {
            get(addr, path, &[]).await;
        }
        origin.stop().await;
        // Wait just past the one second of freshness.
        clock.advance(PAST_ONE_SECOND);

        let sie = get(addr, "/sie", &[]).await;
        assert_eq!((sie.status.as_u16(), sie.cache()), (200, "STALE"));
        let grace = get(addr, "/grace", &[]).await;
        assert_eq!(grace.status, 503, "no stale-if-error and no grace: the error");
    }
}

support::modes! {
    async fn origin_errors_and_timeouts_serve_stale_unless_forbidden() {
        let failing = Arc::new(AtomicBool::new(false));
        let slow = Arc::new(AtomicBool::new(false));
        let (f, s) = (failing.clone(), slow.clone());
        let origin = Origin::start(move |request| {
            if f.load(Ordering::SeqCst) {
                return OriginReply::with_status(500, "origin broke");
            }
            let reply = OriginReply::ok(format!("stored {}", request.uri().path())).header("etag", "\"e\"");
            let reply = match request.uri().path() {
                "/strict" => reply.cache_control("max-age=0, must-revalidate, stale-if-error=60"),
                _ => reply.cache_control("max-age=0, stale-if-error=60"),
            };
            if s.load(Ordering::SeqCst) {
                reply.delay(Duration::from_secs(5))
            } else {
                reply
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| {
            config.grace = Duration::ZERO;
            // The backend's head budget is connect + first-byte timeout.
            config.timeouts.connect = Duration::from_millis(200);
            config.timeouts.first_byte = Duration::from_millis(300);
        })
        .await;
        get(addr, "/lenient", &[]).await;
        get(addr, "/strict", &[]).await;

        // A 500 from the origin (RFC 5861 §4).
        failing.store(true, Ordering::SeqCst);
        let reply = get(addr, "/lenient", &[]).await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "STALE"));
        assert_eq!(reply.body, "stored /lenient");
        let reply = get(addr, "/strict", &[]).await;
        assert_eq!(
            reply.status, 500,
            "must-revalidate: the origin's error is relayed"
        );
        assert_eq!(reply.body, "origin broke");

        // No response head within the first-byte timeout.
        failing.store(false, Ordering::SeqCst);
        slow.store(true, Ordering::SeqCst);
        let reply = get(addr, "/lenient", &[]).await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "STALE"));
        let reply = get(addr, "/strict", &[]).await;
        assert_eq!(
            reply.status, 504,
            "must-revalidate: a timeout is a 504, not stale content"
        );
        assert_eq!(origin.requests(), 6);
    }
}

support::modes! {
    async fn stale_while_revalidate_is_not_used_when_the_response_forbids_stale() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let counter = fetches.clone();
        let origin = Origin::start(move |request| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let cache_control = match request.uri().path() {
                "/mr" => "max-age=1, must-revalidate, stale-while-revalidate=60",
                "/pr" => "max-age=1, proxy-revalidate, stale-while-revalidate=60",
                _ => "s-maxage=1, stale-while-revalidate=60",
            };
            OriginReply::ok(format!("v{n}")).cache_control(cache_control)
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let clock = shared_clock(&proxy, &origin);
        let paths = ["/mr", "/pr", "/sm"];
        for path in paths {
            get(addr, path, &[]).await;
        }
        // Wait just past the one second of freshness.
        clock.advance(PAST_ONE_SECOND);
        for path in paths {
            let reply = get(addr, path, &[]).await;
            assert_ne!(reply.cache(), "STALE", "{path}");
            assert_eq!(reply.cache(), "MISS", "{path}: fetched while the client waited");
            assert_eq!(origin.requests_for(path), 2, "{path}");
        }
    }
}
