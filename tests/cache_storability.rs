//! What a shared cache must not store or reuse (RFC 9111 §3, Varnish's builtin VCL), and what it
//! may: each case counts origin requests.

mod support;

use bytes::Bytes;
use support::{get, send, start_proxy, Origin, OriginReply};

/// Three GETs of `path`; each must reach the origin and none may be a hit.
async fn assert_never_reused(
    origin: &Origin,
    addr: std::net::SocketAddr,
    path: &str,
    headers: support::Headers<'_>,
) {
    for round in 1..=3 {
        let reply = get(addr, path, headers).await;
        assert_eq!(reply.status, 200, "{path} round {round}");
        assert_ne!(reply.cache(), "HIT", "{path} round {round}");
        assert_eq!(
            origin.requests_for(path),
            round,
            "{path}: request {round} reached the origin"
        );
    }
}

#[tokio::test]
async fn no_store_is_not_stored() {
    let origin = Origin::fixed(OriginReply::ok("x").cache_control("no-store, max-age=60")).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    assert_never_reused(&origin, addr, "/no-store", &[]).await;
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn private_is_not_stored_by_a_shared_cache() {
    let origin = Origin::fixed(OriginReply::ok("x").cache_control("private, max-age=60")).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    assert_never_reused(&origin, addr, "/private", &[]).await;
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn requests_with_authorization_are_not_served_from_cache() {
    let origin = Origin::start(|request| {
        let who = request
            .headers()
            .get("authorization")
            .map_or("anonymous", |v| v.to_str().unwrap());
        OriginReply::ok(format!("for {who}")).cache_control("max-age=60")
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let alice = get(addr, "/account", &[("authorization", "Basic YWxpY2U6eA==")]).await;
    assert_eq!(alice.body, "for Basic YWxpY2U6eA==");
    assert_eq!(alice.cache(), "PASS");
    let bob = get(addr, "/account", &[("authorization", "Basic Ym9iOng=")]).await;
    assert_eq!(
        bob.body, "for Basic Ym9iOng=",
        "bob must not get alice's response"
    );
    assert_eq!(bob.cache(), "PASS");
    assert_eq!(origin.requests_for("/account"), 2);
    assert_eq!(
        origin.log()[0].header("authorization"),
        Some("Basic YWxpY2U6eA=="),
        "Authorization is end-to-end: forwarded"
    );

    // Nothing was stored for an anonymous request either.
    let anonymous = get(addr, "/account", &[]).await;
    assert_eq!(anonymous.body, "for anonymous");
    assert_eq!(anonymous.cache(), "MISS");
    assert_eq!(origin.requests_for("/account"), 3);
}

#[tokio::test]
async fn requests_with_cookie_are_passed() {
    let origin = Origin::fixed(OriginReply::ok("x").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    assert_never_reused(&origin, addr, "/with-cookie", &[("cookie", "session=1")]).await;
    assert_eq!(origin.last().header("cookie"), Some("session=1"));
}

#[tokio::test]
async fn set_cookie_responses_are_not_stored_by_default() {
    let reply = OriginReply::ok("x")
        .cache_control("max-age=60")
        .header("set-cookie", "session=abc");
    let origin = Origin::fixed(reply).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for round in 1..=3 {
        let reply = get(addr, "/set-cookie", &[]).await;
        assert_ne!(reply.cache(), "HIT", "round {round}");
        assert_eq!(
            reply.header("set-cookie"),
            Some("session=abc"),
            "the cookie reaches its client"
        );
        assert_eq!(origin.requests(), round);
    }
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn set_cookie_responses_are_stored_when_configured() {
    let reply = OriginReply::ok("x")
        .cache_control("max-age=60")
        .header("set-cookie", "theme=dark");
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.store_set_cookie = true).await;
    get(addr, "/set-cookie", &[]).await;
    assert_eq!(get(addr, "/set-cookie", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn post_is_passed_with_its_body() {
    let origin = Origin::fixed(OriginReply::ok("posted").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for round in 1..=2 {
        let reply = send(
            "POST",
            addr,
            "/form",
            &[("content-type", "text/plain")],
            Bytes::from_static(b"a=1"),
        )
        .await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.cache(), "PASS");
        assert_eq!(origin.requests(), round);
        let seen = origin.last();
        assert_eq!(seen.method, "POST");
        assert_eq!(seen.body, "a=1", "the request body reached the origin");
    }
    // A GET after the POSTs is a miss: nothing was stored.
    assert_eq!(get(addr, "/form", &[]).await.cache(), "MISS");
}

#[tokio::test]
async fn head_and_get_share_objects() {
    let origin = Origin::fixed(OriginReply::ok("the body").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let head = send("HEAD", addr, "/shared", &[], Bytes::new()).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD has no body");
    let get_reply = get(addr, "/shared", &[]).await;
    assert_eq!(get_reply.cache(), "HIT", "the HEAD miss stored the whole object");
    assert_eq!(get_reply.body, "the body");
    let head = send("HEAD", addr, "/shared", &[], Bytes::new()).await;
    assert_eq!(head.cache(), "HIT");
    assert!(head.body.is_empty());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn any_status_with_explicit_freshness_is_stored() {
    let origin = Origin::fixed(OriginReply::with_status(404, "missing").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    assert_eq!(get(addr, "/gone", &[]).await.status, 404);
    let second = get(addr, "/gone", &[]).await;
    assert_eq!(second.status, 404);
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.body, "missing");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn query_is_part_of_the_key() {
    let origin = Origin::start(|request| {
        OriginReply::ok(request.uri().query().unwrap_or("").to_string()).cache_control("max-age=60")
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    assert_eq!(get(addr, "/q?a=1", &[]).await.body, "a=1");
    assert_eq!(get(addr, "/q?a=2", &[]).await.body, "a=2");
    let again = get(addr, "/q?a=1", &[]).await;
    assert_eq!(again.cache(), "HIT");
    assert_eq!(again.body, "a=1");
    assert_eq!(origin.requests(), 2);
}

/// RFC 9111 §3.5 would let a shared cache store an authorized response marked `public`;
/// edgecache's builtin `vcl_recv` passes every request with credentials, as Varnish's does.
#[tokio::test]
async fn requests_with_authorization_are_passed_even_for_public_responses() {
    let origin = Origin::start(|request| {
        let who = request
            .headers()
            .get("authorization")
            .map_or("anonymous", |v| v.to_str().unwrap());
        OriginReply::ok(format!("for {who}")).cache_control("public, max-age=60")
    })
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let alice = get(addr, "/public", &[("authorization", "Bearer alice")]).await;
    assert_eq!(
        (alice.cache(), alice.text().as_str()),
        ("PASS", "for Bearer alice")
    );
    let bob = get(addr, "/public", &[("authorization", "Bearer bob")]).await;
    assert_eq!((bob.cache(), bob.text().as_str()), ("PASS", "for Bearer bob"));
    assert_eq!(origin.requests(), 2);
    assert_eq!(
        proxy.cache_usage().keys,
        0,
        "nothing stored from requests with credentials"
    );
}
