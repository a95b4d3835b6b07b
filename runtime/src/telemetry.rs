//! What the request path counts and the admin API reads: plain atomics updated without locks
//! ([`Stats`], [`BackendStats`]) and the request-duration histogram ([`RequestLatency`]).
//!
//! At the bottom of the crate: the proxy, the cache and the backends write here, `admin`
//! reads here, and this module imports none of them.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

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
    /// Requests answered from stored slices alone (a range, or the whole, of a representation
    /// stored by parts), and slices asked from the origin.
    pub partial_hits: AtomicU64,
    pub slice_fetches: AtomicU64,
    /// The URLs most often missed, for the dashboard.
    pub missed_urls: MissedUrls,
    /// Client connections each worker accepted.
    pub worker_connections: WorkerConnections,
}

/// Client connections accepted, per worker: one worker per `--threads` with
/// `--worker-model reuseport`, else one (the shared runtime). Shows how the kernel spread
/// connections over the workers' sockets.
#[derive(Debug, Default)]
pub struct WorkerConnections(std::sync::OnceLock<Box<[AtomicU64]>>);

impl WorkerConnections {
    /// Sizes the table once, when the listeners start; later calls change nothing.
    pub fn set_workers(&self, workers: usize) {
        let _ = self.0.set((0..workers).map(|_| AtomicU64::new(0)).collect());
    }

    pub fn accepted(&self, worker: usize) {
        if let Some(counter) = self.0.get().and_then(|counters| counters.get(worker)) {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The count of each worker, by worker number.
    pub fn counts(&self) -> Vec<u64> {
        self.0.get().map_or_else(Vec::new, |counters| {
            counters
                .iter()
                .map(|counter| counter.load(std::sync::atomic::Ordering::Relaxed))
                .collect()
        })
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
    /// Time from sending a request to the origin's response head, summed over the fetches
    /// answered, in microseconds (with `fetches`, the mean origin latency of an interval).
    pub first_byte_micros: AtomicU64,
}

/// The URLs missed most often, approximately: a bounded table counted with the space-saving
/// algorithm (a new URL in a full table takes the place of the least counted one and inherits
/// its count), so memory stays bounded however many distinct URLs miss, and a URL that misses
/// often stays in the table.
#[derive(Debug, Default)]
pub struct MissedUrls(Mutex<HashMap<String, u64>>);

/// How many URLs [`MissedUrls`] keeps.
const MISSED_URLS_KEPT: usize = 256;

impl MissedUrls {
    /// Counts one miss of `url` (host and path as the client asked).
    pub fn record(&self, url: &str) {
        let mut table = self.0.lock();
        if let Some(count) = table.get_mut(url) {
            *count += 1;
            return;
        }
        let inherited = match table.len() >= MISSED_URLS_KEPT {
            true => {
                let (least, count) = table
                    .iter()
                    .min_by_key(|(_, count)| **count)
                    .map(|(url, count)| (url.clone(), *count))
                    .expect("a full table has entries");
                table.remove(&least);
                count
            }
            false => 0,
        };
        table.insert(url.to_string(), inherited + 1);
    }

    /// The `n` URLs with the most misses, most first.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut entries: Vec<(String, u64)> = self
            .0
            .lock()
            .iter()
            .map(|(url, count)| (url.clone(), *count))
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        entries.truncate(n);
        entries
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_urls_stay_bounded_and_keep_the_frequent_ones() {
        let missed = MissedUrls::default();
        for _ in 0..50 {
            missed.record("/popular");
        }
        for n in 0..10_000 {
            missed.record(&format!("/once/{n}"));
        }
        assert_eq!(missed.0.lock().len(), MISSED_URLS_KEPT);
        let top = missed.top(3);
        assert_eq!(top[0].0, "/popular");
        assert!(top[0].1 >= 50, "{top:?}");
    }
}
