//! Committing a response: a streamed body's first frame is awaited before the head goes out,
//! so that an origin whose body is broken from its first byte (an invalid chunk in its first
//! packet) gets the client a 502 with a status line, and the access log says 502.
//!
//! Without this the head would be lost: hyper buffers a response head until the body first
//! waits, and a body that fails at once closes the connection with nothing written. A body that
//! breaks later, after the head was sent, can only be cut short.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

use super::synth;
use crate::cache::body::{BoxError, ProxyBody};

/// `response` once its body has started: whole bodies at once, streamed ones after their first
/// frame (bounded by the origin's between-bytes timeout, which fails the body), a body that
/// failed before its first frame replaced by a 502.
pub(super) async fn started(response: Response<ProxyBody>) -> Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let ProxyBody::Stream(mut rest) = body else {
        return Response::from_parts(parts, body);
    };
    let first = match rest.frame().await {
        None => return Response::from_parts(parts, ProxyBody::empty()),
        Some(Ok(first)) => first,
        Some(Err(error)) => {
            tracing::warn!("{error}");
            let detail = format!("the response body failed before its first byte: {error}");
            return synth::plain(StatusCode::BAD_GATEWAY, &detail);
        }
    };
    let body = Started {
        first: Some(first),
        rest,
    };
    Response::from_parts(parts, ProxyBody::stream(body))
}

/// A streamed body whose first frame was already read.
struct Started {
    first: Option<Frame<Bytes>>,
    rest: UnsyncBoxBody<Bytes, BoxError>,
}

impl Body for Started {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.size_hint();
        let first = self
            .first
            .as_ref()
            .and_then(Frame::data_ref)
            .map_or(0, |data| data.len() as u64);
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + first);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + first);
        }
        hint
    }
}
