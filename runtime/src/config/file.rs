//! The `edgecache.toml` format: the same settings as the flags, one key each.
//!
//! ```toml
//! listen = ["127.0.0.1:8080"]
//! backend = "127.0.0.1:9000"
//! policy = "examples/default.vcl"
//! policy_format = "vcl"             # or "rewrite" (.htaccess rules); default: by file name
//! cache_size = "256m"
//! max_object_size = "16m"
//! slice_size = "1m"                 # ranges and large objects stored by slices; "0": off
//! cache_admission = "lru"           # or "tinylfu" (refuses most large objects into a full cache)
//! finish_abandoned_fills = "on"     # a fill whose clients left: "on", "off" or a size still to come
//! default_ttl = "120s"
//! threads = 2
//! worker_model = "shared"           # or "reuseport": one single-threaded runtime and SO_REUSEPORT socket per thread
//! connect_timeout = "3.5s"
//! first_byte_timeout = "60s"
//! between_bytes_timeout = "60s"
//! header_timeout = "10s"            # a client's request head, from its first byte
//! idle_timeout = "5s"               # a client connection with no request in flight
//! body_timeout = "60s"              # silence within a client's request body
//! send_timeout = "600s"             # sending one response, head to last byte
//! idle_send_timeout = "60s"         # a client that takes nothing of its response
//! max_connections = 10000           # open client connections
//! pipe_timeout = "60s"              # a pipe (WebSocket) with no byte either way is closed
//! max_pipes = 5000                  # pipes open at once; past it 503
//! max_esi_depth = 5                 # ESI includes nest this deep at most
//! dns_ttl = "30s"                   # backend .host names are looked up again this often
//! hosts_file = "hosts"              # /etc/hosts-style names, looked up before DNS
//! purge_allow = ["127.0.0.1/8", "::1"]
//! invalidate_on_unsafe = "allowed"  # who evicts by POST/PUT/DELETE/...: "all", "allowed" (purge_allow), "off"
//! cache_status_header = "X-Cache"
//! store_set_cookie = false
//! store_post_responses = true      # false: POST responses are never stored for GETs
//! lookup_with_cookie = false        # true: requests with Cookie are looked up, not passed
//! lookup_with_authorization = false # true: requests with Authorization are looked up (RFC 9111 §3.5 storing)
//! grace = "10s"
//! keep = "10m"
//! ban_lurker_rate = 100000          # objects/s the ban lurker tests against obj.* bans; 0 = off
//! ban_lurker_age = "60s"            # bans younger than this are left to lookups
//! ignore_request_cache_control = false
//! targeted_cache_control = "CDN-Cache-Control"   # "" disables
//! health_path = "/healthz"          # the balancer's health check; "off" disables
//! drain_time = "0s"                 # 503 on health_path this long before shutdown closes the listeners
//! strip_targeted_cache_control = false   # true: not forwarded to clients
//! surrogate_key_headers = "xkey,Surrogate-Key,Cache-Tag"   # keys that index objects; "off": none
//! keep_surrogate_key_headers = false   # true: key headers are delivered to clients
//! show_backend_errors = false       # true: failed fetches show backend, address, OS error
//! log_format = "compact"   # or "json", "ncsa" (varnishncsa / Apache combined), '%h "%r" %s'
//! access_log = "/var/log/edgecache/access.log"   # instead of stderr; reopened on SIGUSR1
//! admin_listen = "127.0.0.1:6082"   # "off" disables the admin API
//! admin_token_file = "admin.token"  # required when admin_listen is not loopback
//! peers = ["10.0.0.2:6082", "10.0.0.3:6082"]   # admin APIs purges and bans are forwarded to
//! peer_retry_time = "5s"            # a peer that does not answer is tried again this long
//! watch = true                      # reload when the policy or an include changes
//! plugin_memory = "16m"             # linear memory per WebAssembly plugin instance
//! plugin_deadline = "5ms"           # CPU time per plugin callback
//! plugin_pause_timeout = "30s"      # how long a plugin may keep a request paused
//! max_header_size = "8k"           # a header field or the request line (Varnish http_req_hdr_len)
//! max_request_head = "32k"          # the whole request head (Varnish http_req_size)
//! h2_rapid_reset_limit = 100        # origin fetches by reset streams per period; 0 = off
//! h2_rapid_reset_period = "60s"
//! h2_max_streams_per_second = 100000 # new HTTP/2 streams per connection; 0 = off
//! h2_max_concurrent_streams = 100   # HTTP/2 streams open at once (Varnish h2_max_concurrent_streams)
//! max_headers = 100                 # header fields per request (Varnish http_max_hdr)
//! tls_dir = "certs"                # NAME.pem files (chain + key) for the ,tls listeners
//! tls_handshake_timeout = "10s"
//!
//! [[tls]]                           # the default certificate: no names
//! cert = "site.pem"
//! key = "site.key"
//! [[tls]]
//! cert = "shop.pem"                 # chain and key in one file
//! names = ["shop.example.com"]
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    parse_cidr_list, parse_duration, parse_finish_abandoned_fills, parse_listen, parse_size, Config,
    ConfigError,
};

/// A number or a string such as `"256m"` / `"120s"`.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::Text(t) => t.clone(),
        }
    }
}

/// The file as written; every key optional. Unknown keys are refused by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    listen: Option<Vec<String>>,
    backend: Option<String>,
    backend_ca: Option<PathBuf>,
    policy: Option<PathBuf>,
    policy_format: Option<String>,
    cache_size: Option<Quantity>,
    max_object_size: Option<Quantity>,
    slice_size: Option<Quantity>,
    cache_admission: Option<String>,
    finish_abandoned_fills: Option<Quantity>,
    default_ttl: Option<Quantity>,
    threads: Option<usize>,
    worker_model: Option<String>,
    connect_timeout: Option<Quantity>,
    first_byte_timeout: Option<Quantity>,
    between_bytes_timeout: Option<Quantity>,
    header_timeout: Option<Quantity>,
    idle_timeout: Option<Quantity>,
    body_timeout: Option<Quantity>,
    send_timeout: Option<Quantity>,
    idle_send_timeout: Option<Quantity>,
    max_connections: Option<usize>,
    pipe_timeout: Option<Quantity>,
    max_pipes: Option<usize>,
    max_esi_depth: Option<u32>,
    dns_ttl: Option<Quantity>,
    hosts_file: Option<PathBuf>,
    purge_allow: Option<Vec<String>>,
    invalidate_on_unsafe: Option<String>,
    cache_status_header: Option<String>,
    hit_for_pass_ttl: Option<Quantity>,
    coalesce_wait: Option<Quantity>,
    shutdown_grace: Option<Quantity>,
    health_path: Option<String>,
    drain_time: Option<Quantity>,
    store_set_cookie: Option<bool>,
    store_post_responses: Option<bool>,
    lookup_with_cookie: Option<bool>,
    lookup_with_authorization: Option<bool>,
    grace: Option<Quantity>,
    keep: Option<Quantity>,
    ban_lurker_rate: Option<u64>,
    ban_lurker_age: Option<Quantity>,
    ignore_request_cache_control: Option<bool>,
    targeted_cache_control: Option<String>,
    strip_targeted_cache_control: Option<bool>,
    surrogate_key_headers: Option<String>,
    keep_surrogate_key_headers: Option<bool>,
    show_backend_errors: Option<bool>,
    log_format: Option<String>,
    admin_listen: Option<String>,
    admin_token_file: Option<PathBuf>,
    peers: Option<Vec<String>>,
    peer_retry_time: Option<Quantity>,
    access_log: Option<PathBuf>,
    watch: Option<bool>,
    tls: Option<Vec<super::tls::TlsFileEntry>>,
    tls_dir: Option<PathBuf>,
    tls_handshake_timeout: Option<Quantity>,
    plugin_memory: Option<Quantity>,
    plugin_deadline: Option<Quantity>,
    plugin_pause_timeout: Option<Quantity>,
    max_header_size: Option<Quantity>,
    max_request_head: Option<Quantity>,
    h2_rapid_reset_limit: Option<u32>,
    h2_rapid_reset_period: Option<Quantity>,
    h2_max_streams_per_second: Option<u32>,
    h2_max_concurrent_streams: Option<u32>,
    max_headers: Option<usize>,
}

impl FileConfig {
    /// Reads and parses a TOML file. Errors name the file and the key.
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ConfigError::new(
                "--config",
                format!("cannot read {}: {error}", path.display()),
                "a readable TOML file",
            )
        })?;
        toml::from_str(&text).map_err(|error| {
            ConfigError::new(
                place(path, &text, error.span()),
                error.message().to_string(),
                "the keys and value types of examples/edgecache.toml (and the README)",
            )
        })
    }

    /// Writes every key present in the file onto `config`. Relative `policy` paths are taken
    /// relative to the file's directory, as nginx and Varnish do for their includes.
    pub fn apply(self, config: &mut Config, base_dir: &Path) -> Result<(), ConfigError> {
        fn size(key: &str, value: Option<Quantity>, slot: &mut u64) -> Result<(), ConfigError> {
            if let Some(value) = value {
                *slot = parse_size(&value.text()).map_err(|problem| {
                    ConfigError::new(key, problem, "bytes with an optional k/m/g suffix, e.g. \"256m\"")
                })?;
            }
            Ok(())
        }
        fn duration(
            key: &str,
            value: Option<Quantity>,
            slot: &mut std::time::Duration,
        ) -> Result<(), ConfigError> {
            if let Some(value) = value {
                *slot = parse_duration(&value.text()).map_err(|problem| {
                    ConfigError::new(
                        key,
                        problem,
                        "seconds, or a number with ms/s/m/h/d/w, e.g. \"120s\"",
                    )
                })?;
            }
            Ok(())
        }
        if let Some(listen) = self.listen {
            config.listen = listen
                .iter()
                .map(|addr| {
                    parse_listen(addr).map_err(|problem| {
                        ConfigError::new(
                            "listen",
                            problem,
                            "IP:PORT or :PORT, then ,PROXY and/or ,tls, e.g. \"127.0.0.1:8080\", \":6086,PROXY\"",
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(backend) = self.backend {
            config.backend = Some(backend);
        }
        if let Some(ca) = self.backend_ca {
            config.backend_ca = Some(base_dir.join(ca));
        }
        if let Some(policy) = self.policy {
            config.policy = Some(base_dir.join(policy));
        }
        if let Some(format) = self.policy_format {
            config.policy_format =
                Some(format.parse().map_err(|problem| {
                    ConfigError::new("policy_format", problem, "\"vcl\" or \"rewrite\"")
                })?);
        }
        size("cache_size", self.cache_size, &mut config.cache_size)?;
        size(
            "max_object_size",
            self.max_object_size,
            &mut config.max_object_size,
        )?;
        size("slice_size", self.slice_size, &mut config.slice_size)?;
        if let Some(admission) = self.cache_admission {
            config.cache_admission = admission
                .parse()
                .map_err(|problem| ConfigError::new("cache_admission", problem, "\"lru\" or \"tinylfu\""))?;
        }
        if let Some(finish) = self.finish_abandoned_fills {
            config.finish_abandoned_fills =
                parse_finish_abandoned_fills(&finish.text()).map_err(|problem| {
                    ConfigError::new(
                        "finish_abandoned_fills",
                        problem,
                        "\"on\", \"off\" or a size such as \"1m\"",
                    )
                })?;
        }
        duration("default_ttl", self.default_ttl, &mut config.default_ttl)?;
        duration(
            "connect_timeout",
            self.connect_timeout,
            &mut config.timeouts.connect,
        )?;
        duration(
            "first_byte_timeout",
            self.first_byte_timeout,
            &mut config.timeouts.first_byte,
        )?;
        duration(
            "between_bytes_timeout",
            self.between_bytes_timeout,
            &mut config.timeouts.between_bytes,
        )?;
        duration(
            "header_timeout",
            self.header_timeout,
            &mut config.client_timeouts.header,
        )?;
        duration(
            "idle_timeout",
            self.idle_timeout,
            &mut config.client_timeouts.idle,
        )?;
        duration(
            "body_timeout",
            self.body_timeout,
            &mut config.client_timeouts.body,
        )?;
        duration(
            "send_timeout",
            self.send_timeout,
            &mut config.client_timeouts.send,
        )?;
        duration(
            "idle_send_timeout",
            self.idle_send_timeout,
            &mut config.client_timeouts.idle_send,
        )?;
        if let Some(max) = self.max_connections {
            config.max_connections = max;
        }
        duration("pipe_timeout", self.pipe_timeout, &mut config.pipe_timeout)?;
        if let Some(max) = self.max_pipes {
            config.max_pipes = max;
        }
        if let Some(max) = self.max_esi_depth {
            config.max_esi_depth = max;
        }
        duration("dns_ttl", self.dns_ttl, &mut config.dns_ttl)?;
        if let Some(hosts_file) = self.hosts_file {
            config.hosts_file = Some(base_dir.join(hosts_file));
        }
        duration(
            "hit_for_pass_ttl",
            self.hit_for_pass_ttl,
            &mut config.hit_for_pass_ttl,
        )?;
        duration("coalesce_wait", self.coalesce_wait, &mut config.coalesce_wait)?;
        duration("shutdown_grace", self.shutdown_grace, &mut config.shutdown_grace)?;
        duration("grace", self.grace, &mut config.grace)?;
        duration("keep", self.keep, &mut config.keep)?;
        duration("ban_lurker_age", self.ban_lurker_age, &mut config.ban_lurker_age)?;
        if let Some(rate) = self.ban_lurker_rate {
            config.ban_lurker_rate = rate;
        }
        duration(
            "plugin_deadline",
            self.plugin_deadline,
            &mut config.plugin_limits.deadline,
        )?;
        duration(
            "plugin_pause_timeout",
            self.plugin_pause_timeout,
            &mut config.plugin_pause_timeout,
        )?;
        let mut plugin_memory = config.plugin_limits.memory as u64;
        size("plugin_memory", self.plugin_memory, &mut plugin_memory)?;
        config.plugin_limits.memory = usize::try_from(plugin_memory).unwrap_or(usize::MAX);
        for (key, value, slot) in [
            (
                "max_header_size",
                self.max_header_size,
                &mut config.request_limits.max_header_size,
            ),
            (
                "max_request_head",
                self.max_request_head,
                &mut config.request_limits.max_request_head,
            ),
        ] {
            let mut bytes = *slot as u64;
            size(key, value, &mut bytes)?;
            *slot = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Some(limit) = self.h2_rapid_reset_limit {
            config.h2_limits.rapid_reset_limit = limit;
        }
        duration(
            "h2_rapid_reset_period",
            self.h2_rapid_reset_period,
            &mut config.h2_limits.rapid_reset_period,
        )?;
        if let Some(rate) = self.h2_max_streams_per_second {
            config.h2_limits.max_streams_per_second = rate;
        }
        if let Some(streams) = self.h2_max_concurrent_streams {
            config.h2_limits.max_concurrent_streams = streams;
        }
        if let Some(fields) = self.max_headers {
            config.request_limits.max_headers = fields;
        }
        if let Some(ignore) = self.ignore_request_cache_control {
            config.ignore_request_cache_control = ignore;
        }
        duration("drain_time", self.drain_time, &mut config.drain_time)?;
        if let Some(path) = self.health_path {
            config.health_path = super::health_path_setting(&path);
        }
        if let Some(strip) = self.strip_targeted_cache_control {
            config.strip_targeted_cache_control = strip;
        }
        if let Some(list) = self.surrogate_key_headers {
            config.surrogate_key_headers =
                super::surrogate_key_headers_setting(&list, "surrogate_key_headers")?;
        }
        if let Some(keep) = self.keep_surrogate_key_headers {
            config.keep_surrogate_key_headers = keep;
        }
        if let Some(show) = self.show_backend_errors {
            config.show_backend_errors = show;
        }
        if let Some(name) = self.targeted_cache_control {
            config.targeted_cache_control = match name.as_str() {
                "" => None,
                name => Some(name.parse().map_err(|_| {
                    ConfigError::new(
                        "targeted_cache_control",
                        format!("`{name}` is not a header name"),
                        "a field name such as \"CDN-Cache-Control\", or \"\" to disable",
                    )
                })?),
            };
        }
        if let Some(threads) = self.threads {
            if threads == 0 {
                return Err(ConfigError::new(
                    "threads",
                    "0 threads",
                    "a whole number of at least 1",
                ));
            }
            config.threads = Some(threads);
        }
        if let Some(model) = self.worker_model {
            config.worker_model = model.parse().map_err(|problem| {
                ConfigError::new("worker_model", problem, "\"shared\" or \"reuseport\"")
            })?;
        }
        if let Some(list) = self.purge_allow {
            config.purge_allow = parse_cidr_list(&list.join(",")).map_err(|problem| {
                ConfigError::new(
                    "purge_allow",
                    problem,
                    "addresses or CIDR networks, e.g. [\"127.0.0.0/8\"]",
                )
            })?;
        }
        if let Some(who) = self.invalidate_on_unsafe {
            config.invalidate_on_unsafe = who.parse().map_err(|problem| {
                ConfigError::new(
                    "invalidate_on_unsafe",
                    problem,
                    "\"all\", \"allowed\" (the purge_allow networks) or \"off\"",
                )
            })?;
        }
        if let Some(name) = self.cache_status_header {
            config.cache_status_header = name.parse().map_err(|_| {
                ConfigError::new(
                    "cache_status_header",
                    format!("`{name}` is not a header name"),
                    "a token such as \"X-Cache\"",
                )
            })?;
        }
        if let Some(store) = self.store_set_cookie {
            config.store_set_cookie = store;
        }
        if let Some(store) = self.store_post_responses {
            config.store_post_responses = store;
        }
        if let Some(lookup) = self.lookup_with_cookie {
            config.lookup_with_cookie = lookup;
        }
        if let Some(lookup) = self.lookup_with_authorization {
            config.lookup_with_authorization = lookup;
        }
        if let Some(admin) = self.admin_listen {
            config.admin_listen = match admin.as_str() {
                "off" | "" => None,
                addr => Some(addr.parse().map_err(|_| {
                    ConfigError::new(
                        "admin_listen",
                        format!("`{addr}` is not an address"),
                        "IP:PORT, e.g. \"127.0.0.1:6082\", or \"off\"",
                    )
                })?),
            };
        }
        if let Some(token_file) = self.admin_token_file {
            config.admin_token_file = Some(base_dir.join(token_file));
        }
        if let Some(peers) = self.peers {
            config.peers = peers;
        }
        duration(
            "peer_retry_time",
            self.peer_retry_time,
            &mut config.peer_retry_time,
        )?;
        if let Some(access_log) = self.access_log {
            config.access_log = Some(base_dir.join(access_log));
        }
        if let Some(watch) = self.watch {
            config.watch_policy = watch;
        }
        if let Some(entries) = self.tls {
            config.tls.certificates = entries
                .into_iter()
                .map(|entry| entry.into_files(base_dir))
                .collect();
        }
        if let Some(dir) = self.tls_dir {
            config.tls.dir = Some(base_dir.join(dir));
        }
        duration(
            "tls_handshake_timeout",
            self.tls_handshake_timeout,
            &mut config.tls.handshake_timeout,
        )?;
        if let Some(format) = self.log_format {
            config.log_format = super::parse_log_format(&format).map_err(|problem| {
                ConfigError::new(
                    "log_format",
                    problem,
                    "\"compact\", \"json\", \"ncsa\" (\"combined\") or a varnishncsa format string",
                )
            })?;
        }
        Ok(())
    }
}

/// `FILE:LINE:COLUMN (`the line`)` for a byte range of `text`, or the file alone.
fn place(path: &Path, text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let Some(start) = span.map(|span| span.start.min(text.len())) else {
        return path.display().to_string();
    };
    let line_start = text[..start].rfind('\n').map_or(0, |newline| newline + 1);
    let line = text[..start].matches('\n').count() + 1;
    let column = text[line_start..start].chars().count() + 1;
    let source = text[line_start..].lines().next().unwrap_or("").trim();
    format!("{}:{line}:{column} (`{source}`)", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WorkerModel;

    #[test]
    fn a_value_of_the_wrong_type_is_located() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("edgecache.toml");
        std::fs::write(
            &path,
            "backend = \"127.0.0.1:9000\"\nlisten = \"127.0.0.1:8080\"\n",
        )
        .unwrap();
        let error = FileConfig::read(&path).err().unwrap().to_string();
        assert!(
            error.contains("edgecache.toml:2:10 (`listen = \"127.0.0.1:8080\"`)"),
            "{error}"
        );
    }

    #[test]
    fn worker_model_takes_shared_or_reuseport_and_a_typo_names_the_key() {
        let apply = |text: &str| {
            let file: FileConfig = toml::from_str(text).unwrap();
            let mut config = Config::default();
            (file
                .apply(&mut config, Path::new("."))
                .map(|()| config.worker_model))
            .map_err(|error| error.to_string())
        };
        assert_eq!(apply("worker_model = \"reuseport\""), Ok(WorkerModel::ReusePort));
        assert_eq!(apply("worker_model = \"shared\""), Ok(WorkerModel::Shared));
        let error = apply("worker_model = \"reuse-port\"").unwrap_err();
        assert!(
            error.contains("worker_model") && error.contains("reuseport"),
            "{error}"
        );
    }
}
