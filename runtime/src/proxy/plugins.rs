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
//! A plugin that pauses the request (it waits for an outbound call or a timer) ends
//! `vcl_recv` with `Action::PluginPaused`. [`PluginCalls::resume`] waits for it without
//! holding a thread; `vcl_recv` then runs again from the request as it was when it started,
//! and each plugin call it already made answers with what that call came to (the paused one:
//! how its pause ended) instead of calling the plugin again.

use std::net::SocketAddr;

use http::request::Parts;
use http::{HeaderMap, StatusCode};
use policy_lang::{OnError, PluginId, PluginOutcome};

use crate::plugin::{LocalResponse, PluginError, PluginStream, RequestView, ResponseView, Verdict};
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
    /// The plugin whose request phase is paused.
    paused: Option<PluginId>,
    /// The request-phase calls of this `vcl_recv` run, for a run again after a pause: each
    /// with the request as the plugin left it and what the call came to. Recorded only when the
    /// version has several plugins (with one, only the paused call is ever answered again).
    settled: Vec<(PluginId, RequestView, PluginOutcome)>,
    /// `vcl_recv` runs again after a pause: calls in `settled` are answered from there.
    replaying: bool,
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
        if self.replaying {
            if let Some(at) = self.settled.iter().position(|(settled, ..)| *settled == id) {
                let (_, view, outcome) = self.settled.remove(at);
                take_back_request(req, view);
                return outcome;
            }
        }
        let Some(stream) = self.stream(version, id) else {
            return PluginOutcome::Continue;
        };
        let mut view = lend_request(req, client);
        let result = stream.on_request_headers(&mut view);
        if matches!(result, Ok(Verdict::Paused)) {
            take_back_request(req, view);
            self.paused = Some(id);
            return PluginOutcome::Paused;
        }
        let outcome = self.outcome(version, id, result);
        if version.plugins.len() > 1 {
            self.settled.push((id, view.clone(), outcome));
        }
        take_back_request(req, view);
        outcome
    }

    /// Waits until the paused plugin resumes the request (at most its pause timeout), and
    /// keeps what its call came to for `vcl_recv`'s run again. `req` is the request as it was
    /// when the paused call was made.
    pub async fn resume(&mut self, version: &Version, req: &Parts, client: Option<SocketAddr>) {
        let Some(id) = self.paused.take() else {
            return;
        };
        let Some(stream) = self.stream(version, id) else {
            return;
        };
        let mut view = lend_request(&mut req.clone(), client);
        let result = stream.resumed(&mut view).await;
        let outcome = self.outcome(version, id, result);
        self.settled.retain(|(settled, ..)| *settled != id);
        self.settled.push((id, view, outcome));
        self.replaying = true;
    }

    /// `vcl_recv` is over (it did not end with a pause).
    pub fn recv_done(&mut self) {
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
        let Some(stream) = self.stream(version, id) else {
            return PluginOutcome::Continue;
        };
        let mut request = lend_request(req, client);
        let mut response = ResponseView::new(*status, std::mem::take(headers));
        let result = stream.on_response_headers(Some(&mut request), &mut response);
        take_back_request(req, request);
        *status = response.status;
        *headers = response.headers;
        self.outcome(version, id, result)
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
            // A pause outside the request headers phase is not held (the host logs it).
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

/// Moves the request's fields into a view for one callback (no copy of the header map).
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

fn take_back_request(req: &mut Parts, view: RequestView) {
    req.method = view.method;
    req.uri = view.uri;
    req.headers = view.headers;
}
