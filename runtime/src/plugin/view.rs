//! The owned request/response views the proxy hands to a plugin phase, and what comes back.
//!
//! A view is moved into the plugin's store for the duration of one callback and moved back
//! afterwards (no copy of the header map). Pseudo-headers (`:method`, `:path`, `:authority`,
//! `:scheme`, `:status`) are derived from the typed fields, not stored in `headers`.

use std::net::SocketAddr;

use bytes::Bytes;
use http::uri::Scheme;
use http::{HeaderMap, Method, StatusCode, Uri, Version};

/// The client request as a plugin sees it in `proxy_on_request_headers` (read-write) and in
/// later phases (read-only in practice: the request has been sent by then).
#[derive(Debug, Clone)]
pub struct RequestView {
    /// `:method`.
    pub method: Method,
    /// `:path` is `uri.path_and_query()`; `:authority` is `uri.authority()` when the URI is
    /// absolute, the `Host` header otherwise.
    pub uri: Uri,
    /// `request.protocol`.
    pub version: Version,
    /// `:scheme` (default `http`).
    pub scheme: Scheme,
    /// Regular headers. `host` is exposed to plugins as `:authority` in the pairs.
    pub headers: HeaderMap,
    /// `source.address` / `source.port`.
    pub client_addr: Option<SocketAddr>,
    /// The `end_of_stream` flag passed to `proxy_on_request_headers` (true: no body follows).
    pub end_of_stream: bool,
}

impl RequestView {
    /// A view with HTTP/1.1, scheme `http`, no client address and `end_of_stream = true`.
    pub fn new(method: Method, uri: Uri, headers: HeaderMap) -> Self {
        let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
        RequestView {
            method,
            uri,
            version: Version::HTTP_11,
            scheme,
            headers,
            client_addr: None,
            end_of_stream: true,
        }
    }

    /// The value of `:authority`: the URI's authority, else the `Host` header.
    pub fn authority(&self) -> Option<&[u8]> {
        match self.uri.authority() {
            Some(a) => Some(a.as_str().as_bytes()),
            None => self.headers.get(http::header::HOST).map(|v| v.as_bytes()),
        }
    }

    /// An empty placeholder left in the caller's slot while the real view is in the store.
    pub(crate) fn placeholder() -> Self {
        RequestView {
            method: Method::GET,
            uri: Uri::default(),
            version: Version::HTTP_11,
            scheme: Scheme::HTTP,
            headers: HeaderMap::new(),
            client_addr: None,
            end_of_stream: true,
        }
    }
}

/// The response as a plugin sees it in `proxy_on_response_headers` (read-write).
#[derive(Debug, Clone)]
pub struct ResponseView {
    /// `:status`.
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    /// The `end_of_stream` flag passed to `proxy_on_response_headers`.
    pub end_of_stream: bool,
}

impl ResponseView {
    /// A view with HTTP/1.1 and `end_of_stream = false` (a body follows).
    pub fn new(status: StatusCode, headers: HeaderMap) -> Self {
        ResponseView {
            status,
            version: Version::HTTP_11,
            headers,
            end_of_stream: false,
        }
    }

    pub(crate) fn placeholder() -> Self {
        ResponseView::new(StatusCode::OK, HeaderMap::new())
    }
}

/// What a plugin phase decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on; the view may have been edited.
    Continue,
    /// The plugin called `proxy_send_local_response`: end the request with this response
    /// (like `return (synth(...))`), whatever action the callback returned.
    LocalResponse(LocalResponse),
    /// The plugin paused the stream (it waits for an outbound call or a timer): await
    /// [`PluginStream::resumed`](super::PluginStream::resumed) for the final verdict.
    Paused,
}

/// A response produced by the plugin itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The "status code details" string the plugin passed (for logs; may be empty).
    pub details: String,
}
