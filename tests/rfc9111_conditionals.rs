//! Client conditionals answered from the cache (RFC 9111 §4.3.2; RFC 9110 §13): a stored 2xx
//! answers `If-None-Match` (weak comparison, lists, `*`) and `If-Modified-Since` with 304
//! without contacting the origin; `If-None-Match` wins over `If-Modified-Since`; the 304
//! carries `ETag`, `Cache-Control`, `Expires`, `Vary`, `Date` and `Content-Location`
//! (RFC 9110 §15.4.5).

mod support;

use std::net::SocketAddr;

use support::{get, http_date_from_now, start_proxy, Origin, OriginReply};

struct Fixture {
    origin: Origin,
    addr: SocketAddr,
    _proxy: edgecache_runtime::Running,
    last_modified: String,
}

/// An origin whose `/strong` has `ETag: "v1"`, `/weak` has `ETag: W/"w1"`, and both a
/// `Last-Modified` an hour ago; each stored once before the test starts.
async fn fixture() -> Fixture {
    let last_modified = http_date_from_now(-3600);
    let expires = http_date_from_now(60);
    let lm = last_modified.clone();
    let origin = Origin::start(move |request| {
        let etag = match request.uri().path() {
            "/weak" => "W/\"w1\"",
            _ => "\"v1\"",
        };
        OriginReply::ok("representation")
            .header("etag", etag)
            .header("last-modified", &lm)
            .header("expires", &expires)
            .header("vary", "X-Variant")
            .header("content-location", "/representation.txt")
            .header("content-type", "text/plain")
            .header("x-other", "not in a 304")
            .cache_control("max-age=60")
    })
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for path in ["/strong", "/weak"] {
        get(addr, path, &[]).await;
    }
    support::eventually_stored(&proxy, 2).await;
    Fixture {
        origin,
        addr,
        _proxy: proxy,
        last_modified,
    }
}

support::modes! {
    async fn if_none_match_is_answered_from_cache_with_the_304_fields() {
        let f = fixture().await;
        let reply = get(f.addr, "/strong", &[("if-none-match", "\"v1\"")]).await;
        assert_eq!(reply.status, 304);
        assert_eq!(reply.cache(), "HIT");
        assert!(reply.body.is_empty());
        for name in [
            "etag",
            "cache-control",
            "expires",
            "vary",
            "date",
            "content-location",
        ] {
            assert!(
                reply.header(name).is_some(),
                "a 304 carries {name}: {:?}",
                reply.headers
            );
        }
        assert_eq!(reply.header("etag"), Some("\"v1\""));
        assert_eq!(reply.header("cache-control"), Some("max-age=60"));
        assert_eq!(reply.header("vary"), Some("X-Variant"));
        assert_eq!(reply.header("content-location"), Some("/representation.txt"));
        assert_eq!(
            reply.header("x-other"),
            None,
            "other representation metadata is left out"
        );
        assert!(reply.age().is_some(), "a 304 from the cache has an Age");
        assert_eq!(f.origin.requests(), 2, "the origin was not asked");
    }
}

support::modes! {
    async fn if_none_match_uses_weak_comparison_lists_and_star() {
        let f = fixture().await;
        let cases: &[(&str, &str, u16)] = &[
            ("/strong", "\"v1\"", 304),
            ("/strong", "W/\"v1\"", 304),
            ("/weak", "W/\"w1\"", 304),
            ("/weak", "\"w1\"", 304),
            ("/strong", "\"a\", \"v1\"", 304),
            ("/strong", "\"a\",\"b\" , W/\"v1\"", 304),
            ("/strong", "\"a\", \"b\"", 200),
            ("/strong", "\"V1\"", 200),
            ("/strong", "*", 304),
            ("/weak", "*", 304),
            ("/strong", "v1", 200),
        ];
        for &(path, value, status) in cases {
            let reply = get(f.addr, path, &[("if-none-match", value)]).await;
            assert_eq!(reply.status, status, "{path} If-None-Match: {value}");
            assert_eq!(reply.cache(), "HIT", "{path} If-None-Match: {value}");
            if status == 200 {
                assert_eq!(reply.body, "representation", "{path} If-None-Match: {value}");
            }
        }
        assert_eq!(f.origin.requests(), 2, "every answer came from the cache");
    }
}

support::modes! {
    async fn if_none_match_wins_over_if_modified_since() {
        let f = fixture().await;
        let future = http_date_from_now(3600);
        let past = http_date_from_now(-7200);

        // The entity-tag does not match: 200, although If-Modified-Since alone would give 304.
        let reply = get(
            f.addr,
            "/strong",
            &[("if-none-match", "\"other\""), ("if-modified-since", &future)],
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "representation");

        // It matches: 304, although If-Modified-Since alone would give 200.
        let reply = get(
            f.addr,
            "/strong",
            &[("if-none-match", "\"v1\""), ("if-modified-since", &past)],
        )
        .await;
        assert_eq!(reply.status, 304);
        assert_eq!(f.origin.requests(), 2);
    }
}

support::modes! {
    async fn if_modified_since_alone() {
        let f = fixture().await;
        let past = http_date_from_now(-7200);
        let cases: &[(&str, u16)] = &[
            (f.last_modified.as_str(), 304),
            (&http_date_from_now(60), 304),
            (&past, 200),
            // Not a valid HTTP-date: ignored.
            ("yesterday", 200),
        ];
        for &(value, status) in cases {
            let reply = get(f.addr, "/strong", &[("if-modified-since", value)]).await;
            assert_eq!(reply.status, status, "If-Modified-Since: {value}");
            assert_eq!(reply.cache(), "HIT");
        }
        assert_eq!(f.origin.requests(), 2);
    }
}

support::modes! {
    async fn a_conditional_miss_fetches_unconditionally_and_answers_304_itself() {
        let origin = Origin::fixed(
            OriginReply::ok("fresh")
                .header("etag", "\"c\"")
                .cache_control("max-age=60"),
        )
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let reply = get(addr, "/cold", &[("if-none-match", "\"c\"")]).await;
        assert_eq!(reply.status, 304);
        assert_eq!(reply.cache(), "MISS");
        assert_eq!(
            origin.last().header("if-none-match"),
            None,
            "the cache fetches the whole representation to store it"
        );
        support::eventually_stored(&proxy, 1).await;
        let reply = get(addr, "/cold", &[]).await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "HIT"));
        assert_eq!(reply.body, "fresh");
        assert_eq!(origin.requests(), 1);
    }
}
