//! TLS termination on `,tls` listeners: certificates by SNI, ALPN, caching over TLS, hot
//! reload of certificate files, and what bad clients get. A test CA is made with rcgen in each
//! test; the client is tokio-rustls + hyper, trusting only that CA.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use edgecache_runtime::config::{CertificateFiles, ListenSpec};
use edgecache_runtime::Running;
use http::{Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use support::tls::TestCa;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

// === the test CA's clients ===

/// Client settings trusting only `ca`, offering `alpn`. Without session resumption: a resumed
/// session shows the certificate of the handshake it resumes, not the one served now.
fn client_config(ca: &TestCa, alpn: &[&[u8]]) -> rustls::ClientConfig {
    let mut config = ca.client_config(alpn);
    config.resumption = rustls::client::Resumption::disabled();
    config
}

fn client(ca: &TestCa, alpn: &[&[u8]]) -> TlsConnector {
    TlsConnector::from(Arc::new(client_config(ca, alpn)))
}

// === files and the proxy ===

/// A fresh directory under Cargo's integration-test temp dir.
fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Writes `text` to `dir/name` through a temporary file renamed over it, as deployment tools
/// and `mv` do.
fn rename_over(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    let staging = dir.join(format!(".{name}.tmp"));
    std::fs::write(&staging, text).unwrap();
    std::fs::rename(&staging, &path).unwrap();
    path
}

fn pair(cert: PathBuf, key: Option<PathBuf>, names: &[&str]) -> CertificateFiles {
    CertificateFiles {
        cert,
        key,
        names: names.iter().map(|name| name.to_string()).collect(),
    }
}

/// edgecache with one `,tls` listener on 127.0.0.1:0 in front of `origin`.
async fn start_tls_proxy(
    origin: SocketAddr,
    tweak: impl FnOnce(&mut edgecache_runtime::Config),
) -> (Running, SocketAddr) {
    start_proxy(origin, |config| {
        config.listen = vec![tls_listener()];
        tweak(config);
    })
    .await
}

/// A `,tls` listener on 127.0.0.1:0.
fn tls_listener() -> ListenSpec {
    ListenSpec {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        proxy_protocol: false,
        tls: true,
    }
}

/// A proxy serving one certificate for a.test (chain and key in one file) in front of
/// [`cacheable_origin`].
struct ServingATest {
    ca: TestCa,
    origin: Origin,
    running: Running,
    addr: SocketAddr,
    /// Holds the certificate file for as long as the proxy may reload it.
    _dir: tempfile::TempDir,
}

async fn serving_a_test(tweak: impl FnOnce(&mut edgecache_runtime::Config)) -> ServingATest {
    let ca = TestCa::new();
    let leaf = ca.issue(&["a.test"]);
    let dir = temp_dir();
    let both = rename_over(dir.path(), "a.pem", &leaf.combined_pem());
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.certificates = vec![pair(both, None, &[])];
        tweak(config);
    })
    .await;
    ServingATest {
        ca,
        origin,
        running,
        addr,
        _dir: dir,
    }
}

async fn cacheable_origin() -> Origin {
    Origin::fixed(OriginReply::ok("over tls").cache_control("max-age=60")).await
}

// === the client side ===

async fn handshake(
    connector: &TlsConnector,
    addr: SocketAddr,
    name: &str,
) -> Result<TlsStream<TcpStream>, std::io::Error> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_string()).unwrap();
    tokio::time::timeout(EXCHANGE_LIMIT, connector.connect(name, tcp))
        .await
        .expect("a handshake in time")
}

fn leaf_seen(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("a server certificate")[0]
        .clone()
}

/// The certificate a handshake for `name` is shown.
async fn leaf_served(connector: &TlsConnector, addr: SocketAddr, name: &str) -> CertificateDer<'static> {
    leaf_seen(&handshake(connector, addr, name).await.unwrap())
}

fn alpn(stream: &TlsStream<TcpStream>) -> Option<Vec<u8>> {
    stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}

/// What a request over TLS got.
struct Answer {
    status: StatusCode,
    version: Version,
    cache: String,
    body: String,
}

/// A hyper connection over an established TLS stream, HTTP/2 when ALPN chose `h2`.
enum Connection {
    H1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Connection {
    async fn open(stream: TlsStream<TcpStream>) -> Connection {
        let h2 = alpn(&stream).as_deref() == Some(b"h2");
        let io = TokioIo::new(stream);
        if h2 {
            let (send, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("h2 handshake");
            tokio::spawn(connection);
            Connection::H2(send)
        } else {
            let (send, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("h1 handshake");
            tokio::spawn(connection);
            Connection::H1(send)
        }
    }

    async fn get(&mut self, path: &str) -> Answer {
        let exchange = async {
            let response = match self {
                Connection::H1(send) => {
                    let request = Request::get(path)
                        .header("host", "a.test")
                        .body(Empty::new())
                        .unwrap();
                    send.send_request(request).await
                }
                Connection::H2(send) => {
                    let request = Request::get(format!("https://a.test{path}"))
                        .version(Version::HTTP_2)
                        .body(Empty::new())
                        .unwrap();
                    send.send_request(request).await
                }
            }
            .expect("a response");
            let status = response.status();
            let version = response.version();
            let cache = response
                .headers()
                .get("x-cache")
                .map(|value| value.to_str().unwrap().to_string())
                .unwrap_or_default();
            let body = response.into_body().collect().await.expect("a body").to_bytes();
            Answer {
                status,
                version,
                cache,
                body: String::from_utf8_lossy(&body).into_owned(),
            }
        };
        tokio::time::timeout(EXCHANGE_LIMIT, exchange)
            .await
            .expect("an answer in time")
    }
}

/// Connects until a handshake shows `wanted`. The watcher swaps certificates some
/// milliseconds after the rename (its debounce), and nothing outside the process signals that
/// moment, so this polls, bounded by `EXCHANGE_LIMIT`.
async fn eventually_serves(
    connector: &TlsConnector,
    addr: SocketAddr,
    name: &str,
    wanted: &CertificateDer<'_>,
) {
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    loop {
        // Until then the handshake may fail: the old certificate need not cover `name`.
        if let Ok(stream) = handshake(connector, addr, name).await {
            if leaf_seen(&stream) == *wanted {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// === tests ===

#[tokio::test]
async fn each_sni_name_gets_its_own_certificate_and_others_the_default() {
    let ca = TestCa::new();
    let (a, b, default) = (
        ca.issue(&["a.test"]),
        ca.issue(&["b.test"]),
        ca.issue(&["default.test"]),
    );
    let dir = temp_dir();
    std::fs::write(dir.path().join("a.test.pem"), a.combined_pem()).unwrap();
    std::fs::write(dir.path().join("b.test.pem"), b.combined_pem()).unwrap();
    let default_cert = rename_over(dir.path(), "default.crt", &default.cert_pem);
    let default_key = rename_over(dir.path(), "default.key", &default.key_pem);
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.dir = Some(dir.path().to_path_buf());
        config.tls.certificates = vec![pair(default_cert, Some(default_key), &[])];
    })
    .await;
    let client = client(&ca, &[b"http/1.1"]);
    for (name, leaf) in [("a.test", &a), ("b.test", &b), ("unknown.test", &default)] {
        // The client checks the certificate against the name, so `unknown.test` is expected
        // to fail verification: it proves the default was sent by failing on its name.
        match handshake(&client, addr, name).await {
            Ok(stream) => assert_eq!(leaf_seen(&stream), leaf.der, "{name}"),
            Err(error) => {
                assert_eq!(name, "unknown.test", "{error}");
                assert!(error.to_string().contains("certificate"), "{error}");
            }
        }
    }
    // No SNI at all: the default certificate, which is valid for default.test.
    let mut no_sni = client_config(&ca, &[]);
    no_sni.enable_sni = false;
    let stream = handshake(&TlsConnector::from(Arc::new(no_sni)), addr, "default.test")
        .await
        .expect("a handshake without SNI");
    assert_eq!(leaf_seen(&stream), default.der);
    running.shutdown().await;
}

#[tokio::test]
async fn h2_is_negotiated_by_alpn_and_served_from_cache() {
    let served = serving_a_test(|_| {}).await;
    let stream = handshake(&client(&served.ca, &[b"h2", b"http/1.1"]), served.addr, "a.test")
        .await
        .unwrap();
    assert_eq!(alpn(&stream).as_deref(), Some(&b"h2"[..]));
    let mut h2 = Connection::open(stream).await;
    let first = h2.get("/h2").await;
    assert_eq!((first.status, first.version), (StatusCode::OK, Version::HTTP_2));
    assert_eq!((first.cache.as_str(), first.body.as_str()), ("MISS", "over tls"));
    eventually_stored(&served.running, 1).await;
    let second = h2.get("/h2").await;
    assert_eq!((second.cache.as_str(), second.version), ("HIT", Version::HTTP_2));
    assert_eq!(served.origin.requests(), 1);
    served.running.shutdown().await;
}

#[tokio::test]
async fn http1_over_tls_is_served_from_cache() {
    let ca = TestCa::new();
    let leaf = ca.issue(&["a.test"]);
    let dir = temp_dir();
    let cert = rename_over(dir.path(), "a.crt", &leaf.cert_pem);
    let key = rename_over(dir.path(), "a.key", &leaf.key_pem);
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.certificates = vec![pair(cert, Some(key), &[])];
    })
    .await;
    let stream = handshake(&client(&ca, &[b"http/1.1"]), addr, "a.test")
        .await
        .unwrap();
    assert_eq!(alpn(&stream).as_deref(), Some(&b"http/1.1"[..]));
    let mut h1 = Connection::open(stream).await;
    let first = h1.get("/h1").await;
    assert_eq!((first.status, first.version), (StatusCode::OK, Version::HTTP_11));
    assert_eq!(first.cache, "MISS");
    eventually_stored(&running, 1).await;
    assert_eq!(h1.get("/h1").await.cache, "HIT");
    // A client that offers no ALPN at all gets HTTP/1.1 too.
    let bare = handshake(&client(&ca, &[]), addr, "a.test").await.unwrap();
    assert_eq!(alpn(&bare), None);
    let answer = Connection::open(bare).await.get("/h1").await;
    assert_eq!((answer.cache.as_str(), answer.body.as_str()), ("HIT", "over tls"));
    assert_eq!(origin.requests(), 1);
    running.shutdown().await;
}

#[tokio::test]
async fn a_certificate_renamed_over_serves_new_handshakes_and_open_connections_keep_going() {
    let ca = TestCa::new();
    let (old, new) = (ca.issue(&["a.test"]), ca.issue(&["a.test"]));
    let dir = temp_dir();
    let both = rename_over(dir.path(), "a.pem", &old.combined_pem());
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.certificates = vec![pair(both, None, &["a.test"])];
    })
    .await;
    let client = client(&ca, &[b"http/1.1"]);
    let kept = handshake(&client, addr, "a.test").await.unwrap();
    assert_eq!(leaf_seen(&kept), old.der);
    let mut kept = Connection::open(kept).await;
    assert_eq!(kept.get("/kept").await.status, StatusCode::OK);

    rename_over(dir.path(), "a.pem", &new.combined_pem());
    eventually_serves(&client, addr, "a.test", &new.der).await;

    let again = kept.get("/kept").await;
    assert_eq!((again.status, again.body.as_str()), (StatusCode::OK, "over tls"));
    running.shutdown().await;
}

#[tokio::test]
async fn a_broken_or_mismatched_key_is_refused_naming_the_file_and_the_old_certificate_serves() {
    let ca = TestCa::new();
    let (old, other) = (ca.issue(&["a.test"]), ca.issue(&["a.test"]));
    let dir = temp_dir();
    let cert = rename_over(dir.path(), "a.crt", &old.cert_pem);
    let key = rename_over(dir.path(), "a.key", &old.key_pem);
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.certificates = vec![pair(cert.clone(), Some(key.clone()), &[])];
        // The explicit reloads below are the ones under test.
        config.watch_policy = false;
    })
    .await;
    let client = client(&ca, &[b"http/1.1"]);

    rename_over(
        dir.path(),
        "a.key",
        "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
    );
    let error = running.reload_certificates().await.unwrap_err();
    assert!(error.contains(&key.display().to_string()), "{error}");
    assert!(error.contains("private key"), "{error}");
    assert_eq!(leaf_served(&client, addr, "a.test").await, old.der);

    // A new certificate with the old key: a pair that does not belong together.
    rename_over(dir.path(), "a.key", &old.key_pem);
    rename_over(dir.path(), "a.crt", &other.cert_pem);
    let error = running.reload_certificates().await.unwrap_err();
    assert!(error.contains("does not belong to the certificate"), "{error}");
    assert!(error.contains(&cert.display().to_string()), "{error}");
    let stream = handshake(&client, addr, "a.test").await.unwrap();
    assert_eq!(leaf_seen(&stream), old.der);
    assert_eq!(
        Connection::open(stream).await.get("/").await.status,
        StatusCode::OK
    );

    // Fixed: the next reload takes it.
    rename_over(dir.path(), "a.key", &other.key_pem);
    running.reload_certificates().await.unwrap();
    assert_eq!(leaf_served(&client, addr, "a.test").await, other.der);
    running.shutdown().await;
}

#[tokio::test]
async fn a_broken_certificate_at_start_is_fatal_and_names_the_file() {
    let dir = temp_dir();
    let cert = rename_over(dir.path(), "a.crt", "not a certificate\n");
    let origin = cacheable_origin().await;
    let config = edgecache_runtime::Config {
        listen: vec![tls_listener()],
        backend: Some(origin.addr.to_string()),
        tls: edgecache_runtime::config::TlsSettings {
            certificates: vec![pair(cert.clone(), None, &[])],
            ..Default::default()
        },
        ..edgecache_runtime::Config::default()
    };
    let error = edgecache_runtime::start(config)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains(&cert.display().to_string()), "{error}");
    assert!(error.contains("no certificate"), "{error}");
}

#[tokio::test]
async fn plain_http_on_the_tls_port_gets_nginx_s_400_and_a_close() {
    let served = serving_a_test(|_| {}).await;
    let mut raw = RawConn::connect(served.addr).await;
    raw.send("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n").await;
    let response = raw.response(false).await;
    assert_eq!(response.status, 400);
    let body = String::from_utf8_lossy(&response.body);
    assert!(
        body.contains("plain HTTP request was sent to HTTPS port"),
        "{body}"
    );
    assert!(raw.closed_by_peer(EXCHANGE_LIMIT).await);
    assert_eq!(served.origin.requests(), 0);
    served.running.shutdown().await;
}

#[tokio::test]
async fn a_stalled_handshake_is_closed_at_the_timeout_and_other_clients_are_served() {
    let served = serving_a_test(|config| {
        config.tls.handshake_timeout = Duration::from_secs(1);
    })
    .await;
    let started = tokio::time::Instant::now();
    // The first bytes of a TLS record header, then nothing.
    let mut stalled = TcpStream::connect(served.addr).await.unwrap();
    stalled.write_all(&[0x16, 0x03]).await.unwrap();
    // A client whose handshake is garbage fails alone.
    let mut garbage = TcpStream::connect(served.addr).await.unwrap();
    garbage
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .await
        .unwrap();
    assert!(
        closed(&mut garbage, EXCHANGE_LIMIT).await,
        "a bad handshake is closed"
    );
    // Meanwhile a good client is served.
    let good = handshake(&client(&served.ca, &[b"h2"]), served.addr, "a.test")
        .await
        .unwrap();
    assert_eq!(Connection::open(good).await.get("/").await.status, StatusCode::OK);
    assert!(
        closed(&mut stalled, EXCHANGE_LIMIT).await,
        "the stalled handshake is closed"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "closed after {waited:?}, before the timeout"
    );
    served.running.shutdown().await;
}

/// Whether the peer closed `stream` within `within` (bytes it sends first, such as a TLS
/// alert, are read and skipped).
async fn closed(stream: &mut TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn a_returning_client_resumes_its_session_with_tls13_and_tls12() {
    let served = serving_a_test(|_| {}).await;
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(served.ca.roots())
                .with_no_client_auth();
        let client = TlsConnector::from(Arc::new(config));
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let stream = handshake(&client, served.addr, "a.test").await.unwrap();
            kinds.push(stream.get_ref().1.handshake_kind());
            // TLS 1.3 tickets arrive after the handshake: a request reads them.
            assert_eq!(
                Connection::open(stream).await.get("/").await.status,
                StatusCode::OK
            );
        }
        use rustls::HandshakeKind::{Full, Resumed};
        assert_eq!(kinds, [Some(Full), Some(Resumed)], "{version:?}");
    }
    served.running.shutdown().await;
}

#[tokio::test]
async fn a_file_added_to_the_tls_dir_serves_its_name_without_a_restart() {
    let ca = TestCa::new();
    let (default, added) = (ca.issue(&["default.test"]), ca.issue(&["c.test"]));
    let dir = temp_dir();
    rename_over(dir.path(), "default.pem", &default.combined_pem());
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.dir = Some(dir.path().to_path_buf());
    })
    .await;
    let client = client(&ca, &[b"http/1.1"]);
    // Before: c.test gets the default certificate, which the client refuses for that name.
    assert!(handshake(&client, addr, "c.test").await.is_err());
    rename_over(dir.path(), "c.test.pem", &added.combined_pem());
    eventually_serves(&client, addr, "c.test", &added.der).await;
    running.shutdown().await;
}

#[tokio::test]
async fn a_symlink_swapped_as_configmaps_do_serves_the_new_certificate() {
    let ca = TestCa::new();
    let (old, new) = (ca.issue(&["a.test"]), ca.issue(&["a.test"]));
    let dir = temp_dir();
    // Kubernetes' layout: `tls.pem -> ..data/tls.pem`, `..data -> ..v1`; an update writes
    // `..v2` and renames a new `..data` symlink over the old one.
    for (version, leaf) in [("..v1", &old), ("..v2", &new)] {
        std::fs::create_dir(dir.path().join(version)).unwrap();
        std::fs::write(dir.path().join(version).join("tls.pem"), leaf.combined_pem()).unwrap();
    }
    std::os::unix::fs::symlink("..v1", dir.path().join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/tls.pem", dir.path().join("tls.pem")).unwrap();
    let origin = cacheable_origin().await;
    let (running, addr) = start_tls_proxy(origin.addr, |config| {
        config.tls.certificates = vec![pair(dir.path().join("tls.pem"), None, &[])];
    })
    .await;
    let client = client(&ca, &[b"http/1.1"]);
    assert_eq!(leaf_served(&client, addr, "a.test").await, old.der);
    std::os::unix::fs::symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    eventually_serves(&client, addr, "a.test", &new.der).await;
    running.shutdown().await;
}
