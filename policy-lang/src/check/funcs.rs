//! Signatures of the built-in functions: `regsub`, `std.*`, `directors.*`, `proxy.*`, `tls.*`,
//! `cookie.*`, `var.*`, `header.*`, `blob.*`, `bodyaccess.*`, `xkey.*`.

use super::ty::Ty;
use crate::tree::{BlobFn, BodyFn, CookieFn, Func, HeaderFn, PurgeFn, UnixFn, VarFn, XkeyFn};
use crate::vocab::{ConnectionValue, ValueType};

/// The vmods edgecache provides natively.
pub(crate) const VMODS: &[&str] = &[
    "std",
    "directors",
    "proxy",
    "tls",
    "cookie",
    "var",
    "header",
    "blob",
    "bodyaccess",
    "purge",
    "h2",
    "unix",
    "xkey",
];

pub(crate) struct Param {
    pub name: &'static str,
    pub ty: Ty,
    pub optional: bool,
    /// A [`Ty::Header`] the function changes (so it must be writable where it is called).
    pub written: bool,
}

const fn p(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        optional: false,
        written: false,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        optional: true,
        written: false,
    }
}

/// A header parameter the function changes.
const fn written(name: &'static str) -> Param {
    Param {
        name,
        ty: Ty::Header,
        optional: false,
        written: true,
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
    Sig {
        name: "std.cache_req_body",
        func: Func::CacheReqBody,
        params: &[p("size", Ty::Bytes)],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.syntax",
        func: Func::Syntax,
        params: &[p("version", Ty::Real)],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.ban_error",
        func: Func::BanError,
        params: &[],
        ret: Ty::Str,
    },
    Sig {
        name: "std.late_100_continue",
        func: Func::Accepted,
        params: &[p("late", Ty::Bool)],
        ret: Ty::Void,
    },
    Sig {
        name: "std.rollback",
        func: Func::Rollback,
        params: &[p("h", Ty::Enum(&["req", "bereq", "resp", "beresp"]))],
        ret: Ty::Void,
    },
    Sig {
        name: "std.file_exists",
        func: Func::FileExists,
        params: &[p("path", Ty::Str)],
        ret: Ty::Bool,
    },
    Sig {
        name: "std.set_ip_tos",
        func: Func::Accepted,
        params: &[p("tos", Ty::Int)],
        ret: Ty::Void,
    },
];

/// `blob`'s encodings, as Varnish's vmod_blob names them (`BASE64CF` aside).
pub(crate) const BLOB_CODECS: &[&str] = &["IDENTITY", "BASE64", "BASE64URL", "BASE64URLNOPAD", "HEX", "URL"];
const BLOB_CASES: &[&str] = &["LOWER", "UPPER", "DEFAULT"];

const fn sig(name: &'static str, func: Func, params: &'static [Param], ret: Ty) -> Sig {
    Sig {
        name,
        func,
        params,
        ret,
    }
}

/// `var.set_*` / `var.get_*` of one type.
macro_rules! typed_vars {
    ($($set:literal, $get:literal: $vt:ident, $ty:ident;)*) => {
        &[$(
            sig($set, Func::Var(VarFn::Set(ValueType::$vt)), &[p("key", Ty::Str), p("value", Ty::$ty)], Ty::Void),
            sig($get, Func::Var(VarFn::Get(ValueType::$vt)), &[p("key", Ty::Str)], Ty::$ty),
        )*]
    };
}

/// The functions of the vmods beyond `std` that edgecache provides natively.
#[rustfmt::skip]
pub(crate) const VMOD_FUNCS: &[&[Sig]] = &[
    &[
        sig("cookie.clean", Func::Cookie(CookieFn::Clean), &[], Ty::Void),
        sig("cookie.delete", Func::Cookie(CookieFn::Delete), &[p("cookiename", Ty::Str)], Ty::Void),
        sig("cookie.filter", Func::Cookie(CookieFn::Filter), &[p("filterstring", Ty::Str)], Ty::Void),
        sig("cookie.filter_re", Func::Cookie(CookieFn::FilterRe), &[p("expression", Ty::Regex)], Ty::Void),
        sig("cookie.keep", Func::Cookie(CookieFn::Keep), &[p("filterstring", Ty::Str)], Ty::Void),
        sig("cookie.keep_re", Func::Cookie(CookieFn::KeepRe), &[p("expression", Ty::Regex)], Ty::Void),
        sig("cookie.format_date", Func::Cookie(CookieFn::FormatDate), &[p("now", Ty::Time), p("timedelta", Ty::Duration)], Ty::Str),
        sig("cookie.format_rfc1123", Func::Cookie(CookieFn::FormatDate), &[p("now", Ty::Time), p("timedelta", Ty::Duration)], Ty::Str),
        sig("cookie.get", Func::Cookie(CookieFn::Get), &[p("cookiename", Ty::Str)], Ty::Str),
        sig("cookie.get_re", Func::Cookie(CookieFn::GetRe), &[p("expression", Ty::Regex)], Ty::Str),
        sig("cookie.get_string", Func::Cookie(CookieFn::GetString), &[], Ty::Str),
        sig("cookie.isset", Func::Cookie(CookieFn::Isset), &[p("cookiename", Ty::Str)], Ty::Bool),
        sig("cookie.parse", Func::Cookie(CookieFn::Parse), &[p("cookieheader", Ty::Str)], Ty::Void),
        sig("cookie.set", Func::Cookie(CookieFn::Set), &[p("cookiename", Ty::Str), p("value", Ty::Str)], Ty::Void),
    ],
    typed_vars! {
        "var.set", "var.get": Str, Str;
        "var.set_string", "var.get_string": Str, Str;
        "var.set_int", "var.get_int": Int, Int;
        "var.set_real", "var.get_real": Real, Real;
        "var.set_duration", "var.get_duration": Duration, Duration;
        "var.set_ip", "var.get_ip": Ip, Ip;
        "var.set_backend", "var.get_backend": Backend, Backend;
    },
    &[
        sig("var.global_set", Func::Var(VarFn::GlobalSet), &[p("key", Ty::Str), p("value", Ty::Str)], Ty::Void),
        sig("var.global_get", Func::Var(VarFn::GlobalGet), &[p("key", Ty::Str)], Ty::Str),
        sig("var.clear", Func::Var(VarFn::Clear), &[], Ty::Void),
    ],
    &[
        sig("header.append", Func::Header(HeaderFn::Append), &[written("header"), p("value", Ty::Str)], Ty::Void),
        sig("header.copy", Func::Header(HeaderFn::Copy), &[p("src", Ty::Header), written("dst")], Ty::Void),
        sig("header.get", Func::Header(HeaderFn::Get), &[p("header", Ty::Header), p("regex", Ty::Regex)], Ty::Str),
        sig("header.remove", Func::Header(HeaderFn::Remove), &[written("header"), p("regex", Ty::Regex)], Ty::Void),
    ],
    &[
        sig("blob.decode", Func::Blob(BlobFn::Decode), &[opt("decoding", Ty::Enum(BLOB_CODECS)), opt("length", Ty::Int), p("encoded", Ty::Str)], Ty::Blob),
        sig("blob.encode", Func::Blob(BlobFn::Encode), &[opt("encoding", Ty::Enum(BLOB_CODECS)), opt("case", Ty::Enum(BLOB_CASES)), p("blob", Ty::Blob)], Ty::Str),
        sig("blob.transcode", Func::Blob(BlobFn::Transcode), &[opt("decoding", Ty::Enum(BLOB_CODECS)), opt("encoding", Ty::Enum(BLOB_CODECS)), opt("case", Ty::Enum(BLOB_CASES)), opt("length", Ty::Int), p("encoded", Ty::Str)], Ty::Str),
    ],
    &[
        sig("purge.hard", Func::Purge(PurgeFn::Hard), &[], Ty::Int),
        sig("purge.soft", Func::Purge(PurgeFn::Soft), &[opt("ttl", Ty::Duration), opt("grace", Ty::Duration), opt("keep", Ty::Duration)], Ty::Int),
        sig("h2.is", Func::H2Is, &[], Ty::Bool),
        sig("unix.user", Func::Unix(UnixFn::User), &[], Ty::Str),
        sig("unix.group", Func::Unix(UnixFn::Group), &[], Ty::Str),
        sig("unix.uid", Func::Unix(UnixFn::Uid), &[], Ty::Int),
        sig("unix.gid", Func::Unix(UnixFn::Gid), &[], Ty::Int),
    ],
    &[
        sig("bodyaccess.hash_req_body", Func::Bodyaccess(BodyFn::Hash), &[], Ty::Void),
        sig("bodyaccess.len_req_body", Func::Bodyaccess(BodyFn::Len), &[], Ty::Int),
        sig("bodyaccess.rematch_req_body", Func::Bodyaccess(BodyFn::Rematch), &[p("re", Ty::Regex)], Ty::Int),
        sig("bodyaccess.log_req_body", Func::Bodyaccess(BodyFn::Log), &[opt("prefix", Ty::Str), opt("length", Ty::Int)], Ty::Void),
    ],
    &[
        sig("xkey.purge", Func::Xkey(XkeyFn::Purge), &[p("keys", Ty::Str)], Ty::Int),
        sig("xkey.softpurge", Func::Xkey(XkeyFn::Softpurge), &[p("keys", Ty::Str)], Ty::Int),
    ],
];

/// The signature of a value or VOID function of `std` or another native vmod.
pub(crate) fn sig_of(name: &str) -> Option<&'static Sig> {
    VALUE_FUNCS
        .iter()
        .chain(VMOD_FUNCS.iter().copied().flatten())
        .find(|s| s.name == name)
}

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
        "std.fileread" | "std.getenv" | "std.blobread" => {
            "give it a string literal: it is read when the policy loads"
        }
        // Per-session changes of the HTTP/2 rapid-reset budget: edgecache's budget is per
        // connection and set for all of them.
        "h2.rapid_reset" | "h2.rapid_reset_limit" | "h2.rapid_reset_period" | "h2.rapid_reset_budget" => {
            "edgecache caps rapid resets for every HTTP/2 connection alike: set \
             `--h2-rapid-reset-limit` and `--h2-rapid-reset-period` instead"
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
        .chain(VMOD_FUNCS.iter().copied().flatten())
        .map(|s| s.name)
        .chain(ConnectionValue::ALL.iter().map(|v| v.name()))
        .chain(STATEMENT_FUNCS.iter().copied())
        .chain(["regsub", "regsuball", "std.port", "std.timed_call"])
}
