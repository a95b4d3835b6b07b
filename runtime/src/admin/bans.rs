//! Keeping the ban list short.
//!
//! Bans are applied lazily at lookup (as Varnish does): a lookup that finds an object stored
//! before a matching ban drops it. Every lookup tests the list, so a list that only grows makes
//! every hit slower. A ban applies only to objects stored before it was added; once no stored
//! object is older than a ban, the ban can never match again and is dropped.
//!
//! The cutoff passed to `SharedCache::trim_bans` is the older of
//! - the `response_time` of the oldest stored object ([`oldest_stored`]), and
//! - now minus [`MIN_AGE`]: an object whose response arrived before a ban may still be streaming
//!   into the store when the ban is added, so young bans are always kept.
//!
//! Trimming runs after each `POST /ban`, whenever `/stats` or `/metrics` report the ban count,
//! and every [`EVERY`].

use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::SharedCache;

/// Bans younger than this are never trimmed.
pub const MIN_AGE: Duration = Duration::from_secs(60);
/// How often the background trim runs.
pub const EVERY: Duration = Duration::from_secs(30);

/// Trims the ban list now; returns how many bans are kept.
pub(crate) fn trim(cache: &SharedCache) -> usize {
    let now = cache.clock.now();
    let young = now.checked_sub(MIN_AGE).unwrap_or(SystemTime::UNIX_EPOCH);
    let cutoff = match oldest_stored(cache) {
        Some(oldest) => oldest.min(young),
        None => young,
    };
    cache.trim_bans(cutoff)
}

/// The `response_time` of the oldest stored object, or `None` when the store is empty.
///
/// The store does not expose the oldest `response_time` yet, so this is exact only for an
/// empty store and otherwise answers "as old as can be", which keeps every ban: never wrong,
/// only less eager. With a `Store::oldest_response_time()` (a scan of the moka entries, run
/// only here) it becomes exact.
fn oldest_stored(cache: &SharedCache) -> Option<SystemTime> {
    if cache.store.entry_count() == 0 {
        None
    } else {
        Some(SystemTime::UNIX_EPOCH)
    }
}

/// Trims every [`EVERY`] until `stopped` turns true.
pub(crate) fn spawn_trimmer(cache: SharedCache, mut stopped: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stopped.changed() => return,
                _ = ticks.tick() => {
                    let kept = trim(&cache);
                    tracing::trace!(kept, "ban list trimmed");
                }
            }
        }
    })
}
