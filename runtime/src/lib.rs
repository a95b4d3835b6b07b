//! edgecache's runtime: everything that does I/O.
//!
//! ```text
//! client ─► server (HTTP/1.1 + h2c) ─► proxy::driver
//!              recv ─► hash ─► cache lookup ──hit──────────────────────► deliver ─► client
//!                                  │ miss: coalesce (one fetch per key)
//!                                  ▼
//!                            backend fetch ─► backend_response ─► store ─► deliver ─► client
//! ```
//!
//! [`start`] binds the listeners and returns a [`Running`] server (tests bind port 0 and read
//! [`Running::listen_addrs`]); [`run`] does the same on its own tokio runtime and stops on
//! SIGINT/SIGTERM, and reloads on SIGHUP.
//!
//! Around the request path: `reload` watches the policy files and swaps in a new version when
//! they change (also on SIGHUP and `POST /reload`); `admin` serves the operator's API (status,
//! stats, Prometheus metrics, purge, ban, reload) on its own listener ([`Running::admin_addr`]).
#![forbid(unsafe_code)]

pub mod admin;
mod backend;
mod cache;
pub mod config;
pub mod demo;
pub mod dns;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod logging;
mod peers;
pub mod plugin;
pub mod policy;
pub(crate) mod poll_time;
mod proxy;
mod reload;
mod server;
pub mod telemetry;
mod trace;
mod turn;
pub mod version;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use cache::clock::Clock;
pub use config::{Config, ConfigError};
pub use reload::{ReloadFailure, ReloadStatus, Trigger};

/// Why edgecache could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("backend: {0}")]
    Backend(String),
    #[error("policy {path} was refused:\n{rendered}")]
    Policy { path: String, rendered: String },
    #[error("policy {path} was refused: {error}\n  hint: fix the plugin's `.path` or rebuild the module; `edgecache check {path}` reports the same")]
    Plugin { path: String, error: plugin::LoadError },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("admin API: {0}")]
    Admin(String),
    /// The admin listener's address is taken, typically by another edgecache or varnishd.
    #[error("admin listener (-T) cannot listen on {address}: {source}; pass -T off, or another address (-T IP:PORT or -T :PORT)")]
    AdminBind {
        address: SocketAddr,
        source: std::io::Error,
    },
    /// A TLS certificate or key that does not load; the message names the file.
    #[error("TLS: {0}")]
    Tls(String),
}

/// A snapshot of cache occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheUsage {
    pub bytes: u64,
    pub keys: u64,
}

/// What [`Running::active_version`] reports.
#[derive(Clone, Debug)]
pub struct VersionInfo {
    /// 1 at start, +1 per successful reload.
    pub generation: u64,
    pub policy: Option<version::PolicySource>,
}

/// A started server.
pub struct Running {
    listen_addrs: Vec<SocketAddr>,
    shared: Arc<proxy::Shared>,
    reloader: Arc<reload::Reloader>,
    /// TLS termination, when a listener has `,tls`.
    tls: Option<Arc<server::Terminator>>,
    admin_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    done: JoinHandle<()>,
    /// The watcher, the admin listener and the ban trimmer; each ends when `stop` turns true.
    tasks: Vec<JoinHandle<()>>,
    /// The health check, 503 once shutdown starts, for `drain_time` before `stop`.
    health: Arc<server::Health>,
    drain_time: std::time::Duration,
}

impl Running {
    /// The bound addresses, in the order of `Config::listen`.
    pub fn listen_addrs(&self) -> &[SocketAddr] {
        &self.listen_addrs
    }

    /// What the cache holds now: bytes accounted against `cache_size`, and primary keys.
    pub fn cache_usage(&self) -> CacheUsage {
        CacheUsage {
            bytes: self.shared.cache.store.weighted_size(),
            keys: self.shared.cache.store.entry_count(),
        }
    }

    /// The clock the cache reads: tests move it forward to age stored objects instead of
    /// sleeping.
    pub fn clock(&self) -> Clock {
        self.shared.cache.clock.clone()
    }

    /// The configuration version serving new requests.
    pub fn active_version(&self) -> VersionInfo {
        let version = self.shared.active.load();
        VersionInfo {
            generation: version.generation,
            policy: version.source.clone(),
        }
    }

    /// The bound address of the admin API, when `Config::admin_listen` is set.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Loads the configuration again now and swaps it in if it loaded (as SIGHUP does).
    /// Returns the new generation, or the failure (the previous version keeps serving).
    pub async fn reload(&self) -> Result<u64, ReloadFailure> {
        self.reloader.reload(Trigger::Api).await
    }

    /// Reads the TLS certificate files again now and swaps them in if every pair loaded (as the
    /// watcher, SIGHUP and `POST /reload` do). The error names the file; the previous
    /// certificates keep serving. Without a `,tls` listener there is nothing to do.
    pub async fn reload_certificates(&self) -> Result<(), String> {
        let Some(tls) = &self.tls else {
            return Ok(());
        };
        let certificates = tls.certificates().clone();
        tokio::task::spawn_blocking(move || certificates.reload(Trigger::Api.as_str()))
            .await
            .map_err(|error| format!("the certificate reload task failed: {error}"))?
            .map_err(|error| error.to_string())
    }

    /// How reloads went so far: counts, the active policy's hash, the last failure.
    pub fn reload_status(&self) -> ReloadStatus {
        self.reloader.status()
    }

    /// Drains: the health path answers 503 at once (before the future is first polled, so a
    /// caller may spawn it and check) while requests are still served, for `drain_time`; then
    /// stops accepting, lets requests in flight finish (bounded by `shutdown_grace`), returns.
    pub fn shutdown(self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.health.start_draining();
        async move {
            if !self.drain_time.is_zero() {
                tracing::info!(drain_time = ?self.drain_time, "draining: health checks answer 503");
                tokio::time::sleep(self.drain_time).await;
            }
            let _ = self.stop.send(true);
            let _ = self.done.await;
            for task in self.tasks {
                let _ = task.await;
            }
        }
    }
}

/// Binds the listeners and starts serving on the current tokio runtime.
pub async fn start(config: Config) -> Result<Running, StartError> {
    config.validate()?;
    let version = version::Version::load(&config, 1, None)?;
    // Before the listeners open: a certificate that does not load stops the start.
    let tls = match config.listen.iter().any(|spec| spec.tls) {
        true => Some(Arc::new(
            server::Terminator::new(&config.tls).map_err(|error| StartError::Tls(error.to_string()))?,
        )),
        false => None,
    };
    let listeners = server::Listeners::bind(&config)
        .await
        .map_err(|(address, source)| StartError::Bind { address, source })?;
    let listen_addrs = listeners.local_addrs();
    let started = std::time::Instant::now();
    // Request durations for /metrics; the proxy records into it.
    let latency = telemetry::RequestLatency::default();
    let shared = Arc::new(proxy::Shared::new(&config, version, latency.clone()));
    let mut reloader = reload::Reloader::new(&config, shared.active.clone(), shared.labels.clone());
    if let Some(tls) = &tls {
        let certificates = tls.certificates().clone();
        // The outcome is logged; a failure keeps the old certificates.
        reloader.also_reload(move |trigger| {
            let _ = certificates.reload(trigger.as_str());
        });
    }
    let reloader = Arc::new(reloader);
    let (stop, stopped) = watch::channel(false);
    let lurker = cache::LurkerSettings {
        rate: config.ban_lurker_rate,
        age: config.ban_lurker_age,
    };
    let mut tasks = vec![
        admin::spawn_ban_trimmer(shared.cache.clone(), stopped.clone()),
        shared.cache.spawn_ban_lurker(lurker, stopped.clone()),
    ];
    let mut watching = false;
    if config.watch_policy && config.policy.is_some() {
        match reload::spawn_watcher(reloader.clone(), stopped.clone()) {
            Ok(task) => {
                tasks.push(task);
                watching = true;
            }
            Err(error) => {
                tracing::error!(%error, "policy files are not watched; reload with SIGHUP or POST /reload")
            }
        }
    }
    if let (true, Some(tls)) = (config.watch_policy, &tls) {
        match reload::spawn_watcher(tls.certificates().clone(), stopped.clone()) {
            Ok(task) => tasks.push(task),
            Err(error) => {
                tracing::error!(%error, "TLS certificates are not watched; reload with SIGHUP or POST /reload")
            }
        }
    }
    let admin_addr = match config.admin_listen {
        Some(address) => {
            let state = admin::State {
                active: shared.active.clone(),
                cache: shared.cache.clone(),
                stats: shared.stats.clone(),
                reloader: reloader.clone(),
                started,
                latency,
                watching,
                traces: shared.traces.clone(),
            };
            let started = admin::start(
                address,
                config.admin_token_file.as_deref(),
                peers::Settings {
                    peers: config.peers.clone(),
                    retry_time: config.peer_retry_time,
                    resolver: dns::Resolver::new(config.hosts_file.clone()),
                    dns_ttl: config.dns_ttl,
                },
                state,
                stopped.clone(),
            )
            .await?;
            tasks.push(started.task);
            if let Some(peers) = started.peers {
                // Before the listeners serve: the policy's first invalidation reaches the peers.
                shared.peers.set(peers).expect("set once, here");
            }
            Some(started.address)
        }
        None => None,
    };
    let options = server::Options::new(&config, tls.clone());
    let health = options.health.clone();
    let done = listeners
        .serve(shared.clone(), stopped, options)
        .await
        .map_err(StartError::Runtime)?;
    Ok(Running {
        listen_addrs,
        shared,
        reloader,
        tls,
        admin_addr,
        stop,
        done,
        tasks,
        health,
        drain_time: config.drain_time,
    })
}

/// Runs edgecache until SIGINT or SIGTERM, on a runtime with `config.threads` workers (with
/// `--worker-model reuseport`, on the worker threads `start` spawns, this thread's runtime
/// keeping the signals, the admin API and the background tasks). `on_started` sees the bound
/// addresses.
pub fn run(config: Config, on_started: impl FnOnce(&[SocketAddr])) -> Result<(), StartError> {
    let threads = match config.worker_model {
        config::WorkerModel::Shared => config.threads,
        config::WorkerModel::ReusePort => Some(1),
    };
    build_runtime(threads)?.block_on(serve_until_signal(config, on_started))
}

/// `edgecache demo`: the demo origin on an ephemeral loopback port and the proxy on `listen`
/// in front of it, until SIGINT or SIGTERM. `on_started` gets the origin's and the proxy's
/// addresses.
pub fn run_demo(
    listen: config::ListenSpec,
    on_started: impl FnOnce(SocketAddr, SocketAddr),
) -> Result<(), StartError> {
    build_runtime(None)?.block_on(async move {
        let origin = demo::start_origin(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(|error| StartError::Backend(format!("cannot start the demo origin: {error}")))?;
        let config = Config {
            listen: vec![listen],
            backend: Some(origin.to_string()),
            ..Config::default()
        };
        serve_until_signal(config, |addresses| on_started(origin, addresses[0])).await
    })
}

fn build_runtime(threads: Option<usize>) -> Result<tokio::runtime::Runtime, StartError> {
    // One worker: a current-thread runtime. Its tasks run in the order they were woken, so the
    // streams an HTTP/2 connection read together answer before the connection task writes,
    // and their responses leave in one write; the multi-thread scheduler's LIFO slot would run
    // the connection task after each stream instead.
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        Some(threads) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(threads);
            builder
        }
        None => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.thread_stack_size(server::THREAD_STACK_SIZE);
    builder.event_interval(server::TASK_POLLS_PER_EVENT_LOOK);
    builder.enable_all().build().map_err(StartError::Runtime)
}

async fn serve_until_signal(
    config: Config,
    on_started: impl FnOnce(&[SocketAddr]),
) -> Result<(), StartError> {
    // Before the listeners open: from then on a supervisor may signal us, and an unhandled
    // SIGHUP, SIGINT or SIGTERM would kill the process instead of reloading or draining it.
    let mut signals = Signals::install();
    let running = start(config).await?;
    on_started(running.listen_addrs());
    loop {
        tokio::select! {
            _ = signals.interrupt.recv() => break,
            _ = signals.terminate.recv() => break,
            _ = signals.hangup.recv() => {
                tracing::info!("SIGHUP: reloading");
                // The outcome is logged by the reloader; a failure keeps the old version.
                let _ = running.reloader.reload(Trigger::Signal).await;
            }
        }
    }
    tracing::info!("shutting down: finishing requests in flight");
    running.shutdown().await;
    Ok(())
}

/// The signals [`run`] handles: SIGHUP reloads, SIGINT and SIGTERM stop.
struct Signals {
    hangup: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Replaces the default actions (which end the process) at once.
    fn install() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        Signals {
            hangup: signal(SignalKind::hangup()).expect("installing a SIGHUP handler"),
            interrupt: signal(SignalKind::interrupt()).expect("installing a SIGINT handler"),
            terminate: signal(SignalKind::terminate()).expect("installing a SIGTERM handler"),
        }
    }
}
