//! The runtime's side of the policy seam: request state exposed to a compiled VCL program
//! through `policy_lang::Context`, one implementation for the client side (`vcl_recv` …
//! `vcl_deliver`, `vcl_synth`, `vcl_pipe`) and one for the backend side (`vcl_backend_fetch`,
//! `vcl_backend_response`).

use std::borrow::Cow;
use std::cell::OnceCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Uri, Version};
use policy_lang::{
    BackendId, BanExpr, ConnectionValue, Context, PluginId, PluginOutcome, PluginPhase, Scope, Span, Task,
    Value, Var,
};

use super::client_side::ClientSide;
use super::esi::EsiLevel;
use super::plugins::PluginCalls;
use super::trace::{self, Side, Trace, Traced};
use crate::cache::object::CachedObject;
use crate::cache::SharedCache;

/// Transaction ids for `req.xid` / `bereq.xid` and the access log (Varnish numbers its
/// transactions the same way).
static NEXT_XID: AtomicU64 = AtomicU64::new(1);

pub(super) fn next_xid() -> i64 {
    NEXT_XID.fetch_add(1, Ordering::Relaxed) as i64
}

/// The request as the client sent it, kept in its extensions for `std.rollback(req)` when the
/// policy calls it.
#[derive(Clone)]
pub(super) struct Received {
    method: http::Method,
    uri: http::Uri,
    headers: HeaderMap,
}

impl Received {
    pub(super) fn of(parts: &Parts) -> Received {
        Received {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
        }
    }

    /// Puts `parts` back as they were (extensions and version stay).
    fn restore(&self, parts: &mut Parts) {
        parts.method = self.method.clone();
        parts.uri = self.uri.clone();
        parts.headers = self.headers.clone();
    }
}

/// The backend request as it was built from the client's, before `vcl_backend_fetch`, kept in
/// its extensions for `std.rollback(bereq)` when the policy calls it (Varnish's `bereq0`).
#[derive(Clone)]
pub(super) struct BereqAsBuilt(Received);

impl BereqAsBuilt {
    /// Keeps `bereq` as it is now in its own extensions.
    pub(super) fn keep(bereq: &mut Parts) {
        let as_built = BereqAsBuilt(Received::of(bereq));
        bereq.extensions.insert(as_built);
    }

    /// Puts `bereq` back as it was kept (if it was).
    pub(super) fn restore(bereq: &mut Parts) {
        if let Some(as_built) = bereq.extensions.get::<BereqAsBuilt>().cloned() {
            as_built.0.restore(bereq);
        }
    }
}

/// The listener a request came in on, as Varnish names its `-a` sockets: `local.socket`
/// (`a0`, `a1`, ... in `-a` order) and `local.endpoint` (its bound address).
pub(crate) struct ListenerName {
    pub socket: String,
    pub endpoint: String,
}

/// The client's body as `std.cache_req_body` buffered it before `vcl_recv`, carried in the
/// request's extensions: `bodyaccess.*` reads it, and every backend request of the request
/// (fills, passes, retries, restarts) sends it, as Varnish sends a cached body.
#[derive(Clone, Debug)]
pub(super) struct CachedBody(pub bytes::Bytes);

/// Marks the parts of a background refresh (`bereq.is_bgfetch`).
#[derive(Clone, Copy)]
pub(super) struct BackgroundFetch;

/// `server.hostname` (and `server.identity`, which has no flag of its own): the machine's
/// name, read once.
fn host_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .find_map(|path| std::fs::read_to_string(path).ok())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "localhost".to_string())
    })
}

/// A header's value as VCL reads it: several lines joined with ", ".
fn read_header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<Cow<'a, str>> {
    let mut values = headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
    let first = values.next()?;
    match values.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = format!("{first}, {second}");
            for more in values {
                joined.push_str(", ");
                joined.push_str(more);
            }
            Some(Cow::Owned(joined))
        }
    }
}

/// Each line of a header, in order (`header.get` and `header.remove` see them one by one).
fn header_lines<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Vec<Cow<'a, str>> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(Cow::Borrowed)
        .collect()
}

/// A value the policy wrote, or `None` (logged) when it is not valid in a header.
fn header_value(name: &HeaderName, value: String) -> Option<HeaderValue> {
    HeaderValue::try_from(value)
        .map_err(
            |_| tracing::warn!(header = %name, "policy set a header value that is not valid HTTP; ignored"),
        )
        .ok()
}

fn write_header(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    if let Some(value) = header_value(name, value) {
        headers.insert(name.clone(), value);
    }
}

/// Adds a line after the header's others: `Set-Cookie` lines stay separate, as HTTP wants them.
fn append_line(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    if let Some(value) = header_value(name, value) {
        headers.append(name.clone(), value);
    }
}

/// Replaces a header's lines by `values`, one line each; none removes the header.
fn replace_lines(headers: &mut HeaderMap, name: &HeaderName, values: Vec<String>) {
    headers.remove(name);
    for value in values {
        append_line(headers, name, value);
    }
}

/// The header methods of `Context`, the same for both sessions: each reaches its fields through
/// the session's own `headers(scope)` / `headers_mut(scope)`.
macro_rules! header_methods {
    () => {
        fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
            read_header(self.headers(scope)?, name)
        }

        fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
            if let Some(headers) = self.headers_mut(scope) {
                write_header(headers, name, value);
            }
        }

        fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
            if let Some(headers) = self.headers_mut(scope) {
                headers.remove(name);
            }
        }

        fn header_values(&self, scope: Scope, name: &HeaderName) -> Vec<Cow<'_, str>> {
            self.headers(scope)
                .map_or_else(Vec::new, |headers| header_lines(headers, name))
        }

        fn append_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
            if let Some(headers) = self.headers_mut(scope) {
                append_line(headers, name, value);
            }
        }

        fn set_header_values(&mut self, scope: Scope, name: &HeaderName, values: Vec<String>) {
            if let Some(headers) = self.headers_mut(scope) {
                replace_lines(headers, name, values);
            }
        }
    };
}

fn proto(version: Version) -> &'static str {
    match version {
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    }
}

fn seconds(value: &Value<'_>) -> Option<f64> {
    match value {
        Value::Duration(secs) => Some(*secs),
        _ => None,
    }
}

fn set_url(uri: &mut Uri, value: &Value<'_>) {
    // `set req.url = std.querysort(req.url);` and the like often leave the URL as it was.
    if value.as_str() == uri.path_and_query().map(|pq| pq.as_str()) {
        return;
    }
    if let Some(text) = value.as_str() {
        match text.parse::<http::uri::PathAndQuery>() {
            Ok(path) => {
                let mut parts = uri.clone().into_parts();
                parts.path_and_query = Some(path);
                if let Ok(new) = Uri::from_parts(parts) {
                    *uri = new;
                }
            }
            Err(_) => tracing::warn!(
                url = text,
                "policy set a URL that is not a valid request target; ignored"
            ),
        }
    }
}

fn set_method(method: &mut Method, value: &Value<'_>) {
    if let Some(parsed) = value
        .as_str()
        .and_then(|text| Method::from_bytes(text.as_bytes()).ok())
    {
        *method = parsed;
    }
}

/// The response a client-side sub sees as `resp` (in `vcl_deliver` and `vcl_synth`).
#[derive(Clone)]
pub(super) struct ClientResponse {
    pub status: StatusCode,
    pub reason: Option<String>,
    pub headers: HeaderMap,
}

/// Client-side state: the request as the policy has shaped it so far.
pub(super) struct ClientSession<'a> {
    pub req: Parts,
    pub client: SocketAddr,
    pub restarts: u32,
    pub xid: i64,
    pub hash: Vec<u8>,
    pub hash_always_miss: bool,
    pub backend_hint: Option<BackendId>,
    pub resp: Option<ClientResponse>,
    pub obj_hits: u64,
    /// The lookup found the key hit-for-miss (`req.is_hitmiss`) or hit-for-pass
    /// (`req.is_hitpass`).
    pub hit_miss: bool,
    pub hit_pass: bool,
    /// The stored object, in `vcl_hit`.
    pub obj: Option<HitObject>,
    pub synthetic: Option<String>,
    pub bans: Vec<BanExpr>,
    pub plugins: PluginCalls,
    /// The request a pipe opens with, in `vcl_pipe`. This and `resp_as_set_up` are boxed: a
    /// hit needs neither, and the session is built and dropped on every request.
    pub bereq: Option<Box<Parts>>,
    /// Where an ESI include stands (`req.esi_level`, `req_top.*`); `None`: the client's own
    /// request.
    pub esi: Option<EsiLevel>,
    /// `req.esi`: `false` turns ESI processing of this request's response off.
    pub req_esi: bool,
    /// The response in `vcl_deliver` is an ESI page (`obj.can_esi`), and whether it is to be
    /// assembled (`resp.do_esi`).
    pub can_esi: bool,
    pub do_esi: bool,
    /// `resp` as `vcl_deliver` or `vcl_synth` began with it, which `std.rollback(req)` puts
    /// back (Varnish sets the response up again); kept only for a policy that rolls back.
    resp_as_set_up: Option<Box<ClientResponse>>,
    /// For `std.healthy(...)`: the version's backends.
    version: Arc<crate::version::Version>,
    /// What `cookie.*` and `var.*` keep from `vcl_recv` to `vcl_deliver` / `vcl_synth` (the
    /// client task, restarts included, as in Varnish).
    task: Task,
    /// For `xkey.purge` / `xkey.softpurge`, which act on the cache at once, and its clock (`now`,
    /// `obj.age`, `obj.ttl`). Borrowed: cloning the handle's many `Arc`s cost a hit more than
    /// the rest of the session's setup.
    cache: &'a SharedCache,
    /// The request's cache key, in `vcl_hit` and `vcl_miss`, for `purge.hard()` / `purge.soft()`.
    pub key: Option<crate::cache::key::CacheKey>,
    /// Where `xkey.*` and `purge.*` purges are forwarded too (`--peers`); the driver sets it.
    pub peers: Option<&'a Arc<crate::peers::Peers>>,
    /// The request's trace, when someone listens (`GET /log`), and the `return` deciding the
    /// sub being run (see `trace::call`).
    pub trace: Option<Trace>,
    pub returned: Option<Span>,
    /// `--lookup-with-authorization`, `--lookup-with-cookie`, for the builtin `vcl_recv`.
    pub lookups: super::builtin::Lookups,
    /// The builtin `vcl_recv`'s own `return` decided this pass through `vcl_recv` (rather
    /// than the policy's code): its pass of a `POST` may store the response for `GET`s, as
    /// without a policy.
    pub recv_by_builtin: bool,
    /// How a sub that may pause gets back to where it started (see `run_resuming`).
    rerun: RerunFrom,
}

/// Where `ClientSession::run_resuming` finds the session as the sub found it, to run the sub
/// again after a plugin paused it. Nothing is copied until something changes: most subs
/// never pause, and copying the request and response before each one cost a plugin-running
/// hit a seventh of its instructions.
enum RerunFrom {
    /// No sub that may pause is running.
    Nowhere,
    /// Only the plugins' own writes changed the session so far, and `PluginCalls` records
    /// what they replaced.
    UndoingWrites,
    /// A statement changed the session: how it was before.
    Copy(Box<SubStart>),
}

/// What a client-side sub that runs again after a pause starts from.
struct SubStart {
    req: Parts,
    resp: Option<ClientResponse>,
    backend_hint: Option<BackendId>,
    hash_always_miss: bool,
    task: Task,
}

impl<'a> ClientSession<'a> {
    /// `xid`: the request's id, which its access-log line shows too; `cache`: the cache whose
    /// clock the policy reads and which `xkey.*` purges.
    pub fn new(
        req: Parts,
        client: SocketAddr,
        version: &Arc<crate::version::Version>,
        xid: i64,
        cache: &'a SharedCache,
    ) -> ClientSession<'a> {
        let backend_hint = version
            .policy
            .as_ref()
            .and_then(policy_lang::Program::default_backend);
        let req_trace = req.extensions.get().cloned();
        ClientSession {
            req,
            client,
            restarts: 0,
            xid,
            hash: Vec::new(),
            hash_always_miss: false,
            backend_hint,
            resp: None,
            obj_hits: 0,
            hit_miss: false,
            hit_pass: false,
            obj: None,
            synthetic: None,
            bans: Vec::new(),
            plugins: PluginCalls::default(),
            bereq: None,
            esi: None,
            req_esi: true,
            can_esi: false,
            do_esi: false,
            resp_as_set_up: None,
            version: version.clone(),
            task: Task::default(),
            cache,
            key: None,
            peers: None,
            trace: req_trace,
            returned: None,
            lookups: super::builtin::Lookups::default(),
            recv_by_builtin: false,
            rerun: RerunFrom::Nowhere,
        }
    }

    /// Varnish's builtin `vcl_recv`, natively (`builtin::vcl_recv`), noting whether its own
    /// `return` decided the request.
    pub fn builtin_vcl_recv(&mut self) -> policy_lang::Action {
        let action = super::builtin::vcl_recv(&mut self.req, self.lookups);
        self.recv_by_builtin = action != policy_lang::Action::Lookup;
        action
    }

    /// The response `vcl_deliver` or `vcl_synth` is about to run over.
    pub fn begin_response(&mut self, resp: ClientResponse) {
        let rolls_back = self.version.policy.as_ref().is_some_and(|p| p.rolls_back());
        self.resp_as_set_up = rolls_back.then(|| Box::new(resp.clone()));
        self.resp = Some(resp);
    }
}

impl ClientSession<'_> {
    /// The user's `vcl_recv` or `vcl_deliver`, waiting out plugin pauses: a plugin that
    /// pauses the request or the response ends the sub; once the plugin resumes it, the sub
    /// runs again from the request, response (and backend hint, and vmod state) as they were
    /// when it started, and the plugin's call answers with how its pause ended (see
    /// `plugins.rs`). Statements before the call run again: their bans are kept once, their
    /// `std.log` lines are logged once per run.
    pub async fn run_waiting(
        &mut self,
        program: &policy_lang::Program,
        sub: policy_lang::Sub,
    ) -> policy_lang::Action {
        if self.version.plugins.is_empty() {
            return trace::call(program, sub, self);
        }
        // Boxed: the pause machinery would otherwise make every policy request's future larger.
        Box::pin(self.run_resuming(program, sub)).await
    }

    /// [`ClientSession::run_waiting`] with plugins: runs `sub`, and again after each pause.
    async fn run_resuming(
        &mut self,
        program: &policy_lang::Program,
        sub: policy_lang::Sub,
    ) -> policy_lang::Action {
        self.rerun = RerunFrom::UndoingWrites;
        self.plugins.record_writes();
        let bans = self.bans.len();
        let mut action = trace::call(program, sub, self);
        while let policy_lang::Action::PluginPaused { .. } = action {
            let version = self.version.clone();
            let paused = self.resp.as_ref().map(|resp| (resp.status, &resp.headers));
            self.plugins
                .resume(&version, &self.req, paused, Some(self.client))
                .await;
            match std::mem::replace(&mut self.rerun, RerunFrom::UndoingWrites) {
                RerunFrom::Copy(start) => {
                    let SubStart {
                        req,
                        resp,
                        backend_hint,
                        hash_always_miss,
                        task,
                    } = *start;
                    (self.req, self.resp, self.task) = (req, resp, task);
                    (self.backend_hint, self.hash_always_miss) = (backend_hint, hash_always_miss);
                }
                _ => {
                    let resp = self
                        .resp
                        .as_mut()
                        .map(|resp| (&mut resp.status, &mut resp.headers));
                    self.plugins.undo_writes(&mut self.req, resp);
                }
            }
            self.plugins.record_writes();
            // The run again bans again what the first run banned.
            self.bans.truncate(bans);
            action = trace::call(program, sub, self);
        }
        self.rerun = RerunFrom::Nowhere;
        self.plugins.forget_writes();
        self.plugins.run_done();
        action
    }

    /// Before a statement changes the session while a sub that may pause runs: the first
    /// change copies the session as the sub found it (the plugins' writes so far undone).
    fn before_change(&mut self) {
        if let RerunFrom::UndoingWrites = self.rerun {
            self.copy_start();
        }
    }

    #[cold]
    fn copy_start(&mut self) {
        let mut start = SubStart {
            req: self.req.clone(),
            resp: self.resp.clone(),
            backend_hint: self.backend_hint,
            hash_always_miss: self.hash_always_miss,
            task: self.task.clone(),
        };
        let resp = start
            .resp
            .as_mut()
            .map(|resp| (&mut resp.status, &mut resp.headers));
        self.plugins.undo_writes(&mut start.req, resp);
        self.rerun = RerunFrom::Copy(Box::new(start));
    }
}

/// The stored object `vcl_hit` sees (`obj.*`). Its fields are stored packed, so `obj.http.*`
/// reads them from a map made the first time one is read.
pub(super) struct HitObject {
    pub object: Arc<CachedObject>,
    fields: OnceCell<HeaderMap>,
}

impl HitObject {
    pub(super) fn new(object: Arc<CachedObject>) -> HitObject {
        HitObject {
            object,
            fields: OnceCell::new(),
        }
    }

    fn fields(&self) -> &HeaderMap {
        self.fields.get_or_init(|| self.object.head.headers.to_map(0))
    }
}

impl ClientSession<'_> {
    /// The fields a client-side sub reads as `scope` (`obj` only in `vcl_hit`, `resp` in
    /// `vcl_deliver` / `vcl_synth`, `bereq` in `vcl_pipe`).
    fn headers(&self, scope: Scope) -> Option<&HeaderMap> {
        match scope {
            Scope::Req => Some(&self.req.headers),
            Scope::Resp => Some(&self.resp.as_ref()?.headers),
            Scope::Obj => Some(self.obj.as_ref()?.fields()),
            Scope::Bereq => Some(&self.bereq.as_ref()?.headers),
            Scope::ReqTop => Some(&self.top().headers),
            _ => None,
        }
    }

    /// The client's request (`req_top`): `req` itself unless this is an ESI include.
    fn top(&self) -> &Parts {
        self.esi.as_ref().map_or(&self.req, |esi| &esi.top)
    }

    /// The fields a client-side sub may change as `scope` (`obj` is read-only).
    fn headers_mut(&mut self, scope: Scope) -> Option<&mut HeaderMap> {
        self.before_change();
        match scope {
            Scope::Req => Some(&mut self.req.headers),
            Scope::Resp => Some(&mut self.resp.as_mut()?.headers),
            Scope::Bereq => Some(&mut self.bereq.as_mut()?.headers),
            _ => None,
        }
    }
}

/// `client.ip`, `server.ip` (the address the client connected to: the PROXY header's
/// destination behind a load balancer), `remote.ip` (the TCP peer: the load balancer itself)
/// and `local.ip` (this end of the TCP connection), as Varnish defines them, from the
/// extensions the server put on the request (and the fetch copied onto `bereq`).
fn connection_address(extensions: &http::Extensions, var: Var) -> Value<'static> {
    connection_socket(extensions, var).map_or(Value::Unset, |address| Value::Ip(address.ip().to_canonical()))
}

/// `std.port(IP)` of one of the addresses: 0 when unknown, as Varnish answers for a Unix socket.
fn connection_port(extensions: &http::Extensions, var: Var) -> i64 {
    connection_socket(extensions, var).map_or(0, |address| i64::from(address.port()))
}

/// `std.file_exists(path)`: a stat, following symbolic links, as Varnish's.
fn file_exists(path: &str) -> bool {
    std::fs::metadata(path).is_ok()
}

/// The socket address `var` (`client.ip`, `server.ip`, `remote.ip`, `local.ip`) names.
fn connection_socket(extensions: &http::Extensions, var: Var) -> Option<SocketAddr> {
    let connection = &ClientSide::of(extensions)?.connection;
    let (addresses, proxied) = (&connection.addresses, connection.proxied.as_ref());
    Some(match var {
        Var::ClientIp => addresses.client,
        Var::ServerIp => addresses.server,
        Var::RemoteIp => proxied.map_or(addresses.client, |proxied| proxied.remote),
        _ => proxied.map_or(addresses.server, |proxied| proxied.local),
    })
}

impl Traced for ClientSession<'_> {
    const SIDE: Side = Side::Client;
    fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }
    fn deciding_return(&mut self) -> &mut Option<Span> {
        &mut self.returned
    }
}

impl Traced for BackendSession<'_> {
    const SIDE: Side = Side::Backend;
    fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }
    fn deciding_return(&mut self) -> &mut Option<Span> {
        &mut self.returned
    }
}

impl ClientSession<'_> {
    /// [`Context::get`] of every variable but `req.url` and `req.method`, which it reads itself.
    #[inline(never)]
    fn other_var(&self, var: Var) -> Value<'_> {
        match var {
            Var::ClientIp => Value::Ip(self.client.ip().to_canonical()),
            Var::ServerIp | Var::RemoteIp | Var::LocalIp => connection_address(&self.req.extensions, var),
            Var::ReqProto => Value::str(proto(self.req.version)),
            Var::ReqRestarts => Value::Int(i64::from(self.restarts)),
            Var::ReqXid => Value::Int(self.xid),
            Var::ReqIsHitmiss => Value::Bool(self.hit_miss),
            Var::ReqIsHitpass => Value::Bool(self.hit_pass),
            Var::ServerHostname | Var::ServerIdentity => Value::str(host_name()),
            Var::LocalSocket | Var::LocalEndpoint => ClientSide::of(&self.req.extensions)
                .map(|side| &side.connection.listener)
                .map_or(Value::Unset, |listener| {
                    Value::str(match var {
                        Var::LocalSocket => &listener.socket,
                        _ => &listener.endpoint,
                    })
                }),
            Var::ObjCanEsi => Value::Bool(self.obj.as_ref().map_or(self.can_esi, |o| o.object.esi.is_some())),
            Var::ReqEsiLevel => Value::Int(self.esi.as_ref().map_or(0, |esi| i64::from(esi.level))),
            Var::ReqEsi => Value::Bool(self.req_esi),
            Var::RespDoEsi => Value::Bool(self.do_esi),
            Var::ReqTopUrl => Value::str(self.top().uri.path_and_query().map_or("/", |pq| pq.as_str())),
            Var::ReqTopMethod => Value::str(self.top().method.as_str()),
            Var::ReqTopProto => Value::str(proto(self.top().version)),
            Var::ReqHashAlwaysMiss => Value::Bool(self.hash_always_miss),
            Var::ReqBackendHint => Value::Backend(self.backend_hint),
            Var::ObjHits => match &self.obj {
                Some(hit) => Value::Int(hit.object.hits() as i64),
                None => Value::Int(self.obj_hits as i64),
            },
            Var::ObjStatus => self.obj.as_ref().map_or(Value::Unset, |o| {
                Value::Int(i64::from(o.object.head.status.as_u16()))
            }),
            Var::ObjTtl => self.obj.as_ref().map_or(Value::Unset, |o| {
                let age = o.object.head.age_at(self.cache.clock.now());
                Value::Duration(o.object.ttl().as_secs_f64() - age.as_secs_f64())
            }),
            Var::ObjAge => self.obj.as_ref().map_or(Value::Unset, |o| {
                Value::Duration(o.object.head.age_at(self.cache.clock.now()).as_secs_f64())
            }),
            Var::RespStatus => self
                .resp
                .as_ref()
                .map_or(Value::Unset, |r| Value::Int(i64::from(r.status.as_u16()))),
            Var::RespReason => self.resp.as_ref().map_or(Value::Unset, |r| {
                Value::str(r.reason.as_deref().or(r.status.canonical_reason()).unwrap_or(""))
            }),
            Var::Now => Value::Time(
                self.cache
                    .clock
                    .now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64()),
            ),
            Var::BereqUrl => self.bereq.as_ref().map_or(Value::Unset, |bereq| {
                Value::str(bereq.uri.path_and_query().map_or("/", |pq| pq.as_str()))
            }),
            Var::BereqMethod => self
                .bereq
                .as_ref()
                .map_or(Value::Unset, |bereq| Value::str(bereq.method.as_str())),
            _ => Value::Unset,
        }
    }
}

impl Context for ClientSession<'_> {
    fn returned(&mut self, at: Span) {
        self.returned = Some(at);
    }

    fn get(&self, var: Var) -> Value<'_> {
        // The two a policy reads on most requests, without the six saved registers and the jump
        // table of the others (which cost a read more than the read itself).
        match var {
            Var::ReqUrl => Value::str(self.req.uri.path_and_query().map_or("/", |pq| pq.as_str())),
            Var::ReqMethod => Value::str(self.req.method.as_str()),
            _ => self.other_var(var),
        }
    }

    fn set(&mut self, var: Var, value: Value<'static>) {
        self.before_change();
        match var {
            Var::BereqUrl | Var::BereqMethod if self.bereq.is_some() => {
                let bereq = self.bereq.as_mut().expect("checked");
                match var {
                    Var::BereqUrl => set_url(&mut bereq.uri, &value),
                    _ => set_method(&mut bereq.method, &value),
                }
            }
            Var::ReqUrl => set_url(&mut self.req.uri, &value),
            Var::ReqMethod => set_method(&mut self.req.method, &value),
            Var::ReqHashAlwaysMiss => self.hash_always_miss = value.truthy(),
            Var::ReqEsi => self.req_esi = value.truthy(),
            Var::RespDoEsi => self.do_esi = value.truthy(),
            Var::ReqBackendHint => {
                if let Value::Backend(backend) = value {
                    self.backend_hint = backend;
                }
            }
            Var::RespStatus => {
                if let (Some(resp), Value::Int(code)) = (self.resp.as_mut(), &value) {
                    if let Ok(status) = u16::try_from(*code)
                        .map_err(drop)
                        .and_then(|c| StatusCode::from_u16(c).map_err(drop))
                    {
                        resp.status = status;
                    }
                }
            }
            Var::RespReason => {
                if let Some(resp) = self.resp.as_mut() {
                    resp.reason = value.as_str().map(str::to_string);
                }
            }
            _ => tracing::debug!(
                variable = var.name(),
                "the runtime does not track this variable yet"
            ),
        }
    }

    header_methods!();

    fn task(&self) -> Option<&Task> {
        Some(&self.task)
    }

    fn task_mut(&mut self) -> Option<&mut Task> {
        self.before_change();
        Some(&mut self.task)
    }

    fn hash_data(&mut self, data: &str) {
        self.hash.extend_from_slice(data.as_bytes());
        // Delimits the parts, so `hash_data("ab")` differs from `hash_data("a"); hash_data("b")`.
        self.hash.push(0);
    }

    fn synthetic(&mut self, body: String) {
        self.synthetic = Some(body);
    }

    fn ban(&mut self, ban: BanExpr) {
        self.bans.push(ban);
    }

    fn log(&mut self, msg: &str) {
        tracing::info!(target: "edgecache::vcl", xid = self.xid, "{msg}");
    }

    fn purge_keys(&self, keys: &str, soft: bool) -> i64 {
        let purged = self.cache.purge_keys(keys, soft);
        super::share(self.peers, || crate::peers::Invalidation::Keys {
            list: keys.to_string(),
            soft,
        });
        i64::try_from(purged).unwrap_or(i64::MAX)
    }

    fn purge_hash(&self, soft: bool) -> i64 {
        let Some(key) = &self.key else { return 0 };
        let purged = if soft {
            self.cache.soft_purge(key)
        } else {
            let variants = self.cache.store.variants(key).len();
            self.cache.purge(key);
            variants
        };
        tracing::info!(target: "edgecache::vcl", xid = self.xid, soft, objects = purged, "purge of the request's key");
        super::share(self.peers, || crate::peers::Invalidation::Hash {
            key: key.as_bytes().to_vec(),
            soft,
        });
        i64::try_from(purged).unwrap_or(i64::MAX)
    }

    fn healthy(&self, backend: BackendId) -> bool {
        self.version
            .backends
            .get(backend.index())
            .is_none_or(crate::backend::Backend::healthy)
    }

    fn healthy_for(&self, backend: BackendId) -> Option<f64> {
        self.version
            .backends
            .get(backend.index())
            .and_then(crate::backend::Backend::healthy_for)
    }

    fn req_body(&self) -> Option<&[u8]> {
        self.req.extensions.get::<CachedBody>().map(|body| &body.0[..])
    }

    fn port(&self, var: Var) -> i64 {
        match var {
            Var::ClientIp => i64::from(self.client.port()),
            _ => connection_port(&self.req.extensions, var),
        }
    }

    fn file_exists(&self, path: &str) -> bool {
        file_exists(path)
    }

    fn rollback(&mut self, scope: policy_lang::Scope) {
        if scope != policy_lang::Scope::Req {
            return;
        }
        self.before_change();
        if let Some(received) = self.req.extensions.get::<Received>().cloned() {
            received.restore(&mut self.req);
        }
        if self.resp.is_some() {
            self.resp = self.resp_as_set_up.as_deref().cloned();
        }
    }

    fn connection(&self, value: ConnectionValue) -> Value<'_> {
        let connection = ClientSide::of(&self.req.extensions).map(|side| &side.connection);
        let answer = match value.vmod() {
            "tls" => connection
                .and_then(|connection| connection.tls.as_ref())
                .and_then(|tls| tls.value(value)),
            _ => connection
                .and_then(|connection| connection.proxied.as_ref())
                .and_then(|proxied| proxied.value(value)),
        };
        answer.unwrap_or_else(|| value.absent())
    }

    fn builtin_recv(&mut self) -> Option<Option<policy_lang::Action>> {
        self.before_change();
        let action = self.builtin_vcl_recv();
        Some((action != policy_lang::Action::Lookup).then_some(action))
    }

    fn run_plugin(&mut self, plugin: PluginId, phase: PluginPhase) -> PluginOutcome {
        // A call answered from the run before a pause replaces the request (and response)
        // with what the plugin left, which the plugins' write records do not cover.
        if self.plugins.replaying() {
            self.before_change();
        }
        let client = Some(self.client);
        match (phase, self.resp.as_mut()) {
            (PluginPhase::Response, Some(resp)) => self.plugins.response(
                &self.version,
                plugin,
                &mut self.req,
                client,
                &mut resp.status,
                &mut resp.headers,
            ),
            _ => self.plugins.request(&self.version, plugin, &mut self.req, client),
        }
    }
}

/// Backend-side state: the origin request and, in `vcl_backend_response`, the response and
/// the storage decisions the policy may change.
pub(super) struct BackendSession<'a> {
    pub bereq: &'a mut Parts,
    pub beresp: Option<&'a mut http::response::Parts>,
    pub uncacheable: bool,
    /// `beresp.do_esi`: the body is to be parsed for ESI.
    pub do_esi: bool,
    /// `beresp.do_gzip`, `beresp.do_gunzip`: the body is to be compressed or decompressed
    /// before it is stored.
    pub do_gzip: bool,
    pub do_gunzip: bool,
    pub ttl: f64,
    pub grace: f64,
    pub keep: f64,
    pub backend_name: &'a str,
    pub xid: i64,
    /// `vcl_backend_error`'s page.
    pub synthetic: Option<String>,
    /// `bereq.retries`: how often the fetch was sent again.
    pub retries: i64,
    /// `bereq.backend`: the policy's choice (a backend or a director), in `vcl_backend_fetch`.
    pub backend: Option<BackendId>,
    /// The version, for `std.healthy(...)` and plugins (set where a sub may use them).
    pub version: Option<&'a crate::version::Version>,
    /// Plugins `vcl_backend_response` runs (none unless the fetch sets them).
    pub plugins: PluginCalls,
    /// `std.rollback(bereq)` ran: in `vcl_backend_response` the response is let go, as Varnish
    /// closes its connection (see [`super::attempts::Attempts::after_rollback`]).
    pub rolled_back: bool,
    /// What `cookie.*` and `var.*` keep from `vcl_backend_fetch` to `vcl_backend_response` /
    /// `vcl_backend_error`: the backend task, kept by the fetch's attempts across retries.
    task: &'a mut Task,
    /// The request's trace, when someone listens (`GET /log`), and the `return` deciding the
    /// sub being run (see `trace::call`).
    pub trace: Option<Trace>,
    pub returned: Option<Span>,
    /// The storage rules the builtin `vcl_backend_response` runs natively with (set where a
    /// response may be stored); without them `builtin.vcl`'s text is interpreted.
    pub store_rules: Option<super::beresp::StoreRules>,
}

impl<'a> BackendSession<'a> {
    /// `task`: the fetch's backend task, which its attempts keep.
    pub fn new(
        bereq: &'a mut Parts,
        backend_name: &'a str,
        uncacheable: bool,
        task: &'a mut Task,
    ) -> BackendSession<'a> {
        let xid = ClientSide::xid_of(&bereq.extensions).unwrap_or_else(next_xid);
        let trace = bereq.extensions.get().cloned();
        BackendSession {
            bereq,
            beresp: None,
            uncacheable,
            do_esi: false,
            do_gzip: false,
            do_gunzip: false,
            ttl: 0.0,
            grace: 0.0,
            keep: 0.0,
            backend_name,
            xid,
            synthetic: None,
            retries: 0,
            backend: None,
            version: None,
            plugins: PluginCalls::default(),
            rolled_back: false,
            task,
            trace,
            returned: None,
            store_rules: None,
        }
    }
}

impl BackendSession<'_> {
    /// The fields a backend-side sub reads and changes as `scope` (`beresp` once there is a
    /// response).
    fn headers(&self, scope: Scope) -> Option<&HeaderMap> {
        match scope {
            Scope::Bereq => Some(&self.bereq.headers),
            Scope::Beresp => Some(&self.beresp.as_deref()?.headers),
            _ => None,
        }
    }

    fn headers_mut(&mut self, scope: Scope) -> Option<&mut HeaderMap> {
        match scope {
            Scope::Bereq => Some(&mut self.bereq.headers),
            Scope::Beresp => Some(&mut self.beresp.as_deref_mut()?.headers),
            _ => None,
        }
    }

    /// `beresp.backend`: the policy's backend that answered (the member a director chose).
    fn answering_backend(&self) -> Value<'_> {
        let position = self
            .version
            .and_then(|version| version.policy.as_ref())
            .and_then(|program| {
                program
                    .backends()
                    .iter()
                    .position(|b| b.name == self.backend_name)
            });
        position.map_or(Value::Unset, |i| Value::Backend(Some(BackendId::new(i as u32))))
    }
}

impl Context for BackendSession<'_> {
    fn returned(&mut self, at: Span) {
        self.returned = Some(at);
    }

    fn builtin_backend_response(&mut self) -> Option<Option<policy_lang::Action>> {
        let rules = self.store_rules.as_ref()?;
        let beresp = self.beresp.as_deref()?;
        let verdict = super::beresp::vcl_backend_response(
            beresp,
            &self.bereq.headers,
            self.uncacheable,
            self.ttl,
            rules,
        );
        Some(match verdict {
            super::beresp::Verdict::FallThrough => None,
            super::beresp::Verdict::Deliver => Some(policy_lang::Action::Deliver),
            super::beresp::Verdict::HitForMiss => {
                self.ttl = super::beresp::HIT_FOR_MISS_TTL;
                self.uncacheable = true;
                Some(policy_lang::Action::Deliver)
            }
        })
    }

    fn get(&self, var: Var) -> Value<'_> {
        let beresp = self.beresp.as_deref();
        match var {
            Var::BereqUrl => Value::str(self.bereq.uri.path_and_query().map_or("/", |pq| pq.as_str())),
            Var::BereqMethod => Value::str(self.bereq.method.as_str()),
            Var::BereqProto => Value::str(proto(self.bereq.version)),
            Var::BereqUncacheable => Value::Bool(self.uncacheable),
            Var::BereqXid => Value::Int(self.xid),
            Var::BereqIsBgfetch => Value::Bool(self.bereq.extensions.get::<BackgroundFetch>().is_some()),
            Var::ClientIp | Var::ServerIp | Var::RemoteIp | Var::LocalIp => {
                connection_address(&self.bereq.extensions, var)
            }
            Var::ServerHostname | Var::ServerIdentity => Value::str(host_name()),
            Var::BerespBackend => self.answering_backend(),
            Var::BereqRetries => Value::Int(self.retries),
            Var::BereqBackend => Value::Backend(self.backend),
            Var::BerespStatus => beresp.map_or(Value::Unset, |r| Value::Int(i64::from(r.status.as_u16()))),
            Var::BerespReason => beresp.map_or(Value::Unset, |r| {
                Value::str(r.status.canonical_reason().unwrap_or(""))
            }),
            Var::BerespProto => beresp.map_or(Value::Unset, |r| Value::str(proto(r.version))),
            Var::BerespTtl => Value::Duration(self.ttl),
            Var::BerespGrace => Value::Duration(self.grace),
            Var::BerespKeep => Value::Duration(self.keep),
            Var::BerespUncacheable => Value::Bool(self.uncacheable),
            Var::BerespDoEsi => Value::Bool(self.do_esi),
            Var::BerespDoGzip => Value::Bool(self.do_gzip),
            Var::BerespDoGunzip => Value::Bool(self.do_gunzip),
            Var::BerespBackendName => Value::str(self.backend_name),
            Var::BerespWas304 => Value::Bool(false),
            _ => Value::Unset,
        }
    }

    fn set(&mut self, var: Var, value: Value<'static>) {
        match var {
            Var::BereqUrl => set_url(&mut self.bereq.uri, &value),
            Var::BereqMethod => set_method(&mut self.bereq.method, &value),
            Var::BereqBackend => {
                if let Value::Backend(backend) = value {
                    self.backend = backend;
                }
            }
            Var::BerespTtl => self.ttl = seconds(&value).unwrap_or(self.ttl),
            Var::BerespGrace => self.grace = seconds(&value).unwrap_or(self.grace),
            Var::BerespKeep => self.keep = seconds(&value).unwrap_or(self.keep),
            // Varnish refuses to make an uncacheable response cacheable again; so do we.
            Var::BerespUncacheable => self.uncacheable |= value.truthy(),
            Var::BerespDoEsi => self.do_esi = value.truthy(),
            Var::BerespDoGzip => self.do_gzip = value.truthy(),
            Var::BerespDoGunzip => self.do_gunzip = value.truthy(),
            Var::BerespStatus => {
                if let (Some(beresp), Value::Int(code)) = (self.beresp.as_deref_mut(), &value) {
                    if let Ok(status) = u16::try_from(*code)
                        .map_err(drop)
                        .and_then(|c| StatusCode::from_u16(c).map_err(drop))
                    {
                        beresp.status = status;
                    }
                }
            }
            _ => tracing::debug!(
                variable = var.name(),
                "the runtime does not track this variable yet"
            ),
        }
    }

    header_methods!();

    fn task(&self) -> Option<&Task> {
        Some(self.task)
    }

    fn task_mut(&mut self) -> Option<&mut Task> {
        Some(self.task)
    }

    fn hash_data(&mut self, _data: &str) {}

    fn synthetic(&mut self, body: String) {
        self.synthetic = Some(body);
    }

    fn ban(&mut self, _ban: BanExpr) {}

    fn port(&self, var: Var) -> i64 {
        connection_port(&self.bereq.extensions, var)
    }

    fn file_exists(&self, path: &str) -> bool {
        file_exists(path)
    }

    fn rollback(&mut self, scope: Scope) {
        if scope == Scope::Bereq {
            BereqAsBuilt::restore(self.bereq);
            self.rolled_back = true;
        }
    }

    fn log(&mut self, msg: &str) {
        tracing::info!(target: "edgecache::vcl", xid = self.xid, "{msg}");
    }

    fn healthy(&self, backend: BackendId) -> bool {
        self.version
            .and_then(|version| version.backends.get(backend.index()))
            .is_none_or(crate::backend::Backend::healthy)
    }

    fn run_plugin(&mut self, plugin: PluginId, phase: PluginPhase) -> PluginOutcome {
        let Some(version) = self.version else {
            return PluginOutcome::Continue;
        };
        match (phase, self.beresp.as_deref_mut()) {
            (PluginPhase::Response, Some(beresp)) => self.plugins.response(
                version,
                plugin,
                self.bereq,
                None,
                &mut beresp.status,
                &mut beresp.headers,
            ),
            _ => self.plugins.request(version, plugin, self.bereq, None),
        }
    }
}
