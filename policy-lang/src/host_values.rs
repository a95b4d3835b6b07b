//! `std.fileread(PATH)`, `std.blobread(PATH)` and `std.getenv(NAME)`: what a policy reads from
//! the host, read once when the policy loads (through the caller's [`SourceLoader`]) and kept as
//! string (or BLOB) literals.
//!
//! Varnish reads a file on the first `std.fileread` and keeps it until the VCL is discarded;
//! here the file is read at load and becomes one of the policy's sources, so the reload watcher
//! follows it as it follows an include. A path is relative to the file that names it. Both
//! take their argument as a literal (edgecache resolves them before checking).

use crate::ast::{Decl, Expr, ExprKind, Stmt, StmtKind};
use crate::diagnostics::{Code, Diagnostic, Sink, SourceMap};
use crate::SourceLoader;

/// Replaces every `std.fileread("...")` / `std.blobread("...")` / `std.getenv("...")` of
/// `decls` by what it reads.
pub(crate) fn resolve(
    decls: &mut [Decl],
    loader: Option<&dyn SourceLoader>,
    sm: &mut SourceMap,
    sink: &mut Sink,
) {
    let mut host = Host { loader, sm, sink };
    for decl in decls {
        if let Decl::Sub(sub) = decl {
            host.stmts(&mut sub.body);
        }
    }
}

struct Host<'a> {
    loader: Option<&'a dyn SourceLoader>,
    sm: &'a mut SourceMap,
    sink: &'a mut Sink,
}

impl Host<'_> {
    fn stmts(&mut self, stmts: &mut [Stmt]) {
        for stmt in stmts {
            match &mut stmt.kind {
                StmtKind::Set { value, .. } => self.expr(value),
                StmtKind::If { branches, otherwise } => {
                    for (cond, body) in branches {
                        self.expr(cond);
                        self.stmts(body);
                    }
                    if let Some(body) = otherwise {
                        self.stmts(body);
                    }
                }
                StmtKind::Return(Some(ret)) => {
                    for arg in ret.args.iter_mut().flatten() {
                        self.expr(&mut arg.value);
                    }
                }
                StmtKind::Block(body) => self.stmts(body),
                StmtKind::Expr(e) | StmtKind::New { ctor: e, .. } => self.expr(e),
                StmtKind::Unset { .. }
                | StmtKind::Return(None)
                | StmtKind::Call(_)
                | StmtKind::Include(_) => {}
            }
        }
    }

    fn expr(&mut self, e: &mut Expr) {
        match &mut e.kind {
            ExprKind::Call { func, args }
                if matches!(func.name.as_str(), "std.fileread" | "std.blobread" | "std.getenv") =>
            {
                let literal = match args.as_slice() {
                    [arg] if arg.name.is_none() => match &arg.value.kind {
                        ExprKind::Str(s) => Some(s.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                // Anything else is left for the checker to refuse.
                let Some(literal) = literal else { return };
                let read = match func.name.as_str() {
                    // An unset variable reads as "", as in Varnish (which returns NULL).
                    "std.getenv" => Ok(ExprKind::Str(
                        self.loader.and_then(|l| l.getenv(&literal)).unwrap_or_default(),
                    )),
                    "std.blobread" => self
                        .read(&literal, e.span.file)
                        .map(|bytes| ExprKind::Blob(crate::eval::vmods::blob::hex(&bytes, false))),
                    _ => self
                        .read(&literal, e.span.file)
                        .and_then(|bytes| {
                            String::from_utf8(bytes).map_err(|_| "not UTF-8 text: use std.blobread".into())
                        })
                        .map(ExprKind::Str),
                };
                match read {
                    Ok(kind) => e.kind = kind,
                    Err(why) => self.sink.push(
                        Diagnostic::new(Code::Include, e.span, format!("cannot read `{literal}`: {why}"))
                            .label(format!("{} reads it when the policy loads", func.name)),
                    ),
                }
            }
            ExprKind::Call { args, .. } => args.iter_mut().for_each(|a| self.expr(&mut a.value)),
            ExprKind::Not(inner) | ExprKind::Neg(inner) => self.expr(inner),
            ExprKind::Binary { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            _ => {}
        }
    }

    fn read(&mut self, path: &str, from: crate::diagnostics::FileId) -> Result<Vec<u8>, String> {
        let loader = self
            .loader
            .ok_or("files are read only when a policy is loaded from a file")?;
        let from = self.sm.get(from).name.clone();
        let (name, bytes) = loader.load_bytes(path, Some(&from))?;
        // A source like an include: the reload watcher follows it.
        if self.sm.find(&name).is_none() {
            self.sm.add(name, String::from_utf8_lossy(&bytes).into_owned());
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::TestContext;
    use crate::{load, Action, Scope, SourceLoader, Sub};

    /// `main.vcl`, `errors/503.html` next to it, and `EDGE_ROLE=canary` in its environment.
    struct Host;

    const MAIN: &str = r#"vcl 4.1;
import std;
backend default { .host = "127.0.0.1"; }
sub vcl_recv {
    set req.http.X-Role = std.getenv("EDGE_ROLE");
    set req.http.X-Unset = std.getenv("EDGE_NOT_SET");
    return (synth(503));
}
sub vcl_synth {
    synthetic(std.fileread("errors/503.html"));
    return (deliver);
}
"#;

    impl SourceLoader for Host {
        fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
            match (path, from) {
                ("main.vcl", None) => Ok(("/etc/edge/main.vcl".into(), MAIN.into())),
                ("errors/503.html", Some("/etc/edge/main.vcl")) => {
                    Ok(("/etc/edge/errors/503.html".into(), "<h1>Back soon</h1>".into()))
                }
                _ => Err("No such file or directory".into()),
            }
        }
        fn getenv(&self, name: &str) -> Option<String> {
            (name == "EDGE_ROLE").then(|| "canary".to_string())
        }
    }

    #[test]
    fn fileread_and_getenv_are_read_when_the_policy_loads() {
        let p = load("main.vcl", &Host).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::request("GET", "/");
        assert!(matches!(
            p.run(Sub::Recv, &mut ctx),
            Action::Synth { status: 503, .. }
        ));
        assert_eq!(ctx.get_header(Scope::Req, "x-role").as_deref(), Some("canary"));
        assert_eq!(ctx.get_header(Scope::Req, "x-unset").as_deref(), Some(""));
        p.run(Sub::Synth, &mut ctx);
        assert_eq!(ctx.body.as_deref(), Some("<h1>Back soon</h1>"));
        // Watched for reloads like an include.
        assert!(
            p.sources().iter().any(|s| s == "/etc/edge/errors/503.html"),
            "{:?}",
            p.sources()
        );
    }

    #[test]
    fn blobread_reads_bytes_that_need_not_be_text() {
        // vmod_std.vcc: `BLOB blobread(STRING)`, here read when the policy loads.
        struct Binary;
        impl SourceLoader for Binary {
            fn load(&self, path: &str, _from: Option<&str>) -> Result<(String, String), String> {
                match path {
                    "main.vcl" => Ok((
                        "main.vcl".into(),
                        "vcl 4.1;\nimport std;\nimport blob;\nbackend default { .host = \"127.0.0.1\"; }\n\
                         sub vcl_deliver { set resp.http.X-Icon = blob.encode(BASE64, blob=std.blobread(\"icon.bin\")); }\n"
                            .into(),
                    )),
                    _ => Err("not UTF-8 text".into()),
                }
            }
            fn load_bytes(&self, path: &str, from: Option<&str>) -> Result<(String, Vec<u8>), String> {
                match path {
                    "icon.bin" => Ok(("/srv/icon.bin".into(), vec![0x00, 0xff, 0x10, 0x80])),
                    _ => self
                        .load(path, from)
                        .map(|(name, text)| (name, text.into_bytes())),
                }
            }
        }
        let p = load("main.vcl", &Binary).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::request("GET", "/");
        p.run(Sub::Deliver, &mut ctx);
        assert_eq!(ctx.get_header(Scope::Resp, "x-icon").as_deref(), Some("AP8QgA=="));
        assert!(
            p.sources().iter().any(|s| s == "/srv/icon.bin"),
            "watched like an include"
        );
    }

    #[test]
    fn a_missing_file_or_a_computed_path_is_refused() {
        struct Missing;
        impl SourceLoader for Missing {
            fn load(&self, path: &str, _from: Option<&str>) -> Result<(String, String), String> {
                match path {
                    "main.vcl" => Ok((
                        "main.vcl".into(),
                        "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
                         sub vcl_synth { synthetic(std.fileread(\"gone.html\") + std.fileread(req.url)); }\n"
                            .into(),
                    )),
                    _ => Err("No such file or directory".into()),
                }
            }
        }
        let Err(refused) = load("main.vcl", &Missing) else {
            panic!("a missing file is refused")
        };
        let err = refused.render();
        assert!(
            err.contains("cannot read `gone.html`: No such file or directory"),
            "{err}"
        );
        assert!(err.contains("give it a string literal"), "{err}");
    }
}
