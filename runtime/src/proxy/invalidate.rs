//! Invalidation after unsafe requests (RFC 9111 §4.4): a non-error response to an unsafe method
//! invalidates the stored responses for the target URI and the same-origin `Location` /
//! `Content-Location`, when `--invalidate-on-unsafe` lets this client invalidate. The rules
//! are `cache::rules::invalidate`'s; this applies them to the cache.

use std::net::IpAddr;

use http::header;
use http::request::Parts;
use http::{Response, Uri};

use super::Shared;
use crate::cache::key::CacheKey;
use crate::cache::rules::invalidate;

/// Invalidates what `response` to the client's `request` makes stale.
pub(super) fn after<B>(shared: &Shared, client: IpAddr, request: &Parts, response: &Response<B>) {
    if !invalidate::is_unsafe(&request.method) || !shared.may_invalidate(client) {
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
        let key = CacheKey::from_host_and_target(host, target);
        shared.cache.store.purge(&key);
        shared.cache.coalescer.clear_hit_for_pass(&key);
        tracing::debug!(%uri, method = %request.method, "invalidated");
    }
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
