//! An origin response body that fails when the origin goes quiet for too long, and keeps its
//! request counted as in flight until it ends, fails or is dropped.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::admission::InFlight;
use crate::cache::body::BoxError;

/// `Incoming` with the between-bytes timeout.
pub struct TimedBody {
    inner: Incoming,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
    /// Whether `deadline` times a wait now. The silence is timed from the first poll after a
    /// frame, so time the reader spends not asking (a body passing through waits for its
    /// slowest client) is not counted against the origin.
    waiting: bool,
    backend: String,
    /// Released at the end of the body, on its first error, or when it is dropped.
    in_flight: Option<InFlight>,
}

impl TimedBody {
    pub(super) fn new(inner: Incoming, limit: Duration, backend: String, in_flight: InFlight) -> TimedBody {
        TimedBody {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            waiting: true,
            backend,
            in_flight: Some(in_flight),
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if !this.waiting {
            this.waiting = true;
            let next = Instant::now() + this.limit;
            this.deadline.as_mut().reset(next);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting = false;
                let finished = !matches!(frame, Some(Ok(_))) || this.inner.is_end_stream();
                if finished {
                    this.in_flight = None;
                }
                Poll::Ready(frame.map(|f| {
                    f.map_err(|error| format!("backend {}: body broken: {error}", this.backend).into())
                }))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.in_flight = None;
                    Poll::Ready(Some(Err(format!(
                        "backend {}: between-bytes timeout ({:?}) reading body",
                        this.backend, this.limit
                    )
                    .into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
