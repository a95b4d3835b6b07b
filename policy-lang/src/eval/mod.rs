//! Evaluation: [`Program::run`] runs a compiled sub against a [`Context`].
//!
//! Tree-walking over the resolved
//! tree: variables are slots, headers pre-parsed names, regexes compiled.
//! Reads borrow from the context or the program (`Value<'a>`), so tests and
//! comparisons allocate nothing; strings are built only when a value is
//! concatenated or written.

mod builtins;
mod context;
mod director;
mod fnmatch;
#[cfg(any(test, feature = "test-util"))]
pub(crate) mod generated;
mod shard;
mod strftime;
#[cfg(any(test, feature = "test-util"))]
pub(crate) mod testing;
pub(crate) mod vmods;

use context::OwnTask;
pub use context::{Context, PluginOutcome};
pub use vmods::Task;

use std::borrow::Cow;
use std::sync::Arc;

use crate::compile::Program;
use crate::tree::{Expr, Func, Replacement, Ret, Stmt};
use crate::vocab::regex::convert_replacement;
use crate::vocab::sub::{default_reason, mask};
use crate::vocab::{arith, compare, write_value, Action, CmpOp, PluginId, Sub, Value, ValueType};

enum Flow {
    Next,
    /// Bare `return;` from a custom sub.
    Leave,
    Done(Action),
}

impl Program {
    /// Runs `sub`: the user's code, then (if it did not return) the builtin
    /// VCL's code for that sub, exactly as Varnish appends `builtin.vcl`.
    pub fn run(&self, sub: Sub, ctx: &mut dyn Context) -> Action {
        if self.task_vmods && ctx.task().is_none() {
            // A context without a task of its own: the vmods' state lasts this sub.
            return self.run_in(sub, &mut OwnTask::new(ctx));
        }
        self.run_in(sub, ctx)
    }

    fn run_in(&self, sub: Sub, ctx: &mut dyn Context) -> Action {
        let Some(i) = self.methods[sub.index()] else {
            return sub.default_action();
        };
        match self.exec_block(&self.bodies[i], sub, ctx) {
            Flow::Done(a) => a,
            Flow::Next | Flow::Leave => sub.default_action(),
        }
    }

    fn exec_block(&self, stmts: &[Stmt], sub: Sub, ctx: &mut dyn Context) -> Flow {
        for s in stmts {
            // Most statements of most subs are `if`s: run here, without `exec`'s call and frame.
            let flow = match s {
                Stmt::If(branches, otherwise) => self.exec_if(branches, otherwise, sub, ctx),
                other => self.exec(other, sub, ctx),
            };
            match flow {
                Flow::Next => {}
                other => return other,
            }
        }
        Flow::Next
    }

    /// An `if` (with its `elsif`s and `else`): the body of the first branch whose condition
    /// holds, else `otherwise`.
    #[inline(always)]
    fn exec_if(
        &self,
        branches: &[(Expr, Vec<Stmt>)],
        otherwise: &[Stmt],
        sub: Sub,
        ctx: &mut dyn Context,
    ) -> Flow {
        for (c, body) in branches {
            if self.cond_with_effects(c, ctx) {
                return self.exec_block(body, sub, ctx);
            }
        }
        if otherwise.is_empty() {
            Flow::Next
        } else {
            self.exec_block(otherwise, sub, ctx)
        }
    }

    /// `sub` is the method being run (custom subs run in their caller's).
    fn exec(&self, s: &Stmt, sub: Sub, ctx: &mut dyn Context) -> Flow {
        match s {
            Stmt::SetVar(v, e) => {
                let val = self.eval(e, &*ctx);
                // `set req.url = std.querysort(req.url);` and the like mostly leave a string
                // as it was: nothing to copy or write back.
                if let (Value::Str(new), Value::Str(old)) = (&val, ctx.get(*v)) {
                    if *new == old {
                        return Flow::Next;
                    }
                }
                let val = val.into_owned();
                let val = match (v.value_type(), val) {
                    (ValueType::Str, Value::Unset) => Value::Str(Cow::Borrowed("")),
                    (ValueType::Int, Value::Real(r)) => Value::Int(r as i64),
                    (ValueType::Real, Value::Int(i)) => Value::Real(i as f64),
                    (_, val) => val,
                };
                ctx.set(*v, val);
            }
            Stmt::UnsetVar(v) => ctx.unset(*v),
            Stmt::SetHeader(scope, name, e) => {
                let s = self.to_string_owned(self.eval(e, &*ctx));
                ctx.set_header(*scope, name, s);
            }
            Stmt::UnsetHeader(scope, name) => ctx.unset_header(*scope, name),
            Stmt::If(branches, otherwise) => return self.exec_if(branches, otherwise, sub, ctx),
            Stmt::Return(r, at) => {
                ctx.returned(*at);
                return Flow::Done(self.ret(r, &*ctx));
            }
            Stmt::ReturnSub => return Flow::Leave,
            Stmt::Call(i) => {
                let native = if self.builtin_recv == Some(*i) {
                    ctx.builtin_recv()
                } else if self.builtin_backend_response == Some(*i) {
                    ctx.builtin_backend_response()
                } else {
                    None
                };
                match native {
                    Some(Some(action)) => return Flow::Done(action),
                    Some(None) => {}
                    None => {
                        if let Flow::Done(a) = self.exec_block(&self.bodies[*i], sub, ctx) {
                            return Flow::Done(a);
                        }
                    }
                }
            }
            Stmt::HashData(e) => {
                let s = self.to_string_owned(self.eval(e, &*ctx));
                ctx.hash_data(&s);
            }
            Stmt::Synthetic(e) => {
                let s = self.to_string_owned(self.eval(e, &*ctx));
                ctx.synthetic(s);
            }
            Stmt::Ban(e) => {
                let s = self.to_string_owned(self.eval(e, &*ctx));
                self.do_ban(&s, ctx);
            }
            Stmt::Log(e) => {
                let s = self.to_string_owned(self.eval(e, &*ctx));
                ctx.log(&s);
            }
            Stmt::Collect(scope, name) => {
                if let Some(v) = ctx.header(*scope, name).map(Cow::into_owned) {
                    ctx.set_header(*scope, name, v);
                }
            }
            Stmt::Eval(Expr::Call(f, args)) if f.is_effect() => self.vmod_effect(*f, args, ctx),
            Stmt::Eval(e) => {
                if let Expr::Call(Func::Ban, args) = e {
                    if let Some(a) = args.first() {
                        let s = self.to_string_owned(self.eval(a, &*ctx));
                        self.do_ban(&s, ctx);
                    }
                } else {
                    let _ = self.eval(e, &*ctx);
                }
            }
            Stmt::Block(b) => return self.exec_block(b, sub, ctx),
            Stmt::Timed(subs, inner) => return self.exec_timed(subs, inner, sub, ctx),
            Stmt::Plugin(id, phase) => match ctx.run_plugin(*id, *phase) {
                // `.on_error = continue` is the runtime's job: a failed
                // fail-open plugin comes back as `Continue`.
                PluginOutcome::Continue => {}
                PluginOutcome::LocalResponse { .. } => {
                    return Flow::Done(Action::PluginResponse { plugin: *id });
                }
                PluginOutcome::Failed => return Flow::Done(self.plugin_failed(*id, sub)),
                PluginOutcome::Paused => return Flow::Done(Action::PluginPaused { plugin: *id }),
            },
        }
        Flow::Next
    }

    /// A statement using `std.timed_call`: each sub runs, timed (`VTIM_mono()` around
    /// `VRT_call`, as Varnish measures), then the statement with the timings. A `return` in a
    /// timed sub ends the calling sub once the statement has run.
    fn exec_timed(&self, subs: &[usize], inner: &Stmt, sub: Sub, ctx: &mut dyn Context) -> Flow {
        if ctx.task().is_none() {
            return self.exec_timed(subs, inner, sub, &mut OwnTask::new(ctx));
        }
        let mut timed = Vec::with_capacity(subs.len());
        let mut returned = None;
        for &i in subs {
            let started = std::time::Instant::now();
            let flow = self.exec_block(&self.bodies[i], sub, ctx);
            timed.push(started.elapsed().as_secs_f64());
            if let (Flow::Done(action), None) = (flow, &returned) {
                returned = Some(action);
            }
        }
        // Statements nested in the subs kept their own timings; these are this statement's.
        let outer = ctx.task_mut().map(|t| std::mem::replace(&mut t.timed, timed));
        let flow = self.exec(inner, sub, ctx);
        if let (Some(task), Some(outer)) = (ctx.task_mut(), outer) {
            task.timed = outer;
        }
        match returned {
            Some(action) => Flow::Done(action),
            None => flow,
        }
    }

    /// A fail-closed plugin failure: 503, as `return (synth(503, ...))` on
    /// the client side; on the backend side (where `synth` is not a legal
    /// action) as `return (error(503, ...))`.
    fn plugin_failed(&self, id: PluginId, sub: Sub) -> Action {
        let name = self.plugins.get(id.index()).map_or("?", |p| p.name.as_str());
        let reason: Arc<str> = Arc::from(format!("plugin {name} failed"));
        if sub.bit() & mask::BACKEND != 0 {
            Action::Error { status: 503, reason }
        } else {
            Action::Synth { status: 503, reason }
        }
    }

    /// An `if` condition; `if (std.ban(...))` / `if (!std.ban(...))` bans (Varnish's example
    /// of `std.ban_error()`), which evaluating a value cannot.
    fn cond_with_effects(&self, c: &Expr, ctx: &mut dyn Context) -> bool {
        let (call, negate) = match c {
            Expr::Not(inner) => (&**inner, true),
            other => (other, false),
        };
        match call {
            Expr::Call(Func::Ban, args) => {
                let s = args.first().map(|a| self.to_string_owned(self.eval(a, &*ctx)));
                self.do_ban(&s.unwrap_or_default(), ctx) != negate
            }
            _ => self.cond(c, &*ctx),
        }
    }

    fn do_ban(&self, s: &str, ctx: &mut dyn Context) -> bool {
        let (banned, error) = match crate::ban::parse_ban(s) {
            Ok(b) => {
                ctx.ban(b);
                (true, String::new())
            }
            Err(e) => {
                let first = e.iter().next().map(|d| d.message.clone()).unwrap_or_default();
                ctx.log(&format!("ban(\"{s}\") failed: {first}"));
                (false, first)
            }
        };
        if let Some(task) = ctx.task_mut() {
            task.ban_error = error;
        }
        banned
    }

    fn ret(&self, r: &Ret, ctx: &dyn Context) -> Action {
        let status = |e: &Expr| -> u16 {
            match self.eval(e, ctx).as_int() {
                Some(i) if (100..=999).contains(&i) => i as u16,
                _ => 503,
            }
        };
        let reason = |e: &Option<Expr>, st: u16| -> Arc<str> {
            match e {
                Some(e) => Arc::from(self.to_string_owned(self.eval(e, ctx))),
                None => Arc::from(default_reason(st)),
            }
        };
        match r {
            Ret::Const(a) => a.clone(),
            Ret::Synth(s, r) => {
                let status = status(s);
                Action::Synth {
                    status,
                    reason: reason(r, status),
                }
            }
            Ret::Error(s, r) => {
                let status = status(s);
                Action::Error {
                    status,
                    reason: reason(r, status),
                }
            }
            Ret::Fail(r) => Action::Fail {
                reason: r
                    .as_ref()
                    .map(|e| Arc::from(self.to_string_owned(self.eval(e, ctx)))),
            },
            Ret::HitForPass(d) => {
                let seconds = self.eval(d, ctx).as_duration().unwrap_or(0.0).max(0.0);
                Action::HitForPass {
                    ttl: std::time::Duration::try_from_secs_f64(seconds).unwrap_or_default(),
                }
            }
        }
    }

    /// `e` as a condition: `self.eval(e, ctx).truthy()`, without building
    /// values for the boolean operators, tests and matches that make up
    /// most conditions.
    fn cond(&self, e: &Expr, ctx: &dyn Context) -> bool {
        match e {
            Expr::And(a, b) => self.cond(a, ctx) && self.cond(b, ctx),
            Expr::Or(a, b) => self.cond(a, ctx) || self.cond(b, ctx),
            Expr::Not(a) => !self.cond(a, ctx),
            Expr::StrCmp { op, subject, lit } => {
                let s = self.str_of(subject, ctx);
                match op {
                    CmpOp::Eq => *s == **lit,
                    CmpOp::Ne => *s != **lit,
                    op => op.holds(s.as_ref().cmp(lit)),
                }
            }
            Expr::Match {
                subject,
                matcher,
                negate,
            } => matcher.is_match(&self.str_of(subject, ctx)) != *negate,
            // A header is true when present (even empty).
            Expr::Header(scope, name) => ctx.header(*scope, name).is_some(),
            Expr::Const(v) => v.truthy(),
            _ => self.eval(e, ctx).truthy(),
        }
    }

    /// `e` as a string operand of `~` or a string comparison: unset (and
    /// anything that is not a string) reads as `""`.
    #[inline]
    fn str_of<'a>(&'a self, e: &'a Expr, ctx: &'a dyn Context) -> Cow<'a, str> {
        let v = match e {
            Expr::Header(scope, name) => return ctx.header(*scope, name).unwrap_or(Cow::Borrowed("")),
            Expr::Var(v) => ctx.get(*v),
            _ => self.eval(e, ctx),
        };
        match v {
            Value::Str(s) => s,
            _ => Cow::Borrowed(""),
        }
    }

    pub(crate) fn eval<'a>(&'a self, e: &'a Expr, ctx: &'a dyn Context) -> Value<'a> {
        match e {
            Expr::Const(v) => match v {
                Value::Str(s) => Value::Str(Cow::Borrowed(s.as_ref())),
                other => other.clone(),
            },
            Expr::Var(v) => ctx.get(*v),
            // Read only by the vmod function it is an argument of.
            Expr::Pattern(_) => Value::Unset,
            Expr::Header(scope, name) => match ctx.header(*scope, name) {
                Some(s) => Value::Str(s),
                None => Value::Unset,
            },
            Expr::Concat(parts) => {
                if let [one] = parts.as_slice() {
                    let v = self.eval(one, ctx);
                    return match v {
                        Value::Str(s) => Value::Str(s),
                        Value::Unset => Value::Str(Cow::Borrowed("")),
                        other => Value::Str(Cow::Owned(self.to_string_owned(other))),
                    };
                }
                let mut out = String::new();
                for p in parts {
                    let v = self.eval(p, ctx);
                    self.write(&mut out, &v);
                }
                Value::Str(Cow::Owned(out))
            }
            Expr::Arith(op, a, b) => {
                let (a, b) = (self.eval(a, ctx), self.eval(b, ctx));
                arith(*op, &a, &b).unwrap_or(Value::Unset)
            }
            Expr::Neg(a) => match self.eval(a, ctx) {
                Value::Int(i) => Value::Int(i.wrapping_neg()),
                Value::Real(r) => Value::Real(-r),
                Value::Duration(d) => Value::Duration(-d),
                other => other,
            },
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.eval(a, ctx), self.eval(b, ctx));
                Value::Bool(compare(*op, &a, &b))
            }
            Expr::StrCmp { .. } | Expr::Match { .. } | Expr::And(..) | Expr::Or(..) | Expr::Not(_) => {
                Value::Bool(self.cond(e, ctx))
            }
            Expr::Acl { subject, acl, negate } => {
                let m = match self.eval(subject, ctx) {
                    Value::Ip(ip) => self.acls[*acl].matches(ip),
                    _ => false,
                };
                Value::Bool(m != *negate)
            }
            Expr::Call(f, args) => builtins::call(self, *f, args, ctx),
            Expr::Regsub {
                subject,
                regex,
                replacement,
                all,
            } => {
                let s = self.eval(subject, ctx);
                let s = s.as_str().unwrap_or("");
                let rep: Cow<'_, str> = match replacement {
                    Replacement::Const(r) => Cow::Borrowed(r.as_str()),
                    Replacement::Dynamic(e) => {
                        let v = self.eval(e, ctx);
                        Cow::Owned(convert_replacement(v.as_str().unwrap_or("")))
                    }
                };
                Value::Str(Cow::Owned(regex.replace(s, rep.as_ref(), *all).into_owned()))
            }
            // The director itself; the runtime resolves it at fetch time.
            Expr::Director(d, key) => {
                let key = key.as_ref().map(|k| self.eval(k, ctx));
                let key = key.as_ref().map(|k| k.as_str().unwrap_or(""));
                Value::Backend(Some(self.director_value(*d, key)))
            }
            Expr::Shard(pick) => self.shard_value(pick, ctx),
            Expr::ShardParam(_) => Value::Unset,
        }
    }

    pub(crate) fn write(&self, out: &mut String, v: &Value<'_>) {
        write_value(out, v, &|b| self.backend_name(b));
    }

    pub(crate) fn to_string_owned(&self, v: Value<'_>) -> String {
        match v {
            Value::Str(s) => s.into_owned(),
            // One allocation of the right size (`obj.hits` into a header on every hit).
            Value::Int(i) => itoa::Buffer::new().format(i).to_owned(),
            other => {
                let mut s = String::new();
                self.write(&mut s, &other);
                s
            }
        }
    }
}
