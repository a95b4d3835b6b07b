//! The origin pool against real origins on 127.0.0.1:0: reuse, the idle bound,
//! `.max_connections`, and an origin that closes a kept-alive connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::{timeout, Instant};

use super::super::addresses::Addresses;
use super::super::connector::OriginConnector;
use super::super::tests::{get, options, read_head};
use super::super::{Backend, FailureKind, Stage};
use super::Pool;

/// Bounds every wait on the origin or the pool.
const LIMIT: Duration = Duration::from_secs(5);

/// Answers each request on a connection with `200 ok` (kept alive, or closed after the first
/// when `close_after_one`); counts connections and requests and reports each connection's end.
struct KeepAliveOrigin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// The time each connection saw the client close it (or closed it itself).
    closed: mpsc::UnboundedReceiver<Instant>,
    /// One event per request read.
    arrived: mpsc::UnboundedReceiver<()>,
    /// With `hold`: each response waits for a permit.
    release: Arc<Semaphore>,
}

impl KeepAliveOrigin {
    async fn start(close_after_one: bool, hold: bool) -> KeepAliveOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Semaphore::new(0));
        let (ended, closed) = mpsc::unbounded_channel();
        let (arrival, arrived) = mpsc::unbounded_channel();
        tokio::spawn({
            let (connections, requests, release) = (connections.clone(), requests.clone(), release.clone());
            async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    let (requests, release) = (requests.clone(), release.clone());
                    let (ended, arrival) = (ended.clone(), arrival.clone());
                    tokio::spawn(async move {
                        while read_head(&mut stream).await.is_some() {
                            requests.fetch_add(1, Ordering::SeqCst);
                            let _ = arrival.send(());
                            if hold {
                                release.acquire().await.unwrap().forget();
                            }
                            let reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                            if stream.write_all(reply.as_bytes()).await.is_err() || close_after_one {
                                break;
                            }
                        }
                        let _ = ended.send(Instant::now());
                    });
                }
            }
        });
        KeepAliveOrigin {
            addr,
            connections,
            requests,
            closed,
            arrived,
            release,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn fetch_ok(backend: &Backend, path: &str) {
    let response = timeout(LIMIT, backend.send(get(path))).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let body = timeout(LIMIT, response.into_body().collect())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&body.to_bytes()[..], b"ok");
}

#[tokio::test]
async fn one_origin_connection_serves_sequential_requests() {
    let origin = KeepAliveOrigin::start(false, false).await;
    let backend = Backend::new("b", &origin.addr.to_string(), options(None, None)).unwrap();
    for n in 0..5 {
        fetch_ok(&backend, &format!("/{n}")).await;
    }
    assert_eq!(origin.requests.load(Ordering::SeqCst), 5);
    assert_eq!(
        origin.connections(),
        1,
        "each request after the first reused the connection"
    );
}

#[tokio::test]
async fn an_idle_origin_connection_is_closed_after_the_idle_timeout() {
    let mut origin = KeepAliveOrigin::start(false, false).await;
    let addresses = Addresses::resolve("127.0.0.1", origin.addr.port(), &Default::default()).unwrap();
    let connector = OriginConnector::new("b", addresses, LIMIT, None);
    let idle_timeout = Duration::from_millis(300);
    let pool = Arc::new(Pool::with_idle_timeout(
        connector,
        origin_uri(origin.addr),
        idle_timeout,
    ));

    let response = timeout(LIMIT, pool.clone().send(get("/")))
        .await
        .unwrap()
        .unwrap();
    response.into_body().collect().await.unwrap();
    let idle_since = Instant::now();
    assert_eq!(pool.idle(), 1, "the connection is kept after its response");

    let closed = timeout(LIMIT, origin.closed.recv())
        .await
        .expect("closed in time")
        .unwrap();
    assert!(
        closed - idle_since >= idle_timeout,
        "closed after {:?} idle, before the idle timeout",
        closed - idle_since
    );
    assert_eq!(pool.idle(), 0);
}

#[tokio::test]
async fn max_connections_refuses_the_extra_concurrent_request_and_the_pool_reuses_the_rest() {
    let mut origin = KeepAliveOrigin::start(false, true).await;
    let backend = Backend::new("b", &origin.addr.to_string(), options(Some(2), None)).unwrap();
    let first = tokio::spawn({
        let backend = backend.clone();
        async move { fetch_ok(&backend, "/1").await }
    });
    let second = tokio::spawn({
        let backend = backend.clone();
        async move { fetch_ok(&backend, "/2").await }
    });
    for _ in 0..2 {
        timeout(LIMIT, origin.arrived.recv()).await.unwrap().unwrap();
    }
    let Err(error) = backend.send(get("/3")).await else {
        panic!("a third request was sent with two in flight and max_connections 2")
    };
    assert_eq!((error.stage, error.kind), (Stage::Connect, FailureKind::Down));
    assert_eq!(error.detail, "max_connections (2) reached");

    assert_eq!(
        origin.requests.load(Ordering::SeqCst),
        2,
        "the third never reached the origin"
    );

    origin.release.add_permits(3);
    timeout(LIMIT, first).await.unwrap().unwrap();
    timeout(LIMIT, second).await.unwrap().unwrap();
    fetch_ok(&backend, "/4").await;
    assert_eq!(
        origin.connections(),
        2,
        "the fourth request reused an idle connection"
    );
}

#[tokio::test]
async fn an_origin_closing_a_kept_alive_connection_gets_the_next_request_on_a_new_one() {
    let mut origin = KeepAliveOrigin::start(true, false).await;
    let backend = Backend::new("b", &origin.addr.to_string(), options(None, None)).unwrap();
    fetch_ok(&backend, "/1").await;
    // The response did not say `Connection: close`: the connection went back to the pool.
    timeout(LIMIT, origin.closed.recv()).await.unwrap().unwrap();
    fetch_ok(&backend, "/2").await;
    assert_eq!(origin.connections(), 2);
    assert_eq!(origin.requests.load(Ordering::SeqCst), 2);
    assert_eq!(backend.stats().failures.load(Ordering::SeqCst), 0);
}

fn origin_uri(addr: SocketAddr) -> http::Uri {
    format!("http://{addr}/").parse().unwrap()
}
