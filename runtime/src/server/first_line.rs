//! The request line of a connection's first request, measured while it arrives. hyper buffers
//! a head up to `--max-request-head` before it parses any of it and answers anything longer
//! with 431, so a long URL or method would be told that its header fields are too large. The
//! first request line starts at the connection's first byte, so it can be measured without
//! parsing HTTP; later heads follow bodies whose framing only hyper knows, so theirs are held
//! to the same limits by `proxy/request_checks.rs` once hyper has parsed them (and get hyper's
//! 431 past `--max-request-head`).
//!
//! A first line over a limit is answered here (501 for the method, 414 for the target, as
//! `request_checks` does) and the connection is closed after reading what the client still
//! sends, up to [`LINGER_LIMIT`] (and the header timeout), so that the answer is not lost to a
//! TCP reset (nginx's lingering close).

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::proxy::MAX_METHOD_LEN;

/// Bytes read and dropped after a refusal before the connection is closed anyway.
const LINGER_LIMIT: usize = 4 << 20;

/// " HTTP/1.1\r" and the space after the method.
const LINE_OVERHEAD: usize = 11;

/// A client connection whose first request line is held to the method and target limits.
pub(super) struct FirstLine<T> {
    inner: T,
    state: State,
    /// The longest first line the limits allow.
    max_line: usize,
}

enum State {
    /// The line so far: its length, and whether the method has ended.
    Measuring { seen: usize, method_ended: bool },
    /// The first line ended within the limits.
    Passing,
    /// Writing the refusal.
    Refusing { answer: Vec<u8>, written: usize },
    /// Reading and dropping what the client still sends.
    Lingering { drained: usize },
}

/// What the bytes read so far say about the first line.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    More,
    Ended,
    Refuse(StatusCode),
}

impl<T> FirstLine<T> {
    /// `max_target`: `--max-header-size`.
    pub(super) fn new(inner: T, max_target: usize) -> FirstLine<T> {
        FirstLine {
            inner,
            state: State::Measuring {
                seen: 0,
                method_ended: false,
            },
            max_line: MAX_METHOD_LEN + max_target + LINE_OVERHEAD,
        }
    }
}

/// Measures `new`, the next bytes of the line after `seen` of them.
fn measure(new: &[u8], seen: &mut usize, method_ended: &mut bool, max_line: usize) -> Verdict {
    let line = new
        .iter()
        .position(|&b| b == b'\n')
        .map_or(new, |end| &new[..end]);
    if !*method_ended {
        match line.iter().position(|&b| b == b' ') {
            Some(space) if *seen + space > MAX_METHOD_LEN => {
                return Verdict::Refuse(StatusCode::NOT_IMPLEMENTED)
            }
            Some(_) => *method_ended = true,
            None if *seen + line.len() > MAX_METHOD_LEN => {
                return Verdict::Refuse(StatusCode::NOT_IMPLEMENTED)
            }
            None => {}
        }
    }
    *seen += line.len();
    if *seen > max_line {
        Verdict::Refuse(StatusCode::URI_TOO_LONG)
    } else if line.len() < new.len() {
        Verdict::Ended
    } else {
        Verdict::More
    }
}

/// The refusal as written on the wire, shaped as `proxy::synth::plain` shapes its bodies.
fn answer(status: StatusCode) -> Vec<u8> {
    let detail = match status {
        StatusCode::NOT_IMPLEMENTED => format!("no method is longer than {MAX_METHOD_LEN} bytes"),
        _ => "the request target is longer than --max-header-size".to_string(),
    };
    let reason = status.canonical_reason().unwrap_or("");
    let body = format!("{} {reason}\n{detail}\n", status.as_u16());
    format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n\
         cache-control: no-store\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        body.len()
    )
    .into_bytes()
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for FirstLine<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Passing => return Pin::new(&mut this.inner).poll_read(cx, buf),
                State::Measuring { seen, method_ended } => {
                    let before = buf.filled().len();
                    ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                    match measure(&buf.filled()[before..], seen, method_ended, this.max_line) {
                        Verdict::More => return Poll::Ready(Ok(())),
                        Verdict::Ended => {
                            this.state = State::Passing;
                            return Poll::Ready(Ok(()));
                        }
                        Verdict::Refuse(status) => {
                            // hyper never sees the line.
                            buf.set_filled(before);
                            tracing::debug!(%status, "first request line refused");
                            this.state = State::Refusing {
                                answer: answer(status),
                                written: 0,
                            };
                        }
                    }
                }
                State::Refusing { answer, written } => {
                    while *written < answer.len() {
                        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
                        if n == 0 {
                            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                        }
                        *written += n;
                    }
                    ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
                    this.state = State::Lingering { drained: 0 };
                }
                State::Lingering { drained } => {
                    let mut scratch = [0u8; 8192];
                    let mut dropped = ReadBuf::new(&mut scratch);
                    ready!(Pin::new(&mut this.inner).poll_read(cx, &mut dropped))?;
                    let n = dropped.filled().len();
                    *drained += n;
                    if n == 0 || *drained > LINGER_LIMIT {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            "the first request line was refused",
                        )));
                    }
                }
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FirstLine<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(chunks: &[&[u8]], max_line: usize) -> Verdict {
        let (mut seen, mut method_ended) = (0, false);
        for chunk in chunks {
            let verdict = measure(chunk, &mut seen, &mut method_ended, max_line);
            if verdict != Verdict::More {
                return verdict;
            }
        }
        Verdict::More
    }

    #[test]
    fn lines_are_measured_across_reads() {
        assert_eq!(verdict(&[b"GET / HTTP/1.1\r\nHost: a\r\n"], 64), Verdict::Ended);
        assert_eq!(verdict(&[b"PRI * HTTP/2.0\r\n\r\nSM"], 64), Verdict::Ended);
        assert_eq!(
            verdict(&[b"GET /", &[b'a'; 40], b" HTTP/1.1\r\n"], 64),
            Verdict::Ended
        );
        assert_eq!(
            verdict(&[b"GET /", &[b'a'; 40], &[b'a'; 40]], 64),
            Verdict::Refuse(StatusCode::URI_TOO_LONG)
        );
        assert_eq!(verdict(&[b"GET /", &[b'a'; 40]], 64), Verdict::More);
    }

    #[test]
    fn a_long_method_is_refused_before_its_space() {
        assert_eq!(
            verdict(&[&[b'M'; 20], &[b'M'; 20]], 1 << 20),
            Verdict::Refuse(StatusCode::NOT_IMPLEMENTED)
        );
        assert_eq!(
            verdict(&[&[b'M'; 40], b" / HTTP/1.1\r\n"], 1 << 20),
            Verdict::Refuse(StatusCode::NOT_IMPLEMENTED)
        );
        let longest = [b'M'; MAX_METHOD_LEN];
        assert_eq!(verdict(&[&longest, b" / HTTP/1.1\r\n"], 1 << 20), Verdict::Ended);
    }
}
