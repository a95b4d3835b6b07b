//! Properties: `proxy_get_property` / `proxy_set_property`.
//!
//! A path arrives as NUL-separated segments (`request\0path`); it is matched joined with
//! dots. Strings are raw bytes, integers 8-byte little-endian, header maps in the pairs
//! format, as Envoy serializes them. Unknown paths give `NOT_FOUND`. Values stored with
//! `proxy_set_property` live in the instance and shadow the built-in ones.
//!
//! | path | value |
//! |---|---|
//! | `plugin_name`, `plugin_root_id`, `plugin_vm_id` | from the plugin declaration |
//! | `request.path` | path and query (`:path`) |
//! | `request.url_path`, `request.query` | path without query; query without `?` |
//! | `request.host`, `request.scheme`, `request.method` | `:authority`, `:scheme`, `:method` |
//! | `request.protocol` | `HTTP/1.0`, `HTTP/1.1`, `HTTP/2`, ... |
//! | `request.headers` | all request headers (pairs, pseudo-headers included) |
//! | `request.id`, `request.useragent`, `request.referer` | `x-request-id`, `user-agent`, `referer` |
//! | `source.address`, `source.port` | client `ip:port`; port as integer |
//! | `response.code` | integer; `response.headers` pairs (response phase) |

use http::header::{REFERER, USER_AGENT};
use http::Version;
use wasmtime::{Caller, Linker};

use super::headers::{serialize_request, serialize_response};
use super::{hand_over, read, status, HostState};

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_property", get)?;
    linker.func_wrap("env", "proxy_set_property", set)?;
    Ok(())
}

/// `request\0path\0` → `request.path`.
fn path_of(raw: &[u8]) -> String {
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(".")
}

fn int(v: i64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

/// The value of a built-in property, or None.
pub(crate) fn lookup(state: &HostState, path: &str) -> Option<Vec<u8>> {
    if let Some(v) = state.properties.get(path) {
        return Some(v.clone());
    }
    let meta = &state.meta;
    match path {
        "plugin_name" => return Some(meta.name.as_bytes().to_vec()),
        "plugin_root_id" => return Some(meta.root_id.as_bytes().to_vec()),
        "plugin_vm_id" => return Some(meta.vm_id.as_bytes().to_vec()),
        _ => {}
    }
    if let Some(field) = path.strip_prefix("request.") {
        let req = state.req.as_ref()?;
        let header = |name| {
            req.headers
                .get(name)
                .map(|v: &http::HeaderValue| v.as_bytes().to_vec())
        };
        return match field {
            "path" => Some(
                req.uri
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .as_bytes()
                    .to_vec(),
            ),
            "url_path" => Some(req.uri.path().as_bytes().to_vec()),
            "query" => Some(req.uri.query().unwrap_or("").as_bytes().to_vec()),
            "host" => req.authority().map(<[u8]>::to_vec),
            "scheme" => Some(req.scheme.as_str().as_bytes().to_vec()),
            "method" => Some(req.method.as_str().as_bytes().to_vec()),
            "protocol" => Some(protocol(req.version).as_bytes().to_vec()),
            "headers" => Some(serialize_request(req)),
            "id" => header("x-request-id"),
            "useragent" => header(USER_AGENT.as_str()),
            "referer" => header(REFERER.as_str()),
            _ => None,
        };
    }
    if let Some(field) = path.strip_prefix("source.") {
        let addr = state.req.as_ref()?.client_addr?;
        return match field {
            "address" => Some(addr.to_string().into_bytes()),
            "port" => Some(int(i64::from(addr.port()))),
            _ => None,
        };
    }
    if let Some(field) = path.strip_prefix("response.") {
        let resp = state.resp.as_ref()?;
        return match field {
            "code" => Some(int(i64::from(resp.status.as_u16()))),
            "headers" => Some(serialize_response(resp)),
            _ => None,
        };
    }
    None
}

fn get(
    mut caller: Caller<'_, HostState>,
    path_ptr: i32,
    path_len: i32,
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    let Some(raw) = read(&mut caller, path_ptr, path_len) else {
        return Ok(status::INVALID_MEMORY_ACCESS);
    };
    let path = path_of(&raw);
    match lookup(caller.data(), &path) {
        Some(v) => hand_over(&mut caller, &v, ret_ptr, ret_len),
        None => Ok(status::NOT_FOUND),
    }
}

/// Always OK (the Rust SDK panics otherwise); stored per instance.
fn set(mut caller: Caller<'_, HostState>, path_ptr: i32, path_len: i32, v_ptr: i32, v_len: i32) -> i32 {
    let (Some(raw), Some(value)) = (
        read(&mut caller, path_ptr, path_len),
        read(&mut caller, v_ptr, v_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let path = path_of(&raw);
    let props = &mut caller.data_mut().properties;
    if props.len() < 1024 || props.contains_key(&path) {
        props.insert(path, value);
    }
    status::OK
}
