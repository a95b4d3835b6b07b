//! The phase sequencer: the only code that knows in which order a request meets the policy,
//! the cache and the origin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::time::Instant;

use super::access_log::{self, AccessRecord};
use super::{fetch, respond, synth, Shared};
use crate::cache::body::ProxyBody;
use crate::cache::coalesce::{FetchOutcome, Join};
use crate::cache::key::CacheKey;
use crate::cache::rules::control::RequestDirectives;
use crate::cache::rules::stale::{self, Reuse, StaleSituation};
use crate::cache::state::CacheState;
use crate::cache::store::variant_matches;

/// How often a request goes back to the cache after a fetch it waited on failed or produced a
/// different variant, before it fetches for itself without coalescing.
const MAX_LOOKUPS: usize = 3;

/// What `vcl_recv` decided.
enum Recv {
    Lookup,
    Pass,
    Purge,
}

/// Serves one client request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    client: SocketAddr,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let method = request.method().clone();
    let uri = request.uri().clone();
    let (mut response, cache) = route(&shared, client, request).await;
    response.headers_mut().insert(
        &shared.cache_status_header,
        HeaderValue::from_static(cache.as_str()),
    );
    access_log::record(AccessRecord {
        method: &method,
        uri: &uri,
        status: response.status(),
        cache,
        bytes: http_body::Body::size_hint(response.body()).exact(),
        duration: started.elapsed(),
        backend: (cache != CacheState::Hit && cache != CacheState::Synth).then(|| shared.backend.name()),
        client: client.ip(),
    });
    response
}

async fn route(
    shared: &Arc<Shared>,
    client: SocketAddr,
    request: Request<Incoming>,
) -> (Response<ProxyBody>, CacheState) {
    match builtin_recv(&request) {
        Recv::Purge => (purge(shared, client, &request), CacheState::Synth),
        Recv::Pass => (fetch::pass(shared, client, request).await, CacheState::Pass),
        Recv::Lookup => lookup(shared, client, request).await,
    }
}

/// Varnish's builtin `vcl_recv`: only GET and HEAD are looked up, and requests carrying
/// credentials or cookies are passed, since the response may be personal.
fn builtin_recv(request: &Request<Incoming>) -> Recv {
    let method = request.method();
    if method.as_str() == "PURGE" {
        return Recv::Purge;
    }
    if method != Method::GET && method != Method::HEAD {
        return Recv::Pass;
    }
    let headers = request.headers();
    if headers.contains_key(header::AUTHORIZATION) || headers.contains_key(header::COOKIE) {
        return Recv::Pass;
    }
    Recv::Lookup
}

/// Varnish's builtin `vcl_hash`: the host and the URL.
pub(super) fn default_key<B>(request: &Request<B>) -> CacheKey {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    CacheKey::from_host_and_target(host, target)
}

async fn lookup(
    shared: &Arc<Shared>,
    client: SocketAddr,
    request: Request<Incoming>,
) -> (Response<ProxyBody>, CacheState) {
    let key = default_key(&request);
    let wanted = RequestDirectives::from_headers(request.headers());
    let ignore_request = shared.ignore_request_cache_control;
    for _ in 0..MAX_LOOKUPS {
        let now = SystemTime::now();
        let stored = shared.store.lookup(&key, request.headers());
        if let Some(object) = &stored {
            let head = &object.head;
            let age = head.age_at(now);
            let serve = match stale::freshness_for_request(
                head.ttl,
                age,
                &head.directives,
                &wanted,
                ignore_request,
            ) {
                Reuse::Fresh => Some(CacheState::Hit),
                Reuse::StaleAllowed => Some(CacheState::Stale),
                Reuse::Revalidate => {
                    let grant = stale::may_serve_stale(
                        StaleSituation::Revalidating,
                        head.ttl,
                        age,
                        &head.directives,
                        &wanted,
                        shared.grace,
                        ignore_request,
                    );
                    grant.map(|_| {
                        fetch::refresh_in_background(shared, client, &request, key.clone(), object.clone());
                        CacheState::Stale
                    })
                }
            };
            if let Some(state) = serve {
                object.record_hit();
                return (
                    respond::from_object(object, request.method(), request.headers(), now),
                    state,
                );
            }
        }
        if wanted.only_if_cached && !ignore_request {
            return (
                synth::plain(
                    StatusCode::GATEWAY_TIMEOUT,
                    "only-if-cached: no stored response can be used",
                ),
                CacheState::Synth,
            );
        }
        if shared.coalescer.is_hit_for_pass(&key) {
            let (parts, _) = request.into_parts();
            return fetch::miss(shared, client, parts, key, None, stored).await;
        }
        match shared.coalescer.join(&key) {
            Join::Leader(leader) => {
                let (parts, _) = request.into_parts();
                return fetch::miss(shared, client, parts, key, Some(leader), stored).await;
            }
            Join::Waiter(waiter) => match waiter.outcome(shared.coalesce_wait).await {
                FetchOutcome::Streaming { head, rule, body } => {
                    if variant_matches(&rule, request.headers(), &head.variant) {
                        let now = SystemTime::now();
                        let body = body.reader();
                        let response =
                            respond::from_head(&head, body, request.method(), request.headers(), now);
                        return (response, CacheState::Hit);
                    }
                }
                FetchOutcome::Uncacheable => {
                    return (fetch::pass(shared, client, request).await, CacheState::Pass)
                }
                FetchOutcome::Failed => {}
            },
        }
    }
    let stored = shared.store.lookup(&key, request.headers());
    let (parts, _) = request.into_parts();
    fetch::miss(shared, client, parts, key, None, stored).await
}

/// `PURGE`: removes every variant of the URL, for clients in the allow list.
fn purge(shared: &Shared, client: SocketAddr, request: &Request<Incoming>) -> Response<ProxyBody> {
    let address = client.ip().to_canonical();
    if !shared.purge_allow.iter().any(|net| net.contains(&address)) {
        return synth::plain(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("PURGE is not allowed from {address}; allowed networks are set with --purge-allow"),
        );
    }
    let key = default_key(request);
    let found = shared.store.purge(&key);
    shared.coalescer.clear_hit_for_pass(&key);
    if found {
        synth::plain(StatusCode::OK, "Purged")
    } else {
        synth::plain(StatusCode::NOT_FOUND, "Not in cache")
    }
}
