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

/// The status a client sees for an origin failure: down 503, timeout 504, broken 502; a fetch
/// that failed because the client's body stalled is 408, because it is malformed 400, and the
/// connection closes (the rest of that body will not be read).
pub fn backend_failure(error: &BackendError) -> Response<ProxyBody> {
    let status = match error.kind {
        FailureKind::Down => StatusCode::SERVICE_UNAVAILABLE,
        FailureKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        FailureKind::Broken => StatusCode::BAD_GATEWAY,
        FailureKind::ClientBodyTimeout | FailureKind::ClientBodyBroken => {
            let status = match error.kind {
                FailureKind::ClientBodyTimeout => StatusCode::REQUEST_TIMEOUT,
                _ => StatusCode::BAD_REQUEST,
            };
            let mut response = plain(status, &error.detail);
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    plain(status, &error.to_string())
}
