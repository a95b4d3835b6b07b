//! A client's request head is held to Varnish's limits before anything else sees it
//! (`--max-header-size` = `http_req_hdr_len`, 8 KiB; `--max-request-head` = `http_req_size`,
//! 32 KiB): 431 for a header field or head too large, 414 for a long URL, 501 for an absurd
//! method, over HTTP/1.1 and HTTP/2, and the origin sees none of them. And the host a request
//! is for is the one its target names: an absolute-form target's authority (RFC 9112 §3.2.2)
//! and HTTP/2's `:authority` (RFC 9113 §8.3.1) win over `Host`, for the origin and the cache key.

mod support;

use http::StatusCode;
use support::{start_proxy, Client, H2Frames, Origin, OriginReply, RawConn};

const KIB: usize = 1024;

async fn cacheable_origin() -> Origin {
    Origin::start(|request| {
        let host = request
            .headers()
            .get("host")
            .map_or("", |host| host.to_str().unwrap())
            .to_string();
        OriginReply::ok(format!("page for {host}")).cache_control("max-age=60")
    })
    .await
}

/// Sends `head` as the first request of a new connection and reads the answer.
async fn first_request(addr: std::net::SocketAddr, head: &str) -> support::RawResponse {
    let mut conn = RawConn::connect(addr).await;
    conn.send(head).await;
    conn.response(false).await
}

#[tokio::test]
async fn a_64k_header_field_is_refused_with_431() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for (size, why) in [
        (64 * KIB, "past --max-request-head"),
        (12 * KIB, "past --max-header-size"),
    ] {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: a.example\r\nX-Big: {}\r\n\r\n",
            "a".repeat(size)
        );
        let response = first_request(addr, &head).await;
        assert_eq!(response.status, 431, "HTTP/1.1, {size} bytes, {why}");

        let mut h2 = H2Frames::connect(addr).await;
        let reply = h2
            .get("http://a.example/", &[("x-big", &"a".repeat(size))])
            .await
            .expect("an answer");
        assert_eq!(
            reply.status,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "HTTP/2, {size} bytes"
        );
    }
    // A field and a head within the limits pass.
    let near = "a".repeat(8 * KIB - 100);
    let reply = Client::new()
        .get(
            addr,
            "/",
            &[("host", "a.example"), ("x-one", &near), ("x-two", &near)],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        origin.requests(),
        1,
        "the origin saw only the request within the limits"
    );
}

#[tokio::test]
async fn a_64k_method_is_refused() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let method = "M".repeat(64 * KIB);
    let response = first_request(addr, &format!("{method} / HTTP/1.1\r\nHost: a.example\r\n\r\n")).await;
    assert_eq!(response.status, 501, "the first request of a connection");

    // Later on a keep-alive connection, once hyper has parsed the head.
    let mut conn = RawConn::connect(addr).await;
    conn.send("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert_eq!(conn.response(false).await.status, 200);
    let method = "M".repeat(KIB);
    conn.send(&format!("{method} / HTTP/1.1\r\nHost: a.example\r\n\r\n"))
        .await;
    assert_eq!(conn.response(false).await.status, 501, "a later request");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn a_1mib_url_gets_414() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let path = format!("/{}", "a".repeat(1024 * KIB));
    let response = first_request(addr, &format!("GET {path} HTTP/1.1\r\nHost: a.example\r\n\r\n")).await;
    assert_eq!(response.status, 414, "the first request of a connection");
    assert!(String::from_utf8_lossy(&response.body).contains("--max-header-size"));

    // Past --max-header-size but within the head hyper buffers: a later request, and HTTP/2.
    let path = format!("/{}", "a".repeat(12 * KIB));
    let mut conn = RawConn::connect(addr).await;
    conn.send("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert_eq!(conn.response(false).await.status, 200);
    conn.send(&format!("GET {path} HTTP/1.1\r\nHost: a.example\r\n\r\n"))
        .await;
    assert_eq!(conn.response(false).await.status, 414, "a later request");
    let mut h2 = H2Frames::connect(addr).await;
    let reply = h2
        .get(&format!("http://a.example{path}"), &[])
        .await
        .expect("an answer");
    assert_eq!(reply.status, StatusCode::URI_TOO_LONG, "HTTP/2");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn absolute_form_authority_wins_over_host() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let response = first_request(
        addr,
        "GET http://a.example/page HTTP/1.1\r\nHost: b.example\r\n\r\n",
    )
    .await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"page for a.example");
    assert_eq!(
        origin.last().header("host"),
        Some("a.example"),
        "the origin is asked for a.example"
    );

    // Stored under a.example, where an origin-form request for it finds it.
    let hit = first_request(addr, "GET /page HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert_eq!((hit.status, hit.cache()), (200, "HIT"));
    let other = first_request(addr, "GET /page HTTP/1.1\r\nHost: b.example\r\n\r\n").await;
    assert_eq!(other.cache(), "MISS", "b.example's page is its own");
    assert_eq!(other.body, b"page for b.example");
    assert_eq!(origin.requests(), 2);

    // User information in the target is refused (RFC 9110 §4.2.4).
    let userinfo = first_request(
        addr,
        "GET http://u@a.example/page HTTP/1.1\r\nHost: a.example\r\n\r\n",
    )
    .await;
    assert_eq!(userinfo.status, 400);
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn h2_authority_wins_over_host_header() {
    let origin = cacheable_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut h2 = H2Frames::connect(addr).await;
    let reply = h2
        .get("http://a.example/page", &[("host", "b.example")])
        .await
        .expect("an answer");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "page for a.example");
    assert_eq!(origin.last().header("host"), Some("a.example"));

    let hit = Client::new().get(addr, "/page", &[("host", "a.example")]).await;
    assert_eq!(hit.cache(), "HIT", "stored under :authority");
    let other = Client::new().get(addr, "/page", &[("host", "b.example")]).await;
    assert_eq!(other.cache(), "MISS");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn more_than_max_headers_fields_get_431() {
    // Raw: a hyper origin would refuse the fields edgecache adds past its own 100.
    let origin = Origin::raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").await;
    for (configured, limit) in [(None, 100), (Some(40), 40)] {
        let (_proxy, addr) = start_proxy(origin.addr, |config| {
            if let Some(limit) = configured {
                config.request_limits.max_headers = limit;
            }
        })
        .await;
        let before = origin.requests();
        // `Host` and `count - 1` more.
        let head = |count: usize| {
            let fields: String = (1..count).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
            format!("GET /fields HTTP/1.1\r\nHost: a.example\r\n{fields}\r\n")
        };
        let response = first_request(addr, &head(limit)).await;
        assert_eq!(
            response.status,
            200,
            "HTTP/1.1, {limit} fields: {}",
            String::from_utf8_lossy(&response.body)
        );
        assert_eq!(
            first_request(addr, &head(limit + 1)).await.status,
            431,
            "HTTP/1.1, {} fields",
            limit + 1
        );

        let names: Vec<String> = (0..=limit).map(|i| format!("x-field-{i}")).collect();
        let fields: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "1")).collect();
        let mut h2 = H2Frames::connect(addr).await;
        let reply = h2
            .get("http://a.example/h2", &fields[..limit])
            .await
            .expect("an answer");
        assert_eq!(reply.status, StatusCode::OK, "HTTP/2, {limit} fields");
        let reply = h2.get("http://a.example/h2", &fields).await.expect("an answer");
        assert_eq!(
            reply.status,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "HTTP/2, {} fields",
            limit + 1
        );
        assert_eq!(
            origin.requests() - before,
            2,
            "the origin saw only the requests within the limit"
        );
    }
}
