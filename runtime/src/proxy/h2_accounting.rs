//! The proxy's side of the server's per-connection HTTP/2 caps (`server/h2_guard.rs`): how
//! many origin fetches a client request started, so that a stream the client resets after its
//! fetch began can be charged to its connection ("rapid reset" after accept), and the answer
//! to a stream the connection no longer serves.
//!
//! The count is a task-local set around the request's future rather than a request field:
//! every way a request reaches the origin (a miss, a pass, a background refresh, after any
//! number of restarts) starts in that future, whatever the policy did to the request.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use http::{Response, StatusCode};

use super::synth;
use crate::cache::body::ProxyBody;

tokio::task_local! {
    static STARTED: Arc<AtomicU32>;
}

/// The origin fetches one client request started.
#[derive(Clone, Default)]
pub(crate) struct OriginFetches(Arc<AtomicU32>);

impl OriginFetches {
    /// Runs `request`, counting the origin fetches it starts here.
    pub(crate) async fn counting<F: Future>(&self, request: F) -> F::Output {
        STARTED.scope(self.0.clone(), request).await
    }

    pub(crate) fn started(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Notes that the current request starts an origin fetch (nothing outside
/// [`OriginFetches::counting`], e.g. for HTTP/1 requests).
pub(crate) fn origin_fetch_started() {
    let _ = STARTED.try_with(|started| started.fetch_add(1, Ordering::Relaxed));
}

/// A stream opened on a connection that went past its caps (`why`) and is being closed.
pub(crate) fn refused_stream(why: &str) -> Response<ProxyBody> {
    synth::plain(StatusCode::TOO_MANY_REQUESTS, why)
}
