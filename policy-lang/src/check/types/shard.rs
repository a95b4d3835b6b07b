//! The `shard` director's methods: its configuration in `vcl_init` (`add_backend`,
//! `remove_backend`, `clear`, `reconfigure`, `set_warmup`, `set_rampup`, `debug`) and
//! `.backend(by=..., key=..., alt=..., ...)` / `.key(STRING)` as values.

use super::{AddedMember, Lowerer, E};
use crate::ast::{self, Arg};
use crate::check::funcs::{Param, Sig};
use crate::check::ty::Ty;
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::tree::shard::{
    ParamField, ShardBy, ShardHealthy, ShardParams, ShardPick, DEFAULT_REPLICAS, GIVEN_ALT, GIVEN_BY,
    GIVEN_HEALTHY, GIVEN_RAMPUP, GIVEN_WARMUP,
};
use crate::tree::{fold, Expr, Func, Stmt};
use crate::vocab::sub::mask;
use crate::vocab::{Value, Var};

/// One configuration call on a shard director in `vcl_init`, in program order.
pub(crate) struct ShardCall {
    pub director: usize,
    pub op: ShardOp,
}

/// What a configuration call does; arguments are constants, as they are in practice.
pub(crate) enum ShardOp {
    Add {
        member: AddedMember,
        ident: Option<String>,
        rampup: Option<f64>,
        weight: f64,
    },
    Remove {
        member: Option<AddedMember>,
        ident: Option<String>,
    },
    Clear,
    Reconfigure(u32),
    Warmup(f64),
    Rampup(f64),
    /// `associate(p.use())`, or `associate()` to clear.
    Associate(Option<usize>),
}

const fn param(name: &'static str, ty: Ty) -> Param {
    Param {
        name,
        ty,
        optional: true,
        written: false,
    }
}

/// Signatures as Varnish's vmod_directors.vcc has them; the `func` is never run (the call is
/// taken apart into a [`ShardCall`] or a [`ShardPick`]).
const fn method(name: &'static str, params: &'static [Param]) -> Sig {
    Sig {
        name,
        func: Func::ShardKey,
        params,
        ret: Ty::Void,
    }
}

const ADD_BACKEND: Sig = method(
    "xshard.add_backend",
    &[
        param("backend", Ty::Backend),
        param("ident", Ty::Str),
        param("rampup", Ty::Duration),
        param("weight", Ty::Real),
    ],
);
const REMOVE_BACKEND: Sig = method(
    "xshard.remove_backend",
    &[param("backend", Ty::Backend), param("ident", Ty::Str)],
);
const CLEAR: Sig = method("xshard.clear", &[]);
const RECONFIGURE: Sig = method("xshard.reconfigure", &[param("replicas", Ty::Int)]);
const SET_WARMUP: Sig = method("xshard.set_warmup", &[param("probability", Ty::Real)]);
const SET_RAMPUP: Sig = method("xshard.set_rampup", &[param("duration", Ty::Duration)]);
const DEBUG: Sig = method("xshard.debug", &[param("flags", Ty::Int)]);
const BACKEND: Sig = method(
    "xshard.backend",
    &[
        param("by", Ty::Enum(&["HASH", "URL", "KEY", "BLOB"])),
        param("key", Ty::Int),
        param("key_blob", Ty::Blob),
        param("alt", Ty::Int),
        param("warmup", Ty::Real),
        param("rampup", Ty::Bool),
        param("healthy", Ty::Enum(&["CHOSEN", "IGNORE", "ALL"])),
        param("param", Ty::Blob),
        param("resolve", Ty::Enum(&["NOW", "LAZY"])),
    ],
);
const ASSOCIATE: Sig = method("xshard.associate", &[param("param", Ty::Blob)]);
/// `xshard_param.set(...)`: `.backend()`'s arguments without `param` and `resolve`.
const PARAM_SET: Sig = method(
    "xshard_param.set",
    &[
        param("by", Ty::Enum(&["HASH", "URL", "KEY", "BLOB"])),
        param("key", Ty::Int),
        param("key_blob", Ty::Blob),
        param("alt", Ty::Int),
        param("warmup", Ty::Real),
        param("rampup", Ty::Bool),
        param("healthy", Ty::Enum(&["CHOSEN", "IGNORE", "ALL"])),
    ],
);
/// Where a parameter set may be used: vmod_directors' `$Restrict vcl_pipe backend housekeeping`.
const PARAM_SUBS: u16 = mask::PIPE | mask::BACKEND | mask::INIT | mask::FINI;

const KEY: Sig = Sig {
    name: "xshard.key",
    func: Func::ShardKey,
    params: &[Param {
        name: "string",
        ty: Ty::Str,
        optional: false,
        written: false,
    }],
    ret: Ty::Int,
};

impl Lowerer<'_> {
    /// `vd.METHOD(...);` as a statement: a configuration call in `vcl_init`.
    pub(super) fn shard_stmt(
        &mut self,
        director: usize,
        method: &str,
        func: &ast::Ident,
        args: &[Arg],
        span: Span,
    ) -> Option<Stmt> {
        let sig = match method {
            "add_backend" => &ADD_BACKEND,
            "remove_backend" => &REMOVE_BACKEND,
            "clear" => &CLEAR,
            "reconfigure" => &RECONFIGURE,
            "set_warmup" => &SET_WARMUP,
            "set_rampup" => &SET_RAMPUP,
            "debug" => &DEBUG,
            "associate" => &ASSOCIATE,
            "backend" | "key" => {
                // Evaluated for nothing, as Varnish allows.
                let (x, t) = self.shard_value(director, method, func, args, span);
                return (t != Ty::Err).then_some(Stmt::Eval(x));
            }
            _ => {
                self.unknown_method(method, func.span);
                return None;
            }
        };
        let what = format!("`{}`", func.name);
        if !self.scope_check(mask::INIT, func.span, &what, "allowed", Code::NotAllowedHere) {
            return None;
        }
        if self.depth > 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    span,
                    format!("{what} inside a condition is not supported"),
                )
                .label("move this to the top level of `vcl_init`"),
            );
            return None;
        }
        let (x, t) = self.sig_call(sig, func, args, span);
        let Expr::Call(_, values) = x else {
            return None;
        };
        if t == Ty::Err {
            return None;
        }
        let mut values = values.into_iter();
        let mut arg = || values.next().map(fold::expr);
        let op = match method {
            "add_backend" => ShardOp::Add {
                member: self.shard_member(arg(), func.span)?,
                ident: self.constant(arg(), "ident", func.span)?.and_then(text),
                rampup: self
                    .constant(arg(), "rampup", func.span)?
                    .and_then(|v| v.as_real()),
                weight: self
                    .constant(arg(), "weight", func.span)?
                    .and_then(|v| v.as_real())
                    .unwrap_or(1.0),
            },
            "remove_backend" => {
                let member = match arg() {
                    Some(Expr::Const(Value::Unset)) | None => None,
                    backend => Some(self.shard_member(backend, func.span)?),
                };
                let ident = self.constant(arg(), "ident", func.span)?.and_then(text);
                if member.is_none() && ident.is_none() {
                    self.sink.push(
                        Diagnostic::new(
                            Code::BadArguments,
                            span,
                            format!("{what} needs a backend or an ident"),
                        )
                        .label("removes nothing")
                        .hint("e.g. `vd.remove_backend(s1);` or `vd.remove_backend(ident=\"s1-a\");`"),
                    );
                    return None;
                }
                ShardOp::Remove { member, ident }
            }
            "clear" => ShardOp::Clear,
            "reconfigure" => {
                let replicas = self
                    .constant(arg(), "replicas", func.span)?
                    .and_then(|v| v.as_int());
                match replicas.map(u32::try_from) {
                    None => ShardOp::Reconfigure(DEFAULT_REPLICAS),
                    Some(Ok(r)) if r > 0 => ShardOp::Reconfigure(r),
                    Some(_) => {
                        self.sink.push(
                            Diagnostic::new(Code::BadArguments, span, "`replicas` must be a positive number")
                                .label("no ring can be built with it")
                                .hint("Varnish's default is `reconfigure(67)`"),
                        );
                        return None;
                    }
                }
            }
            "set_warmup" => {
                let p = self
                    .constant(arg(), "probability", func.span)?
                    .and_then(|v| v.as_real());
                match p.unwrap_or(0.0) {
                    p if (0.0..1.0).contains(&p) => ShardOp::Warmup(p),
                    // Varnish ignores it with a notice.
                    _ => return None,
                }
            }
            "set_rampup" => ShardOp::Rampup(
                self.constant(arg(), "duration", func.span)?
                    .and_then(|v| v.as_real())
                    .unwrap_or(0.0)
                    .max(0.0),
            ),
            "associate" => ShardOp::Associate(self.param_use(arg(), func.span)?),
            // `debug` only changes what Varnish logs.
            _ => return None,
        };
        self.init.shard.push(super::ShardCall { director, op });
        None
    }

    /// `vd.backend(...)` and `vd.key(STRING)` as values.
    pub(super) fn shard_value(
        &mut self,
        director: usize,
        method: &str,
        func: &ast::Ident,
        args: &[Arg],
        span: Span,
    ) -> (Expr, Ty) {
        match method {
            "key" => self.sig_call(&KEY, func, args, span),
            "backend" => self.shard_backend(director, func, args, span),
            _ => {
                self.unknown_method(method, func.span);
                E
            }
        }
    }

    fn shard_backend(&mut self, director: usize, func: &ast::Ident, args: &[Arg], span: Span) -> (Expr, Ty) {
        let (x, t) = self.sig_call(&BACKEND, func, args, span);
        let Expr::Call(_, values) = x else {
            return E;
        };
        if t == Ty::Err {
            return E;
        }
        let [by, key, key_blob, alt, warmup, rampup, healthy, param, resolve]: [Expr; 9] =
            match values.try_into() {
                Ok(v) => v,
                Err(_) => return E,
            };
        let word = |e: &Expr| match e {
            Expr::Const(Value::Str(s)) => Some(s.to_string()),
            _ => None,
        };
        let Some(param) = self.param_use(Some(param), func.span) else {
            return E;
        };
        let unset = |e: &Expr| matches!(e, Expr::Const(Value::Unset));
        let given = [
            (word(&by).is_some(), GIVEN_BY),
            (!unset(&alt), GIVEN_ALT),
            (!unset(&warmup), GIVEN_WARMUP),
            (!unset(&rampup), GIVEN_RAMPUP),
            (word(&healthy).is_some(), GIVEN_HEALTHY),
        ]
        .iter()
        .filter(|(is, _)| *is)
        .fold(0, |flags, (_, flag)| flags | flag);
        let by = match word(&by).as_deref() {
            Some("URL") => ShardBy::Url,
            Some("KEY") => ShardBy::Key,
            Some("BLOB") => ShardBy::Blob,
            _ => ShardBy::Hash,
        };
        let key = match by {
            ShardBy::Key | ShardBy::Blob => {
                let (given, name) = if by == ShardBy::Key {
                    (key, "key")
                } else {
                    (key_blob, "key_blob")
                };
                if matches!(given, Expr::Const(Value::Unset)) {
                    self.sink.push(
                        Diagnostic::new(
                            Code::BadArguments,
                            span,
                            format!("`by={}` needs the `{name}` argument", word_of(by)),
                        )
                        .label(format!("no `{name}`"))
                        .hint("e.g. `vd.backend(by=KEY, key=vd.key(req.http.X-Session))`"),
                    );
                    return E;
                }
                given
            }
            ShardBy::Hash | ShardBy::Url => {
                let other = [&key, &key_blob]
                    .iter()
                    .any(|e| !matches!(e, Expr::Const(Value::Unset)));
                if other {
                    self.sink.push(
                        Diagnostic::new(
                            Code::BadArguments,
                            span,
                            format!("`key` and `key_blob` do not go with `by={}`", word_of(by)),
                        )
                        .label("ignored by this `by`")
                        .hint("use `by=KEY` with `key`, or `by=BLOB` with `key_blob`"),
                    );
                    return E;
                }
                // The URL of the side the pick is made on; by=HASH on the backend side is
                // Varnish's object hash, which is the URL's here (see docs/policy-language.md).
                if self.cx.mask & mask::BACKEND != 0 && self.cx.mask & mask::CLIENT == 0 {
                    Expr::Var(Var::BereqUrl)
                } else {
                    Expr::Var(Var::ReqUrl)
                }
            }
        };
        let healthy = match word(&healthy).as_deref() {
            Some("IGNORE") => ShardHealthy::Ignore,
            Some("ALL") => ShardHealthy::All,
            _ => ShardHealthy::Chosen,
        };
        let lazy = match word(&resolve).as_deref() {
            Some("LAZY") => true,
            Some(_) => false,
            None => self.cx.mask & mask::INIT != 0,
        };
        let pick = ShardPick {
            director,
            by,
            key,
            alt,
            warmup,
            rampup,
            healthy,
            lazy,
            param,
            given,
        };
        (Expr::Shard(Box::new(pick)), Ty::Backend)
    }

    /// A `param` argument (of `.backend()` or `.associate()`): `p.use()` of a parameter set,
    /// or nothing (`Some(None)`); `None` after reporting anything else.
    fn param_use(&mut self, e: Option<Expr>, span: Span) -> Option<Option<usize>> {
        match e {
            None | Some(Expr::Const(Value::Unset)) => Some(None),
            Some(Expr::ShardParam(id)) => Some(Some(id)),
            Some(_) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::BadArguments,
                        span,
                        "`param` takes a parameter set's `.use()`",
                    )
                    .label("not a `directors.shard_param()` set")
                    .hint("e.g. `vd.associate(p.use());` after `new p = directors.shard_param();`"),
                );
                None
            }
        }
    }

    /// `p.set(...)` / `p.clear()` of a `directors.shard_param()` set as statements: in
    /// `vcl_init` they change the set's defaults (constants, as the ring's configuration is);
    /// on the backend side and in `vcl_pipe` the set of this backend request only.
    pub(super) fn shard_param_stmt(
        &mut self,
        id: usize,
        method: &str,
        func: &ast::Ident,
        args: &[Arg],
        span: Span,
    ) -> Option<Stmt> {
        if !matches!(method, "set" | "clear") {
            let (x, t) = self.shard_param_value(id, method, func, args, span);
            return (t != Ty::Err).then_some(Stmt::Eval(x));
        }
        let what = format!("`{}`", func.name);
        // vmod_directors: "Parameter sets cannot be used in client context except for vcl_pipe".
        if !self.scope_check(PARAM_SUBS, func.span, &what, "available", Code::NotAllowedHere) {
            return None;
        }
        let in_init = self.cx.mask & (mask::INIT | mask::FINI) != 0;
        if in_init && self.cx.mask & !(mask::INIT | mask::FINI) != 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    func.span,
                    format!("{what} in a sub called from `vcl_init` and from request subs"),
                )
                .label("a default in vcl_init, a per-request change elsewhere")
                .hint("call it from separate subs"),
            );
            return None;
        }
        if method == "clear" {
            if !args.is_empty() {
                self.arg_count(span, &func.name, "0");
                return None;
            }
            if in_init {
                if let Some(set) = self.init.shard_params.get_mut(id) {
                    *set = ShardParams::default();
                }
                return None;
            }
            return Some(Stmt::Eval(Expr::Call(Func::ShardParamClear(id), Vec::new())));
        }
        let (x, t) = self.sig_call(&PARAM_SET, func, args, span);
        let Expr::Call(_, values) = x else { return None };
        if t == Ty::Err {
            return None;
        }
        if !in_init {
            return Some(Stmt::Eval(Expr::Call(Func::ShardParamSet(id), values)));
        }
        if self.depth > 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    span,
                    format!("{what} inside a condition is not supported"),
                )
                .label("move this to the top level of `vcl_init`"),
            );
            return None;
        }
        let mut set = ShardParams::default();
        for (i, v) in values.into_iter().map(fold::expr).enumerate() {
            let name = PARAM_SET.params[i].name;
            let Some(v) = self.constant(Some(v), name, func.span)? else {
                continue;
            };
            let int = || v.as_int().and_then(|n| u32::try_from(n).ok());
            match i {
                0 => set.by = v.as_str().map(ShardBy::from_word),
                1 => set.key = int(),
                2 => set.key = Some(crate::tree::shard::blob_key(v.as_str().unwrap_or(""))),
                3 => set.alt = int(),
                4 => set.warmup = v.as_real(),
                5 => set.rampup = Some(v.truthy()),
                _ => set.healthy = v.as_str().map(ShardHealthy::from_word),
            }
        }
        if self.init.shard_params.len() <= id {
            self.init.shard_params.resize(id + 1, ShardParams::default());
        }
        self.init.shard_params[id] = self.init.shard_params[id].merged(&set);
        None
    }

    /// `p.get_by()`, `p.get_key()`, `p.get_alt()`, `p.get_warmup()`, `p.get_rampup()`,
    /// `p.get_healthy()` and `p.use()` of a `directors.shard_param()` set as values.
    pub(super) fn shard_param_value(
        &mut self,
        id: usize,
        method: &str,
        func: &ast::Ident,
        args: &[Arg],
        span: Span,
    ) -> (Expr, Ty) {
        let (field, ty) = match method {
            "get_by" => (ParamField::By, Ty::Str),
            "get_key" => (ParamField::Key, Ty::Int),
            "get_alt" => (ParamField::Alt, Ty::Int),
            "get_warmup" => (ParamField::Warmup, Ty::Real),
            "get_rampup" => (ParamField::Rampup, Ty::Bool),
            "get_healthy" => (ParamField::Healthy, Ty::Str),
            "use" => {
                let what = format!("`{}`", func.name);
                if !self.scope_check(PARAM_SUBS, func.span, &what, "available", Code::NotAllowedHere) {
                    return E;
                }
                if id >= crate::tree::shard::MAX_SHARD_PARAMS {
                    self.sink.push(
                        Diagnostic::new(Code::Unsupported, func.span, "too many shard parameter sets")
                            .label(format!(
                                "at most {} sets can be used",
                                crate::tree::shard::MAX_SHARD_PARAMS
                            ))
                            .hint("share one set between directors with `associate`"),
                    );
                    return E;
                }
                return (Expr::ShardParam(id), Ty::Blob);
            }
            _ => {
                self.sink.push(
                    Diagnostic::new(
                        Code::UnknownFunction,
                        func.span,
                        format!("a shard parameter set has no method `{method}`"),
                    )
                    .label("unknown method")
                    .hint("methods: set, clear, get_by, get_key, get_alt, get_warmup, get_rampup, get_healthy, use"),
                );
                return E;
            }
        };
        if !args.is_empty() {
            self.arg_count(span, &func.name, "0");
            return E;
        }
        (Expr::Call(Func::ShardParamGet(id, field), Vec::new()), ty)
    }

    /// The backend (or director) argument of `add_backend` / `remove_backend`.
    fn shard_member(&mut self, e: Option<Expr>, span: Span) -> Option<AddedMember> {
        match e {
            Some(Expr::Const(Value::Backend(Some(b)))) => Some(AddedMember::Backend(b)),
            Some(Expr::Director(d, None)) => Some(AddedMember::Director(d)),
            Some(Expr::Const(Value::Unset)) | None => {
                self.sink.push(
                    Diagnostic::new(Code::BadArguments, span, "`add_backend` needs a backend")
                        .label("no backend given")
                        .hint("e.g. `vd.add_backend(s1);`"),
                );
                None
            }
            Some(_) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        span,
                        "this director cannot be a member of a shard director",
                    )
                    .label("its pick depends on each request")
                    .hint("add its backends to the shard director instead"),
                );
                None
            }
        }
    }

    /// A configuration argument, which must be a constant: `Some(None)` when not given.
    fn constant(&mut self, e: Option<Expr>, name: &str, span: Span) -> Option<Option<Value<'static>>> {
        match e {
            None | Some(Expr::Const(Value::Unset)) => Some(None),
            Some(Expr::Const(v)) => Some(Some(v)),
            Some(_) => {
                self.sink.push(
                    Diagnostic::new(
                        Code::Unsupported,
                        span,
                        format!("`{name}` must be a constant here"),
                    )
                    .label("the ring is built when the policy loads")
                    .hint(format!("write `{name}` as a literal")),
                );
                None
            }
        }
    }

    fn unknown_method(&mut self, method: &str, span: Span) {
        self.sink.push(
            Diagnostic::new(
                Code::UnknownFunction,
                span,
                format!("a shard director has no method `{method}`"),
            )
            .label("unknown method")
            .hint(
                "shard methods: add_backend, remove_backend, clear, reconfigure, set_warmup, \
                     set_rampup, backend, key, debug",
            ),
        );
    }
}

fn text(v: Value<'static>) -> Option<String> {
    match v {
        Value::Str(s) if !s.is_empty() => Some(s.into_owned()),
        _ => None,
    }
}

fn word_of(by: ShardBy) -> &'static str {
    by.word()
}
