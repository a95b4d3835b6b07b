//! A request's plugin calls: what `plugin.request(NAME);` and `plugin.response(NAME);` do.
//!
//! One [`PluginCalls`] lives in each VCL session, which lends it the version whose plugins run. It opens a plugin's stream (its proxy-wasm
//! HTTP context) on the first call and keeps it for the later phases of the same session, so a
//! plugin sees `vcl_recv`'s request and `vcl_deliver`'s response in one context, as on Envoy.
//! It lends the session's header maps to the plugin host as owned views and takes them back,
//! so the statements after the call see the plugin's edits. It applies the plugin's
//! `.on_error`, and keeps a local response (`proxy_send_local_response`) for the driver to
//! send.
//!
//! A plugin that pauses the request or the response (it waits for an outbound call or a
//! timer) ends `vcl_recv` or `vcl_deliver` with `Action::PluginPaused`.
//! [`PluginCalls::resume`] waits for it without holding a thread; the sub then runs again
//! from the request (and response) as it was when it started, and each plugin call it already
//! made answers with what that call came to (the paused one: how its pause ended) instead of
//! calling the plugin again. `vcl_backend_response` does not wait for its headers callback (a
//! pause there continues); its plugins that read bodies run their body callbacks on the
//! fetch's task, before the object is stored ([`BackendBody`]), and may wait there.

use std::net::SocketAddr;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;
use policy_lang::{Action, OnError, PluginId, PluginOutcome};

use super::synth;
use crate::cache::body::{BoxError, ProxyBody};

use crate::plugin::{LocalResponse, PluginError, PluginStream, RequestView, ResponseView, Undo, Verdict};
use crate::version::Version;

/// The plugin streams one session has opened.
#[derive(Default)]
pub(super) struct PluginCalls {
    /// The first plugin's stream inline (most policies run one plugin per request), the
    /// others after it.
    first: Option<(PluginId, PluginStream)>,
    more: Vec<(PluginId, PluginStream)>,
    /// What a plugin answered the request with, for [`Action::PluginResponse`].
    ///
    /// [`Action::PluginResponse`]: policy_lang::Action::PluginResponse
    pub local: Option<LocalResponse>,
    /// `local` answers a response (sent from a response callback): as on Envoy once the
    /// response is being encoded, it goes out directly, past the response callbacks.
    local_replaces_response: bool,
    /// The plugin whose request or response phase is paused.
    paused: Option<PluginId>,
    /// The plugin calls of this `vcl_recv` or `vcl_deliver` run, for a run again after a
    /// pause. Recorded only when the version has several plugins (with one, only the paused
    /// call is ever answered again).
    settled: Vec<Settled>,
    /// The sub runs again after a pause: calls in `settled` are answered from there.
    replaying: bool,
    /// Plugins whose response phase ran in `vcl_deliver` and that see bodies (`.max_body`),
    /// in call order: [`PluginCalls::response_body`] runs their body callbacks.
    body_readers: Vec<PluginId>,
    /// The same for the request phase in `vcl_recv` ([`PluginCalls::request_body`]).
    request_body_readers: Vec<PluginId>,
    /// The request body as those plugins left it, for the origin.
    pub rewritten_body: Option<bytes::Bytes>,
    /// What the plugins' writes replaced in the session's request and response, while the
    /// session records them ([`PluginCalls::record_writes`]).
    req_undo: Undo,
    resp_undo: Undo,
}

/// The plugins `vcl_backend_response` ran whose response phase reads bodies (`.max_body`),
/// kept past the sub with the backend request they saw: the fetch shows them the body before
/// it stores or relays it, on its own task, where a pause at the end of the body is waited
/// for as in `vcl_deliver`. Dropped, it ends their streams.
pub(super) struct BackendBody {
    calls: PluginCalls,
    bereq: Parts,
}

impl BackendBody {
    /// The body callbacks over `response` (see [`PluginCalls::response_body`]): the response
    /// as the plugins left it, or what replaces it (`Err`: a local response, a fail-closed
    /// failure, a body past the smallest `.max_body`).
    pub async fn rewrite(
        mut self,
        version: &Version,
        response: Response<ProxyBody>,
    ) -> Result<Response<ProxyBody>, Response<ProxyBody>> {
        let reading = self.calls.response_body(version, &mut self.bereq, None, response);
        Box::pin(reading).await
    }

    /// [`rewrite`](Self::rewrite) over an object about to be stored: its `status` and
    /// `headers` (the plugins may edit both) and the origin's `body`; returns the body to
    /// store, with `headers`' `Content-Length` set to its length.
    pub async fn rewrite_stored<B>(
        self,
        version: &Version,
        status: &mut StatusCode,
        headers: &mut HeaderMap,
        body: B,
    ) -> Result<ProxyBody, Response<ProxyBody>>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let mut response = Response::new(ProxyBody::stream(body));
        *response.status_mut() = *status;
        *response.headers_mut() = std::mem::take(headers);
        let (head, body) = self.rewrite(version, response).await?.into_parts();
        (*status, *headers) = (head.status, head.headers);
        Ok(body)
    }
}

/// A plugin call of the current sub run: the request (and, in the response phase, the
/// response) as the plugin left them, and what the call came to.
struct Settled {
    id: PluginId,
    request: RequestView,
    response: Option<ResponseView>,
    outcome: PluginOutcome,
}

impl PluginCalls {
    /// `plugin.request(NAME);`: the plugin's request-headers callback over `req`.
    pub fn request(
        &mut self,
        version: &Version,
        id: PluginId,
        req: &mut Parts,
        client: Option<SocketAddr>,
    ) -> PluginOutcome {
        if let Some(settled) = self.replayed(id) {
            take_back_request(req, settled.request);
            note_body_reader(&mut self.request_body_readers, version, id, settled.outcome);
            return settled.outcome;
        }
        let undo = self.req_undo.fresh();
        let Some(stream) = self.stream(version, id) else {
            return PluginOutcome::Continue;
        };
        let mut view = lend_request(req, client);
        view.undo = undo;
        view.end_of_stream = !announces_body(&view.headers);
        let result = stream.on_request_headers(&mut view);
        self.req_undo.extend(std::mem::take(&mut view.undo));
        if matches!(result, Ok(Verdict::Paused)) {
            take_back_request(req, view);
            self.paused = Some(id);
            return PluginOutcome::Paused;
        }
        let outcome = self.outcome(version, id, result);
        note_body_reader(&mut self.request_body_readers, version, id, outcome);
        self.record(version, id, &view, None, outcome);
        take_back_request(req, view);
        outcome
    }

    /// What call `id` came to in the run before this one, when the sub runs again.
    fn replayed(&mut self, id: PluginId) -> Option<Settled> {
        if !self.replaying {
            return None;
        }
        let at = self.settled.iter().position(|settled| settled.id == id)?;
        Some(self.settled.remove(at))
    }

    fn record(
        &mut self,
        version: &Version,
        id: PluginId,
        request: &RequestView,
        response: Option<&ResponseView>,
        outcome: PluginOutcome,
    ) {
        if version.plugins.len() > 1 {
            self.settled.push(Settled {
                id,
                request: request.clone(),
                response: response.cloned(),
                outcome,
            });
        }
    }

    /// Waits until the paused plugin resumes the request or the response (at most its pause
    /// timeout), and keeps what its call came to for the sub's run again. `req` (and `resp`,
    /// when the response phase paused) are as they were when the paused call was made.
    pub async fn resume(
        &mut self,
        version: &Version,
        req: &Parts,
        resp: Option<(StatusCode, &HeaderMap)>,
        client: Option<SocketAddr>,
    ) {
        let Some(id) = self.paused.take() else {
            return;
        };
        let Some(stream) = self.stream(version, id) else {
            return;
        };
        let mut request = lend_request(&mut req.clone(), client);
        let mut response = resp.map(|(status, headers)| ResponseView::new(status, headers.clone()));
        let result = stream.resumed(&mut request, response.as_mut()).await;
        let outcome = self.outcome(version, id, result);
        self.settled.retain(|settled| settled.id != id);
        self.settled.push(Settled {
            id,
            request,
            response,
            outcome,
        });
        self.replaying = true;
    }

    /// From now on, keeps what the plugins' writes replace in the session's request and
    /// response, so that [`PluginCalls::undo_writes`] can put it back.
    pub fn record_writes(&mut self) {
        (self.req_undo, self.resp_undo) = (Undo::recording(), Undo::recording());
    }

    /// Stops recording, forgetting what was recorded.
    pub fn forget_writes(&mut self) {
        (self.req_undo, self.resp_undo) = (Undo::default(), Undo::default());
    }

    /// Puts `req` (and `resp`: its status and headers) back as they were before the recorded
    /// writes, and stops recording.
    pub fn undo_writes(&mut self, req: &mut Parts, resp: Option<(&mut StatusCode, &mut HeaderMap)>) {
        let req_undo = std::mem::take(&mut self.req_undo);
        req_undo.restore_request(&mut req.method, &mut req.uri, &mut req.headers);
        let resp_undo = std::mem::take(&mut self.resp_undo);
        if let Some((status, headers)) = resp {
            resp_undo.restore_response(status, headers);
        }
    }

    /// The sub runs again after a pause: its plugin calls are answered from the first run.
    pub fn replaying(&self) -> bool {
        self.replaying
    }

    /// The sub is over (it did not end with a pause).
    pub fn run_done(&mut self) {
        self.settled.clear();
        self.replaying = false;
    }

    /// `plugin.response(NAME);`: the plugin's response-headers callback over a response,
    /// with the request it answers (read by plugins that look at both).
    pub fn response(
        &mut self,
        version: &Version,
        id: PluginId,
        req: &mut Parts,
        client: Option<SocketAddr>,
        status: &mut StatusCode,
        headers: &mut HeaderMap,
    ) -> PluginOutcome {
        if let Some(settled) = self.replayed(id) {
            take_back_request(req, settled.request);
            if let Some(response) = settled.response {
                (*status, *headers) = (response.status, response.headers);
            }
            note_body_reader(&mut self.body_readers, version, id, settled.outcome);
            self.local_replaces_response = matches!(settled.outcome, PluginOutcome::LocalResponse { .. });
            return settled.outcome;
        }
        // Only the backend side has no client: its sub cannot wait for a pause.
        let backend_side = client.is_none();
        let undo = (self.req_undo.fresh(), self.resp_undo.fresh());
        let Some(stream) = self.stream(version, id) else {
            return PluginOutcome::Continue;
        };
        let mut request = lend_request(req, client);
        let no_body = has_no_body(&request.method, *status, headers);
        let mut response = ResponseView::new(*status, std::mem::take(headers));
        response.end_of_stream = no_body;
        (request.undo, response.undo) = undo;
        let mut result = stream.on_response_headers(Some(&mut request), &mut response);
        let paused = matches!(result, Ok(Verdict::Paused));
        if paused && backend_side {
            stream.release_pause();
            result = Ok(Verdict::Continue);
        }
        self.req_undo.extend(std::mem::take(&mut request.undo));
        self.resp_undo.extend(std::mem::take(&mut response.undo));
        if paused && !backend_side {
            take_back_request(req, request);
            (*status, *headers) = (response.status, response.headers);
            self.paused = Some(id);
            return PluginOutcome::Paused;
        }
        let outcome = self.outcome(version, id, result);
        note_body_reader(&mut self.body_readers, version, id, outcome);
        self.local_replaces_response = matches!(outcome, PluginOutcome::LocalResponse { .. });
        self.record(version, id, &request, Some(&response), outcome);
        take_back_request(req, request);
        (*status, *headers) = (response.status, response.headers);
        outcome
    }

    /// A plugin whose request phase ran in `vcl_recv` reads the request body: worth calling
    /// [`PluginCalls::request_body`] (whose future, boxed, costs a hit more than the check).
    pub fn reads_request_body(&self) -> bool {
        !self.request_body_readers.is_empty()
    }

    /// The same for the response phase in `vcl_deliver` ([`PluginCalls::response_body`]).
    pub fn reads_response_body(&self) -> bool {
        !self.body_readers.is_empty()
    }

    /// The body callbacks (`proxy_on_request_body`) of the plugins whose request phase ran in
    /// `vcl_recv` with a `.max_body`, when the request has a body: it is read whole from the
    /// client (at most the smallest `.max_body`; a larger one is answered 413), each chunk is
    /// shown to every such plugin, then the whole body with `end_of_stream`. What the plugins
    /// leave is kept in [`rewritten_body`](Self::rewritten_body) for the origin, with
    /// `Content-Length` set to its length. Returns the action that replaces `vcl_recv`'s when
    /// the request ends here: a plugin's local response, a failed plugin, a body too large.
    pub async fn request_body<B>(
        &mut self,
        version: &Version,
        req: &mut Parts,
        client: Option<SocketAddr>,
        body: &mut Option<B>,
    ) -> Option<Action>
    where
        B: http_body::Body<Data = bytes::Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let readers = std::mem::take(&mut self.request_body_readers);
        let limit = readers
            .iter()
            .filter_map(|id| version.plugins.get(id.index())?.max_body())
            .min()?;
        let mut incoming = body.take_if(|b| !b.is_end_stream())?;
        let mut buffer = Vec::new();
        let read = loop {
            let end_of_stream = match grow(&mut incoming, &mut buffer, limit).await {
                Ok(end_of_stream) => end_of_stream,
                Err(stopped) => break Err(stopped),
            };
            let shown = self.show_request_body(version, &readers, req, client, &mut buffer, end_of_stream);
            match shown.await {
                Some(ended) => break Err(Stopped::By(ended)),
                None if end_of_stream => break Ok(buffer),
                None => {}
            }
        };
        let (status, reason) = match read {
            Ok(buffer) => {
                req.headers.remove(header::TRANSFER_ENCODING);
                req.headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(buffer.len()));
                self.rewritten_body = Some(buffer.into());
                return None;
            }
            Err(Stopped::By(ended)) => return Some(ended),
            Err(Stopped::Failed(error)) => (400, format!("the request body failed while plugins read it: {error}")),
            Err(Stopped::TooLarge) => (
                413,
                format!("the request body is larger than {limit} bytes, the `.max_body` of a plugin that reads it"),
            ),
        };
        Some(Action::Synth {
            status,
            reason: reason.into(),
        })
    }

    async fn show_request_body(
        &mut self,
        version: &Version,
        readers: &[PluginId],
        req: &mut Parts,
        client: Option<SocketAddr>,
        buffer: &mut Vec<u8>,
        end_of_stream: bool,
    ) -> Option<Action> {
        for &id in readers {
            let stream = self.stream(version, id)?;
            let mut view = lend_request(req, client);
            let mut result = stream.on_request_body(&mut view, buffer, end_of_stream);
            if end_of_stream && matches!(result, Ok(Verdict::Paused)) {
                result = stream.resumed(&mut view, None).await;
            }
            take_back_request(req, view);
            match self.outcome(version, id, result) {
                PluginOutcome::Continue | PluginOutcome::Paused => {}
                PluginOutcome::LocalResponse { .. } => return Some(Action::PluginResponse { plugin: id }),
                PluginOutcome::Failed => {
                    let name = version.plugins.get(id.index()).map_or("?", |p| p.name());
                    let reason = format!("plugin {name} failed");
                    return Some(Action::Synth {
                        status: 503,
                        reason: reason.into(),
                    });
                }
            }
        }
        None
    }

    /// The body callbacks (`proxy_on_response_body`) of the plugins whose response phase ran
    /// in `vcl_deliver` (or, through [`BackendBody`], `vcl_backend_response`) with a
    /// `.max_body`, before the response head goes on: the body is read
    /// whole (at most the smallest `.max_body`; a larger one is refused with 502), each chunk
    /// is shown to every such plugin with `end_of_stream` false, then the whole body with it
    /// true. The plugins may rewrite the body and the headers; `Content-Length` is then set to
    /// the body's length. A plugin may answer instead (`Err`: its local response, or what
    /// refuses the response). Without such plugins, or for a response without a body (their
    /// headers callback was told `end_of_stream`), the response goes on untouched.
    pub async fn response_body(
        &mut self,
        version: &Version,
        req: &mut Parts,
        client: Option<SocketAddr>,
        response: Response<ProxyBody>,
    ) -> Result<Response<ProxyBody>, Response<ProxyBody>> {
        let readers = std::mem::take(&mut self.body_readers);
        let Some(limit) = readers
            .iter()
            .filter_map(|id| version.plugins.get(id.index())?.max_body())
            .min()
        else {
            return Ok(response);
        };
        if has_no_body(&req.method, response.status(), response.headers()) {
            return Ok(response);
        }
        let (mut head, mut body) = response.into_parts();
        let mut buffer = Vec::new();
        let read = loop {
            let end_of_stream = match grow(&mut body, &mut buffer, limit).await {
                Ok(end_of_stream) => end_of_stream,
                Err(stopped) => break Err(stopped),
            };
            let shown = self.show_body(
                version,
                &readers,
                req,
                client,
                &mut head,
                &mut buffer,
                end_of_stream,
            );
            match shown.await {
                Some(ended) => break Err(Stopped::By(ended)),
                None if end_of_stream => break Ok(buffer),
                None => {}
            }
        };
        let buffer = match read {
            Ok(buffer) => buffer,
            Err(Stopped::By(ended)) => return Err(ended),
            Err(Stopped::Failed(error)) => {
                let detail = format!("the response body failed while plugins read it: {error}");
                return Err(synth::plain(StatusCode::BAD_GATEWAY, &detail));
            }
            Err(Stopped::TooLarge) => {
                let detail =
                    format!("the response body is larger than {limit} bytes, the `.max_body` of a plugin that reads it");
                return Err(synth::plain(StatusCode::BAD_GATEWAY, &detail));
            }
        };
        head.headers.remove(header::TRANSFER_ENCODING);
        head.headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(buffer.len()));
        Ok(Response::from_parts(head, ProxyBody::full(buffer)))
    }

    /// One round of response body callbacks. A local response or a fail-closed failure ends
    /// the request with the response returned.
    #[allow(clippy::too_many_arguments)]
    async fn show_body(
        &mut self,
        version: &Version,
        readers: &[PluginId],
        req: &mut Parts,
        client: Option<SocketAddr>,
        head: &mut http::response::Parts,
        buffer: &mut Vec<u8>,
        end_of_stream: bool,
    ) -> Option<Response<ProxyBody>> {
        for &id in readers {
            let Some(stream) = self.stream(version, id) else {
                continue;
            };
            let mut request = lend_request(req, client);
            let mut response = ResponseView::new(head.status, std::mem::take(&mut head.headers));
            response.end_of_stream = end_of_stream;
            let mut result =
                stream.on_response_body(Some(&mut request), &mut response, buffer, end_of_stream);
            if end_of_stream && matches!(result, Ok(Verdict::Paused)) {
                result = stream.resumed(&mut request, Some(&mut response)).await;
            }
            take_back_request(req, request);
            head.status = response.status;
            head.headers = response.headers;
            match self.outcome(version, id, result) {
                PluginOutcome::Continue | PluginOutcome::Paused => {}
                PluginOutcome::LocalResponse { .. } => {
                    let local = self.local.take().expect("outcome keeps it");
                    return Some(local_response(local));
                }
                PluginOutcome::Failed => {
                    let name = version.plugins.get(id.index()).map_or("?", |p| p.name());
                    let detail = format!("plugin {name} failed");
                    return Some(synth::plain(StatusCode::SERVICE_UNAVAILABLE, &detail));
                }
            }
        }
        None
    }

    /// After `vcl_backend_response` delivered the origin's response: its plugin calls, when a
    /// plugin among them reads the body, for the fetch to run their body callbacks with.
    pub fn backend_body(&mut self, bereq: &Parts) -> Option<BackendBody> {
        if self.body_readers.is_empty() {
            return None;
        }
        Some(BackendBody {
            calls: std::mem::take(self),
            bereq: bereq.clone(),
        })
    }

    /// A plugin answered the request (`proxy_send_local_response`): as on Envoy, the answer
    /// goes through the response-headers callback of every plugin of this request, the one that
    /// sent it included, which may edit its headers and status (a failure or a second local
    /// response there leaves the answer as it was). An answer sent from a response callback
    /// goes out as it is.
    pub fn over_local_response(
        &mut self,
        req: &mut Parts,
        client: Option<SocketAddr>,
        local: &mut LocalResponse,
    ) {
        if std::mem::take(&mut self.local_replaces_response) {
            return;
        }
        let streams = self.first.iter_mut().chain(self.more.iter_mut());
        for (_, stream) in streams {
            let mut request = lend_request(req, client);
            let mut response = ResponseView::new(local.status, std::mem::take(&mut local.headers));
            response.end_of_stream = local.body.is_empty();
            let result = stream.on_response_headers(Some(&mut request), &mut response);
            take_back_request(req, request);
            local.headers = response.headers;
            if matches!(result, Ok(Verdict::Continue)) {
                local.status = response.status;
            }
        }
    }

    fn stream(&mut self, version: &Version, id: PluginId) -> Option<&mut PluginStream> {
        if self.first.as_ref().is_some_and(|(open, _)| *open == id) {
            return self.first.as_mut().map(|(_, stream)| stream);
        }
        if let Some(position) = self.more.iter().position(|(open, _)| *open == id) {
            return Some(&mut self.more[position].1);
        }
        let opened = (id, version.plugins.get(id.index())?.stream());
        if self.first.is_none() {
            return Some(&mut self.first.insert(opened).1);
        }
        self.more.push(opened);
        self.more.last_mut().map(|(_, stream)| stream)
    }

    fn outcome(
        &mut self,
        version: &Version,
        id: PluginId,
        result: Result<Verdict, PluginError>,
    ) -> PluginOutcome {
        match result {
            // Before the end of a body, a pause only asks for more of it.
            Ok(Verdict::Continue | Verdict::Paused) => PluginOutcome::Continue,
            Ok(Verdict::LocalResponse(local)) => {
                let status = local.status.as_u16();
                self.local = Some(local);
                PluginOutcome::LocalResponse { status }
            }
            // The host has logged the cause and counted it; this says what the request got.
            Err(error) => match on_error(version, id) {
                OnError::Deny => {
                    tracing::warn!(plugin = %error.plugin, "request answered 503: the plugin failed and its .on_error is deny");
                    PluginOutcome::Failed
                }
                OnError::Continue => {
                    tracing::info!(plugin = %error.plugin, "request goes on without the plugin: it failed and its .on_error is continue");
                    PluginOutcome::Continue
                }
            },
        }
    }
}

/// The plugin's `.on_error` (deny when the declaration cannot be found).
fn on_error(version: &Version, id: PluginId) -> OnError {
    version
        .policy
        .as_ref()
        .and_then(|program| program.plugins().get(id.index()))
        .map_or(OnError::Deny, |decl| decl.on_error)
}

/// Moves the request's fields into a view for one callback (no copy of the header map). Its
/// `end_of_stream` is for the request headers callback to set.
fn lend_request(req: &mut Parts, client: Option<SocketAddr>) -> RequestView {
    let mut view = RequestView::new(
        req.method.clone(),
        std::mem::take(&mut req.uri),
        std::mem::take(&mut req.headers),
    );
    view.version = req.version;
    view.client_addr = client;
    view
}

/// Whether a response to `method` with `status` and `headers` has no body: what
/// `end_of_stream` on its headers callback says, and then no body callback runs.
fn has_no_body(method: &http::Method, status: StatusCode, headers: &HeaderMap) -> bool {
    method == http::Method::HEAD
        || matches!(status.as_u16(), 100..=199 | 204 | 304)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0")
}

/// Whether a message's framing fields announce a body (RFC 9112 §6.3): chunked, or a
/// `Content-Length` other than 0. What `end_of_stream` on the headers callbacks says.
fn announces_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0")
}

fn take_back_request(req: &mut Parts, view: RequestView) {
    req.method = view.method;
    req.uri = view.uri;
    req.headers = view.headers;
}

/// How reading a body through the plugins' callbacks ended early.
enum Stopped<T> {
    /// The body failed to arrive.
    Failed(String),
    /// It is larger than the limit.
    TooLarge,
    /// A plugin ended the request.
    By(T),
}

/// Reads the next chunk of `body` into `buffer` (at most `limit` bytes in all); true when the
/// body is over. The caller shows the buffer to the plugins after each chunk (`end_of_stream`
/// false) and once more at the end (true, where a plugin may wait).
async fn grow<B, T>(body: &mut B, buffer: &mut Vec<u8>, limit: usize) -> Result<bool, Stopped<T>>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| Stopped::Failed(error.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        if buffer.len() + data.len() > limit {
            return Err(Stopped::TooLarge);
        }
        buffer.extend_from_slice(&data);
        return Ok(false);
    }
    Ok(true)
}

/// Remembers that plugin `id` reads bodies in the phase that just came to `outcome`.
fn note_body_reader(readers: &mut Vec<PluginId>, version: &Version, id: PluginId, outcome: PluginOutcome) {
    let reads = version
        .plugins
        .get(id.index())
        .and_then(|p| p.max_body())
        .is_some();
    if reads && outcome == PluginOutcome::Continue && !readers.contains(&id) {
        readers.push(id);
    }
}

/// A plugin's local response, as the plugin built it (`Content-Length` follows its body).
pub(super) fn local_response(local: LocalResponse) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::full(local.body));
    *response.status_mut() = local.status;
    *response.headers_mut() = local.headers;
    response
}
