//! The proxy-wasm 0.2.1 host functions (module `env`) and the WASI preview1 shims, over one
//! [`HostState`] per store.
//!
//! Rules every host function follows (see `docs/plugins.md` and the ABI research note):
//! - guest pointers are bounds-checked; a bad pointer gives `INVALID_MEMORY_ACCESS`, never a
//!   host panic;
//! - bytes are handed to the guest through its allocator, never for an empty result (the
//!   host writes `(0, 0)` instead);
//! - stubs return a status the Rust SDK accepts (it panics on anything unexpected) and log
//!   once per plugin.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;

use wasmtime::{Caller, Engine, Extern, Linker, Memory, Store, TypedFunc};

use super::sandbox::MemoryLimiter;
use super::upstream::{GrpcEvent, UpstreamCall, UpstreamSet, UpstreamTask};
use super::view::{LocalResponse, RequestView, ResponseView};

mod buffers;
pub(crate) mod headers;
mod http;
mod log;
mod properties;
mod shared_data;
mod time;
mod wasi;

pub(crate) use self::http::Metrics;
pub use self::http::PluginMetric;

/// The errno WASI stubs return.
pub(crate) fn wasi_enosys() -> i32 {
    wasi::ENOSYS_STUB
}

/// `proxy_status_t`.
pub(crate) mod status {
    pub const OK: i32 = 0;
    pub const NOT_FOUND: i32 = 1;
    pub const BAD_ARGUMENT: i32 = 2;
    pub const SERIALIZATION_FAILURE: i32 = 3;
    pub const PARSE_FAILURE: i32 = 4;
    pub const INVALID_MEMORY_ACCESS: i32 = 6;
    pub const EMPTY: i32 = 7;
    pub const CAS_MISMATCH: i32 = 8;
    pub const INTERNAL_FAILURE: i32 = 10;
}

/// What host functions know about the plugin (shared by all its instances).
pub(crate) struct PluginMeta {
    pub(crate) name: Arc<str>,
    pub(crate) root_id: String,
    pub(crate) vm_id: String,
    pub(crate) config: Bytes,
    pub(crate) vm_config: Bytes,
    pub(crate) metrics: Metrics,
    /// The clusters `proxy_http_call` may name.
    pub(crate) upstreams: UpstreamSet,
    /// Delivers `proxy_on_queue_ready` to this plugin's instances (shared instances only: set
    /// once the plugin is loaded).
    pub(crate) queue_listener: std::sync::OnceLock<QueueListener>,
    logged: AtomicU64,
}

/// Called with a queue id when an item is enqueued on a queue the plugin registered; it must
/// not run guest code itself (the enqueuing instance is busy in its callback).
pub(crate) type QueueListener = Arc<dyn Fn(u32) + Send + Sync>;

impl PluginMeta {
    pub(crate) fn new(
        name: &str,
        root_id: &str,
        vm_id: &str,
        (config, vm_config): (Bytes, Bytes),
        upstreams: UpstreamSet,
    ) -> Self {
        PluginMeta {
            name: Arc::from(name),
            root_id: root_id.to_string(),
            vm_id: vm_id.to_string(),
            config,
            vm_config,
            metrics: Default::default(),
            upstreams,
            queue_listener: std::sync::OnceLock::new(),
            logged: AtomicU64::new(0),
        }
    }

    /// Logs `msg` at warn level the first time `bit` is seen for this plugin.
    pub(crate) fn log_once(&self, bit: u64, msg: &str) {
        if self.logged.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            tracing::warn!(target: "edgecache::plugin", plugin = &*self.name, "{msg}");
        }
    }
}

/// Everything host functions can reach: one per store (= per instance).
pub(crate) struct HostState {
    pub(crate) meta: Arc<PluginMeta>,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) memory: Option<Memory>,
    pub(crate) alloc: Option<TypedFunc<i32, i32>>,
    /// The context host calls act on; set before every callback.
    pub(crate) effective_context: u32,
    /// The request of the current callback, moved in for its duration.
    pub(crate) req: Option<RequestView>,
    /// The response of the current callback, moved in for its duration.
    pub(crate) resp: Option<ResponseView>,
    /// The context whose views are in `req` and `resp` (0: none).
    views_of: u32,
    /// The views of other contexts: paused streams', and the callback's own while the plugin
    /// made another context effective.
    parked: ContextMap<Views>,
    /// Paused streams, each with the sender that resumes it.
    pub(crate) paused: ContextMap<oneshot::Sender<Resumption>>,
    /// Contexts the plugin continued (`proxy_continue_stream`) during the current callback.
    pub(crate) continued: Vec<u32>,
    /// Set by `proxy_send_local_response` during the current callback, with the context it
    /// answers.
    pub(crate) local_response: Option<(u32, LocalResponse)>,
    /// Outbound calls started during the current callback, for the caller to run.
    pub(crate) dispatched: Vec<Dispatch>,
    /// The last token handed out by `proxy_http_call`.
    pub(crate) last_token: u32,
    /// The answer of an outbound call, during `proxy_on_http_call_response`.
    pub(crate) call_response: Option<CallResponse>,
    /// The body buffered so far, during `proxy_on_request_body` / `proxy_on_response_body`.
    pub(crate) body: Option<BodyBuffer>,
    /// Set by `proxy_set_tick_period_milliseconds`.
    pub(crate) tick_period: Option<Duration>,
    /// The last ERROR/CRITICAL line the plugin logged during the current callback (the Rust
    /// SDK logs its panic message this way before it aborts); quoted in trap errors.
    pub(crate) last_error_log: Option<String>,
    /// Values stored by `proxy_set_property`.
    pub(crate) properties: HashMap<String, Vec<u8>>,
    /// stdout and stderr, logged by line.
    pub(crate) stdio: wasi::Stdio,
    /// The header names the plugin wrote last (see [`headers::NameCache`]).
    pub(crate) header_names: headers::NameCache,
    /// gRPC calls and streams in flight, by token.
    pub(crate) grpc: ContextMap<GrpcOpen>,
    /// During `proxy_on_grpc_receive`: the message (buffer 5).
    pub(crate) grpc_message: Option<Bytes>,
    /// During `proxy_on_grpc_receive_{initial,trailing}_metadata`: the map type (4 or 5) and
    /// the metadata (read-only).
    pub(crate) grpc_metadata: Option<(i32, ResponseView)>,
    /// The last gRPC status delivered (`proxy_get_status`): code and message.
    pub(crate) grpc_status: (u32, String),
}

/// A gRPC call or stream a plugin opened and has not seen closed.
pub(crate) struct GrpcOpen {
    /// The context that opened it (the effective one at the time).
    pub(crate) ctx: u32,
    /// A call (`proxy_grpc_call`): its answer is delivered whole at the end, as Envoy does.
    pub(crate) unary: bool,
    /// A stream's request side, until the plugin ends it.
    pub(crate) outgoing: Option<tokio::sync::mpsc::UnboundedSender<Bytes>>,
    /// A call's answer, once it arrived.
    pub(crate) reply: Option<Bytes>,
}

impl HostState {
    pub(crate) fn new(meta: Arc<PluginMeta>, memory_limit: usize) -> Self {
        HostState {
            meta,
            limiter: MemoryLimiter::new(memory_limit),
            memory: None,
            alloc: None,
            effective_context: 0,
            req: None,
            resp: None,
            views_of: 0,
            parked: ContextMap::default(),
            paused: ContextMap::default(),
            continued: Vec::new(),
            local_response: None,
            dispatched: Vec::new(),
            last_token: 0,
            call_response: None,
            body: None,
            tick_period: None,
            last_error_log: None,
            properties: HashMap::new(),
            stdio: Default::default(),
            header_names: Default::default(),
            grpc: ContextMap::default(),
            grpc_message: None,
            grpc_metadata: None,
            grpc_status: (0, String::new()),
        }
    }
}

impl HostState {
    /// Makes `ctx`'s views the ones host calls see (`req`, `resp`), parking the current ones.
    pub(crate) fn switch_views(&mut self, ctx: u32) {
        if ctx == self.views_of {
            return;
        }
        if self.views_of != 0 && (self.req.is_some() || self.resp.is_some()) {
            let current = Views {
                req: self.req.take(),
                resp: self.resp.take(),
            };
            self.parked.insert(self.views_of, current);
        }
        let next = self.parked.remove(&ctx).unwrap_or_default();
        (self.req, self.resp, self.views_of) = (next.req, next.resp, ctx);
    }

    /// Starts a callback of `ctx` with these views.
    pub(crate) fn lend_views(&mut self, ctx: u32, req: Option<RequestView>, resp: Option<ResponseView>) {
        self.switch_views(0);
        (self.req, self.resp, self.views_of) = (req, resp, ctx);
    }

    /// Ends a callback of `ctx`: its views (wherever the plugin left the effective context).
    pub(crate) fn take_views(&mut self, ctx: u32) -> Views {
        self.switch_views(ctx);
        let views = Views {
            req: self.req.take(),
            resp: self.resp.take(),
        };
        self.views_of = 0;
        views
    }

    /// Keeps `ctx`'s views while its stream is paused.
    pub(crate) fn park(&mut self, ctx: u32, views: Views) {
        self.parked.insert(ctx, views);
    }

    /// After a callback: resumes the paused streams it continued or answered, handing each its
    /// views back.
    pub(crate) fn settle(&mut self) {
        self.switch_views(0);
        let mut local = self.local_response.take();
        let mut done = std::mem::take(&mut self.continued);
        if let Some((ctx, _)) = &local {
            done.push(*ctx);
        }
        for ctx in done {
            let Some(resume) = self.paused.remove(&ctx) else {
                continue;
            };
            let views = self.parked.remove(&ctx).unwrap_or_default();
            let local = local
                .take_if(|(answered, _)| *answered == ctx)
                .map(|(_, response)| response);
            // The stream may have given up waiting (pause timeout, client gone): nothing to do.
            let _ = resume.send(Resumption { views, local });
        }
    }

    /// Forgets a finished context: its views, its pause and its gRPC exchanges (which stop).
    pub(crate) fn forget(&mut self, ctx: u32) {
        self.parked.remove(&ctx);
        self.paused.remove(&ctx);
        self.grpc.retain(|_, open| open.ctx != ctx);
    }
}

/// A map by context id (or call token): a request touches several of them, and the standard
/// hasher (SipHash) cost a plugin-running hit more than its lookups. Ids are the host's own
/// counters, not anything a client chooses, so a fast hash is safe here.
pub(crate) type ContextMap<V> = rustc_hash::FxHashMap<u32, V>;

/// The request and response one HTTP context works on.
#[derive(Default)]
pub(crate) struct Views {
    pub(crate) req: Option<RequestView>,
    pub(crate) resp: Option<ResponseView>,
}

/// How a paused stream's pause ended: its views as the plugin left them, and a local response
/// if the plugin answered.
pub(crate) struct Resumption {
    pub(crate) views: Views,
    pub(crate) local: Option<LocalResponse>,
}

/// An outbound call started during a callback: the caller runs it once the callback is over
/// and delivers the answer (`proxy_on_http_call_response`, the gRPC callbacks).
pub(crate) struct Dispatch {
    /// The context that made the call (the effective one at the time).
    pub(crate) ctx: u32,
    pub(crate) token: u32,
    pub(crate) kind: DispatchKind,
}

pub(crate) enum DispatchKind {
    Http {
        call: UpstreamCall,
        timeout: Duration,
    },
    /// The exchange's task, and what it reports, for delivery in order.
    Grpc {
        task: UpstreamTask,
        events: tokio::sync::mpsc::UnboundedReceiver<GrpcEvent>,
    },
}

/// An outbound call's answer as the plugin reads it: headers (map 6, `:status` included),
/// body (buffer 4). A failed call has no headers and no body, as on Envoy.
pub(crate) struct CallResponse {
    pub(crate) head: Option<ResponseView>,
    pub(crate) body: bytes::Bytes,
}

/// Which body a body callback sees (the buffer types of the ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Request = 0,
    Response = 1,
}

/// The body of the current body callback; the plugin reads and rewrites it in place.
pub(crate) struct BodyBuffer {
    pub(crate) kind: BodyKind,
    pub(crate) bytes: Vec<u8>,
}

/// A host function was called in a way the ABI does not allow; the callback fails with
/// [`Cause::Abi`](super::Cause::Abi).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct AbiViolation(pub(crate) String);

/// The guest called `proc_exit`.
#[derive(Debug, thiserror::Error)]
#[error("proc_exit({0})")]
pub(crate) struct ProcExit(pub(crate) i32);

/// `(module, name)` pairs of defined imports.
pub(crate) type ImportNames = HashSet<(String, String)>;

/// The base linker for one engine, and the imports it defines.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<(Linker<HostState>, ImportNames)> {
    let mut linker = Linker::new(engine);
    log::define(&mut linker)?;
    headers::define(&mut linker)?;
    buffers::define(&mut linker)?;
    properties::define(&mut linker)?;
    shared_data::define(&mut linker)?;
    time::define(&mut linker)?;
    http::define(&mut linker)?;
    wasi::define(&mut linker, "wasi_snapshot_preview1")?;
    wasi::define(&mut linker, "wasi_unstable")?;

    let defined = linker_names(&linker, engine);
    Ok((linker, defined))
}

fn linker_names(linker: &Linker<HostState>, engine: &Engine) -> ImportNames {
    // `Linker::iter` needs a store of the linker's data type; a throwaway one is fine.
    let meta = Arc::new(PluginMeta::new(
        "",
        "",
        "",
        Default::default(),
        UpstreamSet::none(),
    ));
    let mut store = Store::new(engine, HostState::new(meta, 0));
    linker
        .iter(&mut store)
        .map(|(m, n, _)| (m.to_string(), n.to_string()))
        .collect()
}

/// Whether an import we do not define is a WASI preview1 function, stubbed to return `ENOSYS`
/// (see `engine::link`): toolchains import more of WASI than plugins call.
pub(crate) fn is_wasi(module: &str) -> bool {
    matches!(module, "wasi_snapshot_preview1" | "wasi_unstable")
}

// === guest memory helpers ===

pub(crate) fn memory(caller: &mut Caller<'_, HostState>) -> Option<Memory> {
    if let Some(m) = caller.data().memory {
        return Some(m);
    }
    let m = caller.get_export("memory").and_then(Extern::into_memory)?;
    caller.data_mut().memory = Some(m);
    Some(m)
}

/// `ptr..ptr+len` of guest memory, if in bounds.
pub(crate) fn range(data: &[u8], ptr: i32, len: i32) -> Option<&[u8]> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as u32 as usize)?;
    data.get(start..end)
}

/// A copy of guest bytes.
pub(crate) fn read(caller: &mut Caller<'_, HostState>, ptr: i32, len: i32) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let mem = memory(caller)?;
    range(mem.data(&*caller), ptr, len).map(<[u8]>::to_vec)
}

pub(crate) fn write(caller: &mut Caller<'_, HostState>, ptr: i32, bytes: &[u8]) -> bool {
    let Some(mem) = memory(caller) else {
        return false;
    };
    let start = ptr as u32 as usize;
    match start
        .checked_add(bytes.len())
        .and_then(|end| mem.data_mut(&mut *caller).get_mut(start..end))
    {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

pub(crate) fn write_u32(caller: &mut Caller<'_, HostState>, ptr: i32, v: u32) -> bool {
    write(caller, ptr, &v.to_le_bytes())
}

pub(crate) fn write_u64(caller: &mut Caller<'_, HostState>, ptr: i32, v: u64) -> bool {
    write(caller, ptr, &v.to_le_bytes())
}

/// Hands `bytes` to the guest: allocates with its allocator, copies, writes `(ptr, len)` to
/// the two return pointers. An empty result writes `(0, 0)` and allocates nothing.
pub(crate) fn hand_over(
    caller: &mut Caller<'_, HostState>,
    bytes: &[u8],
    ret_ptr: i32,
    ret_len: i32,
) -> wasmtime::Result<i32> {
    if bytes.is_empty() {
        if write_u32(caller, ret_ptr, 0) && write_u32(caller, ret_len, 0) {
            return Ok(status::OK);
        }
        return Ok(status::INVALID_MEMORY_ACCESS);
    }
    let Ok(len) = i32::try_from(bytes.len()) else {
        return Ok(status::INTERNAL_FAILURE);
    };
    let alloc = match caller.data().alloc.clone() {
        Some(a) => a,
        None => {
            let found = caller
                .get_export("proxy_on_memory_allocate")
                .or_else(|| caller.get_export("malloc"))
                .and_then(Extern::into_func)
                .and_then(|f| f.typed::<i32, i32>(&*caller).ok());
            match found {
                Some(a) => {
                    caller.data_mut().alloc = Some(a.clone());
                    a
                }
                None => {
                    return Err(AbiViolation("the plugin exports no allocator".into()).into());
                }
            }
        }
    };
    let ptr = alloc.call(&mut *caller, len)?;
    if ptr == 0 {
        return Ok(status::INTERNAL_FAILURE);
    }
    if !write(caller, ptr, bytes) {
        return Err(AbiViolation("the plugin allocator returned an out-of-bounds buffer".into()).into());
    }
    if write_u32(caller, ret_ptr, ptr as u32) && write_u32(caller, ret_len, len as u32) {
        Ok(status::OK)
    } else {
        Ok(status::INVALID_MEMORY_ACCESS)
    }
}

/// Bits for [`PluginMeta::log_once`].
pub(crate) mod once {
    pub const HTTP_CALL: u64 = 1 << 1;
    pub const FOREIGN: u64 = 1 << 4;
    pub const PAUSE: u64 = 1 << 5;
    pub const BAD_HEADER: u64 = 1 << 6;
    pub const NO_MAP: u64 = 1 << 7;
    pub const CLOSE_STREAM: u64 = 1 << 9;
    pub const UNKNOWN_UPSTREAM: u64 = 1 << 10;
    pub const UNKNOWN_GRPC_UPSTREAM: u64 = 1 << 11;
}
