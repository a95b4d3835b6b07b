//! Responses built from stored objects: the current `Age`, client conditionals answered with
//! `304` (RFC 9111 §4.3.2), and byte ranges (RFC 9110 §14) cut from the stored body. An ESI
//! page is answered whole, marked for assembly (see `esi`): the stored object's validators
//! and length are not the assembled page's, so no 304 and no range is cut from it.

use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};

use super::esi::EsiBody;
use crate::cache::body::ProxyBody;
use crate::cache::object::{CachedObject, ObjectHead};
use crate::cache::rules::conditional::{self, ConditionalOutcome};
use crate::cache::rules::range::{self, RangeOutcome};

/// Separates the parts of a `multipart/byteranges` body.
const BOUNDARY: &str = "edgecache-byteranges";

/// Fields a response from a stored object gets room for in its map beyond the stored ones:
/// `Age`, the cache-status header and what `vcl_deliver` or a plugin sets, without a rehash.
pub(super) const HIT_FIELDS: usize = 4;

/// `response` with the object's current `Age` (RFC 9111 §4.2.3).
pub(super) fn with_age(
    mut response: Response<ProxyBody>,
    head: &ObjectHead,
    now: SystemTime,
) -> Response<ProxyBody> {
    response
        .headers_mut()
        .insert(header::AGE, HeaderValue::from(head.age_at(now).as_secs()));
    response
}

fn response(status: StatusCode, headers: HeaderMap, body: ProxyBody) -> Response<ProxyBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// `304 Not Modified` when the request's conditionals match the object, whose fields are
/// `stored` (as [`StoredHeaders::to_map`](crate::cache::object::StoredHeaders::to_map) gives them).
pub(super) fn not_modified(
    head: &ObjectHead,
    stored: &HeaderMap,
    request: &HeaderMap,
    now: SystemTime,
) -> Option<Response<ProxyBody>> {
    let outcome = conditional::evaluate_client_conditional(request, head.status, stored, head.response_time);
    (outcome == ConditionalOutcome::NotModified).then(|| {
        let headers = conditional::not_modified_headers(stored);
        with_age(
            response(StatusCode::NOT_MODIFIED, headers, ProxyBody::empty()),
            head,
            now,
        )
    })
}

/// The answer to `method`/`request` from an object whose body may still be arriving
/// (`body`): a 304 where the conditionals match, else the whole response.
pub(super) fn from_head(
    head: &ObjectHead,
    body: ProxyBody,
    method: &Method,
    request: &HeaderMap,
    now: SystemTime,
) -> Response<ProxyBody> {
    if head.esi {
        let page = EsiBody::Streaming {
            url: head.requested().url.into(),
        };
        return esi_page(head, body, page, method, now);
    }
    let headers = head.headers.to_map(HIT_FIELDS);
    if let Some(response) = not_modified(head, &headers, request, now) {
        return response;
    }
    let body = if method == Method::HEAD {
        ProxyBody::empty()
    } else {
        body
    };
    with_age(response(head.status, headers, body), head, now)
}

/// The answer to `method`/`request` from a complete stored object: 304, 206, 416 or the
/// whole object.
pub(super) fn from_object(
    object: &Arc<CachedObject>,
    method: &Method,
    request: &HeaderMap,
    now: SystemTime,
) -> Response<ProxyBody> {
    let head = &object.head;
    if object.esi.is_some() {
        let page = EsiBody::Stored(object.clone());
        return esi_page(head, object.body.to_body(), page, method, now);
    }
    let mut headers = head.headers.to_map(HIT_FIELDS);
    if let Some(response) = not_modified(head, &headers, request, now) {
        return response;
    }
    let whole = &object.body;
    let length = whole.len();
    let ranges = if head.status == StatusCode::OK {
        range::evaluate_range(method, request, &headers, length)
    } else {
        RangeOutcome::Full
    };
    let (status, body, body_length) = match ranges {
        RangeOutcome::Full => {
            let body = if method == Method::HEAD {
                ProxyBody::empty()
            } else {
                whole.to_body()
            };
            return with_age(response(head.status, headers, body), head, now);
        }
        RangeOutcome::Single(part) => {
            headers.insert(header::CONTENT_RANGE, range::content_range(&part, length));
            let (body, body_length) = whole.range_body(part);
            (StatusCode::PARTIAL_CONTENT, body, body_length)
        }
        RangeOutcome::Multi(parts) => {
            let body =
                range::multipart_body(whole, &parts, head.headers.get(&header::CONTENT_TYPE), BOUNDARY);
            if let Some(content_type) = range::multipart_content_type(BOUNDARY) {
                headers.insert(header::CONTENT_TYPE, content_type);
            }
            let body_length = body.len() as u64;
            (StatusCode::PARTIAL_CONTENT, ProxyBody::full(body), body_length)
        }
        RangeOutcome::Unsatisfiable => {
            headers.insert(header::CONTENT_RANGE, range::unsatisfied_content_range(length));
            (StatusCode::RANGE_NOT_SATISFIABLE, ProxyBody::empty(), 0)
        }
    };
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body_length));
    with_age(response(status, headers, body), head, now)
}

/// The whole ESI page `page`, to be assembled (a `HEAD` gets its head only): no
/// `Content-Length`, since the assembled length is not the stored one.
fn esi_page(
    head: &ObjectHead,
    body: ProxyBody,
    page: EsiBody,
    method: &Method,
    now: SystemTime,
) -> Response<ProxyBody> {
    let mut headers = head.headers.to_map(HIT_FIELDS);
    headers.remove(header::CONTENT_LENGTH);
    let mut response = if method == Method::HEAD {
        response(head.status, headers, ProxyBody::empty())
    } else {
        let mut response = response(head.status, headers, body);
        response.extensions_mut().insert(page);
        response
    };
    response = with_age(response, head, now);
    response
}
