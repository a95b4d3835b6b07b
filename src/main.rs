//! The `edgecache` command: parse arguments, build the runtime, run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use edgecache_runtime::config::{
    health_path_setting, parse_certificate_pair, parse_cidr_list, parse_duration,
    parse_finish_abandoned_fills, parse_listen, parse_log_format, parse_size, parse_storage, CacheAdmission,
    CertificateFiles, FileConfig, InvalidateOnUnsafe, ListenSpec, LogFormat, WorkerModel,
};
use edgecache_runtime::{Config, ConfigError};
use policy_lang::PolicyFormat;

mod allocator;

/// mimalloc: fewer instructions per request than the system allocator on every path measured
/// (docs/BENCHMARKS.md, "Session 7: allocator and LTO"). The library and its tests keep the
/// system allocator.
#[global_allocator]
static ALLOCATOR: allocator::MiMalloc = allocator::MiMalloc;

/// `--version`: the release, the commit and the build profile (stamped by build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("EDGECACHE_COMMIT"),
    ", ",
    env!("EDGECACHE_PROFILE"),
    " build)"
);

/// A caching reverse proxy with a VCL-like policy language.
#[derive(Parser)]
#[command(name = "edgecache", version = VERSION, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Check policy files: print diagnostics; exit 1 when a file has errors, 0 when clean.
    Check {
        /// The files are include fragments (no `vcl 4.x;` line): names they use but do not
        /// declare (subs, ACLs, backends, objects, imports) are notes, not errors.
        #[arg(long)]
        fragment: bool,
        /// Print the VCL policy equivalent to each `.htaccess` rewrite rules file on stdout
        /// (load it with -f: it behaves the same); diagnostics go to stderr.
        #[arg(long, conflicts_with = "fragment")]
        explain: bool,
        /// How the files are written: vcl or rewrite (.htaccess rules). Default: by file name.
        #[arg(long = "policy-format", value_name = "vcl|rewrite")]
        policy_format: Option<PolicyFormat>,
        /// Policy files (VCL subset, or `.htaccess` rewrite rules).
        #[arg(required = true, value_name = "FILE.vcl")]
        files: Vec<PathBuf>,
    },
    /// Start a demo origin and the proxy in front of it, and print URLs to try.
    Demo {
        /// Address for the proxy.
        #[arg(short = 'a', long = "listen", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
        listen: ListenSpec,
    },
    /// Talk to a running edgecache's admin API: status, stats, metrics, backends, purge, ban, reload.
    Admin(AdminArgs),
    /// Print the manual page (roff) on stdout: `edgecache man > edgecache.1`.
    Man,
    /// Live counters of a running edgecache, as varnishstat: a screen refreshing in place with
    /// rates, or `-1` for one plain dump of every counter.
    Stat(StatArgs),
    /// Request traces of a running edgecache, as varnishlog: the subs each request ran, the
    /// `return` (file:line) that decided each, the cache's answer, the backend fetch and its
    /// timings, printed as requests end until Ctrl-C.
    Log(LogArgs),
}

#[derive(Args)]
struct LogArgs {
    /// Admin API address of the running edgecache; :PORT is that port on this machine.
    #[arg(short = 'T', long = "admin-listen", value_name = "IP:PORT|:PORT", default_value_t = DEFAULT_ADMIN, value_parser = parse_admin_address)]
    address: SocketAddr,
    /// File holding the bearer token, when the server requires one.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Only the requests this varnishlog query selects: `ReqURL ~ "^/api" and RespStatus >= 500`
    /// (tags, `==` `!=` `<` `<=` `>` `>=` `eq` `ne` `~` `!~`, `and` `or` `not`; see
    /// docs/troubleshooting.md).
    #[arg(short = 'q', long = "query", value_name = "QUERY")]
    query: Option<String>,
    /// Stop after this many requests (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

#[derive(Args)]
struct StatArgs {
    /// Admin API address of the running edgecache.
    #[arg(short = 'T', long = "admin-listen", value_name = "IP:PORT", default_value_t = DEFAULT_ADMIN)]
    address: SocketAddr,
    /// File holding the bearer token, when the server requires one.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print every counter once, `name value` per line, and exit (varnishstat -1).
    #[arg(short = '1')]
    once: bool,
    /// Time between screens.
    #[arg(short = 'w', long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
    /// Stop after this many screens (default: until Ctrl-C).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
}

/// The default admin API address (`-T`), as varnishd's.
const DEFAULT_ADMIN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 6082);

#[derive(Args)]
struct AdminArgs {
    /// Admin API address of the running edgecache; :PORT is that port on this machine (a
    /// server started with -T :PORT listens on every interface, loopback included).
    #[arg(short = 'T', long = "admin-listen", value_name = "IP:PORT|:PORT", default_value_t = DEFAULT_ADMIN, value_parser = parse_admin_address)]
    address: SocketAddr,
    /// File holding the bearer token, when the server requires one.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    #[command(subcommand)]
    action: AdminAction,
}

#[derive(Subcommand)]
enum AdminAction {
    /// Version, uptime, active policy (path, hash, loaded at, generation), last reload error.
    Status,
    /// Counters as JSON.
    Stats,
    /// Counters in the Prometheus text format.
    Metrics,
    /// Backends of the active version with their counters.
    Backends,
    /// Remove every variant of a URL (the default cache key: Host + URL), or with --key every
    /// object tagged with a surrogate key.
    Purge {
        /// `/path?query` (under every host, or --host's) or `http://host/path?query`.
        #[arg(required_unless_present = "key", conflicts_with = "key")]
        url: Option<String>,
        /// Host the URL was requested with (as in the client's Host header); without it a
        /// path is purged under every host (a ban on req.url).
        #[arg(long)]
        host: Option<String>,
        /// Surrogate keys, separated by commas: every object whose xkey, Surrogate-Key or
        /// Cache-Tag header names one is purged.
        #[arg(long, value_name = "K1,K2")]
        key: Option<String>,
        /// Make the objects stale instead of removing them: they are served in grace while one
        /// fetch refreshes each.
        #[arg(long)]
        soft: bool,
    },
    /// Ban objects matching a VCL ban expression, e.g. 'req.url ~ "^/news/"'.
    Ban {
        /// The expression; several words are joined with spaces.
        #[arg(required = true, num_args = 1.., value_name = "EXPR")]
        expr: Vec<String>,
    },
    /// The ban list (varnishadm's ban.list): each ban's age, whether the lurker (bans on obj.*)
    /// or lookups apply it, and how many objects it removed.
    #[command(name = "ban.list", alias = "bans")]
    BanList,
    /// Override a backend's health as varnishadm's backend.set_health: sick or healthy whatever
    /// its probe says, auto to follow the probe again. NAME is a backend of the active policy
    /// (`default` for -b), or `*` for every backend.
    #[command(name = "backend.set_health")]
    SetHealth {
        name: String,
        #[arg(value_parser = ["healthy", "sick", "auto"])]
        health: String,
    },
    /// Reload the policy now; prints the new generation or the diagnostics.
    Reload,
    /// Several policies at once, as varnishadm's vcl.load / vcl.use / vcl.label / vcl.list /
    /// vcl.discard.
    Vcl {
        #[command(subcommand)]
        command: VclCommand,
    },
}

#[derive(Subcommand)]
enum VclCommand {
    /// Load FILE as policy NAME (not active until `vcl use`); reloaded when its files change.
    Load { name: String, file: PathBuf },
    /// New requests start on policy NAME (an older one: the rollback).
    Use { name: String },
    /// `return (vcl(LABEL))` goes to policy NAME.
    Label { label: String, name: String },
    /// The loaded policies and labels: active/available/discarded, temperature, busy requests.
    List,
    /// Remove policy or label NAME; a policy is dropped when its last request ends.
    Discard { name: String },
}

#[derive(Args)]
struct ServeArgs {
    /// Listen address (HTTP/1.1 and h2c), or :PORT for every interface; repeat for several.
    /// `,PROXY` after it: connections start with a PROXY protocol v1/v2 header.
    /// Default 127.0.0.1:8080.
    #[arg(short = 'a', long = "listen", value_name = "IP:PORT[,PROXY]", value_parser = parse_listen)]
    listen: Vec<ListenSpec>,
    /// Default origin, used when the policy declares no backend; `https://HOST[:PORT]` talks
    /// TLS to it (certificate verified against the system's roots or --backend-ca).
    #[arg(short = 'b', long = "backend", value_name = "HOST:PORT")]
    backend: Option<String>,
    /// PEM CA certificates the certificate of an `-b https://` origin must chain to, instead
    /// of the system's trusted roots.
    #[arg(long = "backend-ca", value_name = "FILE")]
    backend_ca: Option<PathBuf>,
    /// Policy file (VCL subset, or `.htaccess` LiteSpeed / Apache rewrite rules).
    #[arg(short = 'f', long = "policy", value_name = "FILE.vcl")]
    policy: Option<PathBuf>,
    /// How the policy file is written: vcl or rewrite (LiteSpeed / Apache `.htaccess` rules).
    /// Default: by file name (`.htaccess`, `*.htaccess` are rewrite rules).
    #[arg(long = "policy-format", value_name = "vcl|rewrite")]
    policy_format: Option<PolicyFormat>,
    /// Cache size in bytes; k/m/g suffixes, or as varnishd's -s: malloc,SIZE, default,SIZE,
    /// NAME=malloc,SIZE (the cache is in memory; file storage is refused). Default 256m.
    #[arg(short = 's', long = "cache-size", value_name = "SIZE|malloc,SIZE", value_parser = parse_storage)]
    cache_size: Option<u64>,
    /// TTL for storable responses without freshness information (RFC 9111: 0; Varnish: 120).
    #[arg(short = 't', long = "default-ttl", value_name = "DURATION", value_parser = parse_duration)]
    default_ttl: Option<Duration>,
    /// Largest response stored; larger ones stream through. Default 16m.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_object_size: Option<u64>,
    /// Size of the slices representations are stored by: a GET with one Range on a miss is
    /// fetched by the slices that hold it, and a response over --max-object-size by slices the
    /// next time (nginx's slice). 0 turns this off. Default 1m.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    slice_size: Option<u64>,
    /// Which objects a full cache takes in: lru stores every storable response and evicts the
    /// least recently used (Varnish); tinylfu only those asked for more often than what they
    /// would evict (refuses most large objects). Default lru.
    #[arg(long, value_name = "lru|tinylfu")]
    cache_admission: Option<CacheAdmission>,
    /// Whether a cache fill goes on after its last client left: on (Varnish), off, or a size
    /// (only when at most that much is still to come). Default on.
    #[arg(long, value_name = "SIZE|on|off", value_parser = parse_finish_abandoned_fills)]
    finish_abandoned_fills: Option<u64>,
    /// Worker threads. Default: one per core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// How the threads share the listeners: shared (one multi-threaded runtime, work
    /// stealing) or reuseport (each thread its own single-threaded runtime and SO_REUSEPORT
    /// socket per listener, as nginx and HAProxy workers). Default shared.
    #[arg(long, value_name = "shared|reuseport")]
    worker_model: Option<WorkerModel>,
    /// Settings file (TOML); flags given on the command line win.
    #[arg(long = "config", value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// A Varnish parameter, as varnishd's -p; repeat for several: default_ttl, default_grace,
    /// default_keep, connect_timeout, first_byte_timeout, between_bytes_timeout, timeout_idle,
    /// send_timeout, idle_send_timeout, pipe_timeout, http_req_hdr_len, http_req_size,
    /// http_max_hdr, h2_rapid_reset_limit, h2_rapid_reset_period, h2_max_concurrent_streams,
    /// max_restarts=4, max_retries=4, ban_lurker_age, ban_lurker_batch, ban_lurker_sleep
    /// (batch/sleep is --ban-lurker-rate), feature=+http2. The edgecache flag of the same
    /// setting wins over it.
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    param: Vec<String>,
    /// Instance name (varnishd's -n), shown in the start-up log. Default edgecache.
    #[arg(short = 'n', value_name = "NAME")]
    instance_name: Option<String>,
    /// File the process id is written to at start and removed from at exit (varnishd's -P).
    #[arg(short = 'P', value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Accepted for varnishd compatibility: edgecache always runs in the foreground (run it
    /// under systemd or another supervisor to daemonize it).
    #[arg(short = 'F')]
    foreground: bool,
    /// varnishd's jail: only `none` is accepted; edgecache does not change user (run it as
    /// an unprivileged user, e.g. systemd's User=).
    #[arg(short = 'j', value_name = "none", value_parser = parse_jail)]
    jail: Option<Jail>,
    /// Origin connect timeout. Default 3.5s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    connect_timeout: Option<Duration>,
    /// The load balancer's health check path on the serving listeners: 200 while serving, 503
    /// while draining; "off" passes it on like any path. Default /healthz.
    #[arg(long, value_name = "PATH|off")]
    health_path: Option<String>,
    /// How long a shutdown (SIGTERM, SIGINT) answers the health path with 503, still serving,
    /// before the listeners close. Default 0s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    drain_time: Option<Duration>,
    /// Time to wait for the origin's response head. Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    first_byte_timeout: Option<Duration>,
    /// Longest silence between two body chunks from the origin. Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    between_bytes_timeout: Option<Duration>,
    /// Time a client has to send a request head, from its first byte; slower clients are
    /// disconnected (slowloris). Default 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    header_timeout: Option<Duration>,
    /// How long a client connection with no request in flight stays open (keep-alive).
    /// Default 5s, Varnish's timeout_idle.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_timeout: Option<Duration>,
    /// Longest silence within a client's request body; the request then ends with 408.
    /// Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    body_timeout: Option<Duration>,
    /// How long one response may take to send, head to last byte; then the connection is
    /// closed. Default 600s, Varnish's send_timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    send_timeout: Option<Duration>,
    /// How long a response may wait for a client that takes nothing of it; then the
    /// connection is closed. Default 60s, Varnish's idle_send_timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    idle_send_timeout: Option<Duration>,
    /// Open client connections; past it new clients wait until one closes. Default 10000.
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// How long a pipe (return (pipe), a WebSocket) may carry no byte either way before it is
    /// closed (Varnish's pipe_timeout). Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pipe_timeout: Option<Duration>,
    /// Pipes (return (pipe), WebSockets) open at once; past it 503. Default 5000.
    #[arg(long, value_name = "N")]
    max_pipes: Option<usize>,
    /// How deep ESI includes nest: a page at this level makes no more includes (Varnish's
    /// max_esi_depth). Default 5.
    #[arg(long, value_name = "N")]
    max_esi_depth: Option<u32>,
    /// How often a backend whose .host is a name is looked up again; new addresses take new
    /// connections without a reload. Default 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    dns_ttl: Option<Duration>,
    /// A file in /etc/hosts format whose names (backend .host values, ACL entries) are looked
    /// up there before DNS, read again at every lookup.
    #[arg(long, value_name = "FILE")]
    hosts_file: Option<PathBuf>,
    /// Largest header field, and request line, a client may send (Varnish's
    /// http_req_hdr_len): 431 past it, 414 for a longer URL. Default 8k.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_header_size: Option<u64>,
    /// Largest request head, request line and fields together (Varnish's http_req_size):
    /// 431 past it. Default 32k.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_request_head: Option<u64>,
    /// Origin fetches started by HTTP/2 streams the client reset before their response, per
    /// --h2-rapid-reset-period and connection, before it gets GOAWAY; 0 = no cap. Default 100.
    #[arg(long, value_name = "N")]
    h2_rapid_reset_limit: Option<u32>,
    /// Period over which --h2-rapid-reset-limit refills. Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    h2_rapid_reset_period: Option<Duration>,
    /// New HTTP/2 streams per second and connection before it gets GOAWAY; 0 = no cap.
    /// Default 100000.
    #[arg(long, value_name = "N")]
    h2_max_streams_per_second: Option<u32>,
    /// HTTP/2 streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    /// Default 100, Varnish's h2_max_concurrent_streams.
    #[arg(long, value_name = "N")]
    h2_max_concurrent_streams: Option<u32>,
    /// Header fields a request may carry: 431 past it. Default 100 (Varnish's http_max_hdr
    /// is 64).
    #[arg(long, value_name = "N")]
    max_headers: Option<usize>,
    /// Networks allowed to send PURGE, comma-separated. Default loopback.
    #[arg(long, value_name = "CIDR,...", value_parser = parse_networks)]
    purge_allow: Option<Networks>,
    /// Who drops stored pages by a POST, PUT, DELETE, PATCH or unknown method that the origin
    /// accepts: every client (RFC 9111 §4.4), those in --purge-allow, or no one. Default allowed.
    #[arg(long, value_name = "all|allowed|off")]
    invalidate_on_unsafe: Option<InvalidateOnUnsafe>,
    /// Header reporting the cache result. Default X-Cache.
    #[arg(long, value_name = "NAME")]
    cache_status_header: Option<http::HeaderName>,
    /// Store responses that set cookies (Varnish's builtin VCL does not).
    #[arg(long)]
    store_set_cookie: bool,
    /// Never store a POST response for later GETs (by default one with explicit freshness and
    /// a Content-Location naming the request's URL is, RFC 9110 §9.3.3; Varnish passes POSTs).
    #[arg(long)]
    no_store_post_responses: bool,
    /// Look up requests that carry Cookie instead of passing them (Varnish's builtin passes
    /// them): for origins whose pages do not depend on the cookies, or say so with Vary.
    #[arg(long)]
    lookup_with_cookie: bool,
    /// Look up requests that carry Authorization instead of passing them (Varnish's builtin
    /// passes them); a response to one is stored only when it is public, s-maxage or
    /// must-revalidate (RFC 9111 §3.5).
    #[arg(long)]
    lookup_with_authorization: bool,
    /// How long past freshness an object may be served when the origin fails. Default 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    grace: Option<Duration>,
    /// How long objects with validators are kept past freshness for revalidation. Default 10m.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    keep: Option<Duration>,
    /// Stored objects the ban lurker tests per second at most against bans on obj.*, which it
    /// then drops; 0 turns it off. Default 100000 (Varnish's ban_lurker_batch per
    /// ban_lurker_sleep).
    #[arg(long, value_name = "OBJECTS")]
    ban_lurker_rate: Option<u64>,
    /// Bans younger than this are left to lookups (Varnish's ban_lurker_age). Default 60s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    ban_lurker_age: Option<Duration>,
    /// Ignore the request's Cache-Control and Pragma (clients cannot force refreshes).
    #[arg(long)]
    ignore_request_cache_control: bool,
    /// Linear memory each WebAssembly plugin instance may use. Default 16m.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    plugin_memory: Option<u64>,
    /// CPU time a plugin callback may take before it is stopped. Default 5ms.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    plugin_deadline: Option<Duration>,
    /// How long a plugin may keep a request paused (waiting for an outbound call or a
    /// timer) before the request fails as the plugin's .on_error says. Default 30s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    plugin_pause_timeout: Option<Duration>,
    /// Targeted cache-control field (RFC 9213) that overrides Cache-Control here; "" disables.
    /// Default CDN-Cache-Control.
    #[arg(long, value_name = "NAME")]
    targeted_cache_control: Option<String>,
    /// Remove the targeted cache-control field from responses to clients (by default it is
    /// forwarded, for downstream caches of the same CDN tier; RFC 9213).
    #[arg(long)]
    strip_targeted_cache_control: bool,
    /// Response headers whose keys (separated by commas or blanks) index objects for purges by
    /// key (xkey.purge, POST /purge?key=): names separated by commas, or "off". Default
    /// xkey,Surrogate-Key,Cache-Tag.
    #[arg(long, value_name = "NAMES")]
    surrogate_key_headers: Option<String>,
    /// Deliver the surrogate-key headers to clients (by default they are removed, as Fastly does).
    #[arg(long)]
    keep_surrogate_key_headers: bool,
    /// Show the backend, its address and the OS error on the page of a failed fetch (for
    /// development; by default clients see the request id and a generic cause, the log the rest).
    #[arg(long)]
    show_backend_errors: bool,
    /// Access log format: compact, json, ncsa (alias combined: varnishncsa's default, Apache's
    /// combined format, on stdout or --access-log), or a varnishncsa format string such as
    /// '%h %t "%r" %s %b %{Varnish:handling}x %D'. Default compact.
    #[arg(long, value_name = "compact|json|ncsa|FORMAT", value_parser = parse_log_format)]
    log_format: Option<LogFormat>,
    /// File the access log goes to instead of stderr (stdout for ncsa); appended to, and
    /// reopened on SIGUSR1 (logrotate's postrotate).
    #[arg(long, visible_alias = "log-file", value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// Admin API address, :PORT for every interface (needs --admin-token-file), or `off`.
    /// Default 127.0.0.1:6082.
    #[arg(short = 'T', long = "admin-listen", value_name = "IP:PORT|:PORT|off", value_parser = parse_admin_listen)]
    admin_listen: Option<AdminListen>,
    /// File holding the admin API's bearer token; required when -T is not a loopback address.
    #[arg(long = "admin-token-file", value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// Admin API addresses of the other nodes of a tier (a name may resolve to all of them):
    /// purges and bans accepted here are forwarded to each with the admin token.
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',')]
    peers: Option<Vec<String>>,
    /// How long a peer that does not answer is tried again before it is reported
    /// unreachable. Default 5s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    peer_retry_time: Option<Duration>,
    /// Do not reload when the policy file or its includes change (SIGHUP and POST /reload still do).
    #[arg(long)]
    no_watch: bool,
    /// Default certificate of the `,tls` listeners (PEM: the leaf, then intermediates; may
    /// hold the key too), for clients without SNI or with a name no other certificate has.
    #[arg(long = "tls-cert", value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert, when that file does not hold it.
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A certificate for one SNI name (*.example.com for a wildcard); repeat for several.
    #[arg(long = "tls-cert-pair", value_name = "NAME=CERT[,KEY]", value_parser = parse_certificate_pair)]
    tls_cert_pair: Vec<CertificateFiles>,
    /// Directory of NAME.pem files (chain and key), each serving the SNI name NAME
    /// (_.example.com.pem: *.example.com; default.pem: every other name); read again on reload.
    #[arg(long = "tls-dir", value_name = "DIR")]
    tls_dir: Option<PathBuf>,
    /// Time a client has to complete its TLS handshake. Default 10s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    tls_handshake_timeout: Option<Duration>,
}

/// `-j none`: the one jail edgecache has.
#[derive(Clone, Copy)]
struct Jail;

fn parse_jail(text: &str) -> Result<Jail, String> {
    match text {
        "none" => Ok(Jail),
        other => Err(format!(
            "jail `{other}` is not available: edgecache does not change user or chroot; \
             accepted: none (run edgecache as an unprivileged user, e.g. systemd's User=)"
        )),
    }
}

/// `-T`: an address, or `off` (varnishd's `none` too).
#[derive(Clone, Copy)]
struct AdminListen(Option<SocketAddr>);

fn parse_admin_listen(text: &str) -> Result<AdminListen, String> {
    if text == "off" || text == "none" {
        return Ok(AdminListen(None));
    }
    // `:PORT` is every interface, as for -a and as varnishd's -T (which resolves an empty host
    // as a passive, wildcard address), so it needs --admin-token-file.
    let full = match text.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => text.to_string(),
    };
    full.parse()
        .map(|address| AdminListen(Some(address)))
        .map_err(|_| format!("`{text}` is not IP:PORT, :PORT (every interface) or `off`"))
}

/// `edgecache admin -T`: the server's address; `:PORT` is loopback (what `-T :PORT` serves on
/// too).
fn parse_admin_address(text: &str) -> Result<SocketAddr, String> {
    let full = match text.strip_prefix(':') {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    full.parse()
        .map_err(|_| format!("`{text}` is not IP:PORT or :PORT (this machine)"))
}

/// `--purge-allow`: one value holding a list (clap would read `Option<Vec<_>>` as a
/// repeated flag).
#[derive(Clone)]
struct Networks(Vec<ipnet::IpNet>);

fn parse_networks(text: &str) -> Result<Networks, String> {
    parse_cidr_list(text).map(Networks)
}

impl ServeArgs {
    fn into_config(self) -> Result<Config, ConfigError> {
        let mut config = Config {
            admin_listen: Some(DEFAULT_ADMIN),
            ..Config::default()
        };
        if let Some(path) = &self.config {
            let base = path.parent().unwrap_or_else(|| std::path::Path::new("."));
            FileConfig::read(path)?.apply(&mut config, base)?;
        }
        // -F and -j none ask for what edgecache always does: run in the foreground as the
        // user that started it.
        let (_foreground, _jail) = (self.foreground, self.jail);
        for param in &self.param {
            set_varnish_parameter(&mut config, param)?;
        }
        if let Some(rate) = ban_lurker_rate_of(&self.param)? {
            config.ban_lurker_rate = rate;
        }
        if !self.listen.is_empty() {
            config.listen = self.listen;
        }
        set(&mut config.backend, self.backend.map(Some));
        set(&mut config.backend_ca, self.backend_ca.map(Some));
        set(&mut config.policy, self.policy.map(Some));
        set(&mut config.policy_format, self.policy_format.map(Some));
        set(&mut config.cache_size, self.cache_size);
        set(&mut config.default_ttl, self.default_ttl);
        set(&mut config.max_object_size, self.max_object_size);
        set(&mut config.slice_size, self.slice_size);
        set(&mut config.cache_admission, self.cache_admission);
        set(&mut config.finish_abandoned_fills, self.finish_abandoned_fills);
        set(&mut config.threads, self.threads.map(|n| Some(usize::from(n))));
        set(&mut config.worker_model, self.worker_model);
        set(&mut config.timeouts.connect, self.connect_timeout);
        set(&mut config.timeouts.first_byte, self.first_byte_timeout);
        set(&mut config.timeouts.between_bytes, self.between_bytes_timeout);
        set(&mut config.client_timeouts.header, self.header_timeout);
        set(&mut config.client_timeouts.idle, self.idle_timeout);
        set(&mut config.client_timeouts.body, self.body_timeout);
        set(&mut config.client_timeouts.send, self.send_timeout);
        set(&mut config.client_timeouts.idle_send, self.idle_send_timeout);
        set(&mut config.max_connections, self.max_connections);
        set(&mut config.pipe_timeout, self.pipe_timeout);
        set(&mut config.max_pipes, self.max_pipes);
        set(&mut config.max_esi_depth, self.max_esi_depth);
        set(&mut config.dns_ttl, self.dns_ttl);
        set(&mut config.hosts_file, self.hosts_file.map(Some));
        let bytes = |size: u64| usize::try_from(size).unwrap_or(usize::MAX);
        set(
            &mut config.request_limits.max_header_size,
            self.max_header_size.map(bytes),
        );
        set(
            &mut config.request_limits.max_request_head,
            self.max_request_head.map(bytes),
        );
        set(&mut config.h2_limits.rapid_reset_limit, self.h2_rapid_reset_limit);
        set(
            &mut config.h2_limits.rapid_reset_period,
            self.h2_rapid_reset_period,
        );
        set(
            &mut config.h2_limits.max_streams_per_second,
            self.h2_max_streams_per_second,
        );
        set(
            &mut config.h2_limits.max_concurrent_streams,
            self.h2_max_concurrent_streams,
        );
        set(&mut config.request_limits.max_headers, self.max_headers);
        set(
            &mut config.purge_allow,
            self.purge_allow.map(|Networks(list)| list),
        );
        set(&mut config.invalidate_on_unsafe, self.invalidate_on_unsafe);
        set(&mut config.cache_status_header, self.cache_status_header);
        config.store_set_cookie |= self.store_set_cookie;
        config.store_post_responses &= !self.no_store_post_responses;
        config.lookup_with_cookie |= self.lookup_with_cookie;
        config.lookup_with_authorization |= self.lookup_with_authorization;
        set(&mut config.grace, self.grace);
        set(&mut config.keep, self.keep);
        set(&mut config.ban_lurker_rate, self.ban_lurker_rate);
        set(&mut config.ban_lurker_age, self.ban_lurker_age);
        set(&mut config.plugin_limits.deadline, self.plugin_deadline);
        set(&mut config.plugin_pause_timeout, self.plugin_pause_timeout);
        set(
            &mut config.plugin_limits.memory,
            self.plugin_memory
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
        );
        config.ignore_request_cache_control |= self.ignore_request_cache_control;
        config.strip_targeted_cache_control |= self.strip_targeted_cache_control;
        config.show_backend_errors |= self.show_backend_errors;
        if let Some(list) = self.surrogate_key_headers {
            config.surrogate_key_headers =
                edgecache_runtime::config::surrogate_key_headers_setting(&list, "--surrogate-key-headers")?;
        }
        config.keep_surrogate_key_headers |= self.keep_surrogate_key_headers;
        if let Some(path) = self.health_path {
            config.health_path = health_path_setting(&path);
        }
        set(&mut config.drain_time, self.drain_time);
        if let Some(name) = self.targeted_cache_control {
            config.targeted_cache_control = match name.as_str() {
                "" => None,
                name => Some(name.parse().map_err(|_| {
                    ConfigError::new(
                        "--targeted-cache-control",
                        format!("`{name}` is not a header name"),
                        "a field name such as CDN-Cache-Control, or \"\" to disable",
                    )
                })?),
            };
        }
        set(&mut config.log_format, self.log_format);
        set(
            &mut config.admin_listen,
            self.admin_listen.map(|AdminListen(address)| address),
        );
        set(&mut config.admin_token_file, self.admin_token_file.map(Some));
        set(&mut config.peers, self.peers);
        set(&mut config.peer_retry_time, self.peer_retry_time);
        set(&mut config.access_log, self.access_log.map(Some));
        if self.no_watch {
            config.watch_policy = false;
        }
        if let Some(cert) = self.tls_cert {
            // The command line's default certificate replaces the file's.
            config.tls.certificates.retain(|pair| !pair.names.is_empty());
            config.tls.certificates.push(CertificateFiles {
                cert,
                key: self.tls_key,
                names: Vec::new(),
            });
        }
        config.tls.certificates.extend(self.tls_cert_pair);
        set(&mut config.tls.dir, self.tls_dir.map(Some));
        set(&mut config.tls.handshake_timeout, self.tls_handshake_timeout);
        config.validate()?;
        Ok(config)
    }
}

/// The Varnish parameters `-p` takes, with what edgecache does with them.
const VARNISH_PARAMETERS: &[&str] = &[
    "default_ttl",
    "default_grace",
    "default_keep",
    "connect_timeout",
    "first_byte_timeout",
    "between_bytes_timeout",
    "timeout_idle",
    "send_timeout",
    "idle_send_timeout",
    "pipe_timeout",
    "http_req_hdr_len",
    "http_req_size",
    "http_max_hdr",
    "h2_rapid_reset_limit",
    "h2_rapid_reset_period",
    "h2_max_concurrent_streams",
    "max_restarts",
    "max_retries",
    "ban_lurker_age",
    "ban_lurker_batch",
    "ban_lurker_sleep",
    "feature",
];

/// Varnish's `ban_lurker_batch` and `ban_lurker_sleep` defaults, for `-p` of one of them.
const VARNISH_LURKER_BATCH: u64 = 1000;
const VARNISH_LURKER_SLEEP: Duration = Duration::from_millis(10);

/// `--ban-lurker-rate` from `-p ban_lurker_batch=N` and `-p ban_lurker_sleep=D` (the one not
/// given at Varnish's default): `batch / sleep` objects per second, 0 when the sleep is 0 (as
/// Varnish, which then does not lurk). `None` when neither is given.
fn ban_lurker_rate_of(params: &[String]) -> Result<Option<u64>, ConfigError> {
    let value_of = |name: &str| {
        params.iter().rev().find_map(|param| {
            let (key, value) = param.split_once('=')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let (batch, sleep) = (value_of("ban_lurker_batch"), value_of("ban_lurker_sleep"));
    if batch.is_none() && sleep.is_none() {
        return Ok(None);
    }
    // set_varnish_parameter has checked both values.
    let batch = batch
        .map_or(Ok(VARNISH_LURKER_BATCH), |batch| batch.parse::<u64>())
        .map_err(|_| {
            ConfigError::new(
                "-p",
                "ban_lurker_batch: not a whole number",
                "ban_lurker_batch=1000",
            )
        })?;
    let sleep = sleep
        .map_or(Ok(VARNISH_LURKER_SLEEP), |sleep| parse_duration(&sleep))
        .map_err(|problem| {
            ConfigError::new(
                "-p",
                format!("ban_lurker_sleep: {problem}"),
                "ban_lurker_sleep=0.010",
            )
        })?;
    if sleep.is_zero() {
        return Ok(Some(0));
    }
    Ok(Some((batch as f64 / sleep.as_secs_f64()).ceil() as u64))
}

/// Varnish's max_restarts and max_retries, which edgecache does not let change.
const FIXED_RESTARTS_AND_RETRIES: &str = "4";

/// `-p NAME=VALUE`: sets the edgecache setting that has the Varnish parameter's meaning.
fn set_varnish_parameter(config: &mut Config, text: &str) -> Result<(), ConfigError> {
    let refused = |problem: String, accepted: &str| ConfigError::new("-p", problem, accepted);
    let Some((name, value)) = text.split_once('=') else {
        return Err(refused(
            format!("`{text}` is not NAME=VALUE"),
            "-p NAME=VALUE, e.g. -p default_ttl=120",
        ));
    };
    let (name, value) = (name.trim(), value.trim());
    let bad_value = |problem: String| {
        refused(
            format!("{name}: {problem}"),
            "see edgecache --help for the value's form",
        )
    };
    let duration = || parse_duration(value).map_err(bad_value);
    let bytes = || {
        parse_size(value)
            .map(|size| usize::try_from(size).unwrap_or(usize::MAX))
            .map_err(bad_value)
    };
    let count = || {
        value
            .parse::<u32>()
            .map_err(|_| bad_value(format!("`{value}` is not a whole number")))
    };
    match name {
        "default_ttl" => config.default_ttl = duration()?,
        "default_grace" => config.grace = duration()?,
        "default_keep" => config.keep = duration()?,
        "connect_timeout" => config.timeouts.connect = duration()?,
        "first_byte_timeout" => config.timeouts.first_byte = duration()?,
        "between_bytes_timeout" => config.timeouts.between_bytes = duration()?,
        "timeout_idle" => config.client_timeouts.idle = duration()?,
        "send_timeout" => config.client_timeouts.send = duration()?,
        "idle_send_timeout" => config.client_timeouts.idle_send = duration()?,
        "pipe_timeout" => config.pipe_timeout = duration()?,
        "http_req_hdr_len" => config.request_limits.max_header_size = bytes()?,
        "http_req_size" => config.request_limits.max_request_head = bytes()?,
        "http_max_hdr" => config.request_limits.max_headers = count()? as usize,
        "h2_rapid_reset_limit" => config.h2_limits.rapid_reset_limit = count()?,
        "h2_rapid_reset_period" => config.h2_limits.rapid_reset_period = duration()?,
        "h2_max_concurrent_streams" => config.h2_limits.max_concurrent_streams = count()?,
        "ban_lurker_age" => config.ban_lurker_age = duration()?,
        // Folded into --ban-lurker-rate by ban_lurker_rate_of once every -p is read.
        "ban_lurker_batch" => {
            count()?;
        }
        "ban_lurker_sleep" => {
            duration()?;
        }
        "max_restarts" | "max_retries" if value == FIXED_RESTARTS_AND_RETRIES => {}
        "max_restarts" | "max_retries" => {
            return Err(refused(
                format!("{name} is fixed in edgecache"),
                &format!("{name}={FIXED_RESTARTS_AND_RETRIES} (Varnish's default)"),
            ))
        }
        // HTTP/2 is always on (h2c and ALPN h2), so turning it on is a no-op.
        "feature" if value == "+http2" => {}
        "feature" => {
            return Err(refused(
                format!("feature `{value}` has no edgecache meaning"),
                "feature=+http2 (HTTP/2 is always on)",
            ))
        }
        unknown => {
            let closest = VARNISH_PARAMETERS
                .iter()
                .max_by(|a, b| strsim::jaro_winkler(unknown, a).total_cmp(&strsim::jaro_winkler(unknown, b)))
                .expect("the list is not empty");
            return Err(refused(
                format!("`{unknown}` is not a parameter edgecache has (closest: {closest})"),
                &VARNISH_PARAMETERS.join(", "),
            ));
        }
    }
    Ok(())
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Demo { listen }) => demo(listen),
        Some(Command::Check {
            fragment: true,
            files,
            ..
        }) => check_fragments(&files),
        Some(Command::Check {
            explain: true,
            policy_format,
            files,
            ..
        }) => explain(&files, policy_format),
        Some(Command::Check {
            policy_format, files, ..
        }) => check(&files, policy_format),
        Some(Command::Admin(args)) => admin(args),
        Some(Command::Man) => man_page(),
        Some(Command::Stat(args)) => stat(args),
        Some(Command::Log(args)) => log(args),
        None => serve(cli.serve),
    }
}

fn serve(mut args: ServeArgs) -> ExitCode {
    let instance = args
        .instance_name
        .take()
        .unwrap_or_else(|| "edgecache".to_string());
    let pid_file = args.pid_file.take();
    let config = match args.into_config() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("edgecache: {error}");
            return ExitCode::from(2);
        }
    };
    if let Err(error) =
        edgecache_runtime::logging::init(config.log_format.clone(), config.access_log.as_deref())
    {
        eprintln!("edgecache: {error}");
        return ExitCode::from(2);
    }
    let specs = config.listen.clone();
    let pid_file = match pid_file.map(PidFile::create).transpose() {
        Ok(pid_file) => pid_file,
        Err(error) => {
            eprintln!("edgecache: {error}");
            return ExitCode::from(2);
        }
    };
    let result = edgecache_runtime::run(config, |addresses| {
        for (address, spec) in addresses.iter().zip(&specs) {
            let speaks = match spec.tls {
                true => "HTTP/1.1 and HTTP/2 over TLS",
                false => "HTTP/1.1 and h2c",
            };
            tracing::info!(%instance, %address, proxy_protocol = spec.proxy_protocol, "listening ({speaks})");
        }
        // Under a systemd `Type=notify` unit, the unit is started once edgecache listens and
        // its policy is loaded; elsewhere NOTIFY_SOCKET is unset and this does nothing.
        if let Err(error) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
            tracing::warn!(%error, "cannot tell systemd that edgecache is ready (NOTIFY_SOCKET)");
        }
    });
    drop(pid_file);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("edgecache: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The admin API's bearer token from `--admin-token-file`, when given.
fn read_token(file: Option<&std::path::Path>) -> Result<Option<String>, String> {
    file.map(|path| {
        std::fs::read_to_string(path)
            .map(|token| token.trim().to_string())
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
    })
    .transpose()
}

/// `edgecache stat`: polls `GET /stats` of the admin API.
fn stat(args: StatArgs) -> ExitCode {
    use edgecache_runtime::admin::client::call_blocking;
    use edgecache_runtime::admin::stat::{screen, Snapshot};
    if args.interval.is_zero() && !args.once {
        eprintln!("edgecache stat: -w 0s would poll the admin API without pause; give a time between screens such as -w 1s");
        return ExitCode::from(2);
    }
    let token = match read_token(args.token_file.as_deref()) {
        Ok(token) => token,
        Err(error) => {
            eprintln!("edgecache stat: {error}");
            return ExitCode::from(2);
        }
    };
    let fetch = || {
        call_blocking(args.address, token.as_deref(), "GET", "/stats", "").and_then(|reply| {
            match reply.is_success() {
                true => Snapshot::parse(&reply.body),
                false => Err(format!(
                    "GET /stats answered {}: {}",
                    reply.status,
                    reply.body.trim()
                )),
            }
        })
    };
    let mut previous: Option<(Snapshot, std::time::Instant)> = None;
    let mut shown = 0;
    loop {
        let snapshot = match fetch() {
            Ok(snapshot) => snapshot,
            Err(error) => {
                eprintln!("edgecache stat: {error}");
                return ExitCode::FAILURE;
            }
        };
        if args.once {
            print!("{}", snapshot.dump());
            return ExitCode::SUCCESS;
        }
        let now = std::time::Instant::now();
        let before = previous.as_ref().map(|(before, at)| (before, now - *at));
        print!("{}", screen(&args.address.to_string(), before, &snapshot));
        use std::io::Write;
        let _ = std::io::stdout().flush();
        shown += 1;
        if args.count.is_some_and(|count| shown >= count) {
            return ExitCode::SUCCESS;
        }
        previous = Some((snapshot, now));
        std::thread::sleep(args.interval);
    }
}

fn man_page() -> ExitCode {
    use clap::CommandFactory;
    let page = clap_mangen::Man::new(Cli::command());
    match page.render(&mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("edgecache man: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `-P FILE`: holds the process id while edgecache runs; removed when dropped.
struct PidFile(PathBuf);

impl PidFile {
    fn create(path: PathBuf) -> Result<PidFile, String> {
        std::fs::write(&path, format!("{}\n", std::process::id()))
            .map_err(|error| format!("-P: cannot write the pid file {}: {error}", path.display()))?;
        Ok(PidFile(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn check(files: &[PathBuf], format: Option<PolicyFormat>) -> ExitCode {
    let mut failed = false;
    for file in files {
        match edgecache_runtime::policy::load(file, format, &Default::default()) {
            Ok(program) => {
                if let Some(warnings) = program.warnings() {
                    eprint!("{}", warnings.render());
                }
                // Plugins are compiled and started as `edgecache -f` would, so a missing file,
                // a module that is not proxy-wasm or a rejected configuration shows here too.
                if !program.plugins().is_empty() {
                    let host = edgecache_runtime::plugin::PluginHost::new(Default::default());
                    if let Err(error) = edgecache_runtime::policy::load_plugins(&program, &host, &[]) {
                        eprintln!("error: {error}\n --> {}", file.display());
                        println!("{}: 1 error(s)", file.display());
                        failed = true;
                        continue;
                    }
                }
                println!("{}: ok", file.display());
            }
            Err(diagnostics) => {
                eprint!("{}", diagnostics.render());
                println!("{}: {} error(s)", file.display(), diagnostics.error_count());
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `check --explain`: the VCL of each rewrite rules file on stdout, so that
/// `edgecache check --explain site.htaccess > site.vcl` is the move to VCL.
fn explain(files: &[PathBuf], format: Option<PolicyFormat>) -> ExitCode {
    let mut failed = false;
    for file in files {
        let name = file.display().to_string();
        if format.unwrap_or_else(|| PolicyFormat::of_path(&name)) == PolicyFormat::Vcl {
            eprintln!("edgecache check --explain: {name} is VCL already (--explain prints the VCL of `.htaccess` rewrite rules; --policy-format rewrite reads another name as rules)");
            failed = true;
            continue;
        }
        match edgecache_runtime::policy::explain_rewrite(file, &Default::default()) {
            Ok((program, vcl)) => {
                if let Some(warnings) = program.warnings() {
                    eprint!("{}", warnings.render());
                }
                print!("{vcl}");
            }
            Err(diagnostics) => {
                eprint!("{}", diagnostics.render());
                eprintln!("{name}: {} error(s)", diagnostics.error_count());
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `check --fragment`: each file checked as an include fragment.
fn check_fragments(files: &[PathBuf]) -> ExitCode {
    let mut failed = false;
    for file in files {
        let diagnostics = edgecache_runtime::policy::check_fragment(file, &Default::default());
        eprint!("{}", diagnostics.render());
        if diagnostics.has_errors() {
            println!("{}: {} error(s)", file.display(), diagnostics.error_count());
            failed = true;
        } else {
            println!("{}: ok (fragment)", file.display());
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `edgecache log`: streams `GET /log` of the admin API to stdout; exits 1 when the server
/// refuses (a query that does not parse: the message names the column) or cannot be reached.
fn log(args: LogArgs) -> ExitCode {
    use std::io::Write;
    let token = match read_token(args.token_file.as_deref()) {
        Ok(token) => token,
        Err(error) => {
            eprintln!("edgecache log: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("edgecache log: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let address = args.address;
    let followed = runtime.block_on(edgecache_runtime::admin::log::follow(
        address,
        token.as_deref(),
        args.query.as_deref(),
        args.count,
        || eprintln!("edgecache log: tracing requests of {address} (Ctrl-C to stop)"),
        |text| {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        },
    ));
    match followed {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("edgecache log: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `edgecache admin ...`: one call to the admin API; prints the answer, exits 1 when it is an
/// error (printed on stderr).
fn admin(args: AdminArgs) -> ExitCode {
    use edgecache_runtime::admin::client::{call_blocking, encode_query_value};
    let token = match read_token(args.token_file.as_deref()) {
        Ok(token) => token,
        Err(error) => {
            eprintln!("edgecache admin: {error}");
            return ExitCode::from(2);
        }
    };
    let (method, target, body) = match args.action {
        AdminAction::Status => ("GET", "/status".to_string(), String::new()),
        AdminAction::Stats => ("GET", "/stats".to_string(), String::new()),
        AdminAction::Metrics => ("GET", "/metrics".to_string(), String::new()),
        AdminAction::Backends => ("GET", "/backends".to_string(), String::new()),
        AdminAction::Purge { url, host, key, soft } => {
            let mut target = match (url, key) {
                (_, Some(key)) => format!("/purge?key={}", encode_query_value(&key)),
                (Some(url), None) => {
                    let mut target = format!("/purge?url={}", encode_query_value(&url));
                    // A path with no --host would otherwise take the Host of this request, the
                    // admin listener's own address, which no cached page has.
                    let host = host.or_else(|| url.starts_with('/').then(|| "*".to_string()));
                    if let Some(host) = host {
                        target.push_str(&format!("&host={}", encode_query_value(&host)));
                    }
                    target
                }
                (None, None) => unreachable!("clap requires a URL or --key"),
            };
            if soft {
                target.push_str("&soft=1");
            }
            ("POST", target, String::new())
        }
        AdminAction::Ban { expr } => ("POST", "/ban".to_string(), expr.join(" ")),
        AdminAction::BanList => ("GET", "/bans?format=text".to_string(), String::new()),
        AdminAction::SetHealth { name, health } => (
            "POST",
            format!(
                "/backend/set_health?name={}&health={}",
                encode_query_value(&name),
                encode_query_value(&health)
            ),
            String::new(),
        ),
        AdminAction::Reload => ("POST", "/reload".to_string(), String::new()),
        AdminAction::Vcl { command } => {
            let q = |value: &str| encode_query_value(value);
            let target = match command {
                VclCommand::Load { name, file } => {
                    // The server may run elsewhere in the file system: send an absolute path.
                    let file = std::path::absolute(&file).unwrap_or(file);
                    format!(
                        "/vcl/load?name={}&path={}",
                        q(&name),
                        q(&file.display().to_string())
                    )
                }
                VclCommand::Use { name } => format!("/vcl/use?name={}", q(&name)),
                VclCommand::Label { label, name } => {
                    format!("/vcl/label?label={}&name={}", q(&label), q(&name))
                }
                VclCommand::List => "/vcl?format=text".to_string(),
                VclCommand::Discard { name } => format!("/vcl/discard?name={}", q(&name)),
            };
            let method = if target.starts_with("/vcl?") {
                "GET"
            } else {
                "POST"
            };
            (method, target, String::new())
        }
    };
    match call_blocking(args.address, token.as_deref(), method, &target, body) {
        Ok(reply) if reply.is_success() => {
            print!("{}", reply.body);
            ExitCode::SUCCESS
        }
        Ok(reply) => {
            eprint!(
                "edgecache admin: {method} {target}: {}\n{}",
                reply.status, reply.body
            );
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("edgecache admin: {error}");
            ExitCode::FAILURE
        }
    }
}

fn demo(listen: ListenSpec) -> ExitCode {
    edgecache_runtime::logging::init(LogFormat::Compact, None).expect("stderr needs no opening");
    let result = edgecache_runtime::run_demo(listen, |origin, proxy| {
        println!("edgecache demo: origin on http://{origin}, proxy on http://{proxy}\n");
        println!("Try (twice each, and watch X-Cache and Age):");
        for (path, what) in edgecache_runtime::demo::PATHS {
            println!("  curl -i http://{proxy}{path:<10}  # {what}");
        }
        println!("\nStop with Ctrl-C.");
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("edgecache: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap checks a definition against its field only when the flag is used, so a mismatch
    /// (as `--purge-allow` once had) panics for the user instead of failing the build: every
    /// serve flag is given here once.
    #[test]
    fn every_serve_flag_parses_into_a_config() {
        let flags = "edgecache -a :6081 -a 127.0.0.1:8080,PROXY -b 127.0.0.1:9000 -f examples/default.vcl --policy-format vcl \
             --config examples/edgecache.toml -s 64m -t 120 --max-object-size 1m --cache-admission tinylfu \
             --finish-abandoned-fills 512k --threads 2 --worker-model reuseport \
             --connect-timeout 1s --first-byte-timeout 5s --between-bytes-timeout 5s \
             --header-timeout 2s --idle-timeout 3s --body-timeout 4s --max-connections 100 \
             --send-timeout 5m --idle-send-timeout 30s --pipe-timeout 90s --max-pipes 7 \
             --dns-ttl 5s --hosts-file hosts \
             --max-header-size 16k --max-request-head 64k --h2-rapid-reset-limit 50 \
             --h2-rapid-reset-period 30s --h2-max-streams-per-second 1000 \
             --h2-max-concurrent-streams 50 --max-headers 64 \
             --purge-allow 127.0.0.0/8,10.0.0.0/8 --invalidate-on-unsafe off --cache-status-header X-Cache-Status \
             --store-set-cookie --lookup-with-cookie --lookup-with-authorization --grace 1m --keep 1h --ban-lurker-rate 500 --ban-lurker-age 5s \
             --ignore-request-cache-control \
             --targeted-cache-control CDN-Cache-Control --strip-targeted-cache-control \
             --health-path /lb-check --drain-time 2s --plugin-memory 8m --plugin-deadline 10ms \
             --log-format json -T off --admin-token-file admin.token --no-watch \
             -a 127.0.0.1:8443,tls --tls-cert site.pem --tls-key site.key \
             --tls-cert-pair a.example=a.pem,a.key --tls-dir certs --tls-handshake-timeout 5s \
             -p timeout_idle=7s -n shop -P edgecache.pid -F -j none --access-log access.log";
        let cli = Cli::try_parse_from(flags.split_whitespace()).unwrap_or_else(|error| panic!("{error}"));
        let config = cli.serve.into_config().unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(config.listen[0].to_string(), "0.0.0.0:6081");
        assert!(config.listen[1].proxy_protocol);
        assert!(config.listen[2].tls);
        assert_eq!(config.tls.certificates.len(), 2);
        assert_eq!(config.tls.certificates[1].names, ["a.example"]);
        assert_eq!(config.tls.dir.as_deref(), Some(std::path::Path::new("certs")));
        assert_eq!(config.tls.handshake_timeout, Duration::from_secs(5));
        assert_eq!(config.purge_allow.len(), 2);
        assert_eq!(config.invalidate_on_unsafe, InvalidateOnUnsafe::Off);
        assert_eq!(config.cache_admission, CacheAdmission::TinyLfu);
        assert_eq!(config.worker_model, WorkerModel::ReusePort);
        assert_eq!(config.policy_format, Some(PolicyFormat::Vcl));
        assert_eq!(config.finish_abandoned_fills, 512 * 1024);
        assert_eq!(config.admin_listen, None);
        assert!(!config.watch_policy);
        assert_eq!(config.request_limits.max_header_size, 16 * 1024);
        assert_eq!(config.h2_limits.rapid_reset_limit, 50);
        assert_eq!(config.h2_limits.max_concurrent_streams, 50);
        assert_eq!(config.request_limits.max_headers, 64);
        assert_eq!(config.client_timeouts.body, Duration::from_secs(4));
        assert_eq!(config.client_timeouts.send, Duration::from_secs(300));
        assert_eq!(config.client_timeouts.idle_send, Duration::from_secs(30));
        assert_eq!(config.max_connections, 100);
        assert_eq!(config.pipe_timeout, Duration::from_secs(90));
        assert_eq!(config.max_pipes, 7);
        assert_eq!(config.dns_ttl, Duration::from_secs(5));
        assert_eq!(config.hosts_file.as_deref(), Some(std::path::Path::new("hosts")));
        assert!(config.strip_targeted_cache_control);
        assert!(config.lookup_with_cookie && config.lookup_with_authorization);
        assert_eq!(config.health_path.as_deref(), Some("/lb-check"));
        assert_eq!(config.drain_time, Duration::from_secs(2));
        assert_eq!(
            config.access_log.as_deref(),
            Some(std::path::Path::new("access.log"))
        );
        // --idle-timeout wins over -p timeout_idle.
        assert_eq!(config.client_timeouts.idle, Duration::from_secs(3));
        assert_eq!(
            (config.ban_lurker_rate, config.ban_lurker_age),
            (500, Duration::from_secs(5))
        );
    }

    #[test]
    fn admin_listen_off_is_also_varnishds_none() {
        for off in ["off", "none"] {
            assert_eq!(
                parse_admin_listen(off).map(|AdminListen(address)| address),
                Ok(None)
            );
        }
        let every = parse_admin_listen(":6082").map(|AdminListen(address)| address);
        assert_eq!(every, Ok(Some(SocketAddr::from(([0, 0, 0, 0], 6082)))));
    }

    #[test]
    fn peers_need_the_admin_api_and_a_port() {
        let parse = |flags: &str| {
            let line = format!("edgecache -b 127.0.0.1:9000 {flags}");
            Cli::try_parse_from(line.split_whitespace())
                .unwrap_or_else(|error| panic!("{error}"))
                .serve
                .into_config()
        };
        let config =
            parse("-T 127.0.0.1:6082 --peers cache.internal:6082,10.0.0.12:6082 --peer-retry-time 3s")
                .expect("valid");
        assert_eq!(config.peers, ["cache.internal:6082", "10.0.0.12:6082"]);
        assert_eq!(config.peer_retry_time, Duration::from_secs(3));
        let error = parse("--peers cache.internal").expect_err("no port").to_string();
        assert!(
            error.contains("--peers") && error.contains("HOST:PORT"),
            "{error}"
        );
        let error = parse("--peers 10.0.0.12:6082 -T off")
            .expect_err("no admin API")
            .to_string();
        assert!(error.contains("-T"), "{error}");
    }

    #[test]
    fn each_varnish_parameter_sets_its_edgecache_setting() {
        let mut config = Config::default();
        let seconds = Duration::from_secs;
        for param in [
            "default_ttl=2m",
            "default_grace=1h",
            "default_keep=1d",
            "connect_timeout=1.5",
            "first_byte_timeout=5s",
            "between_bytes_timeout=6s",
            "timeout_idle=7s",
            "send_timeout=8s",
            "idle_send_timeout=9s",
            "pipe_timeout=10s",
            "http_req_hdr_len=16k",
            "http_req_size=64k",
            "http_max_hdr=64",
            "h2_rapid_reset_limit=10",
            "h2_rapid_reset_period=20s",
            "h2_max_concurrent_streams=30",
            "max_restarts=4",
            "max_retries=4",
            "ban_lurker_age=30s",
            "ban_lurker_batch=500",
            "ban_lurker_sleep=0.02",
            "feature=+http2",
        ] {
            set_varnish_parameter(&mut config, param).unwrap_or_else(|error| panic!("{param}: {error}"));
        }
        assert_eq!(config.default_ttl, seconds(120));
        assert_eq!(config.grace, seconds(3600));
        assert_eq!(config.keep, seconds(86_400));
        assert_eq!(config.timeouts.connect, Duration::from_millis(1500));
        assert_eq!(config.timeouts.first_byte, seconds(5));
        assert_eq!(config.timeouts.between_bytes, seconds(6));
        assert_eq!(config.client_timeouts.idle, seconds(7));
        assert_eq!(config.client_timeouts.send, seconds(8));
        assert_eq!(config.client_timeouts.idle_send, seconds(9));
        assert_eq!(config.pipe_timeout, seconds(10));
        assert_eq!(config.request_limits.max_header_size, 16 * 1024);
        assert_eq!(config.request_limits.max_request_head, 64 * 1024);
        assert_eq!(config.request_limits.max_headers, 64);
        assert_eq!(config.h2_limits.rapid_reset_limit, 10);
        assert_eq!(config.h2_limits.rapid_reset_period, seconds(20));
        assert_eq!(config.h2_limits.max_concurrent_streams, 30);
        assert_eq!(config.ban_lurker_age, seconds(30));
        assert_eq!(VARNISH_PARAMETERS.len(), 22, "each accepted name is set above");
    }

    #[test]
    fn ban_lurker_batch_per_sleep_is_the_lurker_rate() {
        let params = |list: &[&str]| list.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        for (given, rate) in [
            (&[][..], None),
            (&["ban_lurker_batch=500"][..], Some(50_000)),
            (&["ban_lurker_sleep=0.1"][..], Some(10_000)),
            (&["ban_lurker_sleep=0.1", "ban_lurker_batch=10"][..], Some(100)),
            (&["ban_lurker_sleep=0"][..], Some(0)),
        ] {
            assert_eq!(ban_lurker_rate_of(&params(given)).unwrap(), rate, "{given:?}");
        }
    }

    #[test]
    fn a_bad_varnish_parameter_names_what_is_accepted() {
        let mut config = Config::default();
        for (param, message) in [
            ("timeout_idel=5", "-p: `timeout_idel` is not a parameter edgecache has (closest: timeout_idle); accepted: default_ttl, default_grace,"),
            ("default_ttl=2min", "-p: default_ttl: `min` is not a duration unit (units: ms, s, m, h, d, w, y; none means seconds)"),
            ("http_max_hdr=lots", "-p: http_max_hdr: `lots` is not a whole number"),
            ("max_retries=2", "-p: max_retries is fixed in edgecache; accepted: max_retries=4 (Varnish's default)"),
            ("feature=+esi_ignore_https", "-p: feature `+esi_ignore_https` has no edgecache meaning; accepted: feature=+http2"),
            ("default_ttl", "-p: `default_ttl` is not NAME=VALUE; accepted: -p NAME=VALUE, e.g. -p default_ttl=120"),
        ] {
            let error = set_varnish_parameter(&mut config, param).unwrap_err().to_string();
            assert!(error.starts_with(message), "{param}: {error}");
        }
    }
}
