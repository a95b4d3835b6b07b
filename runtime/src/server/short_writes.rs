//! A short vectored write sent as one buffer. hyper writes an HTTP/1.1 response as its head
//! and its body, two slices of one `writev`; for a response of a few KiB, [`ShortWrites`]
//! copies them into one buffer and writes that with a plain `send`.
//!
//! Why: `writev` goes through the kernel's file layer (the iovec copied in, the file checks and
//! notifications of a write), `send` straight to the socket: in perf on this VM, 0.23 µs per
//! HTTP/1.1 pass that HAProxy, whose writes are one buffer each, does not pay; with the copy the
//! hit's system time fell by about 0.15 µs (docs/BENCHMARKS.md, "Session 17"). Copying 1 KiB
//! costs a few dozen nanoseconds; a longer write keeps its slices, as a copy would then cost
//! more than the call saves.

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest vectored write copied into one buffer.
const JOIN_UP_TO: usize = 4 * 1024;

thread_local! {
    /// The worker's buffer for joined writes, reused by every connection it serves.
    static JOINED: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(JOIN_UP_TO));
}

pub(super) struct ShortWrites<T> {
    inner: T,
}

impl<T> ShortWrites<T> {
    pub(super) fn new(inner: T) -> ShortWrites<T> {
        ShortWrites { inner }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ShortWrites<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ShortWrites<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let inner = &mut self.get_mut().inner;
        let length: usize = bufs.iter().map(|buf| buf.len()).sum();
        let slices = bufs.iter().filter(|buf| !buf.is_empty()).count();
        if slices < 2 || length > JOIN_UP_TO {
            return Pin::new(inner).poll_write_vectored(cx, bufs);
        }
        JOINED.with(|joined| {
            let mut joined = joined.borrow_mut();
            joined.clear();
            for buf in bufs {
                joined.extend_from_slice(buf);
            }
            Pin::new(inner).poll_write(cx, &joined)
        })
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What a transport was asked to write, call by call.
    #[derive(Default)]
    struct Calls {
        plain: Vec<Vec<u8>>,
        vectored: Vec<Vec<Vec<u8>>>,
    }

    impl AsyncWrite for Calls {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.plain.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            self.vectored.push(bufs.iter().map(|buf| buf.to_vec()).collect());
            Poll::Ready(Ok(bufs.iter().map(|buf| buf.len()).sum()))
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

    async fn write_vectored(slices: &[&[u8]]) -> Calls {
        let mut io = ShortWrites::new(Calls::default());
        let bufs: Vec<IoSlice<'_>> = slices.iter().map(|slice| IoSlice::new(slice)).collect();
        let n = io.write_vectored(&bufs).await.expect("write");
        assert_eq!(n, slices.iter().map(|slice| slice.len()).sum::<usize>());
        io.inner
    }

    #[tokio::test]
    async fn a_short_head_and_body_go_out_in_one_plain_write() {
        let calls = write_vectored(&[b"HTTP/1.1 200 OK\r\n\r\n", b"hello"]).await;
        assert_eq!(calls.plain, vec![b"HTTP/1.1 200 OK\r\n\r\nhello".to_vec()]);
        assert!(calls.vectored.is_empty());
    }

    #[tokio::test]
    async fn a_long_write_keeps_its_slices() {
        let body = vec![b'x'; JOIN_UP_TO];
        let calls = write_vectored(&[b"HTTP/1.1 200 OK\r\n\r\n", &body]).await;
        assert!(calls.plain.is_empty());
        assert_eq!(calls.vectored.len(), 1);
        assert_eq!(calls.vectored[0][1], body);
    }

    #[tokio::test]
    async fn over_a_socket_the_bytes_arrive_whole_and_in_order() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = tokio::net::TcpStream::connect(listener.local_addr().expect("address"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let mut io = ShortWrites::new(accepted.expect("accept").0);
        let parts: [&[u8]; 3] = [b"head\r\n\r\n", b"", b"body"];
        let bufs = parts.map(IoSlice::new);
        let n = io.write_vectored(&bufs).await.expect("write");
        assert_eq!(n, 12);
        drop(io);
        let mut received = Vec::new();
        client
            .expect("connect")
            .read_to_end(&mut received)
            .await
            .expect("read");
        assert_eq!(received, b"head\r\n\r\nbody");
    }
}
