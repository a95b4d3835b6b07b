//! The per-sub variable table: each variable's type and where it may be read, written, unset.
//!
//! As in Varnish 7.x `vcl_var.rst`, core subset.

use crate::vocab::sub::mask::*;
use crate::vocab::{Scope, ValueType, Var};

/// Where a variable may be used.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    pub read: u16,
    pub write: u16,
    pub unset: u16,
}

const fn acc(read: u16, write: u16, unset: u16) -> Access {
    Access { read, write, unset }
}

pub(crate) fn var_access(v: Var) -> Access {
    use Var::*;
    const BERESP: u16 = BE_RESPONSE | BE_ERROR;
    const RESP: u16 = DELIVER | SYNTH;
    const OBJ: u16 = HIT | DELIVER;
    match v {
        ClientIp | ServerIp | RemoteIp | LocalIp => acc(CLIENT | BACKEND, NONE, NONE),
        ClientIdentity => acc(CLIENT | BACKEND, CLIENT, NONE),
        LocalSocket | LocalEndpoint => acc(CLIENT, NONE, NONE),
        ServerHostname | ServerIdentity | Now => acc(ALL, NONE, NONE),

        ReqBackendHint | ReqHashAlwaysMiss | ReqHashIgnoreBusy | ReqMethod | ReqUrl => {
            acc(CLIENT, CLIENT, NONE)
        }
        ReqGrace | ReqTtl => acc(CLIENT, CLIENT, CLIENT),
        ReqEsi => acc(CLIENT, CLIENT, NONE),
        ReqTopMethod | ReqTopProto | ReqTopUrl => acc(CLIENT, NONE, NONE),
        ReqCanGzip | ReqEsiLevel | ReqIsHitmiss | ReqIsHitpass | ReqProto | ReqRestarts | ReqXid => {
            acc(CLIENT, NONE, NONE)
        }

        BereqBackend => acc(BACKEND, BACKEND, NONE),
        // `vcl_pipe` edits the request that opens the tunnel.
        BereqMethod | BereqUrl => acc(BACKEND | PIPE, BACKEND | PIPE, NONE),
        BereqBody => acc(NONE, NONE, BE_FETCH),
        BereqBetweenBytesTimeout | BereqConnectTimeout | BereqFirstByteTimeout => {
            acc(BACKEND, BACKEND, BACKEND)
        }
        BereqIsBgfetch | BereqProto | BereqRetries | BereqUncacheable | BereqXid => acc(BACKEND, NONE, NONE),

        BerespAge | BerespBackend | BerespBackendName | BerespProto | BerespWas304 => acc(BERESP, NONE, NONE),
        BerespBody => acc(NONE, BE_ERROR, NONE),
        BerespDoEsi | BerespDoGunzip | BerespDoGzip | BerespDoStream | BerespGrace | BerespKeep
        | BerespReason | BerespStatus | BerespTtl | BerespUncacheable => acc(BERESP, BERESP, NONE),

        ObjAge | ObjCanEsi | ObjGrace | ObjHits | ObjKeep | ObjTtl => acc(OBJ, NONE, NONE),
        ObjProto | ObjReason | ObjStatus => acc(HIT, NONE, NONE),
        ObjUncacheable => acc(DELIVER, NONE, NONE),

        RespBody => acc(NONE, SYNTH, NONE),
        RespDoEsi => acc(RESP, RESP, NONE),
        RespProto => acc(RESP, NONE, NONE),
        RespReason | RespStatus => acc(RESP, RESP, NONE),
    }
}

pub(crate) fn header_access(scope: Scope, name: &str) -> Access {
    let protected =
        name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding");
    let all = match scope {
        Scope::Req => CLIENT,
        Scope::Bereq => BACKEND | PIPE,
        Scope::Beresp => BE_RESPONSE | BE_ERROR,
        Scope::Resp => DELIVER | SYNTH,
        Scope::Obj => return acc(HIT, NONE, NONE),
        Scope::ReqTop => return acc(CLIENT, NONE, NONE),
    };
    if protected {
        acc(all, NONE, NONE)
    } else {
        acc(all, all, all)
    }
}

/// A resolved variable reference.
#[derive(Debug, Clone)]
pub(crate) enum VarRef {
    Var(Var),
    Header(Scope, String),
}

impl VarRef {
    pub fn access(&self) -> Access {
        match self {
            VarRef::Var(v) => var_access(*v),
            VarRef::Header(s, n) => header_access(*s, n),
        }
    }

    pub fn value_type(&self) -> ValueType {
        match self {
            VarRef::Var(v) => v.value_type(),
            VarRef::Header(..) => ValueType::Str,
        }
    }
}

/// Resolves `req.url`, `req.http.X-Foo`, ... Header names keep their spelling.
pub(crate) fn resolve(name: &str) -> Option<VarRef> {
    for (prefix, scope) in [
        ("req.http.", Scope::Req),
        ("req_top.http.", Scope::ReqTop),
        ("bereq.http.", Scope::Bereq),
        ("beresp.http.", Scope::Beresp),
        ("resp.http.", Scope::Resp),
        ("obj.http.", Scope::Obj),
    ] {
        if let Some(h) = name.strip_prefix(prefix) {
            if h.is_empty() || h.contains('.') {
                return None;
            }
            return Some(VarRef::Header(scope, h.to_string()));
        }
    }
    Var::ALL
        .iter()
        .copied()
        .find(|v| v.name() == name)
        .map(VarRef::Var)
}

/// Names a did-you-mean may suggest for an unknown variable.
pub(crate) fn candidates() -> impl Iterator<Item = &'static str> {
    Var::ALL.iter().map(|v| v.name()).chain([
        "req.http.",
        "bereq.http.",
        "beresp.http.",
        "resp.http.",
        "obj.http.",
        "req_top.http.",
    ])
}

/// Variables from Varnish that edgecache does not provide, with a note.
pub(crate) fn known_unsupported(name: &str) -> Option<&'static str> {
    let n = name;
    Some(match n {
        "req.request" => "`req.request` is Varnish 3; use `req.method`",
        "beresp.storage_hint" | "beresp.storage" | "req.storage" => {
            "storage selection is not supported by edgecache (one in-memory store)"
        }
        "obj.lastuse" => "`obj.lastuse` is Varnish 3",
        "req.backend" => "`req.backend` is Varnish 3; use `req.backend_hint`",
        "req.grace.ttl" => "not a VCL variable",
        _ if n.starts_with("sess.") => "`sess.*` timeouts are not supported by edgecache",
        _ if n.starts_with("storage.") => "`storage.*` is not supported by edgecache",
        _ if n.ends_with(".filters") => "filters are not supported by edgecache",
        _ if n == "server.health" => {
            "`server.health` does not exist in Varnish 4+; use `std.healthy(req.backend_hint)`"
        }
        _ => return None,
    })
}
