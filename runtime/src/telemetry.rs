//! What the request path counts and the admin API reads: plain atomics updated without locks
//! ([`Stats`], [`BackendStats`]) and the request-duration histogram ([`RequestLatency`]).
//!
//! At the bottom of the crate: the proxy, the cache and the backends write here, `admin`
//! reads here, and this module imports none of them.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::histogram::Histogram;

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
    /// ESI includes requested (Varnish's `esi_req`), and those that failed (left out or
    /// aborting their page).
    pub esi_includes: AtomicU64,
    pub esi_failures: AtomicU64,
    /// Soft-purged objects served stale while their refresh ran.
    pub soft_purged_served: AtomicU64,
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

/// Request durations, from the request head received to the response head sent, in seconds.
/// Cheap to clone (the buckets are shared); `admin::metrics` registers it for `/metrics`.
#[derive(Clone, Debug)]
pub struct RequestLatency(Histogram);

impl Default for RequestLatency {
    fn default() -> Self {
        RequestLatency(Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]))
    }
}

impl RequestLatency {
    /// Records one request that took `seconds`.
    pub fn observe_request(&self, seconds: f64) {
        self.0.observe(seconds);
    }

    /// The histogram, for the registry behind `/metrics`.
    pub fn histogram(&self) -> &Histogram {
        &self.0
    }
}
