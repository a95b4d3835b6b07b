//! Revalidation (RFC 9111 §4.3): stale objects with `ETag` / `Last-Modified` are revalidated
//! with conditional requests; a 304 updates the stored header fields it carries (§4.3.4) and
//! the stored body is served (`X-Cache: REVALIDATED`); the next hit shows the new values.
//! `no-cache` responses are stored and revalidated on every use (§5.2.2.4), and the
//! qualified `no-cache="field"` / `private="field"` forms strip those fields from what is
//! stored (§5.2.2.4, §5.2.2.7).
//!
//! Most tests make the object stale on arrival with `max-age=0` plus a validator (stored for
//! revalidation, no waiting). One test watches a `max-age=1` object expire: it moves the
//! cache's clock just past the one second of freshness.

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use support::{get, http_date_from_now, shared_clock, start_proxy, Origin, OriginReply};

fn header<'a>(request: &'a Request<Bytes>, name: &str) -> Option<&'a str> {
    request.headers().get(name).map(|v| v.to_str().unwrap())
}

/// Longer than a `max-age=1` lifetime: the origin's `Date` has whole seconds, so the object
/// may arrive with up to a second of apparent age, never more.
const PAST_ONE_SECOND: Duration = Duration::from_millis(1100);

support::modes! {
    async fn etag_revalidation_updates_headers_and_keeps_the_body() {
        let origin = Origin::start(|request| {
            if header(request, "if-none-match") == Some("\"v1\"") {
                OriginReply::with_status(304, "")
                    .header("etag", "\"v1\"")
                    .cache_control("max-age=60")
                    .header("x-version", "2")
            } else {
                OriginReply::ok("stored body")
                    .header("etag", "\"v1\"")
                    .header("content-type", "text/plain")
                    .cache_control("max-age=1")
                    .header("x-version", "1")
            }
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let clock = shared_clock(&proxy, &origin);

        let first = get(addr, "/e", &[]).await;
        assert_eq!((first.status.as_u16(), first.cache()), (200, "MISS"));
        assert_eq!(first.header("x-version"), Some("1"));
        assert_eq!(origin.requests(), 1);
        assert_eq!(
            origin.last().header("if-none-match"),
            None,
            "a miss is unconditional"
        );

        // Wait just past the one second of freshness.
        clock.advance(PAST_ONE_SECOND);

        let second = get(addr, "/e", &[]).await;
        assert_eq!(second.status, 200);
        assert_eq!(second.cache(), "REVALIDATED");
        assert_eq!(
            second.body, "stored body",
            "the stored body is served after a 304"
        );
        assert_eq!(second.header("content-length"), Some("11"));
        assert_eq!(second.header("content-type"), Some("text/plain"));
        assert_eq!(
            second.header("x-version"),
            Some("2"),
            "the 304's fields replace the stored ones"
        );
        assert_eq!(origin.requests(), 2);
        let revalidation = origin.last();
        assert_eq!(revalidation.header("if-none-match"), Some("\"v1\""));

        let third = get(addr, "/e", &[]).await;
        assert_eq!(third.cache(), "HIT", "the 304's max-age=60 made the object fresh");
        assert_eq!(third.body, "stored body");
        assert_eq!(
            third.header("x-version"),
            Some("2"),
            "the next hit shows the new value"
        );
        assert_eq!(third.header("cache-control"), Some("max-age=60"));
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn last_modified_revalidation() {
        let last_modified = http_date_from_now(-3600);
        let lm = last_modified.clone();
        let origin = Origin::start(move |request| {
            if header(request, "if-modified-since") == Some(lm.as_str()) {
                OriginReply::with_status(304, "")
                    .cache_control("max-age=60")
                    .header("x-version", "2")
            } else {
                OriginReply::ok("dated body")
                    .header("last-modified", &lm)
                    .cache_control("max-age=0")
                    .header("x-version", "1")
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(addr, "/lm", &[]).await;
        assert_eq!((first.cache(), first.text().as_str()), ("MISS", "dated body"));

        // max-age=0 with a validator: stored, and stale at once.
        let second = get(addr, "/lm", &[]).await;
        assert_eq!(second.status, 200);
        assert_eq!(second.cache(), "REVALIDATED");
        assert_eq!(second.body, "dated body");
        assert_eq!(second.header("x-version"), Some("2"));
        assert_eq!(second.header("last-modified"), Some(last_modified.as_str()));
        let revalidation = origin.last();
        assert_eq!(
            revalidation.header("if-modified-since"),
            Some(last_modified.as_str())
        );
        assert_eq!(
            revalidation.header("if-none-match"),
            None,
            "there is no ETag to send"
        );

        let third = get(addr, "/lm", &[]).await;
        assert_eq!(third.cache(), "HIT");
        assert_eq!(third.header("x-version"), Some("2"));
        assert_eq!(third.body, "dated body");
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn a_200_to_a_revalidation_replaces_the_object() {
        let origin = Origin::start(|request| {
            if header(request, "if-none-match").is_some() {
                OriginReply::ok("new")
                    .header("etag", "\"v2\"")
                    .cache_control("max-age=60")
            } else {
                OriginReply::ok("old")
                    .header("etag", "\"v1\"")
                    .cache_control("max-age=0")
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        assert_eq!(get(addr, "/r", &[]).await.body, "old");
        let second = get(addr, "/r", &[]).await;
        assert_eq!(second.body, "new");
        assert_eq!(second.header("etag"), Some("\"v2\""));
        assert_eq!(origin.last().header("if-none-match"), Some("\"v1\""));
        support::eventually_stored(&_proxy, 1).await;
        // The fill completes after the client saw the last byte; poll (bounded) for the HIT.
        let third = hit_eventually(addr, "/r").await;
        assert_eq!(third.body, "new");
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    /// A 304 that carries a different strong `ETag` does not select the stored response
    /// (§4.3.4); the cache must not update it, and must not relay a 304 to a client that sent no
    /// conditional: it fetches the full response instead (§4.3.3).
    async fn a_304_for_another_representation_is_not_relayed_to_an_unconditional_client() {
        let origin = Origin::start(|request| match header(request, "if-none-match") {
            Some(_) => OriginReply::with_status(304, "")
                .header("etag", "\"other\"")
                .cache_control("max-age=60"),
            None => OriginReply::ok("full body")
                .header("etag", "\"v1\"")
                .cache_control("max-age=0"),
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        assert_eq!(get(addr, "/mismatch", &[]).await.body, "full body");
        let second = get(addr, "/mismatch", &[]).await;
        assert_eq!(
            second.status, 200,
            "the client sent no conditional, so it must get a full response, not the origin's 304"
        );
        assert_eq!(second.body, "full body");
        assert_eq!(
            origin.last().header("if-none-match"),
            None,
            "the retry is unconditional"
        );
    }
}

support::modes! {
    async fn no_cache_responses_are_stored_and_revalidated_on_every_use() {
        let origin = Origin::start(|request| {
            let matches = header(request, "if-none-match") == Some("\"nc\"");
            match (request.uri().path(), matches) {
                // Directive names are case-insensitive (§5.2).
                ("/no-cache", true) => OriginReply::with_status(304, "").header("etag", "\"nc\""),
                ("/no-cache", false) => OriginReply::ok("validated")
                    .header("etag", "\"nc\"")
                    .cache_control("max-age=60, No-Cache"),
                // Without a validator there is nothing to revalidate with: never reused.
                _ => OriginReply::ok("plain").cache_control("max-age=60, no-cache"),
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(addr, "/no-cache", &[]).await;
        assert_eq!((first.cache(), first.text().as_str()), ("MISS", "validated"));
        for n in 2..=3 {
            let again = get(addr, "/no-cache", &[]).await;
            assert_eq!(again.status, 200);
            assert_eq!(again.cache(), "REVALIDATED", "use {n} is validated first");
            assert_eq!(again.body, "validated");
            assert_eq!(origin.requests_for("/no-cache"), n);
            assert_eq!(origin.last().header("if-none-match"), Some("\"nc\""));
        }

        for n in 1..=2 {
            let plain = get(addr, "/plain", &[]).await;
            assert_eq!(plain.body, "plain");
            assert_ne!(plain.cache(), "HIT");
            assert_eq!(origin.requests_for("/plain"), n);
        }
    }
}

support::modes! {
    async fn field_scoped_no_cache_and_private_strip_the_fields_before_storing() {
        let origin = Origin::start(|request| {
            let reply = OriginReply::ok(request.uri().path().to_string())
                .header("x-foo", "secret")
                .header("x-bar", "kept");
            match request.uri().path() {
                "/nc" => reply.cache_control("max-age=60, no-cache=\"X-Foo\""),
                "/nc-upper" => reply.cache_control("MAX-AGE=60, NO-CACHE=\"x-foo\""),
                "/private" => reply.cache_control("max-age=60, private=\"X-Foo\""),
                "/private-list" => reply.cache_control("max-age=60, private=\"X-Bar, X-Foo\""),
                // Set-Cookie named in private="...": stored without it (Varnish's builtin
                // rule against Set-Cookie does not apply once it is stripped).
                "/cookie" => reply
                    .header("set-cookie", "session=1")
                    .cache_control("max-age=60, private=\"Set-Cookie\", no-cache=\"X-Foo\""),
                _ => OriginReply::with_status(404, ""),
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        for path in ["/nc", "/nc-upper", "/private", "/private-list", "/cookie"] {
            get(addr, path, &[]).await;
            let hit = get(addr, path, &[]).await;
            assert_eq!(
                hit.cache(),
                "HIT",
                "{path}: stored despite the qualified directive"
            );
            assert_eq!(hit.text(), path);
            assert_eq!(hit.header("x-foo"), None, "{path}: the named field is not stored");
            assert_eq!(origin.requests_for(path), 1, "{path}");
            match path {
                "/private-list" => assert_eq!(hit.header("x-bar"), None, "{path}"),
                _ => assert_eq!(hit.header("x-bar"), Some("kept"), "{path}: other fields are"),
            }
            if path == "/cookie" {
                assert_eq!(hit.header("set-cookie"), None);
            }
        }
    }
}

/// Polls (bounded) until `path` is a HIT: a miss inserts the object after the last byte went
/// to the client.
async fn hit_eventually(addr: std::net::SocketAddr, path: &str) -> support::Reply {
    for _ in 0..500 {
        let reply = get(addr, path, &[]).await;
        if reply.cache() == "HIT" {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{path} never became a HIT");
}
