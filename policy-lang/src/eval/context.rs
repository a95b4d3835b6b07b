//! The seam between a compiled [`Program`](crate::Program) and the runtime: [`Context`].
//!
//! The runtime implements [`Context`] for its per-request state (much like
//! cel-rust's `VariableResolver`), and the evaluator reaches request data only
//! through it. Names were resolved at compile time: a variable arrives as a
//! [`Var`] slot and a header name as a pre-parsed [`HeaderName`], so no
//! string lookups happen per request.
//!
//! Contract for implementors:
//! * [`Context::get`] is only called with variables readable in the sub being
//!   run (the checker guarantees it); return [`Value::Unset`] for anything
//!   the runtime does not track.
//! * [`Context::set`] receives a value of the variable's type (see
//!   [`Var::value_type`]): `Str` for strings, `Int`, `Duration` (seconds),
//!   `Bool`, `Backend`.
//! * [`Context::header`] returns the header's value; when the header has
//!   several values, join them with `", "` as Varnish does (the `Cow` lets a
//!   single value be returned borrowed, with no allocation).
//!   [`Context::set_header`] replaces every value of the header;
//!   [`Context::unset_header`] removes them all.
//! * Side effects ([`Context::hash_data`], [`Context::synthetic`],
//!   [`Context::ban`], [`Context::log`], [`Context::run_plugin`]) are called
//!   in program order.

use std::borrow::Cow;

use http::HeaderName;

use super::vmods::Task;
use crate::ban::BanExpr;
use crate::diagnostics::Span;
use crate::vocab::{Action, BackendId, ConnectionValue, PluginId, PluginPhase, Scope, Value, Var};

/// What a compiled policy needs from the request being processed.
///
/// See the module documentation for the contract.
pub trait Context {
    /// Reads a scalar variable. Return [`Value::Unset`] when not tracked.
    fn get(&self, var: Var) -> Value<'_>;

    /// Writes a scalar variable (only writable variables reach this).
    fn set(&mut self, var: Var, value: Value<'static>);

    /// `unset` of a scalar (`req.grace`, `req.ttl`, `bereq.body`, timeouts).
    fn unset(&mut self, var: Var) {
        let _ = var;
    }

    /// A header's value; several values joined with `", "`.
    fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>>;

    /// Replaces every value of a header.
    fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String);

    /// Removes every value of a header.
    fn unset_header(&mut self, scope: Scope, name: &HeaderName);

    /// Each value of a header, one per header line, in order (`header.get`, `header.remove`,
    /// `header.copy`). The default reads the joined value as one line.
    fn header_values(&self, scope: Scope, name: &HeaderName) -> Vec<Cow<'_, str>> {
        self.header(scope, name).into_iter().collect()
    }

    /// Adds a header line after the header's others (`header.append`, `header.copy`). The
    /// default joins it to the others with `", "`, which is wrong for `Set-Cookie`.
    fn append_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        let joined = match self.header(scope, name) {
            Some(others) => format!("{others}, {value}"),
            None => value,
        };
        self.set_header(scope, name, joined);
    }

    /// Replaces a header's lines by `values`; none removes the header (`header.remove`). The
    /// default joins them with `", "`.
    fn set_header_values(&mut self, scope: Scope, name: &HeaderName, values: Vec<String>) {
        if values.is_empty() {
            self.unset_header(scope, name);
        } else {
            self.set_header(scope, name, values.join(", "));
        }
    }

    /// The task's [`Task`] (`cookie.*`, `var.*`): Varnish's PRIV_TASK, one for the client side
    /// of a request (`vcl_recv` to `vcl_deliver`) and one for its backend side. Return the same
    /// one on every sub of the task. The default has none: those vmods then keep nothing.
    fn task(&self) -> Option<&Task> {
        None
    }

    /// The task's [`Task`], to change (see [`Context::task`]).
    fn task_mut(&mut self) -> Option<&mut Task> {
        None
    }

    /// `hash_data(...)` in `vcl_hash`: feed the cache key.
    fn hash_data(&mut self, data: &str);

    /// `synthetic(...)` / `set resp.body` / `set beresp.body`: replace the body.
    fn synthetic(&mut self, body: String);

    /// `ban(...)` / `std.ban(...)` with a successfully parsed expression.
    fn ban(&mut self, ban: BanExpr);

    /// `std.log(...)` and evaluator warnings (e.g. a ban that did not parse).
    fn log(&mut self, msg: &str);

    /// `xkey.purge(keys)`, or with `soft` `xkey.softpurge(keys)`: purges every stored object
    /// tagged with any of `keys` (separated by commas or blanks), or makes it stale, and
    /// returns how many objects that was. It acts on the shared cache, not on the request, and
    /// it runs where the call stands in an expression (after a `&&` that held), hence `&self`.
    /// By default there is no cache and nothing is purged.
    fn purge_keys(&self, keys: &str, soft: bool) -> i64 {
        let _ = (keys, soft);
        0
    }

    /// `std.healthy(backend)` and directors skipping sick backends. Only
    /// called with declared backends, never with a director.
    fn healthy(&self, backend: BackendId) -> bool {
        let _ = backend;
        true
    }

    /// `std.rollback(req)`: puts the request (method, URL, headers) back as the client sent it
    /// (in `vcl_deliver` and `vcl_synth`, `resp` too, as it was when the sub began), when
    /// [`Program::rolls_back`] says so. `std.rollback(bereq)` ([`Scope::Bereq`], backend subs,
    /// when [`Program::rolls_back_bereq`] says so): the backend request as it was built, before
    /// `vcl_backend_fetch`; in `vcl_backend_response` it also lets the response go, so the fetch
    /// fails unless the sub returns `retry`, as in Varnish. The evaluator has already cleared
    /// the task ([`Context::task_mut`]), as Varnish ends and begins the task.
    ///
    /// [`Program::rolls_back`]: crate::Program::rolls_back
    /// [`Program::rolls_back_bereq`]: crate::Program::rolls_back_bereq
    fn rollback(&mut self, scope: Scope) {
        let _ = scope;
    }

    /// `purge.hard()` (removes) / `purge.soft()` (makes stale: served in grace while one fetch
    /// refreshes it) of every variant of the request's cache key, in `vcl_hit` / `vcl_miss`.
    /// Returns how many objects that was. It acts on the shared cache at once, hence `&self`.
    /// By default there is no cache and nothing is purged.
    fn purge_hash(&self, soft: bool) -> i64 {
        let _ = soft;
        0
    }

    /// `std.port(IP)`: the port of the connection's address `var` (`client.ip`, `server.ip`,
    /// `remote.ip`, `local.ip`). The default, 0, is what Varnish answers for a Unix socket.
    fn port(&self, var: Var) -> i64 {
        let _ = var;
        0
    }

    /// `std.file_exists(path)`: whether `path` (or the file a symbolic link there points to)
    /// exists, asked at each call as Varnish does (a maintenance flag file is the usual use).
    /// The language does no I/O: the default says no.
    fn file_exists(&self, path: &str) -> bool {
        let _ = path;
        false
    }

    /// The request body `std.cache_req_body` buffered (empty when the request has none);
    /// `None` when it is not buffered: larger than [`Program::req_body_limit`], or the policy
    /// does not ask for it. Read by `bodyaccess.*` and `std.cache_req_body`.
    ///
    /// [`Program::req_body_limit`]: crate::Program::req_body_limit
    fn req_body(&self) -> Option<&[u8]> {
        None
    }

    /// Seconds since `backend` (a declared backend) last turned healthy, for the shard
    /// director's rampup; `None` when not known, which counts as long ago.
    fn healthy_for(&self, backend: BackendId) -> Option<f64> {
        let _ = backend;
        None
    }

    /// A `proxy.*` or `tls.*` value of the request's client connection; a value of
    /// [`ConnectionValue::value_type`]. By default the connection has nothing to say.
    fn connection(&self, value: ConnectionValue) -> Value<'_> {
        value.absent()
    }

    /// Requests currently in flight to `backend` (a declared backend, never
    /// a director), for `directors.least_connections()`.
    fn in_flight(&self, backend: BackendId) -> usize {
        let _ = backend;
        0
    }

    /// Uniform random number in `[0, 1)` for `std.random` and the random director.
    fn random(&self) -> f64 {
        0.5
    }

    /// Varnish's `vcl_builtin_recv` (host, method, `Authorization` and `Cookie` checks, as
    /// `builtin.vcl` spells them), run natively by the runtime: `Some(Some(action))` when it
    /// returns, `Some(None)` when it falls through. The default `None` interprets
    /// `builtin.vcl`. Only asked when no user sub extends those subs.
    fn builtin_recv(&mut self) -> Option<Option<Action>> {
        None
    }

    /// Varnish's `vcl_builtin_backend_response` (which responses become hit-for-miss), run
    /// natively by the runtime with the rules it stores by without a policy: `Some(Some(action))`
    /// when it returns, `Some(None)` when it falls through. The default `None` interprets
    /// `builtin.vcl`. Only asked when no user sub extends those subs.
    fn builtin_backend_response(&mut self) -> Option<Option<Action>> {
        None
    }

    /// The `return` written at `at` is deciding the sub being run (varnishlog's `VCL_return`
    /// names it: [`Program::return_site`](crate::Program::return_site)). A sub that ends
    /// without one was decided by the builtin behaviour. The default ignores it.
    fn returned(&mut self, at: Span) {
        let _ = at;
    }

    /// `plugin.request(NAME);` (phase [`PluginPhase::Request`], `vcl_recv`)
    /// and `plugin.response(NAME);` (phase [`PluginPhase::Response`],
    /// `vcl_backend_response` / `vcl_deliver`): run the plugin's phase on the
    /// current request. `plugin` indexes [`Program::plugins`](crate::Program::plugins).
    ///
    /// Headers the plugin sets must be written into the maps that
    /// [`Context::header`] reads, so the statements after the call see them.
    /// The plugin's `.on_error` is the implementor's job: when the plugin
    /// traps, hits its deadline or runs out of memory, return
    /// [`PluginOutcome::Failed`] for [`OnError::Deny`](crate::OnError::Deny)
    /// and [`PluginOutcome::Continue`] for
    /// [`OnError::Continue`](crate::OnError::Continue).
    ///
    /// The default runs nothing and continues, so contexts without a plugin
    /// host keep compiling.
    fn run_plugin(&mut self, plugin: PluginId, phase: PluginPhase) -> PluginOutcome {
        let _ = (plugin, phase);
        PluginOutcome::Continue
    }
}

/// A context lent a task of its own, for one [`Program::run`](crate::Program::run) of a policy
/// that imports `cookie` or `var` on a context that keeps none ([`Context::task`] is `None`).
/// It forwards every other method: a method added to [`Context`] must be forwarded here too.
pub(super) struct OwnTask<'c> {
    ctx: &'c mut dyn Context,
    task: Task,
}

impl<'c> OwnTask<'c> {
    pub(super) fn new(ctx: &'c mut dyn Context) -> OwnTask<'c> {
        OwnTask {
            ctx,
            task: Task::default(),
        }
    }
}

impl Context for OwnTask<'_> {
    fn get(&self, var: Var) -> Value<'_> {
        self.ctx.get(var)
    }
    fn set(&mut self, var: Var, value: Value<'static>) {
        self.ctx.set(var, value);
    }
    fn unset(&mut self, var: Var) {
        self.ctx.unset(var);
    }
    fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
        self.ctx.header(scope, name)
    }
    fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        self.ctx.set_header(scope, name, value);
    }
    fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
        self.ctx.unset_header(scope, name);
    }
    fn header_values(&self, scope: Scope, name: &HeaderName) -> Vec<Cow<'_, str>> {
        self.ctx.header_values(scope, name)
    }
    fn append_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        self.ctx.append_header(scope, name, value);
    }
    fn set_header_values(&mut self, scope: Scope, name: &HeaderName, values: Vec<String>) {
        self.ctx.set_header_values(scope, name, values);
    }
    fn task(&self) -> Option<&Task> {
        Some(&self.task)
    }
    fn task_mut(&mut self) -> Option<&mut Task> {
        Some(&mut self.task)
    }
    fn hash_data(&mut self, data: &str) {
        self.ctx.hash_data(data);
    }
    fn synthetic(&mut self, body: String) {
        self.ctx.synthetic(body);
    }
    fn ban(&mut self, ban: BanExpr) {
        self.ctx.ban(ban);
    }
    fn log(&mut self, msg: &str) {
        self.ctx.log(msg);
    }
    fn purge_keys(&self, keys: &str, soft: bool) -> i64 {
        self.ctx.purge_keys(keys, soft)
    }
    fn healthy(&self, backend: BackendId) -> bool {
        self.ctx.healthy(backend)
    }
    fn healthy_for(&self, backend: BackendId) -> Option<f64> {
        self.ctx.healthy_for(backend)
    }
    fn req_body(&self) -> Option<&[u8]> {
        self.ctx.req_body()
    }
    fn rollback(&mut self, scope: Scope) {
        self.ctx.rollback(scope);
    }
    fn port(&self, var: Var) -> i64 {
        self.ctx.port(var)
    }
    fn purge_hash(&self, soft: bool) -> i64 {
        self.ctx.purge_hash(soft)
    }
    fn file_exists(&self, path: &str) -> bool {
        self.ctx.file_exists(path)
    }
    fn connection(&self, value: ConnectionValue) -> Value<'_> {
        self.ctx.connection(value)
    }
    fn in_flight(&self, backend: BackendId) -> usize {
        self.ctx.in_flight(backend)
    }
    fn random(&self) -> f64 {
        self.ctx.random()
    }
    fn builtin_recv(&mut self) -> Option<Option<Action>> {
        self.ctx.builtin_recv()
    }
    fn builtin_backend_response(&mut self) -> Option<Option<Action>> {
        self.ctx.builtin_backend_response()
    }
    fn returned(&mut self, at: Span) {
        self.ctx.returned(at)
    }
    fn run_plugin(&mut self, plugin: PluginId, phase: PluginPhase) -> PluginOutcome {
        self.ctx.run_plugin(plugin, phase)
    }
}

/// What running a plugin phase ([`Context::run_plugin`]) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginOutcome {
    /// Go on with the next statement (also what a failed plugin with
    /// `.on_error = continue` reports).
    Continue,
    /// The plugin answered the request itself (`proxy_send_local_response`).
    /// The sub ends at once with
    /// [`Action::PluginResponse`](crate::Action::PluginResponse); the runtime
    /// keeps the local response and sends it as is.
    LocalResponse { status: u16 },
    /// The plugin failed and its `.on_error` is `deny`: the sub ends with a
    /// 503 (`Action::Synth` client side, `Action::Error` backend side).
    Failed,
    /// The plugin paused the request: the sub ends at once with
    /// [`Action::PluginPaused`](crate::Action::PluginPaused).
    Paused,
}
