//! Checked declarations + resolved sub bodies -> an immutable, `Send + Sync`
//! [`Program`]. Constant folding happens here (`fold.rs`); the builtin VCL
//! was already merged by `check` (method bodies are concatenated in source
//! order, builtin last, exactly as Varnish appends `builtin.vcl`).

pub(crate) mod fold;
pub(crate) mod ir;

use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::eval::BackendId;
use crate::sub::Sub;

/// A `backend` declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendDecl {
    pub name: String,
    /// Host name or IP (without the port).
    pub host: String,
    /// `.port`, or the port in `.host = "h:p"`, else 80.
    pub port: u16,
    /// `.host_header`: Host sent when the request has none.
    pub host_header: Option<String>,
    pub connect_timeout: Option<Duration>,
    pub first_byte_timeout: Option<Duration>,
    pub between_bytes_timeout: Option<Duration>,
    pub max_connections: Option<u32>,
    pub probe: Option<ProbeDecl>,
    /// `backend NAME none;`: a placeholder that always fails.
    pub none: bool,
}

/// A health probe (`probe NAME { ... }` or inline `.probe = { ... }`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeDecl {
    /// `None` for an inline probe.
    pub name: Option<String>,
    pub url: String,
    /// `.request` lines (CRLF is appended to each); replaces `.url` when set.
    pub request: Option<Vec<String>>,
    pub expected_response: u16,
    pub timeout: Duration,
    pub interval: Duration,
    pub window: u32,
    pub threshold: u32,
    pub initial: u32,
}

impl ProbeDecl {
    pub(crate) fn new(name: Option<String>) -> ProbeDecl {
        ProbeDecl {
            name,
            url: "/".into(),
            request: None,
            expected_response: 200,
            timeout: Duration::from_secs(2),
            interval: Duration::from_secs(5),
            window: 8,
            threshold: 3,
            initial: 2,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct AclRule {
    pub negated: bool,
    pub addr: IpAddr,
    pub prefix: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct Acl {
    #[allow(dead_code)] // for Debug output
    pub name: String,
    pub rules: Vec<AclRule>,
}

impl Acl {
    /// Varnish semantics: the most specific matching entry decides;
    /// a negated entry means "no match".
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let mut best: Option<&AclRule> = None;
        for r in &self.rules {
            if prefix_match(r.addr, r.prefix, ip) && best.is_none_or(|b| r.prefix > b.prefix) {
                best = Some(r);
            }
        }
        best.is_some_and(|r| !r.negated)
    }
}

fn prefix_match(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let p = u32::from(prefix.min(32));
            let m = if p == 0 { 0 } else { u32::MAX << (32 - p) };
            u32::from(n) & m == u32::from(i) & m
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let p = u32::from(prefix.min(128));
            let m = if p == 0 { 0 } else { u128::MAX << (128 - p) };
            u128::from(n) & m == u128::from(i) & m
        }
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectorKind {
    RoundRobin,
    Fallback,
    Random,
    Hash,
}

#[derive(Debug)]
pub(crate) struct Director {
    #[allow(dead_code)] // for Debug output
    pub name: String,
    pub kind: DirectorKind,
    pub backends: Vec<(BackendId, f64)>,
    pub next: AtomicUsize,
}

/// A loaded policy: immutable, `Send + Sync`, cheap to share behind an `Arc`
/// and swap atomically on reload.
#[derive(Debug)]
pub struct Program {
    pub(crate) backends: Vec<BackendDecl>,
    pub(crate) default_backend: Option<BackendId>,
    pub(crate) acls: Vec<Acl>,
    pub(crate) directors: Vec<Director>,
    pub(crate) bodies: Vec<Vec<ir::Stmt>>,
    pub(crate) methods: [Option<usize>; 13],
    pub(crate) user_methods: u16,
    pub(crate) sources: Vec<String>,
    pub(crate) warnings: Option<crate::Diagnostics>,
}

impl Program {
    /// Declared backends; [`BackendId`] indexes this slice.
    pub fn backends(&self) -> &[BackendDecl] {
        &self.backends
    }

    /// The backend named `default`, else the first declared one.
    pub fn default_backend(&self) -> Option<BackendId> {
        self.default_backend
    }

    pub fn backend_id(&self, name: &str) -> Option<BackendId> {
        self.backends
            .iter()
            .position(|b| b.name == name)
            .map(|i| BackendId(i as u32))
    }

    /// Whether the user's policy defines this sub (otherwise only the
    /// builtin behaviour runs).
    pub fn has_sub(&self, sub: Sub) -> bool {
        self.user_methods & sub.bit() != 0
    }

    /// Every file read (entry first, then includes), for the reload watcher.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// Warnings from loading (unused subs, constructs with no effect).
    pub fn warnings(&self) -> Option<&crate::Diagnostics> {
        self.warnings.as_ref()
    }
}

pub(crate) struct Parts {
    pub backends: Vec<BackendDecl>,
    pub default_backend: Option<BackendId>,
    pub acls: Vec<Acl>,
    pub directors: Vec<Director>,
    pub bodies: Vec<Vec<ir::Stmt>>,
    pub methods: [Option<usize>; 13],
    pub user_methods: u16,
}

pub(crate) fn compile(parts: Parts, sources: Vec<String>) -> Program {
    let bodies = parts
        .bodies
        .into_iter()
        .map(|b| b.into_iter().map(fold::stmt).collect())
        .collect();
    Program {
        backends: parts.backends,
        default_backend: parts.default_backend,
        acls: parts.acls,
        directors: parts.directors,
        bodies,
        methods: parts.methods,
        user_methods: parts.user_methods,
        sources,
        warnings: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_is_send_sync() {
        fn assert<T: Send + Sync>() {}
        assert::<Program>();
    }

    #[test]
    fn acl_most_specific_wins() {
        let acl = Acl {
            name: "a".into(),
            rules: vec![
                AclRule {
                    negated: false,
                    addr: "10.0.0.0".parse().unwrap(),
                    prefix: 8,
                },
                AclRule {
                    negated: true,
                    addr: "10.1.2.3".parse().unwrap(),
                    prefix: 32,
                },
            ],
        };
        assert!(acl.matches("10.9.9.9".parse().unwrap()));
        assert!(!acl.matches("10.1.2.3".parse().unwrap()));
        assert!(!acl.matches("11.0.0.1".parse().unwrap()));
        assert!(acl.matches("::ffff:10.0.0.1".parse().unwrap()));
    }
}
