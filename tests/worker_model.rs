//! `--worker-model reuseport`: a single-threaded runtime per `--threads` worker, each accepting on
//! its own `SO_REUSEPORT` socket of every listener. The kernel spreads connections over the
//! workers (seen in `edgecache_worker_connections_total{worker}`), the workers share the cache,
//! a policy or certificate reload and the health state, and a graceful shutdown drains every
//! one of them.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use edgecache_runtime::config::{CertificateFiles, ListenSpec, WorkerModel};
use edgecache_runtime::{Config, Running};
use http::StatusCode;
use rustls::pki_types::{CertificateDer, ServerName};
use support::tls::TestCa;
use support::*;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const WORKERS: usize = 2;
/// Connections per batch: all landing on one of two workers has a chance of 2 in 2^32.
const CONNECTIONS: usize = 32;

fn reuseport(config: &mut Config) {
    config.threads = Some(WORKERS);
    config.worker_model = WorkerModel::ReusePort;
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
}

/// `edgecache_worker_connections_total`, by worker number, from the admin API's `/metrics`.
async fn worker_connections(admin: SocketAddr) -> Vec<u64> {
    let reply = get(admin, "/metrics", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let scrape = prometheus_parse::Scrape::parse(reply.text().lines().map(|line| Ok(line.to_string())))
        .expect("/metrics parses");
    let mut counts: Vec<(usize, u64)> = scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == "edgecache_worker_connections_total")
        .map(|sample| {
            let worker = sample
                .labels
                .get("worker")
                .expect("a worker label")
                .parse()
                .unwrap();
            let prometheus_parse::Value::Counter(count) = sample.value else {
                panic!("a counter: {:?}", sample.value);
            };
            (worker, count as u64)
        })
        .collect();
    counts.sort();
    counts.into_iter().map(|(_, count)| count).collect()
}

/// Asserts every worker accepted some of the connections made since `before`.
async fn every_worker_accepted_since(admin: SocketAddr, before: &[u64], what: &str) -> Vec<u64> {
    let after = worker_connections(admin).await;
    assert_eq!(after.len(), WORKERS, "one series per worker");
    let accepted: Vec<u64> = after
        .iter()
        .zip(before)
        .map(|(after, before)| after - before)
        .collect();
    assert!(
        accepted.iter().all(|&count| count > 0),
        "{what}: connections by worker {accepted:?}"
    );
    after
}

/// `target` on `CONNECTIONS` fresh connections at once; the replies in order.
async fn on_fresh_connections(addr: SocketAddr, target: &str) -> Vec<Reply> {
    concurrently(CONNECTIONS, |_| get(addr, target, &[])).await
}

#[tokio::test]
async fn reuseport_workers_serve_every_connection_of_every_listener_from_one_cache() {
    let origin = Origin::fixed(OriginReply::ok("shared object").cache_control("max-age=60")).await;
    let (running, plain) = start_proxy(origin.addr, |config| {
        reuseport(config);
        // Another loopback address: the same address twice is refused, even with port 0.
        config.listen.push(ListenSpec {
            proxy_protocol: true,
            ..ListenSpec::from(SocketAddr::from(([127, 0, 0, 2], 0)))
        });
    })
    .await;
    let proxied = running.listen_addrs()[1];
    let admin = running.admin_addr().expect("the admin API, on the main thread");
    let start = worker_connections(admin).await;
    assert_eq!(start, vec![0; WORKERS], "one series per worker, from the start");

    assert_eq!(get(plain, "/object", &[]).await.cache(), "MISS");
    for reply in on_fresh_connections(plain, "/object").await {
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "shared object");
        assert_eq!(reply.cache(), "HIT", "every worker finds what one stored");
    }
    let counted = every_worker_accepted_since(admin, &start, "HTTP/1.1").await;
    assert_eq!(counted.iter().sum::<u64>(), 1 + CONNECTIONS as u64);

    let h2c = concurrently(CONNECTIONS, |_| async move {
        H2c::connect(plain).await.get("/object", &[]).await
    })
    .await;
    assert!(
        h2c.iter().all(|reply| reply.cache() == "HIT"),
        "h2c on the same sockets"
    );
    let counted = every_worker_accepted_since(admin, &counted, "h2c").await;

    let client = SocketAddr::from(([192, 0, 2, 7], 40000));
    let proxied_replies = concurrently(CONNECTIONS, |_| async move {
        let mut conn = RawConn::connect(proxied).await;
        conn.send_bytes(&support::proxy_protocol::v2_header(client, proxied, &[]))
            .await;
        // The plain listener's Host: the same object.
        conn.send(&format!(
            "GET /object HTTP/1.1\r\nHost: {plain}\r\nConnection: close\r\n\r\n"
        ))
        .await;
        conn.response(false).await
    })
    .await;
    assert!(
        proxied_replies
            .iter()
            .all(|reply| reply.status == 200 && reply.cache() == "HIT"),
        "the PROXY listener has a socket per worker too: {:?}",
        proxied_replies
            .iter()
            .map(|reply| (reply.status, reply.cache()))
            .collect::<Vec<_>>()
    );
    every_worker_accepted_since(admin, &counted, "PROXY protocol").await;
    assert_eq!(origin.requests(), 1, "one cache for all workers");
}

#[tokio::test]
async fn reuseport_shutdown_drains_in_flight_requests_on_every_worker() {
    const DRAIN: Duration = Duration::from_secs(1);
    // Longer than the drain: the listeners close while these are still in flight.
    let slow = DRAIN * 3;
    let origin = Origin::fixed(OriginReply::ok("slow page").cache_control("no-store").delay(slow)).await;
    let (running, addr) = start_proxy(origin.addr, |config| {
        reuseport(config);
        config.drain_time = DRAIN;
    })
    .await;
    let admin = running.admin_addr().expect("admin API");
    let in_flight = tokio::spawn(on_fresh_connections(addr, "/slow"));
    // The origin's log is the signal that every request is in flight (it answers after `slow`).
    poll_until(EXCHANGE_LIMIT, Duration::from_millis(5), || {
        match origin.requests() {
            CONNECTIONS => Ok(()),
            seen => Err(format!("the origin saw {seen} of {CONNECTIONS} requests")),
        }
    })
    .await;
    let counted = every_worker_accepted_since(admin, &[0; WORKERS], "the slow requests").await;

    let stopping = tokio::spawn(Running::shutdown(running));
    for reply in on_fresh_connections(addr, "/healthz").await {
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "every worker drains"
        );
    }
    every_worker_accepted_since(admin, &counted, "health checks while draining").await;

    let replies = tokio::time::timeout(EXCHANGE_LIMIT, in_flight)
        .await
        .expect("the slow requests end")
        .expect("the client task");
    let failed: Vec<_> = replies
        .iter()
        .filter(|reply| reply.status != StatusCode::OK || reply.text() != "slow page")
        .collect();
    assert!(
        failed.is_empty(),
        "requests in flight at shutdown failed: {failed:?}"
    );
    tokio::time::timeout(EXCHANGE_LIMIT, stopping)
        .await
        .expect("shutdown ends")
        .expect("shutdown task");
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no worker's socket still listens"
    );
}

#[tokio::test]
async fn reuseport_policy_reload_applies_on_every_worker() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let policy = |version: &str| {
        format!(
            "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\n\
             sub vcl_deliver {{ set resp.http.x-version = \"{version}\"; }}\n",
            origin.addr.ip(),
            origin.addr.port()
        )
    };
    let path = write_policy("reuseport-reload", &policy("A"));
    let (running, addr) = start_proxy(origin.addr, |config| {
        reuseport(config);
        config.policy = Some(path.clone());
        config.watch_policy = false;
    })
    .await;
    let admin = running.admin_addr().expect("admin API");
    let versions = |replies: Vec<Reply>| -> Vec<String> {
        replies
            .iter()
            .map(|reply| reply.header("x-version").unwrap_or("none").to_string())
            .collect()
    };
    assert_eq!(
        versions(on_fresh_connections(addr, "/").await),
        vec!["A"; CONNECTIONS]
    );
    let counted = every_worker_accepted_since(admin, &[0; WORKERS], "before the reload").await;

    std::fs::write(&path, policy("B")).unwrap();
    assert_eq!(running.reload().await.expect("B loads"), 2);
    assert_eq!(
        versions(on_fresh_connections(addr, "/").await),
        vec!["B"; CONNECTIONS],
        "no worker serves the old policy"
    );
    every_worker_accepted_since(admin, &counted, "after the reload").await;
}

/// The certificate `CONNECTIONS` fresh handshakes for a.test were shown, one per handshake.
async fn certificates_served(connector: &TlsConnector, addr: SocketAddr) -> Vec<CertificateDer<'static>> {
    concurrently(CONNECTIONS, |_| async move {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from("a.test").unwrap();
        let tls = tokio::time::timeout(EXCHANGE_LIMIT, connector.connect(name, tcp))
            .await
            .expect("a handshake in time")
            .expect("the handshake");
        tls.get_ref().1.peer_certificates().expect("a certificate")[0].clone()
    })
    .await
}

#[tokio::test]
async fn reuseport_certificate_reload_reaches_every_worker() {
    let ca = TestCa::new();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("a.pem");
    let first = ca.issue(&["a.test"]);
    std::fs::write(&path, first.combined_pem()).unwrap();
    let origin = Origin::fixed(OriginReply::ok("over tls")).await;
    let (running, addr) = start_proxy(origin.addr, |config| {
        reuseport(config);
        config.listen = vec![ListenSpec {
            tls: true,
            ..ListenSpec::from(SocketAddr::from(([127, 0, 0, 1], 0)))
        }];
        config.tls.certificates = vec![CertificateFiles {
            cert: path.clone(),
            key: None,
            names: Vec::new(),
        }];
        config.watch_policy = false;
    })
    .await;
    let admin = running.admin_addr().expect("admin API");
    let mut client = ca.client_config(&[]);
    // A resumed session would show the certificate of the handshake it resumes.
    client.resumption = rustls::client::Resumption::disabled();
    let connector = TlsConnector::from(std::sync::Arc::new(client));
    assert!(certificates_served(&connector, addr)
        .await
        .iter()
        .all(|seen| *seen == first.der));
    let counted = every_worker_accepted_since(admin, &[0; WORKERS], "TLS handshakes").await;

    let second = ca.issue(&["a.test"]);
    std::fs::write(&path, second.combined_pem()).unwrap();
    running.reload_certificates().await.expect("the new pair loads");
    assert!(
        certificates_served(&connector, addr)
            .await
            .iter()
            .all(|seen| *seen == second.der),
        "no worker shows the old certificate"
    );
    every_worker_accepted_since(admin, &counted, "TLS handshakes after the reload").await;
}
