//! End-to-end test harness: a scriptable origin on an ephemeral port, edgecache in front of it,
//! and clients (hyper HTTP/1.1 keep-alive, h2c with prior knowledge, raw TCP for HTTP/1.0).
//!
//! Shaped after linkerd's `app/integration` harness: everything binds `127.0.0.1:0` and hands
//! back its bound address, the origin counts what it receives and logs the request heads, and
//! tests synchronise on those signals, never on sleeps. Objects age by moving the proxy's clock
//! forward ([`shared_clock`]); the few places that poll (the store filling after the client saw
//! the last byte) say why.
//!
//! Each test file declares `mod support;`, so not every helper is used by every file.
#![allow(dead_code)]

pub mod plugins;
pub mod proxy_protocol;
pub mod tls;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use edgecache_runtime::{Clock, Config, Running};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// Upper bound for any single exchange in a test, so a proxy that hangs fails the test instead
/// of hanging the suite. Never reached when things work.
pub const EXCHANGE_LIMIT: Duration = Duration::from_secs(20);

// === tracing ===

/// Installs a test-captured tracing subscriber once per test binary. `RUST_LOG` selects what is
/// shown; by default warnings (backend failures are logged at warn).
pub fn trace_init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// Collects formatted tracing events for assertions on what edgecache logs.
#[derive(Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Captures the events `filter` selects (an `EnvFilter` directive, e.g.
    /// `edgecache::access=info`) of everything this (current-thread) test runtime runs while
    /// the guard lives.
    pub fn install(&self, filter: &str) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

// === origin replies ===

/// What the origin answers to one request.
#[derive(Clone, Debug)]
pub struct OriginReply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body when `chunks` is `None`; sent with `Content-Length`.
    pub body: Bytes,
    /// Wait before sending the response head.
    pub delay: Duration,
    /// A body sent as these chunks, each after its delay (chunked transfer coding unless a
    /// `Content-Length` header is set).
    pub chunks: Option<Vec<(Duration, Bytes)>>,
}

impl OriginReply {
    /// `200 OK` with `body`.
    pub fn ok(body: impl Into<Bytes>) -> OriginReply {
        OriginReply {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: body.into(),
            delay: Duration::ZERO,
            chunks: None,
        }
    }

    pub fn with_status(status: u16, body: impl Into<Bytes>) -> OriginReply {
        OriginReply {
            status: StatusCode::from_u16(status).expect("valid status"),
            ..OriginReply::ok(body)
        }
    }

    /// Appends a header line (several lines with one name are kept).
    pub fn header(mut self, name: &str, value: impl AsRef<str>) -> OriginReply {
        self.headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("valid header name"),
            HeaderValue::from_str(value.as_ref()).expect("valid header value"),
        );
        self
    }

    pub fn cache_control(self, value: &str) -> OriginReply {
        self.header("cache-control", value)
    }

    pub fn delay(mut self, delay: Duration) -> OriginReply {
        self.delay = delay;
        self
    }

    pub fn chunks(mut self, chunks: Vec<(Duration, Bytes)>) -> OriginReply {
        self.chunks = Some(chunks);
        self
    }
}

/// One request as the origin received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    /// Path and query.
    pub target: String,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("ASCII header"))
    }
}

#[derive(Default)]
struct OriginState {
    total: AtomicUsize,
    per_target: Mutex<HashMap<String, usize>>,
    log: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Set by [`Origin::date_by`]: the clock that dates the responses.
    clock: Mutex<Option<Clock>>,
    /// Set by [`Origin::count_only`]: keep the total, not the log or the per-target counts.
    count_only: std::sync::atomic::AtomicBool,
}

impl OriginState {
    fn record(&self, seen: Seen) {
        self.total.fetch_add(1, Ordering::SeqCst);
        if self.count_only.load(Ordering::Relaxed) {
            return;
        }
        *self
            .per_target
            .lock()
            .unwrap()
            .entry(seen.target.clone())
            .or_default() += 1;
        self.log.lock().unwrap().push(seen);
    }
}

/// Counts a request as in flight until dropped (also when the proxy gives up on it).
struct InFlight(Arc<OriginState>);

impl InFlight {
    fn enter(state: &Arc<OriginState>) -> InFlight {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

type Handler = dyn Fn(&Request<Bytes>) -> OriginReply + Send + Sync;
type OriginBody = BoxBody<Bytes, Infallible>;

// === impl Origin ===

/// A test origin on `127.0.0.1:<ephemeral>`.
pub struct Origin {
    pub addr: SocketAddr,
    state: Arc<OriginState>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Origin {
    /// A hyper HTTP/1.1 origin answering every request with `handler(request)`. The request body
    /// is read before the handler runs.
    pub async fn start(handler: impl Fn(&Request<Bytes>) -> OriginReply + Send + Sync + 'static) -> Origin {
        Origin::start_at(SocketAddr::from(([127, 0, 0, 1], 0)), handler).await
    }

    /// [`Origin::start`] on a given address (to bring a stopped origin back on its port).
    pub async fn start_at(
        addr: SocketAddr,
        handler: impl Fn(&Request<Bytes>) -> OriginReply + Send + Sync + 'static,
    ) -> Origin {
        let handler: Arc<Handler> = Arc::new(handler);
        Origin::spawn(addr, move |stream, state| {
            let handler = handler.clone();
            async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let handler = handler.clone();
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(answer(&*handler, &state, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        })
        .await
    }

    /// An origin that always answers with the same status, headers and body.
    pub async fn fixed(reply: OriginReply) -> Origin {
        Origin::start(move |_| reply.clone()).await
    }

    /// A raw TCP "origin": for each connection, reads one request head, counts it, writes
    /// `bytes` and closes. For broken responses (garbage, truncated bodies).
    pub async fn raw(bytes: impl Into<Bytes>) -> Origin {
        let bytes: Bytes = bytes.into();
        Origin::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), move |mut stream, state| {
            let bytes = bytes.clone();
            async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while find(&head, b"\r\n\r\n").is_none() {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let mut words = line.split(' ');
                let method = words.next().unwrap_or("GET").parse().unwrap_or(Method::GET);
                let target = words.next().unwrap_or("/").to_string();
                state.record(Seen {
                    method,
                    target,
                    version: Version::HTTP_11,
                    headers: HeaderMap::new(),
                    body: Bytes::new(),
                });
                let _ = stream.write_all(&bytes).await;
                let _ = stream.shutdown().await;
            }
        })
        .await
    }

    async fn spawn<F, Fut>(addr: SocketAddr, serve: F) -> Origin
    where
        F: Fn(TcpStream, Arc<OriginState>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind(addr).await.expect("origin binds");
        let addr = listener.local_addr().expect("bound address");
        let state = Arc::new(OriginState::default());
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            let mut panicked = None;
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let _ = stream.set_nodelay(true);
                        connections.spawn(serve(stream, task_state.clone()));
                    }
                    Some(joined) = connections.join_next(), if !connections.is_empty() => {
                        if let Err(error) = joined {
                            if error.is_panic() {
                                panicked.get_or_insert(error.into_panic());
                            }
                        }
                    }
                }
            }
            connections.abort_all();
            while let Some(joined) = connections.join_next().await {
                if let Err(error) = joined {
                    if error.is_panic() {
                        panicked.get_or_insert(error.into_panic());
                    }
                }
            }
            if let Some(payload) = panicked {
                std::panic::resume_unwind(payload);
            }
        });
        Origin {
            addr,
            state,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Dates every response without a `Date` of its own by `clock` (the proxy's, see
    /// [`shared_clock`]), so that moving the clock forward moves the origin's time with the
    /// cache's: a response fetched after the move is not taken for an old one.
    pub fn date_by(&self, clock: &Clock) {
        *self.state.clock.lock().unwrap() = Some(clock.clone());
    }

    /// From now on keeps only the total count: for tests that send so many requests that the
    /// log would weigh in their memory measurements.
    pub fn count_only(&self) {
        self.state.count_only.store(true, Ordering::Relaxed);
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.total.load(Ordering::SeqCst)
    }

    /// Requests received so far for this path and query.
    pub fn requests_for(&self, target: &str) -> usize {
        self.state
            .per_target
            .lock()
            .unwrap()
            .get(target)
            .copied()
            .unwrap_or(0)
    }

    /// Every request received, in order.
    pub fn log(&self) -> Vec<Seen> {
        self.state.log.lock().unwrap().clone()
    }

    /// The last request received.
    pub fn last(&self) -> Seen {
        self.log().pop().expect("the origin received a request")
    }

    /// The most requests that were in the handler (waiting out their delay) at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Stops accepting, closes open connections and re-raises a panic of the handler.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            if let Err(error) = task.await {
                if error.is_panic() {
                    std::panic::resume_unwind(error.into_panic());
                }
            }
        }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

async fn answer(
    handler: &Handler,
    state: &Arc<OriginState>,
    request: Request<Incoming>,
) -> Response<OriginBody> {
    let _in_flight = InFlight::enter(state);
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let request = Request::from_parts(parts, body);
    state.record(Seen {
        method: request.method().clone(),
        target: request
            .uri()
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .to_string(),
        version: request.version(),
        headers: request.headers().clone(),
        body: request.body().clone(),
    });
    let reply = handler(&request);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let body: OriginBody = match reply.chunks {
        None => Full::new(reply.body).boxed(),
        Some(chunks) => {
            let stream = futures_util::stream::unfold(chunks.into_iter(), |mut chunks| async move {
                let (delay, chunk) = chunks.next()?;
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Some((Ok::<_, Infallible>(Frame::data(chunk)), chunks))
            });
            BodyExt::boxed(StreamBody::new(stream))
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = reply.status;
    *response.headers_mut() = reply.headers;
    if let Some(clock) = state.clock.lock().unwrap().as_ref() {
        if let Ok(date) = HeaderValue::from_str(&http_date(clock.now())) {
            response.headers_mut().entry(http::header::DATE).or_insert(date);
        }
    }
    response
}

/// A server the test started as a process (nginx, HAProxy), listening on `addr`, its files in
/// `dir`; killed and reaped when dropped.
pub struct Daemon {
    pub addr: SocketAddr,
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts `command` (a Debian package's server) with stdin and stdout closed and stderr
    /// kept for [`Daemon::listening`]; when it cannot start, fails saying what the test needs
    /// it for (`role`) and which package (`package`) to install.
    pub fn spawn(command: &mut std::process::Command, role: &str, package: &str) -> std::process::Child {
        use std::process::Stdio;
        let program = command.get_program().to_string_lossy().into_owned();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "this test needs {role}, and `{program}` could not be started ({error}); \
                     install it: `apt-get install -y --no-install-recommends {package}` \
                     (Debian/Ubuntu; .ci/run does this)"
                )
            })
    }

    /// Polls until `child` accepts connections on `addr` (such servers say nothing when they
    /// are ready), failing with its stderr and `log_file` (in `dir`) if it exits first, or
    /// once `EXCHANGE_LIMIT` has passed.
    pub async fn listening(
        name: &str,
        mut child: std::process::Child,
        addr: SocketAddr,
        dir: tempfile::TempDir,
        log_file: Option<&str>,
    ) -> Daemon {
        let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
        while TcpStream::connect(addr).await.is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                let log = log_file
                    .and_then(|file| std::fs::read_to_string(dir.path().join(file)).ok())
                    .unwrap_or_default();
                panic!("{name} exited ({status}) before listening: {stderr}{log}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} did not listen on {addr} in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Daemon { addr, child, dir }
    }

    /// The process id, to signal it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port on 127.0.0.1 with nothing listening (bound, then released).
pub async fn unused_port() -> SocketAddr {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
    listener.local_addr().expect("bound address")
}

/// Writes `text` (`/etc/hosts` lines) to a file named after `name` in Cargo's temp directory:
/// a `--hosts-file`, which the test rewrites to move a name to other addresses.
pub fn hosts_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("edgecache-hosts-{}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("write the hosts file");
    path
}

// === policies ===

/// Writes `text` to a fresh `.vcl` file named after `name` in Cargo's temp directory for
/// integration tests (`target/tmp`), so that test runs leave nothing in the system's `/tmp`.
pub fn write_policy(name: &str, text: &str) -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = name.strip_suffix(".vcl").unwrap_or(name);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("edgecache-policy-{}-{n}-{name}.vcl", std::process::id()));
    std::fs::write(&path, text).expect("write the policy");
    path
}

// === modes ===

/// How [`start_proxy`] runs edgecache for a test that sets no policy of its own. The RFC 9111
/// suite runs each of its tests in every mode ([`modes!`]) and expects the same results: a
/// policy that changes nothing changes no caching rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No policy: the builtin behaviour, natively.
    Native,
    /// `-f examples/default.vcl`, the builtin behaviour spelled out (its backend pointed at the
    /// test's origin).
    DefaultVcl,
    /// A policy that declares only a backend.
    BackendOnly,
}

thread_local! {
    static MODE: std::cell::Cell<Mode> = const { std::cell::Cell::new(Mode::Native) };
}

impl Mode {
    /// Makes this the mode of the proxies the current test starts (its thread's).
    pub fn enter(self) {
        MODE.with(|mode| mode.set(self));
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::DefaultVcl => "default-vcl",
            Mode::BackendOnly => "backend-only",
        }
    }

    /// The policy text for a proxy in front of `backend`, `None` without one.
    fn policy(self, backend: SocketAddr) -> Option<String> {
        let declared = format!(
            "backend default {{\n    .host = \"{}\";\n    .port = \"{}\";\n}}",
            backend.ip(),
            backend.port()
        );
        match self {
            Mode::Native => None,
            Mode::DefaultVcl => {
                let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/default.vcl");
                let text = std::fs::read_to_string(path).expect("examples/default.vcl");
                let example = "backend default {\n    .host = \"127.0.0.1\";\n    .port = \"8080\";\n}";
                assert!(text.contains(example), "examples/default.vcl declares {example}");
                Some(text.replacen(example, &declared, 1))
            }
            Mode::BackendOnly => Some(format!("vcl 4.1;\n\n{declared}\n")),
        }
    }
}

/// Defines a test, `async fn NAME() { ... }`, as a module `NAME` of three tokio tests, one per
/// [`Mode`]: `NAME::native`, `NAME::default_vcl`, `NAME::backend_only`. A test preceded by
/// `differs_with_policy = "why";` is a known difference still to remove: its two policy modes
/// are `#[ignore]`d with that reason (`cargo test -- --ignored` runs them);
/// `differs_with_default_vcl = "why";` ignores only `default_vcl`.
#[allow(unused_macros)]
macro_rules! modes {
    (differs_with_policy = $why:literal; $(#[$meta:meta])* async fn $name:ident() $body:block) => {
        crate::support::modes!(@define [#[ignore = $why]] [#[ignore = $why]] $(#[$meta])* async fn $name() $body);
    };
    // Only `examples/default.vcl`, which spells out the builtin subs, differs.
    (differs_with_default_vcl = $why:literal; $(#[$meta:meta])* async fn $name:ident() $body:block) => {
        crate::support::modes!(@define [#[ignore = $why]] [] $(#[$meta])* async fn $name() $body);
    };
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        crate::support::modes!(@define [] [] $(#[$meta])* async fn $name() $body);
    };
    (@define [$($policy:tt)*] [$($backend_only:tt)*] $(#[$meta:meta])* async fn $name:ident() $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn native() {
                crate::support::Mode::Native.enter();
                $body
            }

            #[tokio::test]
            $($policy)*
            async fn default_vcl() {
                crate::support::Mode::DefaultVcl.enter();
                $body
            }

            #[tokio::test]
            $($backend_only)*
            async fn backend_only() {
                crate::support::Mode::BackendOnly.enter();
                $body
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use modes;

// === proxy ===

/// Starts edgecache on `127.0.0.1:0` in front of `backend`, after `tweak` adjusts the defaults.
/// When `tweak` sets no policy, the test's [`Mode`] may give it one.
pub async fn start_proxy(backend: SocketAddr, tweak: impl FnOnce(&mut Config)) -> (Running, SocketAddr) {
    trace_init();
    let mut config = Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        backend: Some(backend.to_string()),
        ..Config::default()
    };
    tweak(&mut config);
    if config.policy.is_none() {
        let mode = MODE.with(std::cell::Cell::get);
        config.policy = mode.policy(backend).map(|text| write_policy(mode.name(), &text));
    }
    let running = edgecache_runtime::start(config).await.expect("edgecache starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

/// edgecache running `policy` (VCL text, written to a file named after `name`) in front of
/// `origin`.
pub async fn start_with_policy(name: &str, policy: &str, origin: &Origin) -> (Running, SocketAddr) {
    let path = write_policy(name, policy);
    start_proxy(origin.addr, |config| config.policy = Some(path)).await
}

/// The clock `running` reads, with `origin` dating its responses by it: a test moves it forward
/// (`advance`) to age what is stored instead of sleeping.
pub fn shared_clock(running: &Running, origin: &Origin) -> Clock {
    let clock = running.clock();
    origin.date_by(&clock);
    clock
}

/// Waits until the store holds at least `keys` primary keys.
///
/// Last resort polling, documented: a miss streams the body to the client while it fills the
/// store, and inserts the object only after the last byte, so a client can read the whole
/// response a moment before the object is in the store. Tests that need the object stored
/// (e.g. before a PURGE) wait here; it returns as soon as the insert happened.
pub async fn eventually_stored(running: &Running, keys: u64) {
    poll_until(Duration::from_secs(5), Duration::from_millis(2), || {
        let usage = running.cache_usage();
        (usage.keys >= keys)
            .then_some(())
            .ok_or_else(|| format!("the store never reached {keys} keys: {usage:?}"))
    })
    .await
}

/// Calls `done` every `every` until it returns `Ok`; after `limit`, panics with its last `Err`
/// (what never came). For the few waits with no signal to wait on; each caller says why.
pub async fn poll_until(limit: Duration, every: Duration, mut done: impl FnMut() -> Result<(), String>) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let Err(missing) = done() else { return };
        assert!(tokio::time::Instant::now() < deadline, "{missing}");
        tokio::time::sleep(every).await;
    }
}

/// Polls `check` (usually a request through the proxy) every 25 ms until it holds, for at most
/// 5 s; for background probes, whose next run is the event waited for.
pub async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting until {what}");
}

// === replies ===

/// A complete response as a client received it.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// Reads `response`'s whole body; a body error comes back as text.
    pub async fn read(response: Response<Incoming>) -> Result<Reply, String> {
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| format!("body failed: {e:?}"))?
            .to_bytes();
        Ok(Reply {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body,
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("ASCII header"))
    }

    /// The `X-Cache` value, or `""` when absent.
    pub fn cache(&self) -> &str {
        self.header("x-cache").unwrap_or("")
    }

    /// The `Age` value in seconds, when present.
    pub fn age(&self) -> Option<u64> {
        self.header("age")
            .map(|v| v.parse().unwrap_or_else(|_| panic!("Age is not a number: {v:?}")))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub type Headers<'a> = &'a [(&'a str, &'a str)];

// === impl Client ===

/// An HTTP/1.1 keep-alive client (hyper-util's pooled client).
#[derive(Clone)]
pub struct Client {
    inner: hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>,
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}

impl Client {
    pub fn new() -> Client {
        let inner = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
        Client { inner }
    }

    /// Sends a request; an error (connection or body) comes back as text.
    pub async fn try_send(
        &self,
        method: &str,
        addr: SocketAddr,
        target: &str,
        headers: Headers<'_>,
        body: impl Into<Bytes>,
    ) -> Result<Reply, String> {
        let mut request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("valid method"))
            .uri(format!("http://{addr}{target}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).expect("valid request");
        let exchange = async {
            let response = self
                .inner
                .request(request)
                .await
                .map_err(|e| format!("request failed: {e:?}"))?;
            Reply::read(response).await
        };
        tokio::time::timeout(EXCHANGE_LIMIT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no complete response within {EXCHANGE_LIMIT:?}")))
    }

    pub async fn send(
        &self,
        method: &str,
        addr: SocketAddr,
        target: &str,
        headers: Headers<'_>,
        body: impl Into<Bytes>,
    ) -> Reply {
        self.try_send(method, addr, target, headers, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {target}: {e}"))
    }

    pub async fn get(&self, addr: SocketAddr, target: &str, headers: Headers<'_>) -> Reply {
        self.send("GET", addr, target, headers, Bytes::new()).await
    }
}

/// `GET` on a fresh client.
pub async fn get(addr: SocketAddr, target: &str, headers: Headers<'_>) -> Reply {
    Client::new().get(addr, target, headers).await
}

/// `GET` on a fresh client; errors (e.g. a body cut short) come back as text.
pub async fn try_get(addr: SocketAddr, target: &str, headers: Headers<'_>) -> Result<Reply, String> {
    Client::new()
        .try_send("GET", addr, target, headers, Bytes::new())
        .await
}

/// Any method on a fresh client.
pub async fn send(
    method: &str,
    addr: SocketAddr,
    target: &str,
    headers: Headers<'_>,
    body: impl Into<Bytes>,
) -> Reply {
    Client::new().send(method, addr, target, headers, body).await
}

/// One bare HTTP/1.1 keep-alive connection to `addr` (Nagle off), for callers that time each
/// exchange (the benches) or need requests to share one connection; the caller waits for
/// `ready()` before each send.
pub async fn keep_alive_connection(
    addr: SocketAddr,
) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    sender
}

// === impl H2c ===

/// An HTTP/2 cleartext connection with prior knowledge (no upgrade).
pub struct H2c {
    addr: SocketAddr,
    sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
}

impl H2c {
    pub async fn connect(addr: SocketAddr) -> H2c {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .expect("h2c handshake");
        tokio::spawn(connection);
        H2c { addr, sender }
    }

    /// Another handle on the same connection, for concurrent streams.
    pub fn clone_stream(&self) -> H2c {
        H2c {
            addr: self.addr,
            sender: self.sender.clone(),
        }
    }

    pub async fn get(&mut self, target: &str, headers: Headers<'_>) -> Reply {
        let mut request = Request::builder()
            .method(Method::GET)
            .version(Version::HTTP_2)
            .uri(format!("http://{}{target}", self.addr));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::new())).expect("valid request");
        let exchange = async {
            self.sender.ready().await.expect("h2 connection ready");
            let response = self.sender.send_request(request).await.expect("h2 response");
            Reply::read(response).await.expect("h2 body")
        };
        tokio::time::timeout(EXCHANGE_LIMIT, exchange)
            .await
            .expect("h2 exchange in time")
    }
}

// === impl H2Frames ===

/// An HTTP/2 cleartext connection driven with the `h2` crate, for what hyper's client will not
/// do: reset streams at will, send `host` next to a different `:authority`, see GOAWAY.
pub struct H2Frames {
    pub send: h2::client::SendRequest<Bytes>,
    pings: h2::PingPong,
    /// The connection task; it ends when the server closes the connection.
    pub connection: JoinHandle<Result<(), h2::Error>>,
}

impl H2Frames {
    pub async fn connect(addr: SocketAddr) -> H2Frames {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (send, mut connection) = h2::client::handshake(stream).await.expect("h2 handshake");
        let pings = connection.ping_pong().expect("the first ping_pong");
        H2Frames {
            send,
            pings,
            connection: tokio::spawn(connection),
        }
    }

    /// Opens a GET stream for `uri` (absolute: its authority is `:authority`) with `headers`.
    pub async fn open(
        &mut self,
        uri: &str,
        headers: Headers<'_>,
    ) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), h2::Error> {
        let mut request = Request::get(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(()).expect("valid request");
        self.send = self.send.clone().ready().await?;
        self.send.send_request(request, true)
    }

    /// A GET and its whole response.
    pub async fn get(&mut self, uri: &str, headers: Headers<'_>) -> Result<Reply, h2::Error> {
        let exchange = async {
            let (response, _) = self.open(uri, headers).await?;
            let (parts, mut body) = response.await?.into_parts();
            let mut bytes = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
                bytes.extend_from_slice(&chunk);
            }
            Ok(Reply {
                status: parts.status,
                version: parts.version,
                headers: parts.headers,
                body: bytes.into(),
            })
        };
        tokio::time::timeout(EXCHANGE_LIMIT, exchange)
            .await
            .expect("h2 exchange in time")
    }

    /// Returns once the server answered a PING sent now: it has read every frame sent before.
    pub async fn round_trip(&mut self) -> Result<(), h2::Error> {
        tokio::time::timeout(EXCHANGE_LIMIT, self.pings.ping(h2::Ping::opaque()))
            .await
            .expect("a PONG in time")
            .map(drop)
    }
}

// === impl RawConn ===

/// A response parsed off a raw connection.
#[derive(Debug)]
pub struct RawResponse {
    /// As on the status line, e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    pub fn cache(&self) -> &str {
        self.header("x-cache").unwrap_or("")
    }
}

/// A TCP connection speaking hand-written HTTP/1.x, for what hyper's clients will not send
/// (HTTP/1.0, arbitrary hop-by-hop fields) and to watch the connection itself.
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub async fn connect(addr: SocketAddr) -> RawConn {
        RawConn {
            stream: TcpStream::connect(addr).await.expect("connect"),
            buf: Vec::new(),
        }
    }

    /// Connects from `local` (another loopback address such as 127.0.0.2: a second client
    /// the proxy can tell apart).
    pub async fn connect_from(local: std::net::IpAddr, addr: SocketAddr) -> RawConn {
        let socket = match local {
            std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .expect("socket");
        socket
            .bind(SocketAddr::new(local, 0))
            .expect("bind the source address");
        RawConn {
            stream: socket.connect(addr).await.expect("connect"),
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` as is (binary: a PROXY protocol v2 header).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write bytes");
    }

    /// Writes `text` as is (use `\r\n`).
    pub async fn send(&mut self, text: &str) {
        self.stream
            .write_all(text.as_bytes())
            .await
            .expect("write request");
    }

    /// The connection itself, for bytes after a response (a tunnel after `101`).
    pub fn into_stream(self) -> TcpStream {
        assert!(
            self.buf.is_empty(),
            "unread bytes: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        self.stream
    }

    /// Shuts down the sending side (a half-close), as `nc -N` does after its input.
    pub async fn finish_sending(&mut self) {
        self.stream.shutdown().await.expect("shut down the write side");
    }

    /// Reads one response (`Content-Length`, chunked, or delimited by close). `head_request`:
    /// the response has no body whatever its headers say.
    pub async fn response(&mut self, head_request: bool) -> RawResponse {
        tokio::time::timeout(EXCHANGE_LIMIT, self.read_response(head_request))
            .await
            .expect("a response in time")
    }

    async fn read_response(&mut self, head_request: bool) -> RawResponse {
        let end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            assert!(
                self.fill().await > 0,
                "connection closed before a response head; got {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).expect("ASCII head");
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let mut words = status_line.splitn(3, ' ');
        let version = words.next().expect("version").to_string();
        let status = words.next().expect("status").parse().expect("numeric status");
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(':').expect("header line");
                (name.trim().to_string(), value.trim().to_string())
            })
            .collect();
        let mut response = RawResponse {
            version,
            status,
            headers,
            body: Vec::new(),
        };
        if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
            return response;
        }
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        if chunked {
            loop {
                let line = self.line().await;
                let size =
                    usize::from_str_radix(line.split(';').next().unwrap().trim(), 16).expect("chunk size");
                if size == 0 {
                    // Trailers, then the empty line.
                    while !self.line().await.is_empty() {}
                    break;
                }
                let chunk = self.exact(size + 2).await;
                response.body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = response.header("content-length") {
            let length: usize = length.parse().expect("numeric Content-Length");
            response.body = self.exact(length).await;
        } else {
            while self.fill().await > 0 {}
            response.body = std::mem::take(&mut self.buf);
        }
        response
    }

    /// Whether the peer closed the connection: waits for EOF (the signal), bounded by
    /// `EXCHANGE_LIMIT` for the failure case. Returns false when the connection stays open.
    /// Bytes received instead of EOF are a test failure.
    pub async fn closed_by_peer(&mut self, within: Duration) -> bool {
        assert!(
            self.buf.is_empty(),
            "unread bytes: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        match tokio::time::timeout(within, self.fill()).await {
            Ok(0) => true,
            Ok(_) => panic!(
                "unexpected bytes after the response: {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Err(_) => false,
        }
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk).await {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            // A reset after the response counts as closed.
            Err(_) => 0,
        }
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(at) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8(self.buf[..at].to_vec()).expect("ASCII line");
                self.buf.drain(..at + 2);
                return line;
            }
            assert!(self.fill().await > 0, "connection closed mid-line");
        }
    }

    async fn exact(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(
                self.fill().await > 0,
                "connection closed with {} of {n} bytes",
                self.buf.len()
            );
        }
        self.buf.drain(..n).collect()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// === misc ===

/// An IMF-fixdate for `Date`, `Expires`, `Last-Modified`.
pub fn http_date(time: SystemTime) -> String {
    httpdate::fmt_http_date(time)
}

/// `now ± seconds` as an HTTP-date.
pub fn http_date_from_now(seconds: i64) -> String {
    let now = SystemTime::now();
    let time = if seconds >= 0 {
        now + Duration::from_secs(seconds as u64)
    } else {
        now - Duration::from_secs(seconds.unsigned_abs())
    };
    http_date(time)
}

/// Runs `n` copies of a future concurrently and collects their outputs in order.
pub async fn concurrently<F, Fut, T>(n: usize, make: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T>,
{
    futures_util::future::join_all((0..n).map(make)).await
}
