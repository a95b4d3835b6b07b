//! edgecache's policy language (a VCL 4.1 subset): the facade, and the pipeline running the phases.
//!
//! The pipeline is parse (pest grammar, `grammar/`, lowered to a spanned AST
//! in `ast/`) -> check (`check/`: names, variables per sub, types, returns,
//! calls, regexes; every problem becomes a [`Diagnostic`]) -> compile
//! (`compile/`: an immutable, `Send + Sync` [`Program`] with variables as
//! slots, pre-parsed header names, compiled regexes, folded constants and
//! Varnish's builtin VCL merged in) -> eval (`eval/`: [`Program::run`]
//! against a [`Context`] the runtime implements).
//!
//! The phases talk through data and never call each other: `check` produces the checked tree
//! (`tree/`), `compile` turns it into the [`Program`] that `eval` runs, all over the
//! vocabulary they share (`vocab/`: subs, actions, values, variables, regexes). This file is
//! the only place that runs them in order (`tests/architecture.rs` keeps the arrows so).
//!
//! ```
//! use policy_lang::{load_str, Action, Sub};
//! # #[cfg(feature = "test-util")] {
//! use policy_lang::testing::TestContext;
//!
//! let program = load_str("policy.vcl", r#"
//!     vcl 4.1;
//!     backend default { .host = "127.0.0.1"; .port = "8080"; }
//!     sub vcl_recv {
//!         if (req.url ~ "^/admin") { return (pass); }
//!     }
//! "#).expect("policy loads");
//!
//! let mut ctx = TestContext::request("GET", "/admin/users");
//! assert_eq!(program.run(Sub::Recv, &mut ctx), Action::Pass);
//!
//! // Falls through to the builtin vcl_recv: a plain GET is looked up.
//! let mut ctx = TestContext::request("GET", "/index.html");
//! assert_eq!(program.run(Sub::Recv, &mut ctx), Action::Lookup);
//! # }
//! # let _ = (load_str, Action::Pass, Sub::Recv);
//! ```
//!
//! Errors render like rustc's:
//!
//! ```
//! let err = policy_lang::load_str("p.vcl", "sub vcl_recv { set req.ulr = \"/\"; }").unwrap_err();
//! assert!(err.render().contains("did you mean `req.url`?"));
//! ```

#![forbid(unsafe_code)]

mod acl_names;
mod ast;
mod ban;
mod check;
mod compile;
mod diagnostics;
mod eval;
mod fragment;
mod grammar;
mod host_values;
mod rewrite;
mod tree;
mod vocab;

#[cfg(any(test, feature = "test-util"))]
pub mod testing {
    //! An in-memory [`Context`](crate::Context) for tests and benches.
    pub use crate::eval::generated::generated_policy;
    pub use crate::eval::testing::{PluginScript, TestContext};
}

use std::sync::Arc;

pub use ban::{parse_ban, BanContext, BanExpr};
pub use compile::Program;
pub use diagnostics::{Code, Diagnostic, Diagnostics, FileId, Label, Severity, SourceMap, Span};
pub use eval::{Context, PluginOutcome, Task};
pub use tree::{BackendDecl, BackendTls, CaFile, OnError, PluginDecl, PluginIsolation, ProbeDecl};
pub use vocab::pattern::pcre_limit_hits;
pub use vocab::{
    Action, BackendId, ConnectionValue, PluginId, PluginPhase, Scope, Sub, Value, ValueType, Var,
};

use diagnostics::Sink;

/// Reads policy files for [`load`]. The crate does no I/O itself.
pub trait SourceLoader {
    /// Loads `path`, as written in `include "path";` (or the entry path),
    /// relative to the including file `from` (its canonical name) when given.
    /// Returns the file's canonical name (used in diagnostics, cycle
    /// detection and [`Program::sources`]) and its text, or an I/O error
    /// message.
    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String>;

    /// Loads `path` as [`SourceLoader::load`] does, as bytes (`std.blobread`, for files that
    /// need not be text). The default loads text.
    fn load_bytes(&self, path: &str, from: Option<&str>) -> Result<(String, Vec<u8>), String> {
        self.load(path, from)
            .map(|(name, text)| (name, text.into_bytes()))
    }

    /// The addresses a host name in an ACL resolves to (each becomes an entry), or why it does
    /// not resolve. Names are resolved once, when the policy loads, as Varnish does. The
    /// default resolves nothing, so every ACL host name is refused.
    fn resolve_host(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String> {
        let _ = name;
        Err("this loader resolves no host names".to_string())
    }

    /// The value of environment variable `name` for `std.getenv`, read once when the policy
    /// loads; `None` when unset. The default reads nothing.
    fn getenv(&self, name: &str) -> Option<String> {
        let _ = name;
        None
    }
}

/// The builtin VCL appended after user code (Varnish's `builtin.vcl`).
pub const BUILTIN_VCL: &str = include_str!("builtin.vcl");

const BUILTIN_NAME: &str = "<builtin>";
const MAX_INCLUDE_DEPTH: usize = 16;

/// Loads, checks and compiles the policy at `entry` and everything it includes.
pub fn load(entry: &str, loader: &dyn SourceLoader) -> Result<Program, Diagnostics> {
    let mut sm = SourceMap::new();
    let mut sink = Sink::default();
    let mut decls = Vec::new();
    if let Some(id) = expand_entry(entry, loader, &mut sm, &mut sink, &mut decls) {
        require_version_line(id, &decls, &mut sink);
    }
    finish(sm, sink, decls, Some(loader))
}

/// Loads a policy from a string. `include` is not allowed (there is no loader).
pub fn load_str(name: &str, text: &str) -> Result<Program, Diagnostics> {
    let mut sm = SourceMap::new();
    let mut sink = Sink::default();
    let mut decls = Vec::new();
    let id = sm.add(name, text);
    let mut stack = vec![name.to_string()];
    expand(id, &mut sm, &mut sink, None, &mut stack, &mut decls);
    require_version_line(id, &decls, &mut sink);
    finish(sm, sink, decls, None)
}

/// How a policy file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyFormat {
    /// VCL 4.1.
    Vcl,
    /// LiteSpeed / Apache `.htaccess` rewrite rules, read as the VCL [`explain_rewrite`] gives.
    Rewrite,
}

impl PolicyFormat {
    /// By file name: `.htaccess` and `NAME.htaccess` are rewrite rules, any other file VCL.
    pub fn of_path(path: &str) -> PolicyFormat {
        let file = path.rsplit('/').next().unwrap_or(path);
        match file.ends_with(".htaccess") {
            true => PolicyFormat::Rewrite,
            false => PolicyFormat::Vcl,
        }
    }
}

/// The `--policy-format` spelling: `vcl` or `rewrite`.
impl std::str::FromStr for PolicyFormat {
    type Err = String;

    fn from_str(name: &str) -> Result<PolicyFormat, String> {
        match name {
            "vcl" => Ok(PolicyFormat::Vcl),
            "rewrite" => Ok(PolicyFormat::Rewrite),
            other => Err(format!("`{other}` is not vcl or rewrite")),
        }
    }
}

/// Loads the rewrite rules file `entry` (`.htaccess`): read and written as VCL by the rewrite
/// front end, then checked and compiled as that VCL. Diagnostics point into `entry`; the
/// program's sources (what a reload watches) start with it.
pub fn load_rewrite(entry: &str, loader: &dyn SourceLoader) -> Result<Program, Diagnostics> {
    explain_rewrite(entry, loader).map(|(program, _)| program)
}

/// The rewrite rules file `entry` loaded as [`load_rewrite`] loads it, and the VCL policy
/// equivalent to it (`edgecache check --explain`).
pub fn explain_rewrite(entry: &str, loader: &dyn SourceLoader) -> Result<(Program, String), Diagnostics> {
    let mut sm = SourceMap::new();
    let mut sink = Sink::default();
    let mut decls = Vec::new();
    let mut written = String::new();
    if let Some((name, vcl)) = rewrite_entry(entry, loader, &mut sm, &mut sink) {
        let id = sm.add(format!("{name} (as VCL)"), vcl.clone());
        if let Some(module) = ast::lower::parse_file(id, &vcl, &mut sink) {
            decls = module.decls;
        }
        written = vcl;
    }
    finish(sm, sink, decls, Some(loader)).map(|program| (program, written))
}

/// Reads the rules file `entry` into `sm`: its canonical name and its VCL, or `None` after
/// reporting why not.
fn rewrite_entry(
    entry: &str,
    loader: &dyn SourceLoader,
    sm: &mut SourceMap,
    sink: &mut Sink,
) -> Option<(String, String)> {
    match loader.load(entry, None) {
        Ok((name, text)) => {
            let id = sm.add(name.clone(), text);
            rewrite::to_vcl(id, sm.get(id), sink).map(|vcl| (name, vcl))
        }
        Err(e) => {
            sink.push(unreadable_entry(sm, entry, &e));
            None
        }
    }
}

/// As Varnish: the policy file starts with its version line (an empty or truncated file is
/// refused rather than loaded as "no policy"). Included files need none.
fn require_version_line(entry: FileId, decls: &[ast::Decl], sink: &mut Sink) {
    if sink.has_errors() || matches!(decls.first(), Some(ast::Decl::Version { .. })) {
        return;
    }
    sink.push(
        Diagnostic::new(
            Code::Syntax,
            Span::new(entry, 0, 0),
            "the policy does not start with `vcl 4.1;`",
        )
        .label("version line expected first")
        .hint("start the file with `vcl 4.1;` (or `vcl 4.0;`), as Varnish requires"),
    );
}

/// Parses file `id`, splicing included files in place of their `include`: at the top level
/// their declarations, inside a sub their statements.
fn expand(
    id: FileId,
    sm: &mut SourceMap,
    sink: &mut Sink,
    loader: Option<&dyn SourceLoader>,
    stack: &mut Vec<String>,
    out: &mut Vec<ast::Decl>,
) {
    let text = sm.get(id).text.clone();
    let Some(module) = ast::lower::parse_file(id, &text, sink) else {
        return;
    };
    for d in module.decls {
        match d {
            ast::Decl::Include { path, span } => {
                if let Some((child, name)) = include_target(&path, span, sm, sink, loader, stack) {
                    stack.push(name);
                    expand(child, sm, sink, loader, stack, out);
                    stack.pop();
                }
            }
            ast::Decl::Sub(mut sub) => {
                splice_includes(&mut sub.body, sm, sink, loader, stack);
                out.push(ast::Decl::Sub(sub));
            }
            d => out.push(d),
        }
    }
}

/// Replaces each `include` among `body`'s statements, at any depth, by the statements of the
/// file it names.
fn splice_includes(
    body: &mut Vec<ast::Stmt>,
    sm: &mut SourceMap,
    sink: &mut Sink,
    loader: Option<&dyn SourceLoader>,
    stack: &mut Vec<String>,
) {
    let mut i = 0;
    while i < body.len() {
        if let ast::StmtKind::Include(path) = &body[i].kind {
            let (path, span) = (path.clone(), body[i].span);
            let mut included = Vec::new();
            if let Some((child, name)) = include_target(&path, span, sm, sink, loader, stack) {
                let text = sm.get(child).text.clone();
                included = ast::lower::parse_fragment(child, &text, sink).unwrap_or_default();
                stack.push(name);
                splice_includes(&mut included, sm, sink, loader, stack);
                stack.pop();
            }
            let count = included.len();
            body.splice(i..=i, included);
            i += count;
            continue;
        }
        match &mut body[i].kind {
            ast::StmtKind::Block(inner) => splice_includes(inner, sm, sink, loader, stack),
            ast::StmtKind::If { branches, otherwise } => {
                for (_, branch) in branches {
                    splice_includes(branch, sm, sink, loader, stack);
                }
                if let Some(otherwise) = otherwise {
                    splice_includes(otherwise, sm, sink, loader, stack);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// The file an `include` at `span` names, loaded relative to the including file (the top of
/// `stack`): its id and name, or `None` after reporting why it cannot be included.
fn include_target(
    path: &str,
    span: Span,
    sm: &mut SourceMap,
    sink: &mut Sink,
    loader: Option<&dyn SourceLoader>,
    stack: &[String],
) -> Option<(FileId, String)> {
    let Some(loader) = loader else {
        sink.push(
            Diagnostic::new(Code::Include, span, format!("cannot include `{path}` here"))
                .label("includes need a file loader")
                .hint("load the policy from a file (`edgecache check FILE.vcl`) so includes can be resolved"),
        );
        return None;
    };
    if stack.len() > MAX_INCLUDE_DEPTH {
        sink.push(
            Diagnostic::new(Code::IncludeCycle, span, "includes are nested too deeply")
                .label(format!("more than {MAX_INCLUDE_DEPTH} levels")),
        );
        return None;
    }
    match loader.load(path, stack.last().map(String::as_str)) {
        Ok((name, text)) => {
            if stack.contains(&name) {
                sink.push(
                    Diagnostic::new(Code::IncludeCycle, span, format!("`{name}` includes itself"))
                        .label("include cycle")
                        .hint(format!("include chain: {} -> {name}", stack.join(" -> "))),
                );
                return None;
            }
            let id = match sm.find(&name) {
                // Included twice (not a cycle): reuse the text, parse again.
                Some(existing) => existing,
                None => sm.add(name.clone(), text),
            };
            Some((id, name))
        }
        Err(e) => {
            sink.push(
                Diagnostic::new(Code::Include, span, format!("cannot include `{path}`: {e}"))
                    .label("could not be read"),
            );
            None
        }
    }
}

/// Reads `entry` and expands its includes into `decls`; `None` (with the diagnostic in `sink`)
/// when the entry cannot be read.
fn expand_entry(
    entry: &str,
    loader: &dyn SourceLoader,
    sm: &mut SourceMap,
    sink: &mut Sink,
    decls: &mut Vec<ast::Decl>,
) -> Option<FileId> {
    match loader.load(entry, None) {
        Ok((name, text)) => {
            let id = sm.add(name.clone(), text);
            let mut stack = vec![name];
            expand(id, sm, sink, Some(loader), &mut stack, decls);
            Some(id)
        }
        Err(e) => {
            sink.push(unreadable_entry(sm, entry, &e));
            None
        }
    }
}

/// Checks a file made to be included (Varnish's `include`) on its own, with everything it
/// includes: no `vcl 4.x;` line is needed, and the names it uses without declaring them
/// (subs, ACLs, backends, probes, directors, imports), which the including file is expected
/// to declare, are notes ([`Severity::Note`]) rather than errors. Its custom subs are not
/// reported as unused. The result may hold errors: see [`Diagnostics::has_errors`].
pub fn check_fragment(entry: &str, loader: &dyn SourceLoader) -> Diagnostics {
    let mut sm = SourceMap::new();
    let mut sink = Sink::default();
    let mut decls = Vec::new();
    expand_entry(entry, loader, &mut sm, &mut sink, &mut decls);
    let _ = check_with_builtin(&mut sm, &mut sink, decls, Some(loader));
    sink.items = fragment::soften(sink.items);
    Diagnostics::new(Arc::new(sm), sink.items)
}

fn unreadable_entry(sm: &mut SourceMap, entry: &str, error: &str) -> Diagnostic {
    let id = sm.add(entry.to_string(), "");
    Diagnostic::new(
        Code::Include,
        Span::new(id, 0, 0),
        format!("cannot read `{entry}`: {error}"),
    )
    .label("could not be read")
}

/// Checks `decls` (the user's files, in include order) followed by the builtin VCL; the
/// parts to compile when nothing was wrong. ACL host names are resolved with `loader`.
fn check_with_builtin(
    sm: &mut SourceMap,
    sink: &mut Sink,
    decls: Vec<ast::Decl>,
    loader: Option<&dyn SourceLoader>,
) -> Option<tree::Checked> {
    let builtin_id = sm.add(BUILTIN_NAME, BUILTIN_VCL);
    let builtin = ast::lower::parse_file(builtin_id, BUILTIN_VCL, sink);
    let mut modules = vec![(ast::Module { decls }, false)];
    if let Some(b) = builtin {
        modules.push((b, true));
    }
    if sink.has_errors() {
        // Syntax errors: still run the checks on what parsed, for more reports.
        let _ = check::check(&modules, sink);
        None
    } else {
        let mut checked = check::check(&modules, sink)?;
        acl_names::resolve(&mut checked.acls, loader, sink);
        Some(checked)
    }
}

fn finish(
    mut sm: SourceMap,
    mut sink: Sink,
    mut decls: Vec<ast::Decl>,
    loader: Option<&dyn SourceLoader>,
) -> Result<Program, Diagnostics> {
    host_values::resolve(&mut decls, loader, &mut sm, &mut sink);
    let sources: Vec<String> = sm.files().map(|(_, f)| f.name.clone()).collect();
    let checked = check_with_builtin(&mut sm, &mut sink, decls, loader);
    let sm = Arc::new(sm);
    match checked {
        Some(mut checked) if !sink.has_errors() => {
            for (p, file) in checked.plugins.iter_mut().zip(&checked.plugin_files) {
                p.path = resolve_plugin_path(&sm.get(*file).name, &p.path);
            }
            let cas = checked
                .backends
                .iter_mut()
                .filter_map(|b| b.tls.as_mut()?.ca.as_mut());
            for ca in cas {
                let file = sm.get(ca.span.file);
                ca.path = resolve_plugin_path(&file.name, &ca.path);
                ca.declared_at = format!("{}:{}", file.name, file.line_col(ca.span.start).0);
            }
            let mut program = compile::compile(checked, sources);
            program.source_map = sm.find(BUILTIN_NAME).map(|builtin| (sm.clone(), builtin));
            if !sink.items.is_empty() {
                program.warnings = Some(Diagnostics::new(sm, sink.items));
            }
            Ok(program)
        }
        _ => Err(Diagnostics::new(sm, sink.items)),
    }
}

/// `join(parent(declaring file's canonical name), path)`; an absolute `path`
/// stays as written (that is what `Path::join` does).
fn resolve_plugin_path(declaring_file: &str, path: &str) -> String {
    let parent = std::path::Path::new(declaring_file)
        .parent()
        .unwrap_or_else(|| std::path::Path::new(""));
    parent.join(path).to_string_lossy().into_owned()
}
