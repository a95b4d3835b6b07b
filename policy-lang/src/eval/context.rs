//! The seam between a compiled [`Program`](crate::Program) and the runtime.
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

use super::value::{BackendId, PluginId, Value};
use super::ConnectionValue;
use crate::ban::BanExpr;

/// Which message a header belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The client request (`req.http.*`), client-side subs.
    Req,
    /// The backend request (`bereq.http.*`), backend subs.
    Bereq,
    /// The backend response (`beresp.http.*`), `vcl_backend_response` / `vcl_backend_error`.
    Beresp,
    /// The response to the client (`resp.http.*`), `vcl_deliver` / `vcl_synth`.
    Resp,
    /// The cached object (`obj.http.*`), `vcl_hit` (read-only).
    Obj,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Req => "req",
            Scope::Bereq => "bereq",
            Scope::Beresp => "beresp",
            Scope::Resp => "resp",
            Scope::Obj => "obj",
        }
    }
}

macro_rules! vars {
    ($( $(#[$m:meta])* $var:ident = $name:literal : $ty:ident ),* $(,)?) => {
        /// A scalar VCL variable, resolved at compile time.
        ///
        /// The doc of each variant gives its VCL name and value type.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Var {
            $( $(#[$m])* #[doc = concat!("`", $name, "` (", stringify!($ty), ")")] $var, )*
        }

        impl Var {
            /// Every variable, in declaration order.
            pub const ALL: &'static [Var] = &[$(Var::$var),*];

            /// The VCL spelling, e.g. `"beresp.ttl"`.
            pub fn name(self) -> &'static str {
                match self { $(Var::$var => $name,)* }
            }

            /// Dense index (declaration order), for slot tables in contexts.
            pub fn index(self) -> usize {
                self as usize
            }

            /// The type of the values `get` returns and `set` receives.
            pub fn value_type(self) -> ValueType {
                match self { $(Var::$var => ValueType::$ty,)* }
            }
        }
    };
}

/// The type of a variable's value (see [`Value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Str,
    Int,
    Real,
    Bool,
    Duration,
    Bytes,
    Time,
    Ip,
    Backend,
    /// A request/response body: only written (`set resp.body = ...` becomes
    /// `synthetic`) or unset (`unset bereq.body`).
    Body,
}

vars! {
    ClientIp = "client.ip": Ip,
    ClientIdentity = "client.identity": Str,
    ServerHostname = "server.hostname": Str,
    ServerIdentity = "server.identity": Str,
    ServerIp = "server.ip": Ip,
    RemoteIp = "remote.ip": Ip,
    LocalIp = "local.ip": Ip,
    LocalSocket = "local.socket": Str,
    LocalEndpoint = "local.endpoint": Str,
    Now = "now": Time,

    ReqBackendHint = "req.backend_hint": Backend,
    ReqCanGzip = "req.can_gzip": Bool,
    ReqEsiLevel = "req.esi_level": Int,
    ReqGrace = "req.grace": Duration,
    ReqHashAlwaysMiss = "req.hash_always_miss": Bool,
    ReqHashIgnoreBusy = "req.hash_ignore_busy": Bool,
    ReqIsHitmiss = "req.is_hitmiss": Bool,
    ReqIsHitpass = "req.is_hitpass": Bool,
    ReqMethod = "req.method": Str,
    ReqProto = "req.proto": Str,
    ReqRestarts = "req.restarts": Int,
    ReqTtl = "req.ttl": Duration,
    ReqUrl = "req.url": Str,
    ReqXid = "req.xid": Int,

    BereqBackend = "bereq.backend": Backend,
    BereqBody = "bereq.body": Body,
    BereqBetweenBytesTimeout = "bereq.between_bytes_timeout": Duration,
    BereqConnectTimeout = "bereq.connect_timeout": Duration,
    BereqFirstByteTimeout = "bereq.first_byte_timeout": Duration,
    BereqIsBgfetch = "bereq.is_bgfetch": Bool,
    BereqMethod = "bereq.method": Str,
    BereqProto = "bereq.proto": Str,
    BereqRetries = "bereq.retries": Int,
    BereqUncacheable = "bereq.uncacheable": Bool,
    BereqUrl = "bereq.url": Str,
    BereqXid = "bereq.xid": Int,

    BerespAge = "beresp.age": Duration,
    BerespBackend = "beresp.backend": Backend,
    BerespBackendName = "beresp.backend.name": Str,
    BerespBody = "beresp.body": Body,
    BerespDoEsi = "beresp.do_esi": Bool,
    BerespDoGunzip = "beresp.do_gunzip": Bool,
    BerespDoGzip = "beresp.do_gzip": Bool,
    BerespDoStream = "beresp.do_stream": Bool,
    BerespGrace = "beresp.grace": Duration,
    BerespKeep = "beresp.keep": Duration,
    BerespProto = "beresp.proto": Str,
    BerespReason = "beresp.reason": Str,
    BerespStatus = "beresp.status": Int,
    BerespTtl = "beresp.ttl": Duration,
    BerespUncacheable = "beresp.uncacheable": Bool,
    BerespWas304 = "beresp.was_304": Bool,

    ObjAge = "obj.age": Duration,
    ObjCanEsi = "obj.can_esi": Bool,
    ObjGrace = "obj.grace": Duration,
    ObjHits = "obj.hits": Int,
    ObjKeep = "obj.keep": Duration,
    ObjProto = "obj.proto": Str,
    ObjReason = "obj.reason": Str,
    ObjStatus = "obj.status": Int,
    ObjTtl = "obj.ttl": Duration,
    ObjUncacheable = "obj.uncacheable": Bool,

    RespBody = "resp.body": Body,
    RespProto = "resp.proto": Str,
    RespReason = "resp.reason": Str,
    RespStatus = "resp.status": Int,
}

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

    /// `hash_data(...)` in `vcl_hash`: feed the cache key.
    fn hash_data(&mut self, data: &str);

    /// `synthetic(...)` / `set resp.body` / `set beresp.body`: replace the body.
    fn synthetic(&mut self, body: String);

    /// `ban(...)` / `std.ban(...)` with a successfully parsed expression.
    fn ban(&mut self, ban: BanExpr);

    /// `std.log(...)` and evaluator warnings (e.g. a ban that did not parse).
    fn log(&mut self, msg: &str);

    /// `std.healthy(backend)` and directors skipping sick backends. Only
    /// called with declared backends, never with a director.
    fn healthy(&self, backend: BackendId) -> bool {
        let _ = backend;
        true
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
    fn builtin_recv(&mut self) -> Option<Option<crate::Action>> {
        None
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

/// Which part of a plugin [`Context::run_plugin`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginPhase {
    /// `plugin.request(NAME);` in `vcl_recv`: the request headers callback
    /// (`proxy_on_request_headers`), before the cache lookup.
    Request,
    /// `plugin.response(NAME);` in `vcl_backend_response` (the edits are
    /// stored with the object) or `vcl_deliver` (the edits apply to hits
    /// too): the response headers callback (`proxy_on_response_headers`).
    Response,
}

impl PluginPhase {
    /// `"request"` or `"response"`, as in `plugin.request(...)`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginPhase::Request => "request",
            PluginPhase::Response => "response",
        }
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
}
