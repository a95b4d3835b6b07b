//! Origin failures: broken response → 502, nothing listening → 503, too slow → 504, each with a
//! short body naming the request id and a generic cause (the backend's address and the OS error
//! go to the log, or to the page with `--show-backend-errors`); failures are never cached.

mod support;

use std::time::Duration;

use bytes::Bytes;
use edgecache_runtime::config::BackendTimeouts;
use support::{get, start_proxy, try_get, unused_port, Origin, OriginReply};

/// The page a visitor sees: the cause in general words and the request id, nothing of how the
/// site is built. Returns the id.
fn assert_generic_page(body: &str, address: &str) -> String {
    assert!(
        body.contains("Backend fetch failed: the origin"),
        "a generic cause: {body:?}"
    );
    assert!(
        !body.contains(address),
        "the page hides the backend's address {address}: {body:?}"
    );
    assert!(
        !body.contains("default"),
        "the page hides the backend's name: {body:?}"
    );
    let xid = regex::Regex::new(r"\nXID: (\d+)\n").unwrap();
    let id = xid
        .captures(body)
        .unwrap_or_else(|| panic!("the page names the request id: {body:?}"));
    id[1].to_string()
}

#[tokio::test]
async fn garbage_from_the_origin_is_502() {
    let origin = Origin::raw(Bytes::from_static(b"this is not HTTP at all\r\n\r\n")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let reply = get(addr, "/broken", &[]).await;
    assert_eq!(reply.status, 502);
    assert_generic_page(&reply.text(), &origin.addr.to_string());
    assert!(origin.requests() >= 1, "the request reached the origin");

    let before = origin.requests();
    let again = get(addr, "/broken", &[]).await;
    assert_eq!(again.status, 502);
    assert_ne!(again.cache(), "HIT", "a 502 is not cached");
    assert!(
        origin.requests() > before,
        "the second request went to the origin again"
    );
}

#[tokio::test]
async fn an_origin_closing_mid_body_is_not_a_silently_short_response() {
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nCache-Control: max-age=60\r\n\r\n";
    let origin = Origin::raw(format!("{head}only ten b")).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    match try_get(addr, "/truncated", &[]).await {
        Err(_) => {}
        Ok(reply) => assert!(
            reply.status == 502,
            "a truncated origin body must reach the client as an error, got {} with {} bytes",
            reply.status,
            reply.body.len()
        ),
    }
    let before = origin.requests();
    let _ = try_get(addr, "/truncated", &[]).await;
    assert!(origin.requests() > before, "the truncated object was not stored");
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn nothing_listening_is_503() {
    let backend = unused_port().await;
    let (_proxy, addr) = start_proxy(backend, |_| {}).await;
    for _ in 0..2 {
        let reply = get(addr, "/down", &[]).await;
        assert_eq!(reply.status, 503);
        assert_generic_page(&reply.text(), &backend.to_string());
        assert_ne!(reply.cache(), "HIT");
    }
}

/// The id on the page is the one on the request's access-log line, and the warning that names
/// the backend, its address and the OS error carries it too.
#[tokio::test(flavor = "current_thread")]
async fn the_failure_page_names_the_xid_of_the_log_lines() {
    let backend = unused_port().await;
    let (_proxy, addr) = start_proxy(backend, |_| {}).await;
    let log = support::CapturedLog::default();
    let guard = log.install("edgecache::access=info,edgecache_runtime=warn");
    let reply = get(addr, "/down", &[]).await;
    drop(guard);
    let xid = assert_generic_page(&reply.text(), &backend.to_string());
    let log = log.text();
    let warning = log
        .lines()
        .find(|line| line.contains("WARN") && line.contains(&backend.to_string()))
        .unwrap_or_else(|| panic!("a warning names the backend's address: {log}"));
    assert!(warning.contains(&format!("xid={xid}")), "{warning}");
    assert!(
        log.lines()
            .any(|line| line.contains("/down") && line.contains(&format!("xid={xid}"))),
        "the access line carries xid {xid}: {log}"
    );
}

/// `--show-backend-errors` (development): the page names the backend and its address.
#[tokio::test]
async fn show_backend_errors_puts_the_backend_on_the_page() {
    let backend = unused_port().await;
    let (_proxy, addr) = start_proxy(backend, |config| config.show_backend_errors = true).await;
    let reply = get(addr, "/down", &[]).await;
    assert_eq!(reply.status, 503);
    let body = reply.text();
    assert!(
        body.contains("backend default") && body.contains(&backend.to_string()),
        "{body:?}"
    );
    assert!(body.contains("XID: "), "{body:?}");
}

#[tokio::test]
async fn no_response_head_in_time_is_504() {
    // The origin holds its answer far longer than the proxy waits; the test ends on the proxy's
    // 504, never on this delay.
    let origin = Origin::fixed(
        OriginReply::ok("late")
            .cache_control("max-age=60")
            .delay(Duration::from_secs(3600)),
    )
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.timeouts = BackendTimeouts {
            connect: Duration::from_millis(500),
            first_byte: Duration::from_millis(300),
            between_bytes: Duration::from_millis(300),
        };
    })
    .await;
    let reply = get(addr, "/late", &[]).await;
    assert_eq!(reply.status, 504);
    assert_generic_page(&reply.text(), &origin.addr.to_string());
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn a_stalled_body_is_cut_not_hung() {
    let chunks = vec![
        (Duration::ZERO, Bytes::from_static(b"first")),
        (Duration::from_secs(3600), Bytes::from_static(b"never")),
    ];
    let origin = Origin::fixed(OriginReply::ok("").cache_control("max-age=60").chunks(chunks)).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| {
        config.timeouts.between_bytes = Duration::from_millis(300);
    })
    .await;
    // The head was already sent, so the client sees the body end in an error (bounded by
    // EXCHANGE_LIMIT in the client, which only a hang would reach).
    let result = try_get(addr, "/stall", &[]).await;
    let error = result.expect_err("a body the origin stopped sending must not end as complete");
    assert!(
        !error.contains("no complete response within"),
        "the proxy hung instead of timing out: {error}"
    );
    assert_eq!(proxy.cache_usage().keys, 0, "the partial object was not stored");
}

#[tokio::test]
async fn a_backend_on_edgecaches_own_listen_address_is_refused_at_start() {
    let own = unused_port().await;
    let config = edgecache_runtime::Config {
        listen: vec![own.into()],
        backend: Some(format!("localhost:{}", own.port())),
        ..Default::default()
    };
    let error = edgecache_runtime::start(config)
        .await
        .err()
        .expect("a proxy in front of itself would loop")
        .to_string();
    assert!(error.contains("edgecache's own listen address"), "{error}");
}

/// A piped request (a WebSocket upgrade, which the builtin `vcl_recv` pipes) whose backend is
/// down gets the same page, the request id included.
#[tokio::test]
async fn a_pipe_to_a_backend_that_is_down_gets_the_page_with_its_xid() {
    let backend = unused_port().await;
    let (_proxy, addr) = start_proxy(backend, |_| {}).await;
    let upgrade = [
        ("connection", "upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-version", "13"),
    ];
    let reply = get(addr, "/socket", &upgrade).await;
    assert_eq!(reply.status, 503);
    assert_generic_page(&reply.text(), &backend.to_string());
}
