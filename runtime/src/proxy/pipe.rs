//! Pipes, as Varnish's pipe mode: the request goes to the origin on a connection of its own
//! ([`Backend::pipe`]), and what follows is the origin's business. A WebSocket handshake
//! (RFC 6455: `Upgrade` over HTTP/1.1) that the origin accepts with `101` turns both
//! connections into a tunnel, bytes copied both ways until one side closes or neither sends
//! for `--pipe-timeout`. A piped request without `Upgrade` (`return (pipe)` for a custom
//! method) gets the origin's answer relayed, and its client connection closes after it: hyper
//! hands a server connection over only after a `101`, so that answer goes through its framing
//! rather than as raw bytes. Nothing piped is ever cached; pipes are capped by `--max-pipes`.
//!
//! A WebSocket over HTTP/2 (RFC 8441's extended CONNECT, `:protocol = websocket`) is presented
//! to the policy and the origin as the HTTP/1.1 handshake it stands for
//! ([`h2_websocket_as_upgrade`]); the origin's `101` becomes the `200` that opens the stream's
//! tunnel.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::upgrade::OnUpgrade;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{headers, synth, Shared};
use crate::backend::{Backend, OutgoingBody, Piped};
use crate::cache::body::ProxyBody;
use crate::cache::state::CacheState;
use crate::telemetry::Stats;

/// Bytes read from one side before they are written to the other.
const COPY_BUFFER: usize = 16 * 1024;

/// An HTTP/2 extended CONNECT for a WebSocket (RFC 8441 §4) rewritten into the HTTP/1.1
/// handshake (RFC 6455 §4.1) an origin understands: `GET` with `Upgrade: websocket`,
/// `Connection: upgrade` and a fresh `Sec-WebSocket-Key` (HTTP/2 clients send none; the
/// origin's `Sec-WebSocket-Accept` answers it and is not relayed). The version stays HTTP/2,
/// which tells [`pipe`] to answer `200`.
pub(super) fn h2_websocket_as_upgrade(request: &mut Parts) {
    let websocket = request.method == http::Method::CONNECT
        && request
            .extensions
            .get::<hyper::ext::Protocol>()
            .is_some_and(|protocol| protocol.as_str().eq_ignore_ascii_case("websocket"));
    if !websocket {
        return;
    }
    request.method = http::Method::GET;
    let headers = &mut request.headers;
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    let mut nonce = [0u8; 16];
    // RFC 6455 wants the key random; an origin only hashes it into its answer.
    let _ = getrandom::fill(&mut nonce);
    let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, nonce);
    if let Ok(key) = HeaderValue::from_str(&key) {
        headers.insert(header::SEC_WEBSOCKET_KEY, key);
    }
}

/// Whether the request is a WebSocket handshake (`Upgrade: websocket`, any case), which the
/// builtin behaviour pipes.
pub(super) fn is_websocket_upgrade(request: &Parts) -> bool {
    request
        .headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|protocol| protocol.trim().to_ascii_lowercase().starts_with("websocket"))
}

/// Sends `bereq` to `backend` on a connection of its own and answers the client: the origin's
/// `101` followed by a tunnel when the client asked to upgrade (`client_upgrade`), else the
/// origin's response, after which the client's connection closes.
pub(super) async fn pipe(
    shared: &Arc<Shared>,
    backend: &Backend,
    bereq: Parts,
    client_upgrade: Option<OnUpgrade>,
    body: OutgoingBody,
) -> (Response<ProxyBody>, CacheState) {
    let Ok(permit) = shared.pipes.clone().try_acquire_owned() else {
        shared.stats.pipes_refused.fetch_add(1, Ordering::Relaxed);
        let detail = format!("max_pipes ({}) pipes are open", shared.max_pipes);
        tracing::warn!("pipe refused: {detail}");
        return (
            synth::plain(StatusCode::SERVICE_UNAVAILABLE, &detail),
            CacheState::Synth,
        );
    };
    let version = bereq.version;
    let xid = super::client_side::ClientSide::xid_of(&bereq.extensions);
    let piped = match backend.pipe(Request::from_parts(bereq, body)).await {
        Ok(piped) => piped,
        Err(error) => {
            tracing::warn!(backend = %error.backend, address = %error.address, "pipe: {error}");
            return (
                synth::backend_failure(&error, xid, shared.show_backend_errors),
                CacheState::Synth,
            );
        }
    };
    let response = match (piped.status(), client_upgrade) {
        (StatusCode::SWITCHING_PROTOCOLS, Some(client)) => tunnel_after_101(
            piped,
            client,
            version == http::Version::HTTP_2,
            shared.pipe_timeout,
            shared.stats.clone(),
            permit,
        ),
        (StatusCode::SWITCHING_PROTOCOLS, None) => {
            let detail = format!(
                "backend {} switched protocols for a request that did not ask to upgrade",
                backend.name()
            );
            tracing::warn!("{detail}");
            return (synth::plain(StatusCode::BAD_GATEWAY, &detail), CacheState::Synth);
        }
        (_, _) => {
            drop(permit);
            relay_and_close(piped, version)
        }
    };
    (response, CacheState::Pipe)
}

/// The origin's `101` for the client (a `200` opening the stream for an HTTP/2 client, without
/// the connection's fields), and a task that copies bytes both ways once hyper has handed over
/// the client's connection.
fn tunnel_after_101(
    piped: Piped,
    client: OnUpgrade,
    h2_client: bool,
    idle: Duration,
    stats: Arc<Stats>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response<ProxyBody> {
    let (mut head, origin) = piped.into_upgrade();
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.remove(header::TRANSFER_ENCODING);
    if h2_client {
        head.status = StatusCode::OK;
        headers::strip_hop_by_hop(&mut head.headers);
        head.headers.remove(header::SEC_WEBSOCKET_ACCEPT);
    }
    tokio::spawn(async move {
        let _permit = permit;
        let client = match client.await {
            Ok(client) => hyper_util::rt::TokioIo::new(client),
            Err(error) => {
                tracing::debug!(%error, "pipe not opened: the client's upgrade did not complete");
                return;
            }
        };
        let ended = copy_both_ways(client, origin.io, idle, &stats).await;
        tracing::debug!(bytes = ended.bytes, "pipe closed: {}", ended.why);
    });
    Response::from_parts(head, ProxyBody::empty())
}

/// A piped answer that is not a `101`, relayed as the origin framed it; the client connection
/// is not used for another request afterwards.
fn relay_and_close(piped: Piped, version: http::Version) -> Response<ProxyBody> {
    let (mut head, body) = piped.into_response().into_parts();
    headers::strip_hop_by_hop(&mut head.headers);
    headers::append_via(&mut head.headers, head.version);
    // HTTP/2 has no `Connection`: a stream ends with its response anyway.
    if version < http::Version::HTTP_2 {
        head.headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Response::from_parts(head, ProxyBody::stream(body))
}

/// How a tunnel ended.
struct Ended {
    bytes: u64,
    why: &'static str,
}

/// Copies bytes between `client` and `origin` until both have closed their sending side, or
/// neither sent anything for `idle` (Varnish's `pipe_timeout`). A side that closes has its
/// close passed on (a write shutdown) while the other may still send. Every copied byte is
/// counted in `pipe_bytes` as it goes, so `/metrics` sees long-lived tunnels.
async fn copy_both_ways<C, O>(client: C, origin: O, idle: Duration, stats: &Stats) -> Ended
where
    C: AsyncRead + AsyncWrite + Unpin,
    O: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_in, mut client_out) = tokio::io::split(client);
    let (mut origin_in, mut origin_out) = tokio::io::split(origin);
    let mut from_client = vec![0; COPY_BUFFER];
    let mut from_origin = vec![0; COPY_BUFFER];
    let (mut client_open, mut origin_open) = (true, true);
    let mut bytes = 0u64;
    let why = loop {
        if !client_open && !origin_open {
            break "both sides closed";
        }
        // Each pass waits afresh: the timeout counts silence since the last byte either way.
        let copied = tokio::select! {
            read = client_in.read(&mut from_client), if client_open => {
                forward(read, &from_client, &mut origin_out, &mut client_open, idle).await
            }
            read = origin_in.read(&mut from_origin), if origin_open => {
                forward(read, &from_origin, &mut client_out, &mut origin_open, idle).await
            }
            _ = tokio::time::sleep(idle) => break "idle past pipe_timeout",
        };
        match copied {
            Ok(n) => {
                bytes += n as u64;
                stats.pipe_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(why) => break why,
        }
    };
    Ended { bytes, why }
}

/// Writes what one side sent to the other; on its end of stream, shuts the other's sending
/// side down. Returns the bytes written, or why the tunnel must close.
async fn forward<W: AsyncWrite + Unpin>(
    read: std::io::Result<usize>,
    buffer: &[u8],
    to: &mut W,
    open: &mut bool,
    idle: Duration,
) -> Result<usize, &'static str> {
    match read {
        Ok(0) => {
            *open = false;
            let _ = to.shutdown().await;
            Ok(0)
        }
        Ok(n) => match tokio::time::timeout(idle, to.write_all(&buffer[..n])).await {
            Ok(Ok(())) => Ok(n),
            Ok(Err(_)) => Err("a side stopped reading (write failed)"),
            Err(_) => Err("a side read nothing for pipe_timeout"),
        },
        Err(_) => Err("a side failed (read error)"),
    }
}
