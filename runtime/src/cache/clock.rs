//! The time the cache reads: one [`Clock`] per running instance, for freshness and age, grace,
//! bans and hit-for-pass marks, so that a test can move it forward instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Wall time plus an offset that only [`Clock::advance`] changes (zero unless a test moves it).
/// Clones are the same clock.
///
/// Timeouts are not read from it: they are tokio's, and what they bound is real waiting.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Nanoseconds ahead of the system clock.
    ahead: Arc<AtomicU64>,
}

impl Clock {
    /// The current time as the cache sees it.
    pub fn now(&self) -> SystemTime {
        crate::poll_time::wall() + Duration::from_nanos(self.ahead.load(Ordering::Relaxed))
    }

    /// Moves the clock forward by `by`, as if that much time had passed: stored objects age,
    /// hit-for-pass marks and freshness run out. For tests; a server never calls it.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.ahead.fetch_add(nanos, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_a_clone_moves_every_clone() {
        let clock = Clock::default();
        let before = clock.now();
        clock.clone().advance(Duration::from_secs(3600));
        let ahead = clock.now().duration_since(before).expect("forward");
        assert!(ahead >= Duration::from_secs(3600), "{ahead:?}");
    }
}
