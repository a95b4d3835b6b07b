//! The wasmtime side: engines, linkers, loading and validating plugin files, and the
//! per-plugin instance slots.
//!
//! One [`Engine`] (on-demand allocation) serves plugins with shared instances; a second one
//! with the pooling allocator is created on first use for plugins that want a fresh instance
//! per request. A `Module` can only be instantiated on the engine that compiled it, so each
//! plugin is compiled on the engine of its isolation mode.

pub(super) mod calls;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use wasmtime::{
    Config, Engine, ExternType, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Val,
};

use super::abi::{self, AbiViolation, HostState, PluginMeta};
use super::error::{Cause, LoadError, LoadErrorKind, PluginError};
use super::instance::{Instance, InstanceSetup, StartError};
use super::sandbox::{deadline_ticks, EpochTicker, Limits};
use super::{HostSettings, Isolation, PluginSpec};

/// ABI versions we accept, by the name of their marker export.
const SUPPORTED_ABI: [&str; 2] = ["proxy_abi_version_0_2_0", "proxy_abi_version_0_2_1"];

pub(crate) struct EngineSlot {
    pub(crate) engine: Engine,
    linker: Linker<HostState>,
    defined: abi::ImportNames,
}

impl EngineSlot {
    fn new(config: &Config) -> Result<Self, String> {
        let engine = Engine::new(config).map_err(|e| format!("{e:#}"))?;
        let (linker, defined) = abi::linker(&engine).map_err(|e| format!("{e:#}"))?;
        Ok(EngineSlot {
            engine,
            linker,
            defined,
        })
    }
}

fn base_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config
}

/// State shared by every plugin of one [`PluginHost`](super::PluginHost).
pub(crate) struct HostInner {
    pub(crate) settings: HostSettings,
    shared: EngineSlot,
    pooled: Arc<OnceLock<Result<EngineSlot, String>>>,
    _ticker: EpochTicker,
}

impl HostInner {
    pub(crate) fn new(settings: HostSettings) -> Self {
        let shared = EngineSlot::new(&base_config()).expect("the default wasmtime configuration is valid");
        let pooled: Arc<OnceLock<Result<EngineSlot, String>>> = Arc::new(OnceLock::new());
        let ticker = EpochTicker::start(
            shared.engine.clone(),
            pooled.clone(),
            |slot| slot.as_ref().ok().map(|s| &s.engine),
            settings.epoch_tick,
        );
        HostInner {
            settings,
            shared,
            pooled,
            _ticker: ticker,
        }
    }

    fn engine_for(&self, isolation: Isolation) -> Result<&EngineSlot, String> {
        match isolation {
            Isolation::Shared => Ok(&self.shared),
            Isolation::PerRequest => self
                .pooled
                .get_or_init(|| {
                    let mut pool = PoolingAllocationConfig::default();
                    let slots = self.settings.pool_slots;
                    pool.total_core_instances(slots)
                        .total_memories(slots)
                        .total_tables(slots)
                        .max_memory_size(self.settings.pool_max_memory);
                    let mut config = base_config();
                    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
                    EngineSlot::new(&config)
                })
                .as_ref()
                .map_err(Clone::clone),
        }
    }
}

/// Counters per plugin (plain atomics; exported by the metrics work later).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) errors: [AtomicU64; 5],
    pub(crate) instances: AtomicU64,
}

/// CPU time for an instance's start-up. Start-up does more than a request callback (an SDK
/// initialises its runtime, parses configuration) and, being wall-clock, must not fail a load
/// on a busy machine; a plugin that loops at start-up is still stopped.
const STARTUP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// A loaded plugin: the compiled module, its instance slots and counters.
pub(crate) struct PluginInner {
    pub(crate) setup: InstanceSetup,
    pub(crate) isolation: Isolation,
    pub(crate) limits: Limits,
    /// [`HostSettings::pause_timeout`].
    pub(crate) pause_timeout: std::time::Duration,
    /// [`PluginSpec::max_body`](super::PluginSpec::max_body).
    pub(crate) max_body: Option<usize>,
    /// Shared instances, one per worker thread (by thread index modulo the length).
    pub(crate) slots: Box<[Mutex<Option<Instance>>]>,
    generation: AtomicU64,
    pub(crate) counters: Counters,
}

impl PluginInner {
    /// A new instance, started and configured.
    pub(crate) fn new_instance(&self) -> Result<Instance, StartError> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.counters.instances.fetch_add(1, Ordering::Relaxed);
        Instance::new(&self.setup, generation)
    }

    /// Counts and logs a failure, and turns it into the error the proxy sees.
    pub(crate) fn fail(&self, cause: Cause) -> PluginError {
        self.counters.errors[cause.index()].fetch_add(1, Ordering::Relaxed);
        if cause == Cause::PauseTimeout {
            // The instance is fine; one request waited too long for it.
            tracing::warn!(target: "edgecache::plugin", plugin = &*self.setup.meta.name, cause = cause.kind(), "plugin failed: {cause}");
        } else {
            tracing::warn!(
                target: "edgecache::plugin",
                plugin = &*self.setup.meta.name,
                cause = cause.kind(),
                "plugin failed, instance discarded: {cause}"
            );
        }
        PluginError {
            plugin: self.setup.meta.name.clone(),
            cause,
        }
    }

    pub(crate) fn start_error(&self, e: StartError) -> PluginError {
        match e {
            StartError::Failed(cause) => self.fail(cause),
            StartError::Rejected(callback) => self.fail(Cause::Abi(format!(
                "`{callback}` returned false: the plugin rejected its configuration"
            ))),
        }
    }
}

/// Reads, validates, compiles and starts a plugin. The first instance is created here (so a
/// plugin that fails to start or rejects its configuration fails at load) and kept.
pub(crate) fn load(host: &HostInner, spec: &PluginSpec) -> Result<Arc<PluginInner>, LoadError> {
    let err = |kind| LoadError {
        plugin: spec.name.clone(),
        path: spec.path.clone(),
        kind,
    };
    let bytes = std::fs::read(&spec.path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => err(LoadErrorKind::NotFound),
        _ => err(LoadErrorKind::Read(e)),
    })?;
    let slot = host.engine_for(spec.isolation).map_err(|e| {
        err(LoadErrorKind::Instantiate(format!(
            "cannot create the pooling engine: {e}"
        )))
    })?;
    let module = compile(&slot.engine, &spec.path, &bytes).map_err(err)?;
    check_exports(&module).map_err(err)?;
    let pre = link(slot, &module, &spec.name).map_err(err)?;

    let limits = spec.limits.unwrap_or(host.settings.limits);
    let slots = match spec.isolation {
        Isolation::Shared => host.settings.instances_per_plugin.max(1),
        Isolation::PerRequest => 0,
    };
    let plugin = Arc::new(PluginInner {
        setup: InstanceSetup {
            meta: Arc::new(PluginMeta::new(
                &spec.name,
                &spec.root_id,
                &spec.vm_id,
                (spec.config.clone(), spec.vm_config.clone()),
                spec.upstreams.clone(),
            )),
            pre,
            memory_limit: limits.memory,
            deadline_ticks: deadline_ticks(limits.deadline, host.settings.epoch_tick),
            startup_deadline_ticks: deadline_ticks(
                limits.deadline.max(STARTUP_DEADLINE),
                host.settings.epoch_tick,
            ),
        },
        isolation: spec.isolation,
        limits,
        pause_timeout: host.settings.pause_timeout,
        max_body: spec.max_body,
        slots: (0..slots).map(|_| Mutex::new(None)).collect(),
        generation: AtomicU64::new(0),
        counters: Counters::default(),
    });
    if spec.isolation == Isolation::Shared {
        let weak = Arc::downgrade(&plugin);
        let listener: abi::QueueListener = Arc::new(move |queue| queue_ready_later(&weak, queue));
        let _ = plugin.setup.meta.queue_listener.set(listener);
    }
    let start = || {
        plugin.new_instance().map_err(|e| match e {
            StartError::Failed(cause) => err(LoadErrorKind::Startup(cause)),
            StartError::Rejected(callback) => err(LoadErrorKind::Rejected(callback)),
        })
    };
    let first = start()?;
    match plugin.slots.split_first() {
        Some((slot, rest)) => {
            *slot.lock() = Some(first);
            // Every worker's instance starts now, as Envoy starts its per-worker VMs with the
            // configuration: an `on_vm_start` that initialises shared data runs before any
            // request, and every instance ticks from the start.
            for slot in rest {
                *slot.lock() = Some(start()?);
            }
        }
        None => drop(first),
    }
    Ok(plugin)
}

/// Schedules `proxy_on_queue_ready` on one of the plugin's shared instances. On a task: the
/// item was enqueued from inside a callback, perhaps of one of these very instances.
fn queue_ready_later(plugin: &Weak<PluginInner>, queue: u32) {
    let (Some(plugin), Ok(runtime)) = (plugin.upgrade(), tokio::runtime::Handle::try_current()) else {
        return;
    };
    runtime.spawn(async move { plugin.queue_ready(queue) });
}

impl PluginInner {
    /// Delivers `proxy_on_queue_ready` to an idle shared instance (every instance of the
    /// plugin registered the queue; any may dequeue), or waits for the first one.
    fn queue_ready(self: &Arc<Self>, queue: u32) {
        let idle = self
            .slots
            .iter()
            .position(|s| s.try_lock().is_some_and(|i| i.is_some()));
        let Some(index) = idle.or_else(|| self.slots.iter().position(|s| s.lock().is_some())) else {
            return;
        };
        let mut guard = self.slots[index].lock();
        let Some(instance) = guard.as_mut() else {
            return;
        };
        match instance.queue_ready(queue) {
            Ok(()) => {
                let (generation, calls) = (instance.generation, instance.take_dispatched());
                drop(guard);
                calls::start_calls(self, &calls::Binding::Shared { slot: index }, generation, calls);
            }
            Err(cause) => {
                *guard = None;
                drop(guard);
                let _ = self.fail(cause);
            }
        }
    }
}

fn compile(engine: &Engine, path: &Path, bytes: &[u8]) -> Result<Module, LoadErrorKind> {
    let is_binary = bytes.starts_with(b"\0asm");
    let is_text = !is_binary
        && (path.extension().is_some_and(|e| e == "wat")
            || std::str::from_utf8(bytes).is_ok_and(|s| s.trim_start().starts_with("(module")));
    if !is_binary && !is_text {
        return Err(LoadErrorKind::NotWasm(
            "the file starts neither with the wasm magic number `\\0asm` nor with `(module`".into(),
        ));
    }
    Module::new(engine, bytes).map_err(|e| LoadErrorKind::Compile(format!("{e:#}")))
}

fn check_exports(module: &Module) -> Result<(), LoadErrorKind> {
    let versions: Vec<&str> = module
        .exports()
        .map(|e| e.name())
        .filter(|n| n.starts_with("proxy_abi_version_"))
        .collect();
    if !versions.iter().any(|v| SUPPORTED_ABI.contains(v)) {
        return Err(match versions.first() {
            Some(found) => LoadErrorKind::UnsupportedAbi {
                found: found.to_string(),
            },
            None => LoadErrorKind::NoAbiVersion,
        });
    }
    if !matches!(module.get_export("memory"), Some(ExternType::Memory(_))) {
        return Err(LoadErrorKind::MissingExport("memory"));
    }
    if !matches!(
        module.get_export("proxy_on_context_create"),
        Some(ExternType::Func(_))
    ) {
        return Err(LoadErrorKind::MissingExport("proxy_on_context_create"));
    }
    let has_alloc = ["proxy_on_memory_allocate", "malloc"]
        .iter()
        .any(|n| matches!(module.get_export(n), Some(ExternType::Func(_))));
    if !has_alloc {
        return Err(LoadErrorKind::MissingExport("proxy_on_memory_allocate"));
    }
    Ok(())
}

/// Links the module: every import must be one we define or a WASI function (stubbed to
/// return `ENOSYS`). Anything else, an `env.proxy_*` function edgecache does not offer
/// included, is refused with all the names: a plugin that would fail when it calls one is
/// refused at load rather than silently degraded.
fn link(slot: &EngineSlot, module: &Module, plugin: &str) -> Result<InstancePre<HostState>, LoadErrorKind> {
    let mut linker = slot.linker.clone();
    let mut missing = Vec::new();
    for import in module.imports() {
        let (m, n) = (import.module(), import.name());
        if slot.defined.contains(&(m.to_string(), n.to_string())) {
            continue;
        }
        let (true, ExternType::Func(ty)) = (abi::is_wasi(m), import.ty()) else {
            missing.push(format!("{m}.{n}"));
            continue;
        };
        let full = format!("{m}.{n}");
        let plugin: Arc<str> = Arc::from(plugin);
        let returns_errno = ty.results().len() == 1;
        linker
            .func_new(m, n, ty, move |_caller, _params, results| {
                tracing::debug!(target: "edgecache::plugin", plugin = &*plugin, "WASI call {full} → ENOSYS");
                if returns_errno {
                    results[0] = Val::I32(abi::wasi_enosys());
                    Ok(())
                } else {
                    Err(AbiViolation(format!("unsupported WASI function `{full}`")).into())
                }
            })
            .map_err(|e| LoadErrorKind::Instantiate(format!("{e:#}")))?;
    }
    if !missing.is_empty() {
        return Err(LoadErrorKind::MissingImports(missing));
    }
    linker
        .instantiate_pre(module)
        .map_err(|e| LoadErrorKind::Instantiate(format!("{e:#}")))
}
