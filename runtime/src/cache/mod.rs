//! The shared HTTP cache: RFC 9111 decisions, storage, coalescing of misses, bans.
//!
//! `rules` holds the RFC 9111 decisions as pure functions; `store` keeps objects in moka,
//! bounded in bytes; `coalesce` makes concurrent misses for one key share one origin fetch and
//! remembers uncacheable keys (hit-for-pass); `fill` reads one origin body into the cache and
//! its coalesced readers; `bans` tests stored objects against the ban list; `keys` indexes
//! them by their surrogate keys for purges by key; `partial` keeps representations stored by
//! slices (RFC 9111 §3.3, §3.4);
//! `state` names the cache outcome of a request. [`SharedCache`] is the handle the request path
//! and the admin API both hold. This module never calls the proxy, the policy or a backend: the
//! proxy drives it.

use std::sync::Arc;
use std::time::SystemTime;

use policy_lang::BanExpr;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::telemetry::Stats;
pub(crate) use bans::lurker::LurkerSettings;
use bans::BanList;
pub(crate) use bans::{BanCounters, BanRow};
use clock::Clock;
use coalesce::Coalescer;
use key::CacheKey;
use object::CachedObject;
use store::Store;

mod bans;
pub(crate) mod body;
pub mod clock;
pub(crate) mod coalesce;
pub(crate) mod fill;
pub(crate) mod key;
pub(crate) mod keys;
pub(crate) mod object;
pub(crate) mod partial;
pub(crate) mod rules;
pub(crate) mod state;
pub(crate) mod store;

/// The cache as the request path and the admin API share it: the stored objects, the fetches in
/// flight with the hit-for-pass marks, and the bans. Clones are the same cache.
#[derive(Clone)]
pub(crate) struct SharedCache {
    pub store: Store,
    pub coalescer: Coalescer,
    /// Representations stored by slices.
    pub partials: partial::Partials,
    bans: Arc<BanList>,
    /// The time every cache decision reads (see [`Clock`]).
    pub clock: Clock,
}

impl SharedCache {
    /// An empty cache sized by `--cache-size`, counting evictions in `stats`.
    pub fn new(config: &Config, stats: Arc<Stats>) -> SharedCache {
        let clock = Clock::default();
        let store = Store::new(
            config.cache_size,
            config.cache_admission,
            stats,
            keys::KeyIndex::new(config.surrogate_key_headers.clone()),
        );
        SharedCache {
            partials: partial::Partials::new(store.clone()),
            store,
            coalescer: Coalescer::new(config.hit_for_pass_ttl, clock.clone()),
            bans: Arc::default(),
            clock,
        }
    }

    /// Removes every variant of `key`, and its slices, and forgets its hit-for-pass mark.
    pub fn purge(&self, key: &CacheKey) -> bool {
        self.coalescer.clear_hit_for_pass(key);
        let sliced = self.partials.remove(key);
        self.store.purge(key) | sliced
    }

    /// Soft purge of every variant of `key` (a URL purge with `soft=1`, `purge.soft()`): each
    /// fresh one becomes stale now, keeping its grace and keep, so the next request is served
    /// it in grace while one background fetch refreshes it. Returns how many were fresh.
    /// Slices become stale too, and are fetched again when next used.
    pub fn soft_purge(&self, key: &CacheKey) -> usize {
        let now = self.clock.now();
        let variants = self.store.variants(key);
        let slices = self.partials.slices(key);
        variants
            .iter()
            .chain(&slices)
            .filter(|object| object.soft_purge(now))
            .count()
    }

    /// Purge by surrogate key (vmod xkey's `purge` and `softpurge`, `POST /purge?key=`): every
    /// object tagged with any key in `list` (separated by commas or blanks) is removed, or with
    /// `soft` made stale as [`SharedCache::soft_purge`] does (objects already stale are left
    /// alone and not counted, as xkey does). Returns how many objects that was.
    pub fn purge_keys(&self, list: &str, soft: bool) -> usize {
        let now = self.clock.now();
        let keys = self.store.keys();
        let purged = keys
            .tagged(list)
            .into_iter()
            .filter(|(key, object)| {
                if soft {
                    self.store.holds(key, object) && object.soft_purge(now)
                } else {
                    self.store.remove_object(key, object)
                }
            })
            .count();
        keys.count_purged(purged);
        tracing::info!(keys = list, soft, objects = purged, "purge by surrogate key");
        purged
    }

    /// Adds a ban: objects stored before now that match are dropped at their next lookup.
    /// Returns that time, which the ban carries to peers.
    pub fn ban(&self, expr: BanExpr) -> SystemTime {
        tracing::info!(ban = expr.as_str(), "ban added");
        let now = self.clock.now();
        self.bans.add(expr, now);
        now
    }

    /// Adds a ban created at `created` on a peer (`POST /ban` with `created`): it applies to the
    /// objects stored before then, not to those this node stored while it was on its way.
    pub fn ban_created(&self, expr: BanExpr, created: SystemTime) {
        tracing::info!(ban = expr.as_str(), "ban added (created on a peer)");
        self.bans.add_created(expr, created, self.clock.now());
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

    /// Ban expressions evaluated against objects at lookup so far (Varnish's `bans_tested`).
    pub fn bans_tested(&self) -> u64 {
        self.bans.counters().tested
    }

    /// The ban list, oldest first (`GET /bans`).
    pub fn ban_rows(&self) -> Vec<BanRow> {
        self.bans.rows()
    }

    /// What lookups and the lurker have done with the bans.
    pub fn ban_counters(&self) -> BanCounters {
        self.bans.counters()
    }

    /// Starts the ban lurker (see `bans::lurker`); the task ends when `stopped` turns true.
    pub fn spawn_ban_lurker(
        &self,
        settings: LurkerSettings,
        stopped: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        bans::lurker::spawn(self.clone(), settings, stopped)
    }
}
