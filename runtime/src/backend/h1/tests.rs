//! The origin client against scripted origins on 127.0.0.1:0: what goes on the wire, how each
//! kind of response body is read, and when a connection is kept for another exchange; and the
//! framing a head's field lines give, parsed alone.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use super::{exchange, Connection, Error, Home, OnInformational};
use crate::backend::connector::OriginStream;
use crate::backend::OutgoingBody;

/// Bounds every wait on the origin.
const LIMIT: Duration = Duration::from_secs(5);

/// Takes the connection an exchange gives back.
#[derive(Default)]
struct Kept(Mutex<Option<Box<Connection>>>);

impl Home for Kept {
    fn keep(self: Arc<Self>, connection: Box<Connection>) {
        *self.0.lock().unwrap() = Some(connection);
    }
}

impl Kept {
    fn take(&self) -> Option<Box<Connection>> {
        self.0.lock().unwrap().take()
    }
}

/// A connected pair: the proxy's side as a [`Connection`], the origin's as a socket.
async fn pair() -> (Box<Connection>, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let (origin, _) = listener.accept().await.unwrap();
    (Connection::new(OriginStream::Plain(client)), origin)
}

/// Reads from the origin's side until `end` has arrived; returns everything read.
async fn read_until(origin: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(end.len()).any(|window| window == end) {
        let n = timeout(LIMIT, origin.read(&mut buf)).await.unwrap().unwrap();
        assert!(
            n > 0,
            "the client closed before sending {:?}; got {:?}",
            end,
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    seen
}

fn request(method: Method, body: OutgoingBody) -> Request<OutgoingBody> {
    let mut request = Request::builder().method(method).uri("/path?q=1");
    request = request.header("host", "origin.test");
    request.body(body).unwrap()
}

fn full(body: &'static [u8]) -> OutgoingBody {
    Full::new(Bytes::from_static(body))
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn empty() -> OutgoingBody {
    full(b"")
}

/// A body of unknown length: each item one frame.
fn streamed(frames: Vec<http_body::Frame<Bytes>>) -> OutgoingBody {
    let frames = futures_util::stream::iter(frames.into_iter().map(Ok));
    StreamBody::new(frames).boxed_unsync()
}

/// The response's body bytes and trailers, and whether the connection went home.
async fn read_all(answered: super::Answered) -> (StatusCode, Bytes, Option<http::HeaderMap>, Arc<Kept>) {
    let kept = Arc::new(Kept::default());
    let home = Arc::downgrade(&kept) as Weak<dyn Home>;
    let response = answered.into_response(Some(home));
    let status = response.status();
    let collected = timeout(LIMIT, response.into_body().collect())
        .await
        .unwrap()
        .unwrap();
    let trailers = collected.trailers().cloned();
    (status, collected.to_bytes(), trailers, kept)
}

async fn send(
    connection: Box<Connection>,
    request: Request<OutgoingBody>,
) -> Result<super::Answered, super::Failed> {
    let (head, body) = request.into_parts();
    timeout(LIMIT, exchange(connection, &head, body)).await.unwrap()
}

#[tokio::test]
async fn a_bodiless_get_is_one_head_and_a_sized_answer_leaves_the_connection_for_the_next() {
    let (connection, mut origin) = pair().await;
    let client = tokio::spawn(async move {
        let answered = send(connection, request(Method::GET, empty())).await.unwrap();
        let (status, body, _, kept) = read_all(answered).await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"hello"[..]));
        let again = kept
            .take()
            .expect("a fully read sized body gives its connection back");
        let answered = send(again, request(Method::GET, empty())).await.unwrap();
        read_all(answered).await.1
    });
    let head = read_until(&mut origin, b"\r\n\r\n").await;
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET /path?q=1 HTTP/1.1\r\nhost: origin.test\r\n\r\n",
        "no framing field for a request without a body"
    );
    // The body arrives in two writes: the client reads it across reads.
    origin
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel")
        .await
        .unwrap();
    origin.flush().await.unwrap();
    tokio::task::yield_now().await;
    origin.write_all(b"lo").await.unwrap();
    read_until(&mut origin, b"\r\n\r\n").await;
    origin
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        .await
        .unwrap();
    assert_eq!(&timeout(LIMIT, client).await.unwrap().unwrap()[..], b"hi");
}

#[tokio::test]
async fn a_chunked_answer_is_decoded_with_its_trailers_and_informational_ones_go_first() {
    let (connection, mut origin) = pair().await;
    let interim = Arc::new(Mutex::new(Vec::new()));
    let mut get = request(Method::GET, empty());
    let seen = interim.clone();
    get.extensions_mut().insert(OnInformational::new(move |response| {
        seen.lock().unwrap().push(response.status());
    }));
    let client = tokio::spawn(async move { read_all(send(connection, get).await.unwrap()).await });
    read_until(&mut origin, b"\r\n\r\n").await;
    origin
        .write_all(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n\
              HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n",
        )
        .await
        .unwrap();
    let (status, body, trailers, kept) = timeout(LIMIT, client).await.unwrap().unwrap();
    assert_eq!(*interim.lock().unwrap(), [StatusCode::EARLY_HINTS]);
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"hello world"[..]));
    assert_eq!(trailers.unwrap()["x-sum"], "42");
    assert!(
        kept.take().is_some(),
        "a chunked body read to its end leaves the connection reusable"
    );
}

#[tokio::test]
async fn a_post_of_unknown_length_is_chunked_and_a_known_one_gets_its_length() {
    let (connection, mut origin) = pair().await;
    let frames = vec![
        http_body::Frame::data(Bytes::from_static(b"abc")),
        http_body::Frame::data(Bytes::from_static(b"defgh")),
    ];
    let client = tokio::spawn(async move {
        let answered = send(connection, request(Method::POST, streamed(frames)))
            .await
            .unwrap();
        let kept = read_all(answered).await.3;
        let again = kept.take().unwrap();
        read_all(send(again, request(Method::PUT, full(b"xyz"))).await.unwrap())
            .await
            .0
    });
    let sent = read_until(&mut origin, b"0\r\n\r\n").await;
    assert_eq!(
        String::from_utf8(sent).unwrap(),
        "POST /path?q=1 HTTP/1.1\r\nhost: origin.test\r\ntransfer-encoding: chunked\r\n\r\n\
         3\r\nabc\r\n5\r\ndefgh\r\n0\r\n\r\n"
    );
    origin
        .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
        .await
        .unwrap();
    let sent = read_until(&mut origin, b"xyz").await;
    assert_eq!(
        String::from_utf8(sent).unwrap(),
        "PUT /path?q=1 HTTP/1.1\r\nhost: origin.test\r\ncontent-length: 3\r\n\r\nxyz"
    );
    origin
        .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        timeout(LIMIT, client).await.unwrap().unwrap(),
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn an_answer_before_the_whole_request_body_is_heard_and_the_connection_is_not_kept() {
    let (connection, mut origin) = pair().await;
    // A body that sends one frame, then never ends.
    let (feed, body) = channel_body();
    feed.send(Bytes::from_static(b"part")).await.unwrap();
    let client = tokio::spawn(async move {
        let answered = send(connection, request(Method::POST, body)).await.unwrap();
        read_all(answered).await
    });
    read_until(&mut origin, b"4\r\npart\r\n").await;
    origin
        .write_all(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 4\r\n\r\nbig!")
        .await
        .unwrap();
    let (status, body, _, kept) = timeout(LIMIT, client).await.unwrap().unwrap();
    assert_eq!((status, &body[..]), (StatusCode::PAYLOAD_TOO_LARGE, &b"big!"[..]));
    assert!(
        kept.take().is_none(),
        "a request body left half sent makes the connection unusable"
    );
    drop(feed);
}

/// A request body fed through a channel, of unknown length.
fn channel_body() -> (tokio::sync::mpsc::Sender<Bytes>, OutgoingBody) {
    let (feed, frames) = tokio::sync::mpsc::channel::<Bytes>(4);
    let frames = futures_util::stream::unfold(frames, |mut frames| async move {
        let data = frames.recv().await?;
        Some((Ok(http_body::Frame::data(data)), frames))
    });
    (feed, StreamBody::new(frames).boxed_unsync())
}

/// A `method` request answered with `answer` (the origin closes afterwards when
/// `then_close`): the status, the body read, and whether the connection went home.
async fn answered_with(method: Method, answer: &'static [u8], then_close: bool) -> (StatusCode, Bytes, bool) {
    let (connection, origin) = pair().await;
    answered_on(connection, origin, method, answer, then_close).await
}

/// [`answered_with`] on a given connection and its origin side.
async fn answered_on(
    connection: Box<Connection>,
    mut origin: TcpStream,
    method: Method,
    answer: &'static [u8],
    then_close: bool,
) -> (StatusCode, Bytes, bool) {
    let client =
        tokio::spawn(
            async move { read_all(send(connection, request(method, empty())).await.unwrap()).await },
        );
    read_until(&mut origin, b"\r\n\r\n").await;
    origin.write_all(answer).await.unwrap();
    if then_close {
        drop(origin);
    }
    let (status, body, _, kept) = timeout(LIMIT, client).await.unwrap().unwrap();
    (status, body, kept.take().is_some())
}

/// A GET answered with `answer`: the body read, and whether the connection went home.
async fn get_answered(answer: &'static [u8], then_close: bool) -> (Bytes, bool) {
    let (_, body, kept) = answered_with(Method::GET, answer, then_close).await;
    (body, kept)
}

#[tokio::test]
async fn a_body_until_close_ends_with_the_connection_and_extra_bytes_forbid_reuse() {
    let (body, kept) = get_answered(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", true).await;
    assert_eq!((&body[..], kept), (&b"until the end"[..], false));

    let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n";
    let (body, kept) = get_answered(extra, false).await;
    assert_eq!(&body[..], b"ok");
    assert!(!kept, "bytes nobody asked for follow the body");
}

#[tokio::test]
async fn malformed_answers_fail_the_exchange_or_the_body() {
    let cases: [(&[u8], &str); 4] = [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", "Content-Length"),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.0",
        ),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "invalid response head"),
    ];
    for (answer, named) in cases {
        let (connection, mut origin) = pair().await;
        let client = tokio::spawn(async move { send(connection, request(Method::GET, empty())).await });
        read_until(&mut origin, b"\r\n\r\n").await;
        origin.write_all(answer).await.unwrap();
        let failed = timeout(LIMIT, client)
            .await
            .unwrap()
            .unwrap()
            .err()
            .expect("refused");
        assert!(
            failed.error.to_string().contains(named),
            "{:?}: {}",
            String::from_utf8_lossy(answer),
            failed.error
        );
        assert!(!failed.unanswered);
    }

    let error = body_error(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort".to_vec(),
        true,
    )
    .await;
    assert!(matches!(error, Some(Error::BodyCut(5))), "{error:?}");
}

/// How the body of a GET answered with `answer` fails (the origin closes afterwards when
/// `then_close`); `None` when it does not.
async fn body_error(answer: Vec<u8>, then_close: bool) -> Option<Error> {
    let (connection, mut origin) = pair().await;
    let client = tokio::spawn(async move {
        let answered = send(connection, request(Method::GET, empty())).await.unwrap();
        answered.into_response(None).into_body().collect().await.err()
    });
    read_until(&mut origin, b"\r\n\r\n").await;
    origin.write_all(&answer).await.unwrap();
    if then_close {
        drop(origin);
    }
    timeout(LIMIT, client).await.unwrap().unwrap()
}

#[tokio::test]
async fn a_connection_closed_before_any_answer_is_reported_unanswered() {
    let (connection, mut origin) = pair().await;
    let client = tokio::spawn(async move { send(connection, request(Method::GET, empty())).await });
    read_until(&mut origin, b"\r\n\r\n").await;
    drop(origin);
    let failed = timeout(LIMIT, client)
        .await
        .unwrap()
        .unwrap()
        .err()
        .expect("no answer");
    assert!(
        matches!(failed.error, Error::Closed) && failed.unanswered,
        "{failed:?}"
    );
}

#[tokio::test]
async fn a_switch_of_protocols_hands_over_the_connection_with_the_bytes_behind_the_head() {
    let (connection, mut origin) = pair().await;
    let client = tokio::spawn(async move {
        let answered = send(connection, request(Method::GET, empty())).await.unwrap();
        assert_eq!(answered.status(), StatusCode::SWITCHING_PROTOCOLS);
        let (_, mut tunnel) = answered.into_tunnel();
        tunnel.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 10];
        tunnel.read_exact(&mut got).await.unwrap();
        got
    });
    read_until(&mut origin, b"\r\n\r\n").await;
    origin
        .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nearly")
        .await
        .unwrap();
    let mut ping = [0u8; 4];
    timeout(LIMIT, origin.read_exact(&mut ping))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&ping, b"ping");
    origin.write_all(b"+late").await.unwrap();
    assert_eq!(&timeout(LIMIT, client).await.unwrap().unwrap(), b"early+late");
}

#[tokio::test]
async fn a_connect_answered_with_2xx_is_a_tunnel_and_never_kept() {
    let answer = b"HTTP/1.1 200 Connection Established\r\n\r\n";
    let (status, body, kept) = answered_with(Method::CONNECT, answer, false).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 0));
    assert!(
        !kept,
        "the bytes that follow belong to the tunnel, not to another exchange"
    );
}

#[tokio::test]
async fn chunk_size_lines_are_read_as_strictly_as_hyper_did() {
    let lines: [&[u8]; 4] = [
        b"1;\nx\r\na\r\n0\r\n\r\n",
        b"\r\na\r\n0\r\n\r\n",
        b"1\na\r\n0\r\n\r\n",
        b"1x\r\na\r\n0\r\n\r\n",
    ];
    for line in lines {
        let error = body_error(
            [
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
                line,
            ]
            .concat(),
            false,
        )
        .await;
        assert!(
            matches!(error, Some(Error::Invalid(_))),
            "{:?}: {error:?}",
            String::from_utf8_lossy(line)
        );
    }
}

/// A body that announces `announced` bytes and sends `data`.
struct Announcing {
    announced: u64,
    data: Option<Bytes>,
}

impl http_body::Body for Announcing {
    type Data = Bytes;
    type Error = crate::cache::body::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.data.take().map(|data| Ok(http_body::Frame::data(data))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.announced)
    }
}

#[tokio::test]
async fn a_request_body_that_breaks_its_announced_length_fails_and_no_excess_is_written() {
    for (announced, data, named) in [(3, &b"12345"[..], "longer"), (9, &b"12345"[..], "short")] {
        let (connection, mut origin) = pair().await;
        let body = Announcing {
            announced,
            data: Some(Bytes::from_static(data)),
        };
        let post = request(Method::POST, body.boxed_unsync());
        let failed = send(connection, post).await.err().expect("refused");
        assert!(failed.error.to_string().contains(named), "{}", failed.error);
        let head = read_until(&mut origin, b"\r\n\r\n").await;
        assert!(
            announced > data.len() as u64 || !head.ends_with(b"12345"),
            "a body longer than announced was not written: {:?}",
            String::from_utf8_lossy(&head)
        );
    }
}

#[tokio::test]
async fn an_http10_origin_connection_is_not_kept_even_with_keep_alive() {
    let (_, kept) = get_answered(
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await;
    assert!(
        !kept,
        "the next request would be HTTP/1.1, which an HTTP/1.0 origin need not read"
    );
    let (_, kept) = get_answered(
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await;
    assert!(!kept, "`close` wins");
    let (_, kept) = get_answered(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false).await;
    assert!(kept);
}

#[tokio::test]
async fn a_trailer_section_past_16_kib_is_refused_as_such() {
    let long = format!("x-long: {}\r\n", "t".repeat(17 * 1024));
    let answer = [
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n"[..],
        long.as_bytes(),
    ]
    .concat();
    let error = body_error(answer, false).await;
    assert!(matches!(error, Some(Error::TrailersTooLarge)), "{error:?}");
}

#[test]
fn framing_is_read_from_the_field_lines_as_the_rfc_orders_it() {
    use super::head::{parse_response, Framing, Parsed};
    // `None`: refused for its Content-Length.
    let cases: [(&str, Option<(Framing, bool)>); 14] = [
        ("Content-Length: 5, 5", Some((Framing::Length(5), true))),
        (
            "Content-Length: 5\r\ncontent-length: 5",
            Some((Framing::Length(5), true)),
        ),
        ("CONTENT-LENGTH: 007", Some((Framing::Length(7), true))),
        ("Content-Length: 0", Some((Framing::Empty, true))),
        ("Content-Length: 5\r\nContent-Length: 5, 6", None),
        ("Content-Length: 99999999999999999999", None),
        (
            "Content-Length: 18446744073709551615",
            Some((Framing::Length(u64::MAX), true)),
        ),
        ("Content-Length: 5,", None),
        ("Content-Length: ", None),
        ("Transfer-Encoding: gzip, Chunked", Some((Framing::Chunked, true))),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip",
            Some((Framing::UntilClose, false)),
        ),
        // Both: the length is ignored and the connection is not kept (request smuggling).
        (
            "Content-Length: 3\r\nTransfer-Encoding: chunked",
            Some((Framing::Chunked, false)),
        ),
        (
            "Connection: Keep-Alive, CLOSE\r\nContent-Length: 2",
            Some((Framing::Length(2), false)),
        ),
        ("Server: test", Some((Framing::UntilClose, false))),
    ];
    for (fields, expected) in cases {
        let head = format!("HTTP/1.1 200 OK\r\n{fields}\r\n\r\n");
        let mut buffer = bytes::BytesMut::from(head.as_bytes());
        let parsed = parse_response(&mut buffer, &Method::GET);
        let got = match parsed {
            Ok(Some(Parsed::Final(last))) => Some((last.framing, last.reusable)),
            Ok(_) => panic!("{fields:?}: not a final head"),
            Err(error) => {
                assert!(
                    error.to_string().contains("Content-Length"),
                    "{fields:?}: {error}"
                );
                None
            }
        };
        assert_eq!(got, expected, "{fields:?}");
    }
}

#[tokio::test]
async fn a_connection_going_idle_lets_go_of_a_large_read_buffer_and_still_serves() {
    let (mut connection, origin) = pair().await;
    // As the reads of a large body leave it: empty, with room for the largest read.
    connection.buffer.reserve(super::MAX_READ);
    connection.going_idle();
    assert_eq!(connection.buffer.capacity(), 0, "a large empty buffer is let go");

    connection.buffer.reserve(super::IDLE_BUFFER / 2);
    let small = connection.buffer.capacity();
    connection.going_idle();
    assert_eq!(
        connection.buffer.capacity(),
        small,
        "a small buffer is kept for reuse"
    );

    // Reads grown large: what is left of their allocation may look small, and goes too.
    connection.reads.next = super::MAX_READ;
    connection.going_idle();
    assert_eq!(
        connection.buffer.capacity(),
        0,
        "a buffer the reads grew is let go"
    );

    // Bytes the origin sent unasked are never dropped (the pool's probe refuses the connection).
    connection
        .buffer
        .extend_from_slice(&[b'x'; super::IDLE_BUFFER + 1]);
    connection.going_idle();
    assert_eq!(
        connection.buffer.len(),
        super::IDLE_BUFFER + 1,
        "unread bytes are kept"
    );
    connection.buffer.clear();
    connection.reads.next = super::READ_SIZE;

    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (_, body, kept) = answered_on(connection, origin, Method::GET, answer, false).await;
    assert_eq!(
        (&body[..], kept),
        (&b"ok"[..], true),
        "the emptied buffer reads anew"
    );
}
