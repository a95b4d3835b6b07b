//! Compiling: the checked tree -> an immutable, `Send + Sync` [`Program`].
//!
//! Constants are folded and calls of empty subs dropped.
//!
//! The builtin VCL was already merged by `check` (method bodies are concatenated in source
//! order, builtin last, exactly as Varnish appends `builtin.vcl`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::diagnostics::{Diagnostics, FileId, SourceMap, Span};
use crate::tree::{fold, Acl, BackendDecl, Checked, Director, PluginDecl, Stmt};
use crate::vocab::{BackendId, PluginId, Sub};

/// A loaded policy: immutable, `Send + Sync`, cheap to share behind an `Arc`
/// and swap atomically on reload.
#[derive(Debug)]
pub struct Program {
    pub(crate) backends: Vec<BackendDecl>,
    pub(crate) default_backend: Option<BackendId>,
    pub(crate) acls: Vec<Acl>,
    pub(crate) directors: Vec<Director>,
    pub(crate) plugins: Vec<PluginDecl>,
    pub(crate) bodies: Vec<Vec<Stmt>>,
    pub(crate) methods: [Option<usize>; Sub::ALL.len()],
    pub(crate) user_methods: u16,
    /// The body of Varnish's `vcl_builtin_recv`, untouched by the user: a `call` of it asks
    /// [`Context::builtin_recv`](crate::Context::builtin_recv) first.
    pub(crate) builtin_recv: Option<usize>,
    /// The body of `vcl_builtin_backend_response`, untouched by the user: a `call` of it asks
    /// [`Context::builtin_backend_response`](crate::Context::builtin_backend_response) first.
    pub(crate) builtin_backend_response: Option<usize>,
    /// Whether `cookie` or `var`, which keep per-task state, is imported.
    pub(crate) task_vmods: bool,
    pub(crate) req_body_limit: Option<u64>,
    pub(crate) rolls_back: bool,
    pub(crate) rolls_back_bereq: bool,
    /// The `directors.shard_param()` sets as `vcl_init` leaves them, by id.
    pub(crate) shard_params: Vec<crate::tree::shard::ShardParams>,
    pub(crate) sources: Vec<String>,
    pub(crate) warnings: Option<Diagnostics>,
    /// The files read and which of them is the builtin VCL, to name a `return`'s line
    /// ([`Program::return_site`]).
    pub(crate) source_map: Option<(Arc<SourceMap>, FileId)>,
    /// `var.global_set` / `var.global_get`: strings every request of this policy shares.
    pub(crate) globals: Mutex<HashMap<String, String>>,
}

impl Program {
    /// The labels its `return (vcl(LABEL))` statements switch to, each once, in source order
    /// (the runtime refuses to discard a label a loaded policy still names).
    pub fn labels(&self) -> Vec<&str> {
        fn walk<'p>(body: &'p [Stmt], out: &mut Vec<&'p str>) {
            for stmt in body {
                match stmt {
                    Stmt::Return(crate::tree::Ret::Const(crate::vocab::Action::Vcl { label }), _)
                        if !out.contains(&&**label) =>
                    {
                        out.push(label);
                    }
                    Stmt::If(branches, otherwise) => {
                        for (_, branch) in branches {
                            walk(branch, out);
                        }
                        walk(otherwise, out);
                    }
                    Stmt::Block(inner) => walk(inner, out),
                    Stmt::Timed(_, inner) => walk(std::slice::from_ref(&**inner), out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        for body in &self.bodies {
            walk(body, &mut out);
        }
        out
    }

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

    /// How much of a request body to buffer before `vcl_recv` (the largest
    /// `std.cache_req_body` size), so `bodyaccess.*` can read it, the cache key can hash it and
    /// a restart or retry can send it again; `None` when the policy never asks.
    pub fn req_body_limit(&self) -> Option<u64> {
        self.req_body_limit
    }

    /// Whether the policy calls `std.rollback(req)`, for which the runtime keeps the request
    /// as received ([`Context::rollback`](crate::Context::rollback)).
    pub fn rolls_back(&self) -> bool {
        self.rolls_back
    }

    /// Whether the policy calls `std.rollback(bereq)`, for which the runtime keeps each backend
    /// request as it was built, before `vcl_backend_fetch` ([`Context::rollback`](crate::Context::rollback)).
    pub fn rolls_back_bereq(&self) -> bool {
        self.rolls_back_bereq
    }

    /// Whether the policy makes `directors.shard_param()` sets, which a backend request's
    /// `p.set(...)` changes: a lazy shard pick is then made with its task
    /// ([`Context::task`](crate::Context::task)).
    pub fn has_shard_params(&self) -> bool {
        !self.shard_params.is_empty()
    }

    /// Every file read (entry first, then includes), for the reload watcher.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// Warnings from loading (unused subs, constructs with no effect).
    pub fn warnings(&self) -> Option<&Diagnostics> {
        self.warnings.as_ref()
    }

    /// `FILE:LINE` of the `return` at `at` (see [`Context::returned`](crate::Context::returned)),
    /// the builtin's as `builtin.vcl:LINE` (the line in `policy-lang/src/builtin.vcl`).
    pub fn return_site(&self, at: Span) -> String {
        let Some((sm, builtin)) = &self.source_map else {
            return "?".to_string();
        };
        let Some((id, file)) = sm.files().nth(at.file.0 as usize) else {
            return "?".to_string();
        };
        let name = if id == *builtin {
            "builtin.vcl"
        } else {
            file.name.as_str()
        };
        format!("{name}:{}", file.line_col(at.start).0)
    }
}

pub(crate) fn compile(checked: Checked, sources: Vec<String>) -> Program {
    let bodies: Vec<Vec<Stmt>> = checked
        .bodies
        .into_iter()
        .map(|b| b.into_iter().map(fold::stmt).collect())
        .collect();
    // Varnish 7's empty `vcl_builtin_*` hooks are called on every request: skip such calls.
    let empty: Vec<bool> = bodies.iter().map(Vec::is_empty).collect();
    let bodies = bodies
        .into_iter()
        .map(|body| without_calls_to_empty(body, &empty))
        .collect();
    Program {
        backends: checked.backends,
        default_backend: checked.default_backend,
        acls: checked.acls,
        directors: checked.directors,
        plugins: checked.plugins,
        bodies,
        methods: checked.methods,
        user_methods: checked.user_methods,
        builtin_recv: checked.builtin_recv,
        builtin_backend_response: checked.builtin_backend_response,
        task_vmods: checked.task_vmods,
        req_body_limit: checked.req_body_limit,
        rolls_back: checked.rolls_back,
        rolls_back_bereq: checked.rolls_back_bereq,
        shard_params: checked.shard_params,
        sources,
        warnings: None,
        source_map: None,
        globals: Mutex::default(),
    }
}

/// `body` without the `call`s of subs whose body is empty (`empty[sub]`): they do nothing.
fn without_calls_to_empty(body: Vec<Stmt>, empty: &[bool]) -> Vec<Stmt> {
    body.into_iter()
        .filter(|s| !matches!(s, Stmt::Call(sub) if empty.get(*sub).copied().unwrap_or(false)))
        .map(|s| match s {
            Stmt::If(branches, otherwise) => Stmt::If(
                branches
                    .into_iter()
                    .map(|(c, b)| (c, without_calls_to_empty(b, empty)))
                    .collect(),
                without_calls_to_empty(otherwise, empty),
            ),
            Stmt::Block(b) => Stmt::Block(without_calls_to_empty(b, empty)),
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{OnError, PluginIsolation};

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
                    root_id: String::new(),
                    vm_id: String::new(),
                    vm_config: String::new(),
                    upstreams: Vec::new(),
                    max_body: None,
                },
                PluginDecl {
                    name: "hdr".into(),
                    // Absolute paths stay as written.
                    path: "/opt/plugins/hdr.wasm".into(),
                    config: String::new(),
                    on_error: OnError::Deny,
                    isolation: PluginIsolation::Shared,
                    root_id: String::new(),
                    vm_id: String::new(),
                    vm_config: String::new(),
                    upstreams: Vec::new(),
                    max_body: None,
                },
                PluginDecl {
                    name: "parts".into(),
                    path: "conf/p.wasm".into(),
                    config: "ab".into(),
                    on_error: OnError::Deny,
                    isolation: PluginIsolation::Shared,
                    root_id: String::new(),
                    vm_id: String::new(),
                    vm_config: String::new(),
                    upstreams: Vec::new(),
                    max_body: None,
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
}
