//! Writes that wait for the worker's other ready tasks ([`Turn`]), so the answers to what one
//! look at the sockets found leave together, as an event loop like HAProxy's sends them: the
//! client socket's first write after a read (`server/timeouts.rs`, `Watched`), an origin
//! request's first write (`backend/h1`). Futures polled inside another task's poll (an HTTP/2
//! connection's streams) take their turns together: [`after_the_poll`].
//!
//! Why: a peer that sleeps in `epoll_wait` costs whoever writes to it a wake-up, charged to the
//! writer's system time (on loopback the receiver's side of TCP runs in the sender's call), and
//! on a virtual machine a wake-up across CPUs is an inter-processor interrupt, dearer than the
//! write. A task that reads a request and answers it in one poll spreads its writes across the
//! worker's turn, one per task, and the peer (a load balancer, the origin) wakes for each. One
//! turn in the back of the run queue before the first write after a read gathers the writes of
//! all the tasks woken together. Measured with `benches/cpu_split.sh` (docs/BENCHMARKS.md,
//! "Session 16"): the load tool went to sleep 0.09 times per hit and 0.17 times per pass
//! before, 0.03 and 0.05 after.

use std::cell::RefCell;
use std::future::poll_fn;
use std::task::{Context, Poll, Waker};

thread_local! {
    /// The wakers of the turns taken during [`after_the_poll`]'s poll on this thread; `None`
    /// outside one.
    static DEFERRED: RefCell<Option<Vec<Waker>>> = const { RefCell::new(None) };
}

/// One turn behind the tasks already ready, taken once per [`Turn::arm`].
#[derive(Debug, Default)]
pub(crate) struct Turn {
    armed: bool,
}

/// Takes one turn now: for a task that waits once, where [`Turn`] is for a socket that waits
/// after each read.
pub(crate) async fn take() {
    let mut turn = Turn { armed: true };
    poll_fn(|cx| turn.poll_take(cx)).await;
}

impl Turn {
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// `Pending` once when armed, the task queued behind the ones ready: a waker woken while
    /// its task runs puts it at the back of the worker's queue (tokio's current-thread and
    /// multi-thread schedulers alike, never in the multi-thread scheduler's LIFO slot).
    pub(crate) fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.armed {
            return Poll::Ready(());
        }
        self.armed = false;
        let deferred = DEFERRED.with_borrow_mut(|deferred| {
            deferred
                .as_mut()
                .map(|wakers| wakers.push(cx.waker().clone()))
                .is_some()
        });
        if !deferred {
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// Runs `poll`, which polls futures inside the running task (an HTTP/2 connection's streams,
/// `server/h2_streams.rs`), and wakes the turns they took only when it returns. A set of futures
/// such as `FuturesUnordered` stops its poll after two futures that woke themselves, so turns
/// woken at once would let two of a connection's streams through per poll and its origin
/// requests leave two by two; woken afterwards, every stream of the poll takes its turn and the
/// next poll, behind the worker's other ready tasks, lets them all through.
pub(crate) fn after_the_poll<T>(poll: impl FnOnce() -> T) -> T {
    /// Wakes what was deferred, also if `poll` unwinds, so no turn is lost.
    struct WakeDeferred(Option<Vec<Waker>>);
    impl Drop for WakeDeferred {
        fn drop(&mut self) {
            let outer = self.0.take();
            let taken = DEFERRED.replace(outer).unwrap_or_default();
            taken.into_iter().for_each(Waker::wake);
        }
    }
    let _wake = WakeDeferred(DEFERRED.replace(Some(Vec::new())));
    poll()
}

/// For tests: a task made ready before the code under test runs, and whether it has run.
#[cfg(test)]
pub(crate) struct ReadyTask {
    ran: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

#[cfg(test)]
impl ReadyTask {
    pub(crate) fn spawn() -> ReadyTask {
        use std::sync::atomic::{AtomicBool, Ordering};
        let ran = std::sync::Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let ran = ran.clone();
            async move { ran.store(true, Ordering::SeqCst) }
        });
        ReadyTask { ran, task }
    }

    pub(crate) fn has_run(&self) -> bool {
        self.ran.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) async fn join(self) {
        self.task.await.unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An armed turn lets the tasks already ready run first, and is taken once.
    #[tokio::test(flavor = "current_thread")]
    async fn an_armed_turn_waits_for_the_ready_tasks_once() {
        let other = ReadyTask::spawn();
        let mut turn = Turn::default();
        turn.arm();
        let mut polls = 0;
        poll_fn(|cx| {
            polls += 1;
            turn.poll_take(cx)
        })
        .await;
        assert!(other.has_run(), "the turn was over before the ready task ran");
        assert_eq!(polls, 2);
        other.join().await;

        // Taken: it does not wait again until armed.
        assert!(poll_fn(|cx| Poll::Ready(turn.poll_take(cx))).await.is_ready());
        turn.arm();
        assert!(poll_fn(|cx| Poll::Ready(turn.poll_take(cx))).await.is_pending());
    }

    /// Turns taken inside [`after_the_poll`] are woken when it returns, not before.
    #[test]
    fn turns_taken_after_the_poll_wake_when_it_returns() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use std::task::Wake;

        #[derive(Default)]
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let woken = Arc::new(Count::default());
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut turns = [Turn::default(), Turn::default()];
        after_the_poll(|| {
            for turn in &mut turns {
                turn.arm();
                assert!(turn.poll_take(&mut cx).is_pending());
            }
            assert_eq!(woken.0.load(Ordering::SeqCst), 0, "woken during the poll");
        });
        assert_eq!(woken.0.load(Ordering::SeqCst), 2, "both woken after it");
        turns[0].arm();
        assert!(turns[0].poll_take(&mut cx).is_pending());
        assert_eq!(woken.0.load(Ordering::SeqCst), 3, "outside, a turn wakes at once");
    }

    /// [`take`] lets the tasks already ready run before it returns.
    #[tokio::test(flavor = "current_thread")]
    async fn take_returns_after_the_ready_tasks() {
        let other = ReadyTask::spawn();
        take().await;
        assert!(other.has_run(), "took the turn before the ready task ran");
        other.join().await;
    }
}
