//! The request path: from a client request to a response, through policy, cache and backend.
//!
//! `driver` is the only code that orders the phases (recv, hash, lookup, fetch,
//! backend_response, store, deliver); `fetch` runs one origin fetch, storing what may be stored;
//! `headers` holds the intermediary's header rules; `synth` is the only place that picks error
//! statuses; `access_log` writes one event per request; `commit` holds a response back until
//! its body has started (a body broken from the start becomes a 502).

mod access_log;
mod attempts;
mod commit;
mod driver;
mod fetch;
mod headers;
mod plugins;
mod respond;
mod synth;
mod vcl;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use policy_lang::{BanContext, BanExpr};

use http::HeaderName;
use ipnet::IpNet;

use crate::admin::metrics::RequestLatency;
use crate::cache::coalesce::Coalescer;
use crate::cache::key::CacheKey;
use crate::cache::object::CachedObject;
use crate::cache::rules::freshness::FreshnessOptions;
use crate::cache::rules::storable::StoreOptions;
use crate::cache::store::Store;
use crate::config::Config;
use crate::stats::Stats;
use crate::version::Version;

pub(crate) use driver::handle;

/// A ban: an expression over objects, applying to those stored before `since`.
struct Ban {
    expr: BanExpr,
    since: SystemTime,
}

/// What a ban expression may test about an object.
struct BanTarget<'a>(&'a CachedObject);

impl BanContext for BanTarget<'_> {
    fn obj_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
        self.0
            .head
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(Cow::Borrowed)
    }

    fn obj_status(&self) -> u16 {
        self.0.head.status.as_u16()
    }

    fn req_url(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.0.head.url))
    }

    fn req_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
        if name == http::header::HOST {
            return self
                .0
                .head
                .host
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .map(Cow::Borrowed);
        }
        None
    }
}

/// What every request shares: settings, the cache, the origin.
pub(crate) struct Shared {
    /// The configuration version new requests start on.
    pub active: ArcSwap<Version>,
    pub stats: Arc<Stats>,
    /// Request durations for `/metrics`.
    pub latency: RequestLatency,
    bans: RwLock<Vec<Ban>>,
    pub store: Store,
    pub coalescer: Coalescer,
    pub freshness: FreshnessOptions,
    pub storing: StoreOptions,
    pub max_object_size: u64,
    pub coalesce_wait: Duration,
    pub purge_allow: Vec<IpNet>,
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
            bans: RwLock::default(),
            store: Store::new(config.cache_size, stats.clone()),
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
            coalesce_wait: config.coalesce_wait,
            purge_allow: config.purge_allow.clone(),
            cache_status_header: config.cache_status_header.clone(),
            grace: config.grace,
            keep: config.keep,
            ignore_request_cache_control: config.ignore_request_cache_control,
            targeted_cache_control: config.targeted_cache_control.clone(),
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
        self.bans.write().push(Ban {
            expr,
            since: SystemTime::now(),
        });
    }

    /// Drops the bans added before `cutoff` and returns how many are kept. A ban only applies
    /// to objects stored before it was added, so a caller that knows no stored (or still
    /// arriving) object predates `cutoff` may pass it: those bans can never match again.
    /// Used by `admin::bans`.
    pub fn trim_bans(&self, cutoff: SystemTime) -> usize {
        let mut bans = self.bans.write();
        bans.retain(|ban| ban.since >= cutoff);
        bans.len()
    }

    /// Whether a ban added after `object` was stored matches it.
    pub fn is_banned(&self, object: &CachedObject) -> bool {
        let bans = self.bans.read();
        if bans.is_empty() {
            return false;
        }
        let target = BanTarget(object);
        bans.iter()
            .any(|ban| ban.since >= object.head.response_time && ban.expr.matches(&target))
    }

    /// The targeted cache-control field name, if enabled.
    pub fn targeted(&self) -> Option<&HeaderName> {
        self.targeted_cache_control.as_ref()
    }
}
