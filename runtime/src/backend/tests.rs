//! Backends against real origins on 127.0.0.1:0: probes, in-flight accounting,
//! `.max_connections`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use parking_lot::Mutex;
use policy_lang::ProbeDecl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{probe, Backend, BackendOptions, FailureKind, OutgoingBody, Stage};
use crate::config::BackendTimeouts;

const INTERVAL: Duration = Duration::from_millis(50);

fn probe_decl(window: u32, threshold: u32, initial: u32) -> ProbeDecl {
    ProbeDecl {
        name: None,
        url: "/health".into(),
        request: None,
        expected_response: 200,
        timeout: Duration::from_millis(500),
        interval: INTERVAL,
        window,
        threshold,
        initial,
    }
}

pub(super) fn options(max_connections: Option<u32>, probe: Option<ProbeDecl>) -> BackendOptions {
    BackendOptions {
        timeouts: BackendTimeouts {
            connect: Duration::from_secs(1),
            first_byte: Duration::from_secs(5),
            between_bytes: Duration::from_secs(5),
        },
        max_connections,
        probe,
        host_header: None,
        tls: None,
        proxy_header: None,
        dns: Default::default(),
    }
}

pub(super) fn get(path: &str) -> http::Request<OutgoingBody> {
    let body = Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    http::Request::get(path).body(body).unwrap()
}

/// Polls `condition` every 10 ms until it holds. The prober runs in the background with no
/// signal to await, so this is the documented last resort; it gives up after 40 probe intervals
/// (2 s), which only a stuck prober or a very loaded machine reaches.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + INTERVAL * 40;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads one request head (up to the blank line).
pub(super) async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

// === a probe target ===

/// Answers every request with `status` and closes; records the request heads.
struct ProbeOrigin {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    heads: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl ProbeOrigin {
    async fn start(status: u16) -> ProbeOrigin {
        ProbeOrigin::start_on("127.0.0.1:0".parse().unwrap(), status).await
    }

    async fn start_on(addr: SocketAddr, status: u16) -> ProbeOrigin {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let status = Arc::new(AtomicU16::new(status));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (status, heads) = (status.clone(), heads.clone());
            async move {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (status, heads) = (status.clone(), heads.clone());
                    tokio::spawn(async move {
                        let Some(head) = read_head(&mut stream).await else {
                            return;
                        };
                        heads.lock().push(head);
                        let status = status.load(Ordering::SeqCst);
                        let reply =
                            format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        let _ = stream.write_all(reply.as_bytes()).await;
                    });
                }
            }
        });
        ProbeOrigin {
            addr,
            status,
            heads,
            task,
        }
    }

    /// Closes the listener (later connections are refused) and returns its address.
    async fn stop(self) -> SocketAddr {
        self.task.abort();
        let _ = self.task.await;
        self.addr
    }
}

#[tokio::test]
async fn a_probe_marks_a_backend_sick_on_bad_statuses_and_healthy_again() {
    let origin = ProbeOrigin::start(200).await;
    let backend = Backend::new(
        "b",
        &origin.addr.to_string(),
        options(None, Some(probe_decl(3, 2, 2))),
    )
    .unwrap();
    assert!(backend.healthy(), "initial 2 >= threshold 2");
    eventually("a good probe", || {
        backend.stats().probes_good.load(Ordering::SeqCst) > 0
    })
    .await;

    origin.status.store(500, Ordering::SeqCst);
    eventually("sick", || !backend.healthy()).await;
    let report = backend.health().unwrap();
    assert_eq!(report.last_failure.as_deref(), Some("status 500"));
    assert!(report.good < 2 && report.bits.ends_with("--"), "{report:?}");
    assert!(backend.stats().probes_bad.load(Ordering::SeqCst) >= 2);

    origin.status.store(200, Ordering::SeqCst);
    eventually("healthy again", || backend.healthy()).await;
    assert!(backend.health().unwrap().bits.ends_with("HH"));

    let head = origin.heads.lock()[0].clone();
    let host = origin.addr.ip();
    assert_eq!(
        head,
        format!("GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        "Varnish's default probe request"
    );
}

#[tokio::test]
async fn probes_send_the_host_header_of_the_backend() {
    let origin = ProbeOrigin::start(200).await;
    let with_host = BackendOptions {
        host_header: Some("www.example.com".into()),
        ..options(None, Some(probe_decl(3, 2, 2)))
    };
    let _backend = Backend::new("b", &origin.addr.to_string(), with_host).unwrap();
    eventually("a probe", || !origin.heads.lock().is_empty()).await;
    let head = origin.heads.lock()[0].clone();
    assert!(head.contains("\r\nHost: www.example.com\r\n"), "{head}");

    let broken = BackendOptions {
        host_header: Some("bad\nhost".into()),
        ..options(None, None)
    };
    let error = Backend::new("b", "127.0.0.1:1", broken).err().unwrap();
    assert!(error.contains(".host_header"), "{error}");
}

#[tokio::test]
async fn a_closed_listener_makes_a_backend_sick_until_it_listens_again() {
    let origin = ProbeOrigin::start(200).await;
    let backend = Backend::new(
        "b",
        &origin.addr.to_string(),
        options(None, Some(probe_decl(4, 3, 4))),
    )
    .unwrap();
    eventually("a good probe", || {
        backend.stats().probes_good.load(Ordering::SeqCst) > 0
    })
    .await;
    assert!(backend.healthy());

    let addr = origin.stop().await;
    eventually("sick", || !backend.healthy()).await;
    let report = backend.health().unwrap();
    assert_eq!(report.last_failure.as_deref(), Some("connection refused"));
    assert!(
        report.good < 3,
        "sick once fewer than 3 of the last 4 are good: {report:?}"
    );

    let _origin = ProbeOrigin::start_on(addr, 200).await;
    eventually("healthy again", || backend.healthy()).await;
    assert!(backend.health().unwrap().good >= 3);
}

#[tokio::test]
async fn a_backend_whose_initial_is_below_threshold_starts_sick() {
    let origin = ProbeOrigin::start(200).await;
    let backend = Backend::new(
        "b",
        &origin.addr.to_string(),
        options(None, Some(probe_decl(8, 3, 2))),
    )
    .unwrap();
    // The test runtime is single-threaded: the probe task has not run yet.
    assert!(!backend.healthy());
    let report = backend.health().unwrap();
    assert_eq!((report.good, report.bits.as_str()), (2, "------HH"));
    eventually("healthy after one good probe", || backend.healthy()).await;
}

#[tokio::test]
async fn a_silent_origin_fails_the_probe_with_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            open.push(stream);
        }
    });
    let mut decl = probe_decl(1, 1, 1);
    decl.timeout = Duration::from_millis(30);
    let backend = Backend::new("b", &addr.to_string(), options(None, Some(decl))).unwrap();
    eventually("sick", || !backend.healthy()).await;
    assert_eq!(backend.health().unwrap().last_failure.as_deref(), Some("timeout"));
    held.abort();
}

#[tokio::test]
async fn probe_request_lines_are_sent_as_given() {
    let origin = ProbeOrigin::start(204).await;
    let mut decl = probe_decl(1, 1, 0);
    decl.expected_response = 204;
    decl.request = Some(vec![
        "HEAD /ping HTTP/1.1".into(),
        "Host: example.com".into(),
        "Connection: close".into(),
    ]);
    let backend = Backend::new("b", &origin.addr.to_string(), options(None, Some(decl))).unwrap();
    eventually("healthy", || backend.healthy()).await;
    assert_eq!(
        origin.heads.lock()[0],
        "HEAD /ping HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn status_lines_are_parsed() {
    let cases: [(&[u8], Option<u16>); 6] = [
        (b"HTTP/1.1 200 OK\r\n", Some(200)),
        (b"HTTP/1.0 503 Service Unavailable\r\n", Some(503)),
        (b"HTTP/1.1 204\r\n", Some(204)),
        (b"HTTP/1.1 20 OK\r\n", None),
        (b"SSH-2.0-OpenSSH\r\n", None),
        (b"HTTP/1.1 200 OK", None),
    ];
    for (line, expected) in cases {
        assert_eq!(probe::status(line), expected, "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn a_probed_backend_needs_a_runtime() {
    let error = Backend::new("b", "127.0.0.1:1", options(None, Some(probe_decl(8, 3, 2)))).err();
    assert!(error.unwrap().contains("tokio runtime"));
    assert!(Backend::new("b", "127.0.0.1:1", options(None, None)).is_ok());
}

#[tokio::test]
async fn the_probe_stops_with_the_last_clone() {
    let origin = ProbeOrigin::start(200).await;
    let backend = Backend::new(
        "b",
        &origin.addr.to_string(),
        options(None, Some(probe_decl(3, 1, 1))),
    )
    .unwrap();
    let clone = backend.clone();
    drop(backend);
    eventually("two probes", || origin.heads.lock().len() >= 2).await;
    drop(clone);
    // Aborted tasks stop at their next await; let one interval pass twice and count.
    tokio::time::sleep(INTERVAL).await;
    let seen = origin.heads.lock().len();
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        origin.heads.lock().len(),
        seen,
        "no probe after the last clone is dropped"
    );
}

// === in-flight accounting and max_connections ===

/// Answers each request with a 5-byte body, sending the last 3 bytes only once `release` is
/// notified; counts requests.
struct SlowOrigin {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    release: Arc<Notify>,
}

impl SlowOrigin {
    async fn start() -> SlowOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        tokio::spawn({
            let (requests, release) = (requests.clone(), release.clone());
            async move {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let (requests, release) = (requests.clone(), release.clone());
                    tokio::spawn(async move {
                        while read_head(&mut stream).await.is_some() {
                            requests.fetch_add(1, Ordering::SeqCst);
                            let head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe";
                            if stream.write_all(head.as_bytes()).await.is_err() {
                                return;
                            }
                            release.notified().await;
                            if stream.write_all(b"llo").await.is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        SlowOrigin {
            addr,
            requests,
            release,
        }
    }
}

#[tokio::test]
async fn in_flight_counts_a_request_until_its_body_completes() {
    let origin = SlowOrigin::start().await;
    let backend = Backend::new("b", &origin.addr.to_string(), options(None, None)).unwrap();
    assert_eq!(backend.in_flight(), 0);

    let response = backend.send(get("/a")).await.unwrap();
    assert_eq!(backend.in_flight(), 1, "the head arrived, the body has not");
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"he");
    assert_eq!(backend.in_flight(), 1, "part of the body arrived");
    origin.release.notify_one();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"llo");
    assert_eq!(backend.in_flight(), 0, "the body ended");

    // A body dropped unread releases its request too.
    let response = backend.send(get("/b")).await.unwrap();
    assert_eq!(backend.in_flight(), 1);
    drop(response);
    assert_eq!(backend.in_flight(), 0);
    origin.release.notify_one();

    // So does a failed request.
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let gone = Backend::new("gone", &dead_addr.to_string(), options(None, None)).unwrap();
    assert!(gone.send(get("/")).await.is_err());
    assert_eq!(gone.in_flight(), 0);
}

#[tokio::test]
async fn max_connections_refuses_the_extra_request_without_contacting_the_origin() {
    let origin = SlowOrigin::start().await;
    let backend = Backend::new("b", &origin.addr.to_string(), options(Some(1), None)).unwrap();

    let first = backend.send(get("/1")).await.unwrap();
    let Err(error) = backend.send(get("/2")).await else {
        panic!("a second request was sent")
    };
    assert_eq!((error.stage, error.kind), (Stage::Connect, FailureKind::Down));
    assert_eq!(error.detail, "max_connections (1) reached");
    assert_eq!(
        origin.requests.load(Ordering::SeqCst),
        1,
        "the origin saw one request"
    );
    assert_eq!(backend.stats().refused.load(Ordering::SeqCst), 1);
    assert_eq!(backend.stats().failures.load(Ordering::SeqCst), 0);

    origin.release.notify_one();
    first.into_body().collect().await.unwrap();
    let third = backend.send(get("/3")).await.unwrap();
    assert_eq!(origin.requests.load(Ordering::SeqCst), 2);
    origin.release.notify_one();
    third.into_body().collect().await.unwrap();
    assert_eq!(backend.in_flight(), 0);
}
