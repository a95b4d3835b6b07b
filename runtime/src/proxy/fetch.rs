//! Origin fetches: passes (streamed through, never stored) and misses (stored when the response
//! allows it, streamed to the client and to any coalesced waiters as it arrives).
//!
//! A miss runs in its own task, so a client that goes away does not abort a fetch that others
//! wait on or that will fill the cache.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use tokio::sync::oneshot;

use super::driver::deliver;
use super::{headers, synth, Shared};
use crate::backend::{BackendError, OutgoingBody, TimedBody};
use crate::cache::body::{ProxyBody, SharedBody};
use crate::cache::coalesce::{FetchOutcome, Leader};
use crate::cache::key::CacheKey;
use crate::cache::object::{CachedObject, ObjectHead};
use crate::cache::rules::control::ResponseDirectives;
use crate::cache::rules::vary::VaryRule;
use crate::cache::rules::{self, age, freshness, storable};
use crate::cache::state::CacheState;

/// The request sent to the origin for a client request: hop-by-hop fields removed, `Via` and
/// `X-Forwarded-For` added, `Host` kept (HTTP/2 clients send `:authority` instead).
fn backend_request(
    parts: &Parts,
    client: IpAddr,
    method: Method,
    body: OutgoingBody,
) -> Request<OutgoingBody> {
    let mut request = Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = parts.uri.clone();
    let headers = request.headers_mut();
    *headers = parts.headers.clone();
    headers::strip_hop_by_hop(headers);
    if !headers.contains_key(header::HOST) {
        if let Some(authority) = parts.uri.authority() {
            if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
                headers.insert(header::HOST, host);
            }
        }
    }
    headers::append_forwarded_for(headers, client);
    headers::append_via(headers, parts.version);
    request
}

fn empty_body() -> OutgoingBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// An origin response relayed as it is, minus hop-by-hop fields, plus `Via`.
fn relay(response: Response<TimedBody>, head_only: bool) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    headers::strip_hop_by_hop(&mut parts.headers);
    headers::append_via(&mut parts.headers, parts.version);
    let body = if head_only {
        ProxyBody::empty()
    } else {
        ProxyBody::stream(body)
    };
    Response::from_parts(parts, body)
}

fn failure(error: &BackendError) -> Response<ProxyBody> {
    tracing::warn!(backend = %error.backend, address = %error.address, "{error}");
    synth::backend_failure(error)
}

/// Forwards the request, body included, and relays the response; nothing is stored.
pub(super) async fn pass(
    shared: &Shared,
    client: SocketAddr,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let (parts, body) = request.into_parts();
    let body = body.map_err(Into::into).boxed_unsync();
    let bereq = backend_request(&parts, client.ip(), parts.method.clone(), body);
    match shared.backend.send(bereq).await {
        Ok(response) => relay(response, parts.method == Method::HEAD),
        Err(error) => failure(&error),
    }
}

/// What the fetch task hands the request that started it.
enum Delivery {
    Stored {
        head: Arc<ObjectHead>,
        body: Arc<SharedBody>,
    },
    Passed(Response<TimedBody>),
    Failed(BackendError),
}

/// Fetches `key` from the origin for a lookup that missed; stores the response when it may.
/// `leader` is the coalescing role, `None` for keys remembered as hit-for-pass.
pub(super) async fn miss(
    shared: &Arc<Shared>,
    client: SocketAddr,
    parts: Parts,
    key: CacheKey,
    leader: Option<Leader>,
) -> (Response<ProxyBody>, CacheState) {
    let head_only = parts.method == Method::HEAD;
    // A HEAD miss fetches the whole object so the GETs that follow hit.
    let bereq = backend_request(&parts, client.ip(), Method::GET, empty_body());
    let (delivered, delivery) = oneshot::channel();
    let task = FetchTask {
        shared: shared.clone(),
        key,
        leader,
        request: parts,
    };
    tokio::spawn(task.run(bereq, delivered));
    match delivery.await {
        Ok(Delivery::Stored { head, body }) => {
            let body = if head_only {
                ProxyBody::empty()
            } else {
                body.reader()
            };
            (deliver(&head, body, SystemTime::now()), CacheState::Miss)
        }
        Ok(Delivery::Passed(response)) => (relay(response, head_only), CacheState::Pass),
        Ok(Delivery::Failed(error)) => (failure(&error), CacheState::Miss),
        Err(_) => (
            synth::plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the fetch task ended without an answer",
            ),
            CacheState::Miss,
        ),
    }
}

struct FetchTask {
    shared: Arc<Shared>,
    key: CacheKey,
    leader: Option<Leader>,
    request: Parts,
}

impl FetchTask {
    async fn run(self, bereq: Request<OutgoingBody>, delivered: oneshot::Sender<Delivery>) {
        let request_time = SystemTime::now();
        let response = match self.shared.backend.send(bereq).await {
            Ok(response) => response,
            // Dropping the leader tells waiters to try again themselves.
            Err(error) => {
                let _ = delivered.send(Delivery::Failed(error));
                return;
            }
        };
        let response_time = SystemTime::now();
        let (mut parts, body) = response.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers);
        let (head, rule) = match self.judge(&mut parts, request_time, response_time) {
            Ok(judged) => judged,
            Err(reason) => {
                tracing::debug!(reason, status = parts.status.as_u16(), "not storable");
                match &self.leader {
                    Some(leader) => leader.publish(FetchOutcome::Uncacheable),
                    None => self.shared.coalescer.mark_hit_for_pass(self.key.clone()),
                }
                let _ = delivered.send(Delivery::Passed(Response::from_parts(parts, body)));
                return;
            }
        };
        let head = Arc::new(head);
        let sink = Arc::new(SharedBody::default());
        if let Some(leader) = &self.leader {
            leader.publish(FetchOutcome::Streaming {
                head: head.clone(),
                rule: Arc::new(rule.clone()),
                body: sink.clone(),
            });
        }
        let _ = delivered.send(Delivery::Stored {
            head: head.clone(),
            body: sink.clone(),
        });
        self.fill(body, head, rule, sink).await;
    }

    /// Decides whether the response may be stored and for how long; on yes, returns the object
    /// head and the `Vary` rule it was fetched under.
    fn judge(
        &self,
        parts: &mut http::response::Parts,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> Result<(ObjectHead, VaryRule), &'static str> {
        let shared = &self.shared;
        // A missing or invalid Date is replaced by the receipt time (RFC 9110 §6.6.1), so that
        // `Expires` − `Date` and the apparent age are computed from a real clock reading.
        age::ensure_date(&mut parts.headers, response_time);
        let directives = ResponseDirectives::from_headers(&parts.headers, None);
        storable::check_storable(
            &Method::GET,
            &self.request.headers,
            parts.status,
            &parts.headers,
            &directives,
            &shared.storing,
        )
        .map_err(|reason| reason.as_str())?;
        let too_large = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|length| length > shared.max_object_size);
        if too_large {
            return Err("larger than max-object-size");
        }
        let ttl =
            freshness::freshness_lifetime(parts.status, &parts.headers, &directives, &shared.freshness).value;
        let initial_age = age::initial_age(&parts.headers, request_time, response_time);
        if ttl <= initial_age {
            return Err("no freshness left");
        }
        let rule = VaryRule::from_response(&parts.headers);
        if matches!(rule, VaryRule::Star) {
            return Err("vary-star");
        }
        let variant = rule.request_fingerprint(&self.request.headers);
        let mut stored = parts.headers.clone();
        stored.remove(header::AGE);
        rules::strip_field_scoped(&mut stored, &directives);
        headers::append_via(&mut stored, parts.version);
        let head = ObjectHead {
            status: parts.status,
            headers: stored,
            response_time,
            initial_age,
            ttl,
            grace: Duration::ZERO,
            keep: Duration::ZERO,
            variant,
        };
        Ok((head, rule))
    }

    /// Reads the origin body into `sink` and stores the object once complete.
    async fn fill(self, mut body: TimedBody, head: Arc<ObjectHead>, rule: VaryRule, sink: Arc<SharedBody>) {
        let limit = self.shared.max_object_size;
        let mut too_large = false;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        too_large |= sink.push(data) > limit;
                    }
                }
                Err(error) => {
                    tracing::warn!(backend = self.shared.backend.name(), "{error}");
                    sink.fail(error.to_string());
                    return;
                }
            }
        }
        let whole = sink.finish();
        if too_large {
            tracing::debug!(limit, "body larger than max-object-size: not stored");
            self.shared.coalescer.mark_hit_for_pass(self.key.clone());
        } else {
            self.shared
                .store
                .insert(self.key.clone(), rule, Arc::new(CachedObject::new(head, whole)));
            self.shared.coalescer.clear_hit_for_pass(&self.key);
        }
        if let Some(leader) = self.leader {
            leader.finish();
        }
    }
}
