//! Cache misses from the origin: the fetch (retries, a 304 that selects nothing), the judgement
//! of what may be stored and for how long (`vcl_backend_response` with a policy), revalidations
//! of stale objects, background refreshes, and POST responses kept for later GETs. The body goes into the cache through
//! `cache::fill`; what is not stored is relayed (`relay`).
//!
//! A miss runs in its own task, so a client that goes away does not abort a fetch that others
//! wait on or that will fill the cache.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body::Body as _;
use tokio::sync::oneshot;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::Either;

use super::attempts::{failure, Attempts, FetchFailure};
use super::gzip::Recode;
use super::plugins::BackendBody;
use super::relay::{self, relay, replacement};
use super::route::Route;
use super::vcl::{self, BackendSession};
use super::{bereq, beresp, h2_accounting, headers, invalidate, respond, synth, Shared};
use crate::backend::{Backend, OutgoingBody, TimedBody};
use crate::cache::body::{BoxError, ProxyBody, SharedBody};
use crate::cache::coalesce::{Join, Leader};
use crate::cache::fill::Fill;
use crate::cache::key::CacheKey;
use crate::cache::object::{CachedObject, ObjectHead, Requested, StoredHeaders};
use crate::cache::rules::control::{RequestDirectives, ResponseDirectives};
use crate::cache::rules::stale::{self, StaleSituation};
use crate::cache::rules::vary::VaryRule;
use crate::cache::rules::{self, age, conditional, freshness, storable};
use crate::cache::state::CacheState;
use crate::version::Version;
use policy_lang::{Action, BackendId, Program, Sub};

/// What the fetch task hands the request that started it.
enum Delivery {
    /// A storable response, streaming into the cache, and the requester's reader of it.
    Stored {
        head: Arc<ObjectHead>,
        body: ProxyBody,
    },
    /// The stale object, confirmed by a 304 and stored again with the new headers.
    Revalidated(Arc<CachedObject>),
    /// Not storable: relay it.
    Passed(Response<TimedBody>),
    /// `vcl_backend_response` replaced the origin's response (a plugin's local response, an
    /// `error`, a fail-closed plugin, a body past a plugin's `.max_body`), or its body plugins
    /// rewrote one that is not stored: send this instead; nothing is stored.
    Replaced(Response<ProxyBody>),
    Failed(FetchFailure),
}

/// What a fetched response turns into (see [`FetchTask::settle`]).
enum Settled {
    /// `vcl_backend_response` returned `retry`: send the request again.
    Retry,
    /// The answer for the requester; nothing more to read into the cache.
    Done(Delivery),
    /// A storable response: the requester's answer, and the body still to read into the cache.
    Filling(Delivery, Filling),
}

/// A storable response's body, still to be read into the cache (see [`FetchTask::fill_from`]).
struct Filling {
    /// As the origin sent it, or recoded (`beresp.do_gzip` / `do_gunzip`, ESI over gzip).
    body: UnsyncBoxBody<Bytes, BoxError>,
    head: Arc<ObjectHead>,
    rule: VaryRule,
    sink: Arc<SharedBody>,
}

/// The stale object, if the rules let it answer after the origin failed (RFC 5861 §4, grace).
fn stale_on_error<'a>(
    shared: &Shared,
    stale: Option<&'a Arc<CachedObject>>,
    request: &http::HeaderMap,
) -> Option<&'a Arc<CachedObject>> {
    let object = stale?;
    let head = &object.head;
    let wanted = RequestDirectives::from_headers(request);
    let grant = stale::may_serve_stale(
        StaleSituation::OriginError,
        object.ttl(),
        head.age_at(shared.cache.clock.now()),
        &head.directives,
        &wanted,
        head.grace,
        shared.ignore_request_cache_control,
    );
    grant.map(|grant| {
        tracing::info!(grant = grant.as_str(), "origin failed: serving the stale object");
        object
    })
}

/// Fetches `key` from the origin for a lookup that missed or found only a stale object
/// (`stale`, revalidated with a conditional request when it has validators); stores the
/// response when it may. `leader` is the coalescing role, `None` for keys remembered as
/// hit-for-pass.
pub(super) async fn miss(
    route: Route<'_>,
    parts: Parts,
    key: CacheKey,
    leader: Option<Leader>,
    stale: Option<Arc<CachedObject>>,
) -> (Response<ProxyBody>, CacheState) {
    let Route { shared, client, .. } = route;
    h2_accounting::origin_fetch_started();
    let request = parts.clone();
    let bereq = match (&leader, &stale) {
        (None, None) => bereq::hit_for_pass(&parts, client.ip()),
        _ => bereq::fill(&parts, client.ip(), stale.as_deref()),
    };
    let (delivered, delivery) = oneshot::channel();
    let task = FetchTask::new(route, parts, key, leader, stale.clone());
    tokio::spawn(task.run(bereq, delivered));
    let delivery = delivery.await.unwrap_or_else(|_| {
        Delivery::Replaced(synth::plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the fetch task ended without an answer",
        ))
    });
    answer(shared, delivery, stale.as_ref(), &request)
}

/// The client's response to what its fetch delivered; `stale` may answer when the origin
/// failed.
fn answer(
    shared: &Shared,
    delivery: Delivery,
    stale: Option<&Arc<CachedObject>>,
    request: &Parts,
) -> (Response<ProxyBody>, CacheState) {
    let (method, request_headers) = (&request.method, &request.headers);
    let now = shared.cache.clock.now();
    match delivery {
        Delivery::Stored { head, body } => {
            let response = respond::from_head(&head, body, method, request_headers, now);
            (response, CacheState::Miss)
        }
        Delivery::Revalidated(object) => {
            let response = respond::from_object(&object, method, request_headers, now);
            (response, CacheState::Revalidated)
        }
        Delivery::Passed(response) => {
            if response.status().is_server_error() {
                if let Some(object) = stale_on_error(shared, stale, request_headers) {
                    return (
                        respond::from_object(object, method, request_headers, now),
                        CacheState::Stale,
                    );
                }
            }
            (
                relay(response, method == Method::HEAD, shared.targeted_to_strip()),
                CacheState::Pass,
            )
        }
        Delivery::Replaced(response) => (response, CacheState::Pass),
        Delivery::Failed(failed) => match stale_on_error(shared, stale, request_headers) {
            Some(object) => (
                respond::from_object(object, method, request_headers, now),
                CacheState::Stale,
            ),
            None => (failure(failed, shared.show_backend_errors), CacheState::Miss),
        },
    }
}

/// Fetches a key remembered as hit-for-pass, with nothing stored for it, in the request's own
/// task: nobody waits on this fetch, so nothing is spawned. Without a policy, a response that
/// cannot be stored (the usual case: the key is hit-for-pass because its responses are not) is
/// relayed at once, without the rest of the judgement; the key's mark stays as it is. A response
/// that may be stored is stored as a miss's is (its body read into the cache by a task of its
/// own) and clears the mark.
pub(super) async fn hit_for_pass(
    route: Route<'_>,
    request: &Parts,
    key: CacheKey,
) -> (Response<ProxyBody>, CacheState) {
    let Route { shared, version, .. } = route;
    h2_accounting::origin_fetch_started();
    let mut bereq = bereq::hit_for_pass(request, route.client.ip());
    let (mut attempts, mut backend) = Attempts::start(version, route.hint, route.backend, &mut bereq, false);
    loop {
        let request_time = shared.cache.clock.now();
        let response = match attempts.send(&mut backend, bereq).await {
            Ok(response) => response,
            Err(failed) => return (failure(failed, shared.show_backend_errors), CacheState::Miss),
        };
        if version.policy.is_none() && !may_be_stored(shared, request, &response) {
            let head_only = request.method == Method::HEAD;
            return (
                relay(response, head_only, shared.targeted_to_strip()),
                CacheState::Pass,
            );
        }
        // Boxed: judging and storing is the rare way out of a hit-for-pass (and the task is
        // kilobytes), and inline it would make every pass's future, moved into its box per
        // request, that much larger.
        let judged = judge_hit_for_pass(
            route,
            request,
            &key,
            backend,
            response,
            request_time,
            &mut attempts,
        );
        match Box::pin(judged).await {
            Judged::Answered(answered) => return answered,
            Judged::Retry(next, next_backend) => {
                bereq = next;
                backend = next_backend;
            }
        }
    }
}

/// How [`judge_hit_for_pass`] ends.
enum Judged {
    /// The client's answer.
    Answered((Response<ProxyBody>, CacheState)),
    /// `vcl_backend_response` retried: the request to send next, and where.
    Retry(Request<OutgoingBody>, Backend),
}

/// The rest of [`hit_for_pass`] for a response that may be stored, or any with a policy: judged
/// and stored as a miss's, keeping the key's mark; or the request to send again (and where)
/// when `vcl_backend_response` retries.
async fn judge_hit_for_pass(
    route: Route<'_>,
    request: &Parts,
    key: &CacheKey,
    backend: Backend,
    response: Response<TimedBody>,
    request_time: SystemTime,
    attempts: &mut Attempts<'_>,
) -> Judged {
    let shared = route.shared;
    let mut task = FetchTask::new(route, request.clone(), key.clone(), None, None);
    task.fill.keep_hit_for_pass_mark();
    task.backend = backend;
    match task.settle(response, request_time, attempts).await {
        Settled::Retry => match attempts.retry(&mut task.backend) {
            Ok(next) => Judged::Retry(next, task.backend),
            Err(failed) => Judged::Answered((failure(failed, shared.show_backend_errors), CacheState::Miss)),
        },
        Settled::Done(delivery) => Judged::Answered(answer(shared, delivery, None, request)),
        Settled::Filling(delivery, filling) => {
            tokio::spawn(task.fill_from(filling));
            Judged::Answered(answer(shared, delivery, None, request))
        }
    }
}

/// Judges a `206` slice (`proxy::partial`) as the whole representation would be judged
/// (RFC 9111 §3.3: a cache that supports ranges may store a partial response like a complete
/// one): the head to store the slice with, or `None` when the whole would not be stored.
pub(super) fn judge_part(
    route: Route<'_>,
    request: &Parts,
    key: &CacheKey,
    part: &mut http::response::Parts,
    request_time: SystemTime,
    attempts: &mut Attempts<'_>,
) -> Option<ObjectHead> {
    let task = FetchTask::new(route, request.clone(), key.clone(), None, None);
    let response_time = task.shared.cache.clock.now();
    let mut status = StatusCode::OK;
    let (mut head, _) = task
        .judge(
            &mut status,
            &mut part.headers,
            part.version,
            request_time,
            response_time,
            attempts,
        )
        .ok()?;
    head.status = StatusCode::PARTIAL_CONTENT;
    Some(head)
}

/// A response to a slice request that is not a `206` (the origin ignores `Range`, or answered
/// otherwise), sent at `request_time` by `backend`: judged, stored and answered as a miss's.
pub(super) async fn settle_unsliced(
    route: Route<'_>,
    request: &Parts,
    key: CacheKey,
    response: Response<TimedBody>,
    request_time: SystemTime,
    backend: Backend,
) -> (Response<ProxyBody>, CacheState) {
    let shared = route.shared;
    let mut bereq = bereq::fill(request, route.client.ip(), None);
    let (mut attempts, _) = Attempts::start(route.version, route.hint, &backend, &mut bereq, false);
    let mut task = FetchTask::new(route, request.clone(), key, None, None);
    task.backend = backend;
    match task.settle(response, request_time, &mut attempts).await {
        Settled::Done(delivery) => answer(shared, delivery, None, request),
        Settled::Filling(delivery, filling) => {
            tokio::spawn(task.fill_from(filling));
            answer(shared, delivery, None, request)
        }
        // Only `vcl_backend_response` retries, and slices are fetched without one.
        Settled::Retry => (
            synth::plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "a response to a slice request asked for a retry",
            ),
            CacheState::Miss,
        ),
    }
}

/// A POST the builtin passed to the origin, whose response is also stored for later GETs of
/// its target URI when RFC 9110 §9.3.3 allows it (`--no-store-post-responses` turns this off):
/// explicit freshness and a `Content-Location` naming the target URI
/// ([`storable::post_reusable_for_get`]), then the judgement of any response (with a policy,
/// its `vcl_backend_response`), under the key a GET of the URI is stored under (the policy's
/// `vcl_hash`). The response first invalidates what is stored for the URI, as any response to
/// an unsafe method (RFC 9111 §4.4), and then becomes the stored response. Not for requests
/// the builtin would pass for their credentials or cookies (`builtin::Lookups`), which are
/// never answered from the cache nor fill it. Anything else is relayed as a pass.
pub(super) async fn post(route: Route<'_>, request: &Parts, body: OutgoingBody) -> Response<ProxyBody> {
    let Route { shared, version, .. } = route;
    if !shared.store_post_responses || shared.lookups.passes(&request.headers) {
        return relay::pass(route, request, body).await;
    }
    h2_accounting::origin_fetch_started();
    let mut bereq = bereq::pass(request, route.client.ip(), body);
    let (mut attempts, mut backend) = Attempts::start(version, route.hint, route.backend, &mut bereq, true);
    loop {
        let request_time = shared.cache.clock.now();
        let response = match attempts.send(&mut backend, bereq).await {
            Ok(response) => response,
            Err(failed) => return failure(failed, shared.show_backend_errors),
        };
        invalidate::after(route, request, &response);
        let key = invalidate::effective_uri(request)
            .filter(|(_, target)| {
                let directives = ResponseDirectives::from_headers(response.headers(), shared.targeted());
                storable::post_reusable_for_get(target, response.headers(), &directives)
            })
            .map(|(host, _)| {
                let target = request.uri.path_and_query().map_or("/", |pq| pq.as_str());
                invalidate::stored_under(route, request, host, target)
            });
        let Some(key) = key else {
            match relay::passed(route, request, &mut attempts, &mut backend, response).await {
                relay::Passed::Relay(response) => return response,
                relay::Passed::Retry(next) => {
                    bereq = next;
                    continue;
                }
            }
        };
        let mut task = FetchTask::new(route, request.clone(), key, None, None);
        // A POST response that may not be stored says nothing about the GETs of the URL.
        task.fill.keep_hit_for_pass_mark();
        task.backend = backend;
        // The client gets the origin's answer to its POST, not one its conditionals select.
        let (mut unconditional, _) = Request::new(()).into_parts();
        unconditional.method = Method::POST;
        match task.settle(response, request_time, &mut attempts).await {
            Settled::Done(delivery) => return answer(shared, delivery, None, &unconditional).0,
            Settled::Filling(delivery, filling) => {
                tokio::spawn(task.fill_from(filling));
                return answer(shared, delivery, None, &unconditional).0;
            }
            // A POST with a body is not sent twice: `retry` refuses it.
            Settled::Retry => match attempts.retry(&mut task.backend) {
                Ok(next) => {
                    bereq = next;
                    backend = task.backend;
                }
                Err(failed) => return failure(failed, shared.show_backend_errors),
            },
        }
    }
}

/// Whether the rules could let a shared cache store `response` to a GET of `request`
/// (RFC 9111 §3, without a policy): the first step of the judgement, which answers no for
/// most responses to a key remembered as hit-for-pass.
fn may_be_stored<B>(shared: &Shared, request: &Parts, response: &Response<B>) -> bool {
    let fields = response.headers();
    let directives = ResponseDirectives::from_headers(fields, shared.targeted());
    // What `check_storable` refuses first for the usual hit-for-pass response, without
    // reading the request's directives.
    if directives.no_store && !directives.must_understand {
        return false;
    }
    storable::check_storable(
        &Method::GET,
        &request.headers,
        response.status(),
        fields,
        &directives,
        &shared.storing,
    )
    .is_ok()
}

/// `stale-while-revalidate`: refreshes a stale object without making anyone wait. At most one
/// refresh per key runs: when a fetch for the key is already in flight, this does nothing.
pub(super) fn refresh_in_background(
    route: Route<'_>,
    request: &Parts,
    key: CacheKey,
    stale: Arc<CachedObject>,
) {
    let Join::Leader(leader) = route.shared.cache.coalescer.join(&key) else {
        return;
    };
    h2_accounting::origin_fetch_started();
    let mut request = request.clone();
    request.extensions.insert(vcl::BackgroundFetch);
    // The request it refreshes for ends before it does: its trace would show nothing of it.
    request.extensions.remove::<super::trace::Trace>();
    let bereq = bereq::fill(&request, route.client.ip(), Some(&stale));
    let task = FetchTask::new(route, request, key, Some(leader), Some(stale));
    // Nobody waits for the answer: the refreshed object lands in the store.
    let (delivered, _) = oneshot::channel();
    tokio::spawn(task.run(bereq, delivered));
}

/// A response that is not stored, relayed as it is or, when plugins of `vcl_backend_response`
/// read its body, as they leave it (`strip`: see [`relay`]).
async fn passed_through(
    body_plugins: Option<BackendBody>,
    version: &Version,
    passed: Response<TimedBody>,
    strip: Option<&header::HeaderName>,
) -> Delivery {
    let Some(plugins) = body_plugins else {
        return Delivery::Passed(passed);
    };
    let relayed = relay(passed, false, strip);
    let rewritten = plugins.rewrite(version, relayed).await;
    Delivery::Replaced(rewritten.unwrap_or_else(|replaced| replaced))
}

/// Why a fetched response is not stored.
enum NotStored {
    /// The rules or the policy say so: relay the response as it is.
    Because(&'static str),
    /// The client's own `no-store` (RFC 9111 §5.2.1.5): this response stays out of the store,
    /// but that says nothing about the URL, so the key is not remembered as hit-for-pass (one
    /// client could otherwise keep everyone's requests for it from being cached), and a
    /// stored object being revalidated stays.
    RequestNoStore,
    /// `vcl_backend_response` replaced the response: send this one.
    Replaced(Box<Response<ProxyBody>>),
    /// `vcl_backend_response` returned `retry`: fetch again.
    Retry,
}

/// A miss's fetch, owned by its own task.
struct FetchTask {
    shared: Arc<Shared>,
    version: Arc<Version>,
    backend: Backend,
    /// The policy's backend choice, so that a retry can ask the same director again.
    hint: Option<BackendId>,
    /// The key's fill, with the coalescing role.
    fill: Fill,
    request: Parts,
    client: IpAddr,
    stale: Option<Arc<CachedObject>>,
    /// `beresp.do_esi` of the response judged last: one that is relayed rather than stored
    /// is assembled at delivery too.
    do_esi: std::cell::Cell<bool>,
    /// `beresp.do_gzip` / `do_gunzip` of the response judged last: how a stored body's coding
    /// changes.
    do_gzip: std::cell::Cell<(bool, bool)>,
    /// The plugins of the last `vcl_backend_response` that read the body: they see it before
    /// it is stored or relayed.
    body_plugins: std::cell::Cell<Option<BackendBody>>,
}

impl FetchTask {
    fn new(
        route: Route<'_>,
        request: Parts,
        key: CacheKey,
        leader: Option<Leader>,
        stale: Option<Arc<CachedObject>>,
    ) -> FetchTask {
        let shared = route.shared;
        let mut fill = Fill::new(
            shared.cache.clone(),
            key,
            leader,
            shared.max_object_size,
            shared.finish_abandoned_fills,
        );
        fill.parse_esi_with(super::esi::parse_stored);
        FetchTask {
            shared: shared.clone(),
            version: route.version.clone(),
            backend: route.backend.clone(),
            hint: route.hint,
            fill,
            request,
            client: route.client.ip(),
            stale,
            do_esi: std::cell::Cell::new(false),
            do_gzip: std::cell::Cell::new((false, false)),
            body_plugins: std::cell::Cell::new(None),
        }
    }

    async fn run(mut self, mut bereq: Request<OutgoingBody>, delivered: oneshot::Sender<Delivery>) {
        let version = self.version.clone();
        let (mut attempts, backend) = Attempts::start(&version, self.hint, &self.backend, &mut bereq, false);
        self.backend = backend;
        loop {
            let settled = match self.exchange(&mut attempts, bereq).await {
                Ok((response, request_time)) => self.settle(response, request_time, &mut attempts).await,
                Err(failed) => Settled::Done(Delivery::Failed(failed)),
            };
            match settled {
                Settled::Retry => match attempts.retry(&mut self.backend) {
                    // The response is dropped unread: its connection closes.
                    Ok(next) => bereq = next,
                    Err(failed) => {
                        let _ = delivered.send(Delivery::Failed(failed));
                        return;
                    }
                },
                // Dropping the leader without a published outcome tells the waiters to try
                // again themselves.
                Settled::Done(delivery) => {
                    let _ = delivered.send(delivery);
                    return;
                }
                Settled::Filling(delivery, filling) => {
                    // A requester that left drops the reader with the undelivered message.
                    let _ = delivered.send(delivery);
                    self.fill_from(filling).await;
                    return;
                }
            }
        }
    }

    /// What the origin's `response` (to a request sent at `request_time`, of `attempts`) turns
    /// into: judged, stored or not, its waiters told.
    async fn settle(
        &mut self,
        response: Response<TimedBody>,
        request_time: SystemTime,
        attempts: &mut Attempts<'_>,
    ) -> Settled {
        let response_time = self.shared.cache.clock.now();
        let (mut parts, body) = response.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers);
        let confirmed = self
            .stale
            .clone()
            .filter(|_| parts.status == StatusCode::NOT_MODIFIED)
            .filter(|stale| conditional::validates_stored(&stale.head.headers.to_map(0), &parts.headers));
        let judged = match &confirmed {
            // RFC 9111 §4.3.4: the stored response with the 304's fields merged in.
            Some(stale) => {
                let mut merged = stale.head.headers.to_map(0);
                conditional::merge_304(&mut merged, &parts.headers);
                let mut status = stale.head.status;
                self.judge(
                    &mut status,
                    &mut merged,
                    parts.version,
                    request_time,
                    response_time,
                    attempts,
                )
            }
            None => self.judge(
                &mut parts.status,
                &mut parts.headers,
                parts.version,
                request_time,
                response_time,
                attempts,
            ),
        };
        // A 304 has no body for them: the stored one is what they left.
        let body_plugins = self.body_plugins.take().filter(|_| confirmed.is_none());
        match (judged, confirmed) {
            (Err(NotStored::Retry), _) => Settled::Retry,
            (judged, Some(stale)) => Settled::Done(self.revalidated(stale, judged)),
            (Ok((mut head, rule)), None) => {
                // The object's body is the one its plugins left, `Content-Length` following.
                let body = match body_plugins {
                    None => Either::Left(body),
                    Some(plugins) => {
                        let mut fields = head.headers.to_map(0);
                        let rewritten =
                            plugins.rewrite_stored(&self.version, &mut head.status, &mut fields, body);
                        let rewritten = rewritten.await;
                        head.headers = StoredHeaders::new(head.requested(), &fields);
                        match rewritten {
                            Ok(rewritten) => Either::Right(rewritten),
                            Err(replaced) => {
                                self.fill.replaced();
                                return Settled::Done(Delivery::Replaced(replaced));
                            }
                        }
                    }
                };
                let (gzip, gunzip) = self.do_gzip.get();
                let esi = head.esi;
                let recode = if gzip || gunzip || esi {
                    head.headers.edit(|fields| {
                        let recode = Recode::decide(gzip, gunzip, esi, fields);
                        recode.mark(fields);
                        recode
                    })
                } else {
                    Recode::Keep
                };
                let body = recode.apply(body);
                let head = Arc::new(head);
                // The length is checked again: a policy may have removed the `Content-Length`
                // that `judge` checks.
                let (sink, reader) = self.fill.start(&head, &rule, body.size_hint().exact());
                let delivery = Delivery::Stored {
                    head: head.clone(),
                    body: reader,
                };
                Settled::Filling(
                    delivery,
                    Filling {
                        body,
                        head,
                        rule,
                        sink,
                    },
                )
            }
            (Err(NotStored::Replaced(response)), None) => {
                self.fill.replaced();
                Settled::Done(Delivery::Replaced(*response))
            }
            (Err(NotStored::RequestNoStore), None) => {
                tracing::debug!(
                    status = parts.status.as_u16(),
                    "not stored: the request said no-store"
                );
                let (passed, strip) = (self.passed(parts, body), self.shared.targeted_to_strip());
                Settled::Done(passed_through(body_plugins, &self.version, passed, strip).await)
            }
            (Err(NotStored::Because(reason)), None) => {
                tracing::debug!(reason, status = parts.status.as_u16(), "not storable");
                self.fill.uncacheable();
                let (passed, strip) = (self.passed(parts, body), self.shared.targeted_to_strip());
                Settled::Done(passed_through(body_plugins, &self.version, passed, strip).await)
            }
        }
    }

    /// A response relayed as it is, marked for ESI assembly when `beresp.do_esi` asked for it.
    fn passed(&self, parts: http::response::Parts, body: TimedBody) -> Response<TimedBody> {
        let mut response = Response::from_parts(parts, body);
        if self.do_esi.get() {
            let url = self.request.uri.path_and_query().map_or("/", |pq| pq.as_str());
            super::esi::assemble_when_delivered(response.extensions_mut(), url);
        }
        response
    }

    /// Reads a storable response's body into the cache.
    async fn fill_from(self, filling: Filling) {
        let Filling {
            body,
            head,
            rule,
            sink,
        } = filling;
        self.fill.run(body, head, rule, sink, self.backend.name()).await;
    }

    /// One exchange with the origin (retried as [`Attempts::send`] does); `self.backend` ends
    /// as the backend that answered. Returns the response and when the request was sent.
    async fn exchange(
        &mut self,
        attempts: &mut Attempts<'_>,
        bereq: Request<OutgoingBody>,
    ) -> Result<(Response<TimedBody>, SystemTime), FetchFailure> {
        let request_time = self.shared.cache.clock.now();
        let response = attempts.send(&mut self.backend, bereq).await?;
        let unmatched_304 = response.status() == StatusCode::NOT_MODIFIED
            && self.stale.as_ref().is_some_and(|stale| {
                !conditional::validates_stored(&stale.head.headers.to_map(0), response.headers())
            });
        if !unmatched_304 {
            return Ok((response, request_time));
        }
        // RFC 9111 §4.3.3: a 304 that selects no stored response; ask again without
        // conditions rather than relay a 304 to a client that did not ask for one.
        let request_time = self.shared.cache.clock.now();
        let response = self
            .backend
            .send(bereq::fill(&self.request, self.client, None))
            .await
            .map_err(|error| attempts.fail(error))?;
        Ok((response, request_time))
    }

    /// A 304 confirmed `stale`: store it again as `judged` (the merged fields, RFC 9111
    /// §4.3.4, with a freshness computed from them).
    fn revalidated(
        &self,
        stale: Arc<CachedObject>,
        judged: Result<(ObjectHead, VaryRule), NotStored>,
    ) -> Delivery {
        match judged {
            Ok((head, rule)) => {
                let object = Arc::new(
                    CachedObject::new(Arc::new(head), stale.body.clone()).with_esi(stale.esi.clone()),
                );
                self.fill.store_complete(object.clone(), rule);
                Delivery::Revalidated(object)
            }
            Err(NotStored::RequestNoStore) => {
                let object =
                    CachedObject::new(stale.head.clone(), stale.body.clone()).with_esi(stale.esi.clone());
                Delivery::Revalidated(Arc::new(object))
            }
            Err(NotStored::Replaced(response)) => {
                self.fill.purge();
                Delivery::Replaced(*response)
            }
            // The merged response forbids storing now (e.g. `no-store` in the 304): serve the
            // stored body this once and drop the object. (The caller sends a retry instead.)
            Err(not_stored) => {
                if let NotStored::Because(reason) = not_stored {
                    tracing::debug!(reason, "revalidated object no longer storable");
                }
                self.fill.purge();
                let object =
                    CachedObject::new(stale.head.clone(), stale.body.clone()).with_esi(stale.esi.clone());
                Delivery::Revalidated(Arc::new(object))
            }
        }
    }

    /// Decides whether a response with `status` and `fields` may be stored and for how long;
    /// on yes, returns the object head (fields as stored) and the `Vary` rule it was fetched
    /// under. `attempts` made this response (`bereq.retries`, the backend task).
    fn judge(
        &self,
        status: &mut StatusCode,
        fields: &mut http::HeaderMap,
        version: http::Version,
        request_time: SystemTime,
        response_time: SystemTime,
        attempts: &mut Attempts<'_>,
    ) -> Result<(ObjectHead, VaryRule), NotStored> {
        let shared = &self.shared;
        // A missing or invalid Date is replaced by the receipt time (RFC 9110 §6.6.1), so that
        // `Expires` − `Date` and the apparent age are computed from a real clock reading.
        age::ensure_date(fields, response_time);
        let directives = ResponseDirectives::from_headers(fields, shared.targeted());
        // With a policy, Varnish's rules apply instead: the builtin `vcl_backend_response`
        // refuses `no-store`, `private`, `Set-Cookie` and the like, and a user's sub may
        // override it, as in Varnish.
        if self.version.policy.is_none() {
            storable::check_storable(
                &Method::GET,
                &self.request.headers,
                *status,
                fields,
                &directives,
                &shared.storing,
            )
            .map_err(|reason| match reason {
                storable::NotStorable::RequestNoStore => NotStored::RequestNoStore,
                reason => NotStored::Because(reason.as_str()),
            })?;
        } else if status.is_informational()
            || *status == StatusCode::PARTIAL_CONTENT
            || *status == StatusCode::NOT_MODIFIED
        {
            return Err(NotStored::Because("status"));
        }
        let too_large = fields
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|length| length > shared.max_object_size);
        if too_large {
            if shared.slices_for(&self.version) {
                shared.cache.partials.remember_too_large(self.fill.key(), fields);
            }
            return Err(NotStored::Because("larger than max-object-size"));
        }
        let lifetime = freshness::freshness_lifetime(*status, fields, &directives, &shared.freshness);
        tracing::trace!(source = lifetime.source.as_str(), lifetime = ?lifetime.value, "freshness");
        let mut ttl = lifetime.value;
        let initial_age = age::initial_age(fields, request_time, response_time);
        let has_validator = storable::has_validator(fields);
        let (mut grace, mut keep) = (shared.grace, shared.keep);
        let mut esi = false;
        if let Some(program) = self.version.policy.as_ref() {
            let remaining = ttl.saturating_sub(initial_age);
            let (vcl_ttl, vcl_grace, vcl_keep, do_esi) =
                self.vcl_backend_response(program, status, fields, version, remaining, attempts)?;
            esi = do_esi;
            // `beresp.ttl` counts from now, RFC lifetimes from the response's creation.
            ttl = vcl_ttl + initial_age;
            (grace, keep) = (vcl_grace, vcl_keep);
        }
        // Stored only if some use remains: freshness, a validator to revalidate with, or a
        // stale window the response grants itself (configured grace alone does not count: it
        // would serialise every request for a URL that is never fresh behind one fetch).
        let stale_window = !directives.forbids_stale()
            && (directives.stale_while_revalidate.unwrap_or(0) > 0
                || directives.stale_if_error.unwrap_or(0) > 0);
        if ttl <= initial_age && !has_validator && !stale_window {
            return Err(NotStored::Because(
                "no freshness left, nothing to revalidate with, no stale window",
            ));
        }
        let retention = freshness::retention(ttl, initial_age, &directives, has_validator, grace, keep);
        let rule = VaryRule::from_response(fields);
        if matches!(rule, VaryRule::Star) {
            return Err(NotStored::Because("vary-star"));
        }
        let variant = rule.request_fingerprint(&self.request.headers);
        let mut stored = fields.clone();
        stored.remove(header::AGE);
        if let Some(targeted) = shared.targeted_to_strip() {
            stored.remove(targeted);
        }
        rules::strip_field_scoped(&mut stored, &directives);
        if !stored.contains_key(header::VIA) {
            headers::append_via(&mut stored, version);
        }
        let requested = Requested {
            url: self.request.uri.path_and_query().map_or("/", |pq| pq.as_str()),
            host: self
                .request
                .headers
                .get(header::HOST)
                .and_then(|host| host.to_str().ok()),
            variant: variant.as_deref(),
        };
        let head = ObjectHead {
            status: *status,
            grace,
            headers: StoredHeaders::new(requested, &stored),
            response_time,
            initial_age,
            ttl,
            retention,
            directives,
            esi,
        };
        Ok((head, rule))
    }

    /// Runs `vcl_backend_response` (the user's, then the builtin's): the policy may edit the
    /// headers to be stored and set `beresp.ttl` / `grace` / `keep` / `uncacheable` /
    /// `do_esi`, and may run plugins. Returns the TTL, grace and keep to store with and
    /// `beresp.do_esi`, or why not to store.
    fn vcl_backend_response(
        &self,
        program: &Program,
        status: &mut StatusCode,
        fields: &mut http::HeaderMap,
        version: http::Version,
        ttl: Duration,
        attempts: &mut Attempts<'_>,
    ) -> Result<(Duration, Duration, Duration, bool), NotStored> {
        let mut beresp = Response::new(()).into_parts().0;
        beresp.status = *status;
        beresp.version = version;
        beresp.headers = std::mem::take(fields);
        let mut request = self.request.clone();
        attempts.lend_as_built(&mut request);
        let mut session = BackendSession::new(&mut request, self.backend.name(), false, &mut attempts.task);
        // The builtin judges by the rules without a policy (see `beresp::vcl_backend_response`).
        session.store_rules = Some(beresp::StoreRules {
            storing: self.shared.storing,
            targeted: self.shared.targeted().cloned(),
        });
        session.ttl = ttl.as_secs_f64();
        session.grace = self.shared.grace.as_secs_f64();
        session.keep = self.shared.keep.as_secs_f64();
        session.version = Some(&self.version);
        session.retries = attempts.retries;
        session.beresp = Some(&mut beresp);
        let action = super::trace::call(program, Sub::BackendResponse, &mut session);
        self.do_esi.set(session.do_esi);
        self.do_gzip.set((session.do_gzip, session.do_gunzip));
        if session.rolled_back {
            return match attempts.after_rollback(&self.backend, action == Action::Retry) {
                Ok(()) => Err(NotStored::Retry),
                Err(failed) => Err(NotStored::Replaced(Box::new(failure(
                    failed,
                    self.shared.show_backend_errors,
                )))),
            };
        }
        if action == Action::Retry {
            return Err(NotStored::Retry);
        }
        let seconds = |value: f64| Duration::try_from_secs_f64(value.max(0.0)).unwrap_or(Duration::ZERO);
        // Varnish 7: `pass` alone is hit-for-pass for `beresp.ttl`.
        let pass_for = match action {
            Action::Pass => Some(seconds(session.ttl)),
            Action::HitForPass { ttl } => Some(ttl),
            _ => None,
        };
        if let Some(replaced) = replacement(action, &mut session) {
            return Err(NotStored::Replaced(Box::new(replaced)));
        }
        self.body_plugins.set(session.plugins.backend_body(session.bereq));
        let decision = (!session.uncacheable).then(|| {
            (
                seconds(session.ttl),
                seconds(session.grace),
                seconds(session.keep),
                session.do_esi,
            )
        });
        *fields = std::mem::take(&mut beresp.headers);
        *status = beresp.status;
        if let Some(ttl) = pass_for {
            // A POST's response says nothing about the GETs of its URL (see `post`).
            if self.request.method != Method::POST {
                self.shared
                    .cache
                    .coalescer
                    .mark_pass_only(self.fill.key().clone(), ttl);
            }
            return Err(NotStored::Because("return (pass) in vcl_backend_response"));
        }
        decision.ok_or(NotStored::Because("beresp.uncacheable set by the policy"))
    }
}
