//! Keep-alive HTTP/1.1 connections to one origin, kept by edgecache: a stack of idle
//! [`h1::Connection`]s. A request takes the most recently used idle connection that still
//! looks open, or opens one; its response body gives the connection back when it has ended
//! cleanly and the connection can carry another exchange ([`h1::Home`]). No task drives a
//! connection (the request's own task does, [`h1`]), and a connection idle for
//! [`IDLE_TIMEOUT`] is closed by one reaper task per pool that runs only while connections are
//! idle.
//!
//! A request that a reused connection did not answer at all (the origin closed it while it was
//! idle, and the close crossed the request) is sent once more on a new connection when that
//! cannot repeat an effect: its method is idempotent and it has no body, as nginx and Go's
//! client retry.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http::{Request, Response, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Empty};
use tokio::time::Instant;
use tower_service::Service;

use super::connector::OriginConnector;
use super::h1::{self, Connection, Home, OriginBody};
use super::OutgoingBody;
use crate::cache::body::BoxError;
use crate::poll_time;

/// How long an origin connection may stay idle in the pool before it is closed.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an exchange failed: while opening a connection, or on one.
#[derive(Debug)]
pub(super) enum SendError {
    Connect(BoxError),
    Exchange(h1::Error),
}

/// The idle connections to one origin.
pub(super) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    connector: OriginConnector,
    /// `http://host:port/` of the origin: what the connector connects to.
    target: Uri,
    idle_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Most recently used last.
    idle: Vec<Idle>,
    /// Whether the reaper task runs (it does while `idle` is not empty).
    reaping: bool,
}

struct Idle {
    connection: Box<Connection>,
    since: Instant,
}

impl Pool {
    pub(super) fn new(connector: OriginConnector, target: Uri) -> Pool {
        Pool::with_idle_timeout(connector, target, IDLE_TIMEOUT)
    }

    pub(super) fn with_idle_timeout(connector: OriginConnector, target: Uri, idle_timeout: Duration) -> Pool {
        Pool {
            shared: Arc::new(Shared {
                connector,
                target,
                idle_timeout,
                state: Mutex::default(),
            }),
        }
    }

    /// Idle connections now.
    #[cfg(test)]
    pub(super) fn idle(&self) -> usize {
        self.shared.state.lock().expect("pool lock").idle.len()
    }

    /// Sends `request` (origin-form URI, `Host` set) on an idle connection or a new one; the
    /// connection comes back to the pool at the end of the response body.
    ///
    /// Split before the future is made, so that it holds the head once (see `Backend::send`).
    pub(super) fn send(
        self: Arc<Self>,
        request: Request<OutgoingBody>,
    ) -> impl Future<Output = Result<Response<OriginBody>, SendError>> + Send + 'static {
        let (head, mut body) = request.into_parts();
        async move {
            let home = Arc::downgrade(&self.shared) as Weak<dyn Home>;
            if let Some(connection) = self.checkout() {
                let replayable = body.is_end_stream() && head.method.is_idempotent();
                match h1::exchange(connection, &head, body).await {
                    Ok(answered) => return Ok(answered.into_response(Some(home))),
                    Err(failed) if failed.unanswered && replayable => {
                        body = Empty::new().map_err(|never| match never {}).boxed_unsync();
                    }
                    Err(failed) => return Err(SendError::Exchange(failed.error)),
                }
            }
            let connection = open(&self.shared.connector, &self.shared.target).await?;
            let answered = h1::exchange(connection, &head, body).await;
            let answered = answered.map_err(|failed| SendError::Exchange(failed.error))?;
            Ok(answered.into_response(Some(home)))
        }
    }

    /// The most recently used idle connection that looks open and has not expired.
    fn checkout(&self) -> Option<Box<Connection>> {
        let mut state = self.shared.state.lock().expect("pool lock");
        while let Some(mut idle) = state.idle.pop() {
            if poll_time::now().saturating_duration_since(idle.since) < self.shared.idle_timeout
                && idle.connection.is_reusable()
            {
                return Some(idle.connection);
            }
        }
        None
    }
}

/// Sends `request` on a connection of its own, closed after this exchange (`.proxy_header`).
pub(super) async fn send_once(
    connector: &OriginConnector,
    target: &Uri,
    request: Request<OutgoingBody>,
) -> Result<Response<OriginBody>, SendError> {
    let answered = exchange_once(connector, target, request).await?;
    Ok(answered.into_response(None))
}

/// Sends `request` on a new connection and waits for the final response head: the connection
/// belongs to that answer alone (a single exchange, or a pipe's tunnel).
pub(super) async fn exchange_once(
    connector: &OriginConnector,
    target: &Uri,
    request: Request<OutgoingBody>,
) -> Result<h1::Answered, SendError> {
    let (head, body) = request.into_parts();
    let connection = open(connector, target).await?;
    h1::exchange(connection, &head, body)
        .await
        .map_err(|failed| SendError::Exchange(failed.error))
}

async fn open(connector: &OriginConnector, target: &Uri) -> Result<Box<Connection>, SendError> {
    let stream = connector
        .clone()
        .call(target.clone())
        .await
        .map_err(SendError::Connect)?;
    Ok(Connection::new(stream.into_inner()))
}

impl Home for Shared {
    fn keep(self: Arc<Self>, mut connection: Box<Connection>) {
        connection.going_idle();
        let start_reaper = {
            let mut state = self.state.lock().expect("pool lock");
            state.idle.push(Idle {
                connection,
                since: poll_time::now(),
            });
            !std::mem::replace(&mut state.reaping, true)
        };
        if start_reaper {
            tokio::spawn(reap(Arc::downgrade(&self)));
        }
    }
}

/// Closes connections idle for longer than the pool's idle timeout; ends when none is idle.
async fn reap(pool: Weak<Shared>) {
    loop {
        let next = {
            let Some(shared) = pool.upgrade() else { return };
            let mut state = shared.state.lock().expect("pool lock");
            let timeout = shared.idle_timeout;
            // Oldest first: those given back earliest expire first.
            state
                .idle
                .retain_mut(|idle| idle.since.elapsed() < timeout && idle.connection.is_reusable());
            match state.idle.first().map(|oldest| oldest.since) {
                Some(oldest) => oldest + timeout,
                None => {
                    state.reaping = false;
                    return;
                }
            }
        };
        tokio::time::sleep_until(next).await;
    }
}

#[cfg(test)]
mod tests;
