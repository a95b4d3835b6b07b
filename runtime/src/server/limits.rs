//! `--max-connections`: the cap on open client connections, shared by every listener.
//!
//! A listener takes a slot before it accepts. When none is free it stops accepting, so new
//! clients wait in the kernel's listen backlog (and past that their connection attempts are
//! dropped and retried by their TCP stack), as with HAProxy's `maxconn`: nothing spins and the
//! connections already open keep being served. Reaching the cap is logged once, then at most
//! once a minute while it keeps happening.
//!
//! The slots also tell shutdown when the last connection has closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a warning covers: more occurrences within it are counted and reported by the next.
const WARNING_QUIET: Duration = Duration::from_secs(60);

/// A warning for something a flood repeats (the cap reached, accepts failing): logged the
/// first time, then at most once per [`WARNING_QUIET`].
#[derive(Default)]
pub(super) struct Occasional {
    last: Option<Instant>,
    /// Occurrences since `last` without a log line.
    unreported: u64,
}

impl Occasional {
    /// Counts an occurrence at `now`; `Some(occurrences left unreported since the last line)`
    /// when a line is due.
    pub(super) fn due(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now < last + WARNING_QUIET) {
            self.unreported += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

pub(super) struct ConnectionCap {
    slots: Arc<Semaphore>,
    max: usize,
    warning: Mutex<Occasional>,
}

impl ConnectionCap {
    pub(super) fn new(max: usize) -> ConnectionCap {
        ConnectionCap {
            slots: Arc::new(Semaphore::new(max)),
            max,
            warning: Mutex::new(Occasional::default()),
        }
    }

    /// A slot for one more client connection on `listener`, held until it closes; waits while
    /// every slot is taken.
    pub(super) async fn slot(&self, listener: SocketAddr) -> OwnedSemaphorePermit {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return slot;
        }
        self.reached(listener);
        self.slots
            .clone()
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed")
    }

    fn reached(&self, listener: SocketAddr) {
        let Some(again) = self.warning.lock().due(Instant::now()) else {
            return;
        };
        tracing::warn!(
            %listener,
            reached_again_since_last_warning = again,
            "client connection limit ({}) reached; new connections wait in the listen backlog \
             until one closes; raise --max-connections (max_connections) if this is normal load",
            self.max
        );
    }

    /// Warns when the cap cannot be reached because the process may not open that many files:
    /// accepts would fail (and be retried) before the cap applies.
    pub(super) fn check_file_limit(&self) {
        let Some(limit) = open_files_limit() else { return };
        // Listeners, logs, the admin API and a few origin connections.
        const RESERVE: u64 = 64;
        if limit < self.max as u64 + RESERVE {
            tracing::warn!(
                "--max-connections {} is above the open-file limit {limit} (ulimit -n): past \
                 about {} clients accepts fail and are retried; raise the limit (each client \
                 connection takes a file descriptor, and each request in flight to an origin \
                 another) or lower --max-connections",
                self.max,
                limit.saturating_sub(RESERVE)
            );
        }
    }

    /// Returns once every connection has closed.
    pub(super) async fn all_closed(&self) {
        let all = u32::try_from(self.max).expect("max_connections is validated to fit");
        let _ = self.slots.acquire_many(all).await;
    }
}

/// The soft limit on open files, from Linux's `/proc/self/limits`; `None` elsewhere or unlimited.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_warning_is_logged_once_a_minute_with_the_count_in_between() {
        let mut warning = Occasional::default();
        let start = Instant::now();
        assert_eq!(warning.due(start), Some(0));
        for second in 1..=59 {
            assert_eq!(warning.due(start + Duration::from_secs(second)), None);
        }
        assert_eq!(warning.due(start + WARNING_QUIET), Some(59));
        assert_eq!(warning.due(start + WARNING_QUIET), None);
    }
}
