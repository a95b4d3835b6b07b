//! Requests that take an origin connection for themselves (`return (pipe)`, WebSocket
//! upgrades): a fresh connection, never taken from or returned to the pool, so the bytes that
//! follow the exchange (a tunnel) reach only the origin that answered it. It is opened as any
//! other (the backend's PROXY header, then TLS).

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode, Uri};

use super::admission::InFlight;
use super::h1::{self, Tunnel};
use super::{proxy_header, Backend, BackendError, Connections, FailureKind, OutgoingBody, Stage, TimedBody};

/// The origin's answer to a piped request, on a connection no other request uses. It counts
/// in the backend's in-flight requests (and `.max_connections`) until its body ends or, for a
/// `101`, until the tunnel closes.
pub struct Piped {
    answered: h1::Answered,
    in_flight: InFlight,
    between_bytes: Duration,
    backend: Arc<str>,
}

/// The origin's side of an upgraded connection, holding its in-flight slot while open.
pub struct OriginTunnel {
    pub io: Tunnel,
    _in_flight: InFlight,
}

impl Piped {
    pub fn status(&self) -> StatusCode {
        self.answered.status()
    }

    /// The answer relayed as an ordinary response; its body has the between-bytes timeout.
    pub fn into_response(self) -> Response<TimedBody> {
        let Piped {
            answered,
            in_flight,
            between_bytes,
            backend,
        } = self;
        answered
            .into_response(None)
            .map(|body| TimedBody::new(body, between_bytes, backend, in_flight))
    }

    /// A `101 Switching Protocols`: its head, and the connection that carries the tunnel.
    pub fn into_upgrade(self) -> (http::response::Parts, OriginTunnel) {
        let (head, io) = self.answered.into_tunnel();
        let tunnel = OriginTunnel {
            io,
            _in_flight: self.in_flight,
        };
        (head, tunnel)
    }
}

impl Backend {
    /// Sends `request` on a new connection of its own and waits for the response head, with
    /// the connect and first-byte timeouts; the connection is never pooled. Refused at once
    /// past `.max_connections`, as [`Backend::send`].
    pub async fn pipe(&self, mut request: Request<OutgoingBody>) -> Result<Piped, BackendError> {
        let inner = &*self.inner;
        let target = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::from(target);
        *request.version_mut() = http::Version::HTTP_11;
        super::frame_as_sent(&mut request);
        let host = inner
            .host_header
            .clone()
            .or_else(|| http::HeaderValue::from_str(inner.authority.as_str()).ok());
        if let Some(host) = host {
            request.headers_mut().entry(http::header::HOST).or_insert(host);
        }
        let in_flight = InFlight::try_enter(&inner.stats, inner.options.max_connections).map_err(|max| {
            inner
                .stats
                .refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            BackendError::new(
                self,
                Stage::Connect,
                FailureKind::Down,
                format!("max_connections ({max}) reached"),
            )
        })?;
        inner
            .stats
            .fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let timeouts = inner.options.timeouts;
        let stream = match tokio::time::timeout(timeouts.connect, inner.connector.connect_tcp()).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                return Err(self.failed(BackendError::new(
                    self,
                    Stage::Connect,
                    FailureKind::Down,
                    error.to_string(),
                )))
            }
            Err(_) => {
                let error =
                    BackendError::new(self, Stage::Connect, FailureKind::Timeout, "connect timed out");
                return Err(self.failed(error));
            }
        };
        let _ = stream.set_nodelay(true);
        let connector = match &inner.connections {
            Connections::Pooled(_) => inner.connector.clone(),
            Connections::OnePerRequest { proxy_header } => inner
                .connector
                .with_proxy_header(proxy_header::encode(*proxy_header, request.extensions().get())),
        };
        let stream = match tokio::time::timeout(timeouts.connect, connector.open(stream)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                let error = BackendError::new(self, Stage::Connect, FailureKind::Down, error.to_string());
                return Err(self.failed(error));
            }
            Err(_) => {
                let error = BackendError::new(
                    self,
                    Stage::Connect,
                    FailureKind::Timeout,
                    "TLS handshake timed out",
                );
                return Err(self.failed(error));
            }
        };
        let (head, body) = request.into_parts();
        let exchange = h1::exchange(h1::Connection::new(stream), &head, body);
        let outcome = tokio::time::timeout(timeouts.first_byte, exchange).await;
        let answered = self.answered(
            outcome.map(|sent| sent.map_err(|failed| BackendError::from_exchange(self, &failed.error))),
        )?;
        Ok(Piped {
            answered,
            in_flight,
            between_bytes: timeouts.between_bytes,
            backend: inner.name.clone(),
        })
    }
}
