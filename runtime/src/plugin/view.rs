//! The owned request/response views the proxy hands to a plugin phase, and what comes back.
//!
//! A view is moved into the plugin's store for the duration of one callback and moved back
//! afterwards (no copy of the header map). Pseudo-headers (`:method`, `:path`, `:authority`,
//! `:scheme`, `:status`) are derived from the typed fields, not stored in `headers`.

use std::net::SocketAddr;

use bytes::Bytes;
use http::uri::Scheme;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version};

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
    /// What the plugin's writes replaced, when the caller asked ([`Undo::recording`]).
    pub undo: Undo,
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
            undo: Undo::default(),
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
            undo: Undo::default(),
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
    /// What the plugin's writes replaced, when the caller asked ([`Undo::recording`]).
    pub undo: Undo,
}

impl ResponseView {
    /// A view with HTTP/1.1 and `end_of_stream = false` (a body follows).
    pub fn new(status: StatusCode, headers: HeaderMap) -> Self {
        ResponseView {
            status,
            version: Version::HTTP_11,
            headers,
            end_of_stream: false,
            undo: Undo::default(),
        }
    }

    pub(crate) fn placeholder() -> Self {
        ResponseView::new(StatusCode::OK, HeaderMap::new())
    }
}

/// What a plugin's writes to a view replaced, so that the view can be put back as it was
/// before them: a policy sub that runs again after a plugin paused it starts from the request
/// and response as they were (see `ClientSession::run_resuming`). A header records its lines
/// before the first write to it, so a plugin that adds one header costs one small record,
/// not a copy of the map. Off unless the caller asks ([`Undo::recording`]).
#[derive(Debug, Clone, Default)]
pub struct Undo {
    /// `None`: not recording.
    records: Option<Vec<Prior>>,
}

#[derive(Debug, Clone)]
enum Prior {
    /// A header's lines before the first write to it (none: it was absent).
    Header(HeaderName, Vec<HeaderValue>),
    /// The whole map, before a plugin replaced it (`proxy_set_header_map_pairs`). This and the
    /// URI are boxed: the common record, one header, stays small.
    Headers(Box<HeaderMap>),
    Method(Method),
    Uri(Box<Uri>),
    Status(StatusCode),
}

impl Prior {
    fn restore_headers(self, headers: &mut HeaderMap) {
        match self {
            Prior::Header(name, lines) => {
                headers.remove(&name);
                for line in lines {
                    headers.append(name.clone(), line);
                }
            }
            Prior::Headers(was) => *headers = *was,
            Prior::Method(_) | Prior::Uri(_) | Prior::Status(_) => {}
        }
    }
}

impl Undo {
    /// Records from now on.
    pub fn recording() -> Undo {
        Undo {
            records: Some(Vec::new()),
        }
    }

    /// An empty one that records if this one does.
    pub fn fresh(&self) -> Undo {
        match self.records {
            Some(_) => Undo::recording(),
            None => Undo::default(),
        }
    }

    /// Puts a request back as it was before the recorded writes, latest first.
    pub fn restore_request(self, method: &mut Method, uri: &mut Uri, headers: &mut HeaderMap) {
        for prior in self.records.into_iter().flatten().rev() {
            match prior {
                Prior::Method(was) => *method = was,
                Prior::Uri(was) => *uri = *was,
                Prior::Status(_) => {}
                prior => prior.restore_headers(headers),
            }
        }
    }

    /// Puts a response back as it was before the recorded writes, latest first.
    pub fn restore_response(self, status: &mut StatusCode, headers: &mut HeaderMap) {
        for prior in self.records.into_iter().flatten().rev() {
            match prior {
                Prior::Status(was) => *status = was,
                Prior::Method(_) | Prior::Uri(_) => {}
                prior => prior.restore_headers(headers),
            }
        }
    }

    /// Appends `later`'s records (writes made after this one's).
    pub fn extend(&mut self, later: Undo) {
        if let (Some(records), Some(more)) = (self.records.as_mut(), later.records) {
            if records.is_empty() {
                *records = more;
            } else {
                records.extend(more);
            }
        }
    }

    /// Before a write to header `name` of `headers`.
    pub(crate) fn header(&mut self, headers: &HeaderMap, name: &HeaderName) {
        self.lines(name, headers.get_all(name).iter());
    }

    /// Before a write to header `name`, whose lines are `lines` (none: it is absent).
    pub(crate) fn lines<'a>(&mut self, name: &HeaderName, lines: impl Iterator<Item = &'a HeaderValue>) {
        let Some(records) = self.records.as_mut() else {
            return;
        };
        let seen = records
            .iter()
            .any(|prior| matches!(prior, Prior::Header(seen, _) if seen == name));
        if !seen {
            records.push(Prior::Header(name.clone(), lines.cloned().collect()));
        }
    }

    /// Before `headers` is replaced as a whole: takes it (leaving it empty) when recording.
    pub(crate) fn headers(&mut self, headers: &mut HeaderMap) {
        match self.records.as_mut() {
            Some(records) => records.push(Prior::Headers(Box::new(std::mem::take(headers)))),
            None => headers.clear(),
        }
    }

    pub(crate) fn method(&mut self, method: &Method) {
        if let Some(records) = self.records.as_mut() {
            records.push(Prior::Method(method.clone()));
        }
    }

    pub(crate) fn uri(&mut self, uri: &Uri) {
        if let Some(records) = self.records.as_mut() {
            records.push(Prior::Uri(Box::new(uri.clone())));
        }
    }

    pub(crate) fn status(&mut self, status: StatusCode) {
        if let Some(records) = self.records.as_mut() {
            records.push(Prior::Status(status));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn undo_puts_back_every_kind_of_write_latest_first() {
        let before = map(&[("a", "1"), ("a", "2"), ("b", "x")]);
        let (mut method, mut uri, mut headers) = (Method::GET, Uri::from_static("/one"), before.clone());
        let mut undo = Undo::recording();
        let added = HeaderName::from_static("c");
        undo.header(&headers, &added);
        headers.append(added, HeaderValue::from_static("new"));
        let a = HeaderName::from_static("a");
        undo.header(&headers, &a);
        headers.insert(a.clone(), HeaderValue::from_static("replaced"));
        undo.header(&headers, &a);
        headers.remove(&a);
        undo.method(&method);
        method = Method::POST;
        undo.uri(&uri);
        uri = Uri::from_static("/two");
        undo.headers(&mut headers);
        headers.insert("d", HeaderValue::from_static("all new"));
        undo.restore_request(&mut method, &mut uri, &mut headers);
        assert_eq!((method, uri.to_string()), (Method::GET, "/one".to_string()));
        let lines = |h: &HeaderMap, name| h.get_all(name).iter().cloned().collect::<Vec<_>>();
        for name in ["a", "b", "c", "d"] {
            assert_eq!(lines(&headers, name), lines(&before, name), "{name}");
        }
    }

    #[test]
    fn undo_records_nothing_unless_asked_and_restores_a_status() {
        let mut off = Undo::default();
        let mut headers = map(&[("a", "1")]);
        off.headers(&mut headers);
        assert!(headers.is_empty(), "a whole-map write still clears the map");
        assert!(off.fresh().records.is_none());

        let mut undo = Undo::recording();
        let mut status = StatusCode::OK;
        undo.status(status);
        status = StatusCode::FORBIDDEN;
        let mut later = undo.fresh();
        later.status(status);
        status = StatusCode::IM_A_TEAPOT;
        undo.extend(later);
        undo.restore_response(&mut status, &mut headers);
        assert_eq!(status, StatusCode::OK);
    }
}
