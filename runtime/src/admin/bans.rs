//! Showing the ban list (`GET /bans`) and keeping it short.
//!
//! Bans are applied at lookup (as Varnish does): a lookup that finds an object stored before a
//! matching ban drops it. Bans on `obj.*` are also applied by the lurker (`cache::bans::lurker`),
//! which drops them once done; the others stay. A ban applies only to objects stored before it
//! was added; once no stored object is older than a ban, the ban can never match again and is
//! dropped.
//!
//! The cutoff passed to `SharedCache::trim_bans` is the older of
//! - the `response_time` of the oldest stored object ([`oldest_stored`]), and
//! - now minus [`MIN_AGE`]: an object whose response arrived before a ban may still be streaming
//!   into the store when the ban is added, so young bans are always kept.
//!
//! Trimming runs after each `POST /ban`, whenever `/stats` or `/metrics` report the ban count,
//! and every [`EVERY`].

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::{BanRow, SharedCache};

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

/// `GET /bans` (`ban.list`): the list after trimming, oldest first, each ban with its age, who
/// applies it (the lurker for bans on `obj.*`, lookups for the others) and the objects it has
/// removed, and the counters; `?format=text` is a table for `edgecache admin ban.list`.
pub(super) fn list(cache: &SharedCache, query: &str) -> Response<Full<Bytes>> {
    trim(cache);
    let as_text = super::query_param(query, "format").as_deref() == Some("text");
    let now = cache.clock.now();
    let rows = cache.ban_rows();
    let age = |row: &BanRow| now.duration_since(row.since).unwrap_or_default().as_secs_f64();
    let applied_by = |row: &BanRow| if row.lurkable { "lurker" } else { "lookup" };
    if as_text {
        let mut table = format!(
            "{:>6}  {:>9}  {:>7}  {:<10}  ban\n",
            "seq", "age", "removed", "applied by"
        );
        for row in &rows {
            table.push_str(&format!(
                "{:>6}  {:>8.1}s  {:>7}  {:<10}  {}\n",
                row.seq,
                age(row),
                row.removed,
                applied_by(row),
                row.expr
            ));
        }
        return super::text(StatusCode::OK, &table);
    }
    let counters = cache.ban_counters();
    let bans: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "seq": row.seq,
                "ban": row.expr,
                "age_seconds": age(row),
                "added": httpdate::fmt_http_date(row.since),
                "added_unix": super::unix(row.since),
                "applied_by": applied_by(row),
                "removed": row.removed,
            })
        })
        .collect();
    super::json(
        StatusCode::OK,
        json!({
            "bans": bans,
            "tested": counters.tested,
            "lurked": counters.lurked,
            "lurker_tested": counters.lurker_tested,
            "lurker_removed": counters.lurker_removed,
        }),
    )
}
