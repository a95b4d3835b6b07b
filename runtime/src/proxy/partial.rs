//! Requests answered from representations stored by slices (RFC 9111 §3.3, §3.4; RFC 9110
//! §14): the origin side of `cache::partial`.
//!
//! A `GET` with one `Range` on a miss, and any `GET` or `HEAD` of a representation the cache
//! holds slices of (or knows to be too large to store whole), comes here instead of the
//! whole-object fill. The answer is cut from the slices that hold the wanted bytes; each
//! slice missing (never fetched, evicted, stale, or of another representation) is asked for
//! with a `Range` of exactly that slice, stored, and sent on as it arrives. Before the head
//! goes out, the first missing slice is fetched, so a representation that changed (another
//! strong validator or length, §3.4) is noticed in time: its stored slices are dropped and
//! the answer is built from the new one. A change noticed later, while the body streams,
//! cuts the answer short (the client sees an incomplete response) and drops the stored
//! slices, as nginx's `slice` module does.
//!
//! Slice fetches are not coalesced: two clients missing one slice at once both fetch it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::stream;
use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use policy_lang::BackendId;

use super::attempts::{failure, Attempts, FetchFailure};
use super::route::Route;
use super::{bereq, fetch, h2_accounting, headers, respond, Shared};
use crate::backend::{Backend, TimedBody};
use crate::cache::body::{BoxError, ProxyBody, StoredBody};
use crate::cache::key::CacheKey;
use crate::cache::object::{CachedObject, ObjectHead, Requested, StoredHeaders};
use crate::cache::partial::{Known, Representation};
use crate::cache::rules::control::RequestDirectives;
use crate::cache::rules::partial::{self as rules, ContentRange};
use crate::cache::rules::range::{self, RangeOutcome};
use crate::cache::rules::stale::{self, Reuse};
use crate::cache::state::CacheState;
use crate::version::Version;

/// Whether the lookup of `request` (nothing stored whole under `key`) is answered here: a
/// `GET` or `HEAD` of a representation the cache holds slices of or knows to be too large,
/// or, when `key` is not hit-for-pass, a `GET` with one `Range` and without `no-store`.
pub(super) fn serves(route: Route<'_>, request: &Parts, key: &CacheKey, hit_for_pass: bool) -> bool {
    if !route.shared.slices_for(route.version) {
        return false;
    }
    let get = request.method == Method::GET;
    if !(get || request.method == Method::HEAD) {
        return false;
    }
    if route.shared.cache.partials.known(key).is_some() {
        return true;
    }
    // A client's `no-store` stores nothing: its range is left to the whole-object path.
    get && !hit_for_pass
        && single_range(&request.headers).is_some()
        && !RequestDirectives::from_headers(&request.headers).no_store
}

/// The request's `Range` when it is one line naming one range.
fn single_range(request: &HeaderMap) -> Option<&HeaderValue> {
    let mut lines = request.get_all(header::RANGE).iter();
    match (lines.next(), lines.next()) {
        (Some(value), None) if rules::is_single_range(value) => Some(value),
        _ => None,
    }
}

/// Answers `request` from the slices of `key`'s representation, fetching those missing.
pub(super) async fn serve(
    route: Route<'_>,
    request: &Parts,
    key: CacheKey,
) -> (Response<ProxyBody>, CacheState) {
    let shared = route.shared;
    let slicer = Slicer {
        shared: shared.clone(),
        version: route.version.clone(),
        backend: route.backend.clone(),
        hint: route.hint,
        client: route.client,
        request: request.clone(),
        key,
        slice_size: shared.slice_size,
    };
    let known = match shared.cache.partials.known(&slicer.key) {
        Some(Known::Sliced(representation)) if representation.slice_size == slicer.slice_size => {
            Some(representation)
        }
        _ => None,
    };
    let (mut representation, mut fetched) = match known {
        Some(representation) => (representation, None),
        None => {
            // Learn the representation from the slice the client's range starts in (a suffix
            // range, or the whole, from the first).
            let first = single_range(&request.headers)
                .and_then(rules::first_byte)
                .map_or(0, |byte| rules::slice_of(byte, slicer.slice_size));
            match slicer.fetch(first).await {
                Fetched::Part(part) => {
                    let representation = slicer.keep(part.clone(), None);
                    (representation, Some(part))
                }
                Fetched::Unusable => return slicer.passed(route).await,
                Fetched::Whole(response, request_time, backend) => {
                    return slicer.settle_whole(route, response, request_time, backend).await
                }
                Fetched::Failed(failed) => {
                    return (failure(failed, shared.show_backend_errors), CacheState::Miss)
                }
            }
        }
    };
    let now = shared.cache.clock.now();
    let mut origin_asked = fetched.is_some();
    let state = |origin_asked: bool| {
        if origin_asked {
            CacheState::Miss
        } else {
            CacheState::Hit
        }
    };
    // The first missing slice is fetched before the head goes out; when it shows that the
    // representation changed, the answer is planned again over the new one (once more at
    // most: a representation that keeps changing is left to the body to cut short).
    let mut changes = 0;
    let (wanted, span, pieces) = loop {
        let stored = representation.head.headers.to_map(respond::HIT_FIELDS);
        if let Some(response) = respond::not_modified(&representation.head, &stored, &request.headers, now) {
            return (response, state(origin_asked));
        }
        let wanted = Wanted::of(request, &stored, representation.complete);
        let span = match &wanted {
            Wanted::Whole => 0..representation.complete,
            Wanted::Part(part) => part.clone(),
            Wanted::Unsatisfiable | Wanted::HeadOnly => {
                let response = wanted.response(&representation, ProxyBody::empty(), now);
                return (response, state(origin_asked));
            }
        };
        let mut pieces = slicer.plan(&representation, &span, fetched.take(), now);
        let missing = pieces.iter().find_map(|piece| match piece {
            Piece::Missing(index) => Some(*index),
            Piece::Held(..) => None,
        });
        let Some(index) = missing.filter(|_| changes < 2) else {
            break (wanted, span, pieces);
        };
        origin_asked = true;
        match slicer.fetch(index).await {
            Fetched::Part(part) if part.same_as(&representation) => {
                slicer.keep(part.clone(), Some(&representation));
                let at = (index - rules::slice_of(span.start, representation.slice_size)) as usize;
                pieces[at] = Piece::Held(part.object.body.clone(), index);
                break (wanted, span, pieces);
            }
            Fetched::Part(part) => {
                tracing::debug!(key = ?slicer.key, "the representation changed: its stored slices are dropped");
                changes += 1;
                representation = slicer.keep(part.clone(), Some(&representation));
                fetched = Some(part);
            }
            Fetched::Unusable => return slicer.passed(route).await,
            Fetched::Whole(response, request_time, backend) => {
                return slicer.settle_whole(route, response, request_time, backend).await
            }
            Fetched::Failed(failed) => {
                return (failure(failed, shared.show_backend_errors), CacheState::Miss)
            }
        }
    };
    if !origin_asked {
        shared.stats.partial_hits.fetch_add(1, Relaxed);
    }
    let body = slicer.body(representation.clone(), span, pieces);
    (wanted.response(&representation, body, now), state(origin_asked))
}

/// What the client gets of the representation.
enum Wanted {
    /// A `200` with all of it.
    Whole,
    /// A `206` with these bytes.
    Part(Range<u64>),
    /// A `416`.
    Unsatisfiable,
    /// A `HEAD`: the `200`'s head.
    HeadOnly,
}

impl Wanted {
    /// RFC 9110 §14.2: one range is cut; several are answered with the whole (a server may
    /// ignore `Range`), as is a `Range` that `If-Range` does not let through. `stored` is the
    /// representation's fields, `complete` its length.
    fn of(request: &Parts, stored: &HeaderMap, complete: u64) -> Wanted {
        if request.method == Method::HEAD {
            return Wanted::HeadOnly;
        }
        match range::evaluate_range(&request.method, &request.headers, stored, complete) {
            RangeOutcome::Single(part) => Wanted::Part(part),
            RangeOutcome::Unsatisfiable => Wanted::Unsatisfiable,
            RangeOutcome::Full | RangeOutcome::Multi(_) => Wanted::Whole,
        }
    }

    fn response(
        &self,
        representation: &Representation,
        body: ProxyBody,
        now: SystemTime,
    ) -> Response<ProxyBody> {
        let head = &representation.head;
        let mut response = Response::new(body);
        *response.headers_mut() = head.headers.to_map(respond::HIT_FIELDS);
        let fields = response.headers_mut();
        let complete = representation.complete;
        let status = match self {
            Wanted::Whole | Wanted::HeadOnly => StatusCode::OK,
            Wanted::Part(part) => {
                fields.insert(header::CONTENT_RANGE, range::content_range(part, complete));
                fields.insert(header::CONTENT_LENGTH, HeaderValue::from(part.end - part.start));
                StatusCode::PARTIAL_CONTENT
            }
            Wanted::Unsatisfiable => {
                fields.insert(header::CONTENT_RANGE, range::unsatisfied_content_range(complete));
                fields.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
                StatusCode::RANGE_NOT_SATISFIABLE
            }
        };
        *response.status_mut() = status;
        respond::with_age(response, head, now)
    }
}

/// One slice of the span to send: stored (its body, its index), or to fetch.
enum Piece {
    Held(StoredBody, u64),
    Missing(u64),
}

/// A slice the origin sent: the object to store, and what it says of the whole.
#[derive(Clone)]
struct Part {
    index: u64,
    object: Arc<CachedObject>,
    content_range: ContentRange,
    validator: rules::Validator,
}

impl Part {
    /// Whether this part belongs to `representation` (RFC 9111 §3.4).
    fn same_as(&self, representation: &Representation) -> bool {
        self.content_range.complete == representation.complete && self.validator == representation.validator
    }
}

/// What a slice request brought back.
enum Fetched {
    /// The slice, storable.
    Part(Part),
    /// A `206` that cannot be stored or is not the slice asked for (no strong validator,
    /// `Vary`, not storable by the rules, another range).
    Unusable,
    /// Not a `206`: the origin ignores `Range` or answered otherwise. Judged as a miss's
    /// response would be; sent at this time, by this backend.
    Whole(Response<TimedBody>, SystemTime, Backend),
    Failed(FetchFailure),
}

/// The slices of one key, fetched for one client request. Owned: the body that streams the
/// slices outlives the request's borrows.
struct Slicer {
    shared: Arc<Shared>,
    version: Arc<Version>,
    backend: Backend,
    hint: Option<BackendId>,
    client: SocketAddr,
    request: Parts,
    key: CacheKey,
    slice_size: u64,
}

impl Slicer {
    fn route(&self) -> Route<'_> {
        Route {
            shared: &self.shared,
            version: &self.version,
            backend: &self.backend,
            hint: self.hint,
            client: self.client,
        }
    }

    /// Asks the origin for slice `index`.
    async fn fetch(&self, index: u64) -> Fetched {
        h2_accounting::origin_fetch_started();
        self.shared.stats.slice_fetches.fetch_add(1, Relaxed);
        let mut bereq = bereq::fill(&self.request, self.client.ip(), None);
        bereq
            .headers_mut()
            .insert(header::RANGE, rules::slice_request(index, self.slice_size));
        let (mut attempts, mut backend) =
            Attempts::start(&self.version, self.hint, &self.backend, &mut bereq, false);
        let request_time = self.shared.cache.clock.now();
        let response = match attempts.send(&mut backend, bereq).await {
            Ok(response) => response,
            Err(failed) => return Fetched::Failed(failed),
        };
        if response.status() != StatusCode::PARTIAL_CONTENT {
            return Fetched::Whole(response, request_time, backend);
        }
        let (mut parts, body) = response.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers);
        let content_range = parts
            .headers
            .get(header::CONTENT_RANGE)
            .and_then(rules::parse_content_range)
            .filter(|got| rules::answers_slice(got, index, self.slice_size));
        let (Some(content_range), Some(validator)) = (content_range, rules::strong_validator(&parts.headers))
        else {
            return Fetched::Unusable;
        };
        if parts.headers.contains_key(header::VARY) {
            return Fetched::Unusable;
        }
        let Some(head) = fetch::judge_part(
            self.route(),
            &self.request,
            &self.key,
            &mut parts,
            request_time,
            &mut attempts,
        ) else {
            return Fetched::Unusable;
        };
        let length = content_range.range.end - content_range.range.start;
        let limit = usize::try_from(length).unwrap_or(usize::MAX);
        let Ok(collected) = http_body_util::Limited::new(body, limit).collect().await else {
            return Fetched::Unusable;
        };
        let bytes = collected.to_bytes();
        if bytes.len() as u64 != length {
            return Fetched::Unusable;
        }
        let object = Arc::new(CachedObject::new(Arc::new(head), StoredBody::from(bytes)));
        Fetched::Part(Part {
            index,
            object,
            content_range,
            validator,
        })
    }

    /// Stores `part` and makes its fields the representation's (RFC 9111 §3.4: the newest
    /// part's fields replace the stored ones). When it is not a part of `previous`, the
    /// slices of `previous` are dropped first.
    fn keep(&self, part: Part, previous: Option<&Representation>) -> Arc<Representation> {
        let partials = &self.shared.cache.partials;
        if previous.is_some_and(|previous| !part.same_as(previous)) {
            partials.remove(&self.key);
        }
        let complete = part.content_range.complete;
        let slice = &part.object.head;
        let head = ObjectHead {
            status: StatusCode::OK,
            headers: StoredHeaders::new(
                Requested {
                    variant: None,
                    ..slice.requested()
                },
                &rules::representation_headers(&slice.headers.to_map(0), complete),
            ),
            response_time: slice.response_time,
            initial_age: slice.initial_age,
            ttl: slice.ttl,
            grace: slice.grace,
            retention: slice.retention,
            directives: slice.directives.clone(),
            esi: false,
        };
        let representation = Arc::new(Representation {
            head: Arc::new(head),
            complete,
            validator: part.validator,
            slice_size: self.slice_size,
        });
        partials.store_slice(&self.key, self.slice_size, part.index, part.object);
        partials.describe(&self.key, representation.clone());
        representation
    }

    /// The slices of `span`: held when stored, usable for this request (fresh, or stale as
    /// the request allows), not banned and of `representation`; `fetched` is one just
    /// fetched.
    fn plan(
        &self,
        representation: &Representation,
        span: &Range<u64>,
        fetched: Option<Part>,
        now: SystemTime,
    ) -> Vec<Piece> {
        let wanted = RequestDirectives::from_headers(&self.request.headers);
        let partials = &self.shared.cache.partials;
        rules::slices_of(span, representation.slice_size)
            .map(|index| {
                if let Some(part) = fetched.as_ref().filter(|part| part.index == index) {
                    return Piece::Held(part.object.body.clone(), index);
                }
                let usable = partials.slice(&self.key, representation, index).filter(|slice| {
                    let head = &slice.head;
                    let reuse = stale::freshness_for_request(
                        slice.ttl(),
                        head.age_at(now),
                        &head.directives,
                        &wanted,
                        self.shared.ignore_request_cache_control,
                    );
                    reuse != Reuse::Revalidate
                        && !self.shared.cache.is_banned(slice)
                        && rules::strong_validator(&head.headers.to_map(0)).as_ref()
                            == Some(&representation.validator)
                });
                match usable {
                    Some(slice) => Piece::Held(slice.body.clone(), index),
                    None => Piece::Missing(index),
                }
            })
            .collect()
    }

    /// The bytes `span` of `representation`, slice after slice: held ones sent as stored,
    /// missing ones fetched, stored and sent as they arrive. A slice of another representation
    /// or a failed fetch ends the body with an error, so the client sees it incomplete.
    fn body(self, representation: Arc<Representation>, span: Range<u64>, pieces: Vec<Piece>) -> ProxyBody {
        let state = (self, representation, span, pieces.into_iter(), VecDeque::new());
        let chunks = stream::unfold(
            state,
            |(slicer, representation, span, mut pieces, mut queue)| async move {
                loop {
                    if let Some(chunk) = queue.pop_front() {
                        let frame: Result<Frame<Bytes>, BoxError> = Ok(Frame::data(chunk));
                        return Some((frame, (slicer, representation, span, pieces, queue)));
                    }
                    let (body, index) = match pieces.next()? {
                        Piece::Held(body, index) => (body, index),
                        Piece::Missing(index) => match slicer.fetch(index).await {
                            Fetched::Part(part) if part.same_as(&representation) => {
                                slicer.keep(part.clone(), Some(&representation));
                                (part.object.body.clone(), index)
                            }
                            other => {
                                let why = match other {
                                    Fetched::Part(_) => {
                                        slicer.shared.cache.partials.remove(&slicer.key);
                                        "the representation changed while it was sent"
                                    }
                                    Fetched::Failed(_) => "a slice could not be fetched",
                                    _ => "a slice came back unusable",
                                };
                                tracing::debug!(key = ?slicer.key, index, "{why}: the response is cut short");
                                let error: BoxError = why.into();
                                let stop = (slicer, representation, span, Vec::new().into_iter(), queue);
                                return Some((Err(error), stop));
                            }
                        },
                    };
                    let bounds =
                        rules::slice_bounds(index, representation.slice_size, representation.complete);
                    let from = span.start.max(bounds.start) - bounds.start;
                    let to = span.end.min(bounds.end) - bounds.start;
                    queue.extend(body.range_parts(from..to));
                }
            },
        );
        ProxyBody::stream(http_body_util::StreamBody::new(chunks))
    }

    /// The slice request's answer was a `206` the cache cannot keep: the request goes to the
    /// origin as it is, and the key is remembered as hit-for-pass so the next ones do not
    /// try slices first. Not when the client's own `no-store` was the reason (RFC 9111
    /// §5.2.1.5): that says nothing about the URL.
    async fn passed(&self, route: Route<'_>) -> (Response<ProxyBody>, CacheState) {
        if !RequestDirectives::from_headers(&self.request.headers).no_store {
            self.shared.cache.partials.remove(&self.key);
            self.shared.cache.coalescer.mark_hit_for_pass(self.key.clone());
        }
        Box::pin(fetch::hit_for_pass(route, &self.request, self.key.clone())).await
    }

    /// A slice request answered with the whole representation (or another status): judged,
    /// stored and answered as a miss's response would be. A `416` is relayed: it says the
    /// client's range is past the end, nothing about what to store.
    async fn settle_whole(
        &self,
        route: Route<'_>,
        response: Response<TimedBody>,
        request_time: SystemTime,
        backend: Backend,
    ) -> (Response<ProxyBody>, CacheState) {
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE {
            let strip = self.shared.targeted_to_strip();
            return (super::relay::relay(response, false, strip), CacheState::Miss);
        }
        let settled = fetch::settle_unsliced(
            route,
            &self.request,
            self.key.clone(),
            response,
            request_time,
            backend,
        );
        Box::pin(settled).await
    }
}
