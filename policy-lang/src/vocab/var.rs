//! Variables ([`Var`]), their types ([`ValueType`]), header scopes ([`Scope`]), plugin phases.

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
    /// The client's request when `req` is an ESI include (`req_top.http.*`, read-only);
    /// without ESI it is `req`.
    ReqTop,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Req => "req",
            Scope::Bereq => "bereq",
            Scope::Beresp => "beresp",
            Scope::Resp => "resp",
            Scope::Obj => "obj",
            Scope::ReqTop => "req_top",
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

/// The type of a variable's value (see [`Value`](crate::Value)).
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
    ReqEsi = "req.esi": Bool,
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

    ReqTopMethod = "req_top.method": Str,
    ReqTopProto = "req_top.proto": Str,
    ReqTopUrl = "req_top.url": Str,

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
    RespDoEsi = "resp.do_esi": Bool,
    RespProto = "resp.proto": Str,
    RespReason = "resp.reason": Str,
    RespStatus = "resp.status": Int,
}

/// Which part of a plugin [`Context::run_plugin`](crate::Context::run_plugin) runs.
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
