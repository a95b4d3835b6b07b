//! A request's plugin calls: what `plugin.request(NAME);` and `plugin.response(NAME);` do.
//!
//! One [`PluginCalls`] lives in each VCL session, which lends it the version whose plugins run. It opens a plugin's stream (its proxy-wasm
//! HTTP context) on the first call and keeps it for the later phases of the same session, so a
//! plugin sees `vcl_recv`'s request and `vcl_deliver`'s response in one context, as on Envoy.
//! It lends the session's header maps to the plugin host as owned views and takes them back,
//! so the statements after the call see the plugin's edits. It applies the plugin's
//! `.on_error`, and keeps a local response (`proxy_send_local_response`) for the driver to
//! send.

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
        let Some(stream) = self.stream(version, id) else {
            return PluginOutcome::Continue;
        };
        let mut view = lend_request(req, client);
        let result = stream.on_request_headers(&mut view);
        take_back_request(req, view);
        self.outcome(version, id, result)
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
            Ok(Verdict::Continue) => PluginOutcome::Continue,
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
