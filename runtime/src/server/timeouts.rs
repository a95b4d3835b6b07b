//! When a client connection has been quiet or slow for too long: `--idle-timeout` (no request
//! in flight), `--header-timeout` (a request head that started arriving and did not end),
//! `--idle-send-timeout` (what is being sent has waited that long for the client to take it)
//! and `--send-timeout` (a response still being sent that long after it started).
//!
//! hyper's own `header_read_timeout` is not used: its clock starts as soon as an HTTP/1
//! connection waits for a head, so one value would bound the keep-alive wait and the head
//! together, and it covers neither the wait for the first byte (the h1/h2 detection reads it
//! without a timer) nor HTTP/2. Instead the connection's I/O ([`Watched`]) notes the first byte
//! that arrives while no request is in flight and writes the socket will not take, the service
//! notes each request ([`InFlight`]) and its response body ([`Answering`]) each frame hyper
//! takes, and [`expired`] runs next to the connection and returns when a deadline has passed.
//!
//! A send waits on the client while hyper holds a frame it has not finished writing (it asks
//! for the next one only once the socket, or HTTP/2 flow control, let it send this one) or a
//! socket write is blocked. Each frame taken and each newly blocked write restarts that clock,
//! so on an HTTP/2 connection one stalled stream is only seen when the others are stalled too;
//! `--send-timeout` bounds it in any case.
//!
//! Cost on the request path: one atomic load per read and write, two atomic updates per
//! request, a lock per response, a clock read and two atomic updates per response body frame.
//!
//! The same socket makes its first write after each read wait one [`Turn`] behind the worker's
//! other ready tasks (`crate::turn` says why).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::config::ClientTimeouts;
use crate::poll_time;
use crate::turn::Turn;

/// Why a connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Expired {
    #[error("idle for {0:?} with no request in flight (--idle-timeout)")]
    Idle(Duration),
    #[error("request head not complete {0:?} after its first byte (--header-timeout)")]
    Head(Duration),
    #[error("the client took nothing of the response for {0:?} (--idle-send-timeout)")]
    SendStalled(Duration),
    #[error("a response still being sent {0:?} after it started (--send-timeout)")]
    Send(Duration),
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
    /// Responses whose head or last body frame hyper holds without having asked for more.
    frames_held: AtomicUsize,
    /// A socket write returned `Pending` and none has gone through since.
    write_blocked: AtomicBool,
    /// Since when what is being sent has waited for the client: the last frame hyper took, or
    /// the write that blocked, whichever came last.
    send_waiting_since: AtomicU64,
    /// When each response being sent was handed to hyper (one over HTTP/1).
    responses: Mutex<Vec<u64>>,
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
            opened: poll_time::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(NO_BYTE),
            multiplexed: AtomicBool::new(false),
            frames_held: AtomicUsize::new(0),
            write_blocked: AtomicBool::new(false),
            send_waiting_since: AtomicU64::new(0),
            responses: Mutex::new(Vec::new()),
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
            let now = self.since_opened(poll_time::now());
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

    fn send_progressed(&self) {
        self.send_waiting_since
            .store(self.since_opened(poll_time::now()), Ordering::Release);
    }

    /// hyper took a response head or body frame to send: it waits on the client until hyper
    /// asks for the next one.
    fn frame_taken(&self) {
        self.send_progressed();
        self.frames_held.fetch_add(1, Ordering::AcqRel);
    }

    fn frame_sent(&self) {
        self.frames_held.fetch_sub(1, Ordering::AcqRel);
    }

    fn write_blocked(&self) {
        if !self.write_blocked.swap(true, Ordering::AcqRel) {
            self.send_progressed();
        }
    }

    fn write_went_through(&self) {
        if self.write_blocked.load(Ordering::Acquire) {
            self.write_blocked.store(false, Ordering::Release);
            // The end of a response that was still being written: keep-alive idleness starts now.
            if self.in_flight.load(Ordering::Acquire) == 0 {
                self.idle_since
                    .store(self.since_opened(poll_time::now()), Ordering::Release);
            }
        }
    }

    fn is_sending(&self) -> bool {
        self.frames_held.load(Ordering::Acquire) > 0 || self.write_blocked.load(Ordering::Acquire)
    }

    /// Returns the response's start, to hand back to [`Activity::response_ended`].
    fn response_started(&self) -> u64 {
        let started = self.since_opened(poll_time::now());
        self.responses.lock().push(started);
        started
    }

    fn response_ended(&self, started: u64) {
        let mut responses = self.responses.lock();
        if let Some(at) = responses.iter().position(|&response| response == started) {
            responses.swap_remove(at);
        }
    }

    /// The send deadlines that apply at `now`: `Err` when one has passed, else the earliest.
    fn send_deadline(&self, now: Instant, timeouts: ClientTimeouts) -> Result<Option<Instant>, Expired> {
        let mut earliest = None;
        if self.is_sending() {
            let stalled = self.at(self.send_waiting_since.load(Ordering::Acquire)) + timeouts.idle_send;
            if now >= stalled {
                return Err(Expired::SendStalled(timeouts.idle_send));
            }
            earliest = Some(stalled);
        }
        if let Some(oldest) = self.responses.lock().iter().min().copied() {
            let whole = self.at(oldest) + timeouts.send;
            if now >= whole {
                return Err(Expired::Send(timeouts.send));
            }
            earliest = Some(earliest.map_or(whole, |stalled: Instant| stalled.min(whole)));
        }
        Ok(earliest)
    }

    /// Whether a timeout has expired at `now`, or when to look again. The state may change
    /// before then (a request ends and the idle clock starts, a head starts, a send starts
    /// waiting), but no deadline that starts at or after `now` can be earlier than `now` plus
    /// the shortest timeout.
    fn check(&self, now: Instant, timeouts: ClientTimeouts) -> Check {
        let shortest = [timeouts.header, timeouts.idle_send, timeouts.send]
            .into_iter()
            .fold(timeouts.idle, Duration::min);
        let soonest_new = now + shortest;
        let send_deadline = match self.send_deadline(now, timeouts) {
            Err(expired) => return Check::Close(expired),
            Ok(deadline) => deadline.map_or(soonest_new, |deadline| deadline.min(soonest_new)),
        };
        // Bytes still on their way out: the connection is not idle.
        if self.in_flight.load(Ordering::Acquire) > 0 || self.is_sending() {
            return Check::Wait(send_deadline);
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
/// most once per the shortest timeout while requests are in flight.
pub(super) async fn expired(activity: &Activity, timeouts: ClientTimeouts) -> Expired {
    loop {
        match activity.check(poll_time::now(), timeouts) {
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
            .store(activity.since_opened(poll_time::now()), Ordering::Release);
        activity.head_started.store(NO_BYTE, Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as in flight until it is sent or dropped,
/// and tells the send timeouts when hyper takes its frames.
pub(super) struct Answering<B> {
    body: B,
    request: InFlight,
    /// From [`Activity::response_started`].
    started: u64,
    /// hyper holds the head or the last frame and has not asked for the next.
    frame_held: bool,
}

impl<B> Answering<B> {
    /// `body` of the response whose head hyper is about to send.
    pub(super) fn new(body: B, request: InFlight) -> Answering<B> {
        let activity = &request.0;
        let started = activity.response_started();
        activity.frame_taken();
        Answering {
            body,
            request,
            started,
            frame_held: true,
        }
    }
}

impl<B> Drop for Answering<B> {
    fn drop(&mut self) {
        let activity = &self.request.0;
        if self.frame_held {
            activity.frame_sent();
        }
        activity.response_ended(self.started);
    }
}

impl<B: Body + Unpin> Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        if std::mem::take(&mut this.frame_held) {
            this.request.0.frame_sent();
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &polled {
            this.request.0.frame_taken();
            this.frame_held = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A client socket (TCP, or TLS over it) that reports the bytes it reads to its connection's
/// [`Activity`], and whose first write after a read takes a [`Turn`] behind the worker's other
/// ready tasks.
pub(super) struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
    turn: Turn,
}

impl<S> Watched<S> {
    pub(super) fn new(stream: S, activity: Arc<Activity>) -> Watched<S> {
        Watched {
            stream,
            activity,
            turn: Turn::default(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
            self.turn.arm();
        }
        polled
    }
}

impl<S> Watched<S> {
    fn watch_write(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match &polled {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(_) => self.activity.write_went_through(),
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.turn.poll_take(cx));
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch_write(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.turn.poll_take(cx));
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch_write(polled)
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
        send: Duration::from_secs(600),
        idle_send: Duration::from_secs(60),
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

    fn send_waiting_since(activity: &Activity) -> Instant {
        activity.at(activity.send_waiting_since.load(Ordering::Relaxed))
    }

    #[test]
    fn a_response_the_client_takes_nothing_of_expires_at_the_idle_send_timeout() {
        let activity = Activity::new();
        let _request = activity.request_started(http::Version::HTTP_11);
        let started = activity.response_started();
        activity.frame_taken();
        let waiting = send_waiting_since(&activity);
        assert_eq!(
            activity.check(waiting + TIMEOUTS.idle, TIMEOUTS),
            Check::Wait(waiting + TIMEOUTS.idle + TIMEOUTS.idle)
        );
        assert_eq!(
            activity.check(waiting + TIMEOUTS.idle_send, TIMEOUTS),
            Check::Close(Expired::SendStalled(TIMEOUTS.idle_send))
        );
        // hyper asked for the next frame: the origin's turn, not the client's.
        activity.frame_sent();
        let later = waiting + TIMEOUTS.idle_send;
        assert_eq!(
            activity.check(later, TIMEOUTS),
            Check::Wait(later + TIMEOUTS.idle)
        );
        assert_eq!(
            activity.check(activity.at(started) + TIMEOUTS.send, TIMEOUTS),
            Check::Close(Expired::Send(TIMEOUTS.send))
        );
        activity.response_ended(started);
        assert!(activity.responses.lock().is_empty());
    }

    #[test]
    fn a_blocked_write_keeps_the_connection_from_idling_until_the_idle_send_timeout() {
        let activity = Activity::new();
        drop(activity.request_started(http::Version::HTTP_11));
        let idle = idle_since(&activity);
        activity.write_blocked();
        let blocked = send_waiting_since(&activity);
        assert!(matches!(
            activity.check(idle + TIMEOUTS.idle, TIMEOUTS),
            Check::Wait(_)
        ));
        assert_eq!(
            activity.check(blocked + TIMEOUTS.idle_send, TIMEOUTS),
            Check::Close(Expired::SendStalled(TIMEOUTS.idle_send))
        );
        // The tail went out: idleness starts then, not when the body was read.
        activity.write_went_through();
        let idle = idle_since(&activity);
        assert!(idle >= blocked);
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

    /// A response's first write waits for the tasks that were ready before it; the writes
    /// after it, with no read in between, do not.
    #[tokio::test(flavor = "current_thread")]
    async fn the_first_write_after_a_read_takes_a_turn() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let (near, mut far) = tokio::io::duplex(64);
        let mut socket = Watched::new(near, Activity::new());
        far.write_all(b"request").await.unwrap();
        socket.read_exact(&mut [0; 7]).await.unwrap();
        let other = crate::turn::ReadyTask::spawn();
        socket.write_all(b"answer").await.unwrap();
        assert!(
            other.has_run(),
            "the answer was written before the ready task ran"
        );
        other.join().await;

        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            Pin::new(&mut socket).poll_write(cx, b"more").map_ok(|_| ())
        })
        .await
        .unwrap();
        assert_eq!(polls, 1, "a write with no read before it took a turn");
        let mut answer = [0; 10];
        far.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"answermore");
    }
}
