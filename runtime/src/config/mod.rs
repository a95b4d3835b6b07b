//! Validated runtime settings.
//!
//! Owns the parsing of human-written values (sizes such as `256m`, durations such as `120` or
//! `1.5s`, CIDR lists) and the TOML file format. It is a leaf module: the CLI in `src/main.rs`
//! fills a [`Config`] from flags and `--config`; everything else reads it. Every error names the
//! flag or key and says what is accepted.

mod file;
mod log_format;
mod parse;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;
use ipnet::IpNet;

pub use file::FileConfig;
pub use log_format::{parse_log_format, LogField, NcsaFormat, NCSA_COMBINED};
pub use parse::{parse_cidr_list, parse_duration, parse_listen, parse_size, parse_storage};
pub use tls::{parse_certificate_pair, CertificateFiles, TlsSettings};

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

/// One `-a` listener: `IP:PORT` or `:PORT`, then options as varnishd writes them (`,PROXY`; `,tls` for TLS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenSpec {
    pub addr: SocketAddr,
    /// Every connection starts with a PROXY protocol v1 or v2 header (HAProxy's `send-proxy`,
    /// `send-proxy-v2`) naming the real client; one without it is closed.
    pub proxy_protocol: bool,
    /// TLS is terminated on this listener.
    pub tls: bool,
}

impl From<SocketAddr> for ListenSpec {
    /// A plain HTTP/1.1 + h2c listener.
    fn from(addr: SocketAddr) -> Self {
        ListenSpec {
            addr,
            proxy_protocol: false,
            tls: false,
        }
    }
}

impl std::fmt::Display for ListenSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr)?;
        if self.proxy_protocol {
            f.write_str(",PROXY")?;
        }
        if self.tls {
            f.write_str(",tls")?;
        }
        Ok(())
    }
}

/// Access log line format.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One compact human-readable line per request.
    #[default]
    Compact,
    /// One JSON object per request.
    Json,
    /// NCSA lines as varnishncsa writes them, one per request on stdout (or the `access_log`
    /// file), other logs compact on stderr: `ncsa`/`combined` is varnishncsa's default
    /// (Apache's combined format), or a format string of its `%` codes.
    Ncsa(std::sync::Arc<NcsaFormat>),
}

/// Who may make edgecache drop stored responses by sending an unsafe method (`POST`, `PUT`,
/// `DELETE`, `PATCH`, any unknown method) that the origin answers with 2xx or 3xx (RFC 9111 §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InvalidateOnUnsafe {
    /// Every client, as RFC 9111 §4.4 has it; in front of the public, anyone can then evict any
    /// page whose URL the origin answers a `POST` for.
    All,
    /// Only clients in `purge_allow`, the networks trusted to `PURGE`.
    #[default]
    Allowed,
    /// No one: only `PURGE`, bans, the admin API and expiry remove objects.
    Off,
}

impl std::str::FromStr for InvalidateOnUnsafe {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "all" => Ok(InvalidateOnUnsafe::All),
            "allowed" => Ok(InvalidateOnUnsafe::Allowed),
            "off" => Ok(InvalidateOnUnsafe::Off),
            other => Err(format!("`{other}` is not all, allowed or off")),
        }
    }
}

/// Which objects the cache takes in once it is full (`--cache-admission`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CacheAdmission {
    /// Every storable response is stored; the least recently used objects make room. What
    /// Varnish (and nginx's cache manager) do, so an operator coming from them gets the objects
    /// they expect in the cache. Default.
    #[default]
    Lru,
    /// moka's TinyLFU: a new object gets in only if it is asked for more often than the objects
    /// it would push out. Keeps a burst of one-off URLs from flushing a hot set, but refuses
    /// nearly every large object into a full cache (one large object evicts many small ones).
    TinyLfu,
}

impl std::str::FromStr for CacheAdmission {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "lru" => Ok(CacheAdmission::Lru),
            "tinylfu" => Ok(CacheAdmission::TinyLfu),
            other => Err(format!("`{other}` is not lru or tinylfu")),
        }
    }
}

/// How `--threads` workers share the listeners (`--worker-model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WorkerModel {
    /// One multi-threaded runtime: every thread takes connections from one listening socket
    /// per listener and may run any connection's tasks (tokio's work stealing). Default.
    #[default]
    Shared,
    /// nginx's and HAProxy's worker model: each of the `threads` workers is an OS thread with
    /// a single-threaded runtime and its own `SO_REUSEPORT` socket on every listener, so the
    /// kernel spreads new connections over the workers and a connection stays on the worker
    /// that accepted it. The cache, the policy, the backends and the counters are shared;
    /// the admin API, the watcher, probes and the ban lurker run on the main thread.
    ReusePort,
}

impl std::str::FromStr for WorkerModel {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "shared" => Ok(WorkerModel::Shared),
            "reuseport" => Ok(WorkerModel::ReusePort),
            other => Err(format!("`{other}` is not shared or reuseport")),
        }
    }
}

/// Parses `--finish-abandoned-fills`: `on` (always finish, as Varnish), `off` (stop at once)
/// or a size (finish when at most that many bytes are still to come).
pub fn parse_finish_abandoned_fills(text: &str) -> Result<u64, String> {
    match text {
        "on" => Ok(u64::MAX),
        "off" => Ok(0),
        size => parse_size(size).map_err(|error| format!("`{size}` is not on, off or a size ({error})")),
    }
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

/// Timeouts for client connections; each closes the connection (or ends the request) of a
/// client that is too slow, so slow clients cannot hold connections open (slowloris).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientTimeouts {
    /// From the first byte of a request head to its end (`--header-timeout`). Default 10 s;
    /// nginx's `client_header_timeout` is 60 s, Varnish's `timeout_idle` (5 s) covers the wait
    /// for a request and its head together.
    pub header: Duration,
    /// How long a connection with no request in flight stays open: before its first request
    /// and between keep-alive requests (`--idle-timeout`). Default 5 s, Varnish's
    /// `timeout_idle`; nginx's `keepalive_timeout` is 75 s. HTTP/2 connections get GOAWAY.
    pub idle: Duration,
    /// Longest silence between two reads of a request body (`--body-timeout`): the request ends
    /// with 408 and its origin connection is closed. Default 60 s, nginx's
    /// `client_body_timeout`.
    pub body: Duration,
    /// How long one response may take to send, from its head to its last byte
    /// (`--send-timeout`): past it the connection is closed. Default 600 s, Varnish's
    /// `send_timeout`; raise it for downloads that take longer.
    pub send: Duration,
    /// How long what is being sent may wait for the client to take it (`--idle-send-timeout`):
    /// a client that stops reading is closed after this. Default 60 s, Varnish's
    /// `idle_send_timeout` (which Varnish extends until `send_timeout`) and nginx's
    /// `send_timeout`.
    pub idle_send: Duration,
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        ClientTimeouts {
            header: Duration::from_secs(10),
            idle: Duration::from_secs(5),
            body: Duration::from_secs(60),
            send: Duration::from_secs(600),
            idle_send: Duration::from_secs(60),
        }
    }
}

/// How large a client's request head may be; past them the request is refused before the
/// policy or the origin sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Any one header field (`name: value`), and the request line: a field over it gets 431,
    /// a longer request target 414 (`--max-header-size`). Default 8 KiB, Varnish's
    /// `http_req_hdr_len`; nginx's `large_client_header_buffers` is 8 KiB too.
    pub max_header_size: usize,
    /// The whole head: request line and every field; past it 431 (`--max-request-head`).
    /// Default 32 KiB, Varnish's `http_req_size`. For HTTP/2 it is the advertised
    /// `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub max_request_head: usize,
    /// Header fields in one request; past it 431 (`--max-headers`). Default 100, hyper's own
    /// HTTP/1 limit: above Varnish's `http_max_hdr` (64, of which its request line takes 5),
    /// so nothing Varnish accepts is refused, and far above the 15 to 30 fields browsers and
    /// proxies in front of edgecache send. Above 100, hyper allocates its parse array per
    /// request.
    pub max_headers: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_header_size: 8 * 1024,
            max_request_head: 32 * 1024,
            max_headers: 100,
        }
    }
}

/// Per-connection caps on what an HTTP/2 client may make edgecache do for nothing ("rapid
/// reset", CVE-2023-44487). Past either, the connection gets GOAWAY and its new streams 429.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H2Limits {
    /// Origin fetches started by streams the client reset before their response, per
    /// `rapid_reset_period` (`--h2-rapid-reset-limit`; 0 turns the cap off). Default 100, as
    /// Varnish's `h2_rapid_reset_limit` (which counts every early reset).
    pub rapid_reset_limit: u32,
    /// The period over which `rapid_reset_limit` refills (`--h2-rapid-reset-period`).
    /// Default 60 s, Varnish's `h2_rapid_reset_period`.
    pub rapid_reset_period: Duration,
    /// New streams per second (`--h2-max-streams-per-second`; 0 turns the cap off). Default
    /// 100,000: above what one connection of a multiplexing load balancer can get answered at
    /// full load (one worker serves some 30,000 small hits a second on one connection, which a
    /// cap of 20,000 cut off), far below a reset flood.
    pub max_streams_per_second: u32,
    /// Streams open at once, advertised as `SETTINGS_MAX_CONCURRENT_STREAMS`
    /// (`--h2-max-concurrent-streams`). Default 100, Varnish's `h2_max_concurrent_streams`
    /// (hyper's own is 200; nginx's `http2_max_concurrent_streams` is 128).
    pub max_concurrent_streams: u32,
}

impl Default for H2Limits {
    fn default() -> Self {
        H2Limits {
            rapid_reset_limit: 100,
            rapid_reset_period: Duration::from_secs(60),
            max_streams_per_second: 100_000,
            max_concurrent_streams: 100,
        }
    }
}

/// Everything the runtime needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Listeners (HTTP/1.1 and h2c on each, `,PROXY` / `,tls` as asked). Default `127.0.0.1:8080`.
    pub listen: Vec<ListenSpec>,
    /// Default origin as `host:port` (`https://host[:port]` for TLS), used when the policy
    /// declares no backend.
    pub backend: Option<String>,
    /// `--backend-ca`: PEM CA certificates an `https://` `backend`'s certificate must chain
    /// to. Default `None`: the system's trusted roots.
    pub backend_ca: Option<PathBuf>,
    /// Policy file (`*.vcl`); `None` runs Varnish's builtin behaviour.
    pub policy: Option<PathBuf>,
    /// `--policy-format`: how the policy file is written, VCL or `.htaccess` rewrite rules.
    /// Default `None`: by its name (`.htaccess` and `*.htaccess` are rewrite rules, any other
    /// file VCL).
    pub policy_format: Option<policy_lang::PolicyFormat>,
    /// Cache capacity in bytes (headers + body of every object). Default 256 MiB.
    pub cache_size: u64,
    /// Largest object stored; larger responses stream through: a body without
    /// `Content-Length` that grows past it is not stored, and from then on only what its
    /// slowest reader has not read yet is kept. Default 16 MiB.
    pub max_object_size: u64,
    /// The slices representations are stored by (`--slice-size`, nginx's `slice`): a `GET`
    /// with one `Range` on a miss is fetched by the slices that hold it, and a response larger
    /// than `max_object_size` with a strong validator is fetched by slices the next time, each
    /// stored as an object of its own (RFC 9111 §3.3, §3.4). At most `max_object_size` is
    /// used. `0` turns this off: ranges are cut from whole objects only. Default 1 MiB.
    pub slice_size: u64,
    /// Which objects a full cache takes in (`--cache-admission`). Default LRU, as Varnish.
    pub cache_admission: CacheAdmission,
    /// How many more bytes a cache fill whose last client went away may read to complete its
    /// object (`--finish-abandoned-fills`): `u64::MAX` (`on`) finishes every fill, as Varnish
    /// does; `0` (`off`) stops at once and closes the origin connection; a size finishes only
    /// fills with at most that much left (a body of unknown length is stopped once that much
    /// more arrived). Default `on`: the object is storable and at most `max_object_size`, and
    /// the next client gets a hit. Fills of bodies past `max_object_size` always stop.
    pub finish_abandoned_fills: u64,
    /// TTL for storable responses without freshness information. Default 0 (RFC 9111).
    pub default_ttl: Duration,
    /// Worker threads; `None` = one per core.
    pub threads: Option<usize>,
    /// How the workers share the listeners (`--worker-model`). Default
    /// [`WorkerModel::Shared`].
    pub worker_model: WorkerModel,
    /// Origin timeouts.
    pub timeouts: BackendTimeouts,
    /// Client connection timeouts.
    pub client_timeouts: ClientTimeouts,
    /// Open client connections, on all listeners together (`--max-connections`). Past it the
    /// listeners stop accepting: new clients wait in the kernel's listen backlog until a
    /// connection closes, as HAProxy's `maxconn`. Default 10,000; keep it below half of the
    /// file descriptor limit (`ulimit -n`), since each client may hold an origin connection too.
    pub max_connections: usize,
    /// How long a pipe (`return (pipe)`, a WebSocket upgrade) may carry no byte either way
    /// before both its connections are closed (`--pipe-timeout`). Default 60 s, Varnish's
    /// `pipe_timeout`.
    pub pipe_timeout: Duration,
    /// Pipes open at once (`--max-pipes`); past it a request to pipe gets 503. Each holds a
    /// client and an origin connection, outside `max_connections` once it is a tunnel.
    /// Default 5,000.
    pub max_pipes: usize,
    /// How deep ESI includes nest (`--max-esi-depth`): a page at this `req.esi_level` makes
    /// no more includes (they fail). Default 5, Varnish's `max_esi_depth`.
    pub max_esi_depth: u32,
    /// How often a backend whose `.host` is a name is looked up again (`--dns-ttl`); new
    /// addresses take new connections without a reload. Default 30 s.
    pub dns_ttl: Duration,
    /// `--hosts-file FILE`: names looked up here (`/etc/hosts` format, read at every lookup)
    /// before the system resolver, for backend `.host` names and ACL entries. Default `None`.
    pub hosts_file: Option<PathBuf>,
    /// Request head size limits (Varnish's `http_req_hdr_len`, `http_req_size`).
    pub request_limits: RequestLimits,
    /// HTTP/2 stream and reset caps per connection.
    pub h2_limits: H2Limits,
    /// Client networks allowed to send `PURGE`. Default loopback only.
    pub purge_allow: Vec<IpNet>,
    /// Who invalidates stored responses by unsafe methods (`--invalidate-on-unsafe`). Default
    /// `Allowed`: the clients in `purge_allow`.
    pub invalidate_on_unsafe: InvalidateOnUnsafe,
    /// Response header that reports the cache result. Default `x-cache`.
    pub cache_status_header: HeaderName,
    /// How long an uncacheable key is remembered as hit-for-pass. Default 120 s (Varnish).
    pub hit_for_pass_ttl: Duration,
    /// How long a request waits on another's fetch of the same key before going itself. Default 10 s.
    pub coalesce_wait: Duration,
    /// How long shutdown waits for in-flight requests. Default 10 s.
    pub shutdown_grace: Duration,
    /// `--health-path`: the path a load balancer's health check asks for on the serving
    /// listeners (`GET`/`HEAD`), answered before the policy and never cached or logged: 200
    /// while serving, 503 while draining. Default `/healthz`; `None` passes it on like any path.
    pub health_path: Option<String>,
    /// `--drain-time`: how long a graceful shutdown (SIGTERM, SIGINT) answers the health path
    /// with 503 while still serving, before the listeners close and `shutdown_grace` begins,
    /// so a balancer takes this node out before connections are refused. Default 0 s.
    pub drain_time: Duration,
    /// Store responses carrying `Set-Cookie`. Default false, as Varnish's builtin VCL.
    pub store_set_cookie: bool,
    /// `store_post_responses` (`--no-store-post-responses` turns it off): a response to POST
    /// with explicit freshness and a `Content-Location` naming the target URI is stored for
    /// later GETs of that URI (RFC 9110 §9.3.3), without a policy. Default true; Varnish
    /// passes every POST.
    pub store_post_responses: bool,
    /// `--lookup-with-cookie`: the builtin `vcl_recv` looks up requests carrying `Cookie`
    /// instead of passing them (with or without a policy, where the builtin decides). Default
    /// false: passed, as Varnish's `vcl_req_cookie` does.
    pub lookup_with_cookie: bool,
    /// `--lookup-with-authorization`: the builtin `vcl_recv` looks up requests carrying
    /// `Authorization` instead of passing them; a response to one is stored only when it
    /// allows sharing (`public`, `s-maxage`, `must-revalidate`, RFC 9111 §3.5). Default false:
    /// passed, as Varnish's `vcl_req_authorization` does.
    pub lookup_with_authorization: bool,
    /// How long past its freshness an object may be served when the origin fails (Varnish's
    /// `default_grace`). Never applies to responses that forbid stale serving. Default 10 s.
    pub grace: Duration,
    /// How long past freshness and grace an object with a validator is kept for conditional
    /// revalidation (Varnish's `default_keep`). Default 10 min.
    pub keep: Duration,
    /// `--ban-lurker-rate`: stored objects the ban lurker tests per second at most against the
    /// bans on `obj.*` (see `cache::bans::lurker`); 0 turns it off (Varnish's
    /// `ban_lurker_sleep=0`). Default 100,000: Varnish's `ban_lurker_batch` (1000) per
    /// `ban_lurker_sleep` (10 ms).
    pub ban_lurker_rate: u64,
    /// `--ban-lurker-age`: bans younger than this are left to lookups (a burst of bans is
    /// lurked once it is over). Default 60 s (Varnish's `ban_lurker_age`).
    pub ban_lurker_age: Duration,
    /// Ignore the request's `Cache-Control` / `Pragma` (clients cannot force refreshes).
    pub ignore_request_cache_control: bool,
    /// The targeted cache-control field (RFC 9213) that overrides `Cache-Control` for this
    /// cache. Default `CDN-Cache-Control`; `None` disables it.
    pub targeted_cache_control: Option<HeaderName>,
    /// `--strip-targeted-cache-control`: remove the targeted field from responses to clients
    /// (and from stored objects). Default false: RFC 9213 §2.1 lets a cache pass it on, and
    /// the downstream caches of the same CDN tier need it.
    pub strip_targeted_cache_control: bool,
    /// `--surrogate-key-headers`: the response headers whose keys (separated by commas or
    /// blanks) index objects for purges by key (`xkey.purge`, `POST /purge?key=`). Default
    /// `xkey`, `Surrogate-Key`, `Cache-Tag`; empty turns the index off.
    pub surrogate_key_headers: Vec<HeaderName>,
    /// `--keep-surrogate-key-headers`: deliver the key headers to clients. Default false: they
    /// are removed before delivery, as Fastly does (they name the site's internals).
    pub keep_surrogate_key_headers: bool,
    /// `--show-backend-errors`: the page of a failed fetch names the backend, its address and
    /// the operating system's error. Default false: clients see the request id and a generic
    /// cause, the log line the rest (addresses and errors are for operators, not visitors).
    pub show_backend_errors: bool,
    /// Access log format.
    pub log_format: LogFormat,
    /// `--access-log FILE`: where access lines go instead of stderr (stdout for NCSA),
    /// appended to and reopened on SIGUSR1. Default `None`.
    pub access_log: Option<PathBuf>,
    /// Address of the admin API (`-T`); `None` disables it. `Config::default()` leaves it off so
    /// embedded and test servers open no second port; the `edgecache` binary defaults to
    /// `127.0.0.1:6082`, as varnishd's `-T` does.
    pub admin_listen: Option<SocketAddr>,
    /// File holding the admin API's bearer token (`--admin-token-file`). Required when
    /// `admin_listen` is not a loopback address; when given, every admin request must carry it.
    pub admin_token_file: Option<PathBuf>,
    /// `--peers HOST:PORT,...`: the admin API addresses of the other nodes of a tier; purges
    /// and bans accepted by this node's admin API are forwarded to them with the admin token
    /// (`admin::peers`). A name is looked up again every `dns_ttl` and may resolve to every
    /// node (this one is skipped). Default empty: nothing is forwarded.
    pub peers: Vec<String>,
    /// `--peer-retry-time`: how long a peer that does not answer (or answers 5xx) is tried
    /// again, with a doubling pause, before the answer names it unreachable. Default 5 s.
    pub peer_retry_time: Duration,
    /// Reload when the policy file or a file it includes changes. Default true (`--no-watch`
    /// turns it off; SIGHUP and `POST /reload` still reload).
    pub watch_policy: bool,
    /// Sandbox limits for every WebAssembly plugin: linear memory per instance (default
    /// 16 MiB, `--plugin-memory`) and CPU time per callback (default 5 ms, `--plugin-deadline`).
    pub plugin_limits: crate::plugin::Limits,
    /// How long a plugin may keep a request paused (waiting for an outbound call or a timer)
    /// before the request fails as the plugin's `.on_error` says. Default 30 s
    /// (`--plugin-pause-timeout`).
    pub plugin_pause_timeout: Duration,
    /// Certificates and the handshake timeout of the `,tls` listeners (see [`TlsSettings`]).
    pub tls: TlsSettings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 8080)).into()],
            backend: None,
            backend_ca: None,
            policy: None,
            policy_format: None,
            cache_size: 256 * 1024 * 1024,
            max_object_size: 16 * 1024 * 1024,
            slice_size: 1024 * 1024,
            cache_admission: CacheAdmission::Lru,
            finish_abandoned_fills: u64::MAX,
            default_ttl: Duration::ZERO,
            threads: None,
            worker_model: WorkerModel::Shared,
            timeouts: BackendTimeouts::default(),
            client_timeouts: ClientTimeouts::default(),
            max_connections: 10_000,
            pipe_timeout: Duration::from_secs(60),
            max_pipes: 5_000,
            max_esi_depth: 5,
            dns_ttl: Duration::from_secs(30),
            hosts_file: None,
            request_limits: RequestLimits::default(),
            h2_limits: H2Limits::default(),
            purge_allow: vec![
                "127.0.0.0/8".parse().expect("literal"),
                "::1/128".parse().expect("literal"),
            ],
            invalidate_on_unsafe: InvalidateOnUnsafe::default(),
            cache_status_header: HeaderName::from_static("x-cache"),
            hit_for_pass_ttl: Duration::from_secs(120),
            coalesce_wait: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            health_path: Some(HEALTH_PATH.to_string()),
            drain_time: Duration::ZERO,
            store_set_cookie: false,
            store_post_responses: true,
            lookup_with_cookie: false,
            lookup_with_authorization: false,
            grace: Duration::from_secs(10),
            keep: Duration::from_secs(600),
            ban_lurker_rate: DEFAULT_BAN_LURKER_RATE,
            ban_lurker_age: Duration::from_secs(60),
            ignore_request_cache_control: false,
            targeted_cache_control: Some(HeaderName::from_static("cdn-cache-control")),
            strip_targeted_cache_control: false,
            surrogate_key_headers: SURROGATE_KEY_HEADERS.map(HeaderName::from_static).to_vec(),
            keep_surrogate_key_headers: false,
            show_backend_errors: false,
            log_format: LogFormat::Compact,
            admin_listen: None,
            admin_token_file: None,
            peers: Vec::new(),
            peer_retry_time: Duration::from_secs(5),
            access_log: None,
            watch_policy: true,
            plugin_limits: crate::plugin::Limits::default(),
            plugin_pause_timeout: crate::plugin::DEFAULT_PAUSE_TIMEOUT,
            tls: TlsSettings::default(),
        }
    }
}

/// [`Config::ban_lurker_rate`]'s default: Varnish's `ban_lurker_batch` objects per
/// `ban_lurker_sleep` (1000 per 10 ms).
pub const DEFAULT_BAN_LURKER_RATE: u64 = 100_000;

/// More worker threads than this is a typo: each reserves its own stack.
const MAX_THREADS: usize = 1024;

/// More client connections than this is a typo: it is Linux's default ceiling on a process's
/// file descriptors (`fs.nr_open`).
const MAX_CONNECTIONS: usize = 1 << 20;

/// The deepest `--max-esi-depth` accepted: each level holds a request open while its include
/// is assembled, so a deeper chain is a mistake rather than a page.
const MAX_ESI_DEPTH: u32 = 100;

/// The smallest `--slice-size` accepted (but 0, off): each slice is a request to the origin
/// and an object in the cache, so tiny slices multiply both.
const MIN_SLICE_SIZE: u64 = 64 * 1024;

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
        if let Some(path) = self.health_path.as_deref().filter(|path| !is_plain_path(path)) {
            return Err(ConfigError::new(
                "health_path (--health-path)",
                format!("`{path}` is not a path"),
                "a path such as /healthz (no query), or \"off\"",
            ));
        }
        if let Some(threads) = self.threads.filter(|n| !(1..=MAX_THREADS).contains(n)) {
            return Err(ConfigError::new(
                "threads (--threads)",
                format!("{threads} worker threads"),
                format!("1 to {MAX_THREADS}; the default is one per core"),
            ));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(ConfigError::new(
                "max_connections (--max-connections)",
                format!("{} client connections", self.max_connections),
                format!("1 to {MAX_CONNECTIONS}"),
            ));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_pipes) {
            return Err(ConfigError::new(
                "max_pipes (--max-pipes)",
                format!("{} pipes", self.max_pipes),
                format!("1 to {MAX_CONNECTIONS}"),
            ));
        }
        if self.max_esi_depth > MAX_ESI_DEPTH {
            return Err(ConfigError::new(
                "max_esi_depth (--max-esi-depth)",
                format!("{} levels", self.max_esi_depth),
                format!("0 to {MAX_ESI_DEPTH}"),
            ));
        }
        if self.slice_size != 0 && self.slice_size < MIN_SLICE_SIZE {
            return Err(ConfigError::new(
                "slice_size (--slice-size)",
                format!(
                    "{} bytes would ask the origin for a large file in that many pieces",
                    self.slice_size
                ),
                "0 (off) or at least 64k",
            ));
        }
        if self.dns_ttl.is_zero() {
            return Err(ConfigError::new(
                "dns_ttl (--dns-ttl)",
                "0 would look backend names up without pause",
                "a duration above 0, e.g. 30s",
            ));
        }
        for (key, timeout) in [
            ("pipe_timeout (--pipe-timeout)", self.pipe_timeout),
            ("header_timeout (--header-timeout)", self.client_timeouts.header),
            ("idle_timeout (--idle-timeout)", self.client_timeouts.idle),
            ("body_timeout (--body-timeout)", self.client_timeouts.body),
            ("send_timeout (--send-timeout)", self.client_timeouts.send),
            (
                "idle_send_timeout (--idle-send-timeout)",
                self.client_timeouts.idle_send,
            ),
        ] {
            if timeout.is_zero() {
                return Err(ConfigError::new(
                    key,
                    "0 would close every client at once",
                    "a duration above 0, e.g. 10s",
                ));
            }
        }
        self.request_limits.validate()?;
        self.h2_limits.validate()?;
        self.tls.validate(self.listen.iter().any(|spec| spec.tls))?;
        let mut seen = Vec::with_capacity(self.listen.len());
        for spec in &self.listen {
            let address = spec.addr;
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
        for peer in &self.peers {
            split_host_port(peer).map_err(|problem| {
                ConfigError::new(
                    "peers (--peers)",
                    problem,
                    "HOST:PORT,... (peers' admin API addresses)",
                )
            })?;
        }
        if !self.peers.is_empty() && self.admin_listen.is_none() {
            return Err(ConfigError::new(
                "peers (--peers)",
                "peers are given but the admin API is off",
                "an admin address (-T) to accept the purges that are forwarded",
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

/// A peer's `host:port` (`[v6]:port` for an IPv6 address) split: checked here, used by
/// `admin::peers`; the error says what is accepted.
pub(crate) fn split_host_port(entry: &str) -> Result<(&str, u16), String> {
    let (host, port) = entry
        .rsplit_once(':')
        .ok_or_else(|| format!("`{entry}` has no port: HOST:PORT of a peer's admin API"))?;
    let port = port
        .parse()
        .map_err(|_| format!("`{entry}`: `{port}` is not a port number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("`{entry}` has no host: HOST:PORT of a peer's admin API"));
    }
    Ok((host, port))
}

/// hyper buffers no less than this for a request head.
const MIN_REQUEST_HEAD: usize = 8 * 1024;
/// A head larger than this is not a request any client sends; the buffer is held per connection.
const MAX_REQUEST_HEAD: usize = 1024 * 1024;
/// Shorter than this, ordinary cookies and URLs would be refused.
const MIN_HEADER_SIZE: usize = 1024;
/// Fewer than this, browsers' ordinary requests (15 to 30 fields) could be refused.
const MIN_HEADERS: usize = 32;
/// More than this is not a request any client sends; hyper allocates the array per request.
const MAX_HEADERS: usize = 1024;
/// More than this lets one connection hold that many origin fetches at once.
const MAX_CONCURRENT_STREAMS: u32 = 10_000;

impl RequestLimits {
    fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_REQUEST_HEAD..=MAX_REQUEST_HEAD).contains(&self.max_request_head) {
            return Err(ConfigError::new(
                "max_request_head (--max-request-head)",
                format!("{} bytes", self.max_request_head),
                format!(
                    "{}k to {}m; the default is 32k",
                    MIN_REQUEST_HEAD >> 10,
                    MAX_REQUEST_HEAD >> 20
                ),
            ));
        }
        if !(MIN_HEADER_SIZE..=self.max_request_head).contains(&self.max_header_size) {
            return Err(ConfigError::new(
                "max_header_size (--max-header-size)",
                format!("{} bytes", self.max_header_size),
                format!(
                    "{}k up to max_request_head ({} bytes); the default is 8k",
                    MIN_HEADER_SIZE >> 10,
                    self.max_request_head
                ),
            ));
        }
        if !(MIN_HEADERS..=MAX_HEADERS).contains(&self.max_headers) {
            return Err(ConfigError::new(
                "max_headers (--max-headers)",
                format!("{} header fields", self.max_headers),
                format!("{MIN_HEADERS} to {MAX_HEADERS}; the default is 100"),
            ));
        }
        Ok(())
    }
}

impl H2Limits {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.rapid_reset_limit > 0 && self.rapid_reset_period.is_zero() {
            return Err(ConfigError::new(
                "h2_rapid_reset_period (--h2-rapid-reset-period)",
                "0 would never refill the budget of --h2-rapid-reset-limit",
                "a duration above 0, e.g. 60s (or --h2-rapid-reset-limit 0 to turn the cap off)",
            ));
        }
        if !(1..=MAX_CONCURRENT_STREAMS).contains(&self.max_concurrent_streams) {
            return Err(ConfigError::new(
                "h2_max_concurrent_streams (--h2-max-concurrent-streams)",
                format!("{} streams", self.max_concurrent_streams),
                format!("1 to {MAX_CONCURRENT_STREAMS}; the default is 100"),
            ));
        }
        Ok(())
    }
}

/// The default `--health-path`.
pub const HEALTH_PATH: &str = "/healthz";

/// The surrogate-key headers read by default: vmod xkey's, Fastly's and Cloudflare's.
pub const SURROGATE_KEY_HEADERS: [&str; 3] = ["xkey", "surrogate-key", "cache-tag"];

/// `--surrogate-key-headers` / `surrogate_key_headers` (named `key` in errors): header names
/// separated by commas; `""` or `off` reads none.
pub fn surrogate_key_headers_setting(list: &str, key: &str) -> Result<Vec<HeaderName>, ConfigError> {
    if list.trim() == "off" {
        return Ok(Vec::new());
    }
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            name.parse().map_err(|_| {
                ConfigError::new(
                    key,
                    format!("`{name}` is not a header name"),
                    "header names separated by commas, such as \"xkey,Surrogate-Key,Cache-Tag\", or \"off\"",
                )
            })
        })
        .collect()
}

/// `--health-path` / `health_path` as written: `off` or `""` turns the health answer off.
pub fn health_path_setting(value: &str) -> Option<String> {
    match value {
        "" | "off" => None,
        path => Some(path.to_string()),
    }
}

/// An absolute path without a query or fragment, as a request's path is compared with it.
fn is_plain_path(path: &str) -> bool {
    path.starts_with('/')
        && path
            .parse::<http::uri::PathAndQuery>()
            .is_ok_and(|parsed| parsed.query().is_none())
        && !path.contains('#')
}
