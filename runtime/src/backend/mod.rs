//! Origins: pooled keep-alive HTTP/1.1 connections ([`pool`]) with connect, first-byte and
//! between-bytes timeouts, in-flight accounting with `.max_connections`, and health probes; over
//! TLS with `.ssl` ([`tls`]), and starting with a PROXY header with `.proxy_header`
//! ([`proxy_header`]: such connections carry one client's address, so, as in Varnish, each serves
//! one request and is closed, never pooled).
//!
//! A [`Backend`] sends one request and returns the response head with a body that enforces the
//! between-bytes timeout and keeps the request counted in [`Backend::in_flight`] until the body
//! ends. Failures come back as a [`BackendError`] naming the backend and the stage that failed;
//! the proxy decides what the client sees. A backend with a `.probe` polls its origin in the
//! background ([`probe`]) and reports [`Backend::healthy`] as Varnish does ([`health`]); it is
//! the caller (a director, the proxy) that decides what to do with a sick backend. A backend
//! whose `.host` is a name follows what the name resolves to ([`addresses`]). This module
//! never touches the cache or the policy.

mod addresses;
mod admission;
mod connector;
mod error;
mod h1;
mod health;
mod pipe;
mod pool;
mod probe;
mod proxy_header;
mod request_body;
mod silence;
mod timed_body;
mod tls;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures_util::future::Either;
use futures_util::FutureExt;
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;

use crate::cache::body::BoxError;
use crate::config::BackendTimeouts;
use crate::poll_time;
use crate::telemetry::BackendStats;

pub use addresses::Dns;
use addresses::{Addresses, Refresher};
use admission::InFlight;
use connector::OriginConnector;
pub use error::{BackendError, FailureKind, Stage};
pub use h1::OnInformational;
pub use health::{AdminHealth, HealthReport};
use health::{AdminHealthCell, Health};
pub use pipe::Piped;
use pool::Pool;
pub use proxy_header::ConnectionAddresses;
pub use request_body::ClientBody;
pub use timed_body::TimedBody;
pub use tls::{Roots, TlsOptions};

/// Body type of requests sent to an origin.
pub type OutgoingBody = UnsyncBoxBody<Bytes, BoxError>;

/// How to talk to an origin, beyond its address. Two backends with equal options (and name and
/// address) are interchangeable, so a reload keeps the old one and its connections and health.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendOptions {
    pub timeouts: BackendTimeouts,
    /// `.max_connections`: requests in flight at once; more fail at once. `None`: no limit.
    pub max_connections: Option<u32>,
    /// `.probe`: poll the origin in the background and track its health.
    pub probe: Option<policy_lang::ProbeDecl>,
    /// `.host_header`: the `Host` of requests that have none, and of probes; also the TLS
    /// server name.
    pub host_header: Option<String>,
    /// `.ssl = 1;` (or `-b https://`): TLS to the origin, probes included.
    pub tls: Option<TlsOptions>,
    /// `.proxy_header = 1|2;`: the PROXY protocol version each connection starts with.
    pub proxy_header: Option<u8>,
    /// How a `.host` name is looked up, at set-up and every `--dns-ttl` after.
    pub dns: Dns,
}

/// How requests get a connection.
enum Connections {
    /// A keep-alive pool; a new one when the backend's name resolves to new addresses.
    Pooled(Arc<ArcSwap<Pool>>),
    /// `.proxy_header`: a new connection for each request, starting with a PROXY header of
    /// this version naming the request's client.
    OnePerRequest { proxy_header: u8 },
}

/// One origin server. Clones share the connection pool, counters and health; the probe task
/// stops when the last clone is dropped.
#[derive(Clone)]
pub struct Backend {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    authority: http::uri::Authority,
    options: BackendOptions,
    connector: OriginConnector,
    connections: Connections,
    /// `options.host_header`, parsed once.
    host_header: Option<HeaderValue>,
    /// `http://host:port/`: what connections are opened to.
    target: Uri,
    /// The `Host` of requests that have none without a `.host_header`: the address, without
    /// the port when it is 80 (as hyper-util's client wrote it).
    default_host: HeaderValue,
    stats: Arc<BackendStats>,
    /// With a probe: its state, and the task feeding it (aborted when this is dropped).
    health: Option<(Arc<Health>, probe::Prober)>,
    /// `backend.set_health`: what the operator said, over the probe.
    admin_health: AdminHealthCell,
    addresses: Addresses,
    /// With a `.host` name: the task looking it up again (aborted when this is dropped).
    _refresher: Option<Refresher>,
}

// === impl Backend ===

impl Backend {
    fn failed(&self, error: BackendError) -> BackendError {
        self.inner.stats.failures.fetch_add(1, Ordering::Relaxed);
        error
    }

    /// The outcome of one exchange bounded by the first-byte budget: the response head, or the
    /// error, counted as the backend's failure unless the client's own body was at fault.
    fn answered<T>(
        &self,
        outcome: Result<Result<T, BackendError>, tokio::time::error::Elapsed>,
    ) -> Result<T, BackendError> {
        match outcome {
            Ok(Ok(response)) => Ok(response),
            // A client that stalls or breaks its body is no sign of a failing origin.
            Ok(Err(error)) => Err(match error.kind {
                FailureKind::ClientBodyTimeout | FailureKind::ClientBodyBroken => error,
                _ => self.failed(error),
            }),
            Err(_) => Err(self.failed(BackendError::new(
                self,
                Stage::FirstByte,
                FailureKind::Timeout,
                "no response head in time",
            ))),
        }
    }

    /// A backend called `name` at `address` (`host:port`). A host name is resolved now (an
    /// error naming it when it does not resolve) and, on the current tokio runtime, again
    /// every `options.dns.ttl`. With a probe it starts probing at once, on the current tokio
    /// runtime (an error when there is none).
    pub fn new(name: &str, address: &str, options: BackendOptions) -> Result<Backend, String> {
        let authority: http::uri::Authority = address
            .parse()
            .map_err(|_| format!("`{address}` is not HOST:PORT"))?;
        let Some(port) = authority.port_u16() else {
            return Err(format!("`{address}` has no port"));
        };
        let addresses = Addresses::resolve(authority.host(), port, &options.dns)
            .map_err(|error| format!("`.host`: {error}"))?;
        let host_header = options
            .host_header
            .as_deref()
            .map(|host| {
                HeaderValue::from_str(host).map_err(|_| {
                    format!("backend {name}: `.host_header = \"{host}\"` is not a valid Host value")
                })
            })
            .transpose()?;
        let default_host = match authority.port_u16() {
            Some(80) => authority.host(),
            _ => authority.as_str(),
        };
        let default_host = HeaderValue::from_str(default_host).expect("an authority is a valid Host value");
        let server_name = options
            .host_header
            .clone()
            .unwrap_or_else(|| authority.host().to_string());
        let tls = options
            .tls
            .as_ref()
            .map(|tls| tls::OriginTls::new(tls, &server_name))
            .transpose()
            .map_err(|error| format!("TLS: {error}"))?;
        let connector = OriginConnector::new(name, addresses.clone(), options.timeouts.connect, tls);
        let target = Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .expect("scheme, authority and path were each valid");
        let connections = match options.proxy_header {
            Some(proxy_header) => Connections::OnePerRequest { proxy_header },
            None => Connections::Pooled(Arc::new(ArcSwap::from_pointee(Pool::new(
                connector.clone(),
                target.clone(),
            )))),
        };
        let refresher = match (
            &connections,
            addresses.name(),
            tokio::runtime::Handle::try_current(),
        ) {
            (connections, Some(_), Ok(runtime)) => {
                // Idle connections to addresses that went away must not be reused.
                let pool = match connections {
                    Connections::Pooled(pool) => {
                        Some((Arc::downgrade(pool), connector.clone(), target.clone()))
                    }
                    Connections::OnePerRequest { .. } => None,
                };
                let renew = move || {
                    if let Some((pool, connector, target)) = &pool {
                        if let Some(pool) = pool.upgrade() {
                            pool.store(Arc::new(Pool::new(connector.clone(), target.clone())));
                        }
                    }
                };
                Some(Refresher::spawn(
                    &runtime,
                    name,
                    addresses.clone(),
                    options.dns.clone(),
                    renew,
                ))
            }
            _ => None,
        };
        let stats = Arc::<BackendStats>::default();
        let health = match &options.probe {
            None => None,
            Some(decl) => {
                let runtime = tokio::runtime::Handle::try_current()
                    .map_err(|_| "a probed backend needs a tokio runtime to run its probe".to_string())?;
                let health = Arc::new(Health::new(decl, SystemTime::now()));
                // A probe has no client to name: its PROXY header is the local form.
                let connector = match options.proxy_header {
                    Some(version) => connector.with_proxy_header(proxy_header::encode(version, None)),
                    None => connector.clone(),
                };
                let target = probe::Target {
                    backend: name.to_string(),
                    address: authority.as_str().to_string(),
                    host: server_name,
                    probe: decl.clone(),
                    connector,
                };
                let prober = probe::spawn(&runtime, target, health.clone(), stats.clone());
                Some((health, prober))
            }
        };
        Ok(Backend {
            inner: Arc::new(Inner {
                name: name.into(),
                authority,
                options,
                connector,
                connections,
                host_header,
                default_host,
                target,
                stats,
                health,
                admin_health: AdminHealthCell::default(),
                addresses,
                _refresher: refresher,
            }),
        })
    }

    /// The addresses connections go to now: `.host` itself, or what its name resolved to last.
    pub fn resolved(&self) -> Vec<std::net::SocketAddr> {
        self.inner.addresses.current()
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn stats(&self) -> &BackendStats {
        &self.inner.stats
    }

    pub fn options(&self) -> &BackendOptions {
        &self.inner.options
    }

    pub fn timeouts(&self) -> BackendTimeouts {
        self.inner.options.timeouts
    }

    /// `host:port` of the origin.
    pub fn address(&self) -> &str {
        self.inner.authority.as_str()
    }

    /// Whether the origin is to be used: what the operator set with `backend.set_health`, else
    /// what the probe says (always true without a probe). One or two atomic loads.
    pub fn healthy(&self) -> bool {
        match self.inner.admin_health.get() {
            AdminHealth::Healthy => true,
            AdminHealth::Sick => false,
            AdminHealth::Auto => self
                .inner
                .health
                .as_ref()
                .is_none_or(|(health, _)| health.healthy()),
        }
    }

    /// The operator's override (`backend.set_health`); `Auto` when there is none.
    pub fn admin_health(&self) -> AdminHealth {
        self.inner.admin_health.get()
    }

    /// Sets the operator's override: `Sick` or `Healthy` whatever the probe says, `Auto` to
    /// follow the probe again. The probe keeps running meanwhile.
    pub fn set_admin_health(&self, health: AdminHealth) {
        self.inner.admin_health.set(health);
    }

    /// The probe's state (window, good results, last change, last failure); `None` without a
    /// probe.
    pub fn health(&self) -> Option<HealthReport> {
        self.inner.health.as_ref().map(|(health, _)| health.report())
    }

    /// Seconds since the probe last found the origin turned healthy (the shard director's
    /// rampup); `None` without a probe or while sick.
    pub fn healthy_for(&self) -> Option<f64> {
        let report = self.health().filter(|r| r.healthy)?;
        Some(report.last_change.elapsed().unwrap_or_default().as_secs_f64())
    }

    /// Requests sent to this backend whose response body has not ended (or failed) yet.
    pub fn in_flight(&self) -> usize {
        usize::try_from(self.inner.stats.in_flight.load(Ordering::Acquire)).unwrap_or(usize::MAX)
    }

    /// Sends `request` (its URI's path and query are kept, the authority becomes this
    /// backend's) and waits for the response head at most the first-byte timeout.
    ///
    /// With `.max_connections` requests already in flight it fails at once (a `Connect`-stage
    /// `Down` error, "max_connections (N) reached", counted in `refused`, not in `failures`)
    /// without contacting the origin. It does not look at health: choosing a healthy backend is
    /// the caller's job.
    ///
    /// A function that returns the future rather than an `async fn`: an `async fn` keeps its
    /// arguments in its future for the whole exchange, and this future is inside every fetch's,
    /// which is moved into its box per request (`proxy::driver`).
    pub fn send(
        &self,
        mut request: Request<OutgoingBody>,
    ) -> impl Future<Output = Result<Response<TimedBody>, BackendError>> + Send + '_ {
        let path_and_query = request
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::from(path_and_query);
        *request.version_mut() = http::Version::HTTP_11;
        frame_as_sent(&mut request);
        let inner = &*self.inner;
        if !request.headers().contains_key(http::header::HOST) {
            let host = inner
                .host_header
                .clone()
                .unwrap_or_else(|| inner.default_host.clone());
            request.headers_mut().insert(http::header::HOST, host);
        }
        let in_flight = match InFlight::try_enter(&inner.stats, inner.options.max_connections) {
            Ok(in_flight) => in_flight,
            Err(max) => {
                inner.stats.refused.fetch_add(1, Ordering::Relaxed);
                let detail = format!("max_connections ({max}) reached");
                let refused = BackendError::new(self, Stage::Connect, FailureKind::Down, detail);
                return Either::Left(std::future::ready(Err(refused)));
            }
        };
        let budget = inner.options.timeouts.connect + inner.options.timeouts.first_byte;
        inner.stats.fetches.fetch_add(1, Ordering::Relaxed);
        let sent_at = poll_time::now();
        let exchange = match &inner.connections {
            Connections::Pooled(pool) => Either::Left(pool.load_full().send(request)),
            Connections::OnePerRequest { proxy_header } => {
                let header = proxy_header::encode(*proxy_header, request.extensions().get());
                let connector = inner.connector.with_proxy_header(header);
                let target = inner.target.clone();
                Either::Right(Box::pin(async move {
                    pool::send_once(&connector, &target, request).await
                }))
            }
        };
        // On failure `in_flight` is dropped on return; on success it moves into the body.
        // The deadline from `sent_at`: one clock read fewer per request than `timeout`.
        let answered = tokio::time::timeout_at(sent_at + budget, exchange).map(move |outcome| {
            let response = self
                .answered(outcome.map(|sent| sent.map_err(|error| BackendError::from_send(self, error))))?;
            let waited = u64::try_from(sent_at.elapsed().as_micros()).unwrap_or(u64::MAX);
            inner.stats.first_byte_micros.fetch_add(waited, Ordering::Relaxed);
            let between_bytes = inner.options.timeouts.between_bytes;
            Ok(response.map(|body| TimedBody::new(body, between_bytes, inner.name.clone(), in_flight)))
        });
        Either::Right(answered)
    }
}

/// Makes the framing fields say what is sent (RFC 9112 §6): `Transfer-Encoding` is left to
/// [`h1`], which chunks a body of unknown length, and a `Content-Length` that is not the body's
/// exact length is removed ([`h1`] then sets the right one). [`h1`] sends a `Content-Length`
/// the caller set even when the body is empty; announced bytes that never come would make the
/// origin read the next request on the pooled connection as this one's body (request
/// smuggling), whichever path built the request: a fill dropping a GET body, a coalesced
/// waiter passed without the body it no longer has, a retry or a restart.
fn frame_as_sent(request: &mut Request<OutgoingBody>) {
    let exact = http_body::Body::size_hint(request.body()).exact();
    let headers = request.headers_mut();
    headers.remove(http::header::TRANSFER_ENCODING);
    let truthful = exact.is_some_and(|length| {
        headers
            .get_all(http::header::CONTENT_LENGTH)
            .iter()
            .all(|value| value.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) == Some(length))
    });
    if !truthful {
        headers.remove(http::header::CONTENT_LENGTH);
    }
}

#[cfg(test)]
mod tests;
