//! The operator's admin API: HTTP/1.1 on its own listener (`-T`, loopback by default).
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /` | the dashboard: one HTML page (no external assets) charting `/stats` live, with backends, missed URLs, policies, purge and ban |
//! | `GET /status` | JSON: version, uptime, active policy (path, files, sha256, loaded at, generation), reloads, last reload error |
//! | `GET /stats` | JSON counters: requests by cache result, coalesced waits, cache, bans, reloads, backends |
//! | `GET /metrics` | Prometheus text format (OpenMetrics when `Accept` asks for it) |
//! | `GET /backends` | JSON: each backend of the active version: resolved addresses, health, probe window (`H` good, `-` bad, oldest first), in-flight requests, counters |
//! | `POST /backend/set_health?name=N&health=H` | `backend.set_health`: `sick` or `healthy` whatever the probe says, `auto` follows it again; `name=*`: every backend |
//! | `POST /purge?url=/path[&host=H][&soft=1]` | removes every variant of the default cache key (Host + URL); `host=*`: that path under every host (a ban); `soft=1`: they turn stale instead, served in grace while one fetch refreshes them |
//! | `GET /bans` | the ban list (`ban.list`): each ban's age, whether the lurker or lookups apply it, objects removed; `?format=text`: a table |
//! | `POST /purge?key=K1,K2[&soft=1]` | removes (or with `soft=1` makes stale) every object tagged with any of the surrogate keys; JSON with the count |
//! | `POST /purge?hash=KEY[&soft=1]` | removes (or makes stale) every variant of one cache key as `vcl_hash` built it (URL-safe base64 of its bytes): what a peer forwards when its policy purges |
//! | `POST /ban` | body: a ban expression (`req.url ~ "^/news/"`) as a JSON string or `{"ban": EXPR}` (`"created": UNIX_SECONDS` when a peer forwards it); 400 with the diagnostic if it does not parse |
//! | `POST /reload` | reloads now: 200 with the new generation, 422 with the diagnostics |
//! | `GET /vcl` | the loaded policies and labels (`vcl.list`): JSON, or varnishadm's table with `?format=text` |
//! | `POST /vcl/load?name=N&path=FILE` | loads FILE as policy N, not active (`vcl.load`); 422 with the diagnostics |
//! | `POST /vcl/use?name=N` | new requests start on policy N (`vcl.use`; an older one is the rollback) |
//! | `POST /vcl/label?label=L&name=N` | `return (vcl(L))` goes to policy N (`vcl.label`) |
//! | `POST /vcl/discard?name=N` | removes policy or label N (`vcl.discard`); dropped when its last request ends |
//! | `GET /log[?q=QUERY][&count=N]` | request traces in varnishlog's text as requests end, streamed; `q` a varnishlog `-q` query (400 naming the column when it does not parse), `count` ends after N requests (`log.rs`) |
//!
//! With `--peers`, purges and bans are also forwarded to every peer and the answer lists each
//! one's status (`peers`); see `crate::peers`.
//!
//! Successes are JSON; errors are `text/plain` with the message or rendered diagnostics.
//! With a token file (required when the listener is not loopback), every request must carry
//! `Authorization: Bearer TOKEN`; the comparison hashes both sides and compares the digests in
//! constant time, so neither the token nor its length leaks through timing.
//!
//! Pages in the operator's browser must not drive the API (`guard`): a foreign `Origin` or
//! `Host`, or a `POST` that is not `application/json`, is refused with 403 unless the request
//! carries the token. With the token, `POST /ban` may also send the expression as plain text.

mod bans;
mod guard;
pub mod log;
pub mod metrics;
mod peers;
pub mod stat;

/// The admin API's client lives with the peers, which forward invalidations through it.
pub use crate::peers::client;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::cache::key::CacheKey;
use crate::cache::SharedCache;
use crate::peers::{self as fanout, unix_seconds as unix, Peers};
use crate::reload::{Reloader, Trigger};
use crate::telemetry::{RequestLatency, Stats};
use crate::version::Version;
use crate::StartError;

pub(crate) use bans::spawn_trimmer as spawn_ban_trimmer;
use guard::Guard;

/// Largest `POST /ban` body.
const MAX_BODY: usize = 64 * 1024;

/// What the handlers read: the same handles on the active version, the cache and the counters
/// that the request path holds.
pub(crate) struct State {
    pub active: Arc<ArcSwap<Version>>,
    pub cache: SharedCache,
    pub stats: Arc<Stats>,
    pub reloader: Arc<Reloader>,
    pub started: Instant,
    pub latency: RequestLatency,
    /// Whether the file watcher runs.
    pub watching: bool,
    /// Where `GET /log` subscribes to request traces.
    pub traces: Arc<crate::trace::Hub>,
}

struct Admin {
    state: Arc<State>,
    registry: Registry,
    /// sha256 of the bearer token, when one is required.
    token: Option<[u8; 32]>,
    guard: Guard,
    /// Where purges and bans are forwarded (`--peers`); `None` without peers.
    peers: Option<Arc<Peers>>,
}

/// The admin API, once listening.
pub(crate) struct Started {
    pub address: SocketAddr,
    pub task: JoinHandle<()>,
    /// The peers (`--peers`), which the proxy forwards its policy's invalidations to as well:
    /// the token and this listener's address are known only here.
    pub peers: Option<Arc<Peers>>,
}

/// Reads the token file (when given), binds `addr` and serves until `stopped` turns true.
pub(crate) async fn start(
    addr: SocketAddr,
    token_file: Option<&Path>,
    peers: crate::peers::Settings,
    state: State,
    mut stopped: watch::Receiver<bool>,
) -> Result<Started, StartError> {
    let token_text = token_file.map(read_token).transpose()?;
    let token = token_text
        .as_deref()
        .map(|text| Sha256::digest(text.as_bytes()).into());
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::AdminBind {
            address: addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| StartError::Bind {
        address: addr,
        source,
    })?;
    let state = Arc::new(state);
    let peers = Peers::new(peers, token_text, bound).map(Arc::new);
    let admin = Arc::new(Admin {
        registry: metrics::registry(state.clone(), peers.clone()),
        state,
        token,
        guard: Guard::new(bound),
        peers: peers.clone(),
    });
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = stopped.changed() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _peer)) = accepted else { continue };
                    let admin = admin.clone();
                    connections.spawn(async move {
                        let service = service_fn(move |request| {
                            let admin = admin.clone();
                            async move { Ok::<_, Infallible>(serve(&admin, request).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        connections.abort_all();
    });
    tracing::info!(address = %bound, token = admin_token_note(token_file), "admin API listening");
    Ok(Started {
        address: bound,
        task,
        peers,
    })
}

fn admin_token_note(token_file: Option<&Path>) -> &'static str {
    if token_file.is_some() {
        "required"
    } else {
        "not required (loopback)"
    }
}

/// The token in the file, trimmed; peers are sent it as it is.
fn read_token(path: &Path) -> Result<String, StartError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        StartError::Admin(format!(
            "cannot read the admin token file {}: {error}",
            path.display()
        ))
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(StartError::Admin(format!(
            "the admin token file {} is empty",
            path.display()
        )));
    }
    Ok(token.to_string())
}

/// Whether the request carries the bearer token whose sha256 is `expected`.
fn authorized(headers: &HeaderMap, expected: &[u8; 32]) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let given: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
    // Constant time: every byte is compared whatever the earlier ones were.
    given
        .iter()
        .zip(expected)
        .fold(0u8, |diff, (a, b)| diff | (a ^ b))
        == 0
}

// === routing ===

const ROUTES: &[(&str, &str)] = &[
    ("/", "GET, HEAD"),
    ("/status", "GET, HEAD"),
    ("/stats", "GET, HEAD"),
    ("/metrics", "GET, HEAD"),
    ("/backends", "GET, HEAD"),
    ("/purge", "POST"),
    ("/backend/set_health", "POST"),
    ("/ban", "POST"),
    ("/bans", "GET, HEAD"),
    ("/reload", "POST"),
    ("/vcl", "GET, HEAD"),
    ("/vcl/load", "POST"),
    ("/vcl/use", "POST"),
    ("/vcl/label", "POST"),
    ("/vcl/discard", "POST"),
    ("/log", "GET"),
];

/// `GET /log` streams (`log.rs`); every other answer is whole.
async fn serve(admin: &Admin, request: Request<Incoming>) -> Response<log::AdminBody> {
    if request.uri().path() == "/log" && request.method() == Method::GET {
        if let Some(refused) = refusal(admin, &request) {
            return refused.map(http_body_util::Either::Left);
        }
        return log::stream(&admin.state, request.uri().query().unwrap_or(""));
    }
    handle(admin, request).await.map(http_body_util::Either::Left)
}

/// The token's and the guard's answer to a request they refuse.
fn refusal(admin: &Admin, request: &Request<Incoming>) -> Option<Response<Full<Bytes>>> {
    if let Some(expected) = &admin.token {
        if !authorized(request.headers(), expected) {
            let mut response = text(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: Authorization: Bearer TOKEN\n",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Some(response);
        }
    }
    // Past the check above, a listener with a token has seen it.
    let authenticated = admin.token.is_some();
    if let Err(refusal) = admin
        .guard
        .check(request.method(), request.headers(), authenticated)
    {
        tracing::warn!(
            method = %request.method(),
            path = request.uri().path(),
            %refusal,
            "admin request refused"
        );
        return Some(text(StatusCode::FORBIDDEN, &format!("{refusal}\n")));
    }
    None
}

async fn handle(admin: &Admin, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if let Some(refused) = refusal(admin, &request) {
        return refused;
    }
    let state = &admin.state;
    let read = request.method() == Method::GET || request.method() == Method::HEAD;
    let post = request.method() == Method::POST;
    let path = request.uri().path().to_string();
    match path.as_str() {
        "/" if read => dashboard(),
        "/status" if read => json(StatusCode::OK, status(state)),
        "/stats" if read => json(StatusCode::OK, stats(state)),
        "/backends" if read => json(StatusCode::OK, backends(state)),
        "/metrics" if read => {
            let accept = request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
            let (body, content_type) = metrics::encode(&admin.registry, accept);
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        "/purge" if post => {
            let (forwarded, target) = forwarding(&request);
            let local = purge(state, &request);
            peers::share(admin.peers.as_deref(), forwarded, &target, local).await
        }
        "/backend/set_health" if post => set_health(state, request.uri().query().unwrap_or("")),
        "/ban" if post => {
            let (forwarded, target) = forwarding(&request);
            let local = ban(state, request).await;
            peers::share(admin.peers.as_deref(), forwarded, &target, local).await
        }
        "/bans" if read => bans::list(&state.cache, request.uri().query().unwrap_or("")),
        "/reload" if post => match state.reloader.reload(Trigger::Admin).await {
            Ok(generation) => json(StatusCode::OK, json!({ "generation": generation })),
            Err(failure) => text(StatusCode::UNPROCESSABLE_ENTITY, &with_newline(failure.message)),
        },
        "/vcl" if read => vcl_list(state, request.uri().query().unwrap_or("")),
        "/vcl/load" | "/vcl/use" | "/vcl/label" | "/vcl/discard" if post => {
            vcl_command(state, &path, request.uri().query().unwrap_or("")).await
        }
        _ => match ROUTES.iter().find(|(route, _)| *route == path) {
            Some((_, allow)) => {
                let mut response = text(StatusCode::METHOD_NOT_ALLOWED, &format!("{path} accepts {allow}\n"));
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
                response
            }
            None => text(
                StatusCode::NOT_FOUND,
                "not found; try GET /status, /stats, /metrics, /backends, /bans or POST /purge?url=, /ban, /reload\n",
            ),
        },
    }
}

// === handlers ===

/// Whether a peer forwarded this request (it is then not forwarded again), and its target.
fn forwarding(request: &Request<Incoming>) -> (bool, String) {
    let forwarded = request.headers().contains_key(fanout::FORWARDED);
    let target = request
        .uri()
        .path_and_query()
        .map_or_else(|| request.uri().path().to_string(), |pq| pq.as_str().to_string());
    (forwarded, target)
}

/// When a ban was created: `created` (Unix seconds, sent by the peer that accepted it), never
/// later than now; now without one.
fn ban_created(state: &State, created: Option<f64>) -> Result<SystemTime, String> {
    let now = state.cache.clock.now();
    let Some(seconds) = created else { return Ok(now) };
    let since_epoch = std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("created {seconds} is not a time: Unix seconds, e.g. 1767225600.5"))?;
    Ok((UNIX_EPOCH + since_epoch).min(now))
}

/// `GET /vcl`: `vcl.list`.
fn vcl_list(state: &State, query: &str) -> Response<Full<Bytes>> {
    let rows = state.reloader.policies().list();
    match query_param(query, "format").as_deref() {
        Some("text") => text(StatusCode::OK, &crate::reload::render_list(&rows)),
        _ => json(StatusCode::OK, json!({ "vcl": rows })),
    }
}

/// `POST /vcl/load|use|label|discard`: Varnish's `vcl.*` commands; 422 when refused.
async fn vcl_command(state: &State, path: &str, query: &str) -> Response<Full<Bytes>> {
    let param = |name: &str| query_param(query, name).filter(|value| !value.is_empty());
    let Some(name) = param("name") else {
        return text(StatusCode::BAD_REQUEST, &format!("{path} needs ?name=NAME\n"));
    };
    let policies = state.reloader.policies();
    let done = match path {
        "/vcl/load" => {
            let Some(file) = param("path") else {
                return text(StatusCode::BAD_REQUEST, "/vcl/load needs ?name=NAME&path=FILE\n");
            };
            state
                .reloader
                .vcl_load(&name, file.into())
                .await
                .map(|generation| json!({ "loaded": name, "generation": generation }))
        }
        "/vcl/use" => policies.use_policy(&name).map(|()| json!({ "active": name })),
        "/vcl/label" => {
            let Some(label) = param("label") else {
                return text(
                    StatusCode::BAD_REQUEST,
                    "/vcl/label needs ?label=LABEL&name=NAME\n",
                );
            };
            policies
                .label(&label, &name)
                .map(|()| json!({ "label": label, "name": name }))
        }
        _ => policies.discard(&name).map(|()| json!({ "discarded": name })),
    };
    match done {
        Ok(value) => {
            tracing::info!(command = path, name = %name, "vcl command done");
            json(StatusCode::OK, value)
        }
        Err(error) => text(StatusCode::UNPROCESSABLE_ENTITY, &with_newline(error.to_string())),
    }
}

fn status(state: &State) -> Value {
    let version = state.active.load_full();
    let reloads = state.reloader.status();
    let policy = version.source.as_ref().map(|source| {
        json!({
            "path": source.path.display().to_string(),
            "files": source.files,
            "sha256": reloads.active_sha256,
            "loaded_at": httpdate::fmt_http_date(source.loaded_at),
            "loaded_at_unix": unix(source.loaded_at),
        })
    });
    let last_error = reloads.last_error.as_ref().map(|failure| {
        json!({
            "at": httpdate::fmt_http_date(failure.at),
            "at_unix": unix(failure.at),
            "trigger": failure.trigger.as_str(),
            "message": failure.message,
        })
    });
    let declared = version
        .policy
        .as_ref()
        .map_or(&[][..], |program| program.plugins());
    let plugins: Vec<Value> = version
        .plugins
        .iter()
        .zip(declared)
        .map(|(plugin, decl)| {
            let stats = plugin.stats();
            json!({
                "name": plugin.name(),
                "path": decl.path,
                "on_error": decl.on_error.as_str(),
                "isolation": decl.isolation.as_str(),
                "memory_limit_bytes": plugin.limits().memory,
                "deadline_ms": plugin.limits().deadline.as_secs_f64() * 1e3,
                "instances_created": stats.instances_created,
                "failures": {
                    "trap": stats.traps,
                    "deadline": stats.deadlines,
                    "out_of_memory": stats.out_of_memory,
                    "abi": stats.abi_errors,
                },
            })
        })
        .collect();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": state.started.elapsed().as_secs_f64(),
        "generation": version.generation,
        "policy": policy,
        "plugins": plugins,
        "watching": state.watching,
        "reloads": {
            "ok": reloads.ok,
            "failed": reloads.failed,
            "failing": reloads.failing,
            "last_error": last_error,
        },
    })
}

fn stats(state: &State) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = &state.stats;
    let reloads = state.reloader.status();
    json!({
        "requests": stats.requests.load(Relaxed),
        "hits": stats.hits.load(Relaxed),
        "misses": stats.misses.load(Relaxed),
        "passes": stats.passes.load(Relaxed),
        "stale": stats.stale.load(Relaxed),
        "revalidated": stats.revalidated.load(Relaxed),
        "synth": stats.synth.load(Relaxed),
        "coalesced_waits": stats.coalesced_waits.load(Relaxed),
        "pipes": stats.pipes.load(Relaxed),
        "pipe_bytes": stats.pipe_bytes.load(Relaxed),
        "pipes_refused": stats.pipes_refused.load(Relaxed),
        "esi_includes": stats.esi_includes.load(Relaxed),
        "esi_include_failures": stats.esi_failures.load(Relaxed),
        "pcre_limit_hits": policy_lang::pcre_limit_hits(),
        "cache": {
            "objects": state.cache.store.entry_count(),
            "bytes": state.cache.store.weighted_size(),
            "evictions": stats.evictions.load(Relaxed),
            "surrogate_keys": state.cache.store.keys().keys(),
            "surrogate_key_objects": state.cache.store.keys().objects(),
            "surrogate_key_index_bytes": state.cache.store.keys().bytes(),
            "purged_by_key": state.cache.store.keys().purged(),
            "soft_purged_served": stats.soft_purged_served.load(Relaxed),
            "partial_hits": stats.partial_hits.load(Relaxed),
            "slice_fetches": stats.slice_fetches.load(Relaxed),
            "sliced_representations": state.cache.partials.count(),
        },
        "bans": bans::trim(&state.cache),
        "bans_tested": state.cache.bans_tested(),
        "bans_lurked": state.cache.ban_counters().lurked,
        "bans_lurker_removed": state.cache.ban_counters().lurker_removed,
        "reloads": { "ok": reloads.ok, "failed": reloads.failed },
        "top_misses": stats.missed_urls.top(10).into_iter()
            .map(|(url, misses)| json!({ "url": url, "misses": misses }))
            .collect::<Vec<_>>(),
        "backends": backends(state),
    })
}

fn backends(state: &State) -> Value {
    use std::sync::atomic::Ordering::Relaxed;
    let version = state.active.load_full();
    let list: Vec<Value> = version
        .backends
        .iter()
        .map(|backend| {
            let stats = backend.stats();
            // Without a probe a backend is always healthy and `probe` is null.
            let probe = backend.health().map(|health| {
                json!({
                    "good": health.good,
                    "threshold": health.threshold,
                    "window": health.window,
                    "bits": health.bits,
                    "last_change": httpdate::fmt_http_date(health.last_change),
                    "last_change_unix": unix(health.last_change),
                    "last_failure": health.last_failure,
                    "probes_good": stats.probes_good.load(Relaxed),
                    "probes_bad": stats.probes_bad.load(Relaxed),
                })
            });
            json!({
                "name": backend.name(),
                "address": backend.address(),
                // What `.host` resolved to last (a name is looked up every --dns-ttl).
                "resolved": backend.resolved().iter().map(ToString::to_string).collect::<Vec<_>>(),
                "healthy": backend.healthy(),
                // `backend.set_health`: auto (the probe decides), healthy or sick.
                "admin_health": backend.admin_health().as_str(),
                "fetches": stats.fetches.load(Relaxed),
                "failures": stats.failures.load(Relaxed),
                "first_byte_micros": stats.first_byte_micros.load(Relaxed),
                "in_flight": backend.in_flight(),
                "max_connections": backend.options().max_connections,
                "refused": stats.refused.load(Relaxed),
                "probe": probe,
            })
        })
        .collect();
    Value::Array(list)
}

/// `POST /backend/set_health?name=N&health=healthy|sick|auto`: varnishadm's
/// `backend.set_health` on the backends of the active version named N (`*`: all of them).
fn set_health(state: &State, query: &str) -> Response<Full<Bytes>> {
    let (Some(name), Some(health)) = (query_param(query, "name"), query_param(query, "health")) else {
        return text(
            StatusCode::BAD_REQUEST,
            "POST /backend/set_health needs ?name=NAME&health=healthy|sick|auto\n",
        );
    };
    // The type is the backend's (what `set_admin_health` takes); admin does not name it.
    let wanted = match health.parse() {
        Ok(wanted) => wanted,
        Err(error) => return text(StatusCode::BAD_REQUEST, &format!("{error}\n")),
    };
    let version = state.active.load_full();
    let matched: Vec<&str> = version
        .backends
        .iter()
        .filter(|backend| name == "*" || backend.name() == name)
        .map(|backend| {
            backend.set_admin_health(wanted);
            backend.name()
        })
        .collect();
    if matched.is_empty() {
        let known: Vec<&str> = version.backends.iter().map(|backend| backend.name()).collect();
        return text(
            StatusCode::NOT_FOUND,
            &format!(
                "no backend named `{name}`; backends: {} (or * for all)\n",
                known.join(", ")
            ),
        );
    }
    tracing::info!(backends = ?matched, health = wanted.as_str(), "backend health set from the admin API");
    json(
        StatusCode::OK,
        json!({ "backends": matched, "health": wanted.as_str() }),
    )
}

/// `POST /purge?url=...`: `url` is a path (`/a?b`) or an absolute URL (`http://host/a`); the
/// host comes from the absolute URL, else the `host` parameter, else this request's `Host`.
/// `host=*` purges the path for every host: a ban `req.url == "PATH"`, as no key can name
/// every host.
///
/// Purges the key the request would have had without a user `vcl_hash`: without a policy the
/// native default key, with one the builtin `vcl_hash`'s (URL, then Host). A policy that
/// defines its own `vcl_hash`, or rewrites the URL or Host in `vcl_recv`, builds other keys;
/// the answer then says the purge may have missed, and `POST /ban` (`req.url == "/a"`) is the
/// tool that always works.
fn purge(state: &State, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let query = request.uri().query().unwrap_or("");
    if let Some(keys) = query_param(query, "key") {
        return purge_keys(state, &keys, soft_param(query));
    }
    if let Some(hash) = query_param(query, "hash") {
        return purge_hash(state, &hash, soft_param(query));
    }
    let Some(url) = query_param(query, "url").filter(|url| !url.is_empty()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "missing the url or key parameter: POST /purge?url=/path[&host=HOST] or /purge?key=K1,K2\n",
        );
    };
    let (host, target) = if url.starts_with('/') {
        let host = query_param(query, "host").or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        });
        (host.unwrap_or_default(), url)
    } else {
        match url.parse::<http::Uri>() {
            Ok(uri) if uri.authority().is_some() => (
                uri.authority()
                    .map(|a| a.as_str().to_string())
                    .unwrap_or_default(),
                uri.path_and_query()
                    .map_or("/".to_string(), |pq| pq.as_str().to_string()),
            ),
            _ => {
                return text(
                    StatusCode::BAD_REQUEST,
                    &format!("`{url}` is neither a path (/...) nor an absolute URL (http://host/...)\n"),
                )
            }
        }
    };
    let soft = soft_param(query);
    if host == EVERY_HOST {
        if soft {
            return text(
                StatusCode::BAD_REQUEST,
                "soft=1 needs one host: every host is purged by a ban, which removes objects\n",
            );
        }
        let created = match query_param(query, "created").map(|text| text.parse::<f64>()) {
            None => None,
            Some(Ok(seconds)) => Some(seconds),
            Some(Err(_)) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "created must be Unix seconds, e.g. 1767225600.5\n",
                )
            }
        };
        return purge_every_host(state, &target, created);
    }
    let version = state.active.load_full();
    // The host + URL key: what edgecache uses without a policy and for a policy's builtin
    // vcl_hash alike. A user vcl_hash may build other keys (the note below says so).
    let key = CacheKey::from_host_and_target(&host, &target);
    let kind = "host + url (builtin vcl_hash)";
    let (purged, objects) = if soft {
        let objects = state.cache.soft_purge(&key);
        (objects > 0, Some(objects))
    } else {
        (state.cache.purge(&key), None)
    };
    tracing::info!(host, url = target, purged, soft, "purge from the admin API");
    let status = if purged {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let mut answer = json!({ "purged": purged, "host": host, "url": target, "key": kind });
    if let Some(objects) = objects {
        answer["soft"] = json!(true);
        answer["objects"] = json!(objects);
    }
    if version.policy_defining(policy_lang::Sub::Hash).is_some() {
        answer["note"] =
            json!("the policy defines vcl_hash, which may build other keys: use POST /ban to be sure");
    }
    json(status, answer)
}

/// `POST /purge?hash=KEY[&soft=1]`: every variant of one cache key, as `vcl_hash` built it
/// (URL-safe base64 of its bytes): how a peer forwards what its policy purged
/// (`return (purge)`, `purge.hard()` / `purge.soft()`), since every node runs the same policy.
fn purge_hash(state: &State, encoded: &str, soft: bool) -> Response<Full<Bytes>> {
    let Some(bytes) = fanout::decode_key(encoded) else {
        return text(
            StatusCode::BAD_REQUEST,
            "hash must be a cache key in URL-safe base64 without padding, as a peer forwards it\n",
        );
    };
    let key = CacheKey::from_hash_data(&bytes);
    let objects = if soft {
        state.cache.soft_purge(&key)
    } else {
        let variants = state.cache.store.variants(&key).len();
        state.cache.purge(&key);
        variants
    };
    tracing::info!(
        hash = encoded,
        soft,
        objects,
        "purge of a cache key from the admin API"
    );
    let status = if objects > 0 {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    json(
        status,
        json!({ "purged": objects > 0, "objects": objects, "hash": encoded, "soft": soft }),
    )
}

/// `POST /purge?key=K1,K2[&soft=1]`: every object tagged with any of the surrogate keys is
/// removed (or made stale); the answer counts them, as `xkey.purge` does.
fn purge_keys(state: &State, list: &str, soft: bool) -> Response<Full<Bytes>> {
    let keys: Vec<&str> = crate::cache::keys::tokens(list).collect();
    if keys.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "the key parameter names no key: POST /purge?key=K1,K2[&soft=1]\n",
        );
    }
    let purged = state.cache.purge_keys(list, soft);
    json(
        StatusCode::OK,
        json!({ "purged": purged, "keys": keys, "soft": soft }),
    )
}

/// Whether `POST /purge` asks for a soft purge (`soft=1`): objects turn stale instead of gone.
fn soft_param(query: &str) -> bool {
    matches!(query_param(query, "soft").as_deref(), Some("1" | "true"))
}

/// The `host` of `POST /purge` that means every host.
const EVERY_HOST: &str = "*";

/// `POST /purge?url=/path&host=*`: the path under every host, as the ban `req.url == "/path"`
/// (objects go at their next lookup or the ban trimmer's pass, like any ban).
fn purge_every_host(state: &State, target: &str, created: Option<f64>) -> Response<Full<Bytes>> {
    let created = match ban_created(state, created) {
        Ok(created) => created,
        Err(problem) => return text(StatusCode::BAD_REQUEST, &format!("{problem}\n")),
    };
    // A ban string has no escapes; a URL never needs these characters unencoded.
    if target.contains(['"', '\\']) {
        return text(
            StatusCode::BAD_REQUEST,
            &format!("`{target}` holds \" or \\: percent-encode it, or POST /ban an expression\n"),
        );
    }
    let expr = format!("req.url == \"{target}\"");
    match policy_lang::parse_ban(&expr) {
        Ok(parsed) => {
            state.cache.ban_created(parsed, created);
            tracing::info!(url = target, "purge of every host from the admin API (a ban)");
            json(
                StatusCode::OK,
                json!({
                    "purged": "every host", "url": target, "ban": expr,
                    "created": unix(created), "bans": bans::trim(&state.cache),
                }),
            )
        }
        Err(diagnostics) => text(StatusCode::BAD_REQUEST, &with_newline(diagnostics.render())),
    }
}

/// `POST /ban`: the body is one ban expression, as a JSON string or `{"ban": EXPR}` (plain
/// text when the request is not JSON, which `guard` lets through only with the token).
async fn ban(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let json_body = guard::is_json(request.headers());
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the body: {error}\n"),
            )
        }
    };
    let (expr, created) = match ban_expression(&body, json_body) {
        Ok(found) => found,
        Err(problem) => return text(StatusCode::BAD_REQUEST, &format!("{problem}\n")),
    };
    let created = match ban_created(state, created) {
        Ok(created) => created,
        Err(problem) => return text(StatusCode::BAD_REQUEST, &format!("{problem}\n")),
    };
    let expr = expr.trim();
    if expr.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "empty ban expression; e.g. req.url ~ \"^/news/\"\n",
        );
    }
    match policy_lang::parse_ban(expr) {
        Ok(parsed) => {
            state.cache.ban_created(parsed, created);
            json(
                StatusCode::OK,
                json!({ "ban": expr, "created": unix(created), "bans": bans::trim(&state.cache) }),
            )
        }
        Err(diagnostics) => text(StatusCode::BAD_REQUEST, &with_newline(diagnostics.render())),
    }
}

/// The ban expression in a `POST /ban` body, and its `created` time when a peer sent one.
fn ban_expression(body: &[u8], json_body: bool) -> Result<(String, Option<f64>), &'static str> {
    const SHAPE: &str = r#"the body must be a JSON string ("req.url ~ \"^/news/\"") or {"ban": "EXPR"[, "created": UNIX_SECONDS]}"#;
    if !json_body {
        return std::str::from_utf8(body)
            .map(|expr| (expr.to_string(), None))
            .map_err(|_| "the ban expression is not UTF-8");
    }
    match serde_json::from_slice::<Value>(body).map_err(|_| SHAPE)? {
        Value::String(expr) => Ok((expr, None)),
        Value::Object(mut fields) => {
            let created = match fields.remove("created") {
                None | Some(Value::Null) => None,
                Some(Value::Number(seconds)) => Some(seconds.as_f64().ok_or(SHAPE)?),
                Some(_) => return Err(SHAPE),
            };
            match fields.remove("ban") {
                Some(Value::String(expr)) if fields.is_empty() => Ok((expr, created)),
                _ => Err(SHAPE),
            }
        }
        _ => Err(SHAPE),
    }
}

// === helpers ===

fn json(status: StatusCode, value: Value) -> Response<Full<Bytes>> {
    let mut body = serde_json::to_vec_pretty(&value).expect("JSON values serialize");
    body.push(b'\n');
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `GET /`: one page, no external assets, that polls this API and draws the live numbers.
fn dashboard() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(
        include_str!("dashboard.html").as_bytes(),
    )));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The page talks only to this listener, and no other site may frame it (its buttons
    // purge and ban).
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(message.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The percent-decoded value of `name` in a query string (`+` is kept as is).
fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
