//! The vmods beyond `std` that edgecache runs natively: `cookie`, `var`, `header`, `blob`,
//! `bodyaccess`, `xkey`.

pub(crate) mod blob;
mod bodyaccess;
mod cookie;
mod header;
mod var;
mod xkey;

use std::borrow::Cow;

use super::Context;
use crate::compile::Program;
use crate::tree::{Expr, Func};
use crate::vocab::pattern::Pattern;
use crate::vocab::{Scope, Value};

/// What a request's vmods keep from one sub to the next (Varnish's PRIV_TASK): the cookies
/// `cookie.parse` read, the variables `var.set` wrote. A runtime keeps one per task and lends it
/// through [`Context::task`] / [`Context::task_mut`].
#[derive(Debug, Clone, Default)]
pub struct Task {
    cookies: cookie::Jar,
    vars: var::Vars,
    /// Why the task's last `std.ban()` failed (`std.ban_error()`); empty when it did not.
    pub(crate) ban_error: String,
    /// The seconds each `std.timed_call` of the statement being run took, in order.
    pub(crate) timed: Vec<f64>,
    /// What the backend request's `p.set(...)` changed in shard parameter sets, by set.
    pub(crate) shard_params: Vec<(usize, crate::tree::shard::ShardParams)>,
}

impl Program {
    /// A VOID vmod function (`cookie.parse(...)`, `var.set(...)`, `header.append(...)`).
    pub(super) fn vmod_effect(&self, f: Func, args: &[Expr], ctx: &mut dyn Context) {
        // Every argument before any effect: the effect may change what they read.
        let strings: Vec<String> = args
            .iter()
            .map(|e| self.to_string_owned(self.eval(e, &*ctx)))
            .collect();
        match f {
            Func::Cookie(f) => cookie::effect(f, &strings, args, ctx),
            Func::Var(f) => var::effect(self, f, &strings, args, ctx),
            Func::Header(f) => header::effect(f, &strings, args, ctx),
            Func::Bodyaccess(f) => bodyaccess::effect(f, &strings, ctx),
            Func::ShardParamSet(_) | Func::ShardParamClear(_) => self.shard_param_effect(f, args, ctx),
            Func::Rollback => {
                // Varnish's VCL_TaskLeave / VCL_TaskEnter: the task's vmod state starts over.
                if let Some(task) = ctx.task_mut() {
                    *task = Task::default();
                }
                let scope = if strings.first().is_some_and(|h| h == "bereq") {
                    Scope::Bereq
                } else {
                    Scope::Req
                };
                ctx.rollback(scope);
            }
            _ => {}
        }
    }

    /// A vmod function with a value (`cookie.get(...)`, `blob.encode(...)`, ...).
    pub(super) fn vmod_value<'a>(&'a self, f: Func, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
        match f {
            Func::Cookie(f) => cookie::value(self, f, args, ctx),
            Func::Var(f) => var::value(self, f, args, ctx),
            Func::Header(f) => header::value(f, args, ctx),
            Func::Blob(f) => blob::value(self, f, args, ctx),
            Func::Bodyaccess(f) => bodyaccess::value(f, args, ctx),
            Func::Xkey(f) => xkey::value(self, f, args, ctx),
            _ => Value::Unset,
        }
    }

    /// Argument `i` as a string; unset (or absent) reads as `""`.
    fn string_arg<'a>(&'a self, args: &'a [Expr], i: usize, ctx: &'a dyn Context) -> Cow<'a, str> {
        match args.get(i).map(|e| self.eval(e, ctx)) {
            Some(Value::Str(s)) => s,
            Some(Value::Unset) | None => Cow::Borrowed(""),
            Some(other) => Cow::Owned(self.to_string_owned(other)),
        }
    }
}

/// Argument `i`, a REGEX the checker compiled.
fn pattern_arg(args: &[Expr], i: usize) -> Option<&Pattern> {
    match args.get(i) {
        Some(Expr::Pattern(p)) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use http::HeaderName;

    use crate::testing::TestContext;
    use crate::{load_str, BanExpr, Context, Scope, Sub, Value, Var};

    /// A context that keeps no task, as a runtime that does not implement [`Context::task`].
    struct NoTask(TestContext);

    impl Context for NoTask {
        fn get(&self, var: Var) -> Value<'_> {
            self.0.get(var)
        }
        fn set(&mut self, var: Var, value: Value<'static>) {
            self.0.set(var, value);
        }
        fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
            Context::header(&self.0, scope, name)
        }
        fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
            self.0.set_header(scope, name, value);
        }
        fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
            self.0.unset_header(scope, name);
        }
        fn hash_data(&mut self, data: &str) {
            self.0.hash_data(data);
        }
        fn synthetic(&mut self, body: String) {
            self.0.synthetic(body);
        }
        fn ban(&mut self, ban: BanExpr) {
            self.0.ban(ban);
        }
        fn log(&mut self, msg: &str) {
            self.0.log(msg);
        }
    }

    #[test]
    fn without_a_task_of_its_own_the_state_lasts_one_sub() {
        let program = load_str(
            "t.vcl",
            "vcl 4.1;\nimport cookie;\nbackend default { .host = \"127.0.0.1\"; }\n\
             sub vcl_recv { cookie.parse(req.http.cookie); cookie.keep(\"id\");\n\
             set req.http.cookie = cookie.get_string(); return (hash); }\n\
             sub vcl_deliver { set resp.http.x = \"[\" + cookie.get_string() + \"]\"; }\n",
        )
        .unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = NoTask(TestContext::request("GET", "/").header(Scope::Req, "cookie", "_ga=1; id=7"));
        program.run(Sub::Recv, &mut ctx);
        program.run(Sub::Deliver, &mut ctx);
        assert_eq!(ctx.0.get_header(Scope::Req, "cookie").as_deref(), Some("id=7;"));
        assert_eq!(ctx.0.get_header(Scope::Resp, "x").as_deref(), Some("[]"));
    }
}
