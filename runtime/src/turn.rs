//! Writes that wait for the worker's other ready tasks ([`Turn`]), so the answers to what one
//! look at the sockets found leave together, as an event loop like HAProxy's sends them: the
//! client socket's first write after a read (`server/timeouts.rs`, `Watched`), an origin
//! request's first write (`backend/h1`).
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

use std::future::poll_fn;
use std::task::{Context, Poll};

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
        cx.waker().wake_by_ref();
        Poll::Pending
    }
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

    /// [`take`] lets the tasks already ready run before it returns.
    #[tokio::test(flavor = "current_thread")]
    async fn take_returns_after_the_ready_tasks() {
        let other = ReadyTask::spawn();
        take().await;
        assert!(other.has_run(), "took the turn before the ready task ran");
        other.join().await;
    }
}
