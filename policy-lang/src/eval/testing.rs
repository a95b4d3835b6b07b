//! `TestContext`: an in-memory [`Context`] for tests and benches (`feature = "test-util"`).

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr};

use http::HeaderName;

use super::vmods::Task;
use super::{Context, PluginOutcome};
use crate::ban::BanExpr;
use crate::vocab::{BackendId, PluginId, PluginPhase, Scope, Value, Var};

/// Records every effect a program has. Variables live in a slot per [`Var`];
/// headers in one list (cheap to scan for the handful a test sets).
#[derive(Debug, Clone, Default)]
pub struct TestContext {
    vars: Vec<Value<'static>>,
    /// In insertion order; a name may repeat (multi-valued header).
    pub headers: Vec<(Scope, HeaderName, String)>,
    pub hash: Vec<String>,
    pub body: Option<String>,
    pub bans: Vec<BanExpr>,
    pub logs: Vec<String>,
    pub unset_vars: Vec<Var>,
    /// Backends `healthy` reports as sick (see [`TestContext::set_healthy`]).
    pub sick: Vec<BackendId>,
    /// What `in_flight` reports per backend (0 when absent; see
    /// [`TestContext::set_in_flight`]).
    pub in_flight: Vec<(BackendId, usize)>,
    /// What `random` returns (0.5 when `None`).
    pub random: Option<f64>,
    /// The buffered request body `req_body` reports (`std.cache_req_body`, `bodyaccess.*`).
    pub req_body: Option<Vec<u8>>,
    /// Every `rollback` call, in order.
    pub rollbacks: Vec<Scope>,
    /// What `port` reports per address variable (0 when absent).
    pub ports: Vec<(Var, i64)>,
    /// The paths `file_exists` says exist.
    pub files: Vec<String>,
    /// Every `purge_hash` call (`true`: soft), in order; each reports 1 object.
    pub purges: std::cell::RefCell<Vec<bool>>,
    /// Every `run_plugin` call, in order.
    pub plugin_calls: Vec<(PluginId, PluginPhase)>,
    /// Scripted plugins: what `run_plugin` does for a `(plugin, phase)`
    /// (see [`TestContext::plugin`]). Unscripted calls return `Continue`.
    pub plugin_script: Vec<PluginScript>,
    /// The vmods' state (`cookie.*`, `var.*`), kept across subs as a runtime keeps it.
    task: Task,
}

/// What a scripted plugin phase does in a [`TestContext`]: set headers, then
/// report `outcome`.
#[derive(Debug, Clone)]
pub struct PluginScript {
    pub plugin: PluginId,
    pub phase: PluginPhase,
    pub outcome: PluginOutcome,
    /// Headers the plugin "sets" before returning (replacing earlier values).
    pub set_headers: Vec<(Scope, HeaderName, String)>,
}

impl TestContext {
    pub fn new() -> TestContext {
        TestContext::default()
    }

    /// A client request `METHOD URL HTTP/1.1` with `Host: example.com`
    /// from 127.0.0.1 (xid 1, no restarts).
    pub fn request(method: &str, url: &str) -> TestContext {
        let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
        TestContext::new()
            .var(Var::ReqMethod, Value::Str(Cow::Owned(method.into())))
            .var(Var::ReqUrl, Value::Str(Cow::Owned(url.into())))
            .var(Var::ReqProto, Value::Str(Cow::Borrowed("HTTP/1.1")))
            .var(Var::ReqEsiLevel, Value::Int(0))
            .var(Var::ReqEsi, Value::Bool(true))
            .var(Var::ReqTopMethod, Value::Str(Cow::Owned(method.into())))
            .var(Var::ReqTopUrl, Value::Str(Cow::Owned(url.into())))
            .var(Var::ReqTopProto, Value::Str(Cow::Borrowed("HTTP/1.1")))
            .var(Var::ReqRestarts, Value::Int(0))
            .var(Var::ReqXid, Value::Int(1))
            .var(Var::ClientIp, Value::Ip(localhost))
            .var(Var::ServerIp, Value::Ip(localhost))
            .header(Scope::Req, "host", "example.com")
            .header(Scope::ReqTop, "host", "example.com")
    }

    /// A backend response with `status`, as `vcl_backend_response` sees it
    /// (`beresp.ttl` = `ttl` seconds, as computed from the headers).
    pub fn backend_response(status: i64, ttl: f64) -> TestContext {
        TestContext::new()
            .var(Var::BereqMethod, Value::Str(Cow::Borrowed("GET")))
            .var(Var::BereqUrl, Value::Str(Cow::Borrowed("/")))
            .var(Var::BereqUncacheable, Value::Bool(false))
            .var(Var::BereqXid, Value::Int(2))
            .var(Var::BerespStatus, Value::Int(status))
            .var(Var::BerespReason, Value::Str(Cow::Borrowed("OK")))
            .var(Var::BerespTtl, Value::Duration(ttl))
            .var(Var::BerespGrace, Value::Duration(10.0))
            .var(Var::BerespKeep, Value::Duration(0.0))
            .var(Var::BerespUncacheable, Value::Bool(false))
    }

    /// Scripts `run_plugin(plugin, phase)` to return `outcome` (every time
    /// it is called; a later script for the same pair replaces this one).
    pub fn plugin(mut self, plugin: PluginId, phase: PluginPhase, outcome: PluginOutcome) -> TestContext {
        match self.script_mut(plugin, phase) {
            Some(s) => s.outcome = outcome,
            None => self.plugin_script.push(PluginScript {
                plugin,
                phase,
                outcome,
                set_headers: Vec::new(),
            }),
        }
        self
    }

    /// Scripts `run_plugin(plugin, phase)` to set a header (as a proxy-wasm
    /// plugin writing into the header map would); the outcome stays what
    /// [`TestContext::plugin`] set, `Continue` by default.
    pub fn plugin_sets_header(
        mut self,
        plugin: PluginId,
        phase: PluginPhase,
        scope: Scope,
        name: &str,
        value: &str,
    ) -> TestContext {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("valid header name");
        if self.script_mut(plugin, phase).is_none() {
            self = self.plugin(plugin, phase, PluginOutcome::Continue);
        }
        if let Some(s) = self.script_mut(plugin, phase) {
            s.set_headers.push((scope, name, value.to_string()));
        }
        self
    }

    fn script_mut(&mut self, plugin: PluginId, phase: PluginPhase) -> Option<&mut PluginScript> {
        self.plugin_script
            .iter_mut()
            .find(|s| s.plugin == plugin && s.phase == phase)
    }

    pub fn var(mut self, var: Var, value: Value<'static>) -> TestContext {
        self.put(var, value);
        self
    }

    fn put(&mut self, var: Var, value: Value<'static>) {
        let i = var.index();
        if self.vars.len() <= i {
            self.vars.resize(Var::ALL.len(), Value::Unset);
        }
        self.vars[i] = value;
    }

    /// Every variable that has a value, in declaration order.
    pub fn vars(&self) -> impl Iterator<Item = (Var, &Value<'static>)> {
        Var::ALL
            .iter()
            .zip(&self.vars)
            .filter(|(_, v)| **v != Value::Unset)
            .map(|(k, v)| (*k, v))
    }

    /// Drops every header of `scope`.
    pub fn clear_headers(&mut self, scope: Scope) {
        self.headers.retain(|(s, _, _)| *s != scope);
    }

    /// Adds a header value (a second call with the same name adds a value).
    pub fn header(mut self, scope: Scope, name: &str, value: &str) -> TestContext {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("valid header name");
        self.headers.push((scope, name, value.to_string()));
        self
    }

    /// Moves `req.*` to `bereq.*`, the way the runtime builds a backend request.
    pub fn to_backend(mut self) -> TestContext {
        for h in &mut self.headers {
            if h.0 == Scope::Req {
                h.0 = Scope::Bereq;
            }
        }
        for (from, to) in [(Var::ReqUrl, Var::BereqUrl), (Var::ReqMethod, Var::BereqMethod)] {
            let v = self.get_var(from);
            self.put(to, v);
        }
        self
    }

    /// Marks `backend` healthy or sick (what [`Context::healthy`] reports).
    pub fn set_healthy(&mut self, backend: BackendId, healthy: bool) {
        self.sick.retain(|b| *b != backend);
        if !healthy {
            self.sick.push(backend);
        }
    }

    /// Sets what [`Context::in_flight`] reports for `backend`.
    pub fn set_in_flight(&mut self, backend: BackendId, n: usize) {
        match self.in_flight.iter_mut().find(|(b, _)| *b == backend) {
            Some(e) => e.1 = n,
            None => self.in_flight.push((backend, n)),
        }
    }

    pub fn get_header(&self, scope: Scope, name: &str) -> Option<String> {
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        Context::header(self, scope, &name).map(Cow::into_owned)
    }

    pub fn get_var(&self, var: Var) -> Value<'static> {
        self.vars.get(var.index()).cloned().unwrap_or(Value::Unset)
    }
}

impl Context for TestContext {
    fn get(&self, var: Var) -> Value<'_> {
        match self.vars.get(var.index()) {
            Some(Value::Str(s)) => Value::Str(Cow::Borrowed(s.as_ref())),
            Some(v) => v.clone(),
            None => Value::Unset,
        }
    }

    fn set(&mut self, var: Var, value: Value<'static>) {
        self.put(var, value);
    }

    fn unset(&mut self, var: Var) {
        self.put(var, Value::Unset);
        self.unset_vars.push(var);
    }

    fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
        let mut found = self.headers.iter().filter(|(s, n, _)| *s == scope && n == name);
        let first = found.next()?;
        match found.next() {
            None => Some(Cow::Borrowed(first.2.as_str())),
            Some(second) => {
                let mut s = format!("{}, {}", first.2, second.2);
                for (_, _, v) in found {
                    s.push_str(", ");
                    s.push_str(v);
                }
                Some(Cow::Owned(s))
            }
        }
    }

    fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        self.unset_header(scope, name);
        self.headers.push((scope, name.clone(), value));
    }

    fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
        self.headers.retain(|(s, n, _)| !(*s == scope && n == name));
    }

    fn header_values(&self, scope: Scope, name: &HeaderName) -> Vec<Cow<'_, str>> {
        self.headers
            .iter()
            .filter(|(s, n, _)| *s == scope && n == name)
            .map(|(_, _, v)| Cow::Borrowed(v.as_str()))
            .collect()
    }

    fn append_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        self.headers.push((scope, name.clone(), value));
    }

    fn set_header_values(&mut self, scope: Scope, name: &HeaderName, values: Vec<String>) {
        self.unset_header(scope, name);
        self.headers
            .extend(values.into_iter().map(|v| (scope, name.clone(), v)));
    }

    fn task(&self) -> Option<&Task> {
        Some(&self.task)
    }

    fn task_mut(&mut self) -> Option<&mut Task> {
        Some(&mut self.task)
    }

    fn hash_data(&mut self, data: &str) {
        self.hash.push(data.to_string());
    }

    fn synthetic(&mut self, body: String) {
        self.body = Some(body);
    }

    fn ban(&mut self, ban: BanExpr) {
        self.bans.push(ban);
    }

    fn log(&mut self, msg: &str) {
        self.logs.push(msg.to_string());
    }

    fn req_body(&self) -> Option<&[u8]> {
        self.req_body.as_deref()
    }

    fn rollback(&mut self, scope: Scope) {
        self.rollbacks.push(scope);
    }

    fn port(&self, var: Var) -> i64 {
        self.ports
            .iter()
            .find(|(v, _)| *v == var)
            .map_or(0, |(_, port)| *port)
    }

    fn purge_hash(&self, soft: bool) -> i64 {
        self.purges.borrow_mut().push(soft);
        1
    }

    fn file_exists(&self, path: &str) -> bool {
        self.files.iter().any(|f| f == path)
    }

    fn healthy(&self, backend: BackendId) -> bool {
        !self.sick.contains(&backend)
    }

    fn in_flight(&self, backend: BackendId) -> usize {
        self.in_flight
            .iter()
            .find(|(b, _)| *b == backend)
            .map_or(0, |(_, n)| *n)
    }

    fn random(&self) -> f64 {
        self.random.unwrap_or(0.5)
    }

    fn run_plugin(&mut self, plugin: PluginId, phase: PluginPhase) -> PluginOutcome {
        self.plugin_calls.push((plugin, phase));
        let Some(script) = self.script_mut(plugin, phase).cloned() else {
            return PluginOutcome::Continue;
        };
        for (scope, name, value) in script.set_headers {
            self.set_header(scope, &name, value);
        }
        script.outcome
    }
}
