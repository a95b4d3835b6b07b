//! The one place that turns failures into responses edgecache writes itself.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};

use crate::backend::{BackendError, FailureKind};
use crate::cache::body::ProxyBody;

/// A short plain-text response: status line text, then `detail`.
pub fn plain(status: StatusCode, detail: &str) -> Response<ProxyBody> {
    let reason = status.canonical_reason().unwrap_or("");
    let body = Bytes::from(format!("{} {reason}\n{detail}\n", status.as_u16()));
    let mut response = Response::new(ProxyBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The status a client sees for an origin failure: down 503, timeout 504, broken 502.
pub fn backend_failure(error: &BackendError) -> Response<ProxyBody> {
    let status = match error.kind {
        FailureKind::Down => StatusCode::SERVICE_UNAVAILABLE,
        FailureKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        FailureKind::Broken => StatusCode::BAD_GATEWAY,
    };
    plain(status, &error.to_string())
}
