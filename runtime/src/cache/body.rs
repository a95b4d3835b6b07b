//! Response bodies: whole (a stored object), streamed (from the origin), or shared (one origin
//! body being filled while several clients read it).
//!
//! A [`SharedBody`] is what makes coalescing stream: the fetch task appends chunks, every
//! request waiting on that fetch reads them from the start at its own pace. It also owns the
//! memory rules of a body in flight:
//! - a body that will be stored is copied, as it arrives, into buffers edgecache allocates for
//!   it (one of exactly `Content-Length` bytes when that is known), so a stored object never
//!   keeps a connection's read buffer alive, and completing it copies nothing: the
//!   [`StoredBody`] is the chunks the readers were given;
//! - a body that turned out too large to store ([`SharedBody::pass_through`]) keeps only what
//!   its slowest reader has not read yet, and the fetch waits for that reader;
//! - it counts its readers, so the fetch knows when the last one left.

use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
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
    /// A complete body, sent in one frame (synthetic responses).
    Full(Option<Bytes>),
    /// A stored body, sent chunk by chunk without copying (cache hits).
    Stored { chunks: Chunks, next: usize, left: u64 },
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
            ProxyBody::Stored { chunks, next, left } => {
                let chunk = chunks.as_slice().get(*next).cloned();
                *next += 1;
                if let Some(chunk) = &chunk {
                    *left -= chunk.len() as u64;
                }
                Poll::Ready(chunk.map(|chunk| Ok(Frame::data(chunk))))
            }
            ProxyBody::Stream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(bytes) => bytes.is_none(),
            ProxyBody::Stored { left, .. } => *left == 0,
            ProxyBody::Stream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Stored { left, .. } => SizeHint::with_exact(*left),
            ProxyBody::Stream(body) => body.size_hint(),
        }
    }
}

// === impl StoredBody ===

/// The body of a stored object: the chunks it arrived in, each a slice of a buffer allocated
/// for this body alone. Cloning it shares the chunks.
#[derive(Clone, Debug, Default)]
pub struct StoredBody {
    chunks: Chunks,
    /// Bytes of the buffers behind the chunks (at least the body's length), for the cache's
    /// weigher.
    allocated: u64,
}

/// The chunks of a stored body. Nearly every stored body is one chunk (a body with a
/// `Content-Length` is copied into one buffer of its size), and a list of one would cost a
/// small object 48 bytes more.
#[derive(Clone, Debug)]
pub enum Chunks {
    /// One chunk; an empty one stands for no chunks.
    One(Bytes),
    Many {
        chunks: Arc<[Bytes]>,
        len: u64,
    },
}

impl Default for Chunks {
    fn default() -> Chunks {
        Chunks::One(Bytes::new())
    }
}

impl From<Vec<Bytes>> for Chunks {
    fn from(mut chunks: Vec<Bytes>) -> Chunks {
        if chunks.len() <= 1 {
            return Chunks::One(chunks.pop().unwrap_or_default());
        }
        let len = chunks.iter().map(|chunk| chunk.len() as u64).sum();
        Chunks::Many {
            chunks: chunks.into(),
            len,
        }
    }
}

impl Chunks {
    fn as_slice(&self) -> &[Bytes] {
        match self {
            Chunks::One(chunk) if chunk.is_empty() => &[],
            Chunks::One(chunk) => std::slice::from_ref(chunk),
            Chunks::Many { chunks, .. } => chunks,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Chunks::One(chunk) => chunk.len() as u64,
            Chunks::Many { len, .. } => *len,
        }
    }
}

impl From<Bytes> for StoredBody {
    fn from(bytes: Bytes) -> StoredBody {
        StoredBody {
            allocated: bytes.len() as u64,
            chunks: Chunks::One(bytes),
        }
    }
}

impl StoredBody {
    pub fn len(&self) -> u64 {
        self.chunks.len()
    }

    /// Bytes this body keeps allocated: its buffers, a `Bytes` shared header (the chunks are
    /// slices of a few buffers, one when the length was known), and the list of its chunks
    /// when there are several.
    pub fn weight(&self) -> u64 {
        const SHARED: u64 = 32 + 16;
        let list = match &self.chunks {
            Chunks::One(_) => 0,
            Chunks::Many { chunks, .. } => 16 + 16 + (chunks.len() * size_of::<Bytes>()) as u64,
        };
        self.allocated + SHARED + list
    }

    /// The whole body as a response body; the chunks are shared, not copied.
    pub fn to_body(&self) -> ProxyBody {
        ProxyBody::Stored {
            chunks: self.chunks.clone(),
            next: 0,
            left: self.len(),
        }
    }

    /// Bytes `range` (clamped to the body) as a response body of shared slices, and its length.
    pub fn range_body(&self, range: Range<u64>) -> (ProxyBody, u64) {
        let chunks = Chunks::from(self.range_parts(range));
        let len = chunks.len();
        let body = ProxyBody::Stored {
            chunks,
            next: 0,
            left: len,
        };
        (body, len)
    }

    /// Bytes `range` (clamped to the body) as shared slices of its chunks, in order.
    pub fn range_parts(&self, range: Range<u64>) -> Vec<Bytes> {
        let mut parts = Vec::new();
        self.for_each_part(range, |part| parts.push(part));
        parts
    }

    /// Appends bytes `range` (clamped to the body) to `out`.
    pub fn copy_range(&self, range: Range<u64>, out: &mut BytesMut) {
        self.for_each_part(range, |part| out.extend_from_slice(&part));
    }

    /// Calls `each` with the slices of the chunks that make up `range`, in order.
    fn for_each_part(&self, range: Range<u64>, mut each: impl FnMut(Bytes)) {
        let (start, end) = (range.start.min(self.len()), range.end.min(self.len()));
        let mut offset = 0u64;
        for chunk in self.chunks.as_slice() {
            let chunk_end = offset + chunk.len() as u64;
            if chunk_end > start && offset < end {
                let from = start.saturating_sub(offset) as usize;
                let to = (end.min(chunk_end) - offset) as usize;
                each(chunk.slice(from..to));
            }
            offset = chunk_end;
        }
    }
}

// === impl SharedBody ===

/// Largest buffer a body of unknown length is copied into; smaller bodies get buffers that
/// double with what arrived so far, so the spare room stays below the body's own size.
const MAX_BUFFER: usize = 1024 * 1024;

#[derive(Default)]
struct Fill {
    /// The chunks not released yet; `chunks[0]` is chunk number `first`.
    chunks: VecDeque<Bytes>,
    first: usize,
    len: u64,
    /// The unused end of the buffer the next chunk is copied into.
    spare: BytesMut,
    /// Bytes of the buffers allocated so far.
    allocated: u64,
    /// The `Content-Length` still to come, when known: the size of the first buffer.
    expected: Option<u64>,
    end: Option<Result<(), String>>,
    /// The next chunk number of each live reader (`None`: a free slot).
    readers: Vec<Option<usize>>,
    /// Whether a reader ever existed (a background refresh has none, and is never abandoned).
    ever_read: bool,
    /// The body will not be stored: chunks every reader has passed are released.
    passing: bool,
}

impl Fill {
    /// Registers a reader at the first chunk; returns its slot.
    fn add_reader(&mut self) -> usize {
        self.ever_read = true;
        match self.readers.iter().position(Option::is_none) {
            Some(free) => {
                self.readers[free] = Some(0);
                free
            }
            None => {
                self.readers.push(Some(0));
                self.readers.len() - 1
            }
        }
    }

    fn live_readers(&self) -> impl Iterator<Item = usize> + '_ {
        self.readers.iter().flatten().copied()
    }

    /// The chunk number the slowest reader reads next (past the last chunk without readers).
    fn slowest(&self) -> usize {
        self.live_readers()
            .min()
            .unwrap_or(self.first + self.chunks.len())
    }

    /// Bytes not yet read by the slowest reader.
    fn unread(&self) -> u64 {
        self.chunks
            .iter()
            .skip(self.slowest().saturating_sub(self.first))
            .map(|chunk| chunk.len() as u64)
            .sum()
    }

    /// Releases the chunks every reader has passed (only for a body that is not stored).
    fn release_read(&mut self) {
        if !self.passing {
            return;
        }
        let slowest = self.slowest();
        while self.first < slowest && self.chunks.pop_front().is_some() {
            self.first += 1;
        }
    }

    /// A copy of `data` in a buffer of this body's own.
    fn copy(&mut self, data: &[u8]) -> Bytes {
        if self.spare.capacity() < data.len() {
            let wanted = match self.expected.take() {
                Some(expected) => usize::try_from(expected).unwrap_or(usize::MAX),
                None => (self.len as usize).min(MAX_BUFFER),
            };
            let size = wanted.max(data.len());
            self.spare = BytesMut::with_capacity(size);
            self.allocated += self.spare.capacity() as u64;
        }
        self.spare.extend_from_slice(data);
        self.spare.split().freeze()
    }
}

/// A body written once by a fetch and read by any number of clients.
#[derive(Default)]
pub struct SharedBody {
    fill: Mutex<Fill>,
    /// A chunk arrived or the body ended.
    grew: Notify,
    /// A reader advanced or left.
    read: Notify,
}

impl SharedBody {
    /// A body to fill, whose length is `expected` when known, and its first reader (the
    /// client whose miss started the fill).
    pub fn with_reader(expected: Option<u64>) -> (Arc<SharedBody>, ProxyBody) {
        let body = Arc::new(SharedBody::default());
        let slot = {
            let mut fill = body.fill.lock();
            fill.expected = expected;
            fill.add_reader()
        };
        let reader = body.read_from(slot);
        (body, reader)
    }

    /// A complete body (a stored object handed to coalesced waiters).
    pub fn complete(stored: &StoredBody) -> SharedBody {
        let body = SharedBody::default();
        {
            let mut fill = body.fill.lock();
            fill.chunks = stored.chunks.as_slice().iter().cloned().collect();
            fill.len = stored.len();
            fill.allocated = stored.allocated;
            fill.end = Some(Ok(()));
        }
        body
    }

    /// Appends a chunk and wakes the readers. Returns the total length so far. Unless the body
    /// passes through, the chunk is copied into this body's own buffers.
    pub fn push(&self, data: Bytes) -> u64 {
        let len = {
            let mut fill = self.fill.lock();
            let chunk = if fill.passing { data } else { fill.copy(&data) };
            fill.len += chunk.len() as u64;
            fill.chunks.push_back(chunk);
            fill.len
        };
        self.grew.notify_waiters();
        len
    }

    /// The body will not be stored: from now on it keeps only what a reader still has to read,
    /// and readers can no longer start from the first byte.
    pub fn pass_through(&self) {
        let mut fill = self.fill.lock();
        fill.passing = true;
        fill.spare = BytesMut::new();
        fill.release_read();
    }

    /// Waits until the slowest reader has at most `window` bytes left to read. Returns false
    /// when no reader is left (there is nobody to pass the body to).
    pub async fn wait_for_readers(&self, window: u64) -> bool {
        self.until(&self.read, |fill| {
            let readers = fill.live_readers().count();
            (readers == 0 || fill.unread() <= window).then_some(readers > 0)
        })
        .await
    }

    /// Resolves once every reader that started has left (never for a body nobody ever read).
    pub async fn abandoned(&self) {
        self.until(&self.read, |fill| {
            (fill.ever_read && fill.live_readers().next().is_none()).then_some(())
        })
        .await
    }

    /// Everything pushed so far, as a stored body (its chunks shared, not copied).
    pub fn stored(&self) -> StoredBody {
        let fill = self.fill.lock();
        StoredBody {
            chunks: Chunks::from(Vec::from_iter(fill.chunks.iter().cloned())),
            allocated: fill.allocated,
        }
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

    /// A reader from the first byte; `None` once the body passes through and its first
    /// chunks are gone.
    pub fn reader(self: &Arc<Self>) -> Option<ProxyBody> {
        let slot = {
            let mut fill = self.fill.lock();
            if fill.first > 0 {
                return None;
            }
            fill.add_reader()
        };
        Some(self.read_from(slot))
    }

    /// The body as reader `slot` reads it, from the first byte.
    fn read_from(self: &Arc<Self>, slot: usize) -> ProxyBody {
        let reader = Reader {
            shared: self.clone(),
            slot,
            next: 0,
        };
        let stream = futures_util::stream::unfold(Some(reader), |reader| async move {
            let mut reader = reader?;
            match reader.shared.next_step(reader.slot, reader.next).await {
                Step::Chunk(chunk) => {
                    reader.next += 1;
                    Some((Ok(Frame::data(chunk)), Some(reader)))
                }
                Step::End => None,
                Step::Failed(reason) => Some((Err(BoxError::from(reason)), None)),
            }
        });
        ProxyBody::stream(http_body_util::StreamBody::new(stream))
    }

    /// Waits until chunk `index` exists or the body ended; records that reader `slot` is past
    /// the chunks before `index`.
    async fn next_step(&self, slot: usize, index: usize) -> Step {
        let step = self
            .until(&self.grew, |fill| {
                if let Some(chunk) = fill.chunks.get(index - fill.first) {
                    return Some(Step::Chunk(chunk.clone()));
                }
                match &fill.end {
                    Some(Ok(())) => Some(Step::End),
                    Some(Err(reason)) => Some(Step::Failed(reason.clone())),
                    None => None,
                }
            })
            .await;
        {
            let mut fill = self.fill.lock();
            fill.readers[slot] = Some(index + 1);
            fill.release_read();
        }
        self.read.notify_waiters();
        step
    }

    /// Waits on `notify` until `ready` returns something.
    async fn until<T>(&self, notify: &Notify, mut ready: impl FnMut(&Fill) -> Option<T>) -> T {
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            // Registered before looking, so a change between the look and the wait is not missed.
            notified.as_mut().enable();
            if let Some(value) = ready(&self.fill.lock()) {
                return value;
            }
            notified.await;
        }
    }
}

/// One reader's place in a [`SharedBody`]; leaving (drop) frees its slot.
struct Reader {
    shared: Arc<SharedBody>,
    slot: usize,
    next: usize,
}

impl Drop for Reader {
    fn drop(&mut self) {
        {
            let mut fill = self.shared.fill.lock();
            fill.readers[self.slot] = None;
            fill.release_read();
        }
        self.shared.read.notify_waiters();
    }
}

enum Step {
    Chunk(Bytes),
    End,
    Failed(String),
}

#[cfg(test)]
mod tests;
