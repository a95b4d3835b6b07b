//! The cache outcome of one request: the single source of the `X-Cache` header and the access
//! log's cache field, and the request counter it adds to.

use std::sync::atomic::Ordering;

use crate::telemetry::Stats;

/// What the cache did for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// Served from a stored object (or from the in-flight fetch of another request).
    Hit,
    /// Looked up, not found, fetched from the origin.
    Miss,
    /// Served from a stored object past its freshness: `stale-while-revalidate` (a refresh
    /// runs in the background), `stale-if-error` or grace (the origin failed), or the client's
    /// `max-stale`.
    Stale,
    /// A stale object the origin confirmed with `304 Not Modified`.
    Revalidated,
    /// Not looked up or not storable: went to the origin, nothing stored.
    Pass,
    /// Answered by edgecache itself (purge, error page, policy `synth`).
    Synth,
    /// Tunnelled to the origin on a connection of its own (`return (pipe)`, a WebSocket
    /// upgrade): never cached.
    Pipe,
}

impl CacheState {
    /// The value of the `X-Cache` header and the access log field.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheState::Hit => "HIT",
            CacheState::Miss => "MISS",
            CacheState::Stale => "STALE",
            CacheState::Revalidated => "REVALIDATED",
            CacheState::Pass => "PASS",
            CacheState::Synth => "SYNTH",
            CacheState::Pipe => "PIPE",
        }
    }

    /// Counts a finished request with this outcome in `stats`.
    pub fn count(self, stats: &Stats) {
        stats.requests.fetch_add(1, Ordering::Relaxed);
        let counter = match self {
            CacheState::Hit => &stats.hits,
            CacheState::Miss => &stats.misses,
            CacheState::Pass => &stats.passes,
            CacheState::Stale => &stats.stale,
            CacheState::Revalidated => &stats.revalidated,
            CacheState::Synth => &stats.synth,
            CacheState::Pipe => &stats.pipes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
