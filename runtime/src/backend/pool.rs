//! Keep-alive HTTP/1.1 connections to one origin, kept by edgecache: a stack of idle
//! `hyper::client::conn::http1` senders. A request takes the most recently used idle
//! connection that is still open, or opens one; its response body gives the connection back
//! when it ends cleanly ([`Reusable`]). One task per connection drives it; nothing is spawned
//! per request, and a connection idle for [`IDLE_TIMEOUT`] is closed by one reaper task per
//! pool that runs only while connections are idle.
//!
//! A request that a reused connection could not even start (the origin closed it while it was
//! idle) is sent again once on a new connection, as hyper-util's pooled client does.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use tokio::time::Instant;
use tower_service::Service;

use super::connector::OriginConnector;
use super::OutgoingBody;
use crate::cache::body::BoxError;

/// How long an origin connection may stay idle in the pool before it is closed.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an exchange failed: while opening a connection, or on one.
#[derive(Debug)]
pub(super) enum SendError {
    Connect(BoxError),
    Exchange(hyper::Error),
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
    sender: SendRequest<OutgoingBody>,
    since: Instant,
}

/// A pooled connection lent to one exchange; [`Reusable::give_back`] returns it to the pool.
pub(super) struct Reusable {
    sender: SendRequest<OutgoingBody>,
    pool: Weak<Shared>,
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
    /// connection comes back with the response, to be given back when its body has ended.
    pub(super) async fn send(
        &self,
        mut request: Request<OutgoingBody>,
    ) -> Result<(Response<Incoming>, Reusable), SendError> {
        while let Some(mut sender) = self.checkout() {
            if sender.ready().await.is_err() {
                continue;
            }
            match sender.try_send_request(request).await {
                Ok(response) => return Ok((response, self.lend(sender))),
                Err(mut failed) => match failed.take_message() {
                    // Not started: the connection closed while idle; try the next one.
                    Some(unsent) => request = unsent,
                    None => return Err(SendError::Exchange(failed.into_error())),
                },
            }
        }
        let mut sender = open(&self.shared.connector, &self.shared.target).await?;
        let response = sender.send_request(request).await.map_err(SendError::Exchange)?;
        Ok((response, self.lend(sender)))
    }

    fn lend(&self, sender: SendRequest<OutgoingBody>) -> Reusable {
        Reusable {
            sender,
            pool: Arc::downgrade(&self.shared),
        }
    }

    /// The most recently used idle connection that is open and not expired.
    fn checkout(&self) -> Option<SendRequest<OutgoingBody>> {
        let mut state = self.shared.state.lock().expect("pool lock");
        while let Some(idle) = state.idle.pop() {
            if !idle.sender.is_closed() && idle.since.elapsed() < self.shared.idle_timeout {
                return Some(idle.sender);
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
) -> Result<Response<Incoming>, SendError> {
    let mut sender = open(connector, target).await?;
    sender.send_request(request).await.map_err(SendError::Exchange)
}

/// Opens a connection and spawns the task that drives it; the task ends when the connection
/// closes or its last sender is dropped while it is idle.
async fn open(connector: &OriginConnector, target: &Uri) -> Result<SendRequest<OutgoingBody>, SendError> {
    let stream = connector
        .clone()
        .call(target.clone())
        .await
        .map_err(SendError::Connect)?;
    let (sender, connection) = http1::handshake(stream).await.map_err(SendError::Exchange)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!("origin connection ended: {error}");
        }
    });
    Ok(sender)
}

impl Reusable {
    /// Returns the connection to its pool (the response body has ended).
    pub(super) fn give_back(self) {
        let Some(shared) = self.pool.upgrade() else { return };
        if self.sender.is_closed() {
            return;
        }
        let start_reaper = {
            let mut state = shared.state.lock().expect("pool lock");
            state.idle.push(Idle {
                sender: self.sender,
                since: Instant::now(),
            });
            !std::mem::replace(&mut state.reaping, true)
        };
        if start_reaper {
            tokio::spawn(reap(Arc::downgrade(&shared)));
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
                .retain(|idle| idle.since.elapsed() < timeout && !idle.sender.is_closed());
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
