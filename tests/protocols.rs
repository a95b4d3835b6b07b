//! Front-side protocols on one port: HTTP/1.1 keep-alive, HTTP/1.0 (close unless keep-alive is
//! asked for), and HTTP/2 cleartext with prior knowledge. Each gets a hit on its second request.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::Version;
use support::{start_proxy, Client, H2c, Origin, OriginReply, RawConn, EXCHANGE_LIMIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;

async fn cacheable_origin() -> Origin {
    Origin::fixed(OriginReply::ok("hello, cache").cache_control("max-age=60")).await
}

#[tokio::test]
async fn http10_without_keep_alive_is_closed_after_the_response() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for expected in ["MISS", "HIT"] {
        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /ten HTTP/1.0\r\nHost: edgecache.test\r\n\r\n")
            .await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hello, cache");
        assert_eq!(response.cache(), expected);
        assert!(
            !response
                .header("transfer-encoding")
                .is_some_and(|v| v.contains("chunked")),
            "no chunked coding for an HTTP/1.0 client"
        );
        assert!(
            conn.closed_by_peer(EXCHANGE_LIMIT).await,
            "HTTP/1.0 without keep-alive: the connection is closed"
        );
    }
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn http10_with_keep_alive_stays_open() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut conn = RawConn::connect(addr).await;
    for expected in ["MISS", "HIT"] {
        conn.send("GET /ten-ka HTTP/1.0\r\nHost: edgecache.test\r\nConnection: keep-alive\r\n\r\n")
            .await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hello, cache");
        assert_eq!(response.cache(), expected);
        assert!(
            response
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("keep-alive")),
            "an HTTP/1.0 client must be told the connection persists: {:?}",
            response.headers
        );
        assert!(
            response.has_header("content-length"),
            "a persistent HTTP/1.0 response needs Content-Length"
        );
    }
    assert_eq!(origin.requests(), 1);
    assert!(
        !conn.closed_by_peer(Duration::from_millis(200)).await,
        "still open after the second response"
    );
}

#[tokio::test]
async fn http11_keeps_the_connection_open() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut conn = RawConn::connect(addr).await;
    for expected in ["MISS", "HIT", "HIT"] {
        conn.send(&format!("GET /eleven HTTP/1.1\r\nHost: {addr}\r\n\r\n"))
            .await;
        let response = conn.response(false).await;
        assert_eq!(response.version, "HTTP/1.1");
        assert_eq!(response.status, 200);
        assert_eq!(response.body, b"hello, cache");
        assert_eq!(response.cache(), expected);
    }
    assert_eq!(origin.requests(), 1);

    // And with the pooled hyper client (same Host, so the same key).
    let client = Client::new();
    assert_eq!(client.get(addr, "/eleven", &[]).await.cache(), "HIT");
}

#[tokio::test]
async fn http11_connection_close_is_honoured() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let mut conn = RawConn::connect(addr).await;
    conn.send("GET /close HTTP/1.1\r\nHost: edgecache.test\r\nConnection: close\r\n\r\n")
        .await;
    let response = conn.response(false).await;
    assert_eq!(response.status, 200);
    assert!(conn.closed_by_peer(EXCHANGE_LIMIT).await);
}

#[tokio::test]
async fn h2c_prior_knowledge_gets_a_hit() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut h2 = H2c::connect(addr).await;
    let first = h2.get("/two", &[]).await;
    assert_eq!(first.version, Version::HTTP_2);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, "hello, cache");
    assert_eq!(first.cache(), "MISS");
    let second = h2.get("/two", &[]).await;
    assert_eq!(second.version, Version::HTTP_2);
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.body, "hello, cache");
    assert!(second.age().is_some());
    assert_eq!(origin.requests(), 1);

    // The origin got a proper HTTP/1.1 request with a Host taken from :authority.
    let seen = origin.last();
    assert_eq!(seen.version, Version::HTTP_11);
    assert_eq!(seen.header("host"), Some(addr.to_string().as_str()));
    assert!(seen.header("via").is_some_and(|via| via.contains("edgecache")));
}

#[tokio::test]
async fn h2c_streams_are_multiplexed_and_coalesced() {
    let reply = OriginReply::ok("slow")
        .cache_control("max-age=60")
        .delay(Duration::from_millis(200));
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let h2 = H2c::connect(addr).await;
    let mut connections: Vec<H2c> = Vec::new();
    for _ in 0..10 {
        connections.push(h2.clone_stream());
    }
    let replies =
        futures_util::future::join_all(connections.iter_mut().map(|c| c.get("/two-slow", &[]))).await;
    for reply in &replies {
        assert_eq!(reply.version, Version::HTTP_2);
        assert_eq!(reply.body, "slow");
    }
    assert_eq!(
        origin.requests(),
        1,
        "ten streams on one connection, one origin fetch"
    );
}

/// An origin that answers every request with its target as a `no-store` body, and holds
/// `/held` until `release` is notified (`arrived` says it has it).
async fn holding_origin(arrived: Arc<Notify>, release: Arc<Notify>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (arrived, release) = (arrived.clone(), release.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 4096];
                loop {
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        let request = String::from_utf8_lossy(&head[..end]).into_owned();
                        head.drain(..end + 4);
                        let target = request.split(' ').nth(1).unwrap_or("/").to_owned();
                        if target == "/held" {
                            arrived.notify_one();
                            release.notified().await;
                        }
                        let response = format!(
                            "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n{target}",
                            target.len()
                        );
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
            });
        }
    });
    addr
}

/// A connection's HTTP/2 streams are answered in its own task (`server/h2_streams.rs`): one
/// waiting for the origin must not hold up another stream of the same connection.
#[tokio::test]
async fn an_h2c_stream_waiting_for_the_origin_does_not_hold_up_the_next() {
    let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let origin = holding_origin(arrived.clone(), release.clone()).await;
    let (_proxy, addr) = start_proxy(origin, |_| {}).await;

    let h2 = H2c::connect(addr).await;
    let mut held = h2.clone_stream();
    let held = tokio::spawn(async move { held.get("/held", &[]).await });
    arrived.notified().await;
    let quick = h2.clone_stream().get("/quick", &[]).await;
    assert_eq!(quick.status, 200);
    assert_eq!(quick.body, "/quick");
    assert!(!held.is_finished(), "the held stream waits for its origin");
    release.notify_one();
    let held = held.await.expect("the held stream's task");
    assert_eq!(held.status, 200);
    assert_eq!(held.body, "/held");
}

#[tokio::test]
async fn http1_and_h2_share_the_cache() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    // hyper's HTTP/1.1 client sends Host: 127.0.0.1:port, the h2 client the same :authority.
    assert_eq!(Client::new().get(addr, "/both", &[]).await.cache(), "MISS");
    let mut h2 = H2c::connect(addr).await;
    assert_eq!(h2.get("/both", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn a_client_that_half_closes_after_its_request_still_gets_the_response() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for expected in ["MISS", "HIT"] {
        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /half HTTP/1.1\r\nHost: edgecache.test\r\n\r\n")
            .await;
        conn.finish_sending().await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 200);
        assert_eq!(response.cache(), expected);
    }
}

/// HPACK (vendor/h2/EDGECACHE.md): the encoder sends literals with static name indexes and no
/// dynamic table. A client's decoder must read every field back as the origin sent it, on
/// every response of one connection: repeated names, a value too long for a one-byte length, a
/// name outside the static table, a status outside it.
#[tokio::test]
async fn h2c_response_fields_survive_the_encoder_on_a_reused_connection() {
    let long = "v".repeat(300);
    let reply = OriginReply::with_status(203, "fields")
        .header("set-cookie", "a=1")
        .header("set-cookie", "b=2")
        .header("x-long", &long)
        .header("link", "</style.css>; rel=preload");
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut h2 = H2c::connect(addr).await;
    for _ in 0..3 {
        let reply = h2.get("/fields", &[]).await;
        assert_eq!(reply.version, Version::HTTP_2);
        assert_eq!(reply.status, 203);
        assert_eq!(reply.body, "fields");
        let cookies: Vec<&str> = reply
            .headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().expect("ASCII"))
            .collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(reply.header("x-long"), Some(long.as_str()));
        assert_eq!(reply.header("link"), Some("</style.css>; rel=preload"));
        assert!(reply.header("via").is_some_and(|via| via.contains("edgecache")));
    }
}
