//! Per-connection caps on what an HTTP/2 client can make edgecache do for nothing (`H2Limits`):
//! new streams per second, and origin fetches started by streams the client reset before their
//! response ("rapid reset" after accept, CVE-2023-44487). hyper drops a stream's service future
//! when the client resets it (`H2Stream::poll2` in hyper's `proto/h2/server.rs` polls for
//! `RST_STREAM` while the response is pending), but the fill the request started goes on, so
//! each reset stream can cost the origin a request. Resets of streams not yet accepted are
//! h2's own business (`max_pending_accept_reset_streams`, 20 by default).
//!
//! Past either cap the connection is told to finish ([`ConnectionGuard::tripped`]: the server
//! then shuts it down gracefully, i.e. GOAWAY, and the streams in flight complete), and streams
//! it opens until the client has read the GOAWAY get 429 without reaching the proxy. So one
//! connection costs the origin at most `rapid_reset_limit` fetches per period for streams it
//! reset, plus those of the streams open when the cap was reached.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::Response;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::cache::body::ProxyBody;
use crate::config::H2Limits;
use crate::poll_time;
use crate::proxy::{self, OriginFetches};

/// Why a connection is being closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Overrun {
    #[error("more than {0} new streams in a second (--h2-max-streams-per-second)")]
    StreamRate(u32),
    #[error(
        "more than {limit} origin fetches by streams it reset before their response within \
         {period:?} (--h2-rapid-reset-limit)"
    )]
    RapidResets { limit: u32, period: Duration },
}

/// The caps of one client connection, shared by its streams.
pub(super) struct ConnectionGuard {
    limits: H2Limits,
    peer: SocketAddr,
    budgets: Mutex<Budgets>,
    tripped: Notify,
}

struct Budgets {
    streams: Bucket,
    resets: Bucket,
    overrun: Option<Overrun>,
}

/// A token bucket holding at most `capacity`, refilled by `capacity` per `period`.
struct Bucket {
    tokens: f64,
    capacity: f64,
    per_second: f64,
    updated: Instant,
}

impl Bucket {
    fn new(capacity: u32, period: Duration, now: Instant) -> Bucket {
        let capacity = f64::from(capacity);
        Bucket {
            tokens: capacity,
            capacity,
            per_second: capacity / period.as_secs_f64().max(f64::MIN_POSITIVE),
            updated: now,
        }
    }

    /// Takes `n` tokens; false, taking none, when fewer are left.
    fn take(&mut self, n: f64, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.updated).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.capacity);
        self.updated = now;
        if self.tokens < n {
            return false;
        }
        self.tokens -= n;
        true
    }
}

impl ConnectionGuard {
    pub(super) fn new(limits: H2Limits, peer: SocketAddr) -> Arc<ConnectionGuard> {
        let now = poll_time::now();
        Arc::new(ConnectionGuard {
            limits,
            peer,
            budgets: Mutex::new(Budgets {
                streams: Bucket::new(limits.max_streams_per_second, Duration::from_secs(1), now),
                resets: Bucket::new(limits.rapid_reset_limit, limits.rapid_reset_period, now),
                overrun: None,
            }),
            tripped: Notify::new(),
        })
    }

    /// Returns once the connection went past a cap and should be shut down.
    pub(super) async fn tripped(&self) {
        self.tripped.notified().await;
    }

    /// A new stream: refused once the connection is past a cap, or when it takes it past
    /// the streams-per-second cap.
    fn admit(self: &Arc<Self>) -> Result<StreamTicket, Overrun> {
        let mut budgets = self.budgets.lock();
        if let Some(overrun) = budgets.overrun {
            return Err(overrun);
        }
        let rate = self.limits.max_streams_per_second;
        if rate > 0 && !budgets.streams.take(1.0, poll_time::now()) {
            return Err(self.trip(&mut budgets, Overrun::StreamRate(rate)));
        }
        Ok(StreamTicket {
            guard: self.clone(),
            fetches: OriginFetches::default(),
            answered: false,
        })
    }

    /// A stream was reset before its response, after it started `fetches` origin fetches.
    fn reset_after_fetches(&self, fetches: u32) {
        let H2Limits {
            rapid_reset_limit: limit,
            rapid_reset_period: period,
            ..
        } = self.limits;
        let mut budgets = self.budgets.lock();
        if limit > 0 && !budgets.resets.take(f64::from(fetches), poll_time::now()) {
            self.trip(&mut budgets, Overrun::RapidResets { limit, period });
        }
    }

    fn trip(&self, budgets: &mut Budgets, overrun: Overrun) -> Overrun {
        if budgets.overrun.is_none() {
            budgets.overrun = Some(overrun);
            tracing::warn!(peer = %self.peer, "HTTP/2 connection closed with GOAWAY: {overrun}");
            // Stores a permit when the connection is not waiting right now.
            self.tripped.notify_one();
        }
        overrun
    }
}

/// One admitted stream; dropped before [`StreamTicket::answered`], it was reset.
struct StreamTicket {
    guard: Arc<ConnectionGuard>,
    fetches: OriginFetches,
    answered: bool,
}

impl Drop for StreamTicket {
    fn drop(&mut self) {
        let fetches = self.fetches.started();
        if !self.answered && fetches > 0 {
            self.guard.reset_after_fetches(fetches);
        }
    }
}

/// Serves one HTTP/2 stream of `guard`'s connection with `serve`, while the connection is
/// within its caps. `serve` comes boxed: wrapped in the stream accounting, the request's own
/// future would make the future hyper moves on every request several times larger.
pub(super) async fn serve<F>(guard: &Arc<ConnectionGuard>, serve: Pin<Box<F>>) -> Response<ProxyBody>
where
    F: Future<Output = Response<ProxyBody>>,
{
    let mut ticket = match guard.admit() {
        Ok(ticket) => ticket,
        Err(overrun) => return proxy::refused_stream(&format!("this connection sent {overrun}")),
    };
    let response = ticket.fetches.counting(serve).await;
    ticket.answered = true;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rapid_reset_limit: u32, max_streams_per_second: u32) -> H2Limits {
        H2Limits {
            rapid_reset_limit,
            rapid_reset_period: Duration::from_secs(60),
            max_streams_per_second,
            max_concurrent_streams: 100,
        }
    }

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 1))
    }

    #[test]
    fn a_bucket_refills_at_its_rate() {
        let start = Instant::now();
        let at = |millis| start + Duration::from_millis(millis);
        let mut bucket = Bucket::new(10, Duration::from_secs(1), start);
        assert!((0..10).all(|_| bucket.take(1.0, start)));
        assert!(!bucket.take(1.0, start), "empty");
        assert!(
            (0..5).all(|_| bucket.take(1.0, at(500))),
            "half a second refilled half"
        );
        assert!(!bucket.take(1.0, at(500)));
        assert!(bucket.take(10.0, at(10_000)), "full again, never more");
        assert!(!bucket.take(1.0, at(10_000)));
    }

    #[tokio::test]
    async fn past_the_stream_rate_the_connection_is_refused_and_told_to_finish() {
        let guard = ConnectionGuard::new(limits(0, 10), peer());
        let tickets: Vec<_> = (0..10).map(|_| guard.admit().expect("within the rate")).collect();
        drop(tickets);
        assert_eq!(guard.admit().err(), Some(Overrun::StreamRate(10)));
        assert_eq!(
            guard.admit().err(),
            Some(Overrun::StreamRate(10)),
            "and stays refused"
        );
        tokio::time::timeout(Duration::from_secs(1), guard.tripped())
            .await
            .expect("the connection is told to finish");
    }

    #[tokio::test]
    async fn only_resets_after_an_origin_fetch_count() {
        let guard = ConnectionGuard::new(limits(3, 0), peer());
        for _ in 0..100 {
            drop(guard.admit().unwrap()); // reset before any fetch
            let mut answered = guard.admit().unwrap();
            answered
                .fetches
                .counting(async { proxy::origin_fetch_started() })
                .await;
            answered.answered = true;
        }
        for _ in 0..3 {
            let reset = guard.admit().unwrap();
            reset
                .fetches
                .counting(async { proxy::origin_fetch_started() })
                .await;
        }
        assert!(guard.admit().is_ok(), "three resets are within the limit");
        let reset = guard.admit().unwrap();
        reset
            .fetches
            .counting(async { proxy::origin_fetch_started() })
            .await;
        drop(reset);
        assert!(matches!(
            guard.admit(),
            Err(Overrun::RapidResets { limit: 3, .. })
        ));
    }
}
