//! VCL values ([`Value`]) and the ids of backends and plugins.
//!
//! `Value<'a>` borrows strings from the context or the program where it can, so read-only
//! evaluation does not allocate.

use std::borrow::Cow;
use std::fmt::Write;
use std::net::IpAddr;

/// A BACKEND value: a declared backend or a director.
///
/// Ids below `Program::backends().len()` are the backends of
/// [`Program::backends`](crate::Program::backends), in declaration order;
/// the ids after them are the directors (`new NAME = directors.KIND();`),
/// in declaration order. A director value is what `d.backend()` evaluates
/// to: the director itself, resolved to one of its members only when the
/// runtime calls [`Program::resolve_backend`](crate::Program::resolve_backend)
/// at fetch time. For the `hash` director it also carries the hash of the
/// key given to `.backend(key)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId {
    index: u32,
    /// Hash of the `hash` director's key; 0 otherwise.
    key: u64,
}

impl BackendId {
    /// The backend (or, past the backends, the director) at `index`.
    pub const fn new(index: u32) -> BackendId {
        BackendId { index, key: 0 }
    }

    pub(crate) const fn with_key(index: u32, key: u64) -> BackendId {
        BackendId { index, key }
    }

    /// Index into [`Program::backends`](crate::Program::backends) for a
    /// backend; `backends().len() + n` for the `n`th director.
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The hash of the `hash` director's key (0 for anything else).
    pub(crate) fn key(self) -> u64 {
        self.key
    }
}

/// Index of a plugin in [`Program::plugins`](crate::Program::plugins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PluginId(pub u32);

impl PluginId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A VCL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// No value: an absent header, or a variable the runtime does not track.
    /// Reads as `""` in string context and as false in a condition.
    Unset,
    Str(Cow<'a, str>),
    Int(i64),
    Real(f64),
    Bool(bool),
    /// Seconds (may be negative).
    Duration(f64),
    Bytes(u64),
    /// Seconds since the Unix epoch.
    Time(f64),
    Ip(IpAddr),
    /// `None`: no backend.
    Backend(Option<BackendId>),
}

impl<'a> Value<'a> {
    pub fn str(s: &'a str) -> Value<'a> {
        Value::Str(Cow::Borrowed(s))
    }

    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::Unset => Value::Unset,
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Int(i) => Value::Int(i),
            Value::Real(r) => Value::Real(r),
            Value::Bool(b) => Value::Bool(b),
            Value::Duration(d) => Value::Duration(d),
            Value::Bytes(b) => Value::Bytes(b),
            Value::Time(t) => Value::Time(t),
            Value::Ip(ip) => Value::Ip(ip),
            Value::Backend(b) => Value::Backend(b),
        }
    }

    /// VCL truthiness: unset strings, 0, durations <= 0 and "no backend" are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Unset => false,
            Value::Str(_) => true,
            Value::Int(i) => *i != 0,
            Value::Real(r) => *r != 0.0,
            Value::Bool(b) => *b,
            Value::Duration(d) => *d > 0.0,
            Value::Bytes(b) => *b != 0,
            Value::Time(t) => *t != 0.0,
            Value::Ip(_) => true,
            Value::Backend(b) => b.is_some(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Real(r) => Some(*r as i64),
            _ => None,
        }
    }

    pub fn as_real(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Real(r) | Value::Duration(r) | Value::Time(r) => Some(*r),
            Value::Bytes(b) => Some(*b as f64),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Seconds, for `Duration` values.
    pub fn as_duration(&self) -> Option<f64> {
        match self {
            Value::Duration(d) => Some(*d),
            _ => None,
        }
    }

    pub fn as_ip(&self) -> Option<IpAddr> {
        match self {
            Value::Ip(ip) => Some(*ip),
            _ => None,
        }
    }

    pub fn as_backend(&self) -> Option<Option<BackendId>> {
        match self {
            Value::Backend(b) => Some(*b),
            _ => None,
        }
    }
}

/// Appends the VCL string form of `v` (backends need their name, so the
/// caller passes a resolver).
pub(crate) fn write_value<'p>(out: &mut String, v: &Value<'_>, backend_name: &dyn Fn(BackendId) -> &'p str) {
    match v {
        Value::Unset => {}
        Value::Str(s) => out.push_str(s),
        Value::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Value::Real(r) | Value::Duration(r) => {
            let _ = write!(out, "{r:.3}");
        }
        Value::Bytes(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Time(t) => {
            // HTTP dates end with year 9999 (23:59:59 on 31 December): later times print as it.
            const LAST_HTTP_DATE: f64 = 253_402_300_799.0;
            let st = if *t >= 0.0 {
                std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(t.min(LAST_HTTP_DATE))
            } else {
                std::time::UNIX_EPOCH
            };
            out.push_str(&httpdate::fmt_http_date(st));
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Ip(ip) => {
            let _ = write!(out, "{ip}");
        }
        Value::Backend(Some(b)) => out.push_str(backend_name(*b)),
        Value::Backend(None) => {}
    }
}
