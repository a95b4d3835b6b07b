//! Validated runtime settings.
//!
//! Owns the parsing of human-written values (sizes such as `256m`, durations such as `120` or
//! `1.5s`, CIDR lists) and the TOML file format. It is a leaf module: the CLI in `src/main.rs`
//! fills a [`Config`] from flags and `--config`; everything else reads it. Every error names the
//! flag or key and says what is accepted.

mod file;
mod parse;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;
use ipnet::IpNet;

pub use file::FileConfig;
pub use parse::{parse_cidr_list, parse_duration, parse_listen, parse_size};

/// A setting the user got wrong: which one, what was given, what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {problem}; accepted: {accepted}")]
pub struct ConfigError {
    pub key: String,
    pub problem: String,
    pub accepted: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, problem: impl Into<String>, accepted: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            problem: problem.into(),
            accepted: accepted.into(),
        }
    }
}

/// Access log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One compact human-readable line per request.
    #[default]
    Compact,
    /// One JSON object per request.
    Json,
}

/// Timeouts for talking to an origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendTimeouts {
    /// TCP connect. Default 3.5 s (Varnish's `connect_timeout`).
    pub connect: Duration,
    /// From request sent to response headers received. Default 60 s (Varnish's `first_byte_timeout`).
    pub first_byte: Duration,
    /// Longest silence between two body chunks. Default 60 s (Varnish's `between_bytes_timeout`).
    pub between_bytes: Duration,
}

impl Default for BackendTimeouts {
    fn default() -> Self {
        BackendTimeouts {
            connect: Duration::from_millis(3500),
            first_byte: Duration::from_secs(60),
            between_bytes: Duration::from_secs(60),
        }
    }
}

/// Everything the runtime needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Addresses to listen on (HTTP/1.1 and h2c on each).
    pub listen: Vec<SocketAddr>,
    /// Default origin as `host:port`, used when the policy declares no backend.
    pub backend: Option<String>,
    /// Policy file (`*.vcl`); `None` runs Varnish's builtin behaviour.
    pub policy: Option<PathBuf>,
    /// Cache capacity in bytes (headers + body of every object). Default 256 MiB.
    pub cache_size: u64,
    /// Largest object stored; larger responses stream through. Default 16 MiB.
    pub max_object_size: u64,
    /// TTL for storable responses without freshness information. Default 0 (RFC 9111).
    pub default_ttl: Duration,
    /// Worker threads; `None` = one per core.
    pub threads: Option<usize>,
    /// Origin timeouts.
    pub timeouts: BackendTimeouts,
    /// Client networks allowed to send `PURGE`. Default loopback only.
    pub purge_allow: Vec<IpNet>,
    /// Response header that reports the cache result. Default `x-cache`.
    pub cache_status_header: HeaderName,
    /// How long an uncacheable key is remembered as hit-for-pass. Default 120 s (Varnish).
    pub hit_for_pass_ttl: Duration,
    /// How long a request waits on another's fetch of the same key before going itself. Default 10 s.
    pub coalesce_wait: Duration,
    /// How long shutdown waits for in-flight requests. Default 10 s.
    pub shutdown_grace: Duration,
    /// Store responses carrying `Set-Cookie`. Default false, as Varnish's builtin VCL.
    pub store_set_cookie: bool,
    /// How long past its freshness an object may be served when the origin fails (Varnish's
    /// `default_grace`). Never applies to responses that forbid stale serving. Default 10 s.
    pub grace: Duration,
    /// How long past freshness and grace an object with a validator is kept for conditional
    /// revalidation (Varnish's `default_keep`). Default 10 min.
    pub keep: Duration,
    /// Ignore the request's `Cache-Control` / `Pragma` (clients cannot force refreshes).
    pub ignore_request_cache_control: bool,
    /// The targeted cache-control field (RFC 9213) that overrides `Cache-Control` for this
    /// cache and is not forwarded to clients. Default `CDN-Cache-Control`; `None` disables it.
    pub targeted_cache_control: Option<HeaderName>,
    /// Access log format.
    pub log_format: LogFormat,
    /// Address of the admin API (`-T`); `None` disables it. `Config::default()` leaves it off so
    /// embedded and test servers open no second port; the `edgecache` binary defaults to
    /// `127.0.0.1:6082`, as varnishd's `-T` does.
    pub admin_listen: Option<SocketAddr>,
    /// File holding the admin API's bearer token (`--admin-token-file`). Required when
    /// `admin_listen` is not a loopback address; when given, every admin request must carry it.
    pub admin_token_file: Option<PathBuf>,
    /// Reload when the policy file or a file it includes changes. Default true (`--no-watch`
    /// turns it off; SIGHUP and `POST /reload` still reload).
    pub watch_policy: bool,
    /// Sandbox limits for every WebAssembly plugin: linear memory per instance (default
    /// 16 MiB, `--plugin-memory`) and CPU time per callback (default 5 ms, `--plugin-deadline`).
    pub plugin_limits: crate::plugin::Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 8080))],
            backend: None,
            policy: None,
            cache_size: 256 * 1024 * 1024,
            max_object_size: 16 * 1024 * 1024,
            default_ttl: Duration::ZERO,
            threads: None,
            timeouts: BackendTimeouts::default(),
            purge_allow: vec![
                "127.0.0.0/8".parse().expect("literal"),
                "::1/128".parse().expect("literal"),
            ],
            cache_status_header: HeaderName::from_static("x-cache"),
            hit_for_pass_ttl: Duration::from_secs(120),
            coalesce_wait: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            store_set_cookie: false,
            grace: Duration::from_secs(10),
            keep: Duration::from_secs(600),
            ignore_request_cache_control: false,
            targeted_cache_control: Some(HeaderName::from_static("cdn-cache-control")),
            log_format: LogFormat::Compact,
            admin_listen: None,
            admin_token_file: None,
            watch_policy: true,
            plugin_limits: crate::plugin::Limits::default(),
        }
    }
}

/// More worker threads than this is a typo: each reserves its own stack.
const MAX_THREADS: usize = 1024;

impl Config {
    /// Checks cross-field rules that single values cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() {
            return Err(ConfigError::new(
                "listen (-a)",
                "no listen address",
                "one or more HOST:PORT",
            ));
        }
        if let Some(threads) = self.threads.filter(|n| !(1..=MAX_THREADS).contains(n)) {
            return Err(ConfigError::new(
                "threads (--threads)",
                format!("{threads} worker threads"),
                format!("1 to {MAX_THREADS}; the default is one per core"),
            ));
        }
        let mut seen = Vec::with_capacity(self.listen.len());
        for address in &self.listen {
            if seen.contains(&address) {
                return Err(ConfigError::new(
                    "listen (-a)",
                    format!("{address} is listed twice"),
                    "each listen address once",
                ));
            }
            seen.push(address);
        }
        if self.backend.is_none() && self.policy.is_none() {
            return Err(ConfigError::new(
                "backend (-b)",
                "no origin given",
                "-b HOST:PORT, or a policy (-f FILE.vcl) that declares a backend",
            ));
        }
        if self.max_object_size > self.cache_size {
            return Err(ConfigError::new(
                "max_object_size",
                format!(
                    "{} is larger than the cache size {}",
                    self.max_object_size, self.cache_size
                ),
                "a size no larger than -s",
            ));
        }
        if let Some(admin) = self.admin_listen {
            if !admin.ip().to_canonical().is_loopback() && self.admin_token_file.is_none() {
                return Err(ConfigError::new(
                    "admin_listen (-T)",
                    format!("{admin} is not a loopback address and no admin token file was given"),
                    "a loopback address such as 127.0.0.1:6082, \
                     or --admin-token-file FILE to require a bearer token",
                ));
            }
        }
        Ok(())
    }
}
