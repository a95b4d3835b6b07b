//! Request cache directives (RFC 9111 §5.2.1) and `Pragma: no-cache` (§5.4): `no-cache` and
//! `max-age=0` go to the origin, `max-stale` accepts stale objects, `min-fresh` demands
//! remaining freshness, `only-if-cached` answers 504 when nothing is stored; with
//! `ignore_request_cache_control` (`--ignore-request-cache-control`) none of them applies.

mod support;

use std::net::SocketAddr;

use support::{get, start_proxy, Origin, OriginReply};

/// `/fresh*`: fresh for 60 s; `/stale`: stale on arrival but kept (it has an `ETag`);
/// `/strict`: like `/stale` with `must-revalidate`. Revalidations are answered 304.
async fn origin() -> Origin {
    Origin::start(|request| {
        let path = request.uri().path().to_string();
        let cache_control = match path.as_str() {
            p if p.starts_with("/fresh") => "max-age=60",
            "/strict" => "max-age=0, must-revalidate",
            _ => "max-age=0",
        };
        if request.headers().contains_key("if-none-match") {
            OriginReply::with_status(304, "")
                .header("etag", "\"d\"")
                .cache_control(cache_control)
        } else {
            OriginReply::ok(format!("body of {path}"))
                .header("etag", "\"d\"")
                .cache_control(cache_control)
        }
    })
    .await
}

async fn stored(addr: SocketAddr, proxy: &edgecache_runtime::Running, paths: &[&str]) {
    for path in paths {
        get(addr, path, &[]).await;
    }
    support::eventually_stored(proxy, paths.len() as u64).await;
}

support::modes! {
    async fn no_cache_max_age_0_and_pragma_go_to_the_origin() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        stored(addr, &proxy, &["/fresh"]).await;
        assert_eq!(get(addr, "/fresh", &[]).await.cache(), "HIT");

        let forcing: &[&[(&str, &str)]] = &[
            &[("cache-control", "no-cache")],
            &[("cache-control", "NO-CACHE")],
            &[("cache-control", "max-age=0")],
            &[("pragma", "no-cache")],
        ];
        for (n, headers) in forcing.iter().enumerate() {
            let reply = get(addr, "/fresh", headers).await;
            assert_eq!(reply.status, 200, "{headers:?}");
            assert_eq!(reply.body, "body of /fresh");
            assert_eq!(
                reply.cache(),
                "REVALIDATED",
                "{headers:?}: validated with the origin"
            );
            assert_eq!(origin.requests(), 2 + n, "{headers:?} reached the origin");
            assert_eq!(
                origin.last().header("if-none-match"),
                Some("\"d\""),
                "validated with the stored ETag"
            );
        }

        // Pragma counts only without Cache-Control (§5.4); max-age=60 accepts the object.
        let before = origin.requests();
        let reply = get(
            addr,
            "/fresh",
            &[("pragma", "no-cache"), ("cache-control", "max-age=60")],
        )
        .await;
        assert_eq!(reply.cache(), "HIT");
        assert_eq!(origin.requests(), before);
    }
}

support::modes! {
    async fn max_stale_accepts_a_stale_object_unless_the_response_forbids_it() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        stored(addr, &proxy, &["/stale", "/strict"]).await;

        for value in ["max-stale", "max-stale=60", "MAX-STALE=\"60\""] {
            let reply = get(addr, "/stale", &[("cache-control", value)]).await;
            assert_eq!(reply.cache(), "STALE", "{value}");
            assert_eq!(reply.body, "body of /stale");
        }
        assert_eq!(
            origin.requests_for("/stale"),
            1,
            "max-stale needed no origin request"
        );

        let reply = get(addr, "/strict", &[("cache-control", "max-stale")]).await;
        assert_eq!(reply.cache(), "REVALIDATED", "must-revalidate beats max-stale");
        assert_eq!(origin.requests_for("/strict"), 2);

        let reply = get(addr, "/stale", &[]).await;
        assert_eq!(
            reply.cache(),
            "REVALIDATED",
            "without max-stale a stale object is validated"
        );
        assert_eq!(origin.requests_for("/stale"), 2);
    }
}

support::modes! {
    async fn min_fresh_demands_remaining_freshness() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        stored(addr, &proxy, &["/fresh"]).await;

        let reply = get(addr, "/fresh", &[("cache-control", "min-fresh=30")]).await;
        assert_eq!(reply.cache(), "HIT", "60 s of freshness cover 30 more seconds");
        assert_eq!(origin.requests(), 1);
        let reply = get(addr, "/fresh", &[("cache-control", "min-fresh=120")]).await;
        assert_ne!(reply.cache(), "HIT", "60 s of freshness do not cover 120 more");
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn max_age_accepts_objects_young_enough() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        stored(addr, &proxy, &["/fresh"]).await;
        let reply = get(addr, "/fresh", &[("cache-control", "max-age=30")]).await;
        assert_eq!(reply.cache(), "HIT");
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    async fn only_if_cached() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let reply = get(addr, "/fresh", &[("cache-control", "only-if-cached")]).await;
        assert_eq!(reply.status, 504, "nothing stored");
        assert_eq!(origin.requests(), 0, "only-if-cached never contacts the origin");

        stored(addr, &proxy, &["/fresh", "/stale"]).await;
        let reply = get(addr, "/fresh", &[("cache-control", "only-if-cached")]).await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "HIT"));
        let reply = get(addr, "/stale", &[("cache-control", "only-if-cached")]).await;
        assert_eq!(reply.status, 504, "a stale object needs the origin");
        let reply = get(addr, "/stale", &[("cache-control", "only-if-cached, max-stale")]).await;
        assert_eq!((reply.status.as_u16(), reply.cache()), (200, "STALE"));
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn ignore_request_cache_control_disables_all_of_them() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |config| {
            config.ignore_request_cache_control = true;
        })
        .await;
        stored(addr, &proxy, &["/fresh", "/stale"]).await;

        for headers in [
            &[("cache-control", "no-cache")][..],
            &[("cache-control", "max-age=0")],
            &[("cache-control", "min-fresh=120")],
            &[("pragma", "no-cache")],
            &[("cache-control", "only-if-cached")],
        ] {
            let reply = get(addr, "/fresh", headers).await;
            assert_eq!(reply.cache(), "HIT", "{headers:?} is ignored");
        }
        assert_eq!(origin.requests(), 2);

        // max-stale is ignored too: the stale object is validated.
        let reply = get(addr, "/stale", &[("cache-control", "max-stale")]).await;
        assert_eq!(reply.cache(), "REVALIDATED");
        assert_eq!(origin.requests(), 3);

        // only-if-cached on a miss goes to the origin instead of a 504.
        let reply = get(addr, "/absent", &[("cache-control", "only-if-cached")]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(origin.requests(), 4);

        // Request no-store is a privacy request, still honoured: not stored.
        let reply = get(addr, "/fresh-no-store", &[("cache-control", "no-store")]).await;
        assert_eq!(reply.status, 200);
        get(addr, "/fresh-no-store", &[]).await;
        assert_eq!(origin.requests_for("/fresh-no-store"), 2);
    }
}
