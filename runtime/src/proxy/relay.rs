//! Origin responses relayed to the client as they arrive, nothing stored: passes, and the
//! responses a fill found not storable; and what replaces an origin response when
//! `vcl_backend_response` says so.

use http::header::HeaderName;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use policy_lang::{Action, Sub};

use super::attempts::{failure, Attempts};
use super::route::Route;
use super::vcl::BackendSession;
use super::{bereq, h2_accounting, headers, invalidate, synth};
use crate::backend::{Backend, OutgoingBody, TimedBody};
use crate::cache::body::ProxyBody;

/// An origin response relayed as it is, minus hop-by-hop fields, plus `Via`.
/// `strip` names the targeted cache-control field (RFC 9213) under
/// `--strip-targeted-cache-control`, removed too.
pub(super) fn relay(
    response: Response<TimedBody>,
    head_only: bool,
    strip: Option<&HeaderName>,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    headers::strip_hop_by_hop(&mut parts.headers);
    if let Some(targeted) = strip {
        parts.headers.remove(targeted);
    }
    headers::append_via(&mut parts.headers, parts.version);
    let body = if head_only {
        ProxyBody::empty()
    } else {
        ProxyBody::stream(body)
    };
    Response::from_parts(parts, body)
}

/// Forwards the request, body included, and relays the response; nothing is stored.
pub(super) async fn pass(route: Route<'_>, parts: &Parts, body: OutgoingBody) -> Response<ProxyBody> {
    h2_accounting::origin_fetch_started();
    let mut bereq = bereq::pass(parts, route.client.ip(), body);
    let (mut attempts, mut backend) =
        Attempts::start(route.version, route.hint, route.backend, &mut bereq, true);
    loop {
        let response = match attempts.send(&mut backend, bereq).await {
            Ok(response) => response,
            Err(failed) => return failure(failed, route.shared.show_backend_errors),
        };
        invalidate::after(route, parts, &response);
        match passed(route, parts, &mut attempts, &mut backend, response).await {
            Passed::Relay(response) => return response,
            Passed::Retry(next) => bereq = next,
        }
    }
}

/// What a pass makes of the origin's response (see [`passed`]).
pub(super) enum Passed {
    /// The client's response.
    Relay(Response<ProxyBody>),
    /// `vcl_backend_response` asked for the request to be sent again: this one.
    Retry(Request<OutgoingBody>),
}

/// The origin's `response` to a pass of `parts` (sent by `attempts` to `backend`), through the
/// policy's `vcl_backend_response` when it has one (`bereq.uncacheable`: the builtin delivers
/// it as it is), relayed (with the body its plugins that read bodies leave); or the request to
/// send again when the policy retries.
pub(super) async fn passed(
    route: Route<'_>,
    parts: &Parts,
    attempts: &mut Attempts<'_>,
    backend: &mut Backend,
    response: Response<TimedBody>,
) -> Passed {
    let Route { shared, version, .. } = route;
    let (mut head, body) = response.into_parts();
    let mut body_plugins = None;
    if version.policy.is_some() && version.policy_defining(Sub::BackendResponse).is_none() {
        let traced = super::trace::of(parts);
        super::trace::builtin(
            traced,
            super::trace::Side::Backend,
            Sub::BackendResponse,
            &Action::Deliver,
        );
    }
    if let Some(program) = version.policy_defining(Sub::BackendResponse) {
        let mut request = parts.clone();
        attempts.lend_as_built(&mut request);
        let mut session = BackendSession::new(&mut request, backend.name(), true, &mut attempts.task);
        session.version = Some(version);
        session.retries = attempts.retries;
        session.beresp = Some(&mut head);
        let action = super::trace::call(program, Sub::BackendResponse, &mut session);
        if session.rolled_back || action == Action::Retry {
            let rolled_back = session.rolled_back;
            drop(session);
            if rolled_back {
                if let Err(failed) = attempts.after_rollback(backend, action == Action::Retry) {
                    return Passed::Relay(failure(failed, shared.show_backend_errors));
                }
            }
            // The response is dropped unread: its connection closes.
            return match attempts.retry(backend) {
                Ok(next) => Passed::Retry(next),
                Err(failed) => Passed::Relay(failure(failed, shared.show_backend_errors)),
            };
        }
        if let Some(replaced) = replacement(action, &mut session) {
            return Passed::Relay(replaced);
        }
        body_plugins = session.plugins.backend_body(session.bereq);
        if session.do_esi {
            let url = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
            super::esi::assemble_when_delivered(&mut head.extensions, url);
        }
    }
    let relayed = relay(
        Response::from_parts(head, body),
        parts.method == Method::HEAD,
        shared.targeted_to_strip(),
    );
    // Boxed: a body plugin's rewrite is a kilobyte and a half of future, which every pass's
    // future would carry inline.
    Passed::Relay(match body_plugins {
        Some(plugins) => Box::pin(plugins.rewrite(version, relayed))
            .await
            .unwrap_or_else(|replaced| replaced),
        None => relayed,
    })
}

/// What the client gets instead of the origin's response when `vcl_backend_response` ends with
/// a plugin's local response, `error` (also a fail-closed plugin's failure), `abandon` or
/// `fail`; `None` for the actions that deliver the origin's response.
pub(super) fn replacement(action: Action, session: &mut BackendSession<'_>) -> Option<Response<ProxyBody>> {
    match action {
        Action::PluginResponse { .. } => {
            let local = session.plugins.local.take()?;
            let mut response = Response::new(ProxyBody::full(local.body));
            *response.status_mut() = local.status;
            *response.headers_mut() = local.headers;
            Some(response)
        }
        Action::Error { status, reason } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            Some(synth::plain(status, &reason))
        }
        Action::Abandon | Action::Fail { .. } => Some(synth::plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the policy abandoned the backend response",
        )),
        _ => None,
    }
}
