//! Signatures of the built-in functions (`regsub`, `std.*`, `directors.*`, `proxy.*`, `tls.*`).

use super::ty::Ty;
use crate::tree::Func;
use crate::vocab::ConnectionValue;

/// The vmods edgecache provides natively.
pub(crate) const VMODS: &[&str] = &["std", "directors", "proxy", "tls"];

pub(crate) struct Param {
    pub name: &'static str,
    pub ty: Ty,
    pub optional: bool,
}

const fn p(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        optional: false,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        optional: true,
    }
}

pub(crate) struct Sig {
    pub name: &'static str,
    pub func: Func,
    pub params: &'static [Param],
    pub ret: Ty,
}

pub(crate) const VALUE_FUNCS: &[Sig] = &[
    Sig {
        name: "std.tolower",
        func: Func::ToLower,
        params: &[p("s", Ty::Str)],
        ret: Ty::Str,
    },
    Sig {
        name: "std.toupper",
        func: Func::ToUpper,
        params: &[p("s", Ty::Str)],
        ret: Ty::Str,
    },
    Sig {
        name: "std.integer",
        func: Func::Integer,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Int)],
        ret: Ty::Int,
    },
    Sig {
        name: "std.real",
        func: Func::Real,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Real)],
        ret: Ty::Real,
    },
    Sig {
        name: "std.duration",
        func: Func::Duration,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Duration)],
        ret: Ty::Duration,
    },
    Sig {
        name: "std.bytes",
        func: Func::Bytes,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Bytes)],
        ret: Ty::Bytes,
    },
    Sig {
        name: "std.ip",
        func: Func::Ip,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Ip), opt("resolve", Ty::Bool)],
        ret: Ty::Ip,
    },
    Sig {
        name: "std.time",
        func: Func::Time,
        params: &[p("s", Ty::Str), opt("fallback", Ty::Time)],
        ret: Ty::Time,
    },
    Sig {
        name: "std.healthy",
        func: Func::Healthy,
        params: &[p("be", Ty::Backend)],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.querysort",
        func: Func::Querysort,
        params: &[p("s", Ty::Str)],
        ret: Ty::Str,
    },
    Sig {
        name: "std.strstr",
        func: Func::Strstr,
        params: &[p("s1", Ty::Str), p("s2", Ty::Str)],
        ret: Ty::Str,
    },
    Sig {
        name: "std.random",
        func: Func::Random,
        params: &[p("lo", Ty::Real), p("hi", Ty::Real)],
        ret: Ty::Real,
    },
    Sig {
        name: "std.now",
        func: Func::Now,
        params: &[],
        ret: Ty::Time,
    },
    Sig {
        name: "std.round",
        func: Func::Round,
        params: &[p("r", Ty::Real)],
        ret: Ty::Real,
    },
    Sig {
        name: "std.ban",
        func: Func::Ban,
        params: &[p("expression", Ty::Str)],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.fnmatch",
        func: Func::Fnmatch,
        params: &[
            p("pattern", Ty::Str),
            p("subject", Ty::Str),
            opt("pathname", Ty::Bool),
            opt("noescape", Ty::Bool),
            opt("period", Ty::Bool),
        ],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.strftime",
        func: Func::Strftime,
        params: &[p("time", Ty::Time), p("format", Ty::Str)],
        ret: Ty::Str,
    },
    Sig {
        name: "std.real2integer",
        func: Func::Real2Integer,
        params: &[p("r", Ty::Real), p("fallback", Ty::Int)],
        ret: Ty::Int,
    },
    Sig {
        name: "std.real2time",
        func: Func::Real2Time,
        params: &[p("r", Ty::Real), p("fallback", Ty::Time)],
        ret: Ty::Time,
    },
    Sig {
        name: "std.time2integer",
        func: Func::Time2Integer,
        params: &[p("t", Ty::Time), p("fallback", Ty::Int)],
        ret: Ty::Int,
    },
    Sig {
        name: "std.time2real",
        func: Func::Time2Real,
        params: &[p("t", Ty::Time), p("fallback", Ty::Real)],
        ret: Ty::Real,
    },
];

/// Functions only usable as statements.
pub(crate) const STATEMENT_FUNCS: &[&str] = &[
    "hash_data",
    "synthetic",
    "ban",
    "std.log",
    "std.syslog",
    "std.collect",
    "std.timestamp",
];

/// Varnish functions recognised but not provided.
pub(crate) fn unsupported(name: &str) -> Option<&'static str> {
    Some(match name {
        "std.fileread" | "std.blobread" | "std.file_exists" => {
            "edgecache policies do no file I/O; serve error pages from `vcl_synth` with `synthetic({\"...\"})`"
        }
        "std.getenv" => "edgecache policies cannot read the environment",
        "std.cache_req_body" => "request body caching is not supported yet",
        // Returning a constant would silently break the common `std.port(server.ip) != 443`
        // redirect (every request would be redirected, HTTPS ones included).
        "std.port" => {
            "IP values carry no port in edgecache; to tell HTTPS from HTTP, test `tls.is_tls()` \
             (`import tls;`, TLS edgecache terminates), `proxy.is_ssl()` (`import proxy;`, behind \
             a PROXY v2 load balancer) or a header your TLS terminator sets, e.g. \
             `req.http.X-Forwarded-Proto != \"https\"`"
        }
        "std.rollback" | "std.late_100_continue" | "std.set_ip_tos" | "std.syntax"
        | "std.timed_call" | "std.ban_error" => {
            "this std function is not supported by edgecache"
        }
        _ => return None,
    })
}

/// `proxy.*()` and `tls.*()`: functions of no arguments whose value the runtime gives.
pub(crate) fn connection_sig(name: &str) -> Option<Sig> {
    let value = ConnectionValue::ALL.iter().copied().find(|v| v.name() == name)?;
    Some(Sig {
        name: value.name(),
        func: Func::Connection(value),
        params: &[],
        ret: Ty::of(value.value_type()),
    })
}

pub(crate) fn all_names() -> impl Iterator<Item = &'static str> {
    VALUE_FUNCS
        .iter()
        .map(|s| s.name)
        .chain(ConnectionValue::ALL.iter().map(|v| v.name()))
        .chain(STATEMENT_FUNCS.iter().copied())
        .chain(["regsub", "regsuball"])
}
