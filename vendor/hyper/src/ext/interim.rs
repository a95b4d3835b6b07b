//! Sending 1xx informational responses from a server (edgecache's patch of hyper).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use http::Response;

/// A handle, found in the extensions of a request a server connection received, that sends
/// informational (1xx) responses ahead of the final one: HTTP/1.1 writes each as an interim
/// head, HTTP/2 as a HEADERS frame without END_STREAM. Sending after the final response has
/// started, to an HTTP/1.0 client, or a non-1xx status does nothing.
#[derive(Clone, Debug)]
pub struct InformationalSender {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<VecDeque<Response<()>>>,
    /// Whether `queue` may hold a response: set after a push, cleared by the pop that empties
    /// it, so the connection, which looks on every poll, takes the lock only when there is one.
    queued: AtomicBool,
    waker: AtomicWaker,
    closed: AtomicBool,
}

impl InformationalSender {
    /// Queues `response` (status 1xx, headers; its body and version are ignored) to be sent
    /// before the final response. Returns `false` when it will not be sent: not 1xx (or 101,
    /// which only an upgrade may send), or the final response has begun.
    pub fn send(&self, response: Response<()>) -> bool {
        let status = response.status();
        if !status.is_informational() || status == http::StatusCode::SWITCHING_PROTOCOLS {
            return false;
        }
        if self.shared.closed.load(Ordering::Acquire) {
            return false;
        }
        let mut queue = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        queue.push_back(response);
        self.shared.queued.store(true, Ordering::Release);
        drop(queue);
        self.shared.waker.wake();
        true
    }
}

/// The connection's end of an [`InformationalSender`].
#[derive(Debug)]
pub(crate) struct InformationalReceiver {
    shared: Arc<Shared>,
}

impl InformationalReceiver {
    /// A new pair: the sender goes into the request's extensions.
    pub(crate) fn pair() -> (InformationalSender, InformationalReceiver) {
        let shared = Arc::new(Shared::default());
        (
            InformationalSender {
                shared: shared.clone(),
            },
            InformationalReceiver { shared },
        )
    }

    /// The next queued response, or `Pending` (woken on the next send).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Response<()>> {
        if let Some(next) = self.pop() {
            return Poll::Ready(next);
        }
        self.shared.waker.register(cx.waker());
        match self.pop() {
            Some(next) => Poll::Ready(next),
            None => Poll::Pending,
        }
    }

    fn pop(&self) -> Option<Response<()>> {
        if !self.shared.queued.load(Ordering::Acquire) {
            return None;
        }
        let mut queue = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = queue.pop_front();
        if queue.is_empty() {
            // Under the lock, as the push sets it: a later push sets it again.
            self.shared.queued.store(false, Ordering::Release);
        }
        next
    }
}

impl Drop for InformationalReceiver {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
    }
}
