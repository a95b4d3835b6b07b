//! Header rules of an intermediary: hop-by-hop fields removed both ways (RFC 9110 §7.6.1,
//! including fields named in `Connection`), `Via` (§7.6.3) and `X-Forwarded-For` added, and
//! everything else passed through untouched.

mod support;

use support::{get, start_proxy, Client, Origin, OriginReply, RawConn, Seen};

/// Hop-by-hop fields a client sends, and one end-to-end field that must survive.
const HOP_BY_HOP_REQUEST: &str = "Connection: keep-alive, X-Secret\r\n\
    X-Secret: for-the-proxy-only\r\n\
    Keep-Alive: timeout=5\r\n\
    Proxy-Connection: keep-alive\r\n\
    Proxy-Authorization: Basic cHJveHk6eA==\r\n\
    TE: trailers\r\n\
    Upgrade: example/1\r\n\
    X-End-To-End: kept\r\n";

fn assert_request_cleaned(seen: &Seen) {
    for name in [
        "x-secret",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "upgrade",
    ] {
        assert!(
            seen.header(name).is_none(),
            "{name} reached the origin: {:?}",
            seen.headers
        );
    }
    if let Some(connection) = seen.header("connection") {
        assert!(
            !connection.to_ascii_lowercase().contains("x-secret"),
            "client's Connection forwarded: {connection}"
        );
    }
    assert_eq!(
        seen.header("x-end-to-end"),
        Some("kept"),
        "end-to-end fields are forwarded"
    );
    assert_eq!(seen.header("host"), Some("edgecache.test"), "Host is kept");
    let via = seen.header("via").expect("Via added");
    assert!(via.contains("edgecache"), "Via: {via}");
    assert!(via.starts_with("1.1 "), "received over HTTP/1.1: {via}");
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
}

#[tokio::test]
async fn hop_by_hop_request_fields_are_not_forwarded_on_a_miss() {
    let origin = Origin::fixed(OriginReply::ok("ok").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut conn = RawConn::connect(addr).await;
    conn.send(&format!(
        "GET /hop HTTP/1.1\r\nHost: edgecache.test\r\n{HOP_BY_HOP_REQUEST}\r\n"
    ))
    .await;
    let response = conn.response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.cache(), "MISS");
    assert_eq!(origin.requests(), 1);
    assert_request_cleaned(&origin.last());
}

#[tokio::test]
async fn hop_by_hop_request_fields_are_not_forwarded_on_a_pass() {
    let origin = Origin::fixed(OriginReply::ok("ok")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut conn = RawConn::connect(addr).await;
    conn.send(&format!(
        "POST /hop HTTP/1.1\r\nHost: edgecache.test\r\nContent-Length: 4\r\n{HOP_BY_HOP_REQUEST}\r\nbody"
    ))
    .await;
    let response = conn.response(false).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.cache(), "PASS");
    let seen = origin.last();
    assert_eq!(seen.body, "body");
    assert_request_cleaned(&seen);
}

#[tokio::test]
async fn forwarded_for_is_appended_to() {
    let origin = Origin::fixed(OriginReply::ok("ok")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    get(
        addr,
        "/xff",
        &[("x-forwarded-for", "10.0.0.1"), ("via", "1.1 upstream")],
    )
    .await;
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("10.0.0.1, 127.0.0.1"));
    let vias: Vec<_> = seen
        .headers
        .get_all("via")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let joined = vias.join(", ");
    assert!(
        joined.starts_with("1.1 upstream"),
        "earlier Via entries kept first: {joined}"
    );
    assert!(joined.ends_with("edgecache"), "edgecache appended last: {joined}");
}

fn origin_with_hop_by_hop_response(cache_control: &str) -> OriginReply {
    OriginReply::ok("payload")
        .cache_control(cache_control)
        .header("connection", "X-Origin-Secret")
        .header("x-origin-secret", "for-the-proxy-only")
        .header("keep-alive", "timeout=5")
        .header("proxy-authenticate", "Basic")
        .header("x-kept", "yes")
}

fn assert_response_cleaned(reply: &support::Reply, what: &str) {
    assert_eq!(reply.status, 200, "{what}");
    for name in ["x-origin-secret", "keep-alive", "proxy-authenticate"] {
        assert!(
            reply.header(name).is_none(),
            "{what}: {name} reached the client: {:?}",
            reply.headers
        );
    }
    if let Some(connection) = reply.header("connection") {
        assert!(
            !connection.to_ascii_lowercase().contains("x-origin-secret"),
            "{what}: origin's Connection forwarded"
        );
    }
    assert_eq!(
        reply.header("x-kept"),
        Some("yes"),
        "{what}: end-to-end fields are delivered"
    );
    let via = reply
        .headers
        .get_all("via")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(via.contains("edgecache"), "{what}: Via on the response: {via:?}");
    assert_eq!(reply.body, "payload", "{what}");
}

#[tokio::test]
async fn hop_by_hop_response_fields_are_not_delivered() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/cached" => origin_with_hop_by_hop_response("max-age=60"),
        _ => origin_with_hop_by_hop_response("no-store"),
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let client = Client::new();

    let miss = client.get(addr, "/cached", &[]).await;
    assert_eq!(miss.cache(), "MISS");
    assert_response_cleaned(&miss, "miss");
    let hit = client.get(addr, "/cached", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_response_cleaned(&hit, "hit");
    assert_eq!(
        hit.headers.get_all("via").iter().count(),
        1,
        "one Via entry for edgecache on a hit, not one per delivery: {:?}",
        hit.headers
    );
    let pass = client.get(addr, "/uncached", &[]).await;
    assert_ne!(pass.cache(), "HIT");
    assert_response_cleaned(&pass, "pass");
    assert_eq!(origin.requests(), 2);
}

/// hyper's `t!` idea: the same exchange straight against the origin and through edgecache gives
/// the same status, body and end-to-end fields when nothing is cached.
#[tokio::test]
async fn uncached_responses_are_transparent() {
    let reply = OriginReply::with_status(201, "created")
        .cache_control("no-store")
        .header("content-type", "application/json")
        .header("etag", "\"v1\"")
        .header("x-multi", "a")
        .header("x-multi", "b")
        .header("link", "</style.css>; rel=preload");
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let direct = get(origin.addr, "/t?x=1", &[("accept", "application/json")]).await;
    let proxied = get(addr, "/t?x=1", &[("accept", "application/json")]).await;
    assert_eq!(proxied.status, direct.status);
    assert_eq!(proxied.body, direct.body);
    for name in ["content-type", "etag", "cache-control", "link", "content-length"] {
        assert_eq!(proxied.header(name), direct.header(name), "{name}");
    }
    let multi = |r: &support::Reply| {
        r.headers
            .get_all("x-multi")
            .iter()
            .map(|v| v.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        multi(&proxied),
        multi(&direct),
        "repeated fields keep their order"
    );
    let seen = origin.log();
    assert_eq!(
        seen[0].target, seen[1].target,
        "the request target reaches the origin unchanged"
    );
    assert_eq!(seen[1].header("accept"), Some("application/json"));
}

/// One request on a fresh raw connection; the response's status.
async fn raw_status(addr: std::net::SocketAddr, request: &str) -> u16 {
    let mut conn = RawConn::connect(addr).await;
    conn.send(request).await;
    conn.response(false).await.status
}

#[tokio::test]
async fn requests_with_an_ambiguous_or_missing_host_are_refused() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    // Two Host fields would let a response be stored under one host and fetched for another.
    let two = "GET /x HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n";
    assert_eq!(raw_status(addr, two).await, 400);
    assert_eq!(raw_status(addr, "GET /x HTTP/1.1\r\n\r\n").await, 400);
    assert_eq!(
        raw_status(addr, "GET /x HTTP/1.1\r\nHost: a b/c@d\r\n\r\n").await,
        400
    );
    assert_eq!(origin.requests(), 0, "none of them reached the origin");
    // HTTP/1.0 may omit Host.
    assert_eq!(raw_status(addr, "GET /x HTTP/1.0\r\n\r\n").await, 200);

    // With a policy, several Host fields are refused as well (as Varnish does); a missing Host
    // is for the builtin vcl_recv to judge, after the policy's own vcl_recv.
    let path = support::write_policy(
        "host",
        "vcl 4.1;\nsub vcl_recv { if (!req.http.host) { set req.http.host = \"default.test\"; } }\n",
    );
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.policy = Some(path)).await;
    assert_eq!(raw_status(addr, two).await, 400);
    assert_eq!(raw_status(addr, "GET /y HTTP/1.1\r\n\r\n").await, 200);
    assert_eq!(origin.last().header("host"), Some("default.test"));
}
