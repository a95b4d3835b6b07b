//! In-flight accounting and `.max_connections`.
//!
//! A request counts as in flight from the moment it is admitted until its response body ends,
//! fails or is dropped: the [`InFlight`] guard moves into the body ([`super::TimedBody`]).
//! Admission is one compare-and-swap, so concurrent requests never overshoot the limit; a
//! refused request never reaches the origin (Varnish fails the fetch the same way).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::telemetry::BackendStats;

/// One admitted request; decrements the backend's in-flight count when dropped.
#[derive(Debug)]
pub(super) struct InFlight {
    stats: Arc<BackendStats>,
}

impl InFlight {
    /// Admits one request, unless `max` requests are already in flight (then returns `max`).
    pub(super) fn try_enter(stats: &Arc<BackendStats>, max: Option<u32>) -> Result<InFlight, u32> {
        let limit = max.map_or(u64::MAX, u64::from);
        stats
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now < limit).then_some(now + 1)
            })
            .map_err(|_| max.unwrap_or(u32::MAX))?;
        Ok(InFlight { stats: stats.clone() })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.stats.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
