//! Origins: pooled keep-alive HTTP/1.1 connections with connect, first-byte and between-bytes
//! timeouts.
//!
//! A [`Backend`] sends one request and returns the response head with a body that enforces the
//! between-bytes timeout. Failures come back as a [`BackendError`] naming the backend and the
//! stage that failed; the proxy decides what the client sees. This module never touches the
//! cache or the policy.

mod error;
mod timed_body;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::cache::body::BoxError;
use crate::config::BackendTimeouts;
use crate::stats::BackendStats;

pub use error::{BackendError, FailureKind, Stage};
pub use timed_body::TimedBody;

/// Body type of requests sent to an origin.
pub type OutgoingBody = UnsyncBoxBody<Bytes, BoxError>;

/// One origin server.
#[derive(Clone)]
pub struct Backend {
    name: String,
    authority: http::uri::Authority,
    timeouts: BackendTimeouts,
    client: Client<HttpConnector, OutgoingBody>,
    stats: Arc<BackendStats>,
}

impl Backend {
    fn failed(&self, error: BackendError) -> BackendError {
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        error
    }

    /// A backend called `name` at `address` (`host:port`).
    pub fn new(name: &str, address: &str, timeouts: BackendTimeouts) -> Result<Backend, String> {
        let authority: http::uri::Authority = address
            .parse()
            .map_err(|_| format!("`{address}` is not HOST:PORT"))?;
        if authority.port_u16().is_none() {
            return Err(format!("`{address}` has no port"));
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeouts.connect));
        connector.enforce_http(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Backend {
            stats: Arc::default(),
            name: name.to_string(),
            authority,
            timeouts,
            client,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn stats(&self) -> &BackendStats {
        &self.stats
    }

    pub fn timeouts(&self) -> BackendTimeouts {
        self.timeouts
    }

    /// `host:port` of the origin.
    pub fn address(&self) -> &str {
        self.authority.as_str()
    }

    /// Sends `request` (its URI's path and query are kept, the authority becomes this
    /// backend's) and waits for the response head at most the first-byte timeout.
    pub async fn send(
        &self,
        mut request: Request<OutgoingBody>,
    ) -> Result<Response<TimedBody>, BackendError> {
        let path_and_query = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::builder()
            .scheme("http")
            .authority(self.authority.clone())
            .path_and_query(path_and_query)
            .build()
            .expect("scheme, authority and path were each valid");
        *request.version_mut() = http::Version::HTTP_11;
        let budget = self.timeouts.connect + self.timeouts.first_byte;
        self.stats.fetches.fetch_add(1, Ordering::Relaxed);
        self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let outcome = tokio::time::timeout(budget, self.client.request(request)).await;
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        let response = match outcome {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return Err(self.failed(BackendError::from_client(self, error))),
            Err(_) => {
                let error = BackendError::new(
                    self,
                    Stage::FirstByte,
                    FailureKind::Timeout,
                    "no response head in time",
                );
                return Err(self.failed(error));
            }
        };
        let between_bytes = self.timeouts.between_bytes;
        Ok(response.map(|body| TimedBody::new(body, between_bytes, self.name.clone())))
    }
}
