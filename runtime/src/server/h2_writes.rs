//! Fewer, larger writes on HTTP/2 connections. h2 writes a DATA frame's payload apart from its
//! buffer, and flushes after each such frame, once the payload is over 256 bytes on a transport
//! that writes vectored (1,024 bytes otherwise; hyperium/h2#902). So ten small responses on one
//! connection cost ten `writev`s, and over TLS ten records, where one would do.
//!
//! [`H2Writes`] watches the connection's first bytes. After the HTTP/2 preface it tells h2 that
//! the transport does not write vectored, so payloads up to 1 KiB are copied into h2's buffer
//! and the responses of one connection poll leave together. A larger payload h2 then writes in
//! two calls, its buffer (frame headers) and the payload; the first is held here and joined to
//! the second in one vectored write. HTTP/1.1 connections pass through untouched.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a client sends first on an HTTP/2 connection (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Writes held to be joined with the next one; h2's own buffer is 16 KiB, so a write this short
/// is its buffer, not a payload.
const HOLD_UP_TO: usize = 16 * 1024;

pub(super) struct H2Writes<T> {
    inner: T,
    protocol: Protocol,
    /// A short write accepted but not yet written.
    held: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// This many bytes read so far, all matching the preface.
    Sniffing(usize),
    Http2,
    Other,
}

impl<T> H2Writes<T> {
    pub(super) fn new(inner: T) -> H2Writes<T> {
        H2Writes {
            inner,
            protocol: Protocol::Sniffing(0),
            held: Vec::new(),
        }
    }

    fn sniff(&mut self, new: &[u8]) {
        let Protocol::Sniffing(seen) = self.protocol else {
            return;
        };
        let wanted = &PREFACE[seen..];
        let compared = new.len().min(wanted.len());
        self.protocol = if new[..compared] != wanted[..compared] {
            Protocol::Other
        } else if seen + compared == PREFACE.len() {
            Protocol::Http2
        } else {
            Protocol::Sniffing(seen + compared)
        };
    }
}

impl<T: AsyncWrite + Unpin> H2Writes<T> {
    /// Writes what is held; `Ready` once nothing is.
    fn poll_write_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.held.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    /// Writes what is held and then `buf`, in one vectored write where the transport allows;
    /// the count is of `buf`'s bytes only.
    fn poll_write_after_held(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        while !self.held.is_empty() {
            let joined = [IoSlice::new(&self.held), IoSlice::new(buf)];
            let n = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, &joined))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if n >= self.held.len() {
                let of_buf = n - self.held.len();
                self.held.clear();
                return Poll::Ready(Ok(of_buf));
            }
            self.held.drain(..n);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for H2Writes<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        this.sniff(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for H2Writes<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.protocol != Protocol::Http2 {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        if this.held.is_empty() && buf.len() <= HOLD_UP_TO {
            this.held.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        this.poll_write_after_held(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Nothing is held off HTTP/2, and on HTTP/2 h2 does not write vectored (it was told it
        // cannot); should anything be held all the same, it goes first.
        let this = self.get_mut();
        ready!(this.poll_write_held(cx))?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.protocol != Protocol::Http2 && self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_held(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_held(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A transport that records each write call it gets.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        input: io::Cursor<Vec<u8>>,
    }

    impl AsyncRead for Recorder {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let mut byte = [0u8; 1];
            // One byte per read, so the preface arrives split.
            let n = std::io::Read::read(&mut self.input, &mut byte)?;
            buf.put_slice(&byte[..n]);
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let joined: Vec<u8> = bufs.iter().flat_map(|buf| buf.iter().copied()).collect();
            let n = joined.len();
            self.writes.push(joined);
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    async fn after_reading(first_bytes: &[u8]) -> H2Writes<Recorder> {
        let mut io = H2Writes::new(Recorder {
            input: io::Cursor::new(first_bytes.to_vec()),
            ..Recorder::default()
        });
        let mut read = vec![0u8; first_bytes.len()];
        io.read_exact(&mut read).await.unwrap();
        io
    }

    #[tokio::test]
    async fn http2_header_and_payload_leave_in_one_write() {
        let mut io = after_reading(PREFACE).await;
        assert!(
            !io.is_write_vectored(),
            "h2 copies small payloads into its buffer"
        );
        io.write_all(b"frame headers").await.unwrap();
        io.write_all(&[7u8; 20_000]).await.unwrap();
        io.flush().await.unwrap();
        let writes = &io.inner.writes;
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].len(), 13 + 20_000);
        assert!(writes[0].starts_with(b"frame headers"));
    }

    #[tokio::test]
    async fn a_held_write_leaves_at_flush() {
        let mut io = after_reading(PREFACE).await;
        io.write_all(b"settings ack").await.unwrap();
        assert!(io.inner.writes.is_empty());
        io.flush().await.unwrap();
        assert_eq!(io.inner.writes, vec![b"settings ack".to_vec()]);
    }

    #[tokio::test]
    async fn http1_passes_through() {
        let mut io = after_reading(b"PRIVATE / HTTP/1.1\r\n\r\n").await;
        assert!(io.is_write_vectored());
        io.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert_eq!(io.inner.writes.len(), 1, "written at once, not held");
    }
}
