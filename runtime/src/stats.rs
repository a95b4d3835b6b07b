//! Counters the proxy keeps for the admin API and metrics: plain atomics, updated on the
//! request path without locks.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cache::state::CacheState;

/// Process-wide request and cache counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub passes: AtomicU64,
    pub stale: AtomicU64,
    pub revalidated: AtomicU64,
    pub synth: AtomicU64,
    /// Requests that waited on another request's fetch of the same key.
    pub coalesced_waits: AtomicU64,
    /// Objects the cache dropped to stay under its size bound.
    pub evictions: AtomicU64,
    /// Requests piped to the origin (Varnish's `s_pipe`): `return (pipe)` and upgrades.
    pub pipes: AtomicU64,
    /// Bytes copied through pipe tunnels, both ways (Varnish's `s_pipe_in` + `s_pipe_out`).
    pub pipe_bytes: AtomicU64,
    /// Pipes refused because `--max-pipes` tunnels were open.
    pub pipes_refused: AtomicU64,
}

impl Stats {
    /// Counts a finished request by its cache outcome.
    pub fn record(&self, state: CacheState) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let counter = match state {
            CacheState::Hit => &self.hits,
            CacheState::Miss => &self.misses,
            CacheState::Pass => &self.passes,
            CacheState::Stale => &self.stale,
            CacheState::Revalidated => &self.revalidated,
            CacheState::Synth => &self.synth,
            CacheState::Pipe => &self.pipes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per-backend counters, kept with the backend so they survive reloads that keep it.
#[derive(Debug, Default)]
pub struct BackendStats {
    pub fetches: AtomicU64,
    pub failures: AtomicU64,
    /// Requests sent whose response body has not ended (or failed) yet.
    pub in_flight: AtomicU64,
    /// Requests refused without contacting the origin because `.max_connections` were in flight.
    pub refused: AtomicU64,
    /// Health probes answered with the expected status.
    pub probes_good: AtomicU64,
    /// Health probes that failed: refused, timed out, or answered with another status.
    pub probes_bad: AtomicU64,
}
