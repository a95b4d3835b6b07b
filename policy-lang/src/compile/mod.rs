//! Checked declarations + resolved sub bodies -> an immutable, `Send + Sync`
//! [`Program`]. Constant folding happens here (`fold.rs`); the builtin VCL
//! was already merged by `check` (method bodies are concatenated in source
//! order, builtin last, exactly as Varnish appends `builtin.vcl`).

pub(crate) mod fold;
pub(crate) mod ir;

use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use crate::eval::{BackendId, PluginId};
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
    pub(crate) span: crate::diagnostics::Span,
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

/// The `directors` vmod objects edgecache provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectorKind {
    RoundRobin,
    Fallback,
    Random,
    Hash,
    LeastConnections,
}

impl DirectorKind {
    /// Every kind, with its constructor as written in VCL.
    pub const ALL: &'static [(&'static str, DirectorKind)] = &[
        ("directors.round_robin", DirectorKind::RoundRobin),
        ("directors.fallback", DirectorKind::Fallback),
        ("directors.random", DirectorKind::Random),
        ("directors.hash", DirectorKind::Hash),
        ("directors.least_connections", DirectorKind::LeastConnections),
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
}

impl Director {
    pub fn new(name: String, kind: DirectorKind) -> Director {
        Director {
            name,
            kind,
            members: Vec::new(),
            next: AtomicUsize::new(0),
        }
    }

    /// Adds `backend` (named `name`) with `weight`.
    pub fn add(&mut self, backend: BackendId, name: &str, weight: f64) {
        // The same backend added twice gets a second, distinct seed.
        let dup = self.members.iter().filter(|m| m.backend == backend).count() as u64;
        self.members.push(Member {
            backend,
            weight,
            seed: crate::eval::member_seed(name, dup),
        });
    }
}

/// A loaded policy: immutable, `Send + Sync`, cheap to share behind an `Arc`
/// and swap atomically on reload.
#[derive(Debug)]
pub struct Program {
    pub(crate) backends: Vec<BackendDecl>,
    pub(crate) default_backend: Option<BackendId>,
    pub(crate) acls: Vec<Acl>,
    pub(crate) directors: Vec<Director>,
    pub(crate) plugins: Vec<PluginDecl>,
    pub(crate) bodies: Vec<Vec<ir::Stmt>>,
    pub(crate) methods: [Option<usize>; Sub::ALL.len()],
    pub(crate) user_methods: u16,
    /// The body of Varnish's `vcl_builtin_recv`, untouched by the user: a `call` of it asks
    /// [`Context::builtin_recv`](crate::Context::builtin_recv) first.
    pub(crate) builtin_recv: Option<usize>,
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

    /// The declared backend called `name` (directors are not looked up).
    pub fn backend_id(&self, name: &str) -> Option<BackendId> {
        self.backends
            .iter()
            .position(|b| b.name == name)
            .map(|i| BackendId::new(i as u32))
    }

    /// The name of a backend or director, for logs, `beresp.backend.name`
    /// and a BACKEND converted to a string (a director value gives the
    /// director's name, as in Varnish). `""` for an id this program did not
    /// produce.
    pub fn backend_name(&self, id: BackendId) -> &str {
        match self.backends.get(id.index()) {
            Some(b) => &b.name,
            None => self.director(id).map_or("", |d| d.name.as_str()),
        }
    }

    /// Whether `id` is a director (a value of `d.backend()`), which
    /// [`Program::resolve_backend`] turns into one of its members.
    pub fn is_director(&self, id: BackendId) -> bool {
        self.director(id).is_some()
    }

    pub(crate) fn director(&self, id: BackendId) -> Option<&Director> {
        let i = id.index().checked_sub(self.backends.len())?;
        self.directors.get(i)
    }

    /// Declared plugins, in declaration order; [`PluginId`] indexes this slice.
    pub fn plugins(&self) -> &[PluginDecl] {
        &self.plugins
    }

    pub fn plugin_id(&self, name: &str) -> Option<PluginId> {
        self.plugins
            .iter()
            .position(|p| p.name == name)
            .map(|i| PluginId(i as u32))
    }

    /// Whether the user's policy takes part in this sub: it defines it, or a sub the builtin
    /// calls from it (`sub vcl_req_cookie { ... }` makes `vcl_recv` the user's). Otherwise
    /// only the builtin behaviour runs, and a runtime may run it natively.
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
    /// `.path` still as written; `finish` resolves it against the file.
    pub plugins: Vec<PluginDecl>,
    /// The file that declares each plugin (parallel to `plugins`).
    pub plugin_files: Vec<crate::diagnostics::FileId>,
    pub bodies: Vec<Vec<ir::Stmt>>,
    pub methods: [Option<usize>; Sub::ALL.len()],
    pub user_methods: u16,
    /// The body of the builtin's `vcl_builtin_recv`, when no user sub extends it.
    pub builtin_recv: Option<usize>,
}

pub(crate) fn compile(parts: Parts, sources: Vec<String>) -> Program {
    let bodies: Vec<Vec<ir::Stmt>> = parts
        .bodies
        .into_iter()
        .map(|b| b.into_iter().map(fold::stmt).collect())
        .collect();
    // Varnish 7's empty `vcl_builtin_*` hooks are called on every request: skip such calls.
    let empty: Vec<bool> = bodies.iter().map(Vec::is_empty).collect();
    let bodies = bodies
        .into_iter()
        .map(|body| fold::without_calls_to_empty(body, &empty))
        .collect();
    Program {
        backends: parts.backends,
        default_backend: parts.default_backend,
        acls: parts.acls,
        directors: parts.directors,
        plugins: parts.plugins,
        bodies,
        methods: parts.methods,
        user_methods: parts.user_methods,
        builtin_recv: parts.builtin_recv,
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

    fn plugins(src: &str) -> Program {
        crate::load_str("conf/policy.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()))
    }

    #[test]
    fn plugin_declarations_compile_with_defaults() {
        let p = plugins(
            r#"vcl 4.1;
            backend default { .host = "127.0.0.1"; }
            plugin auth {
                .path = "plugins/auth.wasm";
                .config = """{"key": "s3cret"}""";
                .on_error = continue;
                .isolation = per_request;
            }
            plugin hdr { .path = "/opt/plugins/hdr.wasm"; }
            plugin parts { .path = "p.wasm"; .config = "a" "b"; }
            sub vcl_recv { plugin.request(auth); }
            sub vcl_deliver { plugin.response(hdr); plugin.response(parts); }
            "#,
        );
        assert_eq!(
            p.plugins(),
            &[
                PluginDecl {
                    name: "auth".into(),
                    path: "conf/plugins/auth.wasm".into(),
                    config: r#"{"key": "s3cret"}"#.into(),
                    on_error: OnError::Continue,
                    isolation: PluginIsolation::PerRequest,
                },
                PluginDecl {
                    name: "hdr".into(),
                    // Absolute paths stay as written.
                    path: "/opt/plugins/hdr.wasm".into(),
                    config: String::new(),
                    on_error: OnError::Deny,
                    isolation: PluginIsolation::Shared,
                },
                PluginDecl {
                    name: "parts".into(),
                    path: "conf/p.wasm".into(),
                    config: "ab".into(),
                    on_error: OnError::Deny,
                    isolation: PluginIsolation::Shared,
                },
            ]
        );
        assert_eq!(p.plugin_id("auth"), Some(PluginId(0)));
        assert_eq!(p.plugin_id("parts"), Some(PluginId(2)));
        assert_eq!(p.plugin_id("default"), None);
        assert!(p.warnings().is_none());
    }

    #[test]
    fn plugin_paths_resolve_against_the_declaring_file() {
        use std::path::Path;
        struct Mem;
        impl crate::SourceLoader for Mem {
            fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
                let name = match from.and_then(|f| Path::new(f).parent()) {
                    Some(d) => d.join(path).display().to_string(),
                    None => path.to_string(),
                };
                let text = match name.as_str() {
                    "/etc/edge/main.vcl" => {
                        "vcl 4.1;\nbackend default { .host = \"h\"; }\ninclude \"lib/auth.vcl\";\n\
                         plugin top { .path = \"top.wasm\"; }\n\
                         sub vcl_deliver { plugin.response(top); }\n"
                    }
                    "/etc/edge/lib/auth.vcl" => {
                        "plugin auth { .path = \"../plugins/auth.wasm\"; }\nsub vcl_recv { plugin.request(auth); }\n"
                    }
                    _ => return Err("not found".into()),
                };
                Ok((name, text.to_string()))
            }
        }
        let p = crate::load("/etc/edge/main.vcl", &Mem).unwrap_or_else(|d| panic!("{}", d.render()));
        let paths: Vec<&str> = p.plugins().iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/etc/edge/lib/../plugins/auth.wasm", "/etc/edge/top.wasm"]
        );
    }

    #[test]
    fn plugin_declaration_errors() {
        let errs = |src: &str| -> String {
            let src = format!("vcl 4.1;\nbackend default {{ .host = \"h\"; }}\n{src}");
            crate::load_str("p.vcl", &src)
                .map(|_| String::new())
                .unwrap_or_else(|d| d.render())
        };
        let r = errs("plugin a { .path = \"\"; }");
        assert!(r.contains("empty `.path`"), "{r}");
        let r = errs("plugin a { .path = \"a.wasm\"; .path = \"b.wasm\"; }");
        assert!(r.contains("`.path` is set more than once"), "{r}");
        let r = errs("plugin a { .path = 42s; }");
        assert!(r.contains("`.path` expects a string"), "{r}");
        let r = errs("plugin a { .path = \"a.wasm\"; .on_error = \"deny\"; }");
        assert!(
            r.contains("expects a bare word") && r.contains("`.on_error = deny;`"),
            "{r}"
        );
        let r = errs("plugin a { .path = \"a.wasm\"; .on_error = allow; }");
        assert!(r.contains("did you mean `continue`?"), "{r}");
        let r = errs("plugin a { .path = \"a.wasm\"; .isolation = per_reqest; }");
        assert!(r.contains("did you mean `per_request`?"), "{r}");
        let r = errs("plugin a { .path = \"a.wasm\"; .config = 3s; }");
        assert!(r.contains("`.config` expects a string"), "{r}");
        // A plugin shares the name space of backends, ACLs and subs.
        let r = errs("plugin default { .path = \"a.wasm\"; }");
        assert!(r.contains("`default` is defined more than once"), "{r}");
    }

    #[test]
    fn plugin_statement_errors() {
        let errs = |body: &str| -> String {
            let src = format!(
                "vcl 4.1;\nbackend default {{ .host = \"h\"; }}\nacl local {{ \"127.0.0.1\"; }}\n\
                 plugin auth {{ .path = \"a.wasm\"; }}\n{body}"
            );
            crate::load_str("p.vcl", &src)
                .map(|_| String::new())
                .unwrap_or_else(|d| d.render())
        };
        let r = errs("sub vcl_recv { plugin.reqest(auth); }");
        assert!(
            r.contains("unknown function `plugin.reqest`") && r.contains("did you mean `plugin.request`?"),
            "{r}"
        );
        let r = errs("sub vcl_recv { plugin.request(); }");
        assert!(r.contains("wrong number of arguments to `plugin.request`"), "{r}");
        let r = errs("sub vcl_recv { plugin.request(auth, auth); }");
        assert!(r.contains("wrong number of arguments"), "{r}");
        let r = errs("sub vcl_recv { plugin.request(\"auth\"); }");
        assert!(r.contains("expects a plugin name"), "{r}");
        let r = errs("sub vcl_recv { plugin.request(local); }");
        assert!(
            r.contains("undefined plugin `local`") && r.contains("`local` is an ACL, not a plugin"),
            "{r}"
        );
        let r = errs("sub vcl_recv { if (plugin.request(auth)) { return (pass); } }");
        assert!(r.contains("`plugin.request` does not return a value"), "{r}");
        let r = errs("sub vcl_recv { set req.http.x = auth; }");
        assert!(r.contains("`auth` is a plugin, not a value"), "{r}");
        let r = errs("sub vcl_backend_fetch { plugin.response(auth); }");
        assert!(
            r.contains("`plugin.response` is not allowed in `vcl_backend_fetch`"),
            "{r}"
        );
        let r = errs("sub vcl_hit { plugin.request(auth); }");
        assert!(r.contains("`plugin.request` is not allowed in `vcl_hit`"), "{r}");
        // `return (plugin_response)` is not a user action.
        let r = errs("sub vcl_recv { return (plugin_response); }");
        assert!(r.contains("unknown return action `plugin_response`"), "{r}");
        // Legal everywhere it is documented to be.
        let ok = "sub vcl_recv { plugin.request(auth); }\n\
                  sub vcl_backend_response { plugin.response(auth); }\n\
                  sub vcl_deliver { plugin.response(auth); }";
        assert_eq!(errs(ok), "");
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
