//! Invalidation by surrogate key and soft purge, over real sockets: the key index (`xkey`,
//! `Surrogate-Key`, `Cache-Tag`), `xkey.purge` / `xkey.softpurge` from a policy, FOSHttpCache's
//! `PURGEKEYS` requests, `POST /purge?key=` and `?url=&soft=1` on the admin API, and a soft
//! purge's one background refresh.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edgecache_runtime::Config;
use reload_support::admin;
use support::{concurrently, eventually_stored, get, start_proxy, Origin, OriginReply};

fn loopback_admin(config: &mut Config) {
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
}

/// A soft purge leaves the object stale instead of gone: ten requests right after it are all
/// served the old body in grace, and the origin sees exactly one refresh, not ten.
#[tokio::test]
async fn soft_purge_by_url_serves_stale_while_one_fetch_refreshes() {
    let origin = tagged_origin(Duration::from_millis(500)).await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    assert_eq!(get(addr, "/b", &[]).await.text(), "/b v1");
    eventually_stored(&running, 1).await;
    let host = addr.to_string();
    let purged = admin(&running, "POST", &format!("/purge?url=/b&host={host}&soft=1"), "").await;
    assert_eq!(purged.status, 200, "{}", purged.body);
    let answer: serde_json::Value = serde_json::from_str(&purged.body).unwrap();
    assert_eq!(answer["objects"], 1, "{answer}");

    let replies = concurrently(10, |_| async move { get(addr, "/b", &[]).await }).await;
    for reply in &replies {
        assert_eq!((reply.cache(), reply.text().as_str()), ("STALE", "/b v1"));
    }
    support::until("the refresh is stored", async || {
        get(addr, "/b", &[]).await.text() == "/b v2"
    })
    .await;
    assert_eq!(origin.requests_for("/b"), 2, "one fetch, one refresh");
    let again = admin(
        &running,
        "POST",
        &format!("/purge?url=/nothing&host={host}&soft=1"),
        "",
    )
    .await;
    assert_eq!(again.status, 404, "{}", again.body);
}

/// Pages tagged as in the issue: `/a` with `a b`, `/b` with `b c` (as `xkey`), `/c` untagged,
/// and `/debug` tagged `d` with Symfony's `X-Cache-Debug`.
/// Each answers `PATH vN` for its Nth fetch, `max-age=600`; refreshes take `refresh_delay`.
async fn tagged_origin(refresh_delay: Duration) -> Origin {
    let fetches: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>> = Arc::default();
    Origin::start(move |request| {
        let path = request.uri().path().to_string();
        let n = {
            let mut fetches = fetches.lock().unwrap();
            let n = fetches.entry(path.clone()).or_default();
            *n += 1;
            *n
        };
        let mut reply = OriginReply::ok(format!("{path} v{n}")).cache_control("max-age=600");
        match path.as_str() {
            "/a" => reply = reply.header("xkey", "a b"),
            "/b" => reply = reply.header("xkey", "b c"),
            // What Symfony answers in debug mode.
            "/debug" => reply = reply.header("xkey", "d").header("X-Cache-Debug", "1"),
            _ => {}
        }
        if n > 1 {
            reply.delay(refresh_delay)
        } else {
            reply
        }
    })
    .await
}

/// vmod xkey's documented VCL (`PURGE` with an `xkey` header), plus `xkey-soft` for
/// `xkey.softpurge`, answering with the count.
const XKEY_POLICY: &str = r#"vcl 4.1;
import xkey;

acl purgers {
    "127.0.0.1";
}

sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(403, "Forbidden"));
        }
        if (req.http.xkey) {
            set req.http.n-gone = xkey.purge(req.http.xkey);
            return (synth(200, "Invalidated " + req.http.n-gone + " objects"));
        } elsif (req.http.xkey-soft) {
            set req.http.n-gone = xkey.softpurge(req.http.xkey-soft);
            return (synth(200, "Invalidated " + req.http.n-gone + " objects"));
        } else {
            return (purge);
        }
    }
}
"#;

/// `GET`s `/a`, `/b` and `/c` once each (misses) and waits until all three are stored.
async fn fill_pages(running: &edgecache_runtime::Running, addr: SocketAddr) {
    for page in ["/a", "/b", "/c"] {
        let reply = get(addr, page, &[]).await;
        assert_eq!(reply.text(), format!("{page} v1"));
        assert_eq!(
            reply.header("xkey"),
            None,
            "key headers are not delivered by default"
        );
    }
    eventually_stored(running, 3).await;
}

#[tokio::test]
async fn xkey_purge_from_a_vcl_purge_endpoint_removes_every_page_with_the_key() {
    let origin = tagged_origin(Duration::ZERO).await;
    let (running, addr) = support::start_with_policy("xkey", XKEY_POLICY, &origin).await;
    fill_pages(&running, addr).await;

    let purged = support::send("PURGE", addr, "/", &[("xkey", "b")], "").await;
    assert_eq!(purged.status, 200);
    assert!(
        purged.text().contains("Invalidated 2 objects"),
        "{}",
        purged.text()
    );

    assert_eq!(get(addr, "/a", &[]).await.text(), "/a v2", "/a carried b");
    assert_eq!(get(addr, "/b", &[]).await.text(), "/b v2", "/b carried b");
    let untagged = get(addr, "/c", &[]).await;
    assert_eq!((untagged.cache(), untagged.text().as_str()), ("HIT", "/c v1"));
    let again = support::send("PURGE", addr, "/", &[("xkey", "nothing-has-this")], "").await;
    assert!(again.text().contains("Invalidated 0 objects"), "{}", again.text());
}

#[tokio::test]
async fn xkey_softpurge_serves_the_page_in_grace_while_exactly_one_fetch_refreshes_it() {
    let origin = tagged_origin(Duration::from_millis(500)).await;
    let (running, addr) = support::start_with_policy("xkey-soft", XKEY_POLICY, &origin).await;
    fill_pages(&running, addr).await;

    let purged = support::send("PURGE", addr, "/", &[("xkey-soft", "c")], "").await;
    assert!(
        purged.text().contains("Invalidated 1 objects"),
        "{}",
        purged.text()
    );

    let replies = concurrently(10, |_| async move { get(addr, "/b", &[]).await }).await;
    for reply in &replies {
        assert_eq!((reply.cache(), reply.text().as_str()), ("STALE", "/b v1"));
    }
    support::until("the refresh is stored", async || {
        get(addr, "/b", &[]).await.text() == "/b v2"
    })
    .await;
    assert_eq!(
        origin.requests_for("/b"),
        2,
        "one fetch, then exactly one refresh"
    );
    let untouched = get(addr, "/a", &[]).await;
    assert_eq!(
        (untouched.cache(), untouched.text().as_str()),
        ("HIT", "/a v1"),
        "/a has no key c"
    );
}

/// edgecache with `tests/policies/fos_xkey.vcl` (FOSHttpCache's xkey fragment included and
/// called) in front of `origin`; `tweak` adjusts the rest.
async fn start_fos(
    origin: &Origin,
    tweak: impl FnOnce(&mut Config),
) -> (edgecache_runtime::Running, SocketAddr) {
    let policy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policies/fos_xkey.vcl");
    start_proxy(origin.addr, |config| {
        config.policy = Some(policy);
        config.watch_policy = false;
        tweak(config);
    })
    .await
}

/// `PURGEKEYS` with the tags in `header`, as FOSHttpCache's Varnish client sends it.
async fn purgekeys(addr: SocketAddr, header: &str, tags: &str) -> support::Reply {
    support::send("PURGEKEYS", addr, "/", &[(header, tags)], "").await
}

#[tokio::test]
async fn fos_httpcache_purgekeys_requests_purge_and_expire_by_tag() {
    let origin = tagged_origin(Duration::ZERO).await;
    let (running, addr) = start_fos(&origin, |_| {}).await;
    fill_pages(&running, addr).await;

    let purged = purgekeys(addr, "xkey-purge", "b").await;
    assert_eq!(purged.status, 200);
    assert!(
        purged.text().contains("Purged 2 objects, expired 0 objects"),
        "{}",
        purged.text()
    );
    assert_eq!(get(addr, "/a", &[]).await.text(), "/a v2");
    assert_eq!(get(addr, "/b", &[]).await.text(), "/b v2");
    eventually_stored(&running, 3).await;

    // FOSHttpCache's default tags header is xkey-softpurge, tags separated by spaces.
    let expired = purgekeys(addr, "xkey-softpurge", "c unknown-tag").await;
    assert!(
        expired.text().contains("Purged 0 objects, expired 1 objects"),
        "{}",
        expired.text()
    );
    let stale = get(addr, "/b", &[]).await;
    assert_eq!((stale.cache(), stale.text().as_str()), ("STALE", "/b v2"));

    let neither = support::send("PURGEKEYS", addr, "/", &[], "").await;
    assert_eq!(neither.status, 400, "{}", neither.text());
    let mut outsider = support::RawConn::connect_from("127.0.0.2".parse().unwrap(), addr).await;
    outsider
        .send("PURGEKEYS / HTTP/1.1\r\nHost: shop\r\nxkey-purge: a\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(
        outsider.response(false).await.status,
        405,
        "not in acl invalidators"
    );
    assert_eq!(
        get(addr, "/a", &[]).await.cache(),
        "HIT",
        "the refused purge removed nothing"
    );
}

#[tokio::test]
async fn key_headers_reach_only_debug_clients_with_keep_surrogate_key_headers() {
    let origin = tagged_origin(Duration::ZERO).await;
    let (_running, addr) = start_fos(&origin, |config| config.keep_surrogate_key_headers = true).await;
    let debug = get(addr, "/debug", &[]).await;
    assert_eq!(
        debug.header("xkey"),
        Some("d"),
        "fos_tags_xkey_deliver keeps them when debugging"
    );
    assert_eq!(
        get(addr, "/a", &[]).await.header("xkey"),
        None,
        "and unsets them for others"
    );
}

/// Pages tagged by Fastly's and Cloudflare's headers: `/s` with `Surrogate-Key: s1 s2`, `/t`
/// with `Cache-Tag: t1,s2`; every page answers `PATH vN`.
async fn cdn_tagged_origin() -> Origin {
    let fetches = Arc::new(AtomicUsize::new(0));
    Origin::start(move |request| {
        let n = fetches.fetch_add(1, Ordering::Relaxed);
        let path = request.uri().path();
        let reply = OriginReply::ok(format!("{path} {n}")).cache_control("max-age=600");
        match path {
            "/s" => reply.header("Surrogate-Key", "s1 s2"),
            "/t" => reply.header("Cache-Tag", "t1,s2"),
            _ => reply.header("Surrogate-Key", path.trim_start_matches('/')),
        }
    })
    .await
}

/// `POST /purge?key=...` on the admin API, parsed as JSON.
async fn purge_keys(running: &edgecache_runtime::Running, query: &str) -> serde_json::Value {
    let reply = admin(running, "POST", &format!("/purge?{query}"), "").await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.body);
    serde_json::from_str(&reply.body).unwrap()
}

#[tokio::test]
async fn admin_purge_by_key_reads_surrogate_key_and_cache_tag_and_counts_objects() {
    let origin = cdn_tagged_origin().await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    for page in ["/s", "/t"] {
        assert_eq!(get(addr, page, &[]).await.header("surrogate-key"), None);
    }
    eventually_stored(&running, 2).await;
    assert_eq!(purge_keys(&running, "key=s2&soft=1").await["purged"], 2);
    assert_eq!(get(addr, "/s", &[]).await.cache(), "STALE");
    assert_eq!(
        purge_keys(&running, "key=t1,s1").await["purged"],
        2,
        "soft-purged objects are still there"
    );
    assert_eq!(get(addr, "/t", &[]).await.cache(), "MISS");
    let none = admin(&running, "POST", "/purge?key=,", "").await;
    assert_eq!(none.status, 400, "{}", none.body);

    let stats: serde_json::Value =
        serde_json::from_str(&admin(&running, "GET", "/stats", "").await.body).unwrap();
    assert_eq!(stats["cache"]["purged_by_key"], 4, "{stats}");
    assert_eq!(stats["cache"]["soft_purged_served"], 1, "{stats}");
    let metrics = admin(&running, "GET", "/metrics", "").await.body;
    for line in [
        "edgecache_purged_by_key_total 4",
        "edgecache_soft_purged_served_total 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn the_admin_command_purges_by_key() {
    let origin = cdn_tagged_origin().await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    get(addr, "/s", &[]).await;
    eventually_stored(&running, 1).await;
    let admin_addr = running.admin_addr().unwrap().to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_edgecache"))
            .args(["admin", "-T", &admin_addr, "purge", "--key", "s1,other", "--soft"])
            .output()
            .expect("runs edgecache")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (answer["purged"].clone(), answer["soft"].clone()),
        (1.into(), true.into()),
        "{answer}"
    );
}

#[tokio::test]
async fn evicted_pages_leave_the_key_index() {
    let origin = cdn_tagged_origin().await;
    let (running, addr) = start_proxy(origin.addr, |config| {
        loopback_admin(config);
        config.cache_size = 64 * 1024;
        config.max_object_size = 4 * 1024;
    })
    .await;
    for n in 0..300 {
        get(addr, &format!("/page-{n}"), &[]).await;
    }
    let stats: serde_json::Value =
        serde_json::from_str(&admin(&running, "GET", "/stats", "").await.body).unwrap();
    let cache = &stats["cache"];
    assert!(cache["evictions"].as_u64().unwrap() > 0, "{cache}");
    assert_eq!(cache["surrogate_key_objects"], cache["objects"], "{cache}");
    assert_eq!(
        cache["surrogate_keys"], cache["objects"],
        "each page has its own key: {cache}"
    );
    let purged = purge_keys(&running, "key=page-0").await;
    assert_eq!(purged["purged"], 0, "page-0 was evicted long ago: {purged}");
}
