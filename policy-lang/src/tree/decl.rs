//! The declarations of a checked policy: backends (with probes and TLS), ACLs, directors, plugins.

use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::diagnostics::Span;
use crate::vocab::hash::member_seed;
use crate::vocab::BackendId;

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
    /// `.ssl = 1;`: TLS to the origin, with the other `.ssl_*` attributes.
    pub tls: Option<BackendTls>,
    /// `.proxy_header = 1|2;`: the PROXY protocol version whose header starts each new
    /// connection to the origin.
    pub proxy_header: Option<u8>,
    /// `backend NAME none;`: a placeholder that always fails.
    pub none: bool,
}

/// How a backend with `.ssl = 1;` talks TLS (Varnish Enterprise's attribute names).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendTls {
    /// `.ssl_sni` (default 1): send the server name (`.host_header`, else `.host`).
    pub sni: bool,
    /// `.ssl_verify_peer` (default 1): the certificate must chain to a trusted root.
    pub verify_peer: bool,
    /// `.ssl_verify_host` (default 1, Varnish Enterprise's is 0): the certificate must name
    /// the server name.
    pub verify_host: bool,
    /// `.ssl_ca = "FILE"`: trust these roots instead of the system's.
    pub ca: Option<CaFile>,
}

/// `.ssl_ca = "FILE"`: PEM certificates, read by the runtime when the policy loads.
#[derive(Debug, Clone, PartialEq)]
pub struct CaFile {
    /// Resolved against the declaring file, as plugin paths are.
    pub path: String,
    /// `FILE:LINE` of the attribute, for errors about the file.
    pub declared_at: String,
    pub(crate) span: Span,
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

/// A `plugin NAME { ... }` declaration: a WebAssembly (proxy-wasm) module
/// the policy runs with `plugin.request(NAME);` / `plugin.response(NAME);`.
/// The crate only declares and calls plugins; loading and running them is
/// the runtime's job (through [`Context::run_plugin`](crate::Context::run_plugin)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDecl {
    pub name: String,
    /// `.path`, resolved relative to the file that declares the plugin:
    /// `join(parent(declaring file's canonical name), .path)` (an absolute
    /// `.path` stays as written). Not checked for existence here.
    pub path: String,
    /// `.config`: the plugin configuration bytes handed to
    /// `proxy_on_configure` (`""` when not given).
    pub config: String,
    /// `.on_error` (default [`OnError::Deny`]).
    pub on_error: OnError,
    /// `.isolation` (default [`PluginIsolation::Shared`]).
    pub isolation: PluginIsolation,
    /// `.root_id`: the plugin's root context id (Envoy's `root_id`, property
    /// `plugin_root_id`; the AssemblyScript SDK picks its root context by it).
    /// `""` when not given.
    pub root_id: String,
    /// `.vm_id`: the plugin's VM id (Envoy's `vm_config.vm_id`, property `plugin_vm_id`): the
    /// namespace of the shared queues it registers, which other plugins resolve by it.
    /// `""` when not given.
    pub vm_id: String,
    /// `.vm_config`: the VM configuration bytes handed to `proxy_on_vm_start`
    /// (`""` when not given).
    pub vm_config: String,
    /// `.upstreams = "CLUSTER=BACKEND ...";`: the cluster names the plugin may
    /// pass to `proxy_http_call` / `proxy_grpc_call`, each with the backend
    /// or director it goes to, in the order written.
    pub upstreams: Vec<(String, String)>,
    /// `.max_body`: the most body bytes the runtime buffers for the plugin's
    /// body callbacks (`None`: the runtime's default).
    pub max_body: Option<u64>,
}

/// What a request gets when its plugin traps, times out or runs out of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnError {
    /// `.on_error = deny;` (default): fail closed. The runtime reports
    /// [`PluginOutcome::Failed`](crate::PluginOutcome::Failed) and the sub
    /// ends with a 503.
    #[default]
    Deny,
    /// `.on_error = continue;`: fail open. The runtime reports
    /// [`PluginOutcome::Continue`](crate::PluginOutcome::Continue) and the
    /// request goes on as if the plugin had not run.
    Continue,
}

impl OnError {
    /// The VCL spelling: `"deny"` or `"continue"`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Deny => "deny",
            OnError::Continue => "continue",
        }
    }
}

/// How plugin instances are shared between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PluginIsolation {
    /// `.isolation = shared;` (default): long-lived instances (one per
    /// worker), each serving many requests, as proxy-wasm hosts do.
    #[default]
    Shared,
    /// `.isolation = per_request;`: a fresh instance for every request, for
    /// plugins that must not share state between requests.
    PerRequest,
}

impl PluginIsolation {
    /// The VCL spelling: `"shared"` or `"per_request"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginIsolation::Shared => "shared",
            PluginIsolation::PerRequest => "per_request",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct AclRule {
    pub negated: bool,
    pub addr: IpAddr,
    pub prefix: u8,
}

/// An ACL entry naming a host: resolved into [`AclRule`]s when the policy loads.
#[derive(Debug, Clone)]
pub(crate) struct AclName {
    pub negated: bool,
    /// Parenthesised: ignored (with a warning) when it does not resolve.
    pub optional: bool,
    pub name: String,
    pub span: Span,
    pub mask: Option<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Acl {
    #[allow(dead_code)] // for Debug output
    pub name: String,
    pub rules: Vec<AclRule>,
    /// Host names still to resolve; empty once loaded.
    pub names: Vec<AclName>,
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

/// The `directors` vmod objects edgecache provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectorKind {
    RoundRobin,
    Fallback,
    Random,
    Hash,
    LeastConnections,
    Shard,
}

impl DirectorKind {
    /// Every kind, with its constructor as written in VCL.
    pub const ALL: &'static [(&'static str, DirectorKind)] = &[
        ("directors.round_robin", DirectorKind::RoundRobin),
        ("directors.fallback", DirectorKind::Fallback),
        ("directors.random", DirectorKind::Random),
        ("directors.hash", DirectorKind::Hash),
        ("directors.least_connections", DirectorKind::LeastConnections),
        ("directors.shard", DirectorKind::Shard),
    ];

    pub fn from_constructor(name: &str) -> Option<DirectorKind> {
        DirectorKind::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
    }

    /// Whether `add_backend` takes a weight (`add_backend(b, 2.0)`).
    pub fn weighted(self) -> bool {
        matches!(
            self,
            DirectorKind::Random | DirectorKind::Hash | DirectorKind::LeastConnections
        )
    }
}

/// One `d.add_backend(b[, weight])`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    pub backend: BackendId,
    /// 1.0 unless given; members with weight <= 0 are never picked.
    pub weight: f64,
    /// The `hash` director's per-member seed, from the backend's name (so a
    /// member keeps its keys when others are added or removed).
    pub seed: u64,
}

/// A `new NAME = directors.KIND();` object. Picking a member happens at run
/// time in `eval/director.rs`.
#[derive(Debug)]
pub(crate) struct Director {
    pub name: String,
    pub kind: DirectorKind,
    pub members: Vec<Member>,
    /// Round-robin position (round_robin) / tie-break rotation (least_connections).
    pub next: AtomicUsize,
    /// The ring of a `shard` director (its `members` are the ring's, for health).
    pub shard: Option<Box<super::shard::Shard>>,
}

impl Director {
    pub fn new(name: String, kind: DirectorKind) -> Director {
        Director {
            name,
            kind,
            members: Vec::new(),
            next: AtomicUsize::new(0),
            shard: (kind == DirectorKind::Shard).then(Box::default),
        }
    }

    /// Adds `backend` (named `name`) with `weight`.
    pub fn add(&mut self, backend: BackendId, name: &str, weight: f64) {
        // The same backend added twice gets a second, distinct seed.
        let dup = self.members.iter().filter(|m| m.backend == backend).count() as u64;
        self.members.push(Member {
            backend,
            weight,
            seed: member_seed(name, dup),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            names: Vec::new(),
        };
        assert!(acl.matches("10.9.9.9".parse().unwrap()));
        assert!(!acl.matches("10.1.2.3".parse().unwrap()));
        assert!(!acl.matches("11.0.0.1".parse().unwrap()));
        assert!(acl.matches("::ffff:10.0.0.1".parse().unwrap()));
    }
}
