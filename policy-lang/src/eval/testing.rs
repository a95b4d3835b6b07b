//! `TestContext`: an in-memory [`Context`] for tests and benches
//! (`feature = "test-util"`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use http::HeaderName;

use super::{BackendId, Context, Scope, Value, Var};
use crate::ban::BanExpr;

/// Records every effect a program has; variables and headers live in maps.
#[derive(Debug, Clone, Default)]
pub struct TestContext {
    pub vars: HashMap<Var, Value<'static>>,
    /// Per scope, in insertion order; a name may repeat (multi-valued header).
    pub headers: HashMap<Scope, Vec<(HeaderName, String)>>,
    pub hash: Vec<String>,
    pub body: Option<String>,
    pub bans: Vec<BanExpr>,
    pub logs: Vec<String>,
    pub unset_vars: Vec<Var>,
    pub sick: Vec<BackendId>,
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
            .var(Var::ReqRestarts, Value::Int(0))
            .var(Var::ReqXid, Value::Int(1))
            .var(Var::ClientIp, Value::Ip(localhost))
            .var(Var::ServerIp, Value::Ip(localhost))
            .header(Scope::Req, "host", "example.com")
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

    pub fn var(mut self, var: Var, value: Value<'static>) -> TestContext {
        self.vars.insert(var, value);
        self
    }

    /// Adds a header value (a second call with the same name adds a value).
    pub fn header(mut self, scope: Scope, name: &str, value: &str) -> TestContext {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("valid header name");
        self.headers
            .entry(scope)
            .or_default()
            .push((name, value.to_string()));
        self
    }

    /// Moves `req.*` to `bereq.*`, the way the runtime builds a backend request.
    pub fn to_backend(mut self) -> TestContext {
        if let Some(h) = self.headers.remove(&Scope::Req) {
            self.headers.insert(Scope::Bereq, h);
        }
        for (from, to) in [(Var::ReqUrl, Var::BereqUrl), (Var::ReqMethod, Var::BereqMethod)] {
            if let Some(v) = self.vars.get(&from).cloned() {
                self.vars.insert(to, v);
            }
        }
        self
    }

    pub fn get_header(&self, scope: Scope, name: &str) -> Option<String> {
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        Context::header(self, scope, &name).map(Cow::into_owned)
    }

    pub fn get_var(&self, var: Var) -> Value<'static> {
        self.vars.get(&var).cloned().unwrap_or(Value::Unset)
    }
}

impl Context for TestContext {
    fn get(&self, var: Var) -> Value<'_> {
        match self.vars.get(&var) {
            Some(Value::Str(s)) => Value::Str(Cow::Borrowed(s.as_ref())),
            Some(v) => v.clone(),
            None => Value::Unset,
        }
    }

    fn set(&mut self, var: Var, value: Value<'static>) {
        self.vars.insert(var, value);
    }

    fn unset(&mut self, var: Var) {
        self.vars.remove(&var);
        self.unset_vars.push(var);
    }

    fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
        let list = self.headers.get(&scope)?;
        let mut found = list.iter().filter(|(n, _)| n == name);
        let first = found.next()?;
        let rest: Vec<&str> = found.map(|(_, v)| v.as_str()).collect();
        if rest.is_empty() {
            Some(Cow::Borrowed(first.1.as_str()))
        } else {
            let mut s = first.1.clone();
            for r in rest {
                s.push_str(", ");
                s.push_str(r);
            }
            Some(Cow::Owned(s))
        }
    }

    fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
        let list = self.headers.entry(scope).or_default();
        list.retain(|(n, _)| n != name);
        list.push((name.clone(), value));
    }

    fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
        if let Some(list) = self.headers.get_mut(&scope) {
            list.retain(|(n, _)| n != name);
        }
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

    fn healthy(&self, backend: BackendId) -> bool {
        !self.sick.contains(&backend)
    }
}
