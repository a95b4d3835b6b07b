//! A response body read from its origin connection: sized, chunked (trailers included) or
//! until the origin closes. Frames are slices of the connection's read buffer, never copies.
//! The rest of a request body the origin answered early is written meanwhile.

use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};

use super::head::{self, Framing};
use super::{Connection, Error, Home, Sending, MAX_CHUNK_LINE};

/// Bytes of chunk extensions a body may carry, and of its trailer section, as hyper's.
const MAX_CHUNK_EXTENSIONS: usize = 16 * 1024;
pub(super) const MAX_TRAILERS: usize = 16 * 1024;

/// The body of an origin's response.
pub struct OriginBody {
    /// `None` once the body has ended (the connection went home or was closed).
    connection: Option<Box<Connection>>,
    state: State,
    reusable: bool,
    /// Bytes of chunk extensions seen so far.
    extensions: usize,
    /// The rest of a request body the origin answered before it was sent (rare: boxed).
    sending: Option<Box<Sending>>,
    home: Option<Weak<dyn Home>>,
}

enum State {
    /// Bytes still to come.
    Length(u64),
    /// Before a chunk-size line.
    ChunkSize,
    /// Inside a chunk: bytes still to come.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// After the last chunk: trailer fields, then an empty line.
    Trailers,
    UntilClose,
    Ended,
}

/// What the buffer gives now.
enum Step {
    Frame(Frame<Bytes>),
    /// Go on decoding: the state moved.
    Moved,
    NeedMore,
    End,
}

impl OriginBody {
    pub(super) fn new(
        connection: Box<Connection>,
        framing: Framing,
        reusable: bool,
        sending: Option<Box<Sending>>,
        home: Option<Weak<dyn Home>>,
    ) -> OriginBody {
        let state = match framing {
            Framing::Empty => State::Ended,
            Framing::Length(length) => State::Length(length),
            Framing::Chunked => State::ChunkSize,
            Framing::UntilClose => State::UntilClose,
        };
        let mut body = OriginBody {
            connection: Some(connection),
            state,
            reusable,
            extensions: 0,
            sending,
            home,
        };
        // No body (HEAD, 204, 304): nothing will poll for its end.
        if matches!(body.state, State::Ended) {
            body.end();
        }
        body
    }

    /// The body has ended cleanly: the connection goes home if it can carry another exchange.
    fn end(&mut self) {
        self.state = State::Ended;
        let Some(connection) = self.connection.take() else {
            return;
        };
        let sent = self.sending.as_ref().is_none_or(|sending| sending.done());
        if !(self.reusable && sent && connection.buffer.is_empty()) {
            return;
        }
        if let Some(home) = self.home.as_ref().and_then(Weak::upgrade) {
            home.keep(connection);
        }
    }

    fn fail(&mut self, error: Error) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.state = State::Ended;
        self.connection = None;
        Poll::Ready(Some(Err(error)))
    }

    fn step(&mut self) -> Result<Step, Error> {
        let Some(connection) = &mut self.connection else {
            return Ok(Step::End);
        };
        let buffer = &mut connection.buffer;
        Ok(match &mut self.state {
            State::Ended => Step::End,
            State::Length(_) | State::ChunkData(_) | State::UntilClose if buffer.is_empty() => Step::NeedMore,
            State::Length(remaining) | State::ChunkData(remaining) => {
                let take = usize::try_from(*remaining)
                    .unwrap_or(usize::MAX)
                    .min(buffer.len());
                let data = buffer.split_to(take).freeze();
                *remaining -= take as u64;
                if *remaining == 0 {
                    match self.state {
                        State::Length(_) => {
                            self.end();
                        }
                        _ => self.state = State::ChunkEnd,
                    }
                }
                Step::Frame(Frame::data(data))
            }
            State::UntilClose => Step::Frame(Frame::data(buffer.split().freeze())),
            State::ChunkSize => match chunk_size(buffer, &mut self.extensions)? {
                Some((used, size)) => {
                    buffer.advance(used);
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(size)
                    };
                    Step::Moved
                }
                None => Step::NeedMore,
            },
            State::ChunkEnd if buffer.len() < 2 => Step::NeedMore,
            State::ChunkEnd if buffer.starts_with(b"\r\n") => {
                buffer.advance(2);
                self.state = State::ChunkSize;
                Step::Moved
            }
            State::ChunkEnd => return Err(Error::Invalid("chunk data longer than its size")),
            State::Trailers if buffer.len() < 2 => Step::NeedMore,
            State::Trailers if buffer.starts_with(b"\r\n") => {
                buffer.advance(2);
                self.end();
                Step::End
            }
            State::Trailers => match trailers(buffer)? {
                Some(fields) => {
                    self.end();
                    Step::Frame(Frame::trailers(fields))
                }
                None => Step::NeedMore,
            },
        })
    }
}

/// The chunk-size line at the start of `buffer` (RFC 9112 §7.1: hex digits, optional
/// extensions, CRLF): its length and the size, `None` while incomplete. As strict as hyper's:
/// a size digit first, no bare CR or LF, at most [`MAX_CHUNK_EXTENSIONS`] bytes of extensions
/// in the whole body (`extensions` counts them).
fn chunk_size(buffer: &[u8], extensions: &mut usize) -> Result<Option<(usize, u64)>, Error> {
    let Some(end) = buffer.iter().position(|&byte| byte == b'\n') else {
        return match buffer.len() > MAX_CHUNK_LINE {
            true => Err(Error::Invalid("a chunk-size line too long")),
            false => Ok(None),
        };
    };
    let line = buffer[..end]
        .strip_suffix(b"\r")
        .ok_or(Error::Invalid("a chunk-size line without CRLF"))?;
    let digits = line.iter().take_while(|byte| byte.is_ascii_hexdigit()).count();
    let size = std::str::from_utf8(&line[..digits])
        .ok()
        .filter(|digits| !digits.is_empty())
        .and_then(|digits| u64::from_str_radix(digits, 16).ok())
        .ok_or(Error::Invalid("a chunk size"))?;
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|&&byte| byte == b' ' || byte == b'\t')
        .count()..];
    if !(rest.is_empty() || rest[0] == b';') || rest.contains(&b'\r') {
        return Err(Error::Invalid("a chunk size"));
    }
    *extensions += rest.len();
    if *extensions > MAX_CHUNK_EXTENSIONS {
        return Err(Error::Invalid("chunk extensions too long"));
    }
    Ok(Some((end + 1, size)))
}

/// The trailer section at the start of `buffer`, taken out; `None` while incomplete.
fn trailers(buffer: &mut bytes::BytesMut) -> Result<Option<http::HeaderMap>, Error> {
    let mut fields = [httparse::EMPTY_HEADER; head::MAX_FIELDS];
    let (length, parsed) = match httparse::parse_headers(buffer, &mut fields) {
        Ok(httparse::Status::Complete(complete)) => complete,
        Ok(httparse::Status::Partial) if buffer.len() > MAX_TRAILERS => return Err(Error::TrailersTooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(Error::Trailers(error)),
    };
    let trailers = head::field_map(parsed, &buffer[..length], 0)?;
    buffer.advance(length);
    Ok(Some(trailers))
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        loop {
            if let (Some(sending), Some(connection)) = (&mut this.sending, &mut this.connection) {
                if let Err(error) = sending.poll(&mut connection.stream, cx) {
                    // The origin waits for the rest of a body that will never come.
                    return this.fail(Error::RequestBody(error));
                }
            }
            match this.step() {
                Ok(Step::Frame(frame)) => return Poll::Ready(Some(Ok(frame))),
                Ok(Step::Moved) => continue,
                Ok(Step::End) => return Poll::Ready(None),
                Ok(Step::NeedMore) => {}
                Err(error) => return this.fail(error),
            }
            let connection = this
                .connection
                .as_mut()
                .expect("a body that needs more has its connection");
            match std::task::ready!(connection.poll_read(cx)) {
                Ok(0) => match this.state {
                    State::UntilClose => {
                        this.state = State::Ended;
                        this.connection = None;
                        return Poll::Ready(None);
                    }
                    State::Length(remaining) => return this.fail(Error::BodyCut(remaining)),
                    _ => return this.fail(Error::ChunksCut),
                },
                Ok(_) => {}
                Err(error) => return this.fail(Error::Read(error)),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Ended)
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Ended => SizeHint::with_exact(0),
            State::Length(remaining) => SizeHint::with_exact(remaining),
            _ => SizeHint::default(),
        }
    }
}
