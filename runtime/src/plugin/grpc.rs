//! gRPC for plugins' `proxy_grpc_call` / `proxy_grpc_stream`: one exchange over HTTP/2
//! cleartext (prior knowledge) with the gRPC framing (a 5-byte prefix per message: a
//! compressed flag and a big-endian length), the status from `grpc-status` / `grpc-message` in
//! the trailers (or in a trailers-only response), and gRPC status codes for transport failures.
//! The proxy hands it the upstream's addresses; it knows no backend.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, TE};
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;

use super::upstream::{GrpcEvent, GrpcEventSender, GrpcRequest};

/// gRPC status codes this module produces itself.
mod code {
    pub const UNKNOWN: u32 = 2;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
    pub const PERMISSION_DENIED: u32 = 7;
}

/// The largest response message accepted (as the HTTP calls' answer limit).
const MAX_MESSAGE: usize = 16 << 20;

/// Runs one exchange with the first of `addrs` that accepts a connection and reports it on
/// `events`, ending with [`GrpcEvent::Close`]. Returns early, resetting the stream, when
/// `events` is closed.
pub async fn exchange(
    addrs: Vec<SocketAddr>,
    connect_timeout: Duration,
    authority: String,
    request: GrpcRequest,
    events: GrpcEventSender,
) {
    let timeout = request.timeout;
    let run = run(addrs, connect_timeout, authority, request, &events);
    let close = tokio::select! {
        close = async {
            match timeout {
                Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or_else(|_| Close {
                    status: code::DEADLINE_EXCEEDED,
                    message: format!("no answer within {limit:?}"),
                }),
                None => run.await,
            }
        } => close,
        () = events.closed() => return,
    };
    let _ = events.send(GrpcEvent::Close {
        status: close.status,
        message: close.message,
    });
}

struct Close {
    status: u32,
    message: String,
}

fn fail(status: u32, message: impl Into<String>) -> Close {
    Close {
        status,
        message: message.into(),
    }
}

async fn run(
    addrs: Vec<SocketAddr>,
    connect_timeout: Duration,
    authority: String,
    request: GrpcRequest,
    events: &GrpcEventSender,
) -> Close {
    let mut stream = None;
    let mut why = String::from("the upstream has no address");
    for addr in addrs {
        match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                stream = Some(s);
                break;
            }
            Ok(Err(e)) => why = format!("cannot connect to {addr}: {e}"),
            Err(_) => why = format!("cannot connect to {addr} within {connect_timeout:?}"),
        }
    }
    let Some(stream) = stream else {
        return fail(code::UNAVAILABLE, why);
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, connection) = match hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
    {
        Ok(pair) => pair,
        Err(e) => return fail(code::UNAVAILABLE, format!("HTTP/2 handshake: {e}")),
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });

    let GrpcRequest {
        service,
        method,
        metadata,
        messages,
        timeout,
    } = request;
    let mut builder = Request::builder()
        .method(Method::POST)
        .version(Version::HTTP_2)
        .uri(format!("http://{authority}/{service}/{method}"))
        .header(CONTENT_TYPE, "application/grpc")
        .header(TE, "trailers");
    if let Some(limit) = timeout {
        builder = builder.header("grpc-timeout", format!("{}m", limit.as_millis().max(1)));
    }
    let Ok(mut head) = builder.body(MessageBody(messages)) else {
        return fail(
            code::INTERNAL,
            format!("invalid service or method name `/{service}/{method}`"),
        );
    };
    for (name, value) in &metadata {
        head.headers_mut().append(name, value.clone());
    }
    let response = match sender.send_request(head).await {
        Ok(response) => response,
        Err(e) => return fail(code::UNAVAILABLE, format!("sending the request: {e}")),
    };
    let (parts, mut body) = response.into_parts();
    if parts.status != StatusCode::OK {
        return fail(
            status_of_http(parts.status),
            format!("the upstream answered HTTP {}", parts.status),
        );
    }
    if let Some(close) = status_of(&parts.headers) {
        // Trailers-only: the status came with the headers.
        return close;
    }
    let _ = events.send(GrpcEvent::InitialMetadata(strip(parts.headers)));

    let mut buffer = BytesMut::new();
    loop {
        let frame = match body.frame().await {
            None => return fail(code::UNKNOWN, "the response ended without grpc-status"),
            Some(Err(e)) => return fail(code::UNAVAILABLE, format!("reading the response: {e}")),
            Some(Ok(frame)) => frame,
        };
        let frame = match frame.into_data() {
            Ok(data) => {
                buffer.extend_from_slice(&data);
                while let Some(message) = match next_message(&mut buffer) {
                    Ok(message) => message,
                    Err(close) => return close,
                } {
                    let _ = events.send(GrpcEvent::Message(message));
                }
                continue;
            }
            Err(frame) => frame,
        };
        if let Ok(trailers) = frame.into_trailers() {
            let close = status_of(&trailers)
                .unwrap_or_else(|| fail(code::UNKNOWN, "the trailers have no grpc-status"));
            let _ = events.send(GrpcEvent::TrailingMetadata(strip(trailers)));
            return close;
        }
    }
}

/// Takes one whole message off the front of `buffer`, if there is one.
fn next_message(buffer: &mut BytesMut) -> Result<Option<Bytes>, Close> {
    if buffer.len() < 5 {
        return Ok(None);
    }
    if buffer[0] != 0 {
        return Err(fail(
            code::UNIMPLEMENTED,
            "compressed gRPC messages are not supported",
        ));
    }
    let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
    if length > MAX_MESSAGE {
        return Err(fail(
            code::RESOURCE_EXHAUSTED,
            format!("a response message of {length} bytes (at most {MAX_MESSAGE})"),
        ));
    }
    if buffer.len() < 5 + length {
        return Ok(None);
    }
    buffer.advance(5);
    Ok(Some(buffer.split_to(length).freeze()))
}

/// One message with its 5-byte prefix.
pub(crate) fn frame(message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.extend_from_slice(message);
    framed.freeze()
}

fn status_of(headers: &HeaderMap) -> Option<Close> {
    let status = headers.get("grpc-status")?;
    let status = status
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(code::UNKNOWN);
    let message = headers
        .get("grpc-message")
        .map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned())
        .unwrap_or_default();
    Some(Close { status, message })
}

/// Metadata as the plugin sees it: without the status, which comes with the close.
fn strip(mut headers: HeaderMap) -> HeaderMap {
    headers.remove("grpc-status");
    headers.remove("grpc-message");
    headers
}

/// The gRPC status for an HTTP status that is not 200 (as gRPC's "HTTP to gRPC status code
/// mapping" says).
fn status_of_http(status: StatusCode) -> u32 {
    match status.as_u16() {
        400 => code::INTERNAL,
        401 => code::UNAUTHENTICATED,
        403 => code::PERMISSION_DENIED,
        404 => code::UNIMPLEMENTED,
        429 | 502..=504 => code::UNAVAILABLE,
        _ => code::UNKNOWN,
    }
}

/// The request body: each message the plugin sends, framed; it ends when the sender is gone.
struct MessageBody(UnboundedReceiver<Bytes>);

impl Body for MessageBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|message| message.map(|m| Ok(Frame::data(frame(&m)))))
    }
}

/// Metadata pairs from a plugin (invalid names or values are skipped, as header writes are).
pub(crate) fn metadata(pairs: &[(&[u8], &[u8])]) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_taken_whole_from_split_frames() {
        let mut buffer = BytesMut::new();
        let two = [frame(b"first"), frame(b"")].concat();
        buffer.extend_from_slice(&two[..7]);
        assert!(
            next_message(&mut buffer).ok().flatten().is_none(),
            "half a message waits"
        );
        buffer.extend_from_slice(&two[7..]);
        assert_eq!(
            next_message(&mut buffer).ok().flatten().as_deref(),
            Some(&b"first"[..])
        );
        assert_eq!(
            next_message(&mut buffer).ok().flatten().as_deref(),
            Some(&b""[..])
        );
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_compressed_message_closes_the_call_unimplemented() {
        let mut buffer = BytesMut::from(&[1u8, 0, 0, 0, 1, 7][..]);
        assert!(matches!(
            next_message(&mut buffer),
            Err(Close {
                status: code::UNIMPLEMENTED,
                ..
            })
        ));
    }
}
