//! The vmod functions at run time: `std.*`, `proxy.*`, `tls.*` (directors: `director.rs`).

use std::borrow::Cow;
use std::net::IpAddr;

use super::Context;
use crate::compile::Program;
use crate::tree::{Expr, Func, PurgeFn, UnixFn};
use crate::vocab::pattern::find_byte;
use crate::vocab::{Value, Var};

pub(super) fn call<'a>(p: &'a Program, f: Func, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let arg = |i: usize| -> Value<'a> { args.get(i).map(|e| p.eval(e, ctx)).unwrap_or(Value::Unset) };
    let s0 = || -> Cow<'a, str> {
        match arg(0) {
            Value::Str(s) => s,
            _ => Cow::Borrowed(""),
        }
    };
    match f {
        Func::ToLower => {
            let s = s0();
            if s.bytes().any(|b| b.is_ascii_uppercase()) || !s.is_ascii() {
                Value::Str(Cow::Owned(s.to_lowercase()))
            } else {
                Value::Str(s)
            }
        }
        Func::ToUpper => {
            let s = s0();
            if s.bytes().any(|b| b.is_ascii_lowercase()) || !s.is_ascii() {
                Value::Str(Cow::Owned(s.to_uppercase()))
            } else {
                Value::Str(s)
            }
        }
        Func::Integer => match s0().trim().parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => fallback(arg(1), Value::Int(0)),
        },
        Func::Real => match s0().trim().parse::<f64>() {
            Ok(r) if r.is_finite() => Value::Real(r),
            _ => fallback(arg(1), Value::Real(0.0)),
        },
        Func::Duration => match parse_duration(s0().trim()) {
            Some(d) => Value::Duration(d),
            None => fallback(arg(1), Value::Duration(0.0)),
        },
        Func::Bytes => match parse_bytes(s0().trim()) {
            Some(b) => Value::Bytes(b),
            None => fallback(arg(1), Value::Bytes(0)),
        },
        Func::Ip => match s0().trim().parse::<IpAddr>() {
            Ok(ip) => Value::Ip(ip),
            Err(_) => fallback(arg(1), Value::Unset),
        },
        Func::Time => {
            let s = s0();
            let s = s.trim();
            let t = httpdate::parse_http_date(s)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs_f64())
                .or_else(|| s.parse::<f64>().ok().filter(|f| f.is_finite()));
            match t {
                Some(t) => Value::Time(t),
                None => fallback(arg(1), Value::Time(0.0)),
            }
        }
        Func::Healthy => match arg(0) {
            Value::Backend(Some(b)) => Value::Bool(p.healthy(b, ctx)),
            _ => Value::Bool(false),
        },
        Func::Querysort => Value::Str(querysort(s0())),
        Func::Strstr => {
            let (a, b) = (s0(), arg(1));
            let b = b.as_str().unwrap_or("");
            match a.find(b) {
                Some(i) => match a {
                    Cow::Borrowed(s) => Value::Str(Cow::Borrowed(&s[i..])),
                    Cow::Owned(s) => Value::Str(Cow::Owned(s[i..].to_string())),
                },
                None => Value::Unset,
            }
        }
        Func::Random => {
            let lo = arg(0).as_real().unwrap_or(0.0);
            let hi = arg(1).as_real().unwrap_or(1.0);
            Value::Real(lo + (hi - lo) * ctx.random())
        }
        Func::Now => ctx.get(Var::Now),
        Func::Connection(value) => ctx.connection(value),
        Func::Cookie(_)
        | Func::Var(_)
        | Func::Header(_)
        | Func::Blob(_)
        | Func::Bodyaccess(_)
        | Func::Xkey(_) => p.vmod_value(f, args, ctx),
        Func::CacheReqBody => {
            let size = match arg(0) {
                Value::Bytes(n) => n,
                _ => 0,
            };
            Value::Bool(ctx.req_body().is_some_and(|body| body.len() as u64 <= size))
        }
        // edgecache reads VCL 4.0 and 4.1, and runs both as 4.1.
        Func::Syntax => Value::Bool(arg(0).as_real().is_some_and(|v| v <= 4.1 + f64::EPSILON)),
        Func::BanError => Value::Str(Cow::Borrowed(ctx.task().map_or("", |t| t.ban_error.as_str()))),
        Func::Accepted | Func::Rollback | Func::ShardParamSet(_) | Func::ShardParamClear(_) => Value::Unset,
        Func::ShardParamGet(set, field) => p.shard_param_get(set, field, ctx),
        Func::Port(var) => Value::Int(ctx.port(var)),
        Func::Purge(f) => Value::Int(ctx.purge_hash(f == PurgeFn::Soft)),
        Func::H2Is => Value::Bool(ctx.get(Var::ReqProto).as_str() == Some("HTTP/2.0")),
        // edgecache listens on TCP only: as vmod_unix answers off a Unix socket.
        Func::Unix(UnixFn::User | UnixFn::Group) => Value::Unset,
        Func::Unix(UnixFn::Uid | UnixFn::Gid) => Value::Int(-1),
        Func::FileExists => Value::Bool(ctx.file_exists(&s0())),
        Func::TimedCall => {
            let nth = arg(0).as_int().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            let seconds = ctx.task().and_then(|t| t.timed.get(nth.wrapping_sub(1)));
            Value::Duration(seconds.copied().unwrap_or(0.0))
        }
        Func::ShardKey => Value::Int(i64::from(crate::tree::shard::hash32(&[&s0()]))),
        Func::Round => Value::Real(arg(0).as_real().unwrap_or(0.0).round()),
        // Only reachable in value position; the statement form is handled by exec.
        Func::Ban => Value::Bool(crate::ban::parse_ban(&s0()).is_ok()),
        Func::Fnmatch => {
            let flag = |i: usize, default: bool| match arg(i) {
                Value::Bool(b) => b,
                _ => default,
            };
            let flags = super::fnmatch::Flags {
                pathname: flag(2, true),
                noescape: flag(3, false),
                period: flag(4, false),
            };
            let subject = arg(1);
            Value::Bool(super::fnmatch::fnmatch(
                &s0(),
                subject.as_str().unwrap_or(""),
                flags,
            ))
        }
        Func::Strftime => {
            let time = arg(0).as_real().unwrap_or(0.0);
            let format = arg(1);
            Value::Str(Cow::Owned(super::strftime::strftime(
                time,
                format.as_str().unwrap_or(""),
            )))
        }
        Func::Real2Integer | Func::Time2Integer => match arg(0).as_real() {
            Some(r) if r.is_finite() && r.round().abs() <= VCL_INTEGER_MAX => Value::Int(r.round() as i64),
            _ => fallback(arg(1), Value::Int(0)),
        },
        Func::Real2Time => match arg(0).as_real() {
            Some(r) if r.is_finite() => Value::Time(r),
            _ => fallback(arg(1), Value::Time(0.0)),
        },
        Func::Time2Real => match arg(0).as_real() {
            Some(t) if t.is_finite() => Value::Real(t),
            _ => fallback(arg(1), Value::Real(0.0)),
        },
    }
}

/// Varnish's `VRT_INTEGER_MAX`: VCL integers have at most 15 digits.
const VCL_INTEGER_MAX: f64 = 999_999_999_999_999.0;

fn fallback(v: Value<'_>, default: Value<'static>) -> Value<'static> {
    match v {
        Value::Unset => default,
        other => other.into_owned(),
    }
}

pub(crate) fn parse_duration(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let mult = match unit.trim() {
        "ms" => 0.001,
        "s" | "" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 604800.0,
        "y" => 31536000.0,
        _ => return None,
    };
    Some(n * mult).filter(|d| d.is_finite())
}

fn parse_bytes(s: &str) -> Option<u64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let mult = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "KB" | "K" => 1024.0,
        "MB" | "M" => 1048576.0,
        "GB" | "G" => 1073741824.0,
        "TB" | "T" => 1099511627776.0,
        _ => return None,
    };
    Some((n * mult) as u64)
}

/// Sorts query parameters (stable, by the whole `k=v` pair as Varnish does).
fn querysort(url: Cow<'_, str>) -> Cow<'_, str> {
    let Some(q) = find_byte(url.as_bytes(), b'?') else {
        return url;
    };
    let (path, query) = url.split_at(q);
    let query = &query[1..];
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if params.windows(2).all(|w| w[0] <= w[1]) && !query.contains("&&") && !query.ends_with('&') {
        return url;
    }
    params.sort();
    let mut out = String::with_capacity(url.len());
    out.push_str(path);
    if !params.is_empty() {
        out.push('?');
        out.push_str(&params.join("&"));
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn querysort_sorts() {
        assert_eq!(querysort(Cow::Borrowed("/a?b=1&a=2")), "/a?a=2&b=1");
        assert!(matches!(querysort(Cow::Borrowed("/a?a=1&b=2")), Cow::Borrowed(_)));
        assert_eq!(querysort(Cow::Borrowed("/a")), "/a");
        // Past the length where the `?` is looked for with memchr.
        let long = "/wp-content/uploads/2024/05/photo.jpg";
        assert!(matches!(querysort(Cow::Borrowed(long)), Cow::Borrowed(_)));
        assert_eq!(
            querysort(Cow::Owned(format!("{long}?w=300&h=200"))),
            format!("{long}?h=200&w=300")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1.5m"), Some(90.0));
        assert_eq!(parse_duration("10"), Some(10.0));
        assert_eq!(parse_duration("x"), None);
    }
}
