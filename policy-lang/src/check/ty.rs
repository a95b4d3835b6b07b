//! The types the checker gives expressions and function parameters: VCL's, plus a poison type.
//!
//! The poison type (`Ty::Err`) marks an expression already reported, so one mistake does not
//! cascade.

use crate::vocab::ValueType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Str,
    Int,
    Real,
    Duration,
    Bytes,
    Time,
    Bool,
    Ip,
    Backend,
    Acl,
    Probe,
    /// Bytes (`blob.decode`), carried as lowercase hex digits.
    Blob,
    /// What a VOID function returns: nothing to use as a value.
    Void,
    /// A parameter taking a regex: a string literal, compiled when the policy loads.
    Regex,
    /// A parameter taking a header itself (`req.http.Cookie`), not its value.
    Header,
    /// A parameter taking one of these bare words (`BASE64`, `HEX`, ...).
    Enum(&'static [&'static str]),
    /// Poison: an error was already reported.
    Err,
}

impl Ty {
    pub fn name(self) -> &'static str {
        match self {
            Ty::Str => "STRING",
            Ty::Int => "INT",
            Ty::Real => "REAL",
            Ty::Duration => "DURATION",
            Ty::Bytes => "BYTES",
            Ty::Time => "TIME",
            Ty::Bool => "BOOL",
            Ty::Ip => "IP",
            Ty::Backend => "BACKEND",
            Ty::Acl => "ACL",
            Ty::Probe => "PROBE",
            Ty::Blob => "BLOB",
            Ty::Void => "VOID",
            Ty::Regex => "REGEX",
            Ty::Header => "HEADER",
            Ty::Enum(_) => "ENUM",
            Ty::Err => "?",
        }
    }

    pub(super) fn of(v: ValueType) -> Ty {
        match v {
            ValueType::Str => Ty::Str,
            ValueType::Int => Ty::Int,
            ValueType::Real => Ty::Real,
            ValueType::Bool => Ty::Bool,
            ValueType::Duration => Ty::Duration,
            ValueType::Bytes => Ty::Bytes,
            ValueType::Time => Ty::Time,
            ValueType::Ip => Ty::Ip,
            ValueType::Backend => Ty::Backend,
            ValueType::Body => Ty::Str,
        }
    }

    pub(super) fn stringifiable(self) -> bool {
        !matches!(
            self,
            Ty::Acl | Ty::Probe | Ty::Blob | Ty::Void | Ty::Regex | Ty::Header | Ty::Enum(_)
        )
    }
}
