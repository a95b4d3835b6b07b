//! Targeted cache control (RFC 9213): `CDN-Cache-Control` takes precedence over
//! `Cache-Control` for this cache and is forwarded to clients, for the downstream caches of
//! the same tier (`--strip-targeted-cache-control` removes it); its name is configurable
//! (`targeted_cache_control`, `--targeted-cache-control`), and it can be disabled.

mod support;

use http::HeaderName;
use support::{get, start_proxy, Origin, OriginReply};

fn targeted_origin() -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    |request| {
        let reply = OriginReply::ok(request.uri().path().to_string());
        match request.uri().path() {
            // Stored here for 60 s; browsers are told not to store.
            "/cdn-stores" => reply
                .cache_control("no-store")
                .header("cdn-cache-control", "max-age=60"),
            // Not stored here; browsers may store.
            "/cdn-forbids" => reply
                .cache_control("max-age=60")
                .header("cdn-cache-control", "no-store"),
            // The renamed field.
            "/edgecache-stores" => reply
                .cache_control("no-store")
                .header("edgecache-cache-control", "max-age=60"),
            // An invalid targeted field is ignored (RFC 9213 §2.1): Cache-Control applies.
            "/cdn-invalid" => reply
                .cache_control("max-age=60")
                .header("cdn-cache-control", "max-age=\"sixty"),
            // Expires is ignored when the targeted field is used (RFC 9213 §2.2).
            "/cdn-no-expires" => reply
                .header("expires", support::http_date_from_now(3600))
                .header("cdn-cache-control", "must-revalidate"),
            _ => OriginReply::with_status(404, ""),
        }
    }
}

support::modes! {
    async fn cdn_cache_control_overrides_cache_control_and_is_forwarded() {
        let origin = Origin::start(targeted_origin()).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(
            first.header("cdn-cache-control"),
            Some("max-age=60"),
            "forwarded on a miss, for the next cache of the tier"
        );
        assert_eq!(
            first.header("cache-control"),
            Some("no-store"),
            "Cache-Control is for clients"
        );
        support::eventually_stored(&proxy, 1).await;
        let second = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(
            second.cache(),
            "HIT",
            "CDN-Cache-Control: max-age=60 beats no-store"
        );
        assert_eq!(
            second.header("cdn-cache-control"),
            Some("max-age=60"),
            "stored with the object and delivered from the cache"
        );
        assert_eq!(second.header("cache-control"), Some("no-store"));
        assert_eq!(origin.requests_for("/cdn-stores"), 1);

        for n in 1..=2 {
            let reply = get(addr, "/cdn-forbids", &[]).await;
            assert_ne!(reply.cache(), "HIT");
            assert_eq!(
                reply.header("cdn-cache-control"),
                Some("no-store"),
                "forwarded on a pass"
            );
            assert_eq!(reply.header("cache-control"), Some("max-age=60"));
            assert_eq!(
                origin.requests_for("/cdn-forbids"),
                n,
                "CDN-Cache-Control: no-store wins"
            );
        }

        get(addr, "/cdn-invalid", &[]).await;
        support::eventually_stored(&proxy, 2).await;
        assert_eq!(
            get(addr, "/cdn-invalid", &[]).await.cache(),
            "HIT",
            "invalid field ignored"
        );

        for n in 1..=2 {
            get(addr, "/cdn-no-expires", &[]).await;
            assert_eq!(
                origin.requests_for("/cdn-no-expires"),
                n,
                "with the targeted field in charge, Expires gives no freshness"
            );
        }

        // The renamed field is an ordinary header under the default configuration.
        let reply = get(addr, "/edgecache-stores", &[]).await;
        assert_eq!(reply.header("edgecache-cache-control"), Some("max-age=60"));
        get(addr, "/edgecache-stores", &[]).await;
        assert_eq!(origin.requests_for("/edgecache-stores"), 2);
    }
}

support::modes! {
    async fn the_targeted_field_can_be_renamed() {
        let origin = Origin::start(targeted_origin()).await;
        let (proxy, addr) = start_proxy(origin.addr, |config| {
            config.targeted_cache_control = Some(HeaderName::from_static("edgecache-cache-control"));
        })
        .await;

        let first = get(addr, "/edgecache-stores", &[]).await;
        assert_eq!(
            first.header("edgecache-cache-control"),
            Some("max-age=60"),
            "the renamed field is forwarded"
        );
        support::eventually_stored(&proxy, 1).await;
        let second = get(addr, "/edgecache-stores", &[]).await;
        assert_eq!(second.cache(), "HIT");
        assert_eq!(second.header("edgecache-cache-control"), Some("max-age=60"));
        assert_eq!(origin.requests_for("/edgecache-stores"), 1);

        // CDN-Cache-Control is now an ordinary header: forwarded, and Cache-Control applies.
        let reply = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(reply.header("cdn-cache-control"), Some("max-age=60"));
        get(addr, "/cdn-stores", &[]).await;
        assert_eq!(
            origin.requests_for("/cdn-stores"),
            2,
            "Cache-Control: no-store applies"
        );
    }
}

support::modes! {
    async fn the_targeted_field_can_be_disabled() {
        let origin = Origin::start(targeted_origin()).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.targeted_cache_control = None).await;
        let reply = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(reply.header("cdn-cache-control"), Some("max-age=60"));
        get(addr, "/cdn-stores", &[]).await;
        assert_eq!(origin.requests_for("/cdn-stores"), 2);
    }
}

support::modes! {
    async fn strip_targeted_cache_control_keeps_the_field_from_clients() {
        let origin = Origin::start(targeted_origin()).await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.strip_targeted_cache_control = true).await;

        let first = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(first.header("cdn-cache-control"), None, "stripped on a miss");
        support::eventually_stored(&proxy, 1).await;
        let second = get(addr, "/cdn-stores", &[]).await;
        assert_eq!(second.cache(), "HIT", "the field still governs this cache");
        assert_eq!(
            second.header("cdn-cache-control"),
            None,
            "stripped from the stored object"
        );
        assert_eq!(origin.requests_for("/cdn-stores"), 1);

        let passed = get(addr, "/cdn-forbids", &[]).await;
        assert_ne!(passed.cache(), "HIT");
        assert_eq!(passed.header("cdn-cache-control"), None, "stripped on a pass");
        assert_eq!(passed.header("cache-control"), Some("max-age=60"));

        // Only the targeted field is stripped: a field of another name is an ordinary header.
        let other = get(addr, "/edgecache-stores", &[]).await;
        assert_eq!(other.header("edgecache-cache-control"), Some("max-age=60"));
    }
}
