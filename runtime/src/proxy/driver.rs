//! The phase sequencer: the only code that knows in which order a request meets the policy,
//! the cache and the origin.
//!
//! Without a policy the builtin behaviour runs natively (see `builtin`); with
//! one, the compiled program decides at each step (`vcl_route`) and Varnish's builtin VCL runs
//! wherever the user's subs fall through.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use policy_lang::{Action, Program, Sub};

use super::access_log::{self, AccessRecord};
use super::client_side::{ClientConnection, ClientSide};
use super::commit;
use super::esi::{self, EsiBody, EsiLevel};
use super::fetch;
use super::gzip;
use super::relay;
use super::request_checks;
use super::route::Route;
use super::trace::{self, Side};
use super::vcl::{self, ClientResponse, ClientSession, HitObject};
use super::{bereq, builtin};
use super::{headers, pipe, respond, synth, Shared};
use crate::backend::{ClientBody, OutgoingBody};
use crate::cache::body::ProxyBody;
use crate::cache::coalesce::{FetchOutcome, Join};
use crate::cache::key::{wash_accept_encoding, CacheKey};
use crate::cache::object::CachedObject;
use crate::cache::rules::control::RequestDirectives;
use crate::cache::rules::stale::{self, Reuse, StaleSituation};
use crate::cache::state::CacheState;
use crate::cache::store::variant_matches;
use crate::poll_time;
use crate::version::Version;

/// How often a request goes back to the cache after a fetch it waited on failed or produced a
/// different variant, before it fetches for itself without coalescing.
const MAX_LOOKUPS: usize = 3;

/// `max_restarts` of Varnish: how often `return (restart)` may start a request over.
const MAX_RESTARTS: u32 = 4;

/// Serves one client request.
///
/// The future is boxed per request (server/mod.rs), and a box's cost is the future's whole
/// size, which is that of its largest path. So the paths a cache hit does not take (passes,
/// hit-for-pass, POST storage, pipes) are boxed where they are awaited: a hit moves a small
/// future, and a pass or a miss pays for its own; so does a policy's request, whose session
/// makes the policy path the largest. A future under 4 KiB is also copied by a
/// vector loop rather than `rep movsb`, which callgrind counts per byte.
///
/// What can be done before the first await is done before the future is made: an `async fn`
/// keeps its arguments for its whole life, beside what it makes of them (the request as it
/// came, its parts, the request rebuilt), so the future would carry the request three times.
pub(crate) fn handle(
    shared: Arc<Shared>,
    connection: Arc<ClientConnection>,
    request: Request<Incoming>,
) -> impl Future<Output = Response<ProxyBody>> + Send {
    // When the poll that read the head began; the end is read from the clock, as a hit starts
    // and ends in one poll.
    let started = poll_time::now();
    let client = connection.addresses.client;
    let method = request.method().clone();
    let uri = request.uri().clone();
    let logged = access_log::RequestFields::of(&request);
    let (mut parts, body) = request.into_parts();
    pipe::h2_websocket_as_upgrade(&mut parts);
    let mut request = Request::from_parts(parts, body);
    let tls = connection.tls.as_ref().map(|tls| tls.version);
    let version = shared.active.load_full();
    let xid = vcl::next_xid();
    // Its fetches carry the id to a failure page, and the connection to the origin's PROXY
    // header and the policy's `client.ip`, `local.socket`, `tls.*`, `proxy.*`.
    request.extensions_mut().insert(ClientSide { connection, xid });
    let trace = shared.traces.begin(xid);
    if let Some(trace) = &trace {
        trace::request_started(trace, xid, client, &request);
        request.extensions_mut().insert(trace.clone());
    }
    let refused = refusal(&mut request, version.policy.is_some())
        .map(|problem| (StatusCode::BAD_REQUEST, problem))
        .or_else(|| {
            request_checks::check(&mut request, &shared.request_limits)
                .err()
                .map(|refused| (refused.status(), refused.to_string()))
        });
    async move {
        let (response, cache) = match (refused, &version.policy) {
            (Some((status, problem)), _) => (synth::plain(status, &problem), CacheState::Synth),
            (None, Some(program)) => {
                Box::pin(vcl_route(&shared, &version, program, client, request, xid, true)).await
            }
            (None, None) => route(&shared, &version, client, request).await,
        };
        let mut response = commit::started(response).await;
        shared.strip_surrogate_keys(response.headers_mut());
        if version.policy.is_none() {
            response.headers_mut().insert(
                &shared.cache_status_header,
                HeaderValue::from_static(cache.as_str()),
            );
        }
        cache.count(&shared.stats);
        if cache == CacheState::Miss {
            shared.stats.missed_urls.record(&logged.host_and_path(&uri));
        }
        let elapsed = started.elapsed();
        shared.latency.observe_request(elapsed.as_secs_f64());
        if let Some(trace) = &trace {
            trace::request_ended(trace, &response);
        }
        access_log::record(AccessRecord {
            method: &method,
            uri: &uri,
            status: response.status(),
            cache,
            bytes: http_body::Body::size_hint(response.body()).exact(),
            duration: elapsed,
            backend: (cache != CacheState::Hit && cache != CacheState::Synth)
                .then(|| version.default_backend().name()),
            client: client.ip(),
            tls,
            xid,
            request: &logged,
        });
        response
    }
}

/// Why the request is refused (400) before the policy, the cache or the origin see it: its
/// `Host` ([`bad_host`]), or a `Connection` naming an end-to-end field. Otherwise the fields
/// its `Connection` names are removed from it here (see [`headers::take_connection_options`]).
fn refusal<B>(request: &mut Request<B>, policy: bool) -> Option<String> {
    if let Some(problem) = bad_host(request, policy) {
        return Some(problem.to_string());
    }
    headers::take_connection_options(request.headers_mut())
        .err()
        .map(|refused| refused.to_string())
}

/// What is wrong with the request's `Host`, if it must be refused before anything else:
/// several `Host` fields (RFC 9112 §3.2; Varnish refuses them too), which would let a request
/// be cached under one host and fetched for another. Without a policy also an HTTP/1.1 request
/// without `Host`, or with a value that is not a host: with one, the builtin `vcl_recv` checks
/// that after the user's `vcl_recv`, which may set it.
fn bad_host<B>(request: &Request<B>, policy: bool) -> Option<&'static str> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Some("more than one Host header");
    }
    if policy {
        return None;
    }
    match host {
        Some(value) => (!is_host(value.as_bytes())).then_some("the Host header is not a host[:port]"),
        None => (request.version() == http::Version::HTTP_11 && request.uri().authority().is_none())
            .then_some("an HTTP/1.1 request needs a Host header"),
    }
}

/// `host[:port]` as RFC 3986 §3.2.2 allows it (a registered name, IPv4, or a bracketed IPv6
/// literal), checked byte by byte against a table: no allocation, one load per byte.
fn is_host(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(|&b| HOST_BYTES[usize::from(b)])
}

/// The bytes [`is_host`] accepts, indexed by byte.
static HOST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let punctuation = b"-._~%!$&'()*+,;=:[]";
    let mut i = 0;
    while i < punctuation.len() {
        table[punctuation[i] as usize] = true;
        i += 1;
    }
    table
};

/// The client's body as the origin gets it, failing after `silence` without data
/// (`--body-timeout`).
fn streamed(body: Incoming, silence: std::time::Duration) -> OutgoingBody {
    ClientBody::new(body, silence).boxed_unsync()
}

// === the builtin behaviour, natively ===

/// The request split before the future is made, which then holds its head once (see [`handle`]).
fn route<'a>(
    shared: &'a Arc<Shared>,
    version: &'a Arc<Version>,
    client: SocketAddr,
    request: Request<Incoming>,
) -> impl Future<Output = (Response<ProxyBody>, CacheState)> + Send + 'a {
    let (mut parts, body) = request.into_parts();
    async move {
        let route = Route::pick(shared, version, client, None);
        if parts.method.as_str() == "PURGE" {
            return (purge(shared, client, &parts), CacheState::Synth);
        }
        match builtin::vcl_recv(&mut parts, shared.lookups) {
            Action::Lookup => {}
            Action::Pipe => {
                let bereq = bereq::pipe(&parts, client.ip());
                let body = streamed(body, shared.body_timeout);
                return Box::pin(piped(route, &mut parts, bereq, body)).await;
            }
            Action::Synth { status, reason } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                return (synth::plain(status, &reason), CacheState::Synth);
            }
            Action::Pass => {
                let body = streamed(body, shared.body_timeout);
                return (builtin_pass(route, &parts, body).await, CacheState::Pass);
            }
            other => unreachable!("the builtin vcl_recv returned {}", other.name()),
        }
        wash_accept_encoding(&mut parts.headers);
        let key = builtin::vcl_hash(&parts);
        match lookup(route, &parts, key, &mut Builtin::default()).await {
            Ok(served) => served,
            Err(action) => unreachable!("the builtin hooks divert nothing, yet got {}", action.name()),
        }
    }
}

/// A pass the builtin `vcl_recv` decided: a `POST` goes through [`fetch::post`], which may
/// store its response for later `GET`s (RFC 9110 §9.3.3); anything else is relayed. A pass the
/// policy's own code decides is relayed whatever its method, as in Varnish.
async fn builtin_pass(route: Route<'_>, request: &Parts, body: OutgoingBody) -> Response<ProxyBody> {
    if request.method == http::Method::POST {
        Box::pin(fetch::post(route, request, body)).await
    } else {
        Box::pin(relay::pass(route, request, body)).await
    }
}

/// Pipes `bereq` to the route's backend; the client's `OnUpgrade` (present when it asked to
/// upgrade) lets a `101` turn its connection into the tunnel.
async fn piped(
    route: Route<'_>,
    request: &mut Parts,
    bereq: Parts,
    body: OutgoingBody,
) -> (Response<ProxyBody>, CacheState) {
    let upgrade = request.extensions.remove::<hyper::upgrade::OnUpgrade>();
    pipe::pipe(route.shared, route.backend, bereq, upgrade, body).await
}

/// `PURGE`: removes every variant of the URL, for clients in the allow list.
fn purge(shared: &Shared, client: SocketAddr, request: &Parts) -> Response<ProxyBody> {
    let address = client.ip().to_canonical();
    if !shared.purge_allowed(address) {
        return synth::plain(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("PURGE is not allowed from {address}; allowed networks are set with --purge-allow"),
        );
    }
    let key = builtin::vcl_hash(request);
    if shared.purge_everywhere(&key) {
        synth::plain(StatusCode::OK, "Purged")
    } else {
        synth::plain(StatusCode::NOT_FOUND, "Not in cache")
    }
}

// === the cache ===

/// Looks `key` up and answers from the cache, from a fetch another request leads, or from the
/// origin.
async fn lookup(
    route: Route<'_>,
    request: &Parts,
    key: CacheKey,
    hooks: &mut (dyn PolicyHooks + Send),
) -> Looked {
    let shared = route.shared;
    let wanted = RequestDirectives::from_headers(&request.headers);
    let ignore_request = shared.ignore_request_cache_control;
    // Pass-only marks are a policy's (`return (pass)` in `vcl_backend_response`) and without
    // one they are ignored: a hit without a policy does not look for them.
    let traced = trace::of(request);
    if route.version.policy.is_some() && shared.cache.coalescer.is_pass_only(&key) {
        if let Some(trace) = traced {
            trace.log(Side::Client, "HitPass", "the key is hit-for-pass (pass-only)");
        }
        if let Some(action) = hooks.pass_only() {
            return Err(action);
        }
    }
    for _ in 0..MAX_LOOKUPS {
        let now = shared.cache.clock.now();
        let mut stored = shared.cache.store.lookup(&key, &request.headers);
        if stored
            .as_ref()
            .is_some_and(|object| shared.cache.is_banned(object))
        {
            shared.cache.purge(&key);
            stored = None;
        }
        if let Some(object) = &stored {
            let head = &object.head;
            let age = head.age_at(now);
            let serve = match stale::freshness_for_request(
                object.ttl(),
                age,
                &head.directives,
                &wanted,
                ignore_request,
            ) {
                Reuse::Fresh => Some(CacheState::Hit),
                Reuse::StaleAllowed => Some(CacheState::Stale),
                Reuse::Revalidate => {
                    let soft_purged = object.is_soft_purged();
                    let situation = if soft_purged {
                        StaleSituation::SoftPurged
                    } else {
                        StaleSituation::Revalidating
                    };
                    let grant = stale::may_serve_stale(
                        situation,
                        object.ttl(),
                        age,
                        &head.directives,
                        &wanted,
                        head.grace,
                        ignore_request,
                    );
                    grant.map(|_| {
                        if soft_purged {
                            shared
                                .stats
                                .soft_purged_served
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        fetch::refresh_in_background(route, request, key.clone(), object.clone());
                        CacheState::Stale
                    })
                }
            };
            if let Some(state) = serve {
                if let Some(trace) = traced {
                    let (ttl, grace) = (object.ttl().as_secs_f64(), head.grace.as_secs_f64());
                    let age = age.as_secs_f64();
                    let how = if state == CacheState::Hit {
                        "fresh"
                    } else {
                        "stale"
                    };
                    trace.log(
                        Side::Client,
                        "Hit",
                        format!("{how} age={age:.3} ttl={ttl:.3} grace={grace:.3}"),
                    );
                }
                if let Some(action) = hooks.hit(object) {
                    return Err(action);
                }
                hooks.delivering(object.record_hit() + 1);
                let response = respond::from_object(object, &request.method, &request.headers, now);
                return Ok((response, state));
            }
        }
        if wanted.only_if_cached && !ignore_request {
            let detail = "only-if-cached: no stored response can be used";
            return Ok((
                synth::plain(StatusCode::GATEWAY_TIMEOUT, detail),
                CacheState::Synth,
            ));
        }
        let hit_for_pass = shared.cache.coalescer.is_hit_for_pass(&key);
        if stored.is_none() && super::partial::serves(route, request, &key, hit_for_pass) {
            return Ok(Box::pin(super::partial::serve(route, request, key)).await);
        }
        if hit_for_pass {
            if let Some(trace) = traced {
                trace.log(
                    Side::Client,
                    "HitMiss",
                    "the key is hit-for-miss (uncacheable when last fetched)",
                );
            }
            hooks.hit_for_miss();
            if let Some(action) = hooks.miss() {
                return Err(action);
            }
            let fetched = match stored {
                // Nothing to revalidate: a pass in all but name, in this task.
                None => Box::pin(fetch::hit_for_pass(route, request, key)).await,
                Some(_) => Box::pin(fetch::miss(route, request.clone(), key, None, stored)).await,
            };
            return Ok(fetched);
        }
        // The waiter is taken out of the join before its wait, and the wait is boxed: a hit's
        // future (this one is inside it) then carries neither.
        let waiter = match shared.cache.coalescer.join(&key) {
            Join::Leader(leader) => {
                // A fetch that ended between the store lookup above and this join has stored
                // its object by now (a fill stores before it lets go of the key): look again
                // rather than fetch a second time. Waiters that joined meanwhile look again too.
                if stored.is_none() && shared.cache.store.lookup(&key, &request.headers).is_some() {
                    drop(leader);
                    continue;
                }
                if let Some(action) = hooks.miss() {
                    return Err(action);
                }
                let parts = request.clone();
                return Ok(Box::pin(fetch::miss(route, parts, key, Some(leader), stored)).await);
            }
            Join::Waiter(waiter) => waiter,
        };
        match Box::pin(waiter.outcome(shared.coalesce_wait, &shared.stats)).await {
            FetchOutcome::Streaming { head, rule, body } => {
                // No reader: the body grew too large to store and its start is gone;
                // looking again finds the key hit-for-pass.
                let reader = variant_matches(&rule, &request.headers, head.variant())
                    .then(|| body.reader())
                    .flatten();
                if let Some(reader) = reader {
                    if let Some(trace) = traced {
                        trace.log(
                            Side::Client,
                            "Hit",
                            "streaming: joined the fetch in flight for the key",
                        );
                    }
                    let now = shared.cache.clock.now();
                    let response = respond::from_head(&head, reader, &request.method, &request.headers, now);
                    return Ok((response, CacheState::Hit));
                }
            }
            FetchOutcome::Uncacheable => {
                let response = Box::pin(relay::pass(route, request, bereq::empty_body())).await;
                return Ok((response, CacheState::Pass));
            }
            FetchOutcome::Failed => {}
        }
    }
    let stored = shared.cache.store.lookup(&key, &request.headers);
    Ok(Box::pin(fetch::miss(route, request.clone(), key, None, stored)).await)
}

/// A lookup's result: a response, or the policy's `vcl_hit` / `vcl_miss` sending the request
/// elsewhere (pass, synth, restart).
type Looked = Result<(Response<ProxyBody>, CacheState), Action>;

/// The policy's say at the cache's decision points; `None` goes on as the builtin does.
trait PolicyHooks {
    /// `vcl_hit`, before a stored object is delivered.
    fn hit(&mut self, object: &Arc<CachedObject>) -> Option<Action>;
    /// `vcl_miss`, before the origin is asked.
    fn miss(&mut self) -> Option<Action>;
    /// A stored object is delivered, hit for the `hits`th time (`obj.hits` in `vcl_deliver`).
    fn delivering(&mut self, hits: u64);
    /// The key is pass-only (the policy's hit-for-pass): what to do instead of looking up.
    fn pass_only(&mut self) -> Option<Action>;
    /// The key is hit-for-miss: `vcl_miss` and the fetch follow (`req.is_hitmiss`).
    fn hit_for_miss(&mut self);
}

/// No policy, or one that defines neither `vcl_hit` nor `vcl_miss`.
#[derive(Default)]
struct Builtin {
    obj_hits: u64,
    /// Whether a policy runs (pass-only marks are a policy's; without one they are ignored).
    policy: bool,
    /// `req.is_hitmiss`, `req.is_hitpass`.
    hit_miss: bool,
    hit_pass: bool,
    /// A policy's traced request: builtin.vcl's `vcl_hit` / `vcl_miss` show in its trace.
    trace: Option<trace::Trace>,
}

impl PolicyHooks for Builtin {
    fn hit(&mut self, _object: &Arc<CachedObject>) -> Option<Action> {
        trace::builtin(self.trace.as_ref(), Side::Client, Sub::Hit, &Action::Deliver);
        None
    }

    fn miss(&mut self) -> Option<Action> {
        trace::builtin(self.trace.as_ref(), Side::Client, Sub::Miss, &Action::Fetch);
        None
    }

    fn delivering(&mut self, hits: u64) {
        self.obj_hits = hits;
    }

    fn pass_only(&mut self) -> Option<Action> {
        self.hit_pass = self.policy;
        self.policy.then_some(Action::Pass)
    }

    fn hit_for_miss(&mut self) {
        self.hit_miss = true;
    }
}

/// Runs the user's `vcl_hit` / `vcl_miss`; `deliver` and `fetch` go on.
struct VclHooks<'a, 's> {
    program: &'a Program,
    session: &'a mut ClientSession<'s>,
}

impl PolicyHooks for VclHooks<'_, '_> {
    fn hit(&mut self, object: &Arc<CachedObject>) -> Option<Action> {
        if !self.program.has_sub(Sub::Hit) {
            trace::builtin(
                self.session.trace.as_ref(),
                Side::Client,
                Sub::Hit,
                &Action::Deliver,
            );
            return None;
        }
        self.session.obj = Some(HitObject::new(object.clone()));
        let action = trace::call(self.program, Sub::Hit, self.session);
        self.session.obj = None;
        (action != Action::Deliver).then_some(action)
    }

    fn miss(&mut self) -> Option<Action> {
        if !self.program.has_sub(Sub::Miss) {
            trace::builtin(
                self.session.trace.as_ref(),
                Side::Client,
                Sub::Miss,
                &Action::Fetch,
            );
            return None;
        }
        let action = trace::call(self.program, Sub::Miss, self.session);
        (action != Action::Fetch).then_some(action)
    }

    fn delivering(&mut self, hits: u64) {
        self.session.obj_hits = hits;
    }

    fn pass_only(&mut self) -> Option<Action> {
        self.session.hit_pass = true;
        Some(Action::Pass)
    }

    fn hit_for_miss(&mut self) {
        self.session.hit_miss = true;
    }
}

// === with a policy ===

/// The VCL state machine of a client request: `vcl_recv`, then hash + lookup, pass, purge or
/// synth, then `vcl_deliver` (or `vcl_synth`), with `restart` starting over, and
/// `return (vcl(LABEL))` (when `may_switch`: the active policy's first `vcl_recv`) starting
/// over in the labelled policy.
async fn vcl_route(
    shared: &Arc<Shared>,
    version: &Arc<Version>,
    program: &Program,
    client: SocketAddr,
    request: Request<Incoming>,
    xid: i64,
    may_switch: bool,
) -> (Response<ProxyBody>, CacheState) {
    let (parts, body) = request.into_parts();
    let arrival = Arrival {
        body: Some(body),
        xid,
        may_switch,
        esi: None,
    };
    vcl_steps(shared, version, program, client, parts, arrival).await
}

/// What a request brings to [`vcl_steps`] besides its head.
struct Arrival {
    /// The client's body; `None` for an ESI include, which has none.
    body: Option<Incoming>,
    xid: i64,
    /// Whether `return (vcl(LABEL))` may switch policies (see [`vcl_route`]).
    may_switch: bool,
    /// Where an ESI include stands; `None` for the client's own request.
    esi: Option<EsiLevel>,
}

/// An ESI include, as a request of its own: the policy from `vcl_recv` on, the cache on its
/// own key, `vcl_deliver`, and its own includes in turn (see `esi::deliver`).
async fn esi_include(
    shared: Arc<Shared>,
    version: Arc<Version>,
    client: SocketAddr,
    mut request: Parts,
    esi: EsiLevel,
) -> Response<ProxyBody> {
    // The page's body (and its rollback state) are not the include's.
    request.extensions.remove::<vcl::CachedBody>();
    request.extensions.remove::<vcl::Received>();
    // An include is a request of its own; the page's trace does not show it.
    request.extensions.remove::<trace::Trace>();
    let Some(program) = version.policy.as_ref() else {
        let detail = "ESI include without a policy";
        return synth::plain(StatusCode::SERVICE_UNAVAILABLE, detail);
    };
    let xid = vcl::next_xid();
    if let Some(side) = request.extensions.get_mut::<ClientSide>() {
        side.xid = xid;
    }
    let arrival = Arrival {
        body: None,
        xid,
        may_switch: true,
        esi: Some(esi),
    };
    vcl_steps(&shared, &version, program, client, request, arrival)
        .await
        .0
}

/// Makes a page's includes through [`esi_include`].
struct Includes {
    shared: Arc<Shared>,
    version: Arc<Version>,
    client: SocketAddr,
}

impl esi::Includes for Includes {
    fn include(
        &self,
        request: Parts,
        level: EsiLevel,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<ProxyBody>> + Send>> {
        let (shared, version) = (self.shared.clone(), self.version.clone());
        Box::pin(esi_include(shared, version, self.client, request, level))
    }
}

/// `response` assembled when it is an ESI page that `req.esi` and `resp.do_esi` leave on.
fn esi_assembled(
    shared: &Arc<Shared>,
    version: &Arc<Version>,
    session: &ClientSession,
    mut response: Response<ProxyBody>,
) -> Response<ProxyBody> {
    if response.extensions().get::<EsiBody>().is_none() {
        return response;
    }
    if !session.req_esi || session.req.method == http::Method::HEAD {
        response.extensions_mut().remove::<EsiBody>();
        return response;
    }
    let level = session.esi.clone().unwrap_or_else(|| EsiLevel::top(&session.req));
    let assembly = esi::Assembly {
        includes: Arc::new(Includes {
            shared: shared.clone(),
            version: version.clone(),
            client: session.client,
        }),
        request: session.req.clone(),
        level,
        max_depth: shared.max_esi_depth,
        max_body: shared.max_object_size,
        stats: shared.stats.clone(),
    };
    let assembled = esi::assemble(response, assembly);
    // Assembled from identity bodies; the client's page is gzip when it takes gzip.
    if session.esi.is_none() && gzip::accepts_gzip(&session.req.headers) {
        gzip::compressed(assembled)
    } else {
        assembled
    }
}

/// [`vcl_route`] from its head: also the way in of an ESI include.
async fn vcl_steps(
    shared: &Arc<Shared>,
    version: &Arc<Version>,
    program: &Program,
    client: SocketAddr,
    mut parts: Parts,
    arrival: Arrival,
) -> (Response<ProxyBody>, CacheState) {
    let Arrival {
        body,
        xid,
        may_switch,
        esi,
    } = arrival;
    // As Varnish, the labelled policy gets the request as received (a rollback).
    let mut received = (may_switch && version.switches_labels).then(|| parts.clone());
    let had_body = body
        .as_ref()
        .is_some_and(|body| !http_body::Body::is_end_stream(body));
    let mut body = body;
    if program.rolls_back() {
        let as_sent = vcl::Received::of(&parts);
        parts.extensions.insert(as_sent);
    }
    if let Some(limit) = program.req_body_limit() {
        Box::pin(cache_req_body(
            &mut parts,
            &mut body,
            had_body,
            limit,
            shared.body_timeout,
        ))
        .await;
    }
    // On the heap: the session lives across every await below, and a future that holds it
    // inline is that much larger to box per request.
    let mut session = Box::new(ClientSession::new(parts, client, version, xid, &shared.cache));
    session.esi = esi;
    session.lookups = shared.lookups;
    session.peers = shared.peers.get();
    loop {
        session.recv_by_builtin = false;
        let mut action = if program.has_sub(Sub::Recv) {
            session.run_waiting(program, Sub::Recv).await
        } else {
            let action = session.builtin_vcl_recv();
            trace::builtin(session.trace.as_ref(), Side::Client, Sub::Recv, &action);
            action
        };
        // Plugins that read bodies see the request's before it goes anywhere.
        if session.plugins.reads_request_body() {
            let reading = session
                .plugins
                .request_body(version, &mut session.req, Some(client), &mut body);
            if let Some(diverted) = Box::pin(reading).await {
                action = diverted;
                session.recv_by_builtin = false;
            }
        }
        let step = loop {
            match action {
                Action::Lookup => {
                    session.obj_hits = 0;
                    (session.hit_miss, session.hit_pass) = (false, false);
                    // As Varnish, after `vcl_recv` and before `vcl_hash`.
                    wash_accept_encoding(&mut session.req.headers);
                    let key = vcl_key(program, &mut session);
                    let route = Route::pick(shared, version, client, session.backend_hint);
                    let looked = if session.hash_always_miss {
                        let request = session.req.clone();
                        Ok(Box::pin(fetch::miss(route, request, key, None, None)).await)
                    } else if program.has_sub(Sub::Hit) || program.has_sub(Sub::Miss) {
                        let request = session.req.clone();
                        // For `purge.hard()` / `purge.soft()` in vcl_hit and vcl_miss.
                        session.key = Some(key.clone());
                        let mut hooks = VclHooks {
                            program,
                            session: &mut session,
                        };
                        lookup(route, &request, key, &mut hooks).await
                    } else {
                        let mut builtin = Builtin {
                            policy: true,
                            trace: session.trace.clone(),
                            ..Builtin::default()
                        };
                        let looked = lookup(route, &session.req, key, &mut builtin).await;
                        session.obj_hits = builtin.obj_hits;
                        session.hit_miss = builtin.hit_miss;
                        session.hit_pass = builtin.hit_pass;
                        looked
                    };
                    match looked {
                        Ok((response, state)) => break Step::Served(response, state),
                        Err(diverted) => action = diverted,
                    }
                }
                Action::Pass => {
                    if program.has_sub(Sub::Pass) {
                        let decided = trace::call(program, Sub::Pass, &mut *session);
                        if decided != Action::Fetch {
                            action = decided;
                            continue;
                        }
                    } else {
                        trace::builtin(session.trace.as_ref(), Side::Client, Sub::Pass, &Action::Fetch);
                    }
                    let route = Route::pick(shared, version, client, session.backend_hint);
                    let outgoing = match once(&mut body, rewritten_or_cached(&mut session), had_body, shared)
                    {
                        Ok(outgoing) => outgoing,
                        Err(detail) => break Step::Synth(503, Some(detail.to_string())),
                    };
                    let response = if session.recv_by_builtin {
                        builtin_pass(route, &session.req, outgoing).await
                    } else {
                        Box::pin(relay::pass(route, &session.req, outgoing)).await
                    };
                    break Step::Served(response, CacheState::Pass);
                }
                Action::Pipe => {
                    let mut bereq = bereq::pipe(&session.req, client.ip());
                    if program.has_sub(Sub::Pipe) {
                        session.bereq = Some(Box::new(bereq));
                        let decided = trace::call(program, Sub::Pipe, &mut *session);
                        bereq = *session.bereq.take().expect("set above");
                        if decided != Action::Pipe {
                            action = decided;
                            continue;
                        }
                    }
                    let route = Route::pick(shared, version, client, session.backend_hint);
                    let outgoing = match once(&mut body, rewritten_or_cached(&mut session), had_body, shared)
                    {
                        Ok(outgoing) => outgoing,
                        Err(detail) => break Step::Synth(503, Some(detail.to_string())),
                    };
                    let (response, state) = Box::pin(piped(route, &mut session.req, bereq, outgoing)).await;
                    // As Varnish: a pipe's answer is the origin's, vcl_deliver does not see it.
                    break Step::Piped(response, state);
                }
                Action::Purge => {
                    let key = vcl_key(program, &mut session);
                    shared.purge_everywhere(&key);
                    break match trace::call(program, Sub::Purge, &mut *session) {
                        Action::Synth { status, reason } => Step::Synth(status, Some(reason.to_string())),
                        Action::Restart => Step::Restart,
                        _ => Step::Synth(200, Some("Purged".to_string())),
                    };
                }
                Action::Synth { status, reason } => break Step::Synth(status, Some(reason.to_string())),
                Action::Restart => break Step::Restart,
                Action::Fail { reason } => {
                    break Step::Synth(
                        503,
                        Some(reason.map_or("VCL failed".to_string(), |r| r.to_string())),
                    )
                }
                Action::PluginResponse { .. } => break Step::PluginAnswered,
                Action::Vcl { label } => {
                    let first_pass = session.restarts == 0;
                    let target = shared.labels.get(&label);
                    match (first_pass, target, received.take(), body.take()) {
                        (true, Some(target), Some(parts), body) => {
                            let Some(labelled) = target.policy.as_ref() else {
                                break Step::Synth(503, Some(format!("label `{label}` has no policy")));
                            };
                            let arrival = Arrival {
                                body,
                                xid,
                                may_switch: false,
                                esi: session.esi.clone(),
                            };
                            return Box::pin(vcl_steps(shared, &target, labelled, client, parts, arrival))
                                .await;
                        }
                        (false, ..) => {
                            let detail =
                                "return (vcl(...)) is only allowed on the first pass through vcl_recv";
                            break Step::Synth(503, Some(detail.to_string()));
                        }
                        (true, None, ..) => {
                            break Step::Synth(503, Some(format!("no policy is labelled `{label}`")))
                        }
                        _ => {
                            let detail = format!("`{label}` is a label here, but labels do not nest");
                            break Step::Synth(503, Some(detail));
                        }
                    }
                }
                other => {
                    let detail = format!(
                        "the policy returned {} here, which edgecache cannot do",
                        other.name()
                    );
                    break Step::Synth(503, Some(detail));
                }
            }
        };
        for ban in session.bans.drain(..) {
            shared.ban_everywhere(ban);
        }
        let status_header = &shared.cache_status_header;
        let outcome = match step {
            Step::Served(response, state) => {
                vcl_deliver(program, &mut session, response, state, status_header).await
            }
            Step::Piped(response, state) => Deliver::Done(response, state),
            Step::Restart => Deliver::Restart,
            Step::Synth(status, reason) => vcl_synth(program, &mut session, status, reason, status_header),
            Step::PluginAnswered => plugin_answered(&mut session, status_header),
        };
        match outcome {
            Deliver::Done(response, state) => {
                let response = esi_assembled(shared, version, &session, response);
                let response = gzip::decoded_unless_accepted(response, &session.req.headers);
                // Plugins that read bodies see this one before its head is sent.
                if !session.plugins.reads_response_body() {
                    return (response, state);
                }
                let client = Some(session.client);
                let reading = session
                    .plugins
                    .response_body(version, &mut session.req, client, response);
                return match Box::pin(reading).await {
                    Ok(response) => (response, state),
                    Err(mut answered) => {
                        let synth = HeaderValue::from_static(CacheState::Synth.as_str());
                        answered.headers_mut().insert(status_header, synth);
                        (answered, CacheState::Synth)
                    }
                };
            }
            Deliver::Restart if session.restarts < MAX_RESTARTS => {
                session.restarts += 1;
                session.hash.clear();
            }
            Deliver::Restart => {
                // As Varnish: past max_restarts the request ends in vcl_synth with a 503; a
                // vcl_synth that restarts again gets the plain error.
                let reason = Some(format!("Too many restarts (max_restarts is {MAX_RESTARTS})"));
                if let Deliver::Done(response, state) =
                    vcl_synth(program, &mut session, 503, reason, status_header)
                {
                    return (response, state);
                }
                let detail = format!("too many restarts (max_restarts is {MAX_RESTARTS})");
                return (
                    synth::plain(StatusCode::SERVICE_UNAVAILABLE, &detail),
                    CacheState::Synth,
                );
            }
        }
    }
}

/// The cache key from `vcl_hash` (the user's, then the builtin's if it falls through). Without
/// a user `vcl_hash`, the builtin's key (host and URL) is built natively: the same key as
/// without a policy, so `PURGE` and the admin API's purge find the object either way.
fn vcl_key(program: &Program, session: &mut ClientSession) -> CacheKey {
    if !program.has_sub(Sub::Hash) {
        trace::builtin(session.trace.as_ref(), Side::Client, Sub::Hash, &Action::Lookup);
        return builtin::vcl_hash(&session.req);
    }
    session.hash.clear();
    trace::call(program, Sub::Hash, session);
    CacheKey::from_hash_data(&session.hash)
}

/// `std.cache_req_body`: reads the client's body before `vcl_recv` when it is at most `limit`
/// bytes and keeps it in `parts` (see [`vcl::CachedBody`]); no body is an empty one. A larger
/// (or failing) body is not kept and, being partly read, cannot go to the origin any more: as
/// in Varnish, a fetch that needs it fails.
async fn cache_req_body(
    parts: &mut http::request::Parts,
    body: &mut Option<Incoming>,
    had_body: bool,
    limit: u64,
    silence: std::time::Duration,
) {
    if !had_body {
        parts.extensions.insert(vcl::CachedBody(bytes::Bytes::new()));
        return;
    }
    let announced = http_body::Body::size_hint(body.as_ref().expect("not taken yet")).lower();
    if announced > limit {
        return;
    }
    let Some(incoming) = body.take() else { return };
    let limited = http_body_util::Limited::new(incoming, usize::try_from(limit).unwrap_or(usize::MAX));
    if let Ok(Ok(collected)) = tokio::time::timeout(silence, limited.collect()).await {
        parts.extensions.insert(vcl::CachedBody(collected.to_bytes()));
    }
}

/// The body a pass or pipe sends: the plugins' rewrite, else what `std.cache_req_body` kept.
fn rewritten_or_cached(session: &mut ClientSession) -> Option<bytes::Bytes> {
    session
        .plugins
        .rewritten_body
        .take()
        .or_else(|| bereq::cached_body(&session.req))
}

/// The client's body for the origin, which it can get once: as Varnish ("Uncached req.body
/// can only be consumed once"), a restarted request whose body already went to the origin
/// fails rather than send the origin the same request without its body.
/// `rewritten`: the body as the plugins that read it left it (already read from the client).
fn once(
    body: &mut Option<Incoming>,
    rewritten: Option<bytes::Bytes>,
    had_body: bool,
    shared: &Shared,
) -> Result<OutgoingBody, &'static str> {
    if let Some(rewritten) = rewritten {
        return Ok(http_body_util::Full::new(rewritten)
            .map_err(|never| match never {})
            .boxed_unsync());
    }
    match body.take() {
        Some(body) => Ok(streamed(body, shared.body_timeout)),
        None if had_body => Err("the request body was already sent to the origin once; \
                                 a restarted request cannot send it again"),
        None => Ok(bereq::empty_body()),
    }
}

/// Where a client request's VCL steps led before delivery.
enum Step {
    Served(Response<ProxyBody>, CacheState),
    /// `return (pipe)`: the origin's answer, sent as it is.
    Piped(Response<ProxyBody>, CacheState),
    /// `vcl_synth` with this status and reason.
    Synth(u16, Option<String>),
    Restart,
    /// A plugin answered (`proxy_send_local_response`); its response is in the session.
    PluginAnswered,
}

enum Deliver {
    Done(Response<ProxyBody>, CacheState),
    Restart,
}

/// A plugin's local response, sent as the plugin built it (like a `vcl_synth` page, it is
/// not stored and `vcl_deliver` does not run over it).
fn plugin_answered(session: &mut ClientSession, status_header: &http::HeaderName) -> Deliver {
    let Some(mut local) = session.plugins.local.take() else {
        return Deliver::Done(
            synth::plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "a plugin answered without a response",
            ),
            CacheState::Synth,
        );
    };
    let client = Some(session.client);
    session
        .plugins
        .over_local_response(&mut session.req, client, &mut local);
    let mut response = super::plugins::local_response(local);
    response.headers_mut().insert(
        status_header,
        HeaderValue::from_static(CacheState::Synth.as_str()),
    );
    Deliver::Done(response, CacheState::Synth)
}

/// Runs `vcl_deliver` over a response (when the policy defines it: the builtin one only
/// delivers), applying its header and status edits.
async fn vcl_deliver(
    program: &Program,
    session: &mut ClientSession<'_>,
    mut response: Response<ProxyBody>,
    state: CacheState,
    status_header: &http::HeaderName,
) -> Deliver {
    // Set before vcl_deliver runs, so the policy can read, rename or remove it.
    response
        .headers_mut()
        .insert(status_header, HeaderValue::from_static(state.as_str()));
    if !program.has_sub(Sub::Deliver) {
        trace::builtin(
            session.trace.as_ref(),
            Side::Client,
            Sub::Deliver,
            &Action::Deliver,
        );
        return Deliver::Done(response, state);
    }
    let (mut parts, body) = response.into_parts();
    session.begin_response(ClientResponse {
        status: parts.status,
        reason: None,
        headers: std::mem::take(&mut parts.headers),
    });
    session.can_esi = parts.extensions.get::<EsiBody>().is_some();
    session.do_esi = session.can_esi;
    let action = session.run_waiting(program, Sub::Deliver).await;
    let resp = session.resp.take().expect("set above");
    parts.status = resp.status;
    parts.headers = resp.headers;
    if !session.do_esi {
        parts.extensions.remove::<EsiBody>();
    }
    match action {
        Action::Restart => Deliver::Restart,
        Action::Synth { status, reason } => {
            vcl_synth(program, session, status, Some(reason.to_string()), status_header)
        }
        Action::PluginResponse { .. } => plugin_answered(session, status_header),
        _ => Deliver::Done(Response::from_parts(parts, body), state),
    }
}

/// Builds a synthetic response through `vcl_synth` (the builtin one writes an HTML page).
fn vcl_synth(
    program: &Program,
    session: &mut ClientSession,
    status: u16,
    reason: Option<String>,
    status_header: &http::HeaderName,
) -> Deliver {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    session.synthetic = None;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        status_header,
        HeaderValue::from_static(CacheState::Synth.as_str()),
    );
    session.begin_response(ClientResponse {
        status,
        reason,
        headers,
    });
    let action = trace::call(program, Sub::Synth, session);
    let resp = session.resp.take().expect("set above");
    if action == Action::Restart {
        return Deliver::Restart;
    }
    let body = session.synthetic.take().unwrap_or_default();
    let mut response = Response::new(ProxyBody::full(body));
    *response.status_mut() = resp.status;
    *response.headers_mut() = resp.headers;
    Deliver::Done(response, CacheState::Synth)
}
