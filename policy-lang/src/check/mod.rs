//! Semantic checks: the AST -> the checked tree, every problem a diagnostic.
//!
//! Each pass pushes into the `Sink` and keeps going, so a policy with several mistakes
//! reports them all:
//!
//! * names (here): imports, duplicate definitions, `vcl_*` names, directors;
//! * `decls.rs`: backend / probe / ACL / plugin attributes;
//! * `calls.rs`: recursion, call depth, and which methods reach each custom sub (a custom
//!   sub is checked in the context of every caller);
//! * `types/` with `ty.rs`, `vars.rs` and `funcs.rs`: undefined subs, variables
//!   readable/writable per sub, types, legal `return` actions; it also produces the
//!   checked tree (`tree`) the compiler folds into a `Program`;
//! * patterns compile (`vocab::regex`, with a dedicated PCRE-only diagnostic).

mod calls;
mod decls;
mod funcs;
mod ty;
mod types;
mod vars;

use std::collections::HashMap;

use crate::ast::{Decl, ExprKind, Module, StmtKind, SubDef};
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Sink, Span};
use crate::tree::{Checked, Director, DirectorKind, ProbeDecl};
use crate::vocab::{BackendId, Sub};
use types::{AddedMember, BodyCtx, DirectorAdd, InitCalls, Lowerer, ShardCall, ShardOp};

/// What a top-level name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SymKind {
    Backend(usize),
    Probe(usize),
    Acl(usize),
    Sub(usize),
    Director(usize, DirectorKind),
    Plugin(usize),
    /// `new p = directors.shard_param();`
    ShardParam(usize),
}

impl SymKind {
    fn describe(self) -> &'static str {
        match self {
            SymKind::Backend(_) => "backend",
            SymKind::Probe(_) => "probe",
            SymKind::Acl(_) => "ACL",
            SymKind::Sub(_) => "sub",
            SymKind::Director(..) => "director",
            SymKind::Plugin(_) => "plugin",
            SymKind::ShardParam(_) => "shard parameter set",
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Symbols {
    map: HashMap<String, (SymKind, Span)>,
    pub imports: Vec<String>,
}

impl Symbols {
    pub fn get(&self, name: &str) -> Option<SymKind> {
        self.map.get(name).map(|(k, _)| *k)
    }

    pub fn names_of(&self, f: impl Fn(SymKind) -> bool) -> Vec<String> {
        let mut v: Vec<String> = self
            .map
            .iter()
            .filter(|(_, (k, _))| f(*k))
            .map(|(n, _)| n.clone())
            .collect();
        v.sort();
        v
    }

    fn define(&mut self, sink: &mut Sink, name: &str, span: Span, kind: SymKind) -> bool {
        if let Some((prev, prev_span)) = self.map.get(name) {
            sink.push(
                Diagnostic::new(
                    Code::Duplicate,
                    span,
                    format!("`{name}` is defined more than once"),
                )
                .label(format!("{} `{name}` redefined here", kind.describe()))
                .secondary(
                    *prev_span,
                    format!("{} `{name}` first defined here", prev.describe()),
                ),
            );
            return false;
        }
        self.map.insert(name.to_string(), (kind, span));
        true
    }
}

struct SubInfo<'m> {
    name: String,
    span: Span,
    method: Option<Sub>,
    defs: Vec<&'m SubDef>,
    from_user: bool,
}

/// `new x = directors.KIND();` with a KIND edgecache does not provide.
fn unknown_director(name: &str, span: Span) -> Diagnostic {
    let supported: Vec<String> = DirectorKind::ALL
        .iter()
        .map(|(n, _)| format!("`{n}()`"))
        .collect();
    let supported = format!("edgecache's directors: {}", supported.join(", "));
    let hint = match did_you_mean(name, DirectorKind::ALL.iter().map(|(n, _)| *n)) {
        Some(s) => format!("did you mean `{s}`? {supported}"),
        None => supported,
    };
    let label = if name.starts_with("directors.") {
        "unknown director kind"
    } else {
        "unknown constructor"
    };
    Diagnostic::new(
        Code::Unsupported,
        span,
        format!("`new` with `{name}` is not supported"),
    )
    .label(label)
    .hint(hint)
}

/// Varnish 3 / removed sub names and what to use instead.
fn legacy_sub(name: &str) -> Option<&'static str> {
    Some(match name {
        "vcl_fetch" => "`vcl_fetch` is Varnish 3; use `vcl_backend_response`",
        "vcl_error" => "`vcl_error` is Varnish 3; use `vcl_synth` (client side) or `vcl_backend_error`",
        "vcl_backend_refresh" => "`vcl_backend_refresh` is Varnish 8 and not supported",
        _ => return None,
    })
}

/// Checks the modules (user files in include order, then the builtin) and
/// lowers them. Returns `None` when errors were pushed.
pub(crate) fn check(modules: &[(Module, bool)], sink: &mut Sink) -> Option<Checked> {
    let mut syms = Symbols::default();
    let mut subs: Vec<SubInfo<'_>> = Vec::new();
    let mut sub_index: HashMap<String, usize> = HashMap::new();
    let mut probes: Vec<ProbeDecl> = Vec::new();
    let mut probe_defs = Vec::new();
    let mut default_probe: Option<Span> = None;
    let mut backend_defs = Vec::new();
    let mut acls = Vec::new();
    let mut directors: Vec<Director> = Vec::new();
    let mut plugins = Vec::new();
    let mut plugin_files = Vec::new();

    // Helper subs of the builtin (`vcl_req_cookie`, ...) are callable, not reserved.
    let builtin_subs: Vec<&str> = modules
        .iter()
        .filter(|(_, b)| *b)
        .flat_map(|(m, _)| m.decls.iter())
        .filter_map(|d| match d {
            Decl::Sub(s) => Some(s.name.name.as_str()),
            _ => None,
        })
        .collect();

    // === pass 1: names ===
    for (module, builtin) in modules {
        for d in &module.decls {
            match d {
                Decl::Version { version, span } => {
                    if version != "4.0" && version != "4.1" {
                        sink.push(
                            Diagnostic::new(
                                Code::Unsupported,
                                *span,
                                format!("VCL version {version} is not supported"),
                            )
                            .label("unsupported version")
                            .hint("edgecache reads VCL 4.0 and 4.1: `vcl 4.1;`"),
                        );
                    }
                }
                Decl::Import { name } => {
                    if !funcs::VMODS.contains(&name.name.as_str()) {
                        sink.push(
                            Diagnostic::new(Code::Unsupported, name.span, format!("vmod `{}` is not available in edgecache", name.name))
                                .label("unknown vmod")
                                .hint("edgecache provides `std`, `directors`, `proxy`, `tls`, `cookie`, `var`, `header` and `blob`; extend it with WebAssembly plugins (`plugin NAME { .path = \"NAME.wasm\"; }`)"),
                        );
                    }
                    // Unavailable ones too, so that their functions are reported as theirs.
                    if !syms.imports.contains(&name.name) {
                        syms.imports.push(name.name.clone());
                    }
                }
                Decl::Include { span, .. } => {
                    // Resolved by the loader before checking; reaching here means it was skipped.
                    let _ = span;
                }
                Decl::Backend(b) => {
                    if syms.define(
                        sink,
                        &b.name.name,
                        b.name.span,
                        SymKind::Backend(backend_defs.len()),
                    ) {
                        backend_defs.push(b);
                    }
                }
                // As in Varnish, `probe default` is the probe of every backend without `.probe`,
                // and its name is no symbol: a backend may be called `default` too.
                Decl::Probe(p) if p.name.name == "default" => match default_probe {
                    Some(first) => sink.push(
                        Diagnostic::new(
                            Code::Duplicate,
                            p.name.span,
                            "`probe default` is defined more than once",
                        )
                        .label("probe `default` redefined here")
                        .secondary(first, "probe `default` first defined here"),
                    ),
                    None => {
                        default_probe = Some(p.name.span);
                        probe_defs.push(p);
                    }
                },
                Decl::Probe(p) => {
                    if syms.define(sink, &p.name.name, p.name.span, SymKind::Probe(probe_defs.len())) {
                        probe_defs.push(p);
                    }
                }
                Decl::Plugin(p) => {
                    if syms.define(sink, &p.name.name, p.name.span, SymKind::Plugin(plugins.len())) {
                        plugins.push(decls::plugin(sink, p));
                        plugin_files.push(p.name.span.file);
                    }
                }
                Decl::Acl(a) => {
                    if syms.define(sink, &a.name.name, a.name.span, SymKind::Acl(acls.len())) {
                        acls.push(decls::acl(sink, a));
                    }
                }
                Decl::Sub(s) => {
                    let name = s.name.name.as_str();
                    let method = Sub::from_name(name);
                    if method.is_none() && name.starts_with("vcl_") && !builtin {
                        if let Some(note) = legacy_sub(name) {
                            sink.push(
                                Diagnostic::new(
                                    Code::UnknownMethod,
                                    s.name.span,
                                    format!("unknown built-in sub `{name}`"),
                                )
                                .label("not a VCL 4 sub")
                                .hint(note),
                            );
                            continue;
                        }
                        if !builtin_subs.contains(&name) {
                            let hint = did_you_mean(name, Sub::ALL.iter().map(|s| s.name()))
                                .map(|s| {
                                    format!("did you mean `{s}`? (names starting with `vcl_` are reserved)")
                                })
                                .unwrap_or_else(|| {
                                    "names starting with `vcl_` are reserved for built-in subs".into()
                                });
                            sink.push(
                                Diagnostic::new(
                                    Code::UnknownMethod,
                                    s.name.span,
                                    format!("unknown built-in sub `{name}`"),
                                )
                                .label("reserved name")
                                .hint(hint),
                            );
                            continue;
                        }
                    }
                    match sub_index.get(name) {
                        // As in Varnish, every sub builtin.vcl defines (methods and their helpers
                        // such as `vcl_req_cookie`) concatenates in source order, builtin last:
                        // the user's body runs first and may return before the builtin's.
                        Some(&i) if method.is_some() || builtin_subs.contains(&name) => {
                            subs[i].defs.push(s);
                            subs[i].from_user |= !builtin;
                        }
                        _ => {
                            let i = subs.len();
                            if !syms.define(sink, name, s.name.span, SymKind::Sub(i)) {
                                continue;
                            }
                            sub_index.insert(name.to_string(), i);
                            subs.push(SubInfo {
                                name: name.to_string(),
                                span: s.name.span,
                                method,
                                defs: vec![s],
                                from_user: !builtin,
                            });
                        }
                    }
                }
            }
        }
    }

    // Directors: `new NAME = directors.KIND();` at the top of vcl_init or of a custom sub it
    // calls (at its top, transitively), in the order they run.
    let mut init_subs: Vec<usize> = sub_index.get("vcl_init").copied().into_iter().collect();
    let mut next = 0;
    while let Some(&i) = init_subs.get(next) {
        next += 1;
        for st in subs[i].defs.iter().flat_map(|def| &def.body) {
            if let Some(&called) = match &st.kind {
                StmtKind::Call(id) => sub_index.get(&id.name),
                _ => None,
            } {
                if !init_subs.contains(&called) {
                    init_subs.push(called);
                }
            }
        }
    }
    let mut shard_params = 0;
    for i in init_subs {
        for def in &subs[i].defs {
            for st in &def.body {
                if let StmtKind::New { name, ctor } = &st.kind {
                    let ExprKind::Call { func, .. } = &ctor.kind else {
                        continue;
                    };
                    if func.name == "directors.shard_param" {
                        if syms.define(sink, &name.name, name.span, SymKind::ShardParam(shard_params)) {
                            shard_params += 1;
                        }
                        continue;
                    }
                    let Some(kind) = DirectorKind::from_constructor(&func.name) else {
                        sink.push(unknown_director(&func.name, func.span));
                        continue;
                    };
                    if !syms.imports.iter().any(|i| i == "directors") {
                        sink.push(
                            Diagnostic::new(
                                Code::UnknownFunction,
                                func.span,
                                format!("`{}` needs `import directors;`", func.name),
                            )
                            .label("vmod `directors` is not imported")
                            .hint("add `import directors;` after the `vcl 4.1;` line"),
                        );
                    }
                    if syms.define(
                        sink,
                        &name.name,
                        name.span,
                        SymKind::Director(directors.len(), kind),
                    ) {
                        directors.push(Director::new(name.name.clone(), kind));
                    }
                }
            }
        }
    }

    // === backends and probes ===
    for p in &probe_defs {
        probes.push(decls::probe_decl(sink, p));
    }
    let probe_names: Vec<&str> = probe_defs.iter().map(|p| p.name.name.as_str()).collect();
    let lookup = |n: &str| {
        probe_names
            .iter()
            .position(|p| *p == n)
            .map(|i| probes[i].clone())
    };
    let mut backends: Vec<_> = backend_defs
        .iter()
        .map(|b| decls::backend(sink, b, &lookup, &probe_names))
        .collect();
    if let Some(probe) = default_probe.and(lookup("default")) {
        for b in backends.iter_mut().filter(|b| b.probe.is_none() && !b.none) {
            b.probe = Some(probe.clone());
        }
    }
    let default_backend = backends
        .iter()
        .position(|b| b.name == "default")
        .or(if backends.is_empty() { None } else { Some(0) })
        .map(|i| BackendId::new(i as u32));

    // === calls: graph, recursion, reachability ===
    let calls::Reach { masks, via } = calls::reach(&subs, &sub_index, sink);

    // === lowering with types and scopes ===
    let mut bodies = Vec::with_capacity(subs.len());
    let mut init = InitCalls::default();
    for (i, s) in subs.iter().enumerate() {
        if s.method.is_none() && masks[i] == 0 && s.from_user {
            sink.push(
                Diagnostic::new(Code::Unused, s.span, format!("sub `{}` is never called", s.name))
                    .label("unused")
                    .hint("call it from a built-in sub with `call NAME;`, or remove it"),
            );
        }
        let cx = BodyCtx {
            sub_name: &s.name,
            mask: masks[i],
            is_method: s.method.is_some(),
            via: &via[i],
        };
        let mut l = Lowerer::new(sink, &syms, cx, &mut init);
        let mut body = Vec::new();
        for def in &s.defs {
            body.extend(l.body(&def.body));
        }
        bodies.push(body);
    }
    refuse_director_cycles(sink, &init.adds, &directors);
    // A director's value is the id after the backends' (see `Program::director_value`).
    let member_of = |member: AddedMember, directors: &[Director]| match member {
        AddedMember::Backend(b) => (b, backends.get(b.index()).map(|b| b.name.clone())),
        AddedMember::Director(d) => (
            BackendId::new((backends.len() + d) as u32),
            directors.get(d).map(|d| d.name.clone()),
        ),
    };
    for add in init.adds {
        let (member, name) = member_of(add.member, &directors);
        directors[add.director].add(member, name.as_deref().unwrap_or(""), add.weight);
    }
    configure_shards(init.shard, &mut directors, member_of);
    let (req_body_limit, rolls_back, rolls_back_bereq) =
        (init.req_body_limit, init.rolls_back, init.rolls_back_bereq);
    let mut shard_param_defaults = init.shard_params;
    shard_param_defaults.resize(shard_params, Default::default());

    if sink.has_errors() {
        return None;
    }
    let mut methods = [None; Sub::ALL.len()];
    let mut user_methods = 0u16;
    for (i, s) in subs.iter().enumerate() {
        if let Some(m) = s.method {
            methods[m.index()] = Some(i);
        }
        // A user's `vcl_req_cookie` changes `vcl_recv` as much as a user's `vcl_recv` does.
        if s.from_user {
            user_methods |= masks[i];
        }
    }
    // `vcl_builtin_recv` as builtin.vcl has it (no user definition extends it or the subs it
    // calls), which a runtime may run natively (`Context::builtin_recv`).
    const BUILTIN_RECV: [&str; 5] = [
        "vcl_builtin_recv",
        "vcl_req_host",
        "vcl_req_method",
        "vcl_req_authorization",
        "vcl_req_cookie",
    ];
    let untouched = subs
        .iter()
        .all(|s| !(s.from_user && BUILTIN_RECV.contains(&s.name.as_str())));
    let builtin_recv = subs
        .iter()
        .position(|s| s.name == BUILTIN_RECV[0])
        .filter(|_| untouched);
    // `vcl_builtin_backend_response` likewise (`Context::builtin_backend_response`).
    const BUILTIN_BACKEND_RESPONSE: [&str; 7] = [
        "vcl_builtin_backend_response",
        "vcl_beresp_range",
        "vcl_beresp_stale",
        "vcl_beresp_cookie",
        "vcl_beresp_control",
        "vcl_beresp_vary",
        "vcl_beresp_hitmiss",
    ];
    let untouched = subs
        .iter()
        .all(|s| !(s.from_user && BUILTIN_BACKEND_RESPONSE.contains(&s.name.as_str())));
    let builtin_backend_response = subs
        .iter()
        .position(|s| s.name == BUILTIN_BACKEND_RESPONSE[0])
        .filter(|_| untouched);
    Some(Checked {
        backends,
        default_backend,
        acls,
        directors,
        plugins,
        plugin_files,
        bodies,
        methods,
        user_methods,
        builtin_recv,
        builtin_backend_response,
        // A shard parameter set changed on the backend side lives in the backend task.
        task_vmods: syms.imports.iter().any(|i| i == "cookie" || i == "var") || shard_params > 0,
        req_body_limit,
        rolls_back,
        rolls_back_bereq,
        shard_params: shard_param_defaults,
    })
}

/// Runs the shard directors' `vcl_init` calls in order, then the reconfiguration Varnish does
/// at the end of `vcl_init`; the ring's members become the director's (for its health).
fn configure_shards(
    calls: Vec<ShardCall>,
    directors: &mut [Director],
    member_of: impl Fn(AddedMember, &[Director]) -> (BackendId, Option<String>),
) {
    use crate::tree::shard::ShardChange;
    for call in calls {
        let change = match call.op {
            ShardOp::Add {
                member,
                ident,
                rampup,
                weight,
            } => {
                let (backend, name) = member_of(member, directors);
                Some(ShardChange::Add {
                    backend,
                    name: name.unwrap_or_default(),
                    ident,
                    rampup,
                    weight,
                })
            }
            ShardOp::Remove { member, ident } => Some(ShardChange::Remove {
                backend: member.map(|m| member_of(m, directors).0),
                ident,
            }),
            ShardOp::Clear => Some(ShardChange::Clear),
            op => {
                let Some(shard) = directors[call.director].shard.as_mut() else {
                    continue;
                };
                match op {
                    ShardOp::Reconfigure(replicas) => {
                        shard.reconfigure(replicas);
                    }
                    ShardOp::Warmup(p) => shard.warmup = p,
                    ShardOp::Associate(param) => shard.associated = param,
                    ShardOp::Rampup(d) => shard.rampup = d,
                    _ => {}
                }
                None
            }
        };
        if let (Some(change), Some(shard)) = (change, directors[call.director].shard.as_mut()) {
            shard.queue(change);
        }
    }
    for d in directors.iter_mut() {
        let Some(shard) = d.shard.as_mut() else {
            continue;
        };
        shard.finish();
        let members: Vec<_> = shard
            .members
            .iter()
            .map(|m| (m.backend, m.name.clone()))
            .collect();
        for (backend, name) in members {
            d.add(backend, &name, 1.0);
        }
    }
}

/// Directors may contain directors, but not themselves: a pick would never end. Reports the
/// first cycle found.
fn refuse_director_cycles(sink: &mut Sink, adds: &[DirectorAdd], directors: &[Director]) {
    let contains = |outer: usize| {
        adds.iter()
            .filter(move |a| a.director == outer)
            .filter_map(|a| match a.member {
                AddedMember::Director(inner) => Some(inner),
                AddedMember::Backend(_) => None,
            })
    };
    for add in adds {
        let AddedMember::Director(inner) = add.member else {
            continue;
        };
        // Does `inner` lead back to the director it is added to?
        let mut stack = vec![inner];
        let mut seen = vec![false; directors.len()];
        while let Some(d) = stack.pop() {
            if d == add.director {
                let name = |d: usize| directors.get(d).map_or("?", |d| d.name.as_str());
                sink.push(
                    Diagnostic::new(
                        Code::Recursion,
                        add.span,
                        format!("director `{}` would contain itself", name(add.director)),
                    )
                    .label(format!(
                        "`{}` leads back to `{}`",
                        name(inner),
                        name(add.director)
                    ))
                    .hint("directors may nest, but not in a cycle: remove one of these `add_backend` calls"),
                );
                // One report per policy: each `add_backend` of a cycle would repeat it.
                return;
            }
            if !std::mem::replace(&mut seen[d], true) {
                stack.extend(contains(d));
            }
        }
    }
}
