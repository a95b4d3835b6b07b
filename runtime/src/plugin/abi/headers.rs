//! Header maps: `proxy_{get,set}_header_map_pairs`, `proxy_get_header_map_value`,
//! `proxy_{add,replace,remove}_header_map_value`, `proxy_get_header_map_size`.
//!
//! Map types: request headers (0) and response headers (2) are the views of the current
//! callback; trailers (1, 3) are always empty and writes to them are accepted and dropped;
//! an outbound call's answer (6, its trailers 7: empty) is readable in
//! `proxy_on_http_call_response`; gRPC metadata (4, 5, read-only) in the gRPC metadata callbacks.
//!
//! Pseudo-headers come first in the pairs: `:authority`, `:path`, `:method`, `:scheme` for
//! requests (the `host` header is shown as `:authority` only), `:status` for responses.
//! Writes to them change the request line / status. A header with several values appears
//! once per value in the pairs; `get` joins the values with `", "`.

use std::borrow::Cow;

use http::header::{Entry, HeaderName, HeaderValue, HOST};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, Method, StatusCode, Uri};
use wasmtime::{Caller, Linker};

use super::{hand_over, memory, once, range, read, status, write_u32, HostState};
use crate::plugin::view::{RequestView, ResponseView, Undo};

const REQUEST_HEADERS: i32 = 0;
const REQUEST_TRAILERS: i32 = 1;
const RESPONSE_HEADERS: i32 = 2;
const RESPONSE_TRAILERS: i32 = 3;
const GRPC_INITIAL_METADATA: i32 = 4;
const GRPC_TRAILING_METADATA: i32 = 5;
const HTTP_CALL_RESPONSE_HEADERS: i32 = 6;
const HTTP_CALL_RESPONSE_TRAILERS: i32 = 7;

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_header_map_pairs", get_pairs)?;
    linker.func_wrap("env", "proxy_set_header_map_pairs", set_pairs)?;
    linker.func_wrap("env", "proxy_get_header_map_value", get_value)?;
    linker.func_wrap("env", "proxy_add_header_map_value", add_value)?;
    linker.func_wrap("env", "proxy_replace_header_map_value", replace_value)?;
    linker.func_wrap("env", "proxy_remove_header_map_value", remove_value)?;
    linker.func_wrap("env", "proxy_get_header_map_size", get_size)?;
    Ok(())
}

// === serialization ===

/// Serializes pairs: `[count][klen vlen]* (key NUL value NUL)*`, u32 little-endian.
pub(crate) fn serialize<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone) -> Vec<u8> {
    let (count, size) = pairs.clone().fold((0usize, 4usize), |(n, s), (k, v)| {
        (n + 1, s + 8 + k.len() + v.len() + 2)
    });
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for (k, v) in pairs.clone() {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in pairs {
        out.extend_from_slice(k);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// Parses serialized pairs. An empty buffer or a single NUL byte is an empty map.
pub(crate) fn deserialize(buf: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    if buf.is_empty() || buf == [0] {
        return Some(Vec::new());
    }
    let u32_at = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let count = u32_at(0)?;
    let mut sizes = Vec::with_capacity(count.min(1024));
    let mut at = 4usize;
    for _ in 0..count {
        sizes.push((u32_at(at)?, u32_at(at + 4)?));
        at = at.checked_add(8)?;
    }
    let mut pairs = Vec::with_capacity(sizes.len());
    for (kl, vl) in sizes {
        let k = buf.get(at..at.checked_add(kl)?)?;
        at += kl + 1;
        let v = buf.get(at..at.checked_add(vl)?)?;
        at += vl + 1;
        pairs.push((k, v));
    }
    (at <= buf.len()).then_some(pairs)
}

// === request / response maps ===

/// Values handed to the guest are valid UTF-8: invalid bytes become U+FFFD. The Rust SDK's
/// string getters `unwrap()` a UTF-8 conversion, so one odd client header would otherwise
/// crash the plugin (and count as a plugin failure for that request).
fn utf8(v: &[u8]) -> Cow<'_, [u8]> {
    match String::from_utf8_lossy(v) {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

fn request_pairs(req: &RequestView) -> Vec<(&[u8], Cow<'_, [u8]>)> {
    let mut pairs = Vec::with_capacity(req.headers.len() + 4);
    if let Some(a) = req.authority() {
        pairs.push((&b":authority"[..], utf8(a)));
    }
    let path = req.uri.path_and_query().map_or("/", PathAndQuery::as_str);
    pairs.push((&b":path"[..], Cow::Borrowed(path.as_bytes())));
    pairs.push((&b":method"[..], Cow::Borrowed(req.method.as_str().as_bytes())));
    pairs.push((&b":scheme"[..], Cow::Borrowed(req.scheme.as_str().as_bytes())));
    for (k, v) in &req.headers {
        if k != HOST {
            pairs.push((k.as_str().as_bytes(), utf8(v.as_bytes())));
        }
    }
    pairs
}

/// The number of pairs `proxy_on_request_headers` is told about.
pub(crate) fn request_count(req: &RequestView) -> i32 {
    let host = req.headers.get_all(HOST).iter().count();
    let authority = usize::from(req.authority().is_some());
    (req.headers.len() - host + authority + 3) as i32
}

fn response_pairs(resp: &ResponseView) -> Vec<(&[u8], Cow<'_, [u8]>)> {
    let mut pairs = Vec::with_capacity(resp.headers.len() + 1);
    pairs.push((&b":status"[..], Cow::Borrowed(resp.status.as_str().as_bytes())));
    for (k, v) in &resp.headers {
        pairs.push((k.as_str().as_bytes(), utf8(v.as_bytes())));
    }
    pairs
}

pub(crate) fn response_count(resp: &ResponseView) -> i32 {
    (resp.headers.len() + 1) as i32
}

pub(crate) fn serialize_request(req: &RequestView) -> Vec<u8> {
    let pairs = request_pairs(req);
    serialize(pairs.iter().map(|(k, v)| (*k, &**v)))
}

pub(crate) fn serialize_response(resp: &ResponseView) -> Vec<u8> {
    let pairs = response_pairs(resp);
    serialize(pairs.iter().map(|(k, v)| (*k, &**v)))
}

fn joined(headers: &HeaderMap, name: &[u8]) -> Option<Vec<u8>> {
    // Looked up by `&str`: parsed on the stack, where a `HeaderName` would copy a custom name.
    let name = std::str::from_utf8(name).ok()?;
    let mut values = headers.get_all(name).iter();
    let mut out = utf8(values.next()?.as_bytes()).into_owned();
    for v in values {
        out.extend_from_slice(b", ");
        out.extend_from_slice(&utf8(v.as_bytes()));
    }
    Some(out)
}

fn request_get(req: &RequestView, name: &[u8]) -> Option<Vec<u8>> {
    match name {
        b":authority" => req.authority().map(|a| utf8(a).into_owned()),
        b":path" => Some(
            req.uri
                .path_and_query()
                .map_or("/", PathAndQuery::as_str)
                .as_bytes()
                .to_vec(),
        ),
        b":method" => Some(req.method.as_str().as_bytes().to_vec()),
        b":scheme" => Some(req.scheme.as_str().as_bytes().to_vec()),
        _ if name.starts_with(b":") => None,
        _ => joined(&req.headers, name),
    }
}

fn response_get(resp: &ResponseView, name: &[u8]) -> Option<Vec<u8>> {
    match name {
        b":status" => Some(resp.status.as_str().as_bytes().to_vec()),
        _ if name.starts_with(b":") => None,
        _ => joined(&resp.headers, name),
    }
}

/// Why a write was refused (logged once per plugin; the call still returns OK because the
/// Rust SDK panics on any other status).
type WriteResult = Result<(), &'static str>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Replace,
}

fn header(
    names: &mut NameCache,
    name: &[u8],
    value: &[u8],
) -> Result<(HeaderName, HeaderValue), &'static str> {
    let name = names.name(name).ok_or("invalid header name")?;
    let value = HeaderValue::from_bytes(value).map_err(|_| "invalid header value")?;
    Ok((name, value))
}

/// The header names a plugin instance wrote last: a plugin writes the same few names on every
/// request, and parsing one (a copy of a custom name included) cost more than the write.
#[derive(Default)]
pub(crate) struct NameCache(Vec<HeaderName>);

impl NameCache {
    const KEPT: usize = 8;

    /// `lowercase` as a header name (`None`: not a valid one).
    fn name(&mut self, lowercase: &[u8]) -> Option<HeaderName> {
        if let Some(known) = self.0.iter().find(|known| known.as_str().as_bytes() == lowercase) {
            return Some(known.clone());
        }
        let name = HeaderName::from_bytes(lowercase).ok()?;
        if self.0.len() == Self::KEPT {
            self.0.remove(0);
        }
        self.0.push(name.clone());
        Some(name)
    }
}

fn set_uri_parts(uri: &Uri, f: impl FnOnce(&mut http::uri::Parts)) -> Result<Uri, &'static str> {
    let mut parts = uri.clone().into_parts();
    f(&mut parts);
    Uri::from_parts(parts).map_err(|_| "invalid URI")
}

fn request_write(
    req: &mut RequestView,
    names: &mut NameCache,
    name: &[u8],
    value: &[u8],
    op: Op,
) -> WriteResult {
    match name {
        b":path" => {
            let pq = PathAndQuery::try_from(value).map_err(|_| "invalid :path")?;
            let uri = set_uri_parts(&req.uri, |p| p.path_and_query = Some(pq))?;
            req.undo.uri(&req.uri);
            req.uri = uri;
        }
        b":method" => {
            let method = Method::from_bytes(value).map_err(|_| "invalid :method")?;
            req.undo.method(&req.method);
            req.method = method;
        }
        b":scheme" => {
            let s = std::str::from_utf8(value).map_err(|_| "invalid :scheme")?;
            req.scheme = s.parse::<Scheme>().map_err(|_| "invalid :scheme")?;
        }
        b":authority" => {
            let auth = Authority::try_from(value).map_err(|_| "invalid :authority")?;
            let host = HeaderValue::from_bytes(value).map_err(|_| "invalid :authority")?;
            if req.uri.authority().is_some() {
                let uri = set_uri_parts(&req.uri, |p| p.authority = Some(auth))?;
                req.undo.uri(&req.uri);
                req.uri = uri;
            }
            req.undo.header(&req.headers, &HOST);
            req.headers.insert(HOST, host);
        }
        _ if name.starts_with(b":") => return Err("unknown pseudo-header"),
        _ => {
            let (name, value) = header(names, name, value)?;
            write_line(&mut req.headers, &mut req.undo, name, value, op);
        }
    }
    Ok(())
}

fn response_write(
    resp: &mut ResponseView,
    names: &mut NameCache,
    name: &[u8],
    value: &[u8],
    op: Op,
) -> WriteResult {
    match name {
        b":status" => {
            let code = std::str::from_utf8(value)
                .ok()
                .and_then(|s| s.trim().parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
                .ok_or("invalid :status")?;
            resp.undo.status(resp.status);
            resp.status = code;
        }
        _ if name.starts_with(b":") => return Err("unknown pseudo-header"),
        _ => {
            let (name, value) = header(names, name, value)?;
            write_line(&mut resp.headers, &mut resp.undo, name, value, op);
        }
    }
    Ok(())
}

/// Adds or replaces a line of a regular header, telling `undo` what it replaces (one lookup
/// for both).
fn write_line(headers: &mut HeaderMap, undo: &mut Undo, name: HeaderName, value: HeaderValue, op: Op) {
    match headers.entry(name) {
        Entry::Vacant(absent) => {
            undo.lines(absent.key(), std::iter::empty());
            absent.insert(value);
        }
        Entry::Occupied(mut present) => {
            undo.lines(present.key(), present.iter());
            match op {
                Op::Add => present.append(value),
                Op::Replace => {
                    present.insert(value);
                }
            }
        }
    }
}

fn remove(headers: &mut HeaderMap, undo: &mut Undo, name: &[u8]) {
    if let Ok(name) = HeaderName::from_bytes(name) {
        undo.header(headers, &name);
        headers.remove(name);
    }
}

fn warn_bad_write(state: &HostState, what: &str, name: &[u8]) {
    let name = String::from_utf8_lossy(name);
    state.meta.log_once(
        once::BAD_HEADER,
        &format!("ignored a header write ({what}: {name}); further ones are not logged"),
    );
}

/// Which map a call addresses, given what the current callback has.
enum Target {
    Request,
    Response,
    /// An outbound call's answer (read-only).
    CallResponse,
    /// Trailers, or a headers map that is not available in this callback.
    Empty,
    /// gRPC / http-call maps.
    Unknown,
}

fn target(state: &HostState, map: i32) -> Target {
    match map {
        REQUEST_HEADERS if state.req.is_some() => Target::Request,
        RESPONSE_HEADERS if state.resp.is_some() => Target::Response,
        HTTP_CALL_RESPONSE_HEADERS if state.call_response.as_ref().is_some_and(|c| c.head.is_some()) => {
            Target::CallResponse
        }
        GRPC_INITIAL_METADATA | GRPC_TRAILING_METADATA
            if state.grpc_metadata.as_ref().is_some_and(|(m, _)| *m == map) =>
        {
            Target::CallResponse
        }
        REQUEST_HEADERS | RESPONSE_HEADERS | REQUEST_TRAILERS | RESPONSE_TRAILERS => Target::Empty,
        HTTP_CALL_RESPONSE_HEADERS | HTTP_CALL_RESPONSE_TRAILERS if state.call_response.is_some() => {
            Target::Empty
        }
        _ => Target::Unknown,
    }
}

/// The read-only map of the current callback: an outbound call's answer or gRPC metadata.
fn call_head(state: &HostState) -> &ResponseView {
    state
        .call_response
        .as_ref()
        .and_then(|c| c.head.as_ref())
        .or(state.grpc_metadata.as_ref().map(|(_, view)| view))
        .expect("checked by target")
}

// === host functions ===

fn get_pairs(
    mut caller: Caller<'_, HostState>,
    map: i32,
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    let bytes = {
        let state = caller.data();
        match target(state, map) {
            Target::Request => serialize_request(state.req.as_ref().expect("checked")),
            Target::Response => serialize_response(state.resp.as_ref().expect("checked")),
            Target::CallResponse => serialize_response(call_head(state)),
            Target::Empty => Vec::new(),
            Target::Unknown => return Ok(status::NOT_FOUND),
        }
    };
    hand_over(&mut caller, &bytes, ret_ptr, ret_len)
}

fn set_pairs(mut caller: Caller<'_, HostState>, map: i32, ptr: i32, len: i32) -> i32 {
    let Some(buf) = read(&mut caller, ptr, len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let Some(pairs) = deserialize(&buf) else {
        return status::SERIALIZATION_FAILURE;
    };
    let state = caller.data_mut();
    let mut failed = None;
    match target(state, map) {
        Target::Request => {
            let req = state.req.as_mut().expect("checked");
            req.undo.headers(&mut req.headers);
            for (k, v) in pairs {
                if let Err(e) = request_write(req, &mut state.header_names, k, v, Op::Add) {
                    failed = Some((e, k.to_vec()));
                }
            }
        }
        Target::Response => {
            let resp = state.resp.as_mut().expect("checked");
            resp.undo.headers(&mut resp.headers);
            for (k, v) in pairs {
                if let Err(e) = response_write(resp, &mut state.header_names, k, v, Op::Add) {
                    failed = Some((e, k.to_vec()));
                }
            }
        }
        Target::CallResponse | Target::Empty => {}
        Target::Unknown => return status::NOT_FOUND,
    }
    if let Some((what, name)) = failed {
        warn_bad_write(state, what, &name);
    }
    status::OK
}

fn get_value(
    mut caller: Caller<'_, HostState>,
    map: i32,
    key_ptr: i32,
    key_len: i32,
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    let Some(key) = read(&mut caller, key_ptr, key_len) else {
        return Ok(status::INVALID_MEMORY_ACCESS);
    };
    let value = {
        let state = caller.data();
        match target(state, map) {
            Target::Request => request_get(state.req.as_ref().expect("checked"), &lower(&key)),
            Target::Response => response_get(state.resp.as_ref().expect("checked"), &lower(&key)),
            Target::CallResponse => response_get(call_head(state), &lower(&key)),
            Target::Empty | Target::Unknown => None,
        }
    };
    match value {
        Some(v) if v.is_empty() => {
            // An empty value is a present header: hand over (0, 0), which the SDK reads as "".
            hand_over(&mut caller, &[], ret_ptr, ret_len)
        }
        Some(v) => hand_over(&mut caller, &v, ret_ptr, ret_len),
        None => Ok(status::NOT_FOUND),
    }
}

fn lower(key: &[u8]) -> Cow<'_, [u8]> {
    if key.iter().any(u8::is_ascii_uppercase) {
        Cow::Owned(key.to_ascii_lowercase())
    } else {
        Cow::Borrowed(key)
    }
}

fn write_value(
    mut caller: Caller<'_, HostState>,
    map: i32,
    key: (i32, i32),
    value: (i32, i32),
    op: Op,
) -> i32 {
    let Some(memory) = memory(&mut caller) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    // Borrowed from guest memory alongside the host state: no copies on this hot path.
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let (Some(k), Some(v)) = (range(data, key.0, key.1), range(data, value.0, value.1)) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let k = lower(k);
    let result = match target(state, map) {
        Target::Request => request_write(
            state.req.as_mut().expect("checked"),
            &mut state.header_names,
            &k,
            v,
            op,
        ),
        Target::Response => response_write(
            state.resp.as_mut().expect("checked"),
            &mut state.header_names,
            &k,
            v,
            op,
        ),
        Target::CallResponse => Ok(()),
        Target::Empty => {
            if map == REQUEST_HEADERS || map == RESPONSE_HEADERS {
                state.meta.log_once(
                    once::NO_MAP,
                    "wrote to a header map that does not exist in this callback; ignored",
                );
            }
            Ok(())
        }
        Target::Unknown => return status::NOT_FOUND,
    };
    if let Err(what) = result {
        warn_bad_write(state, what, &k);
    }
    status::OK
}

fn add_value(caller: Caller<'_, HostState>, map: i32, kp: i32, kl: i32, vp: i32, vl: i32) -> i32 {
    write_value(caller, map, (kp, kl), (vp, vl), Op::Add)
}

fn replace_value(caller: Caller<'_, HostState>, map: i32, kp: i32, kl: i32, vp: i32, vl: i32) -> i32 {
    write_value(caller, map, (kp, kl), (vp, vl), Op::Replace)
}

fn remove_value(mut caller: Caller<'_, HostState>, map: i32, kp: i32, kl: i32) -> i32 {
    let Some(k) = read(&mut caller, kp, kl) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let k = lower(&k);
    let state = caller.data_mut();
    match target(state, map) {
        // Pseudo-headers cannot be removed; the call is a no-op for them.
        Target::Request => {
            let req = state.req.as_mut().expect("checked");
            remove(&mut req.headers, &mut req.undo, &k);
        }
        Target::Response => {
            let resp = state.resp.as_mut().expect("checked");
            remove(&mut resp.headers, &mut resp.undo, &k);
        }
        Target::CallResponse | Target::Empty => {}
        Target::Unknown => return status::NOT_FOUND,
    }
    status::OK
}

fn get_size(mut caller: Caller<'_, HostState>, map: i32, ret_ptr: i32) -> i32 {
    let size = {
        let state = caller.data();
        match target(state, map) {
            Target::Request => serialize_request(state.req.as_ref().expect("checked")).len(),
            Target::Response => serialize_response(state.resp.as_ref().expect("checked")).len(),
            Target::CallResponse => serialize_response(call_head(state)).len(),
            Target::Empty => 0,
            Target::Unknown => return status::NOT_FOUND,
        }
    };
    if write_u32(&mut caller, ret_ptr, size as u32) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_cache_answers_known_names_refuses_bad_ones_and_keeps_the_latest() {
        let mut names = NameCache::default();
        assert_eq!(
            names.name(b"x-served-by"),
            Some(HeaderName::from_static("x-served-by"))
        );
        assert_eq!(
            names.name(b"x-served-by"),
            Some(HeaderName::from_static("x-served-by"))
        );
        assert_eq!(names.0.len(), 1, "a name seen again is not kept twice");
        assert_eq!(names.name(b"bad name"), None);
        for i in 0..NameCache::KEPT + 2 {
            assert!(names.name(format!("x-{i}").as_bytes()).is_some());
        }
        assert_eq!(names.0.len(), NameCache::KEPT);
        assert_eq!(names.0.last(), Some(&HeaderName::from_static("x-9")));
        assert!(
            !names.0.contains(&HeaderName::from_static("x-served-by")),
            "the oldest went first"
        );
    }
}
