//! The load balancer's health check (`--health-path`, default `/healthz`): answered on the
//! serving listener before the policy, never cached nor sent to the origin nor logged; 200 while
//! serving, 503 from the moment a graceful shutdown starts through `--drain-time`, while other
//! requests are still served, and then the listener closes.

mod support;

use std::time::{Duration, Instant};

use http::StatusCode;
use support::{
    get, send, start_proxy, CapturedLog, Client, H2c, Origin, OriginReply, RawConn, EXCHANGE_LIMIT,
};
use tokio::net::TcpStream;

/// Long enough for a few requests on a loaded machine, short enough for a fast test.
const DRAIN: Duration = Duration::from_secs(1);

fn page_origin() -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    |request| OriginReply::ok(format!("origin {}", request.uri().path())).cache_control("max-age=60")
}

#[tokio::test]
async fn health_path_answers_200_without_the_origin_the_cache_or_the_access_log() {
    let log = CapturedLog::default();
    let _guard = log.install("edgecache::access=info");
    let origin = Origin::start(page_origin()).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for target in ["/healthz", "/healthz", "/healthz?from=haproxy"] {
        let reply = get(addr, target, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{target}");
        assert_eq!(reply.text(), "serving\n");
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        assert_eq!(reply.cache(), "", "not a cache lookup");
    }
    let head = send("HEAD", addr, "/healthz", &[], "").await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    let over_h2 = H2c::connect(addr).await.get("/healthz", &[]).await;
    assert_eq!(over_h2.status, StatusCode::OK, "h2c on the same port");
    assert_eq!(origin.requests(), 0, "the origin never sees a health check");
    assert_eq!(proxy.cache_usage().keys, 0, "nothing stored");

    // Only GET and HEAD of the exact path: the rest is the site's.
    get(addr, "/healthz/deep", &[]).await;
    let posted = send("POST", addr, "/healthz", &[], "x").await;
    assert_eq!(posted.text(), "origin /healthz");
    assert_eq!(origin.requests(), 2);

    let log = log.text();
    assert!(
        log.contains("url=/healthz/deep "),
        "other requests are logged: {log}"
    );
    assert!(log.contains("method=POST url=/healthz "), "{log}");
    let checks = ["method=GET url=/healthz ", "url=/healthz?", "method=HEAD"];
    assert!(
        !checks.iter().any(|check| log.contains(check)),
        "health checks are not: {log}"
    );
}

#[tokio::test]
async fn health_path_can_be_renamed_or_turned_off() {
    let origin = Origin::start(page_origin()).await;
    let (_renamed, addr) = start_proxy(origin.addr, |config| {
        config.health_path = Some("/lb-check".into())
    })
    .await;
    assert_eq!(get(addr, "/lb-check", &[]).await.text(), "serving\n");
    assert_eq!(get(addr, "/healthz", &[]).await.text(), "origin /healthz");
    assert_eq!(origin.requests(), 1);

    let (_off, addr) = start_proxy(origin.addr, |config| config.health_path = None).await;
    assert_eq!(get(addr, "/healthz", &[]).await.text(), "origin /healthz");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn a_health_path_that_is_not_a_path_is_refused_at_start() {
    for bad in ["healthz", "/healthz?x=1"] {
        let config = edgecache_runtime::Config {
            backend: Some("127.0.0.1:9".into()),
            health_path: Some(bad.into()),
            ..edgecache_runtime::Config::default()
        };
        let error = edgecache_runtime::start(config)
            .await
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        let message = error.to_string();
        assert!(message.contains("--health-path"), "{message}");
    }
}

#[tokio::test]
async fn shutdown_answers_503_for_the_drain_time_while_serving_then_closes_the_listener() {
    let origin = Origin::start(page_origin()).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| config.drain_time = DRAIN).await;
    assert_eq!(get(addr, "/healthz", &[]).await.status, StatusCode::OK);
    // A keep-alive connection opened before the drain, as a balancer's pool holds.
    let pooled = Client::new();
    assert_eq!(pooled.get(addr, "/page", &[]).await.status, StatusCode::OK);

    let started = Instant::now();
    let stopping = tokio::spawn(proxy.shutdown());

    let health = get(addr, "/healthz", &[]).await;
    assert_eq!(health.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health.text(), "draining\n");
    let fresh = get(addr, "/other", &[]).await;
    assert_eq!(fresh.text(), "origin /other", "new connections are still served");
    assert_eq!(pooled.get(addr, "/page", &[]).await.status, StatusCode::OK);
    assert!(
        !stopping.is_finished(),
        "the requests above were answered during the drain"
    );
    assert_eq!(
        origin.requests_for("/healthz"),
        0,
        "health checks still never reach the origin"
    );

    tokio::time::timeout(EXCHANGE_LIMIT, stopping)
        .await
        .expect("shutdown ends")
        .expect("shutdown task");
    assert!(
        started.elapsed() >= DRAIN,
        "the listener stayed open for the drain"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed after the drain"
    );
}

#[tokio::test]
async fn a_proxy_listener_answers_haproxys_health_check_behind_a_local_header() {
    let origin = Origin::start(page_origin()).await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.listen = vec![edgecache_runtime::config::ListenSpec {
            proxy_protocol: true,
            ..std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into()
        }];
    })
    .await;
    // What HAProxy's `option httpchk GET /healthz` sends to a `send-proxy-v2` server: a v2
    // LOCAL header with no addresses, then the check.
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&support::proxy_protocol::v2_frame(0x20, 0x00, &[]))
        .await;
    conn.send("GET /healthz HTTP/1.0\r\n\r\n").await;
    let response = conn.response(false).await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(origin.requests(), 0);
}
