//! The requests sent to an origin, each built from the client's request in one place: a pass,
//! a cache fill (or revalidation), a fetch for a hit-for-pass key, and a pipe. Every one has the
//! hop-by-hop fields removed, `Host` kept (HTTP/2 clients send `:authority` instead),
//! `X-Forwarded-For` and `Via` added, and the client connection's addresses carried along for a
//! backend's PROXY header.

use std::net::IpAddr;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request};
use http_body_util::{BodyExt, Empty};

use super::client_side::ClientSide;
use super::{headers, vcl};
use crate::backend::{OnInformational, OutgoingBody};
use crate::cache::object::CachedObject;
use crate::cache::rules::conditional;

/// The body of a backend request that has none.
pub(super) fn empty_body() -> OutgoingBody {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// `parts`' buffered body (see [`vcl::CachedBody`]).
pub(super) fn cached_body(parts: &Parts) -> Option<bytes::Bytes> {
    parts
        .extensions
        .get::<vcl::CachedBody>()
        .map(|body| body.0.clone())
}

/// Fields a backend request may gain on the way: `Host`, `X-Forwarded-For`, `Via`.
const ADDED_FIELDS: usize = 3;

/// The head every backend request starts from: the client's method, target and fields, minus
/// the hop-by-hop ones, with `Host`, `X-Forwarded-For` and `Via`, and the client's side (its
/// connection, for `remote.ip` / `local.ip`, and `bereq.xid`, also on a pipe's failure page).
fn forwarded(parts: &Parts, client: IpAddr) -> Parts {
    let (mut head, ()) = Request::new(()).into_parts();
    head.method = parts.method.clone();
    head.uri = parts.uri.clone();
    // A clone copies the map's table as it is, without hashing a name again; it has no room
    // to spare, so room for the fields added below is made once.
    head.headers = parts.headers.clone();
    let headers = &mut head.headers;
    headers.reserve(ADDED_FIELDS);
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
    if let Some(side) = ClientSide::of(&parts.extensions) {
        // For the PROXY header of backends with `.proxy_header` (the origin learns the client).
        head.extensions.insert(side.connection.addresses);
        head.extensions.insert(side.clone());
    }
    head
}

/// A fetch's request: [`forwarded`], plus what else the backend subs read of the client
/// request (its trace, `bereq.is_bgfetch`).
fn fetch(parts: &Parts, client: IpAddr, body: OutgoingBody) -> Request<OutgoingBody> {
    let mut head = forwarded(parts, client);
    if let Some(trace) = super::trace::of(parts) {
        head.extensions.insert(trace.clone());
    }
    if let Some(background) = parts.extensions.get::<vcl::BackgroundFetch>() {
        head.extensions.insert(*background);
    }
    let mut bereq = Request::from_parts(head, body);
    if let Some(client) = parts.extensions.get::<hyper::ext::InformationalSender>() {
        forward_informational(&mut bereq, client.clone());
    }
    bereq
}

/// Forwards the informational responses the origin sends before its final one to the client,
/// in order, each with its own fields minus the hop-by-hop ones (RFC 9110 §15.2: a proxy
/// forwards 1xx responses). Never stored: the cache only sees the final response. `100
/// Continue` is left out, since the client's connection answers its own `Expect`; and `101`
/// is never an interim response. A background fetch has no client waiting (its sender is
/// closed), so nothing goes anywhere.
fn forward_informational(bereq: &mut Request<OutgoingBody>, client: hyper::ext::InformationalSender) {
    let forward = OnInformational::new(move |mut interim| {
        if interim.status() == http::StatusCode::CONTINUE {
            return;
        }
        headers::strip_hop_by_hop(interim.headers_mut());
        client.send(interim);
    });
    bereq.extensions_mut().insert(forward);
}

/// A pass: the client's request, body included.
pub(super) fn pass(parts: &Parts, client: IpAddr, body: OutgoingBody) -> Request<OutgoingBody> {
    fetch(parts, client, body)
}

/// Fields of the client's request that must not reach the origin on a cache fill: the cache
/// wants the whole current representation, and answers the client's conditionals and ranges
/// itself from what it stores.
const CLIENT_PRECONDITIONS: [header::HeaderName; 6] = [
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

/// The origin request for a cache fill of `parts`: always GET (a HEAD miss fetches the whole
/// object so the GETs that follow hit), the client's preconditions replaced by the cache's own
/// when a stale object with validators is being revalidated.
pub(super) fn fill(parts: &Parts, client: IpAddr, stale: Option<&CachedObject>) -> Request<OutgoingBody> {
    let mut bereq = bodiless_get(parts, client);
    let headers = bereq.headers_mut();
    for name in &CLIENT_PRECONDITIONS {
        headers.remove(name);
    }
    if let Some(stale) = stale {
        headers.extend(conditional::conditional_request_headers(
            &stale.head.headers.to_map(0),
        ));
    }
    bereq
}

/// The origin request for a key remembered as hit-for-pass: a pass in all but name (the
/// response is still stored if it turns storable), so the client's own preconditions and
/// `Range` go to the origin and its 304 or 206 comes back. A HEAD is sent as GET, as on a miss
/// (Varnish's hit-for-miss): a bodiless response stored for the key would answer every later
/// GET with an empty page.
pub(super) fn hit_for_pass(parts: &Parts, client: IpAddr) -> Request<OutgoingBody> {
    bodiless_get(parts, client)
}

/// A GET for `parts` without a body: a fetch never forwards the client's body (a GET body has
/// no defined meaning, RFC 9110 §9.3.1, and the object is shared), nor the `Content-Length`
/// that announced it, which the origin would otherwise read the next request on its connection
/// as (Varnish filters it from fetches the same way). The exception is a body
/// `std.cache_req_body` buffered, which Varnish sends with its fetches too (POST caching sets
/// `bereq.method = "POST"` in `vcl_backend_fetch`).
fn bodiless_get(parts: &Parts, client: IpAddr) -> Request<OutgoingBody> {
    let cached = cached_body(parts).filter(|body| !body.is_empty());
    let body = cached.as_ref().map_or_else(empty_body, |body| {
        http_body_util::Full::new(body.clone())
            .map_err(|never| match never {})
            .boxed_unsync()
    });
    let mut bereq = fetch(parts, client, body);
    *bereq.method_mut() = Method::GET;
    match cached {
        Some(body) => {
            bereq
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        None => {
            bereq.headers_mut().remove(header::CONTENT_LENGTH);
        }
    }
    bereq
}

/// The request a pipe opens with (`bereq` in `vcl_pipe`): [`forwarded`] in the client's HTTP
/// version; an `Upgrade` is sent on with `Connection: upgrade`, anything else with
/// `Connection: close` (as Varnish), so the origin does not wait for a next request on a
/// connection that ends with this one.
pub(super) fn pipe(parts: &Parts, client: IpAddr) -> Parts {
    let mut bereq = forwarded(parts, client);
    bereq.version = parts.version;
    match parts.headers.get(header::UPGRADE) {
        Some(protocol) => {
            bereq.headers.insert(header::UPGRADE, protocol.clone());
            bereq
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        }
        None => {
            bereq
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    bereq
}
