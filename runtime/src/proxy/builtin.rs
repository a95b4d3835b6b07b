//! Varnish's builtin VCL steps that run natively, step for step with policy-lang's
//! `builtin.vcl` (`tests/policy_phases.rs` holds them together): `vcl_recv` and `vcl_hash`.
//! The driver calls them without a policy and where a policy has no sub of its own; the VCL
//! session calls them where a user sub falls through.

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::StatusCode;
use policy_lang::Action;

use super::pipe;
use crate::cache::key::CacheKey;

/// Which requests Varnish's builtin `vcl_recv` looks up although they carry credentials or
/// cookies: by default none (`vcl_req_authorization` and `vcl_req_cookie` pass them, since the
/// answer may be personal); `--lookup-with-authorization` and `--lookup-with-cookie` let the
/// cache have them as RFC 9111 does. A response to a request with `Authorization` is still
/// stored only when it allows sharing (§3.5, `storable::check_storable`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lookups {
    pub with_authorization: bool,
    pub with_cookie: bool,
}

impl Lookups {
    pub fn from_config(config: &crate::config::Config) -> Lookups {
        Lookups {
            with_authorization: config.lookup_with_authorization,
            with_cookie: config.lookup_with_cookie,
        }
    }

    /// `vcl_req_authorization` and `vcl_req_cookie`: whether the builtin passes a request with
    /// these fields for its credentials or cookies.
    pub fn passes(self, headers: &http::HeaderMap) -> bool {
        (!self.with_authorization && headers.contains_key(header::AUTHORIZATION))
            || (!self.with_cookie && headers.contains_key(header::COOKIE))
    }
}

/// Varnish's builtin `vcl_recv` as policy-lang's `builtin.vcl` spells it, natively: what a
/// policy without a `vcl_recv` of its own runs, and what a user `vcl_recv` falls through to
/// (interpreting it costs more than the rest of a hit). Keep it step for step with
/// `builtin.vcl`; `tests/policy_phases.rs` holds them together. Without a policy the driver
/// runs it too, so both decide the same way.
pub(super) fn vcl_recv(request: &mut Parts, lookups: Lookups) -> Action {
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
    if lookups.passes(&request.headers) {
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
