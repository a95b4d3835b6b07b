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
use super::{fetch, synth, Shared};
use crate::cache::body::ProxyBody;
use crate::cache::coalesce::{FetchOutcome, Join};
use crate::cache::key::CacheKey;
use crate::cache::object::ObjectHead;
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
fn default_key<B>(request: &Request<B>) -> CacheKey {
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
    let head_only = request.method() == Method::HEAD;
    for _ in 0..MAX_LOOKUPS {
        let now = SystemTime::now();
        if let Some(object) = shared.store.lookup(&key, request.headers()) {
            if object.head.is_fresh_at(now) {
                object.record_hit();
                let body = if head_only {
                    ProxyBody::empty()
                } else {
                    ProxyBody::full(object.body.clone())
                };
                return (deliver(&object.head, body, now), CacheState::Hit);
            }
        }
        if shared.coalescer.is_hit_for_pass(&key) {
            let (parts, _) = request.into_parts();
            return fetch::miss(shared, client, parts, key, None).await;
        }
        match shared.coalescer.join(&key) {
            Join::Leader(leader) => {
                let (parts, _) = request.into_parts();
                return fetch::miss(shared, client, parts, key, Some(leader)).await;
            }
            Join::Waiter(waiter) => match waiter.outcome(shared.coalesce_wait).await {
                FetchOutcome::Streaming { head, rule, body } => {
                    if variant_matches(&rule, request.headers(), &head.variant) {
                        let body = if head_only {
                            ProxyBody::empty()
                        } else {
                            body.reader()
                        };
                        return (deliver(&head, body, SystemTime::now()), CacheState::Hit);
                    }
                }
                FetchOutcome::Uncacheable => {
                    return (fetch::pass(shared, client, request).await, CacheState::Pass)
                }
                FetchOutcome::Failed => {}
            },
        }
    }
    let (parts, _) = request.into_parts();
    fetch::miss(shared, client, parts, key, None).await
}

/// A response from a stored (or streaming) object, with its current `Age`.
pub(super) fn deliver(head: &ObjectHead, body: ProxyBody, now: SystemTime) -> Response<ProxyBody> {
    let mut response = Response::new(body);
    *response.status_mut() = head.status;
    *response.headers_mut() = head.headers.clone();
    response
        .headers_mut()
        .insert(header::AGE, HeaderValue::from(head.age_at(now).as_secs()));
    response
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
