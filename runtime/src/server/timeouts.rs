//! When a client connection has been quiet for too long: `--idle-timeout` (no request in
//! flight) and `--header-timeout` (a request head that started arriving and did not end).
//!
//! hyper's own `header_read_timeout` is not used: its clock starts as soon as an HTTP/1
//! connection waits for a head, so one value would bound the keep-alive wait and the head
//! together, and it covers neither the wait for the first byte (the h1/h2 detection reads it
//! without a timer) nor HTTP/2. Instead the connection's I/O ([`Watched`]) notes the first byte
//! that arrives while no request is in flight, the service notes each request ([`InFlight`]),
//! and [`expired`] runs next to the connection and returns when a deadline has passed.
//!
//! Cost on the request path: one atomic load per read, two atomic updates per request.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::ClientTimeouts;

/// Why a connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Expired {
    #[error("idle for {0:?} with no request in flight (--idle-timeout)")]
    Idle(Duration),
    #[error("request head not complete {0:?} after its first byte (--header-timeout)")]
    Head(Duration),
}

/// No byte arrived since the connection went idle.
const NO_BYTE: u64 = u64::MAX;

/// What the timeouts need to know about one connection. Times are nanoseconds since `opened`.
pub(super) struct Activity {
    opened: Instant,
    /// Requests whose response has not been sent (or dropped) yet.
    in_flight: AtomicUsize,
    /// When the last request ended, or the connection opened.
    idle_since: AtomicU64,
    /// The first byte read since `idle_since`, or `NO_BYTE`.
    head_started: AtomicU64,
    /// HTTP/2: bytes while idle are pings and settings, not a request head; only the idle
    /// timeout applies between requests.
    multiplexed: AtomicBool,
}

/// What to do next about a connection.
#[derive(Debug, PartialEq, Eq)]
enum Check {
    Close(Expired),
    /// Nothing can expire before then.
    Wait(Instant),
}

impl Activity {
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(NO_BYTE),
            multiplexed: AtomicBool::new(false),
        })
    }

    fn since_opened(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.opened).as_nanos()).unwrap_or(NO_BYTE - 1)
    }

    fn at(&self, nanos: u64) -> Instant {
        self.opened + Duration::from_nanos(nanos)
    }

    fn bytes_read(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0 && self.head_started.load(Ordering::Relaxed) == NO_BYTE
        {
            let now = self.since_opened(Instant::now());
            let _ = self
                .head_started
                .compare_exchange(NO_BYTE, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// A request head is complete: no timeout applies to the connection until it is answered.
    pub(super) fn request_started(self: &Arc<Self>, version: http::Version) -> InFlight {
        if version == http::Version::HTTP_2 {
            self.multiplexed.store(true, Ordering::Relaxed);
        }
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    pub(super) fn is_multiplexed(&self) -> bool {
        self.multiplexed.load(Ordering::Relaxed)
    }

    /// Whether a timeout has expired at `now`, or when to look again. The state may change
    /// before then (a request ends and the idle clock starts, a head starts), but no deadline
    /// that starts at or after `now` can be earlier than `now + min(idle, header)`.
    fn check(&self, now: Instant, timeouts: ClientTimeouts) -> Check {
        let soonest_new = now + timeouts.idle.min(timeouts.header);
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Check::Wait(soonest_new);
        }
        let head_started = self.head_started.load(Ordering::Acquire);
        let (deadline, expired) = if head_started != NO_BYTE && !self.is_multiplexed() {
            (
                self.at(head_started) + timeouts.header,
                Expired::Head(timeouts.header),
            )
        } else {
            (
                self.at(self.idle_since.load(Ordering::Acquire)) + timeouts.idle,
                Expired::Idle(timeouts.idle),
            )
        };
        if now >= deadline {
            Check::Close(expired)
        } else {
            Check::Wait(deadline.min(soonest_new))
        }
    }
}

/// Returns once a timeout has expired for the connection `activity` describes. Wakes up at
/// most once per `min(idle, header)` while requests are in flight.
pub(super) async fn expired(activity: &Activity, timeouts: ClientTimeouts) -> Expired {
    loop {
        match activity.check(Instant::now(), timeouts) {
            Check::Close(expired) => return expired,
            Check::Wait(until) => tokio::time::sleep_until(until).await,
        }
    }
}

/// Returns at `deadline`; never without one.
pub(super) async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One request in flight on a connection, from its complete head until its response body is
/// sent or dropped.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .idle_since
            .store(activity.since_opened(Instant::now()), Ordering::Release);
        activity.head_started.store(NO_BYTE, Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until it is sent or dropped.
pub(super) struct Answering<B> {
    body: B,
    _request: InFlight,
}

impl<B> Answering<B> {
    pub(super) fn new(body: B, request: InFlight) -> Answering<B> {
        Answering {
            body,
            _request: request,
        }
    }
}

impl<B: Body + Unpin> Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A client socket that reports the bytes it reads to its connection's [`Activity`].
pub(super) struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl Watched {
    pub(super) fn new(stream: TcpStream, activity: Arc<Activity>) -> Watched {
        Watched { stream, activity }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: ClientTimeouts = ClientTimeouts {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(5),
        body: Duration::from_secs(60),
    };

    fn head_started(activity: &Activity) -> Instant {
        activity.at(activity.head_started.load(Ordering::Relaxed))
    }

    fn idle_since(activity: &Activity) -> Instant {
        activity.at(activity.idle_since.load(Ordering::Relaxed))
    }

    #[test]
    fn a_silent_connection_expires_at_the_idle_timeout() {
        let activity = Activity::new();
        let opened = activity.opened;
        assert_eq!(
            activity.check(opened, TIMEOUTS),
            Check::Wait(opened + TIMEOUTS.idle)
        );
        assert_eq!(
            activity.check(opened + TIMEOUTS.idle, TIMEOUTS),
            Check::Close(Expired::Idle(TIMEOUTS.idle))
        );
    }

    #[test]
    fn a_started_head_expires_at_the_header_timeout_from_its_first_byte() {
        let activity = Activity::new();
        activity.bytes_read();
        let head = head_started(&activity);
        // Past the idle deadline, the head still has its own time.
        assert_eq!(
            activity.check(head + TIMEOUTS.idle, TIMEOUTS),
            Check::Wait(head + TIMEOUTS.header)
        );
        assert_eq!(
            activity.check(head + TIMEOUTS.header, TIMEOUTS),
            Check::Close(Expired::Head(TIMEOUTS.header))
        );
    }

    #[test]
    fn a_request_that_ends_while_a_head_is_timed_is_seen_at_its_idle_deadline() {
        let activity = Activity::new();
        activity.bytes_read();
        let head = head_started(&activity);
        // The request may end right away: its idle deadline would come before the head's.
        assert_eq!(activity.check(head, TIMEOUTS), Check::Wait(head + TIMEOUTS.idle));
    }

    #[test]
    fn the_idle_clock_starts_when_the_last_request_ends() {
        let activity = Activity::new();
        activity.bytes_read();
        let request = activity.request_started(http::Version::HTTP_11);
        let later = activity.opened + Duration::from_secs(60);
        assert_eq!(
            activity.check(later, TIMEOUTS),
            Check::Wait(later + TIMEOUTS.idle)
        );
        drop(request);
        let idle = idle_since(&activity);
        assert_eq!(activity.check(idle, TIMEOUTS), Check::Wait(idle + TIMEOUTS.idle));
        assert_eq!(
            activity.check(idle + TIMEOUTS.idle, TIMEOUTS),
            Check::Close(Expired::Idle(TIMEOUTS.idle))
        );
    }

    #[test]
    fn http2_frames_between_requests_are_not_a_head() {
        let activity = Activity::new();
        drop(activity.request_started(http::Version::HTTP_2));
        activity.bytes_read();
        let idle = idle_since(&activity);
        assert_eq!(
            activity.check(idle + TIMEOUTS.idle, TIMEOUTS),
            Check::Close(Expired::Idle(TIMEOUTS.idle))
        );
    }
}
