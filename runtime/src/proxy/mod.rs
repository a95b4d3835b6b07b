//! The request path: from a client request to a response, through policy, cache and backend.
//!
//! `driver` is the only code that orders the phases (recv, hash, lookup, fetch,
//! backend_response, store, deliver); `builtin` holds Varnish's builtin `vcl_recv` and
//! `vcl_hash`, run natively by the driver and by the VCL session; `bereq` builds every request
//! sent to an origin; `route` is where a request's fetches go; `fetch` runs a miss's origin
//! fetch and judges what may be stored; `relay` streams passes and what is not stored to the
//! client; `invalidate` applies RFC 9111 §4.4 after unsafe requests;
//! `headers` holds the intermediary's header rules; `synth` is the only place that picks error
//! statuses; `access_log` writes one event per request; `commit` holds a response back until
//! its body has started (a body broken from the start becomes a 502). `request_checks` holds
//! what a client request must satisfy before anything else sees it (its refusals carry their
//! 4xx/5xx);
//! `client_side` is what a request carries of its client connection and its xid;
//! `h2_accounting` counts a request's origin fetches for the server's HTTP/2 caps; `pipe`
//! tunnels piped requests and WebSocket upgrades to the origin; `esi` parses ESI pages when
//! they are stored and assembles them at delivery; `gzip` compresses and decompresses bodies
//! as they stream (`beresp.do_gzip` / `do_gunzip`, ESI over gzip, clients without gzip).

mod access_log;
mod attempts;
mod bereq;
mod beresp;
mod builtin;
mod client_side;
mod client_tls;
mod commit;
mod driver;
mod esi;
mod fetch;
mod gzip;
mod h2_accounting;
mod headers;
mod invalidate;
mod partial;
mod pipe;
mod plugins;
mod proxied;
mod relay;
mod request_checks;
mod respond;
mod route;
mod synth;
mod trace;
mod vcl;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use http::HeaderName;
use ipnet::IpNet;
use policy_lang::BanExpr;

use crate::cache::key::CacheKey;
use crate::cache::rules::freshness::FreshnessOptions;
use crate::cache::rules::storable::StoreOptions;
use crate::cache::SharedCache;
use crate::config::{Config, InvalidateOnUnsafe};
use crate::peers::{Invalidation, Peers};
use crate::telemetry::{RequestLatency, Stats};
use crate::version::Version;

pub(crate) use client_side::ClientConnection;
pub(crate) use client_tls::ClientTls;
pub(crate) use driver::handle;
#[cfg(test)]
pub(crate) use h2_accounting::origin_fetch_started;
pub(crate) use h2_accounting::{refused_stream, OriginFetches};
pub(crate) use proxied::{Proxied, ProxySsl, ProxyTlvs};
pub(crate) use request_checks::MAX_METHOD_LEN;
pub(crate) use vcl::ListenerName;

/// What every request shares: settings, the cache, the origin.
pub(crate) struct Shared {
    /// The configuration version new requests start on (`reload` swaps it, `admin` reads it).
    pub active: Arc<ArcSwap<Version>>,
    /// The policies labels point to, for `return (vcl(LABEL))` (`reload` writes them).
    pub labels: Arc<crate::reload::Labels>,
    pub stats: Arc<Stats>,
    /// Request durations for `/metrics`.
    pub latency: RequestLatency,
    /// Objects, coalescing, hit-for-pass marks and bans, shared with `admin`.
    pub cache: SharedCache,
    pub freshness: FreshnessOptions,
    pub storing: StoreOptions,
    pub max_object_size: u64,
    /// `--slice-size`, at most `max_object_size`: the parts representations are stored by
    /// (`proxy::partial`); 0: off.
    pub slice_size: u64,
    /// Bytes an abandoned fill may still read (`Config::finish_abandoned_fills`).
    pub finish_abandoned_fills: u64,
    pub coalesce_wait: Duration,
    /// `--body-timeout`: the longest silence within a client's request body.
    pub body_timeout: Duration,
    /// `--pipe-timeout`: the longest silence, both ways, of a pipe's tunnel.
    pub pipe_timeout: Duration,
    /// `--max-esi-depth`.
    pub max_esi_depth: u32,
    /// `--max-pipes`, and a permit per pipe open.
    pub max_pipes: usize,
    pub pipes: Arc<tokio::sync::Semaphore>,
    /// `--max-header-size`, `--max-request-head`.
    pub request_limits: crate::config::RequestLimits,
    pub purge_allow: Vec<IpNet>,
    pub invalidate_on_unsafe: InvalidateOnUnsafe,
    pub cache_status_header: HeaderName,
    pub grace: Duration,
    pub keep: Duration,
    pub ignore_request_cache_control: bool,
    pub targeted_cache_control: Option<HeaderName>,
    pub strip_targeted_cache_control: bool,
    /// `--keep-surrogate-key-headers`: the key headers reach clients.
    pub keep_surrogate_key_headers: bool,
    /// `--show-backend-errors`: failed fetches' pages name the backend and the OS error.
    pub show_backend_errors: bool,
    /// `store_post_responses`: POST responses may be stored for later GETs (RFC 9110 §9.3.3).
    pub store_post_responses: bool,
    /// `--lookup-with-authorization`, `--lookup-with-cookie`: what the builtin `vcl_recv`
    /// looks up despite credentials or cookies.
    pub lookups: builtin::Lookups,
    /// Request traces for `GET /log` (`edgecache log`), built only while someone listens.
    pub traces: Arc<crate::trace::Hub>,
    /// Where the policy's purges and bans are forwarded (`--peers`): set once at start, when
    /// the admin API (which knows the token and its own address) is up; empty without peers.
    pub peers: std::sync::OnceLock<Arc<Peers>>,
}

impl Shared {
    pub fn new(config: &Config, version: Version, latency: RequestLatency) -> Shared {
        let stats = Arc::new(Stats::default());
        Shared {
            active: Arc::new(ArcSwap::from_pointee(version)),
            labels: Arc::default(),
            cache: SharedCache::new(config, stats.clone()),
            stats,
            latency,
            freshness: FreshnessOptions {
                default_ttl: config.default_ttl,
                ..FreshnessOptions::default()
            },
            storing: StoreOptions {
                store_set_cookie: config.store_set_cookie,
                default_ttl: config.default_ttl,
            },
            max_object_size: config.max_object_size,
            slice_size: config.slice_size.min(config.max_object_size),
            finish_abandoned_fills: config.finish_abandoned_fills,
            coalesce_wait: config.coalesce_wait,
            body_timeout: config.client_timeouts.body,
            pipe_timeout: config.pipe_timeout,
            max_pipes: config.max_pipes,
            max_esi_depth: config.max_esi_depth,
            pipes: Arc::new(tokio::sync::Semaphore::new(config.max_pipes)),
            request_limits: config.request_limits,
            purge_allow: config.purge_allow.clone(),
            invalidate_on_unsafe: config.invalidate_on_unsafe,
            cache_status_header: config.cache_status_header.clone(),
            grace: config.grace,
            keep: config.keep,
            ignore_request_cache_control: config.ignore_request_cache_control,
            targeted_cache_control: config.targeted_cache_control.clone(),
            strip_targeted_cache_control: config.strip_targeted_cache_control,
            keep_surrogate_key_headers: config.keep_surrogate_key_headers,
            show_backend_errors: config.show_backend_errors,
            store_post_responses: config.store_post_responses,
            lookups: builtin::Lookups::from_config(config),
            traces: Arc::default(),
            peers: std::sync::OnceLock::new(),
        }
    }

    /// Purges every variant of `key` here and on every peer (a `PURGE`, `return (purge)`);
    /// whether it was stored here.
    pub fn purge_everywhere(&self, key: &CacheKey) -> bool {
        let found = self.cache.purge(key);
        share(self.peers.get(), || Invalidation::Hash {
            key: key.as_bytes().to_vec(),
            soft: false,
        });
        found
    }

    /// Adds `ban` here and on every peer, with the time it was created here.
    pub fn ban_everywhere(&self, ban: BanExpr) {
        let expr = ban.as_str().to_string();
        let created = self.cache.ban(ban);
        share(self.peers.get(), || Invalidation::Ban { expr, created });
    }

    /// Whether `client` is in `--purge-allow`.
    pub fn purge_allowed(&self, client: IpAddr) -> bool {
        let address = client.to_canonical();
        self.purge_allow.iter().any(|net| net.contains(&address))
    }

    /// Whether a non-error response to `client`'s unsafe request may invalidate stored
    /// responses (RFC 9111 §4.4), per `--invalidate-on-unsafe`.
    pub fn may_invalidate(&self, client: IpAddr) -> bool {
        match self.invalidate_on_unsafe {
            InvalidateOnUnsafe::All => true,
            InvalidateOnUnsafe::Allowed => self.purge_allowed(client),
            InvalidateOnUnsafe::Off => false,
        }
    }

    /// The targeted cache-control field name, if enabled.
    pub fn targeted(&self) -> Option<&HeaderName> {
        self.targeted_cache_control.as_ref()
    }

    /// Removes the surrogate-key headers from a response to a client, unless
    /// `--keep-surrogate-key-headers`. They stay stored: the key index reads them again when
    /// the object leaves.
    pub fn strip_surrogate_keys(&self, headers: &mut http::HeaderMap) {
        if self.keep_surrogate_key_headers {
            return;
        }
        let names = self.cache.store.keys().headers();
        // Most responses carry none: comparing names is cheaper than hashing each for removal.
        if !headers.keys().any(|name| names.contains(name)) {
            return;
        }
        for name in names {
            headers.remove(name);
        }
    }

    /// The targeted field when `--strip-targeted-cache-control` keeps it from clients (and so
    /// from stored objects); `None` when it is forwarded.
    pub fn targeted_to_strip(&self) -> Option<&HeaderName> {
        self.targeted().filter(|_| self.strip_targeted_cache_control)
    }

    /// Whether representations are stored by slices (`partial`) for requests on `version`:
    /// `--slice-size` is not 0, and no policy sub would have to see the slice fetches or hits
    /// (`vcl_hit`, `vcl_miss`, `vcl_backend_fetch`, `vcl_backend_response`), which run for
    /// whole objects only.
    pub fn slices_for(&self, version: &Version) -> bool {
        use policy_lang::Sub;
        self.slice_size > 0
            && [Sub::Hit, Sub::Miss, Sub::BackendFetch, Sub::BackendResponse]
                .into_iter()
                .all(|sub| version.policy_defining(sub).is_none())
    }
}

/// Forwards what `what` builds to the peers, when there are any: what the policy invalidated
/// here (`crate::peers`), built only then.
fn share(peers: Option<&Arc<Peers>>, what: impl FnOnce() -> Invalidation) {
    if let Some(peers) = peers {
        peers.share(what());
    }
}
