//! Evicting by unsafe methods (RFC 9111 §4.4) is for trusted clients: with the default
//! `--invalidate-on-unsafe allowed`, a `POST`, a lower-case `purge` or an unknown method from a
//! client outside `--purge-allow` leaves every stored object in place, whatever the origin
//! answers; `all` restores the RFC's behaviour and `off` turns it off for everyone.

mod support;

use std::net::SocketAddr;

use bytes::Bytes;
use edgecache_runtime::config::InvalidateOnUnsafe;
use edgecache_runtime::{Config, Running};
use support::{eventually_stored, get, send, start_proxy, write_policy, Origin, OriginReply};

/// GET: a fresh object. Any other method: 200 with `Location: /other`, the answer that makes
/// RFC 9111 §4.4 invalidate both the target and `/other`.
async fn accepting_origin() -> Origin {
    Origin::start(|request| {
        if request.method() == http::Method::GET {
            OriginReply::ok(format!("{} page", request.uri().path())).cache_control("max-age=600")
        } else {
            OriginReply::ok("done").header("location", "/other")
        }
    })
    .await
}

/// The test client (127.0.0.1) is outside this list.
fn elsewhere(config: &mut Config) {
    config.purge_allow = vec!["10.0.0.0/8".parse().unwrap()];
}

/// `/page` and `/other` stored and hit.
async fn stored(running: &Running, addr: SocketAddr) {
    for path in ["/page", "/other"] {
        get(addr, path, &[]).await;
    }
    eventually_stored(running, 2).await;
    for path in ["/page", "/other"] {
        assert_eq!(get(addr, path, &[]).await.cache(), "HIT", "{path}");
    }
}

/// The GETs the origin saw for `path` (its unsafe requests are counted by `requests_for` too).
fn gets(origin: &Origin, path: &str) -> usize {
    origin
        .log()
        .iter()
        .filter(|seen| seen.method == http::Method::GET && seen.target == path)
        .count()
}

async fn still_hits(origin: &Origin, addr: SocketAddr, why: &str) {
    for path in ["/page", "/other"] {
        assert_eq!(get(addr, path, &[]).await.cache(), "HIT", "{path}: {why}");
        assert_eq!(gets(origin, path), 1, "{path} not fetched again: {why}");
    }
}

#[tokio::test]
async fn post_from_outside_the_allow_list_does_not_invalidate() {
    let origin = accepting_origin().await;
    let (running, addr) = start_proxy(origin.addr, elsewhere).await;
    stored(&running, addr).await;
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let reply = send(method, addr, "/page", &[], "x=1").await;
        assert_eq!(reply.status, 200, "{method} reaches the origin");
        assert_eq!(origin.last().method.as_str(), method);
    }
    still_hits(&origin, addr, "unsafe methods from outside --purge-allow").await;
}

#[tokio::test]
async fn lowercase_purge_does_not_evict() {
    // Methods are case-sensitive (RFC 9110 §9.1): `purge` is not PURGE but an unknown method.
    // Without a policy unknown methods are passed to the origin (Varnish would pipe them).
    let origin = accepting_origin().await;
    let (running, addr) = start_proxy(origin.addr, elsewhere).await;
    stored(&running, addr).await;
    let reply = send("purge", addr, "/page", &[], Bytes::new()).await;
    assert_eq!(reply.status, 200, "the origin's answer");
    assert_eq!(
        origin.last().method.as_str(),
        "purge",
        "forwarded, not taken as PURGE"
    );
    still_hits(&origin, addr, "a lower-case purge from outside --purge-allow").await;

    // With a policy, the builtin vcl_recv passes unknown methods to the origin as well.
    let origin = accepting_origin().await;
    let policy = write_policy("builtin-recv", "vcl 4.1;\n");
    let (running, addr) = start_proxy(origin.addr, |config| {
        elsewhere(config);
        config.policy = Some(policy);
    })
    .await;
    stored(&running, addr).await;
    let reply = send("purge", addr, "/page", &[], Bytes::new()).await;
    assert_eq!(reply.status, 200, "the origin's answer");
    assert_eq!(
        origin.last().method.as_str(),
        "purge",
        "forwarded, not taken as PURGE"
    );
    still_hits(&origin, addr, "a lower-case purge with a policy").await;
}

#[tokio::test]
async fn unknown_method_does_not_evict() {
    let origin = accepting_origin().await;
    let (running, addr) = start_proxy(origin.addr, elsewhere).await;
    stored(&running, addr).await;
    for method in ["BREW", "Purge", "PROPPATCH", "BAN"] {
        let reply = send(method, addr, "/page", &[], Bytes::new()).await;
        assert_eq!(reply.status, 200, "{method} reaches the origin");
    }
    still_hits(&origin, addr, "unknown methods from outside --purge-allow").await;
}

#[tokio::test]
async fn invalidate_on_unsafe_all_restores_rfc_behaviour() {
    let origin = accepting_origin().await;
    let (running, addr) = start_proxy(origin.addr, |config| {
        elsewhere(config);
        config.invalidate_on_unsafe = InvalidateOnUnsafe::All;
    })
    .await;
    stored(&running, addr).await;
    for (round, method) in ["POST", "purge"].into_iter().enumerate() {
        assert_eq!(send(method, addr, "/page", &[], "x=1").await.status, 200);
        for path in ["/page", "/other"] {
            assert_eq!(
                get(addr, path, &[]).await.cache(),
                "MISS",
                "{path} invalidated by {method}"
            );
            assert_eq!(gets(&origin, path), round + 2, "{path} fetched again");
        }
        eventually_stored(&running, 2).await;
    }
}

#[tokio::test]
async fn invalidate_on_unsafe_off_keeps_objects_even_for_allowed_clients() {
    let origin = accepting_origin().await;
    // The test client is in the default --purge-allow (loopback).
    let (running, addr) = start_proxy(origin.addr, |config| {
        config.invalidate_on_unsafe = InvalidateOnUnsafe::Off;
    })
    .await;
    stored(&running, addr).await;
    assert_eq!(send("POST", addr, "/page", &[], "x=1").await.status, 200);
    still_hits(&origin, addr, "--invalidate-on-unsafe off").await;
    let purged = send("PURGE", addr, "/page", &[], Bytes::new()).await;
    assert_eq!(purged.status, 200, "PURGE still works");
    assert_eq!(get(addr, "/page", &[]).await.cache(), "MISS");
}

#[tokio::test]
async fn a_long_ban_list_is_tested_once_per_object() {
    const BANS: u64 = 1_000;
    let origin = accepting_origin().await;
    let (running, addr) = start_proxy(origin.addr, |config| {
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    stored(&running, addr).await;
    let admin = running.admin_addr().unwrap();
    let call = |method: &'static str, target: &'static str, body: String| async move {
        edgecache_runtime::admin::client::call(admin, None, method, target, body)
            .await
            .expect("admin API")
    };
    for n in 0..BANS {
        let reply = call("POST", "/ban", format!(r#"req.url == "/elsewhere/{n}""#)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    for _ in 0..50 {
        assert_eq!(get(addr, "/page", &[]).await.cache(), "HIT");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&call("GET", "/stats", String::new()).await.body).unwrap();
    assert_eq!(stats["bans"], BANS);
    assert_eq!(stats["bans_tested"], BANS, "50 hits tested each ban once");
}
