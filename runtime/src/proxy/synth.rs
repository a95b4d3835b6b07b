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
/// that failed because the client's body stalled is 408, because it is malformed 400.
pub fn failure_status(kind: FailureKind) -> StatusCode {
    match kind {
        FailureKind::Down => StatusCode::SERVICE_UNAVAILABLE,
        FailureKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        FailureKind::Broken => StatusCode::BAD_GATEWAY,
        FailureKind::ClientBodyTimeout => StatusCode::REQUEST_TIMEOUT,
        FailureKind::ClientBodyBroken => StatusCode::BAD_REQUEST,
    }
}

/// The page of a failed fetch, with [`failure_status`]. It names the request id (`xid`, which
/// the access log line shows too) and a generic cause; the backend, its address and the
/// operating system's error only with `show_detail` (`--show-backend-errors`), since they tell
/// a visitor how the site is built. When the client's own body was at fault, the connection
/// closes (the rest of that body will not be read).
pub fn backend_failure(error: &BackendError, xid: Option<i64>, show_detail: bool) -> Response<ProxyBody> {
    let status = failure_status(error.kind);
    let cause = match error.kind {
        FailureKind::Down => "the origin could not be reached",
        FailureKind::Timeout => "the origin did not answer in time",
        FailureKind::Broken => "the origin sent a broken response",
        FailureKind::ClientBodyTimeout | FailureKind::ClientBodyBroken => {
            let mut response = plain(status, &error.detail);
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let mut detail = match show_detail {
        true => error.to_string(),
        false => format!("Backend fetch failed: {cause}."),
    };
    if let Some(xid) = xid {
        detail.push_str(&format!("\nXID: {xid}"));
    }
    plain(status, &detail)
}
