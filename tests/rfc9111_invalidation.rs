//! Invalidation (RFC 9111 §4.4): a non-error response to an unsafe method — including one the
//! cache does not know — invalidates the target URI and the same-host `Location` /
//! `Content-Location`; error responses and safe methods invalidate nothing.
//! The test client is on loopback, in the default `--purge-allow`, so it may invalidate
//! (`--invalidate-on-unsafe allowed`); `security_invalidation.rs` covers the clients outside it.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use support::{get, send, start_proxy, Origin, OriginReply};

/// GET: a fresh object whose body counts the GETs of that path. Other methods: the status
/// in the request's `x-status` (default 200), and `Location` / `Content-Location` from
/// `x-location` / `x-content-location`, where `{host}` becomes the request's `Host`.
async fn origin() -> Origin {
    let gets = Arc::new(AtomicUsize::new(0));
    Origin::start(move |request| {
        let value = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        if request.method() == http::Method::GET {
            let n = gets.fetch_add(1, Ordering::SeqCst);
            return OriginReply::ok(format!("{} #{n}", request.uri().path())).cache_control("max-age=60");
        }
        let status = value("x-status").map_or(200, |s| s.parse().unwrap());
        let host = value("host").unwrap_or_default();
        let mut reply = OriginReply::with_status(status, "done");
        if let Some(location) = value("x-location") {
            reply = reply.header("location", location.replace("{host}", &host));
        }
        if let Some(location) = value("x-content-location") {
            reply = reply.header("content-location", location.replace("{host}", &host));
        }
        reply
    })
    .await
}

async fn assert_hit(addr: SocketAddr, path: &str, headers: &[(&str, &str)], why: &str) {
    let reply = get(addr, path, headers).await;
    assert_eq!(reply.cache(), "HIT", "{path}: {why}");
}

async fn assert_refetched(origin: &Origin, addr: SocketAddr, path: &str, why: &str) {
    let before = origin.requests_for(path);
    let reply = get(addr, path, &[]).await;
    assert_eq!(reply.cache(), "MISS", "{path}: {why}");
    assert_eq!(origin.requests_for(path), before + 1, "{path}: {why}");
}

async fn store(proxy: &edgecache_runtime::Running, addr: SocketAddr, paths: &[&str]) {
    let keys = proxy.cache_usage().keys;
    for path in paths {
        get(addr, path, &[]).await;
    }
    support::eventually_stored(proxy, keys + paths.len() as u64).await;
    for path in paths {
        assert_hit(addr, path, &[], "stored").await;
    }
}

support::modes! {
    async fn a_successful_post_invalidates_and_a_failed_one_does_not() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        store(&proxy, addr, &["/ok", "/failed", "/not-found"]).await;

        let reply = send("POST", addr, "/ok", &[], "form").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.cache(), "PASS");
        assert_refetched(&origin, addr, "/ok", "a 200 to POST invalidates").await;

        let reply = send("POST", addr, "/failed", &[("x-status", "500")], "form").await;
        assert_eq!(reply.status, 500);
        assert_hit(addr, "/failed", &[], "a 500 to POST invalidates nothing").await;
        send("POST", addr, "/not-found", &[("x-status", "404")], "form").await;
        assert_hit(addr, "/not-found", &[], "a 404 to POST invalidates nothing").await;
    }
}

support::modes! {
    async fn every_unsafe_method_invalidates_even_unknown_ones() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        let paths = ["/put", "/delete", "/patch", "/frob", "/m-search", "/m-search-failed", "/redirected", "/options"];
        store(&proxy, addr, &paths).await;

        send("PUT", addr, "/put", &[], "x").await;
        send("DELETE", addr, "/delete", &[], "").await;
        send("PATCH", addr, "/patch", &[], "x").await;
        send("FROB", addr, "/frob", &[], "").await;
        // As cache-tests sends it: an unknown method with a body.
        send("M-SEARCH", addr, "/m-search", &[], "abc").await;
        send("M-SEARCH", addr, "/m-search-failed", &[("x-status", "500")], "abc").await;
        assert_hit(addr, "/m-search-failed", &[], "a 500 invalidates nothing").await;
        send(
            "POST",
            addr,
            "/redirected",
            &[("x-status", "303"), ("x-location", "/elsewhere")],
            "",
        )
        .await;
        for path in ["/put", "/delete", "/patch", "/frob", "/m-search", "/redirected"] {
            assert_refetched(&origin, addr, path, "invalidated").await;
        }

        let reply = send("OPTIONS", addr, "/options", &[], "").await;
        assert_eq!(reply.status, 200);
        assert_hit(addr, "/options", &[], "OPTIONS is safe").await;
    }
}

support::modes! {
    async fn same_host_location_and_content_location_are_invalidated() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        store(&proxy, addr, &["/items/1", "/items/2", "/items/3", "/items/4"]).await;
        // The same path stored under another host.
        get(addr, "/items/9", &[("host", "other.example")]).await;
        support::eventually_stored(&proxy, 5).await;
        assert_hit(addr, "/items/9", &[("host", "other.example")], "stored").await;

        let reply = send(
            "POST",
            addr,
            "/items/",
            &[
                ("x-status", "201"),
                ("x-location", "1"),
                ("x-content-location", "http://{host}/items/2"),
            ],
            "new",
        )
        .await;
        assert_eq!(reply.status, 201);
        assert_refetched(&origin, addr, "/items/1", "relative Location, resolved").await;
        assert_refetched(&origin, addr, "/items/2", "absolute same-host Content-Location").await;
        assert_hit(addr, "/items/3", &[], "not named").await;

        send(
            "PUT",
            addr,
            "/items/x",
            &[
                ("x-location", "http://other.example/items/9"),
                ("x-content-location", "/items/../items/4"),
            ],
            "",
        )
        .await;
        assert_hit(
            addr,
            "/items/9",
            &[("host", "other.example")],
            "another host's object is never invalidated",
        )
        .await;
        assert_refetched(&origin, addr, "/items/4", "dot segments removed").await;
    }
}
