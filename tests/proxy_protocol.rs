//! The PROXY protocol on `-a ...,PROXY` listeners (issue 20): the v1 and v2 headers a load
//! balancer writes name the client the policy, `X-Forwarded-For` and the log see; a PROXY
//! listener refuses connections without one; a plain listener never takes one. Once with the
//! real HAProxy (the Debian package) in front with `send-proxy-v2`.

mod support;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use edgecache_runtime::config::ListenSpec;
use edgecache_runtime::Running;
use support::proxy_protocol::{tlv, v2_frame, v2_header};
use support::{start_proxy, write_policy, CapturedLog, Daemon, Origin, OriginReply, RawConn, EXCHANGE_LIMIT};

/// Marks requests from the documentation networks and 127.0.0.2 (a second loopback client),
/// and passes every request, so each one reaches the origin with what the policy saw.
const POLICY: &str = r#"vcl 4.1;
acl lb_clients {
    "203.0.113.0"/24;
    "2001:db8::"/32;
    "127.0.0.2";
}

sub vcl_recv {
    if (client.ip ~ lb_clients) {
        set req.http.X-Client-Acl = "in";
    } else {
        set req.http.X-Client-Acl = "out";
    }
    return (pass);
}
"#;

const GET: &str = "GET /page HTTP/1.1\r\nHost: example.com\r\n\r\n";

/// edgecache with one `,PROXY` listener on 127.0.0.1 in front of `origin`, with [`POLICY`]
/// and a 1 s header timeout.
async fn start_proxy_listener(origin: &Origin) -> (Running, SocketAddr) {
    let policy = write_policy("proxy_protocol", POLICY);
    start_proxy(origin.addr, |config| {
        config.listen = vec![ListenSpec {
            proxy_protocol: true,
            ..SocketAddr::from(([127, 0, 0, 1], 0)).into()
        }];
        config.policy = Some(policy);
        config.client_timeouts.header = Duration::from_secs(1);
    })
    .await
}

#[tokio::test]
async fn proxy_v1_header_sets_client_ip_for_the_acl_and_x_forwarded_for() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    let mut conn = RawConn::connect(addr).await;
    conn.send("PROXY TCP4 203.0.113.7 192.0.2.1 40000 6086\r\n").await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("203.0.113.7"));
    assert_eq!(seen.header("x-client-acl"), Some("in"));

    // The header comes once per connection: the next request on it is the same client's, and
    // its bytes were not taken with the header.
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    assert_eq!(origin.requests(), 2);
    assert_eq!(origin.last().header("x-forwarded-for"), Some("203.0.113.7"));
}

#[tokio::test]
async fn proxy_v2_header_sets_client_ip_for_the_acl_and_x_forwarded_for() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    // As HAProxy's `send-proxy-v2-ssl` writes it: ALPN and SSL TLVs after the addresses; the
    // request in the same write, as a load balancer's first segment may carry it.
    let mut ssl = vec![0x01, 0, 0, 0, 0];
    ssl.extend(tlv(0x21, b"TLSv1.3"));
    let mut tlvs = tlv(0x01, b"h2");
    tlvs.extend(tlv(0x20, &ssl));
    let client = SocketAddr::new(Ipv4Addr::new(203, 0, 113, 9).into(), 51000);
    let mut bytes = v2_header(client, "192.0.2.1:443".parse().unwrap(), &tlvs);
    bytes.extend(GET.as_bytes());
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&bytes).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("203.0.113.9"));
    assert_eq!(seen.header("x-client-acl"), Some("in"));

    let client = SocketAddr::new("2001:db8::7".parse::<Ipv6Addr>().unwrap().into(), 51000);
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&v2_header(client, "[2001:db8::1]:443".parse().unwrap(), &[]))
        .await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("2001:db8::7"));
    assert_eq!(seen.header("x-client-acl"), Some("in"));
}

#[tokio::test]
async fn proxy_v2_local_health_check_keeps_the_peer_address() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    // LOCAL: the load balancer's own connection. Addresses it may carry are not a client's.
    let mut local = v2_header(
        "203.0.113.5:40000".parse().unwrap(),
        "192.0.2.1:443".parse().unwrap(),
        &[],
    );
    local[12] = 0x20;
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&local).await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-client-acl"), Some("out"));

    // LOCAL with AF_UNSPEC and no addresses at all, as HAProxy's health checks send it.
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&v2_frame(0x20, 0x00, &[])).await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-client-acl"), Some("out"));
}

#[tokio::test]
async fn proxy_listener_closes_a_connection_without_the_header() {
    let log = CapturedLog::default();
    let _guard = log.install("edgecache_runtime=warn");
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    let mut conn = RawConn::connect(addr).await;
    // A client that reached the PROXY port directly could claim any address with a header
    // line of its own in a request: nothing of it is read as HTTP.
    conn.send(GET).await;
    assert!(
        conn.closed_by_peer(EXCHANGE_LIMIT).await,
        "closed without an answer"
    );
    assert_eq!(origin.requests(), 0);
    let text = log.text();
    assert_eq!(text.matches("PROXY listener").count(), 1, "one line: {text}");
    assert!(text.contains("no PROXY protocol header"), "{text}");

    // A bad header is refused the same way (logged at debug: the warning is once a minute).
    let mut conn = RawConn::connect(addr).await;
    conn.send("PROXY TCP4 203.0.113.7 not-an-address 1 2\r\n").await;
    conn.send(GET).await;
    assert!(conn.closed_by_peer(EXCHANGE_LIMIT).await);
    assert_eq!(origin.requests(), 0);
    assert_eq!(log.text().matches("PROXY listener").count(), 1, "rate-limited");
}

#[tokio::test]
async fn proxy_listener_closes_a_connection_whose_header_stalls() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    let mut conn = RawConn::connect(addr).await;
    conn.send("PROXY TCP4 203.0.113.7 ").await;
    let started = tokio::time::Instant::now();
    assert!(
        conn.closed_by_peer(EXCHANGE_LIMIT).await,
        "closed at --header-timeout"
    );
    assert!(started.elapsed() < EXCHANGE_LIMIT / 2);
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn plain_listener_answers_400_to_a_proxy_line() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let policy = write_policy("proxy_protocol_plain", POLICY);
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.policy = Some(policy)).await;
    let mut conn = RawConn::connect(addr).await;
    conn.send("PROXY TCP4 203.0.113.7 192.0.2.1 40000 8080\r\n").await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 400);
    assert_eq!(origin.requests(), 0, "the claimed client is never believed");
}

// === HAProxy in front ===

/// HAProxy (the Debian package) forwarding TCP from an ephemeral port to `backend` with
/// `send-proxy-v2`, from a configuration in a temporary directory. Stopped when dropped.
async fn start_haproxy(backend: SocketAddr) -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("edgecache-haproxy-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let addr = support::unused_port().await;
    let config = format!(
        "global\n  maxconn 64\n\
         defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 20s\n  timeout server 20s\n\
         listen front\n  bind {addr}\n  server edgecache {backend} send-proxy-v2\n"
    );
    let config_path = dir.path().join("haproxy.cfg");
    std::fs::write(&config_path, config).expect("write haproxy.cfg");
    let child = Daemon::spawn(
        Command::new("haproxy").arg("-db").arg("-f").arg(&config_path),
        "HAProxy in front of edgecache",
        "haproxy",
    );
    Daemon::listening("haproxy", child, addr, dir, None).await
}

#[tokio::test]
async fn haproxy_send_proxy_v2_in_front_sets_client_ip() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_proxy_listener(&origin).await;
    let haproxy = start_haproxy(addr).await;
    // From 127.0.0.2: HAProxy itself connects to edgecache from 127.0.0.1, so only the header
    // can tell edgecache who the client is.
    let mut conn = RawConn::connect_from(Ipv4Addr::new(127, 0, 0, 2).into(), haproxy.addr).await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.2"));
    assert_eq!(seen.header("x-client-acl"), Some("in"));
}
