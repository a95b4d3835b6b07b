//! Varnish's builtin VCL steps that run natively, step for step with policy-lang's
//! `builtin.vcl` (`tests/policy_phases.rs` holds them together): `vcl_recv` and `vcl_hash`.
//! The driver calls them without a policy and where a policy has no sub of its own; the VCL
//! session calls them where a user sub falls through.

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode};
use policy_lang::Action;

use super::pipe;
use crate::cache::key::CacheKey;

/// Varnish's builtin `vcl_recv`: only GET and HEAD are looked up, and requests carrying
/// credentials or cookies are passed, since the response may be personal.
pub(super) fn passes(request: &Parts) -> bool {
    let method = &request.method;
    (method != Method::GET && method != Method::HEAD)
        || request.headers.contains_key(header::AUTHORIZATION)
        || request.headers.contains_key(header::COOKIE)
}

/// Varnish's builtin `vcl_recv` as policy-lang's `builtin.vcl` spells it, natively: what a
/// policy without a `vcl_recv` of its own runs, and what a user `vcl_recv` falls through to
/// (interpreting it costs more than the rest of a hit). Keep it step for step with
/// `builtin.vcl`; `tests/policy_phases.rs` holds them together.
pub(super) fn vcl_recv(request: &mut Parts) -> Action {
    let synth = |status: StatusCode| Action::Synth {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").into(),
    };
    // vcl_req_host
    if let Some(host) = request.headers.get(header::HOST) {
        if host.as_bytes().iter().any(u8::is_ascii_uppercase) {
            if let Ok(lower) = HeaderValue::from_bytes(&host.as_bytes().to_ascii_lowercase()) {
                request.headers.insert(header::HOST, lower);
            }
        }
    } else if request.version == http::Version::HTTP_11 {
        return synth(StatusCode::BAD_REQUEST);
    }
    if pipe::is_websocket_upgrade(request) {
        return Action::Pipe;
    }
    // vcl_req_method
    let method = request.method.as_str();
    if method == "PRI" {
        return synth(StatusCode::METHOD_NOT_ALLOWED);
    }
    if method != "GET" && method != "HEAD" {
        return Action::Pass;
    }
    // vcl_req_authorization, vcl_req_cookie
    if request.headers.contains_key(header::AUTHORIZATION) || request.headers.contains_key(header::COOKIE) {
        return Action::Pass;
    }
    Action::Lookup
}

/// Varnish's builtin `vcl_hash`: the host and the URL.
pub(super) fn vcl_hash(request: &Parts) -> CacheKey {
    let host = request
        .headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    let target = request.uri.path_and_query().map_or("/", |pq| pq.as_str());
    CacheKey::from_host_and_target(host, target)
}
