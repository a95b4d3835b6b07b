//! WebAssembly plugins: a [proxy-wasm] 0.2.1 host on wasmtime.
//!
//! This module owns everything between a plugin file and a request phase: loading and
//! validating `.wasm`/`.wat` files, compiling them once, the instances (long-lived, one per
//! plugin per worker thread, each holding many HTTP contexts; or a fresh one per request),
//! the proxy-wasm host functions, and the sandbox (memory limit, CPU deadline, no
//! filesystem or network). It knows nothing about the proxy or the cache: the proxy hands it
//! owned [`RequestView`]/[`ResponseView`]s and gets back a [`Verdict`] or a [`PluginError`].
//!
//! # How to call it
//!
//! ```no_run
//! use edgecache_runtime::plugin::{PluginHost, PluginSpec, RequestView, ResponseView, Verdict};
//! # fn demo(mut req: RequestView, mut resp: ResponseView) -> Result<(), Box<dyn std::error::Error>> {
//! // Once per process: the engine and its epoch thread.
//! let host = PluginHost::new(Default::default());
//! // At policy load (off the request path): compile, validate, start the first instance.
//! let auth = host.load(&PluginSpec::new("auth", "plugins/auth.wasm").config(r#"{"key":"s3cret"}"#))?;
//!
//! // Per request: one stream per plugin, kept in the request's session across phases.
//! let mut stream = auth.stream();
//! match stream.on_request_headers(&mut req) {           // from vcl_recv
//!     Ok(Verdict::Continue) => { /* req may have changed: re-derive cache key / backend */ }
//!     Ok(Verdict::LocalResponse(local)) => { /* answer with it, like synth */ }
//!     Ok(Verdict::Paused) => { /* await stream.resumed(): the plugin continues or answers */ }
//!     Err(e) => { /* apply the plugin's .on_error; e.plugin, e.cause */ }
//! }
//! // ... fetch or cache lookup (the stream holds no lock across awaits) ...
//! let verdict = stream.on_response_headers(Some(&mut req), &mut resp)?; // vcl_backend_response / vcl_deliver
//! stream.finish(Some(&mut req), Some(&mut resp));        // on_done, on_log, on_delete (also on drop)
//! # let _ = verdict; Ok(()) }
//! ```
//!
//! A [`Plugin`] is cheap to clone and is what a loaded policy keeps; dropping the last clone
//! (and its streams) frees its instances. [`PluginStream`] is `Send`: a request may move
//! between worker threads between phases; each callback locks the instance it started on
//! for the duration of that callback only.
//!
//! # Failures
//!
//! A trap, a deadline, an out-of-memory or an ABI violation discards the instance (the next
//! request on that slot gets a fresh one), bumps the plugin's counter for that cause (see
//! [`Plugin::stats`]) and logs a line naming the plugin and the cause. Header edits the
//! plugin made before it failed stay in the view. Choosing between fail open and fail closed
//! is the caller's job.
//!
//! [proxy-wasm]: https://github.com/proxy-wasm/spec

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

mod abi;
mod engine;
mod error;
mod grpc;
mod instance;
mod sandbox;
mod stream;
mod upstream;
mod view;

#[cfg(test)]
mod tests;

pub use abi::PluginMetric;
pub use error::{Cause, LoadError, LoadErrorKind, PluginError};
pub use grpc::exchange as grpc_exchange;
pub use sandbox::Limits;
pub use upstream::{
    GrpcEvent, GrpcEventSender, GrpcRequest, UpstreamCall, UpstreamSet, UpstreamTask, Upstreams,
};
pub use view::{LocalResponse, RequestView, ResponseView, Undo, Verdict};

pub use stream::PluginStream;

use engine::calls::Binding;
use engine::{HostInner, PluginInner};
use instance::Instance;

/// Host-wide settings.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// Default limits for plugins that do not set their own.
    pub limits: Limits,
    /// How often the epoch thread ticks; the precision of CPU deadlines. Default 1 ms.
    pub epoch_tick: Duration,
    /// Shared instances per plugin (requests pick one by worker thread). Default: the number
    /// of CPUs.
    pub instances_per_plugin: usize,
    /// Pooling allocator (per-request isolation): instances that can exist at once, across
    /// all per-request plugins. Default 256.
    pub pool_slots: u32,
    /// Pooling allocator: the most linear memory a per-request instance can have (per-plugin
    /// limits above this fail as out-of-memory). Default 64 MiB.
    pub pool_max_memory: usize,
    /// How long a stream may stay paused (a callback returned `Pause`) before it fails with
    /// [`Cause::PauseTimeout`]. Default 30 s.
    pub pause_timeout: Duration,
}

impl Default for HostSettings {
    fn default() -> Self {
        HostSettings {
            limits: Limits::default(),
            epoch_tick: Duration::from_millis(1),
            instances_per_plugin: std::thread::available_parallelism().map_or(2, |n| n.get()),
            pool_slots: 256,
            pool_max_memory: 64 << 20,
            pause_timeout: DEFAULT_PAUSE_TIMEOUT,
        }
    }
}

/// [`HostSettings::pause_timeout`]'s default.
pub const DEFAULT_PAUSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether requests share instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Long-lived instances, one per worker thread, each holding many HTTP contexts (what
    /// Envoy does). A request pays no instantiation. Plugins can keep state across requests.
    #[default]
    Shared,
    /// A fresh instance per request (pooling allocator; tens of µs per request): nothing a
    /// request leaves in guest memory reaches the next one.
    PerRequest,
}

/// What to load: a plugin declaration as the policy states it.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// The plugin's name (logs, errors, counters, property `plugin_name`).
    pub name: String,
    /// A `.wasm` file, or a `.wat` text module.
    pub path: PathBuf,
    /// Plugin configuration (`proxy_on_configure`, buffer `PLUGIN_CONFIGURATION`).
    pub config: Bytes,
    /// VM configuration (`proxy_on_vm_start`, buffer `VM_CONFIGURATION`). Usually empty.
    pub vm_config: Bytes,
    /// Property `plugin_root_id` (AssemblyScript plugins register their root context under
    /// it). Default empty.
    pub root_id: String,
    /// Property `plugin_vm_id`. Default empty.
    pub vm_id: String,
    pub isolation: Isolation,
    /// Overrides [`HostSettings::limits`].
    pub limits: Option<Limits>,
    /// The clusters `proxy_http_call` / `proxy_grpc_call` may name. Default: none.
    pub upstreams: UpstreamSet,
    /// The most body bytes the proxy buffers for this plugin's body callbacks; `None` (the
    /// default): the plugin sees no bodies (`proxy_on_request_body` / `proxy_on_response_body`
    /// are not called), so header-only plugins cost nothing per body.
    pub max_body: Option<usize>,
}

impl PluginSpec {
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        PluginSpec {
            name: name.into(),
            path: path.into(),
            config: Bytes::new(),
            vm_config: Bytes::new(),
            root_id: String::new(),
            vm_id: String::new(),
            isolation: Isolation::Shared,
            limits: None,
            upstreams: UpstreamSet::none(),
            max_body: None,
        }
    }

    /// Sets the plugin configuration.
    pub fn config(mut self, config: impl Into<Bytes>) -> Self {
        self.config = config.into();
        self
    }

    /// Sets the VM configuration.
    pub fn vm_config(mut self, vm_config: impl Into<Bytes>) -> Self {
        self.vm_config = vm_config.into();
        self
    }

    pub fn max_body(mut self, max_body: Option<usize>) -> Self {
        self.max_body = max_body;
        self
    }

    pub fn upstreams(mut self, upstreams: UpstreamSet) -> Self {
        self.upstreams = upstreams;
        self
    }

    pub fn root_id(mut self, root_id: impl Into<String>) -> Self {
        self.root_id = root_id.into();
        self
    }

    pub fn vm_id(mut self, vm_id: impl Into<String>) -> Self {
        self.vm_id = vm_id.into();
        self
    }

    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }
}

/// The plugin host: one wasmtime engine (plus a pooling one on demand) and one thread that
/// drives CPU deadlines. Create one per process; cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    inner: Arc<HostInner>,
}

impl PluginHost {
    pub fn new(settings: HostSettings) -> Self {
        PluginHost {
            inner: Arc::new(HostInner::new(settings)),
        }
    }

    /// Reads, validates and compiles a plugin, and starts its shared instances, one per
    /// [`HostSettings::instances_per_plugin`] (so a plugin that traps at start-up or rejects
    /// its configuration fails here). Blocking: call it off
    /// the request path (compiling takes ~100 ms for an SDK-built plugin).
    pub fn load(&self, spec: &PluginSpec) -> Result<Plugin, LoadError> {
        let inner = engine::load(&self.inner, spec)?;
        let plugin = Plugin {
            inner,
            host: self.inner.clone(),
        };
        plugin.drive_ticks();
        Ok(plugin)
    }
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost").finish_non_exhaustive()
    }
}

/// A loaded plugin. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
    // Also keeps the engine's epoch thread alive as long as plugins exist.
    host: Arc<HostInner>,
}

/// Counters for one plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginStats {
    /// Instances created (the first at load, then replacements and per-request ones).
    pub instances_created: u64,
    pub traps: u64,
    pub deadlines: u64,
    pub out_of_memory: u64,
    pub abi_errors: u64,
    /// Streams that stayed paused past the pause timeout.
    pub pause_timeouts: u64,
}

impl Plugin {
    pub fn name(&self) -> &str {
        &self.inner.setup.meta.name
    }

    pub fn isolation(&self) -> Isolation {
        self.inner.isolation
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// [`PluginSpec::max_body`]: whether (and how much of) bodies the plugin sees.
    pub fn max_body(&self) -> Option<usize> {
        self.inner.max_body
    }

    /// Starts the plugin's part of one request. No guest code runs until the first phase.
    pub fn stream(&self) -> PluginStream {
        let binding = match self.inner.isolation {
            Isolation::Shared => Binding::Shared {
                slot: thread_slot(self.inner.slots.len()),
            },
            Isolation::PerRequest => Binding::Owned(Arc::default()),
        };
        PluginStream::new(self.clone(), binding)
    }

    pub fn stats(&self) -> PluginStats {
        let c = &self.inner.counters;
        let e = |i: usize| c.errors[i].load(Ordering::Relaxed);
        PluginStats {
            instances_created: c.instances.load(Ordering::Relaxed),
            traps: e(0),
            deadlines: e(1),
            out_of_memory: e(2),
            abi_errors: e(3),
            pause_timeouts: e(4),
        }
    }

    /// Metrics the plugin defined with `proxy_define_metric`, across its instances.
    pub fn metrics(&self) -> Vec<PluginMetric> {
        self.inner.setup.meta.metrics.lock().clone()
    }

    /// Runs `proxy_on_tick` on every live shared instance whose tick period (set by the
    /// plugin with `proxy_set_tick_period_milliseconds`) has elapsed, and starts the outbound
    /// calls the ticks made. Instances busy with a request are skipped until the next call.
    /// Returns how many ticks ran. The host calls it from its tick task; tests may call it.
    pub fn run_due_ticks(&self) -> usize {
        let now = tokio::time::Instant::now();
        let mut ran = 0;
        for (index, slot) in self.inner.slots.iter().enumerate() {
            let Some(mut guard) = slot.try_lock() else {
                continue;
            };
            let Some(instance) = guard.as_mut() else {
                continue;
            };
            match instance.tick_if_due(now) {
                Ok(true) => {
                    ran += 1;
                    let (generation, calls) = (instance.generation, instance.take_dispatched());
                    drop(guard);
                    engine::calls::start_calls(
                        &self.inner,
                        &Binding::Shared { slot: index },
                        generation,
                        calls,
                    );
                }
                Ok(false) => {}
                Err(cause) => {
                    *guard = None;
                    let _ = self.inner.fail(cause);
                }
            }
        }
        ran
    }

    /// The shortest tick period any live instance asked for.
    pub fn tick_period(&self) -> Option<Duration> {
        self.inner
            .slots
            .iter()
            .filter_map(|s| {
                s.try_lock()
                    .and_then(|g| g.as_ref().and_then(Instance::tick_period))
            })
            .min()
    }

    /// Drives `proxy_on_tick` from a tokio task of its own (never from a request), when the
    /// plugin asked for ticks at start-up (`proxy_set_tick_period_milliseconds` in
    /// `proxy_on_vm_start` or `proxy_on_configure`, as the SDKs' examples do). The task wakes
    /// at the shortest period any instance asked for and ends when the plugin is dropped.
    /// Without a tokio runtime (`edgecache check`) nothing runs.
    fn drive_ticks(&self) {
        let (Some(mut period), Ok(runtime)) = (self.tick_period(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let host = self.host.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let plugin = Plugin {
                    inner,
                    host: host.clone(),
                };
                plugin.run_due_ticks();
                period = plugin.tick_period().unwrap_or(period);
            }
        });
    }

    /// Guest memory of each live shared instance, in bytes.
    pub fn memory_sizes(&self) -> Vec<usize> {
        self.inner
            .slots
            .iter()
            .filter_map(|s| s.lock().as_ref().map(Instance::memory_size))
            .collect()
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name())
            .field("isolation", &self.inner.isolation)
            .finish_non_exhaustive()
    }
}

/// The slot of the current thread: threads get consecutive indexes on first use.
fn thread_slot(slots: usize) -> usize {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i) % slots.max(1)
}
