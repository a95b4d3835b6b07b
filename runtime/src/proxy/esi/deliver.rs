//! Assembling an ESI page while it is sent: its stored bytes go out as they are, and each
//! include is a request of its own (made through [`Includes`], which the driver implements)
//! whose body is sent in its place, one include after the other, as Varnish does. The page's
//! head leaves with its first bytes: nothing waits for an include that comes later.
//!
//! As Varnish 7.7 with `feature +esi_include_onerror`: a fragment that answers other than
//! 200 or 204, whose body breaks, that is too deep (`--max-esi-depth`) or that includes a page
//! above it (a cycle, which Varnish only stops at the depth limit) is left out when its tag
//! says `onerror="continue"`, and otherwise aborts the page: its head was sent long ago, so
//! the body ends with an error (HTTP/1.1: the connection closes before the last chunk; h2:
//! the stream is reset) and the client can tell the page is incomplete.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;

use super::super::gzip;
use super::{host, page_key, parse_logged, EsiBody, EsiLevel};
use crate::cache::body::{BoxError, ProxyBody, StoredBody};
use crate::cache::object::{EsiInclude, EsiInstructions, EsiStep};
use crate::telemetry::Stats;

/// Frames the assembly may run ahead of the client.
const AHEAD: usize = 4;

/// How an include's request is answered: the driver runs it from `vcl_recv` to `vcl_deliver`
/// (and assembles it in turn when it is an ESI page).
pub(in crate::proxy) trait Includes: Send + Sync + 'static {
    /// The response to `request`, an include at `level` (its `req.esi_level`, `req_top`).
    fn include(
        &self,
        request: Parts,
        level: EsiLevel,
    ) -> Pin<Box<dyn Future<Output = Response<ProxyBody>> + Send>>;
}

/// What assembling one page needs.
pub(in crate::proxy) struct Assembly {
    pub includes: Arc<dyn Includes>,
    /// The page's request: its includes' requests copy its fields.
    pub request: Parts,
    /// The page's place: its level, the top request, the pages above it and itself.
    pub level: EsiLevel,
    /// `--max-esi-depth`: includes are made up to this level.
    pub max_depth: u32,
    /// The largest page body read whole to be parsed at delivery (`--max-object-size`).
    pub max_body: u64,
    pub stats: Arc<Stats>,
}

/// Why an assembled page ends before its end.
#[derive(Debug, thiserror::Error)]
enum Aborted {
    #[error(
        "ESI include {url} failed ({why}) and its tag has no onerror=\"continue\": the page is cut short"
    )]
    Include { url: Box<str>, why: String },
    #[error("the ESI page's body could not be read whole to be parsed: {0}")]
    Page(BoxError),
}

/// `response` with its body assembled, when its extensions carry an [`EsiBody`] (otherwise
/// as it is). The assembled length is not known in advance: no `Content-Length` (chunked on
/// HTTP/1.1, DATA frames on h2) and no byte ranges.
pub(in crate::proxy) fn assemble(response: Response<ProxyBody>, assembly: Assembly) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    let Some(page) = parts.extensions.remove::<EsiBody>() else {
        return Response::from_parts(parts, body);
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::ACCEPT_RANGES);
    // A page not stored may still be the origin's gzip: it is parsed decompressed (a stored
    // one was decompressed before it was stored).
    let streaming = matches!(page, EsiBody::Streaming { .. });
    let body = if streaming && gzip::is_gzip(&parts.headers) {
        gzip::mark_gunzipped(&mut parts.headers);
        ProxyBody::stream(gzip::Gzip::decompress(body))
    } else {
        body
    };
    let (sender, receiver) = mpsc::channel(AHEAD);
    tokio::spawn(async move {
        if let Err(aborted) = assembly.run(page, body, &sender).await {
            tracing::info!("{aborted}");
            let _ = sender.send(Err(aborted.into())).await;
        }
    });
    // The body is what the assembly task sends.
    let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let next = receiver.recv().await?;
        Some((next.map(Frame::data), receiver))
    });
    Response::from_parts(parts, ProxyBody::stream(StreamBody::new(frames)))
}

/// How sending an include's body ended.
enum Forwarded {
    Sent,
    Failed(String),
    ClientLeft,
}

type Sender = mpsc::Sender<Result<Bytes, BoxError>>;

impl Assembly {
    async fn run(&self, page: EsiBody, body: ProxyBody, out: &Sender) -> Result<(), Aborted> {
        let (instructions, stored) = match page {
            EsiBody::Stored(object) => match &object.esi {
                Some(instructions) => (instructions.clone(), object.body.clone()),
                None => {
                    let _ = forward(body, out).await;
                    return Ok(());
                }
            },
            EsiBody::Streaming { url } => {
                let limit = usize::try_from(self.max_body).unwrap_or(usize::MAX);
                let whole = http_body_util::Limited::new(body, limit)
                    .collect()
                    .await
                    .map_err(Aborted::Page)?
                    .to_bytes();
                match parse_logged(&whole, &url) {
                    Some(instructions) => (Arc::new(instructions), StoredBody::from(whole)),
                    None => {
                        let _ = out.send(Ok(whole)).await;
                        return Ok(());
                    }
                }
            }
        };
        self.steps(&instructions, &stored, out).await
    }

    async fn steps(
        &self,
        instructions: &EsiInstructions,
        stored: &StoredBody,
        out: &Sender,
    ) -> Result<(), Aborted> {
        for step in &instructions.0 {
            let include = match step {
                EsiStep::Include(include) => include,
                EsiStep::Verbatim(range) => {
                    // Stored bytes cannot fail: only the client can stop them.
                    if !matches!(
                        forward(stored.range_body(range.clone()).0, out).await,
                        Forwarded::Sent
                    ) {
                        return Ok(());
                    }
                    continue;
                }
            };
            match self.include(include, out).await {
                Forwarded::Sent => {}
                Forwarded::ClientLeft => return Ok(()),
                Forwarded::Failed(why) => {
                    self.stats.esi_failures.fetch_add(1, Relaxed);
                    if !include.continue_on_error {
                        return Err(Aborted::Include {
                            url: include.url.clone(),
                            why,
                        });
                    }
                    tracing::debug!(url = &*include.url, "ESI include failed ({why}): left out");
                }
            }
        }
        Ok(())
    }

    /// Fetches one include and sends its body.
    async fn include(&self, include: &EsiInclude, out: &Sender) -> Forwarded {
        let page = &self.level;
        if page.level >= self.max_depth {
            let why = format!(
                "the ESI depth limit is reached (--max-esi-depth {})",
                self.max_depth
            );
            return Forwarded::Failed(why);
        }
        let host = include.host.as_deref().or_else(|| host(&self.request));
        let key = page_key(host.unwrap_or(""), &include.url);
        if page.pages.contains(&key) {
            return Forwarded::Failed("it includes a page above it (an include cycle)".to_string());
        }
        let Some(request) = self.request_for(include) else {
            return Forwarded::Failed("its src is not a valid request target".to_string());
        };
        let mut pages = page.pages.to_vec();
        pages.push(key);
        let level = EsiLevel {
            level: page.level + 1,
            top: page.top.clone(),
            pages: pages.into(),
        };
        self.stats.esi_includes.fetch_add(1, Relaxed);
        let response = self.includes.include(request, level).await;
        let status = response.status();
        if status != StatusCode::OK && status != StatusCode::NO_CONTENT {
            return Forwarded::Failed(format!("it answered {status}"));
        }
        forward(response.into_body(), out).await
    }

    /// An include's request, as Varnish makes it: the page's request with the include's URL
    /// and `Host` (an h2 page's `:authority`, or the include's own), an HTTP/1.1 GET without
    /// conditionals, ranges, body framing or `Accept-Encoding`: the page is assembled from
    /// identity bodies, and a fragment stored gzip is decoded for a request that does not take
    /// gzip, as for any client.
    fn request_for(&self, include: &EsiInclude) -> Option<Parts> {
        let mut request = self.request.clone();
        let host = include.host.as_deref().or_else(|| host(&self.request));
        let host = host.map(HeaderValue::from_str).transpose().ok()?;
        request.method = Method::GET;
        request.version = http::Version::HTTP_11;
        request.uri = include.url.parse().ok()?;
        let headers = &mut request.headers;
        if let Some(host) = host {
            headers.insert(header::HOST, host);
        }
        for name in [
            header::IF_MODIFIED_SINCE,
            header::IF_NONE_MATCH,
            header::RANGE,
            header::ACCEPT_ENCODING,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
        ] {
            headers.remove(name);
        }
        Some(request)
    }
}

/// Sends `body`'s data to the client.
async fn forward(mut body: ProxyBody, out: &Sender) -> Forwarded {
    loop {
        let data = match body.frame().await {
            None => return Forwarded::Sent,
            Some(Err(error)) => return Forwarded::Failed(format!("its body broke: {error}")),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers of a fragment have no place in the page.
                Err(_) => continue,
            },
        };
        if data.is_empty() {
            continue;
        }
        if out.send(Ok(data)).await.is_err() {
            return Forwarded::ClientLeft;
        }
    }
}
