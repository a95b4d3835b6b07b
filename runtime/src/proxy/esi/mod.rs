//! Edge Side Includes (ESI 1.0, the subset Varnish implements): `beresp.do_esi` bodies parsed
//! once when stored (`parse`), and pages assembled at delivery from their stored bytes and
//! their includes (`deliver`), each include a request of its own that the driver runs through
//! the policy and the cache.
//!
//! A response that is to be assembled carries an [`EsiBody`] in its extensions, put there by
//! `respond` (stored objects, and fills still streaming in); the driver assembles it after
//! `vcl_deliver`, when `resp.do_esi` and `req.esi` still allow it.

mod deliver;
mod parse;

use std::sync::Arc;

use bytes::BytesMut;
use http::request::Parts;

use crate::cache::body::StoredBody;
use crate::cache::object::{CachedObject, EsiInstructions, ObjectHead};

pub(super) use deliver::{assemble, Assembly, Includes};

/// Where the page to assemble comes from, in a response's extensions.
#[derive(Clone)]
pub(super) enum EsiBody {
    /// A stored object with its parsed instructions: the response body is its whole body.
    Stored(Arc<CachedObject>),
    /// A `beresp.do_esi` body still arriving (the miss that stores it, a pass): it is read
    /// whole and parsed at delivery. `url` is the page's, for relative includes.
    Streaming { url: Box<str> },
}

/// Marks a response whose body is not stored (a pass), by its `extensions`, for assembly at
/// delivery, when `vcl_backend_response` set `beresp.do_esi`; `url` is the page's.
pub(super) fn assemble_when_delivered(extensions: &mut http::Extensions, url: &str) {
    extensions.insert(EsiBody::Streaming { url: url.into() });
}

/// What an include's request knows of the requests it was made for: `req.esi_level`,
/// `req_top.*`, and the pages above it (to refuse an include cycle).
#[derive(Clone)]
pub(super) struct EsiLevel {
    /// `req.esi_level`: 0 for the client's request.
    pub level: u32,
    /// The client's request, as `req_top.*` reads it.
    pub top: Arc<Parts>,
    /// Host and URL of each page above, top first.
    pub pages: Arc<[Box<str>]>,
}

impl EsiLevel {
    /// `req_top` of the client's request: itself.
    pub fn top(request: &Parts) -> EsiLevel {
        let mut top = http::Request::new(()).into_parts().0;
        top.method = request.method.clone();
        top.uri = request.uri.clone();
        top.version = request.version;
        top.headers = request.headers.clone();
        let page = page_key(
            host(request).unwrap_or(""),
            top.uri.path_and_query().map_or("/", |pq| pq.as_str()),
        );
        EsiLevel {
            level: 0,
            top: Arc::new(top),
            pages: Arc::new([page]),
        }
    }
}

/// The host a request is for: its `Host`, or an h2 request's `:authority`.
fn host(request: &Parts) -> Option<&str> {
    match request.headers.get(http::header::HOST) {
        Some(host) => host.to_str().ok(),
        None => request.uri.authority().map(|authority| authority.as_str()),
    }
}

/// How a page is told apart from the others above it (an include cycle).
fn page_key(host: &str, url: &str) -> Box<str> {
    format!("{host}{url}").into()
}

/// [`EsiParser`](crate::cache::object::EsiParser) for the cache's fills: a stored body's
/// instructions, its markup problems logged as Varnish logs `ESI_xmlerror`.
pub(super) fn parse_stored(head: &ObjectHead, body: &StoredBody) -> Option<EsiInstructions> {
    let mut whole = BytesMut::with_capacity(usize::try_from(body.len()).unwrap_or(0));
    body.copy_range(0..body.len(), &mut whole);
    parse_logged(&whole, head.requested().url)
}

/// `body`'s instructions for the page at `url`, problems logged.
fn parse_logged(body: &[u8], url: &str) -> Option<EsiInstructions> {
    let parsed = parse::parse(body, url);
    for (offset, problem) in &parsed.problems {
        tracing::info!(url, offset, "ESI: {problem}");
    }
    parsed.instructions
}
