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
//! SIGINT/SIGTERM.
#![forbid(unsafe_code)]

mod backend;
mod cache;
pub mod config;
pub mod demo;
pub mod logging;
pub mod plugin;
pub mod policy;
mod proxy;
mod server;
pub mod stats;
pub mod version;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{Config, ConfigError};

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
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
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
    stop: watch::Sender<bool>,
    done: JoinHandle<()>,
}

impl Running {
    /// The bound addresses, in the order of `Config::listen`.
    pub fn listen_addrs(&self) -> &[SocketAddr] {
        &self.listen_addrs
    }

    /// What the cache holds now: bytes accounted against `cache_size`, and primary keys.
    pub fn cache_usage(&self) -> CacheUsage {
        CacheUsage {
            bytes: self.shared.store.weighted_size(),
            keys: self.shared.store.entry_count(),
        }
    }

    /// The configuration version serving new requests.
    pub fn active_version(&self) -> VersionInfo {
        let version = self.shared.active.load();
        VersionInfo { generation: version.generation, policy: version.source.clone() }
    }

    /// Stops accepting, lets requests in flight finish (bounded by `shutdown_grace`), returns.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
    }
}

/// Binds the listeners and starts serving on the current tokio runtime.
pub async fn start(config: Config) -> Result<Running, StartError> {
    config.validate()?;
    let version = version::Version::load(&config, 1, None)?;
    let listeners = server::bind(&config.listen)
        .await
        .map_err(|(address, source)| StartError::Bind { address, source })?;
    let listen_addrs = listeners
        .iter()
        .map(|listener| listener.local_addr().expect("a bound listener has an address"))
        .collect();
    let shared = Arc::new(proxy::Shared::new(&config, version));
    let (stop, stopped) = watch::channel(false);
    let done = tokio::spawn(server::serve(
        listeners,
        shared.clone(),
        stopped,
        config.shutdown_grace,
    ));
    Ok(Running {
        listen_addrs,
        shared,
        stop,
        done,
    })
}

/// Runs edgecache until SIGINT or SIGTERM, on a runtime with `config.threads` workers.
/// `on_started` sees the bound addresses.
pub fn run(config: Config, on_started: impl FnOnce(&[SocketAddr])) -> Result<(), StartError> {
    build_runtime(config.threads)?.block_on(serve_until_signal(config, on_started))
}

/// `edgecache demo`: the demo origin on an ephemeral loopback port and the proxy on `listen`
/// in front of it, until SIGINT or SIGTERM. `on_started` gets the origin's and the proxy's
/// addresses.
pub fn run_demo(
    listen: SocketAddr,
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
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        builder.worker_threads(threads);
    }
    builder.enable_all().build().map_err(StartError::Runtime)
}

async fn serve_until_signal(
    config: Config,
    on_started: impl FnOnce(&[SocketAddr]),
) -> Result<(), StartError> {
    let running = start(config).await?;
    on_started(running.listen_addrs());
    wait_for_signal().await;
    tracing::info!("shutting down: finishing requests in flight");
    running.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
