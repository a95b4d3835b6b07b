//! A client's request body on its way to an origin, with `--body-timeout`: when the client goes
//! silent for longer, the body fails with [`ClientBodyTimeout`], the origin connection it was
//! streaming into is closed (not held for the client), and the client gets 408 as from nginx's
//! `client_body_timeout`.

use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::silence::Silence;
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
    silence: Silence,
}

impl ClientBody {
    pub fn new(inner: Incoming, limit: Duration) -> ClientBody {
        ClientBody {
            inner,
            silence: Silence::new(limit),
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
        Poll::Ready(match ready!(this.silence.poll_frame(&mut this.inner, cx)) {
            Ok(frame) => frame.map(|frame| frame.map_err(|error| ClientBodyBroken(error).into())),
            Err(_) => Some(Err(Box::new(ClientBodyTimeout(this.silence.limit())))),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
