//! Invalidation after unsafe requests (RFC 9111 §4.4): a non-error response to an unsafe method
//! invalidates the stored responses for the target URI and the same-origin `Location` /
//! `Content-Location`, when `--invalidate-on-unsafe` lets this client invalidate. The rules
//! are `cache::rules::invalidate`'s; this applies them to the cache.

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Response, Uri};
use policy_lang::Sub;

use super::client_side::ClientSide;
use super::route::Route;
use super::vcl::ClientSession;
use crate::cache::key::CacheKey;
use crate::cache::rules::invalidate;

/// Invalidates what `response` to the client's `request` (on `route`) makes stale.
pub(super) fn after<B>(route: Route<'_>, request: &Parts, response: &Response<B>) {
    let shared = route.shared;
    if !invalidate::is_unsafe(&request.method) || !shared.may_invalidate(route.client.ip()) {
        return;
    }
    let Some((host, absolute)) = effective_uri(request) else {
        return;
    };
    let targets =
        invalidate::invalidation_targets(&request.method, response.status(), &absolute, response.headers());
    for uri in targets {
        let host = uri.authority().map_or(host, |a| a.as_str());
        let target = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let key = stored_under(route, request, host, target);
        shared.cache.store.purge(&key);
        shared.cache.partials.remove(&key);
        shared.cache.coalescer.clear_hit_for_pass(&key);
        tracing::debug!(%uri, method = %request.method, "invalidated");
    }
}

/// The key a GET of `target` on `host` is stored under: what the policy's `vcl_hash` makes of
/// it (run on a copy of `request` with that URL and `Host`, as a lookup would), or the
/// builtin key (host and target) without one. So invalidation finds what a policy such as
/// `examples/default.vcl`, whose `vcl_hash` hashes the URL before the host, stored.
pub(super) fn stored_under(route: Route<'_>, request: &Parts, host: &str, target: &str) -> CacheKey {
    let program = route
        .version
        .policy
        .as_ref()
        .filter(|program| program.has_sub(Sub::Hash));
    let (Some(program), Ok(uri), Ok(host_value)) =
        (program, target.parse::<Uri>(), HeaderValue::from_str(host))
    else {
        return CacheKey::from_host_and_target(host, target);
    };
    let mut lookup = request.clone();
    lookup.method = Method::GET;
    lookup.uri = uri;
    lookup.headers.insert(header::HOST, host_value);
    let xid = ClientSide::xid_of(&request.extensions).unwrap_or(0);
    let mut session = ClientSession::new(lookup, route.client, route.version, xid, &route.shared.cache);
    program.run(Sub::Hash, &mut session);
    CacheKey::from_hash_data(&session.hash)
}

/// The request's host and its effective request URI (RFC 9110 §7.1), `http://HOST/path?query`,
/// which invalidation and `Content-Location` are resolved against.
pub(super) fn effective_uri(request: &Parts) -> Option<(&str, Uri)> {
    let host = request
        .headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri.authority().map(|a| a.as_str()))?;
    let target = request.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let absolute = format!("http://{host}{target}").parse::<Uri>().ok()?;
    Some((host, absolute))
}
