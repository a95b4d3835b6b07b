//! Stream control, outbound calls, and calls the host does not support yet:
//! `proxy_send_local_response`, `proxy_continue_stream`, `proxy_close_stream`, `proxy_done`,
//! `proxy_set_effective_context`, `proxy_http_call`, gRPC calls, foreign functions,
//! `proxy_get_status`, metrics.
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
use super::{once, read, status, write_u32, write_u64, Dispatch, HostState};
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
    linker.func_wrap(
        "env",
        "proxy_grpc_send",
        |c: Caller<'_, HostState>, _t: i32, _p: i32, _l: i32, _e: i32| {
            log_grpc(&c);
            status::NOT_FOUND
        },
    )?;
    linker.func_wrap("env", "proxy_grpc_cancel", |c: Caller<'_, HostState>, _t: i32| {
        log_grpc(&c);
        status::NOT_FOUND
    })?;
    linker.func_wrap("env", "proxy_grpc_close", |c: Caller<'_, HostState>, _t: i32| {
        log_grpc(&c);
        status::NOT_FOUND
    })?;
    linker.func_wrap("env", "proxy_get_status", get_status)?;
    linker.func_wrap("env", "proxy_call_foreign_function", foreign_function)?;
    linker.func_wrap("env", "proxy_define_metric", define_metric)?;
    linker.func_wrap("env", "proxy_get_metric", get_metric)?;
    linker.func_wrap("env", "proxy_record_metric", record_metric)?;
    linker.func_wrap("env", "proxy_increment_metric", increment_metric)?;
    Ok(())
}

/// Records the local response; the phase then ends with `Verdict::LocalResponse` whatever
/// the callback returns. A later call in the same callback replaces an earlier one.
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
    _grpc_status: i32,
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
        call,
        timeout,
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

fn log_grpc(caller: &Caller<'_, HostState>) {
    caller.data().meta.log_once(
        once::GRPC,
        "gRPC calls are not supported (returned BAD_ARGUMENT / NOT_FOUND)",
    );
}

#[allow(clippy::too_many_arguments)]
fn grpc_call(
    caller: Caller<'_, HostState>,
    _a: i32,
    _b: i32,
    _c: i32,
    _d: i32,
    _e: i32,
    _f: i32,
    _g: i32,
    _h: i32,
    _i: i32,
    _j: i32,
    _timeout: i32,
    _token: i32,
) -> i32 {
    log_grpc(&caller);
    status::BAD_ARGUMENT
}

#[allow(clippy::too_many_arguments)]
fn grpc_stream(
    caller: Caller<'_, HostState>,
    _a: i32,
    _b: i32,
    _c: i32,
    _d: i32,
    _e: i32,
    _f: i32,
    _g: i32,
    _h: i32,
    _token: i32,
) -> i32 {
    log_grpc(&caller);
    status::BAD_ARGUMENT
}

fn get_status(mut caller: Caller<'_, HostState>, code_ptr: i32, msg_ptr: i32, msg_len: i32) -> i32 {
    if write_u32(&mut caller, code_ptr, 0)
        && write_u32(&mut caller, msg_ptr, 0)
        && write_u32(&mut caller, msg_len, 0)
    {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

fn foreign_function(
    caller: Caller<'_, HostState>,
    _np: i32,
    _nl: i32,
    _ap: i32,
    _al: i32,
    _rp: i32,
    _rl: i32,
) -> i32 {
    caller.data().meta.log_once(
        once::FOREIGN,
        "foreign functions are not supported (returned NOT_FOUND)",
    );
    status::NOT_FOUND
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
