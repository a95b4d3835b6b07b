//! Request coalescing and hit-for-pass.
//!
//! Guarantees:
//! - At most one origin fetch is in flight per key through this module: the first request to
//!   miss becomes the leader, later ones become waiters.
//! - A waiter waits at most the configured time; then, or if the leader goes away without an
//!   answer, it goes to the origin itself. Nobody waits forever on somebody else.
//! - When the leader's response turns out storable, waiters read it as it streams in.
//! - When it turns out uncacheable, waiters go to the origin themselves, and the key is
//!   remembered as hit-for-pass for a while, so later requests for it are not serialised
//!   behind each other (Varnish's hit-for-miss). A storable response clears the mark. The
//!   requests that pass under a mark do not renew it (that would be a store write per request):
//!   it ends `hit_for_pass_ttl` after it was set, and the next request leads a fetch again.
//! - A policy's `return (pass)` / `return (pass(DURATION))` in `vcl_backend_response` marks the
//!   key pass-only for that long (Varnish's hit-for-pass object): its requests pass, nothing is
//!   stored for it, until the mark expires or the key is purged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::sync::watch;

use super::body::SharedBody;
use super::clock::Clock;
use super::key::{CacheKey, KeyHasher};
use super::object::ObjectHead;
use super::rules::vary::VaryRule;
use crate::telemetry::Stats;

/// What a leader's fetch turned into, as seen by its waiters.
#[derive(Clone)]
pub enum FetchOutcome {
    /// A storable response whose body is streaming into `body`.
    Streaming {
        head: Arc<ObjectHead>,
        rule: Arc<VaryRule>,
        body: Arc<SharedBody>,
    },
    /// Not storable: go to the origin yourself.
    Uncacheable,
    /// The fetch failed or was abandoned: try yourself.
    Failed,
}

type Slot = watch::Receiver<Option<FetchOutcome>>;

#[derive(Default)]
struct InFlight {
    fetches: Mutex<HashMap<CacheKey, Slot>>,
}

/// The coalescing table and the hit-for-pass memory.
#[derive(Clone)]
pub struct Coalescer {
    in_flight: Arc<InFlight>,
    /// Hit-for-pass keys, each with when its mark ends by `clock`.
    hit_for_pass: moka::sync::Cache<CacheKey, SystemTime, KeyHasher>,
    /// Pass-only keys, each with its own lifetime.
    pass_only: moka::sync::Cache<CacheKey, PassOnly, KeyHasher>,
    /// Whether any pass-only mark was ever made: until one is, a lookup need not hash its key
    /// into `pass_only` (most policies never `return (pass(...))` from `vcl_backend_response`).
    any_pass_only: Arc<AtomicBool>,
    hit_for_pass_ttl: Duration,
    /// What decides that a mark ended; moka's own expiry (in real time, never sooner) only
    /// frees the memory.
    clock: Clock,
}

#[derive(Clone, Copy)]
struct PassOnly {
    ttl: Duration,
    until: SystemTime,
}

/// Each pass-only mark lives as long as the policy said.
struct OwnLifetime;

impl moka::Expiry<CacheKey, PassOnly> for OwnLifetime {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        mark: &PassOnly,
        _now: std::time::Instant,
    ) -> Option<Duration> {
        Some(mark.ttl)
    }
}

/// The caller's role for a key.
pub enum Join {
    Leader(Leader),
    Waiter(Waiter),
}

impl Coalescer {
    /// `hit_for_pass_ttl`: how long an uncacheable key skips coalescing, by `clock`.
    pub fn new(hit_for_pass_ttl: Duration, clock: Clock) -> Coalescer {
        let hit_for_pass = moka::sync::Cache::builder()
            .max_capacity(100_000)
            .time_to_live(hit_for_pass_ttl.max(Duration::from_millis(1)))
            .build_with_hasher(KeyHasher::default());
        let pass_only = moka::sync::Cache::builder()
            .max_capacity(100_000)
            .expire_after(OwnLifetime)
            .build_with_hasher(KeyHasher::default());
        Coalescer {
            in_flight: Arc::default(),
            hit_for_pass,
            pass_only,
            any_pass_only: Arc::default(),
            hit_for_pass_ttl,
            clock,
        }
    }

    /// Becomes the leader for `key`, or a waiter on the leader already fetching it.
    pub fn join(&self, key: &CacheKey) -> Join {
        let mut fetches = self.in_flight.fetches.lock();
        if let Some(slot) = fetches.get(key) {
            return Join::Waiter(Waiter { slot: slot.clone() });
        }
        let (sender, slot) = watch::channel(None);
        fetches.insert(key.clone(), slot);
        Join::Leader(Leader {
            key: key.clone(),
            sender,
            coalescer: self.clone(),
            finished: false,
        })
    }

    /// Whether `key` was recently found uncacheable.
    pub fn is_hit_for_pass(&self, key: &CacheKey) -> bool {
        self.hit_for_pass
            .get(key)
            .is_some_and(|until| until > self.clock.now())
    }

    /// Remembers `key` as uncacheable.
    pub fn mark_hit_for_pass(&self, key: CacheKey) {
        self.hit_for_pass
            .insert(key, self.clock.now() + self.hit_for_pass_ttl);
    }

    /// Forgets a hit-for-pass mark (the key turned cacheable, or was purged), and a pass-only
    /// mark.
    pub fn clear_hit_for_pass(&self, key: &CacheKey) {
        self.hit_for_pass.invalidate(key);
        self.pass_only.invalidate(key);
    }

    /// Makes every request for `key` pass for `ttl` (a zero `ttl` marks nothing).
    pub fn mark_pass_only(&self, key: CacheKey, ttl: Duration) {
        if !ttl.is_zero() {
            let until = self.clock.now() + ttl;
            self.pass_only.insert(key, PassOnly { ttl, until });
            self.any_pass_only.store(true, Ordering::Relaxed);
        }
    }

    /// Whether `key` is pass-only (the policy's hit-for-pass).
    pub fn is_pass_only(&self, key: &CacheKey) -> bool {
        self.any_pass_only.load(Ordering::Relaxed)
            && self
                .pass_only
                .get(key)
                .is_some_and(|mark| mark.until > self.clock.now())
    }
}

/// The one request fetching a key. Dropping it without [`Leader::finish`] tells the waiters
/// the fetch failed, so they compete again instead of hanging.
pub struct Leader {
    key: CacheKey,
    sender: watch::Sender<Option<FetchOutcome>>,
    coalescer: Coalescer,
    finished: bool,
}

impl Leader {
    /// Tells current and future waiters what the fetch turned into. Waiters that arrive later
    /// still join this fetch until [`Leader::finish`].
    pub fn publish(&self, outcome: FetchOutcome) {
        if let FetchOutcome::Uncacheable = outcome {
            self.coalescer.mark_hit_for_pass(self.key.clone());
        }
        self.sender.send_replace(Some(outcome));
    }

    /// Ends the fetch: later requests look in the store (where the object now is) or lead anew.
    pub fn finish(mut self) {
        self.finished = true;
        self.remove();
    }

    fn remove(&self) {
        self.coalescer.in_flight.fetches.lock().remove(&self.key);
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if !self.finished {
            self.remove();
            if self.sender.borrow().is_none() {
                self.sender.send_replace(Some(FetchOutcome::Failed));
            }
        }
    }
}

/// A request waiting on another's fetch.
pub struct Waiter {
    slot: Slot,
}

impl Waiter {
    /// The leader's outcome, or `Failed` when it does not come within `limit`.
    pub async fn outcome(mut self, limit: Duration, stats: &Stats) -> FetchOutcome {
        stats
            .coalesced_waits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wait = self.slot.wait_for(Option::is_some);
        match tokio::time::timeout(limit, wait).await {
            Ok(Ok(outcome)) => outcome.clone().unwrap_or(FetchOutcome::Failed),
            _ => FetchOutcome::Failed,
        }
    }
}
