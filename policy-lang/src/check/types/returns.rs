//! `return (...)`: which actions each sub may return, and their arguments.

use std::sync::Arc;

use super::Lowerer;
use crate::ast;
use crate::check::ty::Ty;
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Span};
use crate::tree::{fold, Expr, Ret, Stmt};
use crate::vocab::sub::{self, default_reason};
use crate::vocab::{Action, Sub, Value};

impl Lowerer<'_> {
    pub(super) fn ret(&mut self, action: Option<&ast::ReturnAction>, span: Span) -> Option<Stmt> {
        let Some(a) = action else {
            if self.cx.is_method {
                let legal = Sub::from_name(self.cx.sub_name)
                    .map(sub::legal_actions)
                    .unwrap_or_default();
                self.sink.push(
                    Diagnostic::new(
                        Code::UnknownReturn,
                        span,
                        format!("`return` in `{}` needs an action", self.cx.sub_name),
                    )
                    .label("bare `return` only leaves a custom sub")
                    .hint(format!(
                        "write `return (ACTION);` with one of: {}",
                        legal.join(", ")
                    )),
                );
                return None;
            }
            return Some(Stmt::ReturnSub);
        };
        let name = a.name.name.as_str();
        let args = a.args.as_deref().unwrap_or(&[]);
        match name {
            // builtin.vcl's own `vcl_req_method` pipes unknown methods; edgecache's builtin
            // passes them to the origin, so a copy of builtin.vcl means the same as no policy.
            "pipe" if self.cx.sub_name == "vcl_req_method" && self.cx.mask & !sub::mask::RECV == 0 => {
                self.sink.push(
                    Diagnostic::new(Code::NoEffect, a.span, "`return (pipe)` passes the request here")
                        .label("unknown methods go to the origin as ordinary requests")
                        .hint("edgecache's builtin passes methods it does not know (the origin decides); write `return (pass);` to say so, or `return (pipe);` in `vcl_recv` to tunnel them"),
                );
                return Some(Stmt::Return(Ret::Const(Action::Pass), span));
            }
            _ => {}
        }
        let Some(allowed) = sub::action_mask(name) else {
            let hint = match name {
                "miss" => Some("`return (miss)` was removed in Varnish 6.2: `set req.hash_always_miss = true;` and `return (restart);`".to_string()),
                "hit_for_pass" => Some("Varnish 3 syntax: in `vcl_backend_response` set `beresp.uncacheable = true;` and a `beresp.ttl`".to_string()),
                "error" => None,
                _ => {
                    let legal = Sub::from_name(self.cx.sub_name).map(sub::legal_actions);
                    did_you_mean(name, legal.clone().unwrap_or_default())
                        .map(|s| format!("did you mean `{s}`?"))
                        .or_else(|| legal.map(|l| format!("actions allowed in `{}`: {}", self.cx.sub_name, l.join(", "))))
                }
            };
            self.sink.push(
                Diagnostic::new(
                    Code::UnknownReturn,
                    a.name.span,
                    format!("unknown return action `{name}`"),
                )
                .label("not a VCL action")
                .maybe_hint(hint),
            );
            return None;
        };
        // Arguments first: `pass(DURATION)` is hit-for-pass, only in `vcl_backend_response`.
        let hit_for_pass = name == "pass" && a.args.is_some();
        if hit_for_pass && self.cx.mask & !sub::mask::BE_RESPONSE != 0 {
            self.sink.push(
                Diagnostic::new(
                    Code::IllegalReturn,
                    a.span,
                    "`return (pass(DURATION))` is only allowed in `vcl_backend_response`",
                )
                .label("hit-for-pass is decided on the backend response")
                .hint("write `return (pass);` here"),
            );
            return None;
        }
        let takes_args = matches!(name, "synth" | "error" | "fail" | "vcl") || hit_for_pass;
        if !takes_args && a.args.is_some() {
            let hint = "this action takes no arguments";
            self.sink.push(
                Diagnostic::new(Code::BadArguments, a.span, format!("`{name}` takes no arguments"))
                    .label("unexpected arguments")
                    .hint(hint),
            );
            return None;
        }
        // Legal in every sub this body runs in?
        let bad = self.cx.mask & !allowed;
        if bad != 0 {
            let first = Sub::ALL
                .iter()
                .copied()
                .find(|s| bad & s.bit() != 0)
                .unwrap_or(Sub::Recv);
            let mut d = Diagnostic::new(
                Code::IllegalReturn,
                a.span,
                format!("`return ({name})` is not allowed in `{}`", first.name()),
            );
            d = if self.cx.is_method {
                d.label("illegal action for this sub")
            } else {
                let d = d.label(format!(
                    "illegal in `{}`, which calls `{}`",
                    first.name(),
                    self.cx.sub_name
                ));
                match self.cx.via.get(&first) {
                    Some(site) => d.secondary(*site, format!("called from `{}` here", first.name())),
                    None => d,
                }
            };
            let special = match (first, name) {
                (Sub::Hit, "fetch") => Some("`return (fetch)` from `vcl_hit` was removed in Varnish 6.0; use `return (pass)` or `return (restart)` with `req.hash_always_miss`".to_string()),
                (Sub::Recv, "lookup") => Some("in VCL 4, `vcl_recv` returns `hash` to look up the object".to_string()),
                _ => None,
            };
            let hint = special.unwrap_or_else(|| {
                format!(
                    "actions allowed in `{}`: {}",
                    first.name(),
                    sub::legal_actions(first).join(", ")
                )
            });
            self.sink.push(d.hint(hint));
            return None;
        }
        let action = match name {
            "hash" | "lookup" => Action::Lookup,
            "pass" if hit_for_pass => {
                if args.len() != 1 {
                    self.arg_count(a.span, "pass", "1 (a DURATION)");
                    return None;
                }
                let (d, t) = self.expr(&args[0].value);
                let d = self.coerce(d, t, Ty::Duration, args[0].value.span, None)?;
                return Some(Stmt::Return(Ret::HitForPass(fold::expr(d)), span));
            }
            "pass" => Action::Pass,
            "purge" => Action::Purge,
            "deliver" => Action::Deliver,
            "fetch" => Action::Fetch,
            "restart" => Action::Restart,
            "retry" => Action::Retry,
            "abandon" => Action::Abandon,
            "ok" => Action::Ok,
            "pipe" => Action::Pipe,
            "vcl" => {
                let label = match args {
                    [arg] if arg.name.is_none() => match &arg.value.kind {
                        ast::ExprKind::Name(label) if !label.contains('.') => Some(label),
                        _ => None,
                    },
                    _ => None,
                };
                let Some(label) = label else {
                    self.sink.push(
                        Diagnostic::new(Code::BadArguments, a.span, "`vcl(...)` takes one label name")
                            .label("expected a label, e.g. `return (vcl(site_a));`")
                            .hint("a label is made with `edgecache admin vcl label LABEL NAME` (Varnish's `vcl.label`)"),
                    );
                    return None;
                };
                Action::Vcl {
                    label: Arc::from(label.as_str()),
                }
            }
            "fail" => {
                if args.len() > 1 {
                    self.arg_count(a.span, "fail", "at most 1");
                    return None;
                }
                let reason = match args.first() {
                    Some(r) => {
                        let (e, t) = self.expr(&r.value);
                        Some(self.stringify(e, t, r.value.span)?)
                    }
                    None => None,
                };
                return Some(Stmt::Return(
                    match reason.map(fold::expr) {
                        None => Ret::Const(Action::Fail { reason: None }),
                        Some(Expr::Const(Value::Str(s))) => Ret::Const(Action::Fail {
                            reason: Some(Arc::from(s.as_ref())),
                        }),
                        Some(e) => Ret::Fail(Some(e)),
                    },
                    span,
                ));
            }
            _ => {
                // synth / error
                if args.is_empty() || args.len() > 2 {
                    self.arg_count(a.span, name, "1 or 2 (status, \"reason\")");
                    return None;
                }
                let (st, sty) = self.expr(&args[0].value);
                let st = self.coerce(st, sty, Ty::Int, args[0].value.span, None)?;
                let st = fold::expr(st);
                if let Expr::Const(Value::Int(i)) = st {
                    if !(100..=999).contains(&i) {
                        self.sink.push(
                            Diagnostic::new(
                                Code::BadArguments,
                                args[0].value.span,
                                format!("status {i} is out of range"),
                            )
                            .label("expected 100..=999"),
                        );
                        return None;
                    }
                }
                let reason = match args.get(1) {
                    Some(r) => {
                        let (e, t) = self.expr(&r.value);
                        Some(fold::expr(self.stringify(e, t, r.value.span)?))
                    }
                    None => None,
                };
                let is_synth = name == "synth";
                return Some(Stmt::Return(
                    match (&st, &reason) {
                        (Expr::Const(Value::Int(i)), None | Some(Expr::Const(Value::Str(_)))) => {
                            let status = *i as u16;
                            let reason: Arc<str> = match &reason {
                                Some(Expr::Const(Value::Str(s))) => Arc::from(s.as_ref()),
                                _ => Arc::from(default_reason(status)),
                            };
                            Ret::Const(if is_synth {
                                Action::Synth { status, reason }
                            } else {
                                Action::Error { status, reason }
                            })
                        }
                        _ if is_synth => Ret::Synth(st, reason),
                        _ => Ret::Error(st, reason),
                    },
                    span,
                ));
            }
        };
        Some(Stmt::Return(Ret::Const(action), span))
    }
}
