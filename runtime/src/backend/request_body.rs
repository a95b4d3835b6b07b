//! A client's request body on its way to an origin, with `--body-timeout`: when the client goes
//! silent for longer, the body fails with [`ClientBodyTimeout`], the origin connection it was
//! streaming into is closed (not held for the client), and the client gets 408 as from nginx's
//! `client_body_timeout`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use crate::cache::body::BoxError;

/// The client sent nothing of its request body for this long.
#[derive(Debug, thiserror::Error)]
#[error("the client sent no request body data for {0:?} (--body-timeout)")]
pub struct ClientBodyTimeout(pub Duration);

/// The client's request body could not be read: its framing is bad (an invalid chunk size) or
/// it was cut short. The client's fault, not the origin's.
#[derive(Debug, thiserror::Error)]
#[error("the client's request body is malformed or cut short: {0}")]
pub struct ClientBodyBroken(hyper::Error);

/// `Incoming` failing with [`ClientBodyTimeout`] after a silence of `limit` between frames.
pub struct ClientBody {
    inner: Incoming,
    limit: Duration,
    /// Armed at the first read: the time before the origin asks for the body is not the
    /// client's.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl ClientBody {
    pub fn new(inner: Incoming, limit: Duration) -> ClientBody {
        ClientBody {
            inner,
            limit,
            deadline: None,
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            if let Some(deadline) = &mut this.deadline {
                deadline.as_mut().reset(Instant::now() + this.limit);
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(|error| ClientBodyBroken(error).into())));
        }
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(ClientBodyTimeout(limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
