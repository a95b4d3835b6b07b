//! An origin response body that fails when the origin goes quiet for too long, and keeps its
//! request counted as in flight until it ends, fails or is dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use super::admission::InFlight;
use super::h1::OriginBody;
use super::silence::Silence;
use crate::cache::body::BoxError;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// [`OriginBody`] with the between-bytes timeout.
pub struct TimedBody {
    inner: OriginBody,
    silence: Silence,
    backend: Arc<str>,
    /// Released at the end of the body, on its first error, or when it is dropped.
    in_flight: Option<InFlight>,
}

impl TimedBody {
    pub(super) fn new(
        inner: OriginBody,
        limit: Duration,
        backend: Arc<str>,
        in_flight: InFlight,
    ) -> TimedBody {
        TimedBody {
            inner,
            silence: Silence::new(limit),
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
        match ready!(this.silence.poll_frame(&mut this.inner, cx)) {
            Ok(frame) => {
                let clean_end =
                    frame.is_none() || (matches!(frame, Some(Ok(_))) && this.inner.is_end_stream());
                if clean_end || matches!(frame, Some(Err(_))) {
                    this.in_flight = None;
                }
                Poll::Ready(frame.map(|f| {
                    f.map_err(|error| format!("backend {}: body broken: {error}", this.backend).into())
                }))
            }
            Err(_) => {
                this.in_flight = None;
                Poll::Ready(Some(Err(format!(
                    "backend {}: between-bytes timeout ({:?}) reading body",
                    this.backend,
                    this.silence.limit()
                )
                .into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
