//! Details where established caches disagree with the RFCs:
//! - `Age` (RFC 9111 §5.1): an invalid value is ignored, of duplicates the first counts, huge
//!   values saturate at 2^31;
//! - `Expires` (§5.3, §4.2.1): invalid means already stale; the lifetime is `Expires` − `Date`;
//! - `Vary` (§4.1): `*` in any position never matches; values compared after combining lines
//!   and normalising whitespace, names compared case-insensitively;
//! - `Authorization` / `Cookie` requests are never answered from the cache (builtin pass);
//! - fields named in `Connection` are neither forwarded nor stored (RFC 9110 §7.6.1);
//! - every other field is stored, `Content-Range` on a `200` too (RFC 9111 §3.1; Varnish's
//!   builtin removes it);
//! - `PRI` is refused with `405` (Varnish's builtin); other unknown methods reach the origin
//!   with their body.
//! - interim 1xx responses are never cached and never break the final response.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use support::{get, http_date, http_date_from_now, shared_clock, start_proxy, Origin, OriginReply, RawConn};

async fn twice(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> support::Reply {
    get(addr, path, headers).await;
    get(addr, path, headers).await
}

support::modes! {
    async fn age_invalid_values_are_ignored_and_the_first_counts() {
        // max-age=10 with an Age of 20 would never be reused; ignoring the invalid Age, it is.
        let invalid = ["20x", "-20", "+20", "20.0", "x20", "0x14", "", "\"20\""];
        let origin = Origin::start(move |request| {
            let path = request.uri().path();
            let reply = OriginReply::ok(path.to_string());
            if let Some(n) = path.strip_prefix("/invalid/") {
                let n: usize = n.parse().unwrap();
                return reply.cache_control("max-age=10").header("age", invalid[n]);
            }
            match path {
                "/valid" => reply.cache_control("max-age=60").header("age", "30"),
                "/list" => reply.cache_control("max-age=60").header("age", "5, 100"),
                "/lines" => reply
                    .cache_control("max-age=60")
                    .header("age", "5")
                    .header("age", "100"),
                "/huge" => reply
                    .cache_control("max-age=60")
                    .header("age", "99999999999999999999999"),
                _ => OriginReply::with_status(404, ""),
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        for (n, value) in invalid.iter().enumerate() {
            let path = format!("/invalid/{n}");
            let hit = twice(addr, &path, &[]).await;
            assert_eq!(hit.cache(), "HIT", "Age: {value:?} is ignored");
            assert!(hit.age().unwrap() < 10, "Age: {value:?} → {:?}", hit.age());
            assert_eq!(origin.requests_for(&path), 1);
        }

        let hit = twice(addr, "/valid", &[]).await;
        assert_eq!(hit.cache(), "HIT");
        assert!(
            (30..60).contains(&hit.age().unwrap()),
            "a valid Age counts: {:?}",
            hit.age()
        );

        for path in ["/list", "/lines"] {
            let hit = twice(addr, path, &[]).await;
            assert_eq!(hit.cache(), "HIT", "{path}: the first Age (5) counts, not 100");
            let age = hit.age().unwrap();
            assert!((5..60).contains(&age), "{path}: Age {age}");
            assert_eq!(origin.requests_for(path), 1);
        }

        let second = twice(addr, "/huge", &[]).await;
        assert_eq!(second.status, 200);
        assert_ne!(second.cache(), "HIT", "an enormous Age makes the response stale");
        assert_eq!(
            origin.requests_for("/huge"),
            2,
            "saturated at 2^31 s, far past max-age=60"
        );
    }
}

support::modes! {
    async fn expires_invalid_is_stale_and_lifetime_is_expires_minus_date() {
        let origin = Origin::start(|request| {
            let path = request.uri().path();
            let reply = OriginReply::ok(path.to_string());
            match path {
                "/expires/zero" => reply.header("expires", "0"),
                "/expires/negative" => reply.header("expires", "-1"),
                "/expires/garbage" => reply.header("expires", "next week"),
                "/expires/past" => reply.header("expires", http_date_from_now(-60)),
                // max-age takes precedence over an invalid Expires.
                "/expires/max-age-wins" => reply.header("expires", "0").cache_control("max-age=60"),
                // The origin's clock runs 100 s ahead. Expires - Date = 1 s of freshness
                // (apparent age 0); a cache computing Expires - now would keep it for 101 s.
                "/expires/clock-ahead" => {
                    let date = SystemTime::now() + Duration::from_secs(100);
                    reply
                        .header("date", http_date(date))
                        .header("expires", http_date(date + Duration::from_secs(1)))
                }
                // Sent 30 s ago (Date in the past): Expires - Date = 60 s, of which 30 s are
                // used up by the apparent age. Fresh, with an Age of at least 30.
                "/expires/date-past" => {
                    let date = SystemTime::now() - Duration::from_secs(30);
                    reply
                        .header("date", http_date(date))
                        .header("expires", http_date(date + Duration::from_secs(60)))
                }
                _ => OriginReply::with_status(404, ""),
            }
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let clock = shared_clock(&proxy, &origin);

        for path in [
            "/expires/zero",
            "/expires/negative",
            "/expires/garbage",
            "/expires/past",
        ] {
            let second = twice(addr, path, &[]).await;
            assert_eq!(second.status, 200, "{path}");
            assert_ne!(second.cache(), "HIT", "{path}: already stale");
            assert_eq!(origin.requests_for(path), 2, "{path}");
        }

        let hit = twice(addr, "/expires/max-age-wins", &[]).await;
        assert_eq!(hit.cache(), "HIT");

        let hit = twice(addr, "/expires/date-past", &[]).await;
        assert_eq!(hit.cache(), "HIT");
        let age = hit.age().unwrap();
        assert!((30..60).contains(&age), "the apparent age counts: Age {age}");

        let hit = twice(addr, "/expires/clock-ahead", &[]).await;
        assert_eq!(hit.cache(), "HIT", "one second of freshness");
        // Just past the one second of freshness (Expires - Date).
        clock.advance(Duration::from_millis(1100));
        let after = get(addr, "/expires/clock-ahead", &[]).await;
        assert_ne!(
            after.cache(),
            "HIT",
            "lifetime is Expires - Date, not Expires - now"
        );
        assert_eq!(origin.requests_for("/expires/clock-ahead"), 2);
    }
}

support::modes! {
    async fn vary_star_in_any_position_never_matches() {
        let origin = Origin::start(|request| {
            let reply = OriginReply::ok("v").cache_control("max-age=60");
            match request.uri().path() {
                "/star" => reply.header("vary", "*"),
                "/star-first" => reply.header("vary", "*, Accept"),
                "/star-last" => reply.header("vary", "accept, *"),
                "/star-line" => reply.header("vary", "Accept").header("vary", "*"),
                "/star-spaced" => reply.header("vary", " accept ,  * "),
                _ => OriginReply::with_status(404, ""),
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        for path in ["/star", "/star-first", "/star-last", "/star-line", "/star-spaced"] {
            let second = twice(addr, path, &[("accept", "text/html")]).await;
            assert_ne!(second.cache(), "HIT", "{path}");
            assert_eq!(origin.requests_for(path), 2, "{path}: Vary: * never matches");
        }
    }
}

support::modes! {
    async fn vary_matching_normalises_lines_whitespace_and_case() {
        let origin = Origin::start(|request| {
            let language = request
                .headers()
                .get_all("accept-language")
                .iter()
                .map(|v| v.to_str().unwrap())
                .collect::<Vec<_>>()
                .join(" | ");
            let reply = OriginReply::ok(format!("for {language}")).cache_control("max-age=60");
            match request.uri().path() {
                // Names in any case, on several lines, repeated.
                "/vary" => reply
                    .header("vary", "Accept-Language, X-Flavour")
                    .header("vary", "ACCEPT-LANGUAGE"),
                _ => OriginReply::with_status(404, ""),
            }
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(
            addr,
            "/vary",
            &[("accept-language", "en, fr"), ("x-flavour", "a;q=1")],
        )
        .await;
        assert_eq!((first.cache(), first.text().as_str()), ("MISS", "for en, fr"));

        let same: &[&[(&str, &str)]] = &[
            &[("accept-language", "en,fr"), ("x-flavour", "a;q=1")],
            &[("accept-language", "EN,   Fr"), ("x-flavour", "a ; q=1")],
            &[
                ("accept-language", "en"),
                ("accept-language", "fr"),
                ("x-flavour", "a; q = 1"),
            ],
            &[("accept-language", "en ,fr"), ("x-flavour", "a;q=1 ")],
            // A weighted list: the order of equally weighted tags means nothing.
            &[("accept-language", "fr, en;q=1.0"), ("x-flavour", "a;q=1")],
        ];
        for headers in same {
            let reply = get(addr, "/vary", headers).await;
            assert_eq!(reply.cache(), "HIT", "{headers:?} selects the stored variant");
            assert_eq!(reply.text(), "for en, fr");
        }
        assert_eq!(origin.requests(), 1);

        let different: &[&[(&str, &str)]] = &[
            &[("accept-language", "en, fr;q=0.5"), ("x-flavour", "a;q=1")],
            &[("accept-language", "en, fr"), ("x-flavour", "A;q=1")],
            &[("accept-language", "en, fr")],
        ];
        for (n, headers) in different.iter().enumerate() {
            let reply = get(addr, "/vary", headers).await;
            assert_eq!(reply.cache(), "MISS", "{headers:?} is another variant");
            assert_eq!(origin.requests(), 2 + n);
        }
    }
}

support::modes! {
    async fn authorization_and_cookie_requests_are_never_answered_from_cache() {
        let origin = Origin::start(|request| {
            let who = request
                .headers()
                .get("authorization")
                .or_else(|| request.headers().get("cookie"))
                .map_or("anyone".to_string(), |v| v.to_str().unwrap().to_string());
            OriginReply::ok(format!("for {who}")).cache_control("public, s-maxage=60, must-revalidate")
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        get(addr, "/page", &[]).await;
        support::eventually_stored(&proxy, 1).await;
        assert_eq!(get(addr, "/page", &[]).await.cache(), "HIT");

        for (n, header) in [("authorization", "Bearer alice"), ("cookie", "session=bob")]
            .into_iter()
            .enumerate()
        {
            let reply = get(addr, "/page", &[header]).await;
            assert_eq!(reply.cache(), "PASS", "{header:?}");
            assert_eq!(reply.text(), format!("for {}", header.1), "the origin answered");
            assert_eq!(origin.requests(), 2 + n);
            assert_eq!(origin.last().header(header.0), Some(header.1), "forwarded");
        }
        let reply = get(addr, "/page", &[]).await;
        assert_eq!(reply.cache(), "HIT");
        assert_eq!(reply.text(), "for anyone", "personal answers were not stored");
        assert_eq!(origin.requests(), 3);
    }
}

support::modes! {
    async fn connection_named_fields_are_neither_forwarded_nor_stored() {
        let origin = Origin::start(|request| {
            if request.headers().contains_key("if-none-match") {
                return OriginReply::with_status(304, "")
                    .header("etag", "\"c\"")
                    .cache_control("max-age=60")
                    .header("connection", "X-Hop-304")
                    .header("x-hop-304", "hop")
                    .header("x-new", "end-to-end");
            }
            OriginReply::ok("body")
                .header("etag", "\"c\"")
                .cache_control("max-age=0")
                .header("connection", "X-Secret, X-Other-Hop")
                .header("x-secret", "hop")
                .header("x-other-hop", "hop")
                .header("x-public", "end-to-end")
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        // Request side: a raw client, since hyper's would not send arbitrary Connection tokens.
        let mut conn = RawConn::connect(addr).await;
        conn.send(
            "GET /c HTTP/1.1\r\nHost: example.test\r\nConnection: X-Client-Hop\r\n\
             X-Client-Hop: hop\r\nX-Client-Kept: kept\r\n\r\n",
        )
        .await;
        let miss = conn.response(false).await;
        assert_eq!(miss.status, 200);
        let seen = origin.last();
        assert_eq!(
            seen.header("x-client-hop"),
            None,
            "named in Connection: not forwarded"
        );
        assert_eq!(seen.header("x-client-kept"), Some("kept"));
        for name in ["x-secret", "x-other-hop"] {
            assert!(
                !miss.has_header(name),
                "{name} delivered on the miss: {:?}",
                miss.headers
            );
        }
        assert_eq!(miss.header("x-public"), Some("end-to-end"));

        // max-age=0: validated; the 304's own connection-named field is not merged in.
        let revalidated = get(addr, "/c", &[("host", "example.test")]).await;
        assert_eq!(revalidated.cache(), "REVALIDATED");
        let hit = get(addr, "/c", &[("host", "example.test")]).await;
        assert_eq!(hit.cache(), "HIT");
        for reply in [&revalidated, &hit] {
            for name in ["x-secret", "x-other-hop", "x-hop-304", "connection"] {
                assert_eq!(reply.header(name), None, "{name} in {:?}", reply.headers);
            }
            assert_eq!(reply.header("x-public"), Some("end-to-end"));
            assert_eq!(reply.header("x-new"), Some("end-to-end"));
        }
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn interim_responses_are_never_cached_and_never_break_the_final_one() {
        let origin = Origin::raw(
            "HTTP/1.1 100 Continue\r\n\r\n\
             HTTP/1.1 102 Processing\r\n\r\n\
             HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
             HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Type: text/plain\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello",
        )
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(addr, "/hints", &[]).await;
        assert_eq!(first.status, 200);
        assert_eq!(first.cache(), "MISS");
        assert_eq!(first.body, "hello");
        assert_eq!(
            first.header("link"),
            None,
            "the interim fields are not merged into the final"
        );
        support::eventually_stored(&proxy, 1).await;

        let second = get(addr, "/hints", &[]).await;
        assert_eq!((second.status.as_u16(), second.cache()), (200, "HIT"));
        assert_eq!(second.body, "hello");
        assert_eq!(origin.requests(), 1);

        // Over a raw connection: nothing but the final response comes back from the cache.
        let mut conn = RawConn::connect(addr).await;
        conn.send(&format!("GET /hints HTTP/1.1\r\nHost: {addr}\r\n\r\n"))
            .await;
        let raw = conn.response(false).await;
        assert_eq!(raw.status, 200);
        assert_eq!(raw.body, b"hello");
    }
}

support::modes! {
    async fn content_range_on_a_200_is_stored_with_it() {
        let origin = Origin::fixed(
            OriginReply::ok("abcd")
                .cache_control("max-age=60")
                .header("content-range", "bytes 0-3/4"),
        )
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let miss = get(addr, "/ranged", &[]).await;
        assert_eq!(miss.header("content-range"), Some("bytes 0-3/4"));
        support::eventually_stored(&proxy, 1).await;
        let hit = get(addr, "/ranged", &[]).await;
        assert_eq!((hit.cache(), hit.body.as_ref()), ("HIT", &b"abcd"[..]));
        assert_eq!(hit.header("content-range"), Some("bytes 0-3/4"), "stored as received");
    }
}

support::modes! {
    async fn pri_is_refused_and_other_unknown_methods_reach_the_origin() {
        let origin = Origin::fixed(OriginReply::ok("done")).await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let refused = support::send("PRI", addr, "/x", &[], "").await;
        assert_eq!(refused.status, 405);
        assert_eq!(origin.requests(), 0);

        let reply = support::send("M-SEARCH", addr, "/x", &[], "abc").await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "PASS"));
        let seen = origin.last();
        assert_eq!((seen.method.as_str(), seen.body.as_ref()), ("M-SEARCH", &b"abc"[..]));
    }
}
