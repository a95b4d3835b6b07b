//! What one client can hold: slow request heads (slowloris), idle keep-alive connections, request
//! bodies that stall, responses a client does not read, and connections past
//! `--max-connections` are bounded; and a SIGHUP that arrives as the listener opens reloads
//! instead of killing the process.
//!
//! Timeouts are configured short (1 s) so each test waits for them to fire in about a second.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::{
    get, start_proxy, try_get, unused_port, H2Frames, Origin, OriginReply, RawConn, EXCHANGE_LIMIT,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

/// How much later than its deadline a timeout may fire on a loaded test machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Reads until the peer closes (EOF or reset); returns what arrived before, or `None` when the
/// connection stayed open for `EXCHANGE_LIMIT`.
async fn read_until_closed(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let reading = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(EXCHANGE_LIMIT, reading).await.ok()?;
    Some(received)
}

async fn origin() -> Origin {
    Origin::fixed(OriginReply::ok("hello")).await
}

#[tokio::test]
async fn slowloris_connections_are_closed_at_the_header_timeout() {
    let origin = origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.client_timeouts.header = SECOND;
        // Longer than the header timeout: a close at ~1 s is the header timeout's.
        config.client_timeouts.idle = 3 * SECOND;
    })
    .await;
    // Each connection sends a byte every 200 ms, five times as often as the timeout: a timer
    // reset by each byte would never fire.
    let lifetimes = support::concurrently(200, |_| async move {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\nX-Slow: ")
            .await
            .unwrap();
        let first_byte = Instant::now();
        let mut buf = [0u8; 256];
        let closed = async {
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(n) => panic!("bytes instead of a close: {:?}", String::from_utf8_lossy(&buf[..n])),
                    },
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {
                        // Fails once the proxy closed; the read then reports it.
                        let _ = stream.write_all(b"a").await;
                    }
                }
            }
        };
        tokio::time::timeout(EXCHANGE_LIMIT, closed)
            .await
            .expect("the slow connection is closed");
        first_byte.elapsed()
    })
    .await;
    for lifetime in lifetimes {
        assert!(
            lifetime >= SECOND - Duration::from_millis(50) && lifetime <= SECOND + SLACK,
            "closed {lifetime:?} after its first byte; the header timeout is 1 s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_client_is_served_while_1000_slow_ones_are_open() {
    let origin = origin().await;
    // The default timeouts: the slow ones must still be open when the new client is served.
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let slow = support::concurrently(1000, |_| async move {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\nX-Slow: ")
            .await
            .unwrap();
        stream
    })
    .await;

    let reply = get(addr, "/fresh", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "hello");

    let mut buf = [0u8; 1];
    let open = slow
        .iter()
        .filter(|stream| matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock))
        .count();
    assert_eq!(open, 1000, "every slow connection was still open");
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let origin = origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.client_timeouts.idle = SECOND;
        config.client_timeouts.header = 3 * SECOND;
    })
    .await;

    let mut served = RawConn::connect(addr).await;
    served.send("GET /a HTTP/1.1\r\nHost: example.test\r\n\r\n").await;
    assert_eq!(served.response(false).await.status, 200);
    let idle = Instant::now();
    assert!(
        served.closed_by_peer(EXCHANGE_LIMIT).await,
        "the idle connection is closed"
    );
    let after = idle.elapsed();
    assert!(
        after >= SECOND - Duration::from_millis(50) && after <= SECOND + SLACK,
        "closed after {after:?}"
    );

    // A connection that never sends a request is idle from the start.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let opened = Instant::now();
    assert_eq!(read_until_closed(&mut silent).await, Some(Vec::new()));
    let after = opened.elapsed();
    assert!(
        after >= SECOND - Duration::from_millis(50) && after <= SECOND + SLACK,
        "closed after {after:?}"
    );
}

/// Client-side I/O that keeps a copy of what the server sent, to find its frames.
struct Tap {
    stream: TcpStream,
    received: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for Tap {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.stream).poll_read(cx, buf);
        let new = buf.filled()[before..].to_vec();
        self.received.lock().unwrap().extend_from_slice(&new);
        polled
    }
}

impl AsyncWrite for Tap {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The HTTP/2 frame types (RFC 9113 §6) in `bytes`, a server's side of a connection.
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let length = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        types.push(bytes[3]);
        bytes = &bytes[(9 + length).min(bytes.len())..];
    }
    types
}

const GOAWAY: u8 = 0x7;

#[tokio::test]
async fn idle_http2_connections_get_goaway() {
    let origin = origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.client_timeouts.idle = SECOND;
        config.client_timeouts.header = 3 * SECOND;
    })
    .await;
    let received = Arc::new(Mutex::new(Vec::new()));
    let tap = Tap {
        stream: TcpStream::connect(addr).await.expect("connect"),
        received: received.clone(),
    };
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tap))
            .await
            .expect("h2c handshake");
    let connection = tokio::spawn(connection);
    let request = http::Request::get(format!("http://{addr}/h2"))
        .header("host", "example.test")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(EXCHANGE_LIMIT, sender.send_request(request))
        .await
        .expect("a response in time")
        .expect("h2 response");
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.expect("h2 body");
    let idle = Instant::now();

    let ended = tokio::time::timeout(EXCHANGE_LIMIT, connection)
        .await
        .expect("the idle connection ends");
    let after = idle.elapsed();
    assert!(ended.expect("no panic").is_ok(), "a graceful end");
    assert!(
        after >= SECOND - Duration::from_millis(50) && after <= SECOND + SLACK,
        "ended after {after:?}"
    );
    let types = frame_types(&received.lock().unwrap());
    assert!(
        types.contains(&GOAWAY),
        "the server sent GOAWAY; frames: {types:?}"
    );
}

/// What the raw origin of [`a_silent_request_body_times_out`] saw on its connection.
#[derive(Debug)]
struct BodyAborted {
    body_bytes: usize,
    /// From the end of the request head to the connection's end.
    after_head: Duration,
}

#[tokio::test]
async fn a_silent_request_body_times_out() {
    // A raw origin that reads the announced body strictly and reports how its connection ended.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin_addr = listener.local_addr().unwrap();
    let (report, reported) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut received = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the head arrives");
            received.extend_from_slice(&buf[..n]);
        };
        let head_done = Instant::now();
        let mut body_bytes = received.len() - head_end;
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => body_bytes += n,
            }
        }
        let _ = report.send(BodyAborted {
            body_bytes,
            after_head: head_done.elapsed(),
        });
    });
    let (_proxy, addr) = start_proxy(origin_addr, |config| config.client_timeouts.body = SECOND).await;

    let mut client = RawConn::connect(addr).await;
    client
        .send("POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100\r\n\r\n0123456789")
        .await;
    let sent = Instant::now();
    let response = client.response(false).await;
    let after = sent.elapsed();
    // As nginx's client_body_timeout (which logs 408 and closes) and HAProxy (which sends it).
    assert_eq!(response.status, 408);
    assert_eq!(response.header("connection"), Some("close"));
    assert!(
        after >= SECOND - Duration::from_millis(50) && after <= SECOND + SLACK,
        "answered after {after:?}"
    );
    assert!(
        client.closed_by_peer(EXCHANGE_LIMIT).await,
        "the client connection is closed"
    );

    let seen = tokio::time::timeout(EXCHANGE_LIMIT, reported)
        .await
        .expect("the origin connection ends")
        .expect("the origin reports");
    assert_eq!(
        seen.body_bytes, 10,
        "the origin got what the client sent, then the end"
    );
    assert!(
        seen.after_head <= SECOND + SLACK,
        "origin connection held {seen:?}"
    );
}

/// A raw origin: `/huge` gets a 1 GiB body written as fast as edgecache takes it, and reports
/// how long after the request head its connection was closed; anything else gets `hello`.
async fn huge_origin() -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Duration>) {
    const HUGE: u64 = 1 << 30;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (report, reports) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let report = report.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let received = Instant::now();
                if !head.starts_with(b"GET /huge") {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
                        .await;
                    return;
                }
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {HUGE}\r\n\r\n");
                stream.write_all(head.as_bytes()).await.unwrap();
                let zeros = [0u8; 64 * 1024];
                let mut left = HUGE;
                while left > 0 {
                    if stream.write_all(&zeros).await.is_err() {
                        let _ = report.send(received.elapsed());
                        return;
                    }
                    left -= zeros.len() as u64;
                }
            });
        }
    });
    (addr, reports)
}

/// What a download test holds: edgecache, its address, a client that asked for `/huge`, and
/// [`huge_origin`]'s reports.
type Download = (
    edgecache_runtime::Running,
    SocketAddr,
    TcpStream,
    tokio::sync::mpsc::UnboundedReceiver<Duration>,
);

/// edgecache with these send timeouts in front of [`huge_origin`], and a client that asked for
/// `/huge`.
async fn download(send: Duration, idle_send: Duration) -> Download {
    let (origin, origin_closed) = huge_origin().await;
    let (proxy, addr) = start_proxy(origin, |config| {
        config.client_timeouts.send = send;
        config.client_timeouts.idle_send = idle_send;
    })
    .await;
    let mut client = TcpStream::connect(addr).await.expect("connect");
    client
        .write_all(b"GET /huge HTTP/1.1\r\nHost: example.test\r\n\r\n")
        .await
        .unwrap();
    (proxy, addr, client, origin_closed)
}

#[tokio::test]
async fn a_client_that_never_reads_is_closed_at_the_send_timeout() {
    // The send timeout far longer: a close at ~1 s is the idle send timeout's.
    let (_proxy, addr, mut client, mut origin_closed) = download(30 * SECOND, SECOND).await;
    // The client reads nothing: once the socket buffers are full, no write goes through.
    let held = tokio::time::timeout(EXCHANGE_LIMIT, origin_closed.recv())
        .await
        .expect("the origin fetch is stopped")
        .expect("the origin reports");
    assert!(
        held >= SECOND - Duration::from_millis(50) && held <= SECOND + SLACK,
        "the origin connection was held {held:?}; the idle send timeout is 1 s"
    );
    let received = read_until_closed(&mut client)
        .await
        .expect("the client connection is closed");
    assert!(received.starts_with(b"HTTP/1.1 200"), "the response had begun");
    assert!(received.len() < 64 << 20, "got {} bytes of 1 GiB", received.len());

    let reply = get(addr, "/small", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "hello");
}

#[tokio::test]
async fn a_client_reading_too_slowly_is_closed_at_the_send_timeout() {
    // The idle send timeout longer: every write to this client goes through well within it.
    let (_proxy, addr, mut client, mut origin_closed) = download(SECOND, 5 * SECOND).await;
    // 16 KiB every 50 ms: the writes keep going through, the response would take an hour.
    let trickle = async {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(1..) = client.read(&mut buf).await {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // What the socket buffers hold still arrives after the close, so the origin tells when.
    let held = tokio::select! {
        held = origin_closed.recv() => held.expect("the origin reports"),
        _ = trickle => panic!("the client saw the end before the origin connection closed"),
        _ = tokio::time::sleep(EXCHANGE_LIMIT) => panic!("the origin fetch was not stopped"),
    };
    assert!(
        held >= SECOND - Duration::from_millis(50) && held <= SECOND + SLACK,
        "the origin connection was held {held:?}; the send timeout is 1 s"
    );
    read_until_closed(&mut client)
        .await
        .expect("the slow client is closed");
    assert_eq!(get(addr, "/small", &[]).await.status, 200);
}

#[tokio::test]
async fn an_http2_client_that_grants_no_window_is_closed_at_the_idle_send_timeout() {
    let (origin, mut origin_closed) = huge_origin().await;
    let (_proxy, addr) = start_proxy(origin, |config| {
        config.client_timeouts.idle_send = SECOND;
        config.client_timeouts.idle = SECOND;
        config.client_timeouts.send = 30 * SECOND;
    })
    .await;
    let mut client = H2Frames::connect(addr).await;
    let (response, _) = client
        .open("http://example.test/huge", &[])
        .await
        .expect("a stream");
    let response = tokio::time::timeout(EXCHANGE_LIMIT, response)
        .await
        .expect("a response head in time")
        .expect("a response");
    assert_eq!(response.status(), 200);
    // The body is kept but never read: its window is never released, and the socket keeps
    // taking pings and frames.
    let _unread = response.into_body();
    let held = tokio::time::timeout(EXCHANGE_LIMIT, origin_closed.recv())
        .await
        .expect("the origin fetch is stopped")
        .expect("the origin reports");
    // GOAWAY at the idle send timeout, the close an idle timeout later.
    assert!(
        held >= 2 * SECOND - Duration::from_millis(50) && held <= 2 * SECOND + SLACK,
        "the origin connection was held {held:?}; idle send and idle timeouts are 1 s each"
    );
    tokio::time::timeout(EXCHANGE_LIMIT, client.connection)
        .await
        .expect("the client connection is closed")
        .expect("no panic")
        .ok();
}

// === the real binary ===

/// `edgecache` as a child process; its log lines arrive on `lines`. Killed when dropped.
struct Edgecache {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Edgecache {
    fn spawn(args: &[&str]) -> Edgecache {
        let mut child = Command::new(env!("CARGO_BIN_EXE_edgecache"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs edgecache");
        let stderr = child.stderr.take().expect("piped stderr");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Edgecache { child, lines }
    }

    /// Waits for a log line containing `text`; the lines before it are returned for messages.
    fn wait_for_line(&self, text: &str) -> Result<String, Vec<String>> {
        let deadline = std::time::Instant::now() + EXCHANGE_LIMIT;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return Ok(line),
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        Err(seen)
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("runs kill");
        assert!(status.success(), "kill -{name}");
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("child status").is_none()
    }
}

impl Drop for Edgecache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects as soon as `addr` accepts: the first moment the listener is open.
async fn first_connection(edgecache: &mut Edgecache, addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + EXCHANGE_LIMIT;
    loop {
        if let Ok(stream) = TcpStream::connect(addr).await {
            return stream;
        }
        assert!(edgecache.is_running(), "edgecache exited before listening");
        assert!(Instant::now() < deadline, "edgecache never listened on {addr}");
        // Polling, as nothing else tells when the port opens; a refused connect takes
        // microseconds, so the first success comes right after the listener opened.
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn sighup_right_after_start_does_not_kill_the_process() {
    let origin = origin().await;
    let backend = origin.addr.to_string();
    for attempt in 1..=20 {
        let addr = unused_port().await;
        let listen = addr.to_string();
        // With the admin API (on a free port), whose start lies between the listener opening
        // and edgecache being ready.
        let mut edgecache =
            Edgecache::spawn(&["-a", &listen, "-b", &backend, "-T", "127.0.0.1:0", "--no-watch"]);
        let _first = first_connection(&mut edgecache, addr).await;
        edgecache.signal("HUP");
        let reply = try_get(addr, "/after-hup", &[]).await;
        assert!(
            edgecache.is_running(),
            "attempt {attempt}: SIGHUP killed edgecache"
        );
        assert_eq!(
            reply.expect("served after SIGHUP").status,
            200,
            "attempt {attempt}"
        );
        edgecache
            .wait_for_line("SIGHUP: reloading")
            .unwrap_or_else(|lines| panic!("attempt {attempt}: no reload logged: {lines:#?}"));
    }
}

#[tokio::test]
async fn the_connection_cap_queues_or_refuses_past_the_limit() {
    let origin = origin().await;
    let addr = unused_port().await;
    let (listen, backend) = (addr.to_string(), origin.addr.to_string());
    let mut edgecache = Edgecache::spawn(&[
        "-a",
        &listen,
        "-b",
        &backend,
        "-T",
        "off",
        "--max-connections",
        "2",
        "--idle-timeout",
        "30s",
    ]);
    drop(first_connection(&mut edgecache, addr).await);
    let request = "GET /capped HTTP/1.1\r\nHost: example.test\r\n\r\n";
    // The probe's slot is released when its connection task sees the close; until then a
    // holder may wait too, so each is served within the exchange limit.
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut holder = RawConn::connect(addr).await;
        holder.send(request).await;
        assert_eq!(holder.response(false).await.status, 200);
        holders.push(holder);
    }

    // The kernel completes the handshake (the listen backlog), but edgecache does not accept.
    let mut waiting = TcpStream::connect(addr).await.expect("queued in the backlog");
    waiting.write_all(request.as_bytes()).await.unwrap();
    let line = edgecache
        .wait_for_line("client connection limit (2) reached")
        .unwrap_or_else(|lines| panic!("no warning about the cap: {lines:#?}"));
    assert!(
        line.contains("--max-connections"),
        "the warning names the flag: {line}"
    );
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the third client was served past the cap: {early:?}"
    );

    drop(holders.pop());
    let mut served = Vec::new();
    let reply = tokio::time::timeout(EXCHANGE_LIMIT, async {
        loop {
            let n = waiting.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed without a response");
            served.extend_from_slice(&buf[..n]);
            if served.starts_with(b"HTTP/1.1 200") {
                return;
            }
            assert!(served.len() < 12 || served.starts_with(b"HTTP/1.1"), "{served:?}");
        }
    })
    .await;
    assert!(
        reply.is_ok(),
        "the waiting client is served once a connection closed"
    );
    assert!(edgecache.is_running());
}
