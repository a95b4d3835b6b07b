//! `PURGE`: removes every variant of a URL for allowed clients (default loopback), 405 for others.

mod support;

use bytes::Bytes;
use support::{eventually_stored, get, send, start_proxy, Origin, OriginReply};

#[tokio::test]
async fn purge_from_an_allowed_client_removes_the_object() {
    let origin = Origin::fixed(OriginReply::ok("v").cache_control("max-age=600")).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    assert_eq!(get(addr, "/p", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/p", &[]).await.cache(), "HIT");
    eventually_stored(&proxy, 1).await;

    let purged = send("PURGE", addr, "/p", &[], Bytes::new()).await;
    assert_eq!(purged.status, 200);
    assert!(purged.text().contains("Purged"), "{:?}", purged.text());
    assert_eq!(proxy.cache_usage().keys, 0);
    assert_eq!(
        origin.requests(),
        1,
        "PURGE is answered by edgecache, not forwarded"
    );

    let after = get(addr, "/p", &[]).await;
    assert_eq!(after.cache(), "MISS", "purged: fetched again");
    assert_eq!(origin.requests(), 2);
    assert_eq!(get(addr, "/p", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn purge_removes_every_variant() {
    let origin = Origin::start(|request| {
        let language = request
            .headers()
            .get("accept-language")
            .map_or("none", |v| v.to_str().unwrap());
        OriginReply::ok(language.to_string())
            .cache_control("max-age=600")
            .header("vary", "accept-language")
    })
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for language in ["en", "fr"] {
        get(addr, "/v", &[("accept-language", language)]).await;
        assert_eq!(
            get(addr, "/v", &[("accept-language", language)]).await.cache(),
            "HIT"
        );
    }
    eventually_stored(&proxy, 1).await;
    assert_eq!(origin.requests(), 2);

    assert_eq!(send("PURGE", addr, "/v", &[], Bytes::new()).await.status, 200);
    for language in ["en", "fr"] {
        assert_eq!(
            get(addr, "/v", &[("accept-language", language)]).await.cache(),
            "MISS",
            "{language}"
        );
    }
    assert_eq!(origin.requests(), 4);
}

#[tokio::test]
async fn purge_of_an_absent_object_is_404() {
    let origin = Origin::fixed(OriginReply::ok("v").cache_control("max-age=600")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let reply = send("PURGE", addr, "/never-fetched", &[], Bytes::new()).await;
    assert_eq!(reply.status, 404);
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn purge_from_a_client_outside_the_allow_list_is_405() {
    let origin = Origin::fixed(OriginReply::ok("v").cache_control("max-age=600")).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| {
        config.purge_allow = vec!["10.0.0.0/8".parse().unwrap(), "192.0.2.0/24".parse().unwrap()];
    })
    .await;
    get(addr, "/p", &[]).await;
    get(addr, "/p", &[]).await;
    eventually_stored(&proxy, 1).await;

    let denied = send("PURGE", addr, "/p", &[], Bytes::new()).await;
    assert_eq!(denied.status, 405);
    assert_eq!(proxy.cache_usage().keys, 1, "nothing removed");
    assert_eq!(get(addr, "/p", &[]).await.cache(), "HIT", "still cached");
    assert_eq!(origin.requests(), 1, "PURGE is not forwarded either");
}
