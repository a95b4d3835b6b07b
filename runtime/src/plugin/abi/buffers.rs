//! Buffers: `proxy_get_buffer_bytes`, `proxy_set_buffer_bytes`, `proxy_get_buffer_status`.
//!
//! Plugin configuration (7) and VM configuration (6) are available in every callback, an
//! outbound call's response body (4) in `proxy_on_http_call_response`, a gRPC message (5) in
//! `proxy_on_grpc_receive`, the request body (0)
//! in `proxy_on_request_body` and the response body (1) in `proxy_on_response_body`: the
//! bytes buffered so far, which the plugin may rewrite. A body outside its callback, and other
//! buffers, are `NOT_FOUND` (the SDKs map it to None).

use wasmtime::{Caller, Linker};

use super::{hand_over, read, status, write_u32, HostState};

const REQUEST_BODY: i32 = 0;
const RESPONSE_BODY: i32 = 1;
const HTTP_CALL_RESPONSE_BODY: i32 = 4;
const GRPC_CALL_MESSAGE: i32 = 5;
const VM_CONFIGURATION: i32 = 6;
const PLUGIN_CONFIGURATION: i32 = 7;

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_buffer_bytes", get_bytes)?;
    linker.func_wrap("env", "proxy_set_buffer_bytes", set_bytes)?;
    linker.func_wrap("env", "proxy_get_buffer_status", get_status)?;
    Ok(())
}

fn get_bytes(
    mut caller: Caller<'_, HostState>,
    buffer: i32,
    start: i32,
    max: i32,
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    let meta = caller.data().meta.clone();
    let call_body;
    let data = match buffer {
        VM_CONFIGURATION => &meta.vm_config,
        PLUGIN_CONFIGURATION => &meta.config,
        HTTP_CALL_RESPONSE_BODY => match &caller.data().call_response {
            Some(answer) => {
                call_body = answer.body.clone();
                &call_body
            }
            None => return Ok(status::NOT_FOUND),
        },
        GRPC_CALL_MESSAGE => match &caller.data().grpc_message {
            Some(message) => {
                call_body = message.clone();
                &call_body
            }
            None => return Ok(status::NOT_FOUND),
        },
        REQUEST_BODY | RESPONSE_BODY => match &caller.data().body {
            Some(body) if body.kind as i32 == buffer => {
                call_body = bytes::Bytes::copy_from_slice(&body.bytes);
                &call_body
            }
            _ => return Ok(status::NOT_FOUND),
        },
        _ => return Ok(status::NOT_FOUND),
    };
    let start = (start as u32 as usize).min(data.len());
    let end = start.saturating_add(max as u32 as usize).min(data.len());
    hand_over(&mut caller, &data[start..end], ret_ptr, ret_len)
}

/// Replaces `start..start + size` of the body with the plugin's bytes, as the spec says:
/// `(0, 0)` prepends, a `start` at or past the end appends.
fn set_bytes(
    mut caller: Caller<'_, HostState>,
    buffer: i32,
    start: i32,
    size: i32,
    ptr: i32,
    len: i32,
) -> i32 {
    if buffer != REQUEST_BODY && buffer != RESPONSE_BODY {
        return status::NOT_FOUND;
    }
    let Some(value) = read(&mut caller, ptr, len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    match &mut caller.data_mut().body {
        Some(body) if body.kind as i32 == buffer => {
            let length = body.bytes.len();
            let start = (start as u32 as usize).min(length);
            let end = start.saturating_add(size as u32 as usize).min(length);
            body.bytes.splice(start..end, value);
            status::OK
        }
        _ => status::NOT_FOUND,
    }
}

fn get_status(mut caller: Caller<'_, HostState>, buffer: i32, len_ptr: i32, flags_ptr: i32) -> i32 {
    let len = match buffer {
        VM_CONFIGURATION => caller.data().meta.vm_config.len(),
        PLUGIN_CONFIGURATION => caller.data().meta.config.len(),
        HTTP_CALL_RESPONSE_BODY => match &caller.data().call_response {
            Some(answer) => answer.body.len(),
            None => return status::NOT_FOUND,
        },
        GRPC_CALL_MESSAGE => match &caller.data().grpc_message {
            Some(message) => message.len(),
            None => return status::NOT_FOUND,
        },
        REQUEST_BODY | RESPONSE_BODY => match &caller.data().body {
            Some(body) if body.kind as i32 == buffer => body.bytes.len(),
            _ => return status::NOT_FOUND,
        },
        _ => return status::NOT_FOUND,
    };
    if write_u32(&mut caller, len_ptr, len as u32) && write_u32(&mut caller, flags_ptr, 0) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}
