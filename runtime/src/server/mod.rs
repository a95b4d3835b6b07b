//! Listeners and client connections: HTTP/1.1 (keep-alive; HTTP/1.0 clients get keep-alive only
//! when they ask) and HTTP/2 with prior knowledge on the same port, and graceful draining.
//! What a client may hold: `limits` caps open connections, `timeouts` closes the quiet ones
//! (the body timeout is the request body's own, see `backend::ClientBody`). `first_line` and
//! hyper's buffer sizes bound a request head; `h2_guard` caps HTTP/2 streams and resets;
//! `h2_streams` answers HTTP/2 streams in their connection's task and `h2_writes` joins their
//! small writes; `short_writes` sends a short vectored write (an HTTP/1.1 response's head and
//! body) as one buffer; `health` answers the load balancer's health check.

mod first_line;
mod h2_guard;
mod h2_streams;
mod h2_writes;
mod health;
mod limits;
mod proxy_protocol;
mod short_writes;
mod timeouts;
mod tls;
mod workers;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::backend::ConnectionAddresses;
use crate::config::{ClientTimeouts, Config, H2Limits, ListenSpec, RequestLimits, WorkerModel};
use crate::poll_time;
use crate::proxy::{self, ClientConnection, ListenerName, Shared};
use first_line::FirstLine;
use h2_guard::ConnectionGuard;
use h2_streams::{ConnectionStreams, InConnectionTask};
use h2_writes::H2Writes;
pub(crate) use health::Health;
use limits::{ConnectionCap, Occasional};
use proxy_protocol::ProxyListener;
use short_writes::ShortWrites;
use timeouts::{Activity, Answering, Watched};
pub(crate) use tls::Terminator;
pub(crate) use workers::{TASK_POLLS_PER_EVENT_LOOK, THREAD_STACK_SIZE};

/// What the listeners enforce on client connections, from [`Config`]; every worker gets a
/// copy, and they share the connection cap and the health state.
#[derive(Clone)]
pub(crate) struct Options {
    /// How long shutdown waits for the requests in flight.
    pub grace: Duration,
    pub timeouts: ClientTimeouts,
    pub request_limits: RequestLimits,
    pub h2_limits: H2Limits,
    /// TLS for the `,tls` listeners; `None` when no listener has it.
    pub tls: Option<Arc<Terminator>>,
    /// The health check's path and state; shutdown turns it to draining.
    pub health: Arc<Health>,
    /// `--max-connections`, over all listeners and workers.
    cap: Arc<ConnectionCap>,
}

impl Options {
    pub(crate) fn new(config: &Config, tls: Option<Arc<Terminator>>) -> Options {
        let cap = Arc::new(ConnectionCap::new(config.max_connections));
        cap.check_file_limit();
        Options {
            grace: config.shutdown_grace,
            timeouts: config.client_timeouts,
            request_limits: config.request_limits,
            h2_limits: config.h2_limits,
            tls,
            health: Arc::new(Health::new(config.health_path.clone())),
            cap,
        }
    }
}

/// The listening sockets, bound as `--worker-model` says.
pub(crate) enum Listeners {
    /// One socket per listener, served by the runtime [`Listeners::serve`] runs on.
    Shared(Vec<Listener>),
    /// One socket per listener for each worker thread.
    PerWorker(workers::Sockets),
}

impl Listeners {
    /// Binds every address, so a taken port fails at start, not later.
    pub(crate) async fn bind(config: &Config) -> Result<Listeners, (SocketAddr, std::io::Error)> {
        match config.worker_model {
            WorkerModel::Shared => Ok(Listeners::Shared(bind(&config.listen).await?)),
            WorkerModel::ReusePort => {
                let count = config.threads.unwrap_or_else(workers::one_per_core);
                Ok(Listeners::PerWorker(workers::Sockets::bind(
                    &config.listen,
                    count,
                )?))
            }
        }
    }

    /// The bound addresses, in the order of `Config::listen`.
    pub(crate) fn local_addrs(&self) -> Vec<SocketAddr> {
        match self {
            Listeners::Shared(listeners) => listeners
                .iter()
                .map(|(listener, _)| listener.local_addr().expect("a bound listener has an address"))
                .collect(),
            Listeners::PerWorker(sockets) => sockets.local_addrs(),
        }
    }

    /// Starts serving: on the current runtime, or on a thread per worker. The task ends
    /// once every worker has stopped (see [`serve`]).
    pub(crate) async fn serve(
        self,
        shared: Arc<Shared>,
        stop: watch::Receiver<bool>,
        options: Options,
    ) -> std::io::Result<tokio::task::JoinHandle<()>> {
        match self {
            Listeners::Shared(listeners) => {
                shared.stats.worker_connections.set_workers(1);
                Ok(tokio::spawn(serve(listeners, shared, stop, options, 0)))
            }
            Listeners::PerWorker(sockets) => sockets.serve(shared, stop, options).await,
        }
    }
}

/// Accepts connections on `listeners` until `stop` flips, then waits up to `grace` for the
/// requests in flight to finish (on every worker: the connection cap is shared). `worker`
/// numbers this runtime's accepts in the counters.
async fn serve(
    listeners: Vec<Listener>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    options: Options,
    worker: usize,
) {
    let mut builder = auto::Builder::new(InConnectionTask);
    // A client may shut down its sending side once the request is out (`nc -N`, some load
    // balancers' health checks): it still gets the response.
    builder.http1().keep_alive(true).half_close(true);
    // Header and idle timeouts are `timeouts::expired`'s, for HTTP/1 and HTTP/2 alike; hyper's
    // would also close idle keep-alive connections at the header timeout once a timer is set.
    builder.http1().header_read_timeout(None);
    // hyper answers a longer head with 431 (HTTP/1 from its read buffer, HTTP/2 from the
    // advertised SETTINGS_MAX_HEADER_LIST_SIZE); the first request line is `first_line`'s.
    let head = options.request_limits.max_request_head;
    builder.http1().max_buf_size(head);
    builder.http1().max_headers(options.request_limits.max_headers);
    builder
        .http2()
        .max_concurrent_streams(options.h2_limits.max_concurrent_streams);
    // RFC 8441: WebSockets over HTTP/2 (extended CONNECT), piped by `proxy::pipe`.
    builder.http2().enable_connect_protocol();
    builder
        .http2()
        .max_header_list_size(u32::try_from(head).unwrap_or(u32::MAX));
    let builder = Arc::new(builder);
    let cap = options.cap;
    let mut accepting = tokio::task::JoinSet::new();
    for (index, (listener, spec)) in listeners.into_iter().enumerate() {
        let name = ListenerName {
            socket: format!("a{index}"),
            endpoint: listener
                .local_addr()
                .map_or_else(|_| spec.addr.to_string(), |addr| addr.to_string()),
        };
        accepting.spawn(accept_loop(
            listener,
            spec,
            Client {
                shared: shared.clone(),
                builder: builder.clone(),
                timeouts: options.timeouts,
                stop: stop.clone(),
                request_limits: options.request_limits,
                h2_limits: options.h2_limits,
                tls: spec.tls.then(|| options.tls.clone()).flatten(),
                listener: Arc::new(name),
                health: options.health.clone(),
            },
            cap.clone(),
            worker,
        ));
    }
    let _ = stop.wait_for(|stopped| *stopped).await;
    while accepting.join_next().await.is_some() {}
    let grace = options.grace;
    if tokio::time::timeout(grace, cap.all_closed()).await.is_err() {
        tracing::warn!(
            ?grace,
            "shutdown grace period over; closing the remaining connections"
        );
    }
}

/// What serving one client connection needs.
#[derive(Clone)]
struct Client {
    shared: Arc<Shared>,
    builder: Arc<auto::Builder<InConnectionTask>>,
    timeouts: ClientTimeouts,
    stop: watch::Receiver<bool>,
    request_limits: RequestLimits,
    h2_limits: H2Limits,
    /// Set on `,tls` listeners.
    tls: Option<Arc<Terminator>>,
    /// `local.socket` / `local.endpoint` of this listener's requests.
    listener: Arc<ListenerName>,
    health: Arc<Health>,
}

async fn accept_loop(
    listener: TcpListener,
    spec: ListenSpec,
    client: Client,
    cap: Arc<ConnectionCap>,
    worker: usize,
) {
    let mut stop = client.stop.clone();
    let address = listener.local_addr().expect("a bound listener has an address");
    let proxied = spec
        .proxy_protocol
        .then(|| Arc::new(ProxyListener::new(address, client.timeouts.header)));
    let mut accept_failures = Occasional::default();
    loop {
        let slot = tokio::select! {
            slot = cap.slot(address) => slot,
            _ = stop.changed() => return,
        };
        let (mut stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning, and
                    // say so without a line per retry.
                    if let Some(again) = accept_failures.due(Instant::now()) {
                        tracing::warn!(
                            %error,
                            listener = %address,
                            failed_again_since_last_warning = again,
                            "accept failed; retrying every 50 ms"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        client.shared.stats.worker_connections.accepted(worker);
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let server = stream.local_addr().unwrap_or(address);
        let proxied = proxied.clone();
        tokio::spawn(poll_time::per_poll(async move {
            // Before TLS and HTTP: the load balancer's header comes first on the wire.
            let (peer, server, proxied) = match proxied {
                Some(proxied) => match proxied.accept(&mut stream, peer, server).await {
                    Some((peer, server, proxied)) => (peer, server, Some(proxied)),
                    None => return,
                },
                None => (peer, server, None),
            };
            let connection = |tls| {
                Arc::new(ClientConnection {
                    addresses: ConnectionAddresses { client: peer, server },
                    listener: client.listener.clone(),
                    tls,
                    proxied,
                })
            };
            match client.tls.clone() {
                None => {
                    let connection = connection(None);
                    serve_client(stream, connection, client).await;
                }
                Some(terminator) => {
                    if let Some((stream, tls)) = terminator.accept(stream, peer).await {
                        let connection = connection(Some(tls));
                        serve_client(stream, connection, client).await;
                    }
                }
            }
            drop(slot);
        }));
    }
}

/// Serves one connection until the client closes it, a timeout closes it, or shutdown drains it.
/// `stream` is the TCP connection, or TLS over it (`connection` says what was negotiated, and
/// what a PROXY header said about it on a `,PROXY` listener).
async fn serve_client<S>(stream: S, connection: Arc<ClientConnection>, client: Client)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Client {
        shared,
        builder,
        timeouts,
        mut stop,
        request_limits,
        h2_limits,
        tls: _,
        listener: _,
        health,
    } = client;
    let activity = Activity::new();
    let requests = activity.clone();
    let peer = connection.addresses.client;
    let guard = ConnectionGuard::new(h2_limits, peer);
    let streams = guard.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let shared = shared.clone();
        let streams = streams.clone();
        let in_flight = requests.request_started(request.version());
        let health_answer = health.answer(&request);
        let connection = connection.clone();
        async move {
            if let Some(response) = health_answer {
                return Ok(response.map(|body| Answering::new(body, in_flight)));
            }
            let http2 = request.version() == http::Version::HTTP_2;
            // Boxed for both protocols: the request's future is kilobytes, and hyper moves
            // this one into its HTTP/2 stream's future, and that into `h2_streams`' box.
            let handling = Box::pin(proxy::handle(shared, connection, request));
            let response = if http2 {
                h2_guard::serve(&streams, handling).await
            } else {
                handling.await
            };
            Ok::<_, Infallible>(response.map(|body| Answering::new(body, in_flight)))
        }
    });
    let watched = Watched::new(stream, activity.clone());
    let io = TokioIo::new(H2Writes::new(ShortWrites::new(FirstLine::new(
        watched,
        request_limits.max_header_size,
    ))));
    // With upgrades: a piped WebSocket's `101` hands the connection to `proxy::pipe`.
    // Boxed so it can be dropped before its streams are finished.
    let mut connection = Box::pin(builder.serve_connection_with_upgrades(io, service));
    let mut streams = ConnectionStreams::default();
    let mut stopping = false;
    // After an HTTP/2 GOAWAY for idleness: when to stop waiting for the client to close.
    let mut closing_at = None;
    loop {
        tokio::select! {
            biased;
            outcome = std::future::poll_fn(|context| streams.poll_connection(connection.as_mut(), context)) => {
                if let Err(error) = outcome {
                    tracing::debug!(%peer, error = %error, "client connection ended with an error");
                }
                break;
            }
            _ = stop.wait_for(|stopped| *stopped), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
            // Past an HTTP/2 cap (the guard logs which): GOAWAY.
            _ = guard.tripped(), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
            // Also while stopping: a slow head must not hold up the shutdown.
            expired = timeouts::expired(&activity, timeouts), if closing_at.is_none() => {
                tracing::debug!(%peer, "closing the client connection: {expired}");
                if !activity.is_multiplexed() {
                    // A head half sent or no request at all: nothing to finish, just close.
                    break;
                }
                // HTTP/2: GOAWAY first, so the client knows no stream of its was dropped.
                connection.as_mut().graceful_shutdown();
                closing_at = Some(Instant::now() + timeouts.idle);
            }
            _ = timeouts::until(closing_at) => break,
        }
    }
    // The client is gone or being closed: what its streams still do for it ends as it would
    // have in tasks of their own.
    drop(connection);
    streams.finish().await;
}

/// A bound listener and what its connections speak.
pub(crate) type Listener = (TcpListener, ListenSpec);

/// Binds every address, so a taken port fails at start, not later.
async fn bind(specs: &[ListenSpec]) -> Result<Vec<Listener>, (SocketAddr, std::io::Error)> {
    let mut listeners = Vec::with_capacity(specs.len());
    for spec in specs {
        let socket = TcpListener::bind(spec.addr)
            .await
            .map_err(|error| (spec.addr, error))?;
        listeners.push((socket, *spec));
    }
    Ok(listeners)
}
