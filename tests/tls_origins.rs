//! TLS to origins (`.ssl = 1;`, `.ssl_ca`, `-b https://` with `--backend-ca`) and the PROXY
//! header to origins (`.proxy_header`). The origin in each test is a tokio-rustls acceptor in
//! front of hyper, with a certificate from a test CA; it records what each connection showed
//! (the server name asked for, the ALPN protocol agreed, a PROXY header) and its requests.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use support::tls::TestCa;
use support::*;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// What one connection to the origin showed.
#[derive(Clone, Debug, Default)]
struct SeenConnection {
    /// The server name the client asked for (SNI).
    sni: Option<String>,
    /// The protocol ALPN agreed on.
    alpn: Option<String>,
    /// The PROXY v2 header the connection started with, decoded.
    proxy: Option<ProxyV2>,
    /// `(path, Host)` of each request.
    requests: Vec<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct ProxyV2 {
    /// The command: true for PROXY, false for LOCAL.
    proxied: bool,
    source: Option<SocketAddr>,
    destination: Option<SocketAddr>,
}

#[derive(Default)]
struct Seen {
    connections: Vec<SeenConnection>,
    failed_handshakes: usize,
}

/// A TLS origin serving `200 hello, max-age=60` on a certificate for `names`.
struct TlsOrigin {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsOrigin {
    async fn start(ca: &TestCa, names: &[&str], expect_proxy_header: bool) -> TlsOrigin {
        let leaf = ca.issue(names);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der.clone()], leaf.key())
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let state = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve(
                    stream,
                    acceptor.clone(),
                    expect_proxy_header,
                    state.clone(),
                ));
            }
        });
        TlsOrigin { addr, seen, task }
    }

    fn connections(&self) -> Vec<SeenConnection> {
        self.seen.lock().unwrap().connections.clone()
    }

    fn failed_handshakes(&self) -> usize {
        self.seen.lock().unwrap().failed_handshakes
    }

    fn requests(&self) -> usize {
        self.connections().iter().map(|c| c.requests.len()).sum()
    }
}

async fn serve(
    mut stream: TcpStream,
    acceptor: TlsAcceptor,
    expect_proxy_header: bool,
    seen: Arc<Mutex<Seen>>,
) {
    let proxy = if expect_proxy_header {
        match read_proxy_v2(&mut stream).await {
            Some(header) => Some(header),
            None => return,
        }
    } else {
        None
    };
    let tls = match acceptor.accept(stream).await {
        Ok(tls) => tls,
        Err(_) => {
            seen.lock().unwrap().failed_handshakes += 1;
            return;
        }
    };
    let (_, session) = tls.get_ref();
    let connection = SeenConnection {
        sni: session.server_name().map(str::to_string),
        alpn: session
            .alpn_protocol()
            .map(|protocol| String::from_utf8_lossy(protocol).into_owned()),
        proxy,
        requests: Vec::new(),
    };
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.connections.push(connection);
        seen.connections.len() - 1
    };
    let service = service_fn(move |request: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            let host = request
                .headers()
                .get(http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            seen.lock().unwrap().connections[index]
                .requests
                .push((request.uri().path().to_string(), host));
            let mut response = Response::new(Full::new(Bytes::from_static(b"hello over tls")));
            response
                .headers_mut()
                .insert(http::header::CACHE_CONTROL, "max-age=60".parse().unwrap());
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

/// Reads a PROXY protocol v2 header (spec section 2.2) off the start of `stream`.
async fn read_proxy_v2(stream: &mut TcpStream) -> Option<ProxyV2> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed).await.ok()?;
    assert_eq!(&fixed[..12], b"\r\n\r\n\0\r\nQUIT\n", "the v2 signature");
    let length = u16::from_be_bytes([fixed[14], fixed[15]]) as usize;
    let mut rest = vec![0u8; length];
    stream.read_exact(&mut rest).await.ok()?;
    let proxied = match fixed[12] {
        0x21 => true,
        0x20 => false,
        other => panic!("version/command byte {other:#x}"),
    };
    let (source, destination) = match fixed[13] {
        0x11 => {
            let ip = |at: usize| std::net::Ipv4Addr::new(rest[at], rest[at + 1], rest[at + 2], rest[at + 3]);
            let port = |at: usize| u16::from_be_bytes([rest[at], rest[at + 1]]);
            (
                Some(SocketAddr::from((ip(0), port(8)))),
                Some(SocketAddr::from((ip(4), port(10)))),
            )
        }
        0x00 => (None, None),
        other => panic!("family byte {other:#x}"),
    };
    Some(ProxyV2 {
        proxied,
        source,
        destination,
    })
}

/// Writes the CA's PEM to a file beside the policies.
fn ca_file(ca: &TestCa) -> PathBuf {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let path = dir.join("ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

async fn start_with_policy(policy: &str) -> (edgecache_runtime::Running, SocketAddr) {
    let path = write_policy("tls-origin", policy);
    let unused = unused_port().await;
    start_proxy(unused, |config| {
        config.backend = None;
        config.policy = Some(path);
    })
    .await
}

fn tls_backend(name: &str, origin: &TlsOrigin, ca: &std::path::Path, extra: &str) -> String {
    format!(
        "backend {name} {{\n  .host = \"127.0.0.1\";\n  .port = \"{}\";\n  .host_header = \"origin.test\";\n  \
         .ssl = 1;\n  .ssl_ca = \"{}\";\n{extra}\n}}\n",
        origin.addr.port(),
        ca.display()
    )
}

#[tokio::test]
async fn a_verified_tls_origin_is_fetched_once_then_served_from_cache() {
    let ca = TestCa::new();
    let origin = TlsOrigin::start(&ca, &["origin.test"], false).await;
    let policy = format!("vcl 4.1;\n{}", tls_backend("secure", &origin, &ca_file(&ca), ""));
    let (_proxy, addr) = start_with_policy(&policy).await;

    let first = get(addr, "/page", &[("host", "site.test")]).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(first.text(), "hello over tls");
    let second = get(addr, "/page", &[("host", "site.test")]).await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.text(), "hello over tls");
    assert_eq!(
        origin.requests(),
        1,
        "MISS then HIT: the second answer came from the cache"
    );

    let connections = origin.connections();
    assert_eq!(
        connections[0].sni.as_deref(),
        Some("origin.test"),
        "SNI from .host_header"
    );
    assert_eq!(
        connections[0].alpn.as_deref(),
        Some("http/1.1"),
        "ALPN offers http/1.1 only"
    );
    assert_eq!(
        connections[0].requests[0].1, "site.test",
        "the client's Host is kept"
    );
}

#[tokio::test]
async fn an_origin_certificate_from_another_ca_is_refused_with_503_and_the_cause_logged() {
    let trusted = TestCa::new();
    let other = TestCa::named("another CA");
    let origin = TlsOrigin::start(&other, &["origin.test"], false).await;
    let policy = format!(
        "vcl 4.1;\n{}",
        tls_backend("untrusted", &origin, &ca_file(&trusted), "")
    );
    let (_proxy, addr) = start_with_policy(&policy).await;
    let log = CapturedLog::default();
    let _guard = log.install("warn");

    let refused = get(addr, "/", &[("host", "site.test")]).await;
    // The builtin vcl_backend_error's page; the cause is in the log.
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    let text = log.text();
    assert!(
        text.contains("origin certificate for untrusted not trusted") && text.contains("UnknownIssuer"),
        "the log names the backend and the cause: {text}"
    );
    assert_eq!(
        origin.requests(),
        0,
        "nothing was sent over an unverified connection"
    );
    assert!(origin.failed_handshakes() >= 1);
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused_unless_ssl_verify_host_is_off() {
    let ca = TestCa::new();
    let origin = TlsOrigin::start(&ca, &["elsewhere.test"], false).await;
    let ca_path = ca_file(&ca);
    let policy = format!(
        "vcl 4.1;\n{}{}\
         sub vcl_recv {{ if (req.url ~ \"^/lenient\") {{ set req.backend_hint = lenient; }} return (pass); }}\n",
        tls_backend("strict", &origin, &ca_path, ""),
        tls_backend("lenient", &origin, &ca_path, "  .ssl_verify_host = 0;"),
    );
    let (_proxy, addr) = start_with_policy(&policy).await;
    let log = CapturedLog::default();
    let _guard = log.install("warn");

    let strict = get(addr, "/strict", &[("host", "site.test")]).await;
    assert_eq!(strict.status, StatusCode::SERVICE_UNAVAILABLE);
    let text = log.text();
    assert!(
        text.contains("origin certificate for strict not trusted: it is not valid for the server name"),
        "{text}"
    );
    let lenient = get(addr, "/lenient", &[("host", "site.test")]).await;
    assert_eq!(lenient.status, StatusCode::OK, "{}", lenient.text());
}

#[tokio::test]
async fn probes_speak_tls_and_a_wrong_ca_keeps_the_backend_sick() {
    let ca = TestCa::new();
    let origin = TlsOrigin::start(&ca, &["origin.test"], false).await;
    let wrong = TestCa::new();
    let probe = "  .probe = { .url = \"/health\"; .interval = 50ms; .timeout = 1s; .window = 1; .threshold = 1; .initial = 0; }";
    let policy = format!(
        "vcl 4.1;\nimport std;\n{}{}\
         sub vcl_recv {{\n\
           if (std.healthy(good) && !std.healthy(bad)) {{ return (synth(200, \"good up, bad down\")); }}\n\
           if (std.healthy(good)) {{ return (synth(200, \"both up\")); }}\n\
           return (synth(503, \"good down\"));\n\
         }}\n",
        tls_backend("good", &origin, &ca_file(&ca), probe),
        tls_backend("bad", &origin, &ca_file(&wrong), probe),
    );
    let (_proxy, addr) = start_with_policy(&policy).await;

    until("the TLS probe marks good healthy", async || {
        get(addr, "/", &[]).await.status == StatusCode::OK
    })
    .await;
    until("bad's probes have failed their handshakes twice", async || {
        origin.failed_handshakes() >= 2
    })
    .await;
    let states = get(addr, "/", &[]).await.text();
    assert!(states.contains("good up, bad down"), "{states}");
    let probes = origin.connections();
    assert!(probes.iter().all(|c| c.sni.as_deref() == Some("origin.test")));
    assert!(probes.iter().any(|c| c
        .requests
        .iter()
        .any(|(path, host)| path == "/health" && host == "origin.test")));
}

#[tokio::test]
async fn dash_b_https_verifies_against_the_backend_ca_without_a_policy() {
    let ca = TestCa::new();
    let origin = TlsOrigin::start(&ca, &["127.0.0.1"], false).await;
    let ca_path = ca_file(&ca);
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.backend = Some(format!("https://{}", origin.addr));
        config.backend_ca = Some(ca_path);
    })
    .await;

    let first = get(addr, "/asset", &[("host", "site.test")]).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(first.cache(), "MISS");
    assert_eq!(get(addr, "/asset", &[("host", "site.test")]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 1);
    assert_eq!(origin.connections()[0].sni, None, "no SNI for an IP address");

    // The same origin without --backend-ca: the system's roots do not know the test CA.
    let (_plain, plain_addr) = start_proxy(origin.addr, |config| {
        config.backend = Some(format!("https://{}", origin.addr));
    })
    .await;
    let refused = get(plain_addr, "/other", &[("host", "site.test")]).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
}

#[tokio::test]
async fn an_unreadable_ssl_ca_refuses_the_policy_naming_the_file_and_line() {
    let path = write_policy(
        "bad-ca",
        "vcl 4.1;\nbackend b {\n  .host = \"127.0.0.1\";\n  .ssl = 1;\n  .ssl_ca = \"/nonexistent/ca.pem\";\n}\n",
    );
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        policy: Some(path.clone()),
        ..edgecache_runtime::Config::default()
    };
    let error = match edgecache_runtime::start(config).await {
        Ok(_) => panic!("a missing CA file was accepted"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains(&format!("{}:5", path.display()))
            && error.contains("CA file /nonexistent/ca.pem: cannot read it"),
        "{error}"
    );
}

#[tokio::test]
async fn proxy_header_2_names_the_client_on_every_new_connection_which_is_not_reused() {
    let ca = TestCa::new();
    let origin = TlsOrigin::start(&ca, &["origin.test"], true).await;
    let probe = "  .proxy_header = 2;\n  .probe = { .url = \"/health\"; .interval = 50ms; .window = 1; .threshold = 1; .initial = 1; }";
    let policy = format!(
        "vcl 4.1;\n{}sub vcl_recv {{ return (pass); }}\n",
        tls_backend("proxied", &origin, &ca_file(&ca), probe),
    );
    let (_proxy, addr) = start_with_policy(&policy).await;

    let client = Client::new();
    for _ in 0..2 {
        let reply = client.get(addr, "/pass", &[("host", "site.test")]).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    }
    let connections = origin.connections();
    let served: Vec<_> = connections
        .iter()
        .filter(|c| c.requests.iter().any(|(path, _)| path == "/pass"))
        .collect();
    assert_eq!(
        served.len(),
        2,
        "one origin connection per request: {connections:?}"
    );
    for connection in served {
        assert_eq!(connection.requests.len(), 1, "not reused for another request");
        let header = connection.proxy.expect("a PROXY header");
        assert!(header.proxied, "the PROXY command, not LOCAL");
        let source = header.source.unwrap();
        assert_eq!(source.ip(), std::net::Ipv4Addr::LOCALHOST, "the client's address");
        assert_ne!(source.port(), 0);
        assert_eq!(
            header.destination,
            Some(addr),
            "the address the client connected to"
        );
    }
    // Probes have no client: the LOCAL command.
    until("a probe connected", async || {
        origin
            .connections()
            .iter()
            .any(|c| c.requests.iter().any(|(path, _)| path == "/health"))
    })
    .await;
    let probe = origin
        .connections()
        .into_iter()
        .find(|c| c.requests.iter().any(|(path, _)| path == "/health"))
        .unwrap();
    assert_eq!(
        probe.proxy,
        Some(ProxyV2 {
            proxied: false,
            source: None,
            destination: None
        })
    );
}
