//! Stream control, outbound calls, and calls the host does not support yet:
//! `proxy_send_local_response`, `proxy_continue_stream`, `proxy_close_stream`, `proxy_done`,
//! `proxy_set_effective_context`, `proxy_http_call`, gRPC calls and streams (to `.upstreams`
//! clusters, delivered by the caller after the callback), `proxy_get_status`, foreign
//! functions, metrics.
//!
//! A local response or a `proxy_continue_stream` applies to the effective context: during a
//! stream's own callback that is the stream; in `proxy_on_http_call_response` or `proxy_on_tick`
//! the plugin makes the paused stream effective first (the SDKs do it for call responses).

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use parking_lot::Mutex;
use wasmtime::{Caller, Linker};

use super::headers::deserialize;
use super::{
    hand_over, once, read, status, write_u32, write_u64, Dispatch, DispatchKind, GrpcOpen, HostState,
};
use crate::plugin::grpc;
use crate::plugin::upstream::GrpcRequest;
use crate::plugin::view::LocalResponse;

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_send_local_response", send_local_response)?;
    linker.func_wrap("env", "proxy_continue_stream", continue_stream)?;
    linker.func_wrap(
        "env",
        "proxy_close_stream",
        |caller: Caller<'_, HostState>, _stream: i32| {
            caller
                .data()
                .meta
                .log_once(once::CLOSE_STREAM, "proxy_close_stream is a no-op in edgecache");
            status::OK
        },
    )?;
    // Deprecated 0.1.0 names that some SDK builds still import.
    linker.func_wrap(
        "env",
        "proxy_continue_request",
        |caller: Caller<'_, HostState>| continue_stream(caller, 0),
    )?;
    linker.func_wrap(
        "env",
        "proxy_continue_response",
        |caller: Caller<'_, HostState>| continue_stream(caller, 1),
    )?;
    linker.func_wrap("env", "proxy_clear_route_cache", |_: Caller<'_, HostState>| {
        status::OK
    })?;
    linker.func_wrap("env", "proxy_done", |_: Caller<'_, HostState>| status::OK)?;
    linker.func_wrap("env", "proxy_set_effective_context", set_effective_context)?;
    linker.func_wrap("env", "proxy_http_call", http_call)?;
    linker.func_wrap("env", "proxy_grpc_call", grpc_call)?;
    linker.func_wrap("env", "proxy_grpc_stream", grpc_stream)?;
    linker.func_wrap("env", "proxy_grpc_send", grpc_send)?;
    linker.func_wrap("env", "proxy_grpc_cancel", grpc_cancel)?;
    linker.func_wrap("env", "proxy_grpc_close", grpc_close)?;
    linker.func_wrap("env", "proxy_get_status", get_status)?;
    linker.func_wrap("env", "proxy_call_foreign_function", foreign_function)?;
    linker.func_wrap("env", "proxy_define_metric", define_metric)?;
    linker.func_wrap("env", "proxy_get_metric", get_metric)?;
    linker.func_wrap("env", "proxy_record_metric", record_metric)?;
    linker.func_wrap("env", "proxy_increment_metric", increment_metric)?;
    Ok(())
}

/// Records the local response; the phase then ends with `Verdict::LocalResponse` whatever
/// the callback returns. A later call in the same callback replaces an earlier one. A
/// `grpc_status` (not -1) answering a gRPC request adds `grpc-status` and `grpc-message`.
#[allow(clippy::too_many_arguments)]
fn send_local_response(
    mut caller: Caller<'_, HostState>,
    status_code: i32,
    details_ptr: i32,
    details_len: i32,
    body_ptr: i32,
    body_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    grpc_status: i32,
) -> i32 {
    let (Some(details), Some(body), Some(raw_headers)) = (
        read(&mut caller, details_ptr, details_len),
        read(&mut caller, body_ptr, body_len),
        read(&mut caller, headers_ptr, headers_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let Ok(code) = u16::try_from(status_code)
        .map_err(drop)
        .and_then(|c| StatusCode::from_u16(c).map_err(drop))
    else {
        return status::BAD_ARGUMENT;
    };
    let Some(pairs) = deserialize(&raw_headers) else {
        return status::BAD_ARGUMENT;
    };
    let mut headers = HeaderMap::with_capacity(pairs.len());
    let mut bad = false;
    for (k, v) in pairs {
        match (HeaderName::from_bytes(k), HeaderValue::from_bytes(v)) {
            (Ok(k), Ok(v)) => {
                headers.append(k, v);
            }
            _ => bad = true,
        }
    }
    let state = caller.data_mut();
    let grpc_request = state.req.as_ref().is_some_and(|req| {
        req.headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"application/grpc"))
    });
    if grpc_status >= 0 && grpc_request {
        // As Envoy answers a gRPC client: the status (and the details as its message) in a
        // trailers-only response.
        headers.insert("grpc-status", HeaderValue::from(grpc_status));
        if let Ok(message) = HeaderValue::from_bytes(&details) {
            if !message.is_empty() {
                headers.insert("grpc-message", message);
            }
        }
        headers
            .entry(http::header::CONTENT_TYPE)
            .or_insert(HeaderValue::from_static("application/grpc"));
    }
    if bad {
        state.meta.log_once(
            once::BAD_HEADER,
            "ignored an invalid header in a local response; further ones are not logged",
        );
    }
    let local = LocalResponse {
        status: code,
        headers,
        body: Bytes::from(body),
        details: String::from_utf8_lossy(&details).into_owned(),
    };
    state.local_response = Some((state.effective_context, local));
    status::OK
}

/// Resumes the effective context's paused stream once the callback returns (request or
/// response: one phase is paused at a time).
fn continue_stream(mut caller: Caller<'_, HostState>, _stream: i32) -> i32 {
    let state = caller.data_mut();
    let ctx = state.effective_context;
    state.continued.push(ctx);
    status::OK
}

fn set_effective_context(mut caller: Caller<'_, HostState>, ctx: i32) -> i32 {
    let state = caller.data_mut();
    state.effective_context = ctx as u32;
    state.switch_views(ctx as u32);
    status::OK
}

/// Starts an outbound call to a cluster of the plugin's `.upstreams`; the caller runs it after
/// the callback and delivers the answer with `proxy_on_http_call_response`. As Envoy:
/// `BAD_ARGUMENT` for an unknown cluster, a negative timeout, or headers without `:method`,
/// `:path` or `:authority`.
#[allow(clippy::too_many_arguments)]
fn http_call(
    mut caller: Caller<'_, HostState>,
    upstream_ptr: i32,
    upstream_len: i32,
    headers_ptr: i32,
    headers_len: i32,
    body_ptr: i32,
    body_len: i32,
    trailers_ptr: i32,
    trailers_len: i32,
    timeout_ms: i32,
    ret_token: i32,
) -> i32 {
    let (Some(upstream), Some(raw_headers), Some(body), Some(_trailers)) = (
        read(&mut caller, upstream_ptr, upstream_len),
        read(&mut caller, headers_ptr, headers_len),
        read(&mut caller, body_ptr, body_len),
        read(&mut caller, trailers_ptr, trailers_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let meta = caller.data().meta.clone();
    let Ok(timeout) = u64::try_from(timeout_ms).map(Duration::from_millis) else {
        return status::BAD_ARGUMENT;
    };
    let Some(request) = deserialize(&raw_headers).and_then(|pairs| call_request(&pairs, body)) else {
        meta.log_once(
            once::HTTP_CALL,
            "proxy_http_call without a valid :method, :path and :authority (returned BAD_ARGUMENT)",
        );
        return status::BAD_ARGUMENT;
    };
    let cluster = String::from_utf8_lossy(&upstream);
    let Some(call) = meta.upstreams.0.call(&cluster, request) else {
        meta.log_once(
            once::UNKNOWN_UPSTREAM,
            &format!(
                "proxy_http_call to `{cluster}`, which is not in the plugin's `.upstreams` \
                 (returned BAD_ARGUMENT; further ones are not logged)"
            ),
        );
        return status::BAD_ARGUMENT;
    };
    let state = caller.data_mut();
    state.last_token = state.last_token.wrapping_add(1).max(1);
    let token = state.last_token;
    let ctx = state.effective_context;
    state.dispatched.push(Dispatch {
        ctx,
        token,
        kind: DispatchKind::Http { call, timeout },
    });
    if write_u32(&mut caller, ret_token, token) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

/// The request of an outbound call, from the plugin's pairs: `:method`, `:path` and
/// `:authority` (which becomes `host`) are required; other pseudo-headers are dropped.
fn call_request(pairs: &[(&[u8], &[u8])], body: Vec<u8>) -> Option<http::Request<Bytes>> {
    let pseudo = |name: &[u8]| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let method = Method::from_bytes(pseudo(b":method")?).ok()?;
    let path = http::uri::PathAndQuery::try_from(pseudo(b":path")?).ok()?;
    let authority = HeaderValue::from_bytes(pseudo(b":authority")?).ok()?;
    let mut request = http::Request::builder()
        .method(method)
        .uri(http::Uri::from(path))
        .body(Bytes::from(body))
        .ok()?;
    let headers = request.headers_mut();
    headers.insert(http::header::HOST, authority);
    for (name, value) in pairs.iter().filter(|(k, _)| !k.starts_with(b":")) {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }
    Some(request)
}

/// Opens a gRPC call (`stream` false: one message, a deadline) or stream to the cluster
/// `service` names in `.upstreams`, after the callback; returns its token. `PARSE_FAILURE` for
/// a cluster not there (the Rust SDK panics on `BAD_ARGUMENT` here).
#[allow(clippy::too_many_arguments)]
fn open_grpc(
    caller: &mut Caller<'_, HostState>,
    (service_ptr, service_len): (i32, i32),
    (name_ptr, name_len): (i32, i32),
    (method_ptr, method_len): (i32, i32),
    (metadata_ptr, metadata_len): (i32, i32),
    message: Option<(i32, i32)>,
    timeout_ms: i32,
    ret_token: i32,
) -> i32 {
    let (Some(cluster), Some(service), Some(method), Some(raw_metadata)) = (
        read(caller, service_ptr, service_len),
        read(caller, name_ptr, name_len),
        read(caller, method_ptr, method_len),
        read(caller, metadata_ptr, metadata_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let first = match message {
        Some((ptr, len)) => match read(caller, ptr, len) {
            Some(bytes) => Some(Bytes::from(bytes)),
            None => return status::INVALID_MEMORY_ACCESS,
        },
        None => None,
    };
    let Some(pairs) = (if raw_metadata.is_empty() {
        Some(Vec::new())
    } else {
        deserialize(&raw_metadata)
    }) else {
        return status::SERIALIZATION_FAILURE;
    };
    let (outgoing, messages) = tokio::sync::mpsc::unbounded_channel();
    let unary = first.is_some();
    if let Some(first) = first {
        let _ = outgoing.send(first);
    }
    let (events_tx, events) = tokio::sync::mpsc::unbounded_channel();
    let request = GrpcRequest {
        service: String::from_utf8_lossy(&service).into_owned(),
        method: String::from_utf8_lossy(&method).into_owned(),
        metadata: grpc::metadata(&pairs),
        messages,
        timeout: u64::try_from(timeout_ms)
            .ok()
            .filter(|ms| unary && *ms > 0)
            .map(Duration::from_millis),
    };
    let meta = caller.data().meta.clone();
    let cluster = String::from_utf8_lossy(&cluster);
    let Some(task) = meta.upstreams.0.grpc(&cluster, request, events_tx) else {
        meta.log_once(
            once::UNKNOWN_GRPC_UPSTREAM,
            &format!(
                "gRPC call to `{cluster}`, which is not in the plugin's `.upstreams` \
                 (returned PARSE_FAILURE; further ones are not logged)"
            ),
        );
        return status::PARSE_FAILURE;
    };
    let state = caller.data_mut();
    state.last_token = state.last_token.wrapping_add(1).max(1);
    let token = state.last_token;
    let ctx = state.effective_context;
    state.grpc.insert(
        token,
        GrpcOpen {
            ctx,
            unary,
            outgoing: (!unary).then_some(outgoing),
            reply: None,
        },
    );
    state.dispatched.push(Dispatch {
        ctx,
        token,
        kind: DispatchKind::Grpc { task, events },
    });
    if write_u32(caller, ret_token, token) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

#[allow(clippy::too_many_arguments)]
fn grpc_call(
    mut caller: Caller<'_, HostState>,
    service_ptr: i32,
    service_len: i32,
    name_ptr: i32,
    name_len: i32,
    method_ptr: i32,
    method_len: i32,
    metadata_ptr: i32,
    metadata_len: i32,
    message_ptr: i32,
    message_len: i32,
    timeout_ms: i32,
    ret_token: i32,
) -> i32 {
    open_grpc(
        &mut caller,
        (service_ptr, service_len),
        (name_ptr, name_len),
        (method_ptr, method_len),
        (metadata_ptr, metadata_len),
        Some((message_ptr, message_len)),
        timeout_ms,
        ret_token,
    )
}

#[allow(clippy::too_many_arguments)]
fn grpc_stream(
    mut caller: Caller<'_, HostState>,
    service_ptr: i32,
    service_len: i32,
    name_ptr: i32,
    name_len: i32,
    method_ptr: i32,
    method_len: i32,
    metadata_ptr: i32,
    metadata_len: i32,
    ret_token: i32,
) -> i32 {
    open_grpc(
        &mut caller,
        (service_ptr, service_len),
        (name_ptr, name_len),
        (method_ptr, method_len),
        (metadata_ptr, metadata_len),
        None,
        0,
        ret_token,
    )
}

/// Sends a message on a stream; `end_stream` ends its request side.
fn grpc_send(mut caller: Caller<'_, HostState>, token: i32, ptr: i32, len: i32, end_stream: i32) -> i32 {
    let Some(message) = read(&mut caller, ptr, len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let Some(open) = caller.data_mut().grpc.get_mut(&(token as u32)) else {
        return status::NOT_FOUND;
    };
    let Some(outgoing) = &open.outgoing else {
        return status::BAD_ARGUMENT;
    };
    let _ = outgoing.send(Bytes::from(message));
    if end_stream != 0 {
        open.outgoing = None;
    }
    status::OK
}

/// Forgets a call or stream: nothing more is delivered and the exchange stops.
fn grpc_cancel(mut caller: Caller<'_, HostState>, token: i32) -> i32 {
    match caller.data_mut().grpc.remove(&(token as u32)) {
        Some(_) => status::OK,
        None => status::NOT_FOUND,
    }
}

/// Ends a stream's request side (the answer and `proxy_on_grpc_close` still come); a call is
/// cancelled, as on Envoy.
fn grpc_close(mut caller: Caller<'_, HostState>, token: i32) -> i32 {
    let grpc = &mut caller.data_mut().grpc;
    match grpc.get_mut(&(token as u32)) {
        None => return status::NOT_FOUND,
        Some(open) if !open.unary => open.outgoing = None,
        Some(_) => {
            grpc.remove(&(token as u32));
        }
    }
    status::OK
}

/// The status of the last gRPC close (or answer) delivered: code and message.
fn get_status(
    mut caller: Caller<'_, HostState>,
    code_ptr: i32,
    msg_ptr: i32,
    msg_len: i32,
) -> wasmtime::Result<i32> {
    let (code, message) = caller.data().grpc_status.clone();
    if !write_u32(&mut caller, code_ptr, code) {
        return Ok(status::INVALID_MEMORY_ACCESS);
    }
    hand_over(&mut caller, message.as_bytes(), msg_ptr, msg_len)
}

/// The largest output `uncompress` produces (a zlib bomb fails the call instead).
const MAX_UNCOMPRESSED: u64 = 16 << 20;

/// Envoy's foreign functions that make sense here: `compress` and `uncompress` (zlib, as
/// Envoy's). Others: `NOT_FOUND`, logged once.
fn foreign_function(
    mut caller: Caller<'_, HostState>,
    name_ptr: i32,
    name_len: i32,
    args_ptr: i32,
    args_len: i32,
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    use std::io::{Read, Write};
    let (Some(name), Some(args)) = (
        read(&mut caller, name_ptr, name_len),
        read(&mut caller, args_ptr, args_len),
    ) else {
        return Ok(status::INVALID_MEMORY_ACCESS);
    };
    let result = match name.as_slice() {
        b"compress" => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&args).and_then(|()| encoder.finish()).ok()
        }
        b"uncompress" => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(args.as_slice())
                .take(MAX_UNCOMPRESSED + 1)
                .read_to_end(&mut out)
                .ok()
                .filter(|_| out.len() as u64 <= MAX_UNCOMPRESSED)
                .map(|_| out)
        }
        _ => {
            caller.data().meta.log_once(
                once::FOREIGN,
                &format!(
                    "foreign function `{}` is not offered (returned NOT_FOUND; edgecache offers compress and uncompress)",
                    String::from_utf8_lossy(&name)
                ),
            );
            return Ok(status::NOT_FOUND);
        }
    };
    match result {
        Some(bytes) => hand_over(&mut caller, &bytes, ret_ptr, ret_len),
        // Envoy answers a failed (un)compression with SERIALIZATION_FAILURE.
        None => Ok(status::SERIALIZATION_FAILURE),
    }
}

// === metrics: kept per plugin (all its instances), exported on /metrics ===

/// One plugin-defined metric. Kinds as the ABI numbers them: 0 counter, 1 gauge, 2 histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginMetric {
    pub name: String,
    pub kind: i32,
    /// A counter's or gauge's value; a histogram's last recorded value.
    pub value: i64,
    /// A histogram's number of recorded values.
    pub count: u64,
    /// A histogram's sum of recorded values.
    pub sum: i64,
}

pub(crate) type Metric = PluginMetric;

pub(crate) type Metrics = Mutex<Vec<Metric>>;

const MAX_METRICS: usize = 1024;

fn define_metric(
    mut caller: Caller<'_, HostState>,
    kind: i32,
    name_ptr: i32,
    name_len: i32,
    ret_id: i32,
) -> i32 {
    let Some(name) = read(&mut caller, name_ptr, name_len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let name = String::from_utf8_lossy(&name).into_owned();
    let id = {
        let mut metrics = caller.data().meta.metrics.lock();
        match metrics.iter().position(|m| m.name == name) {
            Some(i) => i,
            None if metrics.len() < MAX_METRICS => {
                metrics.push(Metric {
                    name,
                    kind,
                    value: 0,
                    count: 0,
                    sum: 0,
                });
                metrics.len() - 1
            }
            // The SDK accepts only OK: share the last slot rather than fail.
            None => metrics.len() - 1,
        }
    };
    if write_u32(&mut caller, ret_id, id as u32 + 1) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

fn with_metric(caller: &Caller<'_, HostState>, id: i32, f: impl FnOnce(&mut Metric)) -> i32 {
    let mut metrics = caller.data().meta.metrics.lock();
    match (id as u32 as usize)
        .checked_sub(1)
        .and_then(|i| metrics.get_mut(i))
    {
        Some(m) => {
            f(m);
            status::OK
        }
        None => status::NOT_FOUND,
    }
}

fn get_metric(mut caller: Caller<'_, HostState>, id: i32, ret_ptr: i32) -> i32 {
    let mut value = 0;
    let st = with_metric(&caller, id, |m| value = m.value);
    if st != status::OK {
        return st;
    }
    if write_u64(&mut caller, ret_ptr, value as u64) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

fn record_metric(caller: Caller<'_, HostState>, id: i32, value: i64) -> i32 {
    with_metric(&caller, id, |m| {
        m.value = value;
        if m.kind == 2 {
            m.count += 1;
            m.sum = m.sum.saturating_add(value);
        }
    })
}

fn increment_metric(caller: Caller<'_, HostState>, id: i32, offset: i64) -> i32 {
    with_metric(&caller, id, |m| m.value = m.value.saturating_add(offset))
}
