//! Pipe mode and WebSockets (issue 20): an RFC 6455 handshake through edgecache reaches a
//! WebSocket echo origin (tokio-tungstenite) and becomes a tunnel, with and without a policy;
//! `return (pipe)` from VCL tunnels a custom protocol; pipes are never stored, are counted,
//! close when silent for `--pipe-timeout`, and are capped by `--max-pipes`. Unknown methods
//! go to the origin as ordinary requests.

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::server::{Request as WsRequest, Response as WsResponse};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type ClientSocket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A WebSocket origin that echoes every text and binary message (tungstenite answers pings
/// and the closing handshake itself). Each handshake's request headers are kept, and its
/// `101` carries `Cache-Control: max-age=3600` to tempt a cache.
struct EchoOrigin {
    addr: SocketAddr,
    handshakes: Arc<Mutex<Vec<http::HeaderMap>>>,
}

impl EchoOrigin {
    async fn start() -> EchoOrigin {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let handshakes = Arc::new(Mutex::new(Vec::new()));
        let seen = handshakes.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    // tungstenite's handshake callback type: its error is a whole response.
                    #[allow(clippy::result_large_err)]
                    let callback = |request: &WsRequest, mut response: WsResponse| {
                        seen.lock().unwrap().push(request.headers().clone());
                        response
                            .headers_mut()
                            .insert("cache-control", "max-age=3600".parse().unwrap());
                        Ok(response)
                    };
                    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                        return;
                    };
                    while let Some(Ok(message)) = socket.next().await {
                        if (message.is_text() || message.is_binary()) && socket.send(message).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        EchoOrigin { addr, handshakes }
    }

    fn handshakes(&self) -> Vec<http::HeaderMap> {
        self.handshakes.lock().unwrap().clone()
    }
}

async fn connect(proxy: SocketAddr) -> Result<ClientSocket, WsError> {
    let url = format!("ws://{proxy}/chat");
    match tokio::time::timeout(EXCHANGE_LIMIT, tokio_tungstenite::connect_async(url)).await {
        Ok(connected) => connected.map(|(socket, response)| {
            assert_eq!(response.status(), 101, "{response:?}");
            socket
        }),
        Err(_) => panic!("no handshake within {EXCHANGE_LIMIT:?}"),
    }
}

async fn next_message(socket: &mut ClientSocket) -> Option<Message> {
    tokio::time::timeout(EXCHANGE_LIMIT, socket.next())
        .await
        .expect("a message in time")
        .map(|message| message.expect("a valid frame"))
}

/// Text and binary both ways, a ping answered, and a clean close (close frame echoed, then
/// end of stream).
async fn echo_session(proxy: SocketAddr) {
    let mut socket = connect(proxy).await.expect("handshake through edgecache");
    socket.send(Message::text("hello")).await.unwrap();
    assert_eq!(next_message(&mut socket).await, Some(Message::text("hello")));
    let binary = vec![0u8, 255, 1, 254, 0];
    socket.send(Message::binary(binary.clone())).await.unwrap();
    assert_eq!(next_message(&mut socket).await, Some(Message::binary(binary)));
    socket
        .send(Message::Ping(b"are you there".to_vec().into()))
        .await
        .unwrap();
    assert_eq!(
        next_message(&mut socket).await,
        Some(Message::Pong(b"are you there".to_vec().into()))
    );
    socket.close(None).await.unwrap();
    assert!(
        matches!(next_message(&mut socket).await, Some(Message::Close(_))),
        "the origin's close frame comes back"
    );
    assert_eq!(next_message(&mut socket).await, None, "then the tunnel ends");
}

#[tokio::test]
async fn websocket_is_tunnelled_without_a_policy() {
    let origin = EchoOrigin::start().await;
    let (running, proxy) = start_proxy(origin.addr, |_| {}).await;
    echo_session(proxy).await;
    let seen = origin.handshakes();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0]["upgrade"], "websocket",
        "the hop-by-hop Upgrade is sent for a pipe"
    );
    assert!(seen[0]["connection"]
        .to_str()
        .unwrap()
        .eq_ignore_ascii_case("upgrade"));
    assert!(seen[0].contains_key("sec-websocket-key"));
    assert_eq!(running.cache_usage().keys, 0, "a 101 is never stored");
    running.shutdown().await;
}

#[tokio::test]
async fn websocket_is_tunnelled_by_the_builtin_vcl_recv() {
    let origin = EchoOrigin::start().await;
    // The user's vcl_recv falls through to the builtin, which pipes the upgrade.
    let policy = write_policy(
        "ws-builtin",
        &format!(
            "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
             sub vcl_recv {{ set req.http.X-Seen = \"recv\"; }}\n",
            origin.addr.port()
        ),
    );
    let (running, proxy) = start_proxy(origin.addr, |config| config.policy = Some(policy)).await;
    echo_session(proxy).await;
    assert_eq!(
        origin.handshakes()[0]["x-seen"],
        "recv",
        "vcl_recv ran before the pipe"
    );
    assert_eq!(running.cache_usage().keys, 0, "a 101 is never stored");
    running.shutdown().await;
}

#[tokio::test]
async fn silent_pipe_is_closed_after_pipe_timeout() {
    let origin = EchoOrigin::start().await;
    let (running, proxy) = start_proxy(origin.addr, |config| {
        config.pipe_timeout = Duration::from_secs(1);
    })
    .await;
    let mut socket = connect(proxy).await.expect("handshake");
    // Traffic resets the idle clock.
    socket.send(Message::text("still here")).await.unwrap();
    assert_eq!(next_message(&mut socket).await, Some(Message::text("still here")));
    let silent_since = tokio::time::Instant::now();
    let ended = tokio::time::timeout(EXCHANGE_LIMIT, socket.next())
        .await
        .expect("the silent tunnel is closed");
    let waited = silent_since.elapsed();
    assert!(
        !matches!(ended, Some(Ok(Message::Text(_) | Message::Binary(_)))),
        "no data, the tunnel just ends: {ended:?}"
    );
    assert!(
        waited >= Duration::from_millis(900),
        "closed after {waited:?}, before pipe_timeout"
    );
    running.shutdown().await;
}

/// A raw origin for a custom protocol: it answers the handshake with `101`, then sends back
/// every byte it reads, reversed per read, until the client closes. The request head it got
/// goes to `heads`.
async fn reversing_origin(heads: Arc<Mutex<Vec<String>>>) -> SocketAddr {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let upgrade = head.to_ascii_lowercase().contains("\r\nupgrade: reverse");
                heads.lock().unwrap().push(head);
                if !upgrade {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nno-tunnel")
                        .await;
                    return;
                }
                let _ = stream
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: reverse\r\nConnection: Upgrade\r\n\r\n")
                    .await;
                let mut buffer = [0u8; 1024];
                loop {
                    let n = stream.read(&mut buffer).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer[..n].reverse();
                    if stream.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

const PIPE_POLICY: &str = r#"
sub vcl_recv {
    if (req.method == "TUNNEL" || req.method == "M-SEARCH") {
        return (pipe);
    }
}
sub vcl_pipe {
    set bereq.http.X-Piped = "by vcl_pipe";
    if (req.http.upgrade) {
        set bereq.http.upgrade = req.http.upgrade;
        set bereq.http.connection = "upgrade";
    }
}
"#;

fn pipe_policy(origin: SocketAddr) -> std::path::PathBuf {
    write_policy(
        "pipe",
        &format!(
            "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n{PIPE_POLICY}",
            origin.port()
        ),
    )
}

#[tokio::test]
async fn vcl_pipe_tunnels_a_custom_protocol_raw_bytes_both_ways() {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let origin = reversing_origin(heads.clone()).await;
    let policy = pipe_policy(origin);
    let (running, proxy) = start_proxy(origin, |config| config.policy = Some(policy)).await;
    let mut conn = RawConn::connect(proxy).await;
    conn.send("TUNNEL /t HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade\r\nUpgrade: reverse\r\n\r\n")
        .await;
    let switched = conn.response(false).await;
    assert_eq!(switched.status, 101);
    assert_eq!(switched.header("upgrade"), Some("reverse"));
    let mut stream = conn.into_stream();
    for text in ["abc", "hello tunnel", "\u{1}\u{2}xyz"] {
        stream.write_all(text.as_bytes()).await.unwrap();
        let mut back = vec![0u8; text.len()];
        tokio::time::timeout(EXCHANGE_LIMIT, stream.read_exact(&mut back))
            .await
            .expect("the origin's bytes in time")
            .unwrap();
        let expected: Vec<u8> = text.bytes().rev().collect();
        assert_eq!(back, expected, "raw bytes both ways");
    }
    let head = heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("TUNNEL /t HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains("x-piped: by vcl_pipe\r\n"),
        "vcl_pipe edits bereq: {head}"
    );
    assert_eq!(running.cache_usage().keys, 0);
    running.shutdown().await;
}

#[tokio::test]
async fn pipe_to_a_proxy_header_backend_starts_with_the_clients_address() {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let origin = reversing_origin(heads.clone()).await;
    let policy = write_policy(
        "pipe-proxy-header",
        &format!(
            "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; .proxy_header = 1; }}\n{PIPE_POLICY}",
            origin.port()
        ),
    );
    let (running, proxy) = start_proxy(origin, |config| config.policy = Some(policy)).await;
    let mut conn = RawConn::connect(proxy).await;
    conn.send("TUNNEL /t HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade\r\nUpgrade: reverse\r\n\r\n")
        .await;
    assert_eq!(conn.response(false).await.status, 101);
    let mut stream = conn.into_stream();
    stream.write_all(b"ab").await.unwrap();
    let mut back = [0u8; 2];
    tokio::time::timeout(EXCHANGE_LIMIT, stream.read_exact(&mut back))
        .await
        .expect("the origin's bytes in time")
        .unwrap();
    assert_eq!(&back, b"ba");
    let head = heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("PROXY TCP4 127.0.0.1 127.0.0.1 "), "{head}");
    assert!(head.contains("\r\nTUNNEL /t HTTP/1.1\r\n"), "{head}");
    running.shutdown().await;
}

#[tokio::test]
async fn piped_request_without_upgrade_gets_the_answer_then_its_connection_closes() {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let origin = reversing_origin(heads.clone()).await;
    let policy = pipe_policy(origin);
    let (running, proxy) = start_proxy(origin, |config| config.policy = Some(policy)).await;
    let mut conn = RawConn::connect(proxy).await;
    conn.send("M-SEARCH * HTTP/1.1\r\nHost: 239.255.255.250:1900\r\nMan: \"ssdp:discover\"\r\n\r\n")
        .await;
    let answer = conn.response(false).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, b"no-tunnel");
    assert!(
        conn.closed_by_peer(EXCHANGE_LIMIT).await,
        "a pipe's client connection is not reused"
    );
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    running.shutdown().await;
}

#[tokio::test]
async fn unknown_methods_are_passed_to_the_origin_with_and_without_a_policy() {
    let origin = Origin::fixed(OriginReply::ok("dav").cache_control("max-age=60")).await;
    let plain = write_policy(
        "unknown-methods",
        &format!(
            "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n",
            origin.addr.port()
        ),
    );
    for policy in [None, Some(plain)] {
        let with_policy = policy.is_some();
        let (running, proxy) = start_proxy(origin.addr, |config| config.policy = policy).await;
        for method in ["PROPFIND", "M-SEARCH"] {
            let reply = send(method, proxy, "/files/", &[], "").await;
            assert_eq!(
                reply.status,
                200,
                "{method} (policy: {with_policy}): {}",
                reply.text()
            );
            assert_eq!(reply.text(), "dav");
        }
        assert_eq!(running.cache_usage().keys, 0, "passed, not stored");
        running.shutdown().await;
    }
    assert_eq!(origin.requests(), 4);
}

#[tokio::test]
async fn stats_and_metrics_count_pipes_and_their_bytes() {
    let origin = EchoOrigin::start().await;
    let (running, proxy) = start_proxy(origin.addr, |config| {
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    echo_session(proxy).await;
    let admin = running.admin_addr().expect("admin API");
    let stats = edgecache_runtime::admin::client::call(admin, None, "GET", "/stats", "")
        .await
        .expect("/stats");
    let stats: serde_json::Value = serde_json::from_str(&stats.body).expect("JSON");
    assert_eq!(stats["pipes"], 1, "{stats}");
    // Three frames each way and the close frames, at least.
    assert!(stats["pipe_bytes"].as_u64().unwrap() > 40, "{stats}");
    let metrics = edgecache_runtime::admin::client::call(admin, None, "GET", "/metrics", "")
        .await
        .expect("/metrics")
        .body;
    assert!(
        metrics.contains("edgecache_requests_total{result=\"pipe\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("edgecache_pipe_bytes_total "), "{metrics}");
    running.shutdown().await;
}

#[tokio::test]
async fn max_pipes_refuses_the_next_pipe_with_503() {
    let origin = EchoOrigin::start().await;
    let (running, proxy) = start_proxy(origin.addr, |config| config.max_pipes = 1).await;
    let mut first = connect(proxy).await.expect("the first pipe fits");
    match connect(proxy).await {
        Err(WsError::Http(response)) => assert_eq!(response.status(), 503),
        other => panic!("the second pipe is refused, got {other:?}"),
    }
    // The first tunnel still works.
    first.send(Message::text("one")).await.unwrap();
    assert_eq!(next_message(&mut first).await, Some(Message::text("one")));
    assert_eq!(
        origin.handshakes().len(),
        1,
        "the refused pipe never reached the origin"
    );
    running.shutdown().await;
}

/// A client's WebSocket frame (masked, RFC 6455 §5.3), for payloads under 126 bytes.
fn client_frame(opcode: u8, payload: &[u8]) -> bytes::Bytes {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, byte)| byte ^ mask[i % 4]));
    frame.into()
}

/// A server's WebSocket frame (unmasked), for payloads under 126 bytes.
fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode, payload.len() as u8];
    frame.extend_from_slice(payload);
    frame
}

/// Reads `len` bytes of the stream's DATA, giving the window back as it goes.
async fn read_data(recv: &mut h2::RecvStream, len: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < len {
        let data = tokio::time::timeout(EXCHANGE_LIMIT, recv.data())
            .await
            .expect("data in time")
            .expect("the stream is open")
            .expect("valid data");
        let _ = recv.flow_control().release_capacity(data.len());
        got.extend_from_slice(&data);
    }
    got
}

#[tokio::test]
async fn websocket_over_h2_extended_connect_reaches_an_h1_origin() {
    let origin = EchoOrigin::start().await;
    let (running, proxy) = start_proxy(origin.addr, |_| {}).await;
    let tcp = TcpStream::connect(proxy).await.expect("connect");
    let (client, mut connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let mut ping = connection.ping_pong().expect("a ping handle");
    let h2_connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    // The server's SETTINGS come before its PONG.
    tokio::time::timeout(EXCHANGE_LIMIT, ping.ping(h2::Ping::opaque()))
        .await
        .expect("a pong in time")
        .expect("pong");
    assert!(
        client.is_extended_connect_protocol_enabled(),
        "SETTINGS_ENABLE_CONNECT_PROTOCOL"
    );
    let mut client = client.ready().await.expect("ready");
    let request = http::Request::builder()
        .method("CONNECT")
        .uri(format!("http://{proxy}/chat"))
        .header("sec-websocket-version", "13")
        .extension(h2::ext::Protocol::from("websocket"))
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).expect("extended CONNECT");
    let response = tokio::time::timeout(EXCHANGE_LIMIT, response)
        .await
        .expect("an answer in time")
        .expect("a response");
    assert_eq!(response.status(), 200);
    assert!(!response.headers().contains_key("sec-websocket-accept"));
    assert!(!response.headers().contains_key("upgrade"));
    let mut recv = response.into_body();
    // Text, binary, a ping answered with a pong, then the closing handshake.
    for (opcode, reply, payload) in [
        (0x1, 0x1, &b"hello over h2"[..]),
        (0x2, 0x2, &[0, 255, 7][..]),
        (0x9, 0xA, &b"ping"[..]),
        (0x8, 0x8, &[0x03, 0xE8][..]),
    ] {
        send.send_data(client_frame(opcode, payload), false)
            .expect("send");
        let expected = server_frame(reply, payload);
        assert_eq!(
            read_data(&mut recv, expected.len()).await,
            expected,
            "opcode {opcode}"
        );
    }
    // The origin closed, so does the stream (an empty DATA frame may carry its END_STREAM).
    loop {
        match tokio::time::timeout(EXCHANGE_LIMIT, recv.data())
            .await
            .expect("the end in time")
        {
            None => break,
            Some(Ok(data)) if data.is_empty() => continue,
            other => panic!("nothing after the close frame, got {other:?}"),
        }
    }
    let handshake = &origin.handshakes()[0];
    assert_eq!(handshake["upgrade"], "websocket");
    assert_eq!(handshake["sec-websocket-key"].len(), 24, "a fresh 16-byte key");
    assert_eq!(running.cache_usage().keys, 0);
    // Closes the client connection, so shutdown has nothing to wait for.
    h2_connection.abort();
    running.shutdown().await;
}

#[tokio::test]
async fn other_upgrades_are_ordinary_requests_on_a_kept_connection() {
    // `curl --http2 http://...` asks for h2c this way; edgecache answers over HTTP/1.1.
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let (running, proxy) = start_proxy(origin.addr, |_| {}).await;
    let mut conn = RawConn::connect(proxy).await;
    for round in 0..2 {
        conn.send(
            "GET /p HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
             Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
        )
        .await;
        let reply = conn.response(false).await;
        assert_eq!(reply.status, 200, "round {round}");
        assert_eq!(reply.body, b"page");
        assert!(!reply.has_header("upgrade"), "round {round}");
    }
    assert_eq!(
        origin.requests(),
        1,
        "the second was a hit on the same connection"
    );
    assert!(
        origin.last().header("upgrade").is_none(),
        "Upgrade is hop-by-hop on a fetch"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn zero_pipe_limits_are_refused_naming_the_flag() {
    for (tweak, flag) in [
        (
            Box::new(|c: &mut edgecache_runtime::Config| c.max_pipes = 0) as Box<dyn Fn(&mut _)>,
            "--max-pipes",
        ),
        (
            Box::new(|c: &mut edgecache_runtime::Config| c.pipe_timeout = Duration::ZERO),
            "--pipe-timeout",
        ),
    ] {
        let mut config = edgecache_runtime::Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
            ..Default::default()
        };
        tweak(&mut config);
        let error = match edgecache_runtime::start(config).await {
            Ok(_) => panic!("{flag} 0 is refused"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(flag), "{error}");
    }
}
