//! The time as one poll of a client connection's task sees it: the clock is read at most once
//! per poll ([`now`] for timeouts and durations, [`wall`] for the cache's ages and marks), the
//! way an event loop like HAProxy's reads it once per look at the sockets.
//!
//! Why: a request asks the time in a dozen places (when its head started, its timeouts'
//! deadlines, the cache's age and hit-for-pass checks, the pool's idle check, the origin's
//! deadline), and each read is a vDSO call with a `rdtsc`, about 20 ns on this VM: 0.45 µs of a
//! pass against HAProxy's 0.15 (docs/BENCHMARKS.md, "Session 16"); read once per poll, a pass
//! reads the clock 10 times instead of 20 ("Session 17"). Within one poll the answers differ by
//! the poll's own run time, microseconds, which no timeout or age can tell apart.
//!
//! Outside [`per_poll`] (background fetches, probes, the admin API, tests) every call reads the
//! clock. A duration that must be measured within one poll (a hit's own service time) reads the
//! clock itself: here it would be zero.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::time::SystemTime;

use tokio::time::Instant;

/// What the current poll has read so far, if a poll under [`per_poll`] is running.
#[derive(Clone, Copy)]
struct PollClock {
    inside: bool,
    instant: Option<Instant>,
    wall: Option<SystemTime>,
}

const OUTSIDE: PollClock = PollClock {
    inside: false,
    instant: None,
    wall: None,
};

thread_local! {
    static CURRENT: Cell<PollClock> = const { Cell::new(OUTSIDE) };
}

/// The monotonic time of the current poll.
pub(crate) fn now() -> Instant {
    read(|clock| &mut clock.instant, Instant::now)
}

/// The system (wall) time of the current poll.
pub(crate) fn wall() -> SystemTime {
    read(|clock| &mut clock.wall, SystemTime::now)
}

fn read<T: Copy>(slot: impl Fn(&mut PollClock) -> &mut Option<T>, clock: impl Fn() -> T) -> T {
    CURRENT.with(|current| {
        let mut state = current.get();
        if !state.inside {
            return clock();
        }
        if let Some(time) = *slot(&mut state) {
            return time;
        }
        let time = clock();
        *slot(&mut state) = Some(time);
        current.set(state);
        time
    })
}

/// Runs `future` with one reading of each clock per poll.
pub(crate) async fn per_poll<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    poll_fn(move |cx| {
        let _poll = Scope::enter();
        future.as_mut().poll(cx)
    })
    .await
}

/// One poll: the clocks unread on entry, the enclosing state back on exit (a panic too).
struct Scope(PollClock);

impl Scope {
    fn enter() -> Scope {
        let inside = PollClock {
            inside: true,
            ..OUTSIDE
        };
        Scope(CURRENT.with(|current| current.replace(inside)))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|current| current.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spin_past(start: Instant) {
        while Instant::now() <= start + Duration::from_micros(50) {
            std::hint::spin_loop();
        }
    }

    #[tokio::test]
    async fn one_poll_reads_each_clock_once_and_the_next_poll_again() {
        let (first, again, next) = per_poll(async {
            let (first, first_wall) = (now(), wall());
            spin_past(first);
            let again = (now(), wall());
            assert_eq!(again, (first, first_wall), "the same poll: the same times");
            tokio::task::yield_now().await;
            (first, again.0, now())
        })
        .await;
        assert_eq!(first, again);
        assert!(next > first, "a new poll reads the clock again");
    }

    #[tokio::test]
    async fn outside_a_scoped_poll_each_call_reads_the_clock() {
        let first = now();
        spin_past(first);
        assert!(now() > first);
        per_poll(async {}).await;
        let after = now();
        spin_past(after);
        assert!(now() > after, "the scope ended with its poll");
    }
}
