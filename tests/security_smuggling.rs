//! Attacks on the framing and the cache key of the requests edgecache sends to its origin
//! (issue 18): a GET body announced but not sent ("fat GET" smuggling), a bodiless HEAD
//! response stored for GETs, `Connection` naming the fields the key is made of, and broken
//! chunked framing from either side.

mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use edgecache_runtime::config::BackendTimeouts;
use http::{Method, Request, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::{get, start_proxy, CapturedLog, Client, Daemon, Origin, OriginReply, RawConn, EXCHANGE_LIMIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Backend timeouts short enough that a fill the origin never answers (it waits for body
/// bytes that were announced but not sent) fails the test in seconds rather than minutes.
fn short_timeouts() -> BackendTimeouts {
    BackendTimeouts {
        first_byte: Duration::from_secs(2),
        ..BackendTimeouts::default()
    }
}

// === a strict raw-socket origin ===

/// One request as [`StrictOrigin`] framed it.
#[derive(Clone, Debug)]
struct Framed {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Framed {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct StrictState {
    framed: Vec<Framed>,
    /// Per connection (in accept order): every byte received.
    received: Vec<Vec<u8>>,
    /// Per connection: bytes received that are not (yet) part of a complete request.
    unframed: Vec<usize>,
}

/// An HTTP/1.1 origin that frames requests strictly by `Content-Length` or chunked coding, as
/// nginx does, and records every byte and every request of each connection. It answers each
/// request with `<METHOD> <target>` (`Cache-Control: private` when the target says `private`,
/// else `max-age=60`; after [`SLOW`] when it starts with `/slow`) and keeps the connection open.
struct StrictOrigin {
    addr: SocketAddr,
    state: Arc<Mutex<StrictState>>,
    task: JoinHandle<()>,
}

impl StrictOrigin {
    async fn start() -> StrictOrigin {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let addr = listener.local_addr().expect("bound address");
        let state = Arc::new(Mutex::new(StrictState::default()));
        let accepting = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let connection = {
                    let mut state = accepting.lock().unwrap();
                    state.received.push(Vec::new());
                    state.unframed.push(0);
                    state.received.len() - 1
                };
                tokio::spawn(serve_strictly(stream, connection, accepting.clone()));
            }
        });
        StrictOrigin { addr, state, task }
    }

    fn framed(&self) -> Vec<Framed> {
        self.state.lock().unwrap().framed.clone()
    }

    /// Asserts that every byte the origin received belongs to a complete request.
    fn assert_nothing_unframed(&self) {
        let state = self.state.lock().unwrap();
        for (connection, unframed) in state.unframed.iter().enumerate() {
            assert_eq!(
                *unframed,
                0,
                "connection {connection}: bytes the origin could not frame as a request: {:?}",
                String::from_utf8_lossy(&state.received[connection])
            );
        }
    }
}

impl Drop for StrictOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_strictly(mut stream: TcpStream, connection: usize, state: Arc<Mutex<StrictState>>) {
    let mut buf = Vec::new();
    loop {
        let request = loop {
            if let Some((request, used)) = frame_request(&buf) {
                buf.drain(..used);
                break request;
            }
            let mut chunk = [0u8; 8192];
            let n = match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut state = state.lock().unwrap();
            state.received[connection].extend_from_slice(&chunk[..n]);
            state.unframed[connection] = buf.len();
        };
        let body = format!("{} {}", request.method, request.target);
        let cache_control = if request.target.contains("private") {
            "private"
        } else {
            "max-age=60"
        };
        let head_only = request.method == "HEAD";
        let slow = request.target.starts_with("/slow");
        {
            let mut state = state.lock().unwrap();
            state.unframed[connection] = buf.len();
            state.framed.push(request);
        }
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: {cache_control}\r\n\r\n",
            body.len()
        );
        if !head_only {
            response.push_str(&body);
        }
        if slow {
            tokio::time::sleep(SLOW).await;
        }
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The first complete request in `buf` and how many bytes it takes, framed as RFC 9112 §6
/// says: chunked, else `Content-Length`, else no body.
fn frame_request(buf: &[u8]) -> Option<(Framed, usize)> {
    let head_end = find(buf, b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split(' ');
    let method = request_line.next().unwrap_or("").to_string();
    let target = request_line.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let mut framed = Framed {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    let rest = &buf[head_end..];
    if framed.header("transfer-encoding").is_some() {
        let mut at = 0;
        loop {
            let line_end = find(&rest[at..], b"\r\n")?;
            let size_text = String::from_utf8_lossy(&rest[at..at + line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
                .unwrap_or_else(|_| panic!("a bad chunk size reached the origin: {size_text:?}"));
            at += line_end + 2;
            if size == 0 {
                let trailer_end = find(&rest[at..], b"\r\n")?;
                return Some((framed, head_end + at + trailer_end + 2));
            }
            if rest.len() < at + size + 2 {
                return None;
            }
            framed.body.extend_from_slice(&rest[at..at + size]);
            at += size + 2;
        }
    }
    let length: usize = framed
        .header("content-length")
        .map_or(0, |v| v.parse().expect("numeric Content-Length"));
    if rest.len() < length {
        return None;
    }
    framed.body = rest[..length].to_vec();
    Some((framed, head_end + length))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// How long the strict origin takes to answer under `/slow`: long enough for a second request
/// to join the fetch in flight.
const SLOW: Duration = Duration::from_millis(500);

/// A GET whose body is itself a request: forwarded with its `Content-Length` but not its
/// bytes, the origin would read the next request on the connection as those bytes.
const SMUGGLED: &str = "GET /smuggled HTTP/1.1\r\nHost: site.test\r\n\r\n";

/// Sends `GET target` over HTTP/2 (h2c, prior knowledge) with `body` and its `content-length`.
async fn h2c_get_with_body(addr: SocketAddr, target: &str, body: &'static str) -> (u16, Bytes) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2c handshake");
    tokio::spawn(connection);
    let request = Request::builder()
        .method(Method::GET)
        .version(Version::HTTP_2)
        .uri(format!("http://site.test{target}"))
        .header("content-length", body.len())
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("valid request");
    let exchange = async {
        let response = sender.send_request(request).await.expect("h2 response");
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.expect("h2 body").to_bytes();
        (status, body)
    };
    tokio::time::timeout(EXCHANGE_LIMIT, exchange)
        .await
        .expect("h2 exchange in time")
}

#[tokio::test]
async fn fat_get_is_not_smuggled() {
    let origin = StrictOrigin::start().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.timeouts = short_timeouts()).await;
    let fat_get = |target: &str| {
        format!(
            "GET {target} HTTP/1.1\r\nHost: site.test\r\nContent-Length: {}\r\n\r\n{SMUGGLED}",
            SMUGGLED.len()
        )
    };

    // A cache fill (miss), a response that is not storable, then a hit-for-pass fetch.
    for (target, cache) in [("/page", "MISS"), ("/private", "PASS"), ("/private", "PASS")] {
        let mut conn = RawConn::connect(addr).await;
        conn.send(&fat_get(target)).await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 200, "fat GET {target}: {response:?}");
        assert_eq!(String::from_utf8_lossy(&response.body), format!("GET {target}"));
        assert_eq!(response.cache(), cache, "GET {target}");
    }
    // The same over HTTP/2, where the body is DATA frames and `content-length` a field.
    let (status, body) = h2c_get_with_body(addr, "/h2-page", SMUGGLED).await;
    assert_eq!((status, &body[..]), (200, &b"GET /h2-page"[..]));
    // A request whose body is forwarded (a pass) comes after them on the pooled connection.
    let reply = Client::new()
        .send("POST", addr, "/form", &[("host", "site.test")], "a=1")
        .await;
    assert_eq!(reply.text(), "POST /form");

    let framed = origin.framed();
    let seen: Vec<(&str, &str)> = framed
        .iter()
        .map(|r| (r.method.as_str(), r.target.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("GET", "/page"),
            ("GET", "/private"),
            ("GET", "/private"),
            ("GET", "/h2-page"),
            ("POST", "/form"),
        ],
        "the origin saw exactly these requests"
    );
    for request in &framed[..4] {
        assert!(
            request.header("content-length").is_none() && request.header("transfer-encoding").is_none(),
            "a fetch without a body announced one: {request:?}"
        );
        assert!(request.body.is_empty(), "{request:?}");
    }
    let post = &framed[4];
    assert_eq!(post.body, b"a=1", "a passed body is forwarded whole");
    assert_eq!(post.header("content-length"), Some("3"));
    origin.assert_nothing_unframed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalesced_fat_get_is_not_smuggled() {
    let origin = StrictOrigin::start().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.timeouts = short_timeouts()).await;
    let fat_get = format!(
        "GET /slow-private HTTP/1.1\r\nHost: site.test\r\nContent-Length: {}\r\n\r\n{SMUGGLED}",
        SMUGGLED.len()
    );
    // The second request waits on the first one's fetch, which turns out uncacheable: it is
    // then passed, without the body the proxy no longer has.
    let exchange = |request: String| async move {
        let mut conn = RawConn::connect(addr).await;
        conn.send(&request).await;
        conn.response(false).await
    };
    let leader = tokio::spawn(exchange(fat_get.clone()));
    let waiter = tokio::spawn(exchange(fat_get));
    for response in [leader.await.unwrap(), waiter.await.unwrap()] {
        assert_eq!(response.status, 200, "{response:?}");
        assert_eq!(String::from_utf8_lossy(&response.body), "GET /slow-private");
    }
    let framed = origin.framed();
    assert_eq!(framed.len(), 2, "{framed:?}");
    for request in &framed {
        assert!(
            request.header("content-length").is_none() && request.body.is_empty(),
            "a fetch without a body announced one: {request:?}"
        );
    }
    origin.assert_nothing_unframed();
}

#[tokio::test]
async fn a_restarted_pass_is_not_sent_without_its_body() {
    let origin = StrictOrigin::start().await;
    let policy = support::write_policy(
        "restart_after_pass",
        r#"vcl 4.1;
sub vcl_deliver {
    if (req.restarts == 0) {
        return (restart);
    }
}
"#,
    );
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.timeouts = short_timeouts();
        config.policy = Some(policy);
    })
    .await;
    // The first pass streams the body to the origin; the restarted one has none left to send,
    // and fails as in Varnish rather than send the POST again, empty.
    let reply = Client::new()
        .send("POST", addr, "/form", &[("host", "site.test")], "a=1")
        .await;
    assert_eq!(reply.status, 503, "{reply:?}");

    let framed = origin.framed();
    assert_eq!(framed.len(), 1, "only the first pass: {framed:?}");
    assert_eq!(framed[0].body, b"a=1");
    assert_eq!(framed[0].header("content-length"), Some("3"));
    origin.assert_nothing_unframed();
}

// === nginx as the origin ===

/// nginx (the Debian package) serving `files` on an ephemeral port, from a configuration in a
/// temporary directory under Cargo's target dir. Stopped when dropped.
async fn start_nginx(files: &[(&str, &str)]) -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("edgecache-nginx-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let root = dir.path().join("www");
    std::fs::create_dir(&root).expect("www dir");
    for (name, text) in files {
        std::fs::write(root.join(name), text).expect("write a served file");
    }
    let addr = support::unused_port().await;
    let path = dir.path().display();
    let config = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {path}/nginx.pid;\n\
         error_log {path}/error.log warn;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log {path}/access.log;\n  client_body_temp_path {path}/body;\n\
         keepalive_requests 1000;\n  server {{\n    listen {addr};\n    root {root};\n  }}\n}}\n",
        root = root.display()
    );
    let config_path = dir.path().join("nginx.conf");
    std::fs::File::create(&config_path)
        .and_then(|mut file| file.write_all(config.as_bytes()))
        .expect("write nginx.conf");
    let child = Daemon::spawn(
        Command::new("nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&config_path),
        "nginx as its origin",
        "nginx-light",
    );
    Daemon::listening("nginx", child, addr, dir, Some("error.log")).await
}

#[tokio::test]
async fn fat_get_is_not_smuggled_to_nginx() {
    const SECRET: &str = "TOP-SECRET: only for whoever asks for /secret.txt";
    let nginx = start_nginx(&[("page.txt", "a public page"), ("secret.txt", SECRET)]).await;
    let (_proxy, addr) = start_proxy(nginx.addr, |config| config.timeouts = short_timeouts()).await;

    // The issue's sequence: a fat GET whose `Content-Length` covers the head of the next
    // request on the pooled origin connection (and some of its body), then a POST whose body
    // is blank lines (nginx skips them before a request line) and a request for the secret.
    let announced = 1000;
    let mut fat_get = RawConn::connect(addr).await;
    fat_get
        .send(&format!(
            "GET /page.txt HTTP/1.1\r\nHost: site.test\r\nContent-Length: {announced}\r\n\r\n{}",
            "x".repeat(announced)
        ))
        .await;
    let page = fat_get.response(false).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(String::from_utf8_lossy(&page.body), "a public page");

    let smuggling_body = format!(
        "{}GET /secret.txt HTTP/1.1\r\nHost: site.test\r\n\r\n",
        "\r\n".repeat(announced)
    );
    let post = Client::new()
        .send(
            "POST",
            addr,
            "/page.txt",
            &[("host", "site.test")],
            smuggling_body,
        )
        .await;
    assert!(
        !post.text().contains("TOP-SECRET"),
        "the POST's client got the answer to a request smuggled in its body: {post:?}"
    );
    assert_eq!(
        post.status, 405,
        "nginx refuses a POST to a static file: {post:?}"
    );

    // The connection pool is not desynchronised: the next GET gets its own answer.
    let again = get(addr, "/secret.txt", &[("host", "site.test")]).await;
    assert_eq!(again.text(), SECRET);
}

// === HEAD ===

#[tokio::test]
async fn head_cannot_blank_a_page() {
    let origin = Origin::start(|request| {
        // A URL that is uncacheable at first (hit-for-pass) and storable afterwards.
        if request.uri().path() == "/turns-cacheable" && request.headers().get("x-first").is_some() {
            return OriginReply::ok("the page").cache_control("private");
        }
        OriginReply::ok("the page").cache_control("max-age=60")
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    // A client's `no-store` keeps this response out of the store, and only this one.
    let first = get(addr, "/page", &[("cache-control", "no-store")]).await;
    assert_eq!(first.text(), "the page");
    let head = support::send("HEAD", addr, "/page", &[], Bytes::new()).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    for _ in 0..2 {
        let page = get(addr, "/page", &[]).await;
        assert_eq!(page.text(), "the page", "a GET after a HEAD got {page:?}");
        assert_eq!(page.header("content-length"), Some("8"));
    }

    // A key remembered as hit-for-pass: a HEAD for it still fetches the whole object.
    let private = get(addr, "/turns-cacheable", &[("x-first", "1")]).await;
    assert_eq!(private.cache(), "PASS");
    let head = support::send("HEAD", addr, "/turns-cacheable", &[], Bytes::new()).await;
    assert!(head.body.is_empty());
    let page = get(addr, "/turns-cacheable", &[]).await;
    assert_eq!(
        page.text(),
        "the page",
        "a GET after a hit-for-pass HEAD got {page:?}"
    );

    assert!(
        origin.log().iter().all(|seen| seen.method == Method::GET),
        "a HEAD reached the origin: {:?}",
        origin
            .log()
            .iter()
            .map(|s| (&s.method, &s.target))
            .collect::<Vec<_>>()
    );
}

// === Connection ===

#[tokio::test]
async fn connection_header_cannot_strip_host() {
    let origin = Origin::start(|request| {
        let host = request
            .headers()
            .get("host")
            .map_or("none", |v| v.to_str().unwrap_or("?"))
            .to_string();
        let device = request
            .headers()
            .get("x-device")
            .map_or("none", |v| v.to_str().unwrap_or("?"))
            .to_string();
        OriginReply::ok(format!("host={host} device={device}"))
            .cache_control("max-age=60")
            .header("vary", "X-Device")
    })
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    for connection in ["Host", "close, host", "Accept-Encoding"] {
        let mut conn = RawConn::connect(addr).await;
        conn.send(&format!(
            "GET /home HTTP/1.1\r\nHost: victim.test\r\nAccept-Encoding: gzip\r\nConnection: {connection}\r\n\r\n"
        ))
        .await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 400, "Connection: {connection}: {response:?}");
    }
    assert_eq!(origin.requests(), 0, "refused before any fetch");
    assert_eq!(proxy.cache_usage().keys, 0);

    let page = get(addr, "/home", &[("host", "victim.test")]).await;
    assert_eq!(page.text(), "host=victim.test device=none");

    // A field the `Vary` of the object reads: removed for this hop before the key is made,
    // so the object is stored under the variant the origin actually answered.
    let mut conn = RawConn::connect(addr).await;
    conn.send(
        "GET /device HTTP/1.1\r\nHost: victim.test\r\nX-Device: mobile\r\nConnection: X-Device\r\n\r\n",
    )
    .await;
    let hop = conn.response(false).await;
    assert_eq!(String::from_utf8_lossy(&hop.body), "host=victim.test device=none");
    let mobile = get(
        addr,
        "/device",
        &[("host", "victim.test"), ("x-device", "mobile")],
    )
    .await;
    assert_eq!(
        mobile.text(),
        "host=victim.test device=mobile",
        "the mobile variant is the origin's mobile answer"
    );
}

// === broken chunked framing ===

#[tokio::test]
async fn a_broken_origin_chunk_gives_502_with_a_status_line() {
    let origin = Origin::raw(Bytes::from_static(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: max-age=60\r\n\r\nzz\r\nnot a chunk\r\n0\r\n\r\n",
    ))
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let log = CapturedLog::default();
    let _guard = log.install("edgecache::access=info");

    for target in ["/fill", "/fill"] {
        let mut conn = RawConn::connect(addr).await;
        conn.send(&format!("GET {target} HTTP/1.1\r\nHost: site.test\r\n\r\n"))
            .await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 502, "{response:?}");
    }
    let mut pass = RawConn::connect(addr).await;
    pass.send("POST /pass HTTP/1.1\r\nHost: site.test\r\nContent-Length: 0\r\n\r\n")
        .await;
    let response = pass.response(false).await;
    assert_eq!(response.status, 502, "{response:?}");
    assert_eq!(proxy.cache_usage().keys, 0, "nothing broken was stored");

    let log = log.text();
    let statuses: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("edgecache::access"))
        .map(|line| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix("status="))
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(statuses, ["502", "502", "502"], "the access log: {log}");
}

#[tokio::test]
async fn a_clients_bad_chunk_is_400() {
    let origin = Origin::fixed(OriginReply::ok("stored")).await;
    // With a policy too: the client's body is not the backend's failure, so no
    // vcl_backend_error page (503) stands in for the 400.
    let policy = support::write_policy("builtin_only", "vcl 4.1;\n");
    for policy in [None, Some(policy)] {
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.policy = policy).await;
        let mut conn = RawConn::connect(addr).await;
        conn.send(
            "POST /form HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n\
             zz\r\nnot a chunk\r\n0\r\n\r\n",
        )
        .await;
        let response = conn.response(false).await;
        assert_eq!(response.status, 400, "{response:?}");
        assert!(
            !String::from_utf8_lossy(&response.body).contains("backend"),
            "the client's own framing is not blamed on the backend: {response:?}"
        );
    }
}
