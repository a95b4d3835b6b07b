//! HTTP/2 streams answered in their connection's own task. hyper hands each stream it accepts to
//! the server's executor, and a `tokio::spawn` per stream costs a task (the stream's future
//! copied into it), and two wake-ups between it and the connection task: the stream wakes the
//! connection to write its response, the connection wakes the stream for its body. HAProxy and
//! nginx run a connection's streams in the connection's event handler.
//!
//! [`InConnectionTask`] is the executor given to hyper. The streams that the connection accepts
//! while [`ConnectionStreams::poll_connection`] polls it are kept in that connection's set and
//! polled there, right after the connection read them; the connection is then polled again, so
//! the responses of the streams read together leave in one write (with [`super::h2_writes`]).
//! Everything else hyper runs through the executor (an extended CONNECT's upgraded stream, and
//! anything outside a connection poll) is spawned as before.
//!
//! A stream that panics is dropped alone, as a panicking task would be: the connection and its
//! other streams go on.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

use crate::turn;

/// A stream's future as hyper gave it, boxed (its type is hyper's own).
type H2Stream = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How often one poll goes round between the connection and its streams before it yields to the
/// other tasks of the worker.
const ROUNDS_PER_POLL: usize = 16;

thread_local! {
    /// The streams accepted during the connection poll now running on this thread; `None`
    /// outside one. A poll never nests another connection's, so one slot per thread is enough.
    static ACCEPTED: RefCell<Option<Vec<H2Stream>>> = const { RefCell::new(None) };
}

/// The executor for the HTTP/2 server: see the module doc.
#[derive(Clone, Copy)]
pub(super) struct InConnectionTask;

impl<F> hyper::rt::Executor<F> for InConnectionTask
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        let future = ACCEPTED.with_borrow_mut(|accepted| match accepted {
            Some(accepted) => {
                // A panic ends this stream alone; the panic hook has reported it.
                accepted.push(Box::pin(AssertUnwindSafe(future).catch_unwind().map(drop)));
                None
            }
            None => Some(future),
        });
        if let Some(future) = future {
            tokio::spawn(future);
        }
    }
}

/// One connection's running streams.
#[derive(Default)]
pub(super) struct ConnectionStreams {
    running: FuturesUnordered<H2Stream>,
}

impl ConnectionStreams {
    /// Polls `connection`, then the streams it accepted and those woken since, and the
    /// connection again while that poll accepted streams or finished some.
    pub(super) fn poll_connection<C: Future>(
        &mut self,
        mut connection: Pin<&mut C>,
        context: &mut Context<'_>,
    ) -> Poll<C::Output> {
        for _ in 0..ROUNDS_PER_POLL {
            let (polled, accepted) = accepting(|| connection.as_mut().poll(context));
            let accepted_any = !accepted.is_empty();
            self.running.extend(accepted);
            let finished_any = self.poll_streams(context);
            if polled.is_ready() {
                return polled;
            }
            if !accepted_any && !finished_any {
                return Poll::Pending;
            }
        }
        context.waker().wake_by_ref();
        Poll::Pending
    }

    /// Runs the streams left when the connection has ended (their sends fail; a request's own
    /// work, such as a pass to the origin, still ends as it would have in a task of its own).
    pub(super) async fn finish(mut self) {
        while self.running.next().await.is_some() {}
    }

    /// Polls the streams that are ready; true when one of them finished.
    fn poll_streams(&mut self, context: &mut Context<'_>) -> bool {
        // An HTTP/1 connection never has any: its polls skip the set's waker registration.
        if self.running.is_empty() {
            return false;
        }
        let mut finished_any = false;
        turn::after_the_poll(|| {
            while let Poll::Ready(Some(())) = self.running.poll_next_unpin(context) {
                finished_any = true;
            }
        });
        finished_any
    }
}

/// Runs `poll` with the executor collecting what it is given; returns that too.
fn accepting<T>(poll: impl FnOnce() -> T) -> (T, Vec<H2Stream>) {
    // Reset if the poll unwinds, so a later spawn on this thread is not kept here.
    struct ResetOnUnwind;
    impl Drop for ResetOnUnwind {
        fn drop(&mut self) {
            ACCEPTED.set(None);
        }
    }
    ACCEPTED.set(Some(Vec::new()));
    let reset = ResetOnUnwind;
    let polled = poll();
    std::mem::forget(reset);
    let accepted = ACCEPTED.replace(None).unwrap_or_default();
    (polled, accepted)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use hyper::rt::Executor;
    use tokio::sync::oneshot;

    use super::*;

    /// A connection that hands the executor `streams` on its first poll, then ends once `done`
    /// of them have run.
    fn connection(streams: Vec<H2Stream>, done: Arc<AtomicUsize>, wanted: usize) -> impl Future<Output = ()> {
        let mut streams = Some(streams);
        std::future::poll_fn(move |_| {
            for stream in streams.take().into_iter().flatten() {
                InConnectionTask.execute(stream);
            }
            if done.load(Ordering::SeqCst) == wanted {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    fn counting(done: &Arc<AtomicUsize>, after: Option<oneshot::Receiver<()>>) -> H2Stream {
        let done = done.clone();
        Box::pin(async move {
            if let Some(after) = after {
                let _ = after.await;
            }
            done.fetch_add(1, Ordering::SeqCst);
        })
    }

    /// Driven by hand with a waker that does nothing: whatever runs, runs inside these polls.
    #[test]
    fn streams_run_in_the_connection_task_and_a_panic_ends_only_its_stream() {
        let done = Arc::new(AtomicUsize::new(0));
        let (wake, woken) = oneshot::channel();
        let panicking: H2Stream = Box::pin(async { panic!("a stream's bug") });
        let streams = vec![counting(&done, None), panicking, counting(&done, Some(woken))];
        let connection = connection(streams, done.clone(), 2);
        let mut connection = std::pin::pin!(connection);
        let mut running = ConnectionStreams::default();
        let mut context = Context::from_waker(std::task::Waker::noop());

        let first = running.poll_connection(connection.as_mut(), &mut context);
        assert!(first.is_pending(), "one stream waits");
        assert_eq!(
            done.load(Ordering::SeqCst),
            1,
            "the ready stream ran in the first poll"
        );

        wake.send(()).expect("the waiting stream is there");
        let second = running.poll_connection(connection.as_mut(), &mut context);
        assert!(second.is_ready(), "the woken stream ran, then the connection");
        assert_eq!(done.load(Ordering::SeqCst), 2);
        assert!(running.running.is_empty());
    }

    /// Every stream that takes a turn in one poll goes on in the next, not two per poll.
    #[test]
    fn the_streams_of_a_poll_take_their_turns_together() {
        let done = Arc::new(AtomicUsize::new(0));
        let mut running = ConnectionStreams::default();
        for _ in 0..10 {
            let done = done.clone();
            running.running.push(Box::pin(async move {
                turn::take().await;
                done.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }) as H2Stream);
        }
        let mut context = Context::from_waker(std::task::Waker::noop());
        running.poll_streams(&mut context);
        assert_eq!(done.load(Ordering::SeqCst), 0, "every stream took its turn");
        running.poll_streams(&mut context);
        assert_eq!(
            done.load(Ordering::SeqCst),
            10,
            "and all went on in the next poll"
        );
    }

    #[tokio::test]
    async fn outside_a_connection_poll_the_executor_spawns() {
        let (sender, receiver) = oneshot::channel();
        InConnectionTask.execute(async move {
            let _ = sender.send(());
        });
        receiver.await.expect("the future ran in a task of its own");
    }
}
