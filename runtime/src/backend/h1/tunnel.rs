//! The origin's side of a connection after a `101 Switching Protocols`: the bytes the origin
//! sent right behind the head (already in the read buffer) come first, then the stream itself.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::OriginStream;

/// A byte stream to the origin, owned by one tunnel.
pub struct Tunnel {
    stream: OriginStream,
    early: Bytes,
}

impl Tunnel {
    pub(super) fn new(stream: OriginStream, early: Bytes) -> Tunnel {
        Tunnel { stream, early }
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.early.is_empty() {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        }
        let take = this.early.len().min(buf.remaining());
        buf.put_slice(&this.early[..take]);
        this.early.advance(take);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
