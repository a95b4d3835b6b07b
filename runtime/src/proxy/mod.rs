//! The request path: from a client request to a response, through policy, cache and backend.
//!
//! `driver` is the only code that orders the phases (recv, hash, lookup, fetch,
//! backend_response, store, deliver); `fetch` runs one origin fetch, storing what may be stored;
//! `headers` holds the intermediary's header rules; `synth` is the only place that picks error
//! statuses; `access_log` writes one event per request; `commit` holds a response back until
//! its body has started (a body broken from the start becomes a 502). `request_checks` holds
//! what a client request must satisfy before anything else sees it (its refusals carry their
//! 4xx/5xx);
//! `h2_accounting` counts a request's origin fetches for the server's HTTP/2 caps; `pipe`
//! tunnels piped requests and WebSocket upgrades to the origin.

mod access_log;
mod attempts;
mod bans;
mod client_tls;
mod commit;
mod driver;
mod fetch;
mod h2_accounting;
mod headers;
mod pipe;
mod plugins;
mod proxied;
mod request_checks;
mod respond;
mod synth;
mod vcl;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use policy_lang::BanExpr;

use http::HeaderName;
use ipnet::IpNet;

use crate::admin::metrics::RequestLatency;
use crate::cache::coalesce::Coalescer;
use crate::cache::key::CacheKey;
use crate::cache::object::CachedObject;
use crate::cache::rules::freshness::FreshnessOptions;
use crate::cache::rules::storable::StoreOptions;
use crate::cache::store::Store;
use crate::config::{Config, InvalidateOnUnsafe};
use crate::stats::Stats;
use crate::version::Version;
use bans::BanList;

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
    /// The configuration version new requests start on.
    pub active: ArcSwap<Version>,
    pub stats: Arc<Stats>,
    /// Request durations for `/metrics`.
    pub latency: RequestLatency,
    bans: BanList,
    pub store: Store,
    pub coalescer: Coalescer,
    pub freshness: FreshnessOptions,
    pub storing: StoreOptions,
    pub max_object_size: u64,
    /// Bytes an abandoned fill may still read (`Config::finish_abandoned_fills`).
    pub finish_abandoned_fills: u64,
    pub coalesce_wait: Duration,
    /// `--body-timeout`: the longest silence within a client's request body.
    pub body_timeout: Duration,
    /// `--pipe-timeout`: the longest silence, both ways, of a pipe's tunnel.
    pub pipe_timeout: Duration,
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
}

impl Shared {
    pub fn new(config: &Config, version: Version, latency: RequestLatency) -> Shared {
        let stats = Arc::new(Stats::default());
        Shared {
            active: ArcSwap::from_pointee(version),
            stats: stats.clone(),
            latency,
            bans: BanList::default(),
            store: Store::new(config.cache_size, config.cache_admission, stats.clone()),
            coalescer: Coalescer::new(config.hit_for_pass_ttl),
            freshness: FreshnessOptions {
                default_ttl: config.default_ttl,
                ..FreshnessOptions::default()
            },
            storing: StoreOptions {
                store_set_cookie: config.store_set_cookie,
                default_ttl: config.default_ttl,
            },
            max_object_size: config.max_object_size,
            finish_abandoned_fills: config.finish_abandoned_fills,
            coalesce_wait: config.coalesce_wait,
            body_timeout: config.client_timeouts.body,
            pipe_timeout: config.pipe_timeout,
            max_pipes: config.max_pipes,
            pipes: Arc::new(tokio::sync::Semaphore::new(config.max_pipes)),
            request_limits: config.request_limits,
            purge_allow: config.purge_allow.clone(),
            invalidate_on_unsafe: config.invalidate_on_unsafe,
            cache_status_header: config.cache_status_header.clone(),
            grace: config.grace,
            keep: config.keep,
            ignore_request_cache_control: config.ignore_request_cache_control,
            targeted_cache_control: config.targeted_cache_control.clone(),
        }
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

    /// Removes every variant of `key` and forgets its hit-for-pass mark.
    pub fn purge(&self, key: &CacheKey) -> bool {
        self.coalescer.clear_hit_for_pass(key);
        self.store.purge(key)
    }

    /// Adds a ban: objects stored before now that match are dropped at their next lookup.
    pub fn ban(&self, expr: BanExpr) {
        tracing::info!(ban = expr.as_str(), "ban added");
        self.bans.add(expr);
    }

    /// Drops the bans added before `cutoff` and returns how many are kept. A ban only applies
    /// to objects stored before it was added, so a caller that knows no stored (or still
    /// arriving) object predates `cutoff` may pass it: those bans can never match again.
    /// Used by `admin::bans`.
    pub fn trim_bans(&self, cutoff: SystemTime) -> usize {
        self.bans.trim(cutoff)
    }

    /// Whether a ban added after `object` was stored matches it (each ban is tested against an
    /// object once, see `bans`).
    pub fn is_banned(&self, object: &CachedObject) -> bool {
        self.bans.is_banned(object)
    }

    /// Ban expressions evaluated against objects so far (Varnish's `bans_tested`).
    pub fn bans_tested(&self) -> u64 {
        self.bans.tested()
    }

    /// The targeted cache-control field name, if enabled.
    pub fn targeted(&self) -> Option<&HeaderName> {
        self.targeted_cache_control.as_ref()
    }
}
