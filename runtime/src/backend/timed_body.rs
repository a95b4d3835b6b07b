//! An origin response body that fails when the origin goes quiet for too long.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use crate::cache::body::BoxError;

/// `Incoming` with the between-bytes timeout.
pub struct TimedBody {
    inner: Incoming,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
    backend: String,
}

impl TimedBody {
    pub(super) fn new(inner: Incoming, limit: Duration, backend: String) -> TimedBody {
        TimedBody {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            backend,
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
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = Instant::now() + this.limit;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|f| {
                    f.map_err(|error| format!("backend {}: body broken: {error}", this.backend).into())
                }))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "backend {}: between-bytes timeout ({:?}) reading body",
                    this.backend, this.limit
                )
                .into()))),
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
