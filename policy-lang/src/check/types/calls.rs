//! Function calls: vmod functions typed by their signatures, `regsub`, and statement calls.
//!
//! Statement calls are `hash_data`, `synthetic`, `ban`, `std.log`, `plugin.request`, ...

use super::{vars_name, Expect, Lowerer, E};
use crate::ast::{self, Arg, ExprKind};
use std::borrow::Cow;

use crate::check::funcs::{self, Param, Sig};
use crate::check::ty::Ty;
use crate::check::vars::{self, VarRef};
use crate::check::SymKind;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Span};
use crate::tree::{fold, DirectorKind, Expr, Func, PurgeFn, Replacement, Stmt};
use crate::vocab::regex as re;
use crate::vocab::sub::mask;
use crate::vocab::{PluginId, PluginPhase, Value, ValueType};

impl Lowerer<'_> {
    pub(super) fn arg_count(&mut self, span: Span, f: &str, want: &str) {
        self.sink.push(
            Diagnostic::new(
                Code::BadArguments,
                span,
                format!("wrong number of arguments to `{f}`"),
            )
            .label(format!("expected {want}")),
        );
    }

    pub(super) fn call_stmt(&mut self, e: &ast::Expr) -> Option<Stmt> {
        let ExprKind::Call { func, args } = &e.kind else {
            return None;
        };
        let name = func.name.as_str();
        let one_string = |this: &mut Self, fname: &str| -> Option<Expr> {
            if args.len() != 1 {
                this.arg_count(e.span, fname, "1");
                return None;
            }
            let (x, t) = this.expr(&args[0].value);
            this.stringify(x, t, args[0].value.span)
        };
        match name {
            "hash_data" => {
                let ok = self.scope_check(
                    mask::HASH,
                    func.span,
                    "`hash_data`",
                    "allowed",
                    Code::NotAllowedHere,
                );
                let x = one_string(self, name)?;
                ok.then_some(Stmt::HashData(x))
            }
            "synthetic" => {
                let ok = self.scope_check(
                    mask::SYNTH | mask::BE_ERROR,
                    func.span,
                    "`synthetic`",
                    "allowed",
                    Code::NotAllowedHere,
                );
                let x = one_string(self, name)?;
                ok.then_some(Stmt::Synthetic(x))
            }
            "ban" => Some(Stmt::Ban(one_string(self, name)?)),
            "std.ban" => {
                self.need_import("std", func);
                Some(Stmt::Ban(one_string(self, name)?))
            }
            "std.log" => {
                self.need_import("std", func);
                Some(Stmt::Log(one_string(self, name)?))
            }
            "std.syslog" => {
                self.need_import("std", func);
                if args.len() != 2 {
                    self.arg_count(e.span, name, "2 (priority, message)");
                    return None;
                }
                let _ = self.expr(&args[0].value);
                let (x, t) = self.expr(&args[1].value);
                Some(Stmt::Log(self.stringify(x, t, args[1].value.span)?))
            }
            "std.timestamp" => {
                self.need_import("std", func);
                let _ = one_string(self, name);
                None
            }
            "std.collect" => {
                self.need_import("std", func);
                if args.is_empty() || args.len() > 2 {
                    self.arg_count(e.span, name, "1 or 2 (header[, separator])");
                    return None;
                }
                let a = &args[0].value;
                let hdr = match &a.kind {
                    ExprKind::Name(n) => vars::resolve(n),
                    _ => None,
                };
                match hdr {
                    Some(VarRef::Header(scope, h)) => {
                        let what = format!("`{}`", vars_name(scope, &h));
                        let ok = self.scope_check(
                            vars::header_access(scope, &h).write,
                            a.span,
                            &what,
                            "writable",
                            Code::NotWritable,
                        );
                        let h = self.header_name(&h, a.span)?;
                        ok.then_some(Stmt::Collect(scope, h))
                    }
                    _ => {
                        self.sink.push(
                            Diagnostic::new(Code::TypeMismatch, a.span, "`std.collect` expects a header")
                                .label("expected e.g. `req.http.Cookie`"),
                        );
                        None
                    }
                }
            }
            _ if name.starts_with("plugin.") => self.plugin_stmt(func, args, e.span),
            _ => {
                // `obj.add_backend(...)` in vcl_init.
                if let Some((obj, method)) = name.rsplit_once('.') {
                    if let Some(SymKind::ShardParam(id)) = self.syms.get(obj) {
                        return self.shard_param_stmt(id, method, func, args, e.span);
                    }
                    if let Some(SymKind::Director(id, kind)) = self.syms.get(obj) {
                        if kind == DirectorKind::Shard {
                            return self.shard_stmt(id, method, func, args, e.span);
                        }
                        if method == "add_backend" {
                            return self.add_backend(id, kind, func, args, e.span);
                        }
                    }
                }
                if let Some(sig) = funcs::sig_of(name).filter(|s| s.ret == Ty::Void) {
                    self.need_import(vmod_of(sig.name), func);
                    let (x, t) = self.sig_call(sig, func, args, e.span);
                    if sig.func == Func::Rollback && t != Ty::Err && !self.rollback(&x, e.span) {
                        return None;
                    }
                    return (t != Ty::Err).then_some(Stmt::Eval(x));
                }
                let (x, t) = self.expr(e);
                if t == Ty::Err {
                    return None;
                }
                Some(Stmt::Eval(x))
            }
        }
    }

    /// `std.rollback(h)`, as Varnish 7.7's `VRT_Rollback`: `req` in client subs, `bereq` in
    /// backend subs (where the HTTP object is readable), neither in `vcl_pipe` (vmod_std's
    /// `$Restrict`); `resp` and `beresp` are refused. False after reporting.
    fn rollback(&mut self, call: &Expr, span: Span) -> bool {
        let Expr::Call(_, args) = call else { return false };
        let Some(Expr::Const(Value::Str(h))) = args.first() else {
            return false;
        };
        let (allowed, what) = match &**h {
            "req" => (mask::CLIENT & !mask::PIPE, "`std.rollback(req)`"),
            "bereq" => (mask::BACKEND, "`std.rollback(bereq)`"),
            other => {
                // Varnish 7.7 compiles these and panics at run time ("VRT_Rollback 'hp'
                // invalid"): only the request objects have a copy to go back to.
                self.sink.push(
                    Diagnostic::new(Code::Unsupported, span, format!("`std.rollback({other})` is not possible"))
                        .label("only `req` and `bereq` are kept as they were")
                        .hint(if other == "resp" {
                            "`std.rollback(req)` in vcl_deliver or vcl_synth also builds `resp` again,                              as Varnish does; or unset the headers you set"
                        } else {
                            "`std.rollback(bereq)` and `return (retry)` fetch the response again; or                              unset the headers you set"
                        }),
                );
                return false;
            }
        };
        // Varnish: "Not available in subroutine 'vcl_pipe'".
        if !self.scope_check(allowed, span, what, "available", Code::NotAllowedHere) {
            return false;
        }
        if &**h == "req" {
            self.init.rolls_back = true;
        } else {
            self.init.rolls_back_bereq = true;
        }
        true
    }

    /// The vmods' `$Restrict`: where Varnish 7.7 allows their functions. False after reporting.
    fn restricted(&mut self, sig: &Sig, span: Span) -> bool {
        let allowed = match sig.func {
            Func::Purge(_) => mask::HIT | mask::MISS,
            Func::H2Is => mask::CLIENT,
            // vmod_xkey has no $Restrict, but edgecache's key index is reached from the client
            // side only: refusing beats a purge that silently finds nothing.
            Func::Xkey(_) => mask::CLIENT,
            // vmod_unix: "None of them may be called in vcl_init{} or vcl_fini{}".
            Func::Unix(_) => mask::CLIENT | mask::BACKEND,
            _ => return true,
        };
        let what = format!("`{}()`", sig.name);
        self.scope_check(allowed, span, &what, "available", Code::NotAllowedHere)
    }

    /// `purge.soft(ttl, grace, keep)`: the cache's soft purge ends the freshness now and keeps
    /// grace and keep, which is `purge.soft()` (ttl 0, grace and keep untouched); all three 0 is
    /// a hard purge, as vmod_purge documents. Other reductions are refused.
    fn soft_purge(&mut self, call: Expr, span: Span) -> (Expr, Ty) {
        let Expr::Call(_, args) = call else { return E };
        let seconds: Vec<Option<f64>> = args
            .into_iter()
            .map(|a| match fold::expr(a) {
                Expr::Const(Value::Unset) => Some(-1.0),
                Expr::Const(Value::Duration(d)) => Some(d),
                _ => None,
            })
            .collect();
        let ttl = seconds.first().copied().flatten().map(|t| t.max(0.0));
        let kept = |i: usize| seconds.get(i).copied().flatten();
        let purge = match (ttl, kept(1), kept(2)) {
            (Some(t), Some(g), Some(k)) if t == 0.0 && g < 0.0 && k < 0.0 => PurgeFn::Soft,
            (Some(t), Some(g), Some(k)) if t == 0.0 && g == 0.0 && k == 0.0 => PurgeFn::Hard,
            _ => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        span,
                        "`purge.soft` with a ttl, or a grace or keep to reduce to, is not supported",
                    )
                    .label("edgecache's soft purge ends the freshness now and keeps grace and keep")
                    .hint("`purge.soft()` makes the objects stale now (served in grace while one fetch refreshes them); `purge.hard()` removes them"),
                );
                return E;
            }
        };
        (Expr::Call(Func::Purge(purge), Vec::new()), Ty::Int)
    }

    /// `std.port(IP)`: the port of one of the connection's addresses. IP values carry no port
    /// in edgecache, so the argument must be one of the variables that have one.
    fn port(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        self.need_import("std", func);
        let [arg] = args else {
            self.arg_count(span, "std.port", "1 (an IP variable)");
            return E;
        };
        let var = match &arg.value.kind {
            ExprKind::Name(n) => match vars::resolve(n) {
                Some(VarRef::Var(v)) if v.value_type() == ValueType::Ip => Some(v),
                _ => None,
            },
            _ => None,
        };
        let Some(var) = var else {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    arg.value.span,
                    "`std.port` takes `client.ip`, `server.ip`, `remote.ip` or `local.ip`",
                )
                .label("an IP without a port")
                .hint("edgecache IP values carry no port, the connection's addresses do: e.g. `std.port(server.ip)`"),
            );
            return E;
        };
        // Checks that the variable is readable here.
        let (_, t) = self.expr(&arg.value);
        if t == Ty::Err {
            return E;
        }
        (Expr::Call(Func::Port(var), Vec::new()), Ty::Int)
    }

    /// `std.timed_call(SUB)`: the statement runs SUB first, timed (see [`Stmt::Timed`]); the
    /// call reads how long it took. SUB is checked as called from here (the call graph counts
    /// it), so it may use only what this sub may, as Varnish checks a dynamic call.
    fn timed_call(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        self.need_import("std", func);
        let [arg] = args else {
            self.arg_count(span, "std.timed_call", "1 (a sub)");
            return E;
        };
        let sub = match &arg.value.kind {
            ExprKind::Name(n) => match self.syms.get(n) {
                Some(SymKind::Sub(id)) => Some(id),
                _ => None,
            },
            _ => None,
        };
        let Some(sub) = sub else {
            self.sink.push(
                Diagnostic::new(
                    Code::UndefinedSub,
                    arg.value.span,
                    "`std.timed_call` takes the name of a sub",
                )
                .label("not a sub")
                .hint("e.g. `std.timed_call(my_sub)` for `sub my_sub { ... }`"),
            );
            return E;
        };
        self.timed.push(sub);
        let nth = self.timed.len() as i64;
        // The statement counts its timings from the last; this call's is the `nth`.
        (
            Expr::Call(Func::TimedCall, vec![Expr::Const(Value::Int(nth))]),
            Ty::Duration,
        )
    }

    /// `std.cache_req_body(SIZE)`: the runtime buffers bodies up to the largest SIZE before
    /// `vcl_recv`, so SIZE must be known when the policy loads.
    fn req_body_size(&mut self, call: &Expr, span: Span) {
        let Expr::Call(_, args) = call else { return };
        let scoped = self.scope_check(
            mask::RECV,
            span,
            "`std.cache_req_body`",
            "allowed",
            Code::NotAllowedHere,
        );
        match args.first() {
            Some(Expr::Const(Value::Bytes(n))) if scoped => {
                self.init.req_body_limit = Some(self.init.req_body_limit.unwrap_or(0).max(*n));
            }
            Some(Expr::Const(Value::Bytes(_))) => {}
            _ => self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    span,
                    "`std.cache_req_body` takes a constant size",
                )
                .label("the size must be known when the policy loads")
                .hint("e.g. `std.cache_req_body(100KB)`"),
            ),
        }
    }

    /// `plugin.request(NAME);` (vcl_recv) / `plugin.response(NAME);`
    /// (vcl_backend_response, vcl_deliver).
    pub(super) fn plugin_stmt(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> Option<Stmt> {
        let name = func.name.as_str();
        let (phase, allowed) = match name {
            "plugin.request" => (PluginPhase::Request, mask::RECV),
            "plugin.response" => (PluginPhase::Response, mask::BE_RESPONSE | mask::DELIVER),
            _ => {
                let hint = did_you_mean(name, ["plugin.request", "plugin.response"])
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        "run a plugin with `plugin.request(NAME);` (vcl_recv) or `plugin.response(NAME);` (vcl_backend_response, vcl_deliver)".into()
                    });
                self.sink.push(
                    Diagnostic::new(
                        Code::UnknownFunction,
                        func.span,
                        format!("unknown function `{name}`"),
                    )
                    .label("not a plugin phase")
                    .hint(hint),
                );
                return None;
            }
        };
        let ok = self.scope_check(
            allowed,
            func.span,
            &format!("`{name}`"),
            "allowed",
            Code::NotAllowedHere,
        );
        let [arg] = args else {
            self.arg_count(span, name, "1 (a plugin name)");
            return None;
        };
        let a = &arg.value;
        let ExprKind::Name(n) = &a.kind else {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    a.span,
                    format!("`{name}` expects a plugin name"),
                )
                .label("expected the name of a `plugin` declaration")
                .hint(format!("e.g. `{name}(auth);` for `plugin auth {{ ... }}`")),
            );
            return None;
        };
        let id = match self.syms.get(n) {
            Some(SymKind::Plugin(id)) => id,
            other => {
                let names = self.syms.names_of(|k| matches!(k, SymKind::Plugin(_)));
                let mut d = Diagnostic::new(Code::UndefinedPlugin, a.span, format!("undefined plugin `{n}`"))
                    .undeclared();
                d = match other {
                    Some(k) => {
                        let what = k.describe();
                        let article = if what.starts_with(['A', 'a', 'e', 'i', 'o', 'u']) {
                            "an"
                        } else {
                            "a"
                        };
                        d.label(format!("`{n}` is {article} {what}, not a plugin"))
                    }
                    None => d.label("no plugin with this name"),
                };
                let hint = did_you_mean(n, names.iter().map(|s| s.as_str()))
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        if names.is_empty() {
                            format!("declare it at the top level: `plugin {n} {{ .path = \"plugins/{n}.wasm\"; }}`")
                        } else {
                            format!("declared plugins: {}", names.join(", "))
                        }
                    });
                self.sink.push(d.hint(hint));
                return None;
            }
        };
        ok.then_some(Stmt::Plugin(PluginId(id as u32), phase))
    }

    pub(super) fn need_import(&mut self, vmod: &str, func: &ast::Ident) {
        if !self.syms.imports.iter().any(|i| i == vmod) {
            self.sink.push(
                Diagnostic::new(
                    Code::UnknownFunction,
                    func.span,
                    format!("`{}` needs `import {vmod};`", func.name),
                )
                .label(format!("vmod `{vmod}` is not imported"))
                .hint(format!("add `import {vmod};` after the `vcl 4.1;` line"))
                .undeclared(),
            );
        }
    }

    pub(super) fn call(&mut self, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        let name = func.name.as_str();
        match name {
            "regsub" | "regsuball" => return self.regsub(name == "regsuball", args, span),
            _ => {}
        }
        match name {
            "std.port" => return self.port(func, args, span),
            "std.timed_call" => return self.timed_call(func, args, span),
            _ => {}
        }
        let void = funcs::sig_of(name).is_some_and(|sig| sig.ret == Ty::Void);
        if let Some(sig) = funcs::sig_of(name).filter(|_| !void) {
            self.need_import(vmod_of(sig.name), func);
            let call = self.sig_call(sig, func, args, span);
            if sig.func == Func::CacheReqBody {
                self.req_body_size(&call.0, span);
            }
            if call.1 != Ty::Err && !self.restricted(sig, func.span) {
                return E;
            }
            if sig.func == Func::Purge(PurgeFn::Soft) && call.1 != Ty::Err {
                return self.soft_purge(call.0, span);
            }
            return call;
        }
        if let Some(sig) = funcs::connection_sig(name) {
            self.need_import(vmod_of(sig.name), func);
            // Varnish: "Restricted to: client" (the backend side has no client connection).
            let what = format!("`{name}()`");
            if !self.scope_check(mask::CLIENT, func.span, &what, "allowed", Code::NotAllowedHere) {
                return E;
            }
            return self.sig_call(&sig, func, args, span);
        }
        let as_statement = if void || funcs::STATEMENT_FUNCS.contains(&name) {
            Some(format!("call it as a statement: `{name}(...);`"))
        } else if matches!(name, "plugin.request" | "plugin.response") {
            Some(format!("run the plugin as a statement: `{name}(NAME);`"))
        } else {
            None
        };
        if let Some(hint) = as_statement {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    func.span,
                    format!("`{name}` does not return a value"),
                )
                .label("used as a value")
                .hint(hint),
            );
            return E;
        }
        if let Some(note) = funcs::unsupported(name) {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    func.span,
                    format!("`{name}` is not supported by edgecache"),
                )
                .label("not available")
                .hint(note),
            );
            return E;
        }
        // Methods: `<string>.lower()`, `<string>.upper()`, `<director>.backend()`.
        if let Some((recv, method)) = name.rsplit_once('.') {
            if let Some(SymKind::ShardParam(id)) = self.syms.get(recv) {
                return self.shard_param_value(id, method, func, args, span);
            }
            if let Some(SymKind::Director(id, kind)) = self.syms.get(recv) {
                if kind == DirectorKind::Shard {
                    return self.shard_value(id, method, func, args, span);
                }
                if method == "backend" {
                    return self.director_backend(id, kind, name, args, span);
                }
            }
            if matches!(method, "lower" | "upper") && vars::resolve(recv).is_some() {
                if !args.is_empty() {
                    self.arg_count(span, name, "0");
                    return E;
                }
                let recv_span = Span {
                    end: func.span.start + recv.len() as u32,
                    ..func.span
                };
                let (x, t) = self.name(recv, recv_span, Expect::Any);
                let Some(x) = self.stringify(x, t, recv_span) else {
                    return E;
                };
                let f = if method == "lower" {
                    Func::ToLower
                } else {
                    Func::ToUpper
                };
                return (Expr::Call(f, vec![x]), Ty::Str);
            }
        }
        let vmod = name.split('.').next().unwrap_or("");
        let imported = self.syms.imports.iter().any(|i| i == vmod);
        // `OBJ.method()`: OBJ may be made with `new` in a file that includes this one.
        let maybe_object = name.contains('.') && !imported && !funcs::VMODS.contains(&vmod);
        let hint = did_you_mean(name, funcs::all_names()).map(|s| format!("did you mean `{s}`?"));
        let hint = hint.or_else(|| {
            (name.contains('.') && !funcs::VMODS.contains(&vmod)).then(|| {
                if imported {
                    format!("vmod `{vmod}` is not available in edgecache")
                } else {
                    format!(
                        "`{vmod}` is neither an imported vmod nor an object made with `new` in \
                         `vcl_init` (a `new` that failed is reported on its own line)"
                    )
                }
            })
        });
        let d = Diagnostic::new(
            Code::UnknownFunction,
            func.span,
            format!("unknown function `{name}`"),
        )
        .label("not a known function")
        .maybe_hint(hint);
        self.sink.push(if maybe_object { d.undeclared() } else { d });
        for a in args {
            let _ = self.expr(&a.value);
        }
        E
    }

    pub(super) fn sig_call(&mut self, sig: &Sig, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        let mut slots: Vec<Option<&Arg>> = vec![None; sig.params.len()];
        let mut pos = 0;
        for a in args {
            let idx = match &a.name {
                Some(n) => match sig.params.iter().position(|p| p.name == n.name) {
                    Some(i) => i,
                    None => {
                        let names: Vec<&str> = sig.params.iter().map(|p| p.name).collect();
                        self.sink.push(
                            Diagnostic::new(
                                Code::BadArguments,
                                n.span,
                                format!("`{}` has no argument `{}`", sig.name, n.name),
                            )
                            .label("unknown argument")
                            .hint(format!("arguments: {}", names.join(", "))),
                        );
                        return E;
                    }
                },
                None => {
                    let i = pos;
                    pos += 1;
                    i
                }
            };
            if idx >= slots.len() {
                self.arg_count(span, sig.name, &format!("at most {}", sig.params.len()));
                return E;
            }
            slots[idx] = Some(a);
        }
        let mut out = Vec::with_capacity(slots.len());
        let mut failed = false;
        for (p, a) in sig.params.iter().zip(slots) {
            match a {
                Some(a) => match self.arg(sig, p, &a.value) {
                    Some(x) => out.push(x),
                    None => failed = true,
                },
                None if p.optional => out.push(Expr::Const(Value::Unset)),
                None => {
                    self.sink.push(
                        Diagnostic::new(
                            Code::BadArguments,
                            func.span,
                            format!("`{}` is missing argument `{}`", sig.name, p.name),
                        )
                        .label(format!("needs `{}` ({})", p.name, p.ty.name())),
                    );
                    failed = true;
                }
            }
        }
        if failed {
            return E;
        }
        (Expr::Call(sig.func, out), sig.ret)
    }

    /// An argument for parameter `p` of `sig`, converted to its type.
    fn arg(&mut self, sig: &Sig, p: &Param, e: &ast::Expr) -> Option<Expr> {
        match (p.ty, &e.kind) {
            (Ty::Regex, ExprKind::Str(pattern)) => match re::compile(pattern, e.span) {
                Ok(regex) => Some(Expr::Pattern(Box::new(regex))),
                Err(d) => {
                    self.sink.push(d);
                    None
                }
            },
            (Ty::Regex, _) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        e.span,
                        format!("`{}` takes its regex as a string literal", sig.name),
                    )
                    .label("expected e.g. \"^session\"")
                    .hint("the pattern is compiled once, when the policy loads, as Varnish does"),
                );
                None
            }
            (Ty::Header, _) => self.header_arg(sig, p, e),
            (Ty::Enum(words), ExprKind::Name(word)) if words.contains(&word.as_str()) => {
                Some(Expr::Const(Value::Str(Cow::Owned(word.clone()))))
            }
            (Ty::Enum(words), _) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::BadArguments,
                        e.span,
                        format!("`{}` takes one of {} as `{}`", sig.name, words.join(", "), p.name),
                    )
                    .label("not one of these words")
                    .hint(format!("e.g. `{}={}`", p.name, words[0])),
                );
                None
            }
            (ty, _) => {
                let expect = if ty == Ty::Backend {
                    Expect::Backend
                } else {
                    Expect::Any
                };
                let (x, t) = self.expr_expect(e, expect);
                self.coerce(x, t, ty, e.span, None)
            }
        }
    }

    /// A header argument (`req.http.Cookie`): the header itself, readable (or, for a parameter
    /// the function changes, writable) where the call is.
    fn header_arg(&mut self, sig: &Sig, p: &Param, e: &ast::Expr) -> Option<Expr> {
        let header = match &e.kind {
            ExprKind::Name(n) => vars::resolve(n),
            _ => None,
        };
        let Some(VarRef::Header(scope, name)) = header else {
            self.sink.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    e.span,
                    format!("`{}` expects a header", sig.name),
                )
                .label("expected e.g. `req.http.Cookie`"),
            );
            return None;
        };
        let what = format!("`{}`", vars_name(scope, &name));
        let access = vars::header_access(scope, &name);
        let ok = if p.written {
            self.scope_check(access.write, e.span, &what, "writable", Code::NotWritable)
        } else {
            self.scope_check(access.read, e.span, &what, "readable", Code::NotReadable)
        };
        let name = self.header_name(&name, e.span)?;
        ok.then_some(Expr::Header(scope, name))
    }

    pub(super) fn regsub(&mut self, all: bool, args: &[Arg], span: Span) -> (Expr, Ty) {
        let fname = if all { "regsuball" } else { "regsub" };
        if args.len() != 3 {
            self.arg_count(span, fname, "3 (string, regex, replacement)");
            return E;
        }
        let (s, st) = self.expr(&args[0].value);
        let pat = &args[1].value;
        let regex = match &pat.kind {
            ExprKind::Str(p) => match re::compile(p, pat.span) {
                Ok(r) => Some(r),
                Err(d) => {
                    self.sink.push(d);
                    None
                }
            },
            _ => {
                self.sink.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        pat.span,
                        format!("the regex of `{fname}` must be a string literal"),
                    )
                    .label("expected a literal such as \"^/old/(.*)\""),
                );
                None
            }
        };
        let (r, rt) = self.expr(&args[2].value);
        let s = self.stringify(s, st, args[0].value.span);
        let r = self.stringify(r, rt, args[2].value.span);
        let (Some(s), Some(regex), Some(r)) = (s, regex, r) else {
            return E;
        };
        let replacement = match fold::expr(r) {
            Expr::Const(Value::Str(c)) => Replacement::Const(re::convert_replacement(&c)),
            other => Replacement::Dynamic(Box::new(other)),
        };
        (
            Expr::Regsub {
                subject: Box::new(s),
                regex: Box::new(regex),
                replacement,
                all,
            },
            Ty::Str,
        )
    }
}

/// The vmod a function belongs to: `cookie` for `cookie.get`.
fn vmod_of(function: &str) -> &str {
    function.split_once('.').map_or("", |(vmod, _)| vmod)
}
