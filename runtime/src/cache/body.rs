//! Response bodies: whole (a stored object), streamed (from the origin), or shared (one origin
//! body being filled while several clients read it).
//!
//! A [`SharedBody`] is what makes coalescing stream: the fetch task appends chunks, every
//! request waiting on that fetch reads them from the start at its own pace, and a client that
//! goes away only drops its reader, never the fetch.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Error type of streamed bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response edgecache sends.
pub enum ProxyBody {
    /// A complete body, sent in one frame (cache hits, synthetic responses).
    Full(Option<Bytes>),
    /// A body that arrives over time (origin responses).
    Stream(UnsyncBoxBody<Bytes, BoxError>),
}

impl ProxyBody {
    pub fn empty() -> ProxyBody {
        ProxyBody::Full(None)
    }

    pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
        let bytes = bytes.into();
        ProxyBody::Full((!bytes.is_empty()).then_some(bytes))
    }

    pub fn stream<B>(body: B) -> ProxyBody
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        ProxyBody::Stream(body.map_err(Into::into).boxed_unsync())
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut *self {
            ProxyBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Stream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Stream(body) => body.size_hint(),
        }
    }
}

// === impl SharedBody ===

#[derive(Default)]
struct Fill {
    chunks: Vec<Bytes>,
    len: u64,
    end: Option<Result<(), String>>,
}

/// A body written once by a fetch and read by any number of clients.
#[derive(Default)]
pub struct SharedBody {
    fill: Mutex<Fill>,
    grew: Notify,
}

impl SharedBody {
    /// Appends a chunk and wakes the readers. Returns the total length so far.
    pub fn push(&self, chunk: Bytes) -> u64 {
        let len = {
            let mut fill = self.fill.lock();
            fill.len += chunk.len() as u64;
            fill.chunks.push(chunk);
            fill.len
        };
        self.grew.notify_waiters();
        len
    }

    /// Everything pushed so far, as one buffer.
    pub fn contents(&self) -> Bytes {
        let fill = self.fill.lock();
        let mut whole = BytesMut::with_capacity(fill.len as usize);
        for chunk in &fill.chunks {
            whole.extend_from_slice(chunk);
        }
        whole.freeze()
    }

    /// Marks the body complete; readers end after the last chunk.
    pub fn finish(&self) {
        self.fill.lock().end = Some(Ok(()));
        self.grew.notify_waiters();
    }

    /// Marks the body broken; readers get an error after the chunks they have not read yet,
    /// so their clients see a truncated response, not a silently short one.
    pub fn fail(&self, reason: String) {
        self.fill.lock().end = Some(Err(reason));
        self.grew.notify_waiters();
    }

    /// A reader from the first byte.
    pub fn reader(self: &std::sync::Arc<Self>) -> ProxyBody {
        let stream = futures_util::stream::unfold((self.clone(), 0usize), |(shared, next)| async move {
            if next == usize::MAX {
                return None;
            }
            let step = shared.next_step(next).await;
            match step {
                Step::Chunk(chunk) => Some((Ok(Frame::data(chunk)), (shared, next + 1))),
                Step::End => None,
                Step::Failed(reason) => Some((Err(BoxError::from(reason)), (shared, usize::MAX))),
            }
        });
        ProxyBody::stream(http_body_util::StreamBody::new(stream))
    }

    /// Waits until chunk `index` exists or the body ended.
    async fn next_step(&self, index: usize) -> Step {
        loop {
            let grew = self.grew.notified();
            tokio::pin!(grew);
            // Registered before looking, so a push between the look and the wait is not missed.
            grew.as_mut().enable();
            {
                let fill = self.fill.lock();
                if let Some(chunk) = fill.chunks.get(index) {
                    return Step::Chunk(chunk.clone());
                }
                match &fill.end {
                    Some(Ok(())) => return Step::End,
                    Some(Err(reason)) => return Step::Failed(reason.clone()),
                    None => {}
                }
            }
            grew.await;
        }
    }
}

enum Step {
    Chunk(Bytes),
    End,
    Failed(String),
}
