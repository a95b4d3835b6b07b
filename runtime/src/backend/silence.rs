//! The longest silence between two frames of a body: the origin's between-bytes timeout
//! ([`super::TimedBody`]) and the client's request-body timeout ([`super::ClientBody`]).
//!
//! The silence is timed from the first poll after a frame that finds no frame ready, so time
//! the reader spends not asking (a body passing through waits for its slowest client, an
//! origin reads a request body when it likes) is not counted against the sender, and a body
//! whose frames are always ready never reads the clock or allocates a timer.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame};
use tokio::time::Sleep;

use crate::poll_time;

/// The body sent nothing for [`Silence::limit`].
#[derive(Debug)]
pub(super) struct Silent;

pub(super) struct Silence {
    limit: Duration,
    /// Allocated at the first wait.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether `timer` times the current wait.
    timing: bool,
}

/// What the next frame of a body polled through [`Silence::poll_frame`] is.
type Next<B> = Result<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>, Silent>;

impl Silence {
    pub(super) fn new(limit: Duration) -> Silence {
        Silence {
            limit,
            timer: None,
            timing: false,
        }
    }

    pub(super) fn limit(&self) -> Duration {
        self.limit
    }

    /// Polls `body` for its next frame, or `Err(Silent)` once it has sent none for the limit.
    pub(super) fn poll_frame<B: Body + Unpin>(
        &mut self,
        body: &mut B,
        cx: &mut Context<'_>,
    ) -> Poll<Next<B>> {
        if let Poll::Ready(frame) = Pin::new(body).poll_frame(cx) {
            self.timing = false;
            return Poll::Ready(Ok(frame));
        }
        let timing = std::mem::replace(&mut self.timing, true);
        let timer = match &mut self.timer {
            // A new timer already runs from now.
            None => self
                .timer
                .insert(Box::pin(tokio::time::sleep_until(poll_time::now() + self.limit))),
            Some(timer) => {
                if !timing {
                    timer.as_mut().reset(poll_time::now() + self.limit);
                }
                timer
            }
        };
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Err(Silent))
    }
}
