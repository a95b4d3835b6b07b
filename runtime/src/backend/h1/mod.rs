//! HTTP/1.1 to an origin, spoken by edgecache itself in the task of the request that needs it.
//!
//! An exchange writes the request head in one write, reads the response head into the
//! connection's buffer and parses it there ([`head`]), and serves the body from the same buffer
//! ([`body::OriginBody`]), which gives the connection back to its [`Home`] (the pool) when the
//! body has ended cleanly and the connection can carry another exchange. Nothing is spawned
//! and nothing crosses a channel: the request's task drives its origin connection, as nginx
//! and HAProxy do in their event loops. hyper's client connection (a task per connection, a
//! dispatch channel and a oneshot per request, four polls of that task per exchange) cost a
//! pass more than a third of its instructions (docs/BENCHMARKS.md, session 12).
//!
//! The framing rules are hyper's client's, so nothing on the wire changed: what a request
//! body needs (`Content-Length` or chunked, none on a GET of unknown length), RFC 9112 §6.3 for
//! the response body, 1xx responses handed to the request's [`OnInformational`] before the
//! final one. A request body is written while the response is read, so an origin that answers
//! before it has read the whole body (a 413) is heard; such a connection is not reused.

mod body;
mod head;
mod tunnel;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use http::{header, request, HeaderName, Response};
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub use body::OriginBody;
use head::{Final, Parsed, RequestFraming};
pub use tunnel::Tunnel;

use super::connector::OriginStream;
use super::OutgoingBody;
use crate::cache::body::BoxError;
use crate::turn;

/// The room made in a connection's buffer for its first read.
const READ_SIZE: usize = 8192;

/// The most room a read may ask for ([`head::MAX_HEAD`], as hyper's).
const MAX_READ: usize = head::MAX_HEAD;

/// Read room an idle connection keeps. A large body's reads grow the buffer towards
/// [`MAX_READ`], and a pool of such connections would hold that much each while idle: 100
/// connections that had carried 200 KiB bodies kept about 45 MB (`benches/memory_per_object.sh`).
const IDLE_BUFFER: usize = 64 * 1024;

/// Bytes a chunk-size line may take.
const MAX_CHUNK_LINE: usize = 4096;

/// An open connection to an origin and the bytes read from it that no exchange has used yet.
pub(super) struct Connection {
    stream: OriginStream,
    buffer: BytesMut,
    reads: ReadSize,
}

/// How much room the next read gets, as hyper's adaptive read strategy sizes it: doubled after
/// a read that filled it, halved after two reads in a row that used less than half.
struct ReadSize {
    next: usize,
    shrink_next: bool,
}

impl ReadSize {
    fn record(&mut self, read: usize) {
        if read >= self.next {
            self.next = (self.next * 2).min(MAX_READ);
            self.shrink_next = false;
        } else if read < self.next / 2 {
            if self.shrink_next {
                self.next = (self.next / 2).max(READ_SIZE);
            }
            self.shrink_next = !self.shrink_next;
        } else {
            self.shrink_next = false;
        }
    }
}

/// Where a connection goes when an exchange ended cleanly on it and it can carry another.
pub(super) trait Home: Send + Sync {
    fn keep(self: Arc<Self>, connection: Box<Connection>);
}

/// Called with each informational (1xx) response the origin sends before its final one, in
/// order, when set in a request's extensions.
#[derive(Clone)]
pub struct OnInformational(Arc<dyn Fn(Response<()>) + Send + Sync>);

impl OnInformational {
    pub fn new(call: impl Fn(Response<()>) + Send + Sync + 'static) -> OnInformational {
        OnInformational(Arc::new(call))
    }
}

/// Why an exchange or its response body failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the origin closed the connection before a complete response head")]
    Closed,
    #[error("the origin closed the connection {0} bytes before the end of the body")]
    BodyCut(u64),
    #[error("the origin closed the connection inside a chunked body")]
    ChunksCut,
    #[error("reading from the origin: {0}")]
    Read(#[source] io::Error),
    #[error("invalid response head: {0}")]
    Parse(#[source] httparse::Error),
    #[error("response head larger than {} bytes", head::MAX_HEAD)]
    HeadTooLarge,
    #[error("invalid trailer fields: {0}")]
    Trailers(#[source] httparse::Error),
    #[error("trailer section larger than {} bytes", body::MAX_TRAILERS)]
    TrailersTooLarge,
    #[error("invalid response: {0}")]
    Invalid(&'static str),
    #[error("the request body failed: {0}")]
    RequestBody(#[source] BoxError),
}

/// A failed exchange, and whether it may be tried again on another connection.
#[derive(Debug)]
pub(super) struct Failed {
    pub error: Error,
    /// Nothing of a response arrived: the origin closed or reset the connection first, as one
    /// that closed a kept-alive connection while the request was on its way would.
    pub unanswered: bool,
}

/// The final response head of an exchange, with the connection its body (or a tunnel) follows
/// on.
pub(super) struct Answered {
    head: http::response::Parts,
    framing: head::Framing,
    reusable: bool,
    connection: Box<Connection>,
    /// The rest of the request body, when the origin answered before it was all sent.
    sending: Option<Box<Sending>>,
}

impl Connection {
    /// A connection boxed once, so that it moves between the pool and the bodies read from it
    /// as a pointer.
    pub(super) fn new(stream: OriginStream) -> Box<Connection> {
        Box::new(Connection {
            stream,
            buffer: BytesMut::new(),
            reads: ReadSize {
                next: READ_SIZE,
                shrink_next: false,
            },
        })
    }

    /// Reads what the origin has sent into the buffer; `Ok(0)` when it has closed.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let room = self.reads.next;
        if self.buffer.capacity() - self.buffer.len() < room {
            self.buffer.reserve(room);
        }
        let read = std::task::ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.stream),
            cx,
            &mut self.buffer
        ));
        if let Ok(read) = read {
            self.reads.record(read);
        }
        Poll::Ready(read)
    }

    /// Lets go of a large read buffer before the connection waits idle. The next exchange
    /// reserves room anew, as large as the reads had grown (the read size is kept). The read
    /// size counts too: the buffer's own capacity is only the room left behind the bodies split
    /// off it, and that view holds their whole allocation.
    pub(super) fn going_idle(&mut self) {
        let large = self.buffer.capacity() > IDLE_BUFFER || self.reads.next > IDLE_BUFFER;
        if self.buffer.is_empty() && large {
            self.buffer = BytesMut::new();
        }
    }

    /// Whether the connection still looks open and quiet: the origin has not closed it or sent
    /// anything unasked while it was idle. Does not wait; a read the runtime has not seen yet
    /// is found by the exchange ([`Failed::unanswered`]).
    pub(super) fn is_reusable(&mut self) -> bool {
        let mut probe = [0u8; 1];
        match &mut self.stream {
            // Without a syscall while nothing arrived since the last read drained the socket;
            // `try_read` also spends no cooperative budget, which would make it look quiet.
            OriginStream::Plain(tcp) => {
                matches!(tcp.try_read(&mut probe), Err(error) if error.kind() == io::ErrorKind::WouldBlock)
            }
            // Through the TLS session: it may hold decrypted bytes the socket no longer shows.
            OriginStream::Tls(tls) => {
                let mut cx = Context::from_waker(Waker::noop());
                let mut probe = ReadBuf::new(&mut probe);
                let mut read = tokio::task::unconstrained(poll_fn(|cx| {
                    Poll::Ready(Pin::new(tls.as_mut()).poll_read(cx, &mut probe))
                }));
                matches!(Pin::new(&mut read).poll(&mut cx), Poll::Ready(Poll::Pending))
            }
        }
    }
}

/// Sends the request (`head` and `body`) on `connection` and waits for the final response
/// head, handing informational ones to the request's [`OnInformational`].
pub(super) async fn exchange(
    mut connection: Box<Connection>,
    head: &request::Parts,
    body: OutgoingBody,
) -> Result<Answered, Failed> {
    let (bytes, framing) = head::encode_request(head, body.is_end_stream(), body.size_hint().exact());
    let mut sending = Sending::new(bytes, body, framing, &head.headers);
    // The origin gets the requests of the tasks woken together in one burst (`crate::turn`).
    turn::take().await;
    let informational = head.extensions.get::<OnInformational>();
    let mut answered = false;
    // Bytes arrived that no parse has looked at yet.
    let mut unparsed = false;
    let outcome = poll_fn(|cx| loop {
        if let Err(error) = sending.poll(&mut connection.stream, cx) {
            return Poll::Ready(Err(Error::RequestBody(error)));
        }
        while unparsed {
            match head::parse_response(&mut connection.buffer, &head.method) {
                Ok(None) => unparsed = false,
                Ok(Some(Parsed::Interim(interim))) => {
                    if let Some(OnInformational(call)) = informational {
                        call(interim);
                    }
                }
                Ok(Some(Parsed::Final(last))) => return Poll::Ready(Ok(last)),
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
        match std::task::ready!(connection.poll_read(cx)) {
            Ok(0) => return Poll::Ready(Err(Error::Closed)),
            Ok(_) => {
                answered = true;
                unparsed = true;
            }
            Err(error) => return Poll::Ready(Err(Error::Read(error))),
        }
    })
    .await;
    let Final {
        head: response,
        framing,
        reusable,
    } = outcome.map_err(|error| Failed {
        error,
        unanswered: !answered,
    })?;
    let reusable = reusable && !head::says_close(&head.headers);
    Ok(Answered {
        head: response,
        framing,
        reusable,
        connection,
        sending: (!sending.done()).then(|| Box::new(sending)),
    })
}

impl Answered {
    pub(super) fn status(&self) -> http::StatusCode {
        self.head.status
    }

    /// The response, its body read from the connection, which goes to `home` when the body
    /// has ended cleanly and the connection can carry another exchange.
    pub(super) fn into_response(self, home: Option<Weak<dyn Home>>) -> Response<OriginBody> {
        let body = OriginBody::new(self.connection, self.framing, self.reusable, self.sending, home);
        Response::from_parts(self.head, body)
    }

    /// The head of a `101 Switching Protocols`, and the connection as the tunnel that follows.
    pub(super) fn into_tunnel(self) -> (http::response::Parts, Tunnel) {
        let Connection { stream, buffer, .. } = *self.connection;
        (self.head, Tunnel::new(stream, buffer.freeze()))
    }
}

/// The request's bytes still to go: what is being written, and the body that follows it.
struct Sending {
    /// Encoded bytes not written yet.
    pending: Bytes,
    /// Written bytes that may still sit in a TLS session's buffer.
    unflushed: bool,
    body: Option<OutgoingBody>,
    framing: RequestFraming,
    /// The fields a chunked body's trailers may carry (its `Trailer` field), as hyper's.
    trailers: Vec<HeaderName>,
    /// A write failed: nothing more goes out, and the connection is not reused.
    broken: bool,
}

impl Sending {
    fn new(head: Bytes, body: OutgoingBody, framing: RequestFraming, fields: &http::HeaderMap) -> Sending {
        let carries_body = !body.is_end_stream() && framing != RequestFraming::Length(0);
        let trailers = match framing {
            RequestFraming::Chunked => declared_trailers(fields),
            RequestFraming::Length(_) => Vec::new(),
        };
        Sending {
            pending: head,
            unflushed: false,
            body: carries_body.then_some(body),
            framing,
            trailers,
            broken: false,
        }
    }

    /// Everything was written.
    fn done(&self) -> bool {
        self.body.is_none() && self.pending.is_empty() && !self.unflushed && !self.broken
    }

    /// Gives up on the rest (the origin answered, and the connection will be closed).
    fn abandon(&mut self) {
        self.body = None;
        self.pending.clear();
        self.broken = true;
    }

    /// Writes what can be written without waiting. Fails only when the client's body does;
    /// a failed write stops the sending and leaves the origin's answer, if any, to be read.
    fn poll(&mut self, stream: &mut OriginStream, cx: &mut Context<'_>) -> Result<(), BoxError> {
        loop {
            while !self.pending.is_empty() {
                match Pin::new(&mut *stream).poll_write(cx, &self.pending) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                        self.abandon();
                        return Ok(());
                    }
                    Poll::Ready(Ok(written)) => {
                        self.pending.advance(written);
                        self.unflushed = true;
                    }
                    Poll::Pending => return Ok(()),
                }
            }
            if self.unflushed {
                match Pin::new(&mut *stream).poll_flush(cx) {
                    Poll::Ready(Ok(())) => self.unflushed = false,
                    Poll::Ready(Err(_)) => {
                        self.abandon();
                        return Ok(());
                    }
                    Poll::Pending => return Ok(()),
                }
            }
            let Some(body) = &mut self.body else { return Ok(()) };
            let frame = match Pin::new(body).poll_frame(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(frame) => frame.transpose()?,
            };
            self.pending = match (frame, self.framing) {
                (None, RequestFraming::Chunked) => {
                    self.body = None;
                    Bytes::from_static(b"0\r\n\r\n")
                }
                (None, RequestFraming::Length(0)) => {
                    self.body = None;
                    Bytes::new()
                }
                (None, RequestFraming::Length(short)) => {
                    return Err(
                        format!("the request body ended {short} bytes short of its Content-Length").into(),
                    );
                }
                (Some(frame), RequestFraming::Length(left)) => {
                    let data = frame.into_data().unwrap_or_default();
                    // Bytes past the announced length would reach the origin as the next request.
                    let Some(left) = left.checked_sub(data.len() as u64) else {
                        return Err("the request body is longer than its Content-Length".into());
                    };
                    self.framing = RequestFraming::Length(left);
                    data
                }
                (Some(frame), RequestFraming::Chunked) => match frame.into_data() {
                    Ok(data) if data.is_empty() => Bytes::new(),
                    Ok(data) => chunk(&data),
                    Err(frame) => {
                        self.body = None;
                        let trailers = frame.into_trailers().unwrap_or_default();
                        last_chunk(&trailers, &self.trailers)
                    }
                },
            };
        }
    }
}

/// The names listed in a request's `Trailer` fields.
fn declared_trailers(fields: &http::HeaderMap) -> Vec<HeaderName> {
    let listed = fields.get_all(http::header::TRAILER).iter();
    let names = listed
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','));
    names
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| !NOT_TRAILERS.contains(name))
        .collect()
}

/// Fields a trailer must not carry (framing, routing, credentials), as hyper's list.
const NOT_TRAILERS: [HeaderName; 12] = [
    header::AUTHORIZATION,
    header::CACHE_CONTROL,
    header::CONTENT_ENCODING,
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::CONTENT_TYPE,
    header::HOST,
    header::MAX_FORWARDS,
    header::SET_COOKIE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::TE,
];

/// `data` as one chunk.
fn chunk(data: &Bytes) -> Bytes {
    let size = format!("{:x}\r\n", data.len());
    let mut out = BytesMut::with_capacity(size.len() + data.len() + 2);
    out.extend_from_slice(size.as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out.freeze()
}

/// The last chunk, with those of `trailers` the request declared.
fn last_chunk(trailers: &http::HeaderMap, declared: &[HeaderName]) -> Bytes {
    let mut out = BytesMut::from(&b"0\r\n"[..]);
    for (name, value) in trailers.iter().filter(|(name, _)| declared.contains(name)) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.freeze()
}

#[cfg(test)]
mod tests;
