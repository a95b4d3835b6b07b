//! `var.*` (varnish-modules' vmod_var): a task's typed variables, and global strings shared by
//! every request of the policy.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::PoisonError;

use crate::compile::Program;
use crate::eval::Context;
use crate::tree::{Expr, VarFn};
use crate::vocab::{Value, ValueType};

/// A task's variables: each holds a value of the type it was set with.
#[derive(Debug, Clone, Default)]
pub(super) struct Vars {
    values: HashMap<String, Value<'static>>,
}

pub(super) fn effect(p: &Program, f: VarFn, strings: &[String], args: &[Expr], ctx: &mut dyn Context) {
    let key = strings.first().map_or("", String::as_str);
    match f {
        VarFn::GlobalSet => {
            let value = strings.get(1).cloned().unwrap_or_default();
            p.globals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.to_string(), value);
        }
        VarFn::Set(ty) => {
            let value = match ty {
                ValueType::Str => Value::Str(Cow::Owned(strings.get(1).cloned().unwrap_or_default())),
                _ => args
                    .get(1)
                    .map_or(Value::Unset, |e| p.eval(e, &*ctx).into_owned()),
            };
            if let Some(task) = ctx.task_mut() {
                task.vars.values.insert(key.to_string(), value);
            }
        }
        VarFn::Clear => {
            if let Some(task) = ctx.task_mut() {
                task.vars.values.clear();
            }
        }
        VarFn::Get(_) | VarFn::GlobalGet => {}
    }
}

pub(super) fn value<'a>(p: &'a Program, f: VarFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let key = p.string_arg(args, 0, ctx);
    match f {
        VarFn::Get(ty) => {
            let stored = ctx.task().and_then(|t| t.vars.values.get(key.as_ref()));
            match stored {
                Some(Value::Str(s)) if ty == ValueType::Str => Value::str(s),
                Some(v) if has_type(v, ty) => v.clone(),
                // Unset, or set with another type: what vmod_var returns for a missing one.
                _ => unset(ty),
            }
        }
        VarFn::GlobalGet => {
            let globals = p.globals.lock().unwrap_or_else(PoisonError::into_inner);
            globals
                .get(key.as_ref())
                .map_or(Value::Unset, |v| Value::Str(Cow::Owned(v.clone())))
        }
        VarFn::Set(_) | VarFn::GlobalSet | VarFn::Clear => Value::Unset,
    }
}

fn has_type(v: &Value<'_>, ty: ValueType) -> bool {
    matches!(
        (v, ty),
        (Value::Str(_), ValueType::Str)
            | (Value::Int(_), ValueType::Int)
            | (Value::Real(_), ValueType::Real)
            | (Value::Duration(_), ValueType::Duration)
            | (Value::Ip(_), ValueType::Ip)
            | (Value::Backend(_), ValueType::Backend)
    )
}

/// The value of a variable never set: 0 for numbers, no string, IP or backend.
fn unset(ty: ValueType) -> Value<'static> {
    match ty {
        ValueType::Int => Value::Int(0),
        ValueType::Real => Value::Real(0.0),
        ValueType::Duration => Value::Duration(0.0),
        ValueType::Backend => Value::Backend(None),
        _ => Value::Unset,
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::TestContext;
    use crate::{load_str, Scope, Sub};

    fn run(src_subs: &str, subs: &[Sub]) -> TestContext {
        let src = format!(
            "vcl 4.1;\nimport var;\nbackend default {{ .host = \"127.0.0.1\"; }}\nbackend other {{ .host = \"127.0.0.2\"; }}\n{src_subs}\n"
        );
        let program = load_str("var.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut ctx = TestContext::request("GET", "/");
        for sub in subs {
            program.run(*sub, &mut ctx);
        }
        ctx
    }

    // The example of varnish-modules' vmod_var documentation.
    #[test]
    fn the_documented_example() {
        let ctx = run(
            r#"sub vcl_recv {
                var.set("foo", "bar");
                set req.http.x-foo = var.get("foo");
                var.set_int("ten", 10);
                var.set_int("five", 5);
                set req.http.twenty = var.get_int("ten") + var.get_int("five") + 5;
                set req.http.X-lifetime = "" + var.get_int("ten") + " seconds";
                var.set_duration("timedelta", 1m);
                set req.http.d1 = var.get_duration("timedelta");
                var.set_ip("endpoint", client.ip);
                set req.http.x-client = var.get_ip("endpoint");
                var.set_backend("be", other);
                set req.http.x-backend = var.get_backend("be");
                var.set_real("half", 0.5);
                set req.http.x-real = var.get_real("half");
                return (pass);
            }"#,
            &[Sub::Recv],
        );
        let h = |name: &str| ctx.get_header(Scope::Req, name);
        assert_eq!(h("x-foo").as_deref(), Some("bar"));
        assert_eq!(h("twenty").as_deref(), Some("20"));
        assert_eq!(h("X-lifetime").as_deref(), Some("10 seconds"));
        assert_eq!(h("d1").as_deref(), Some("60.000"));
        assert_eq!(h("x-client").as_deref(), Some("127.0.0.1"));
        assert_eq!(h("x-backend").as_deref(), Some("other"));
        assert_eq!(h("x-real").as_deref(), Some("0.500"));
    }

    #[test]
    fn task_variables_last_from_sub_to_sub_and_clear_empties_them() {
        let ctx = run(
            r#"sub vcl_recv { var.set("seen", "recv"); var.set("gone", "x"); return (hash); }
               sub vcl_deliver {
                   set resp.http.before = var.get("seen") + "," + var.get("gone");
                   var.clear();
                   set resp.http.after = "[" + var.get("seen") + "]" + var.get_int("never");
               }"#,
            &[Sub::Recv, Sub::Deliver],
        );
        assert_eq!(ctx.get_header(Scope::Resp, "before").as_deref(), Some("recv,x"));
        assert_eq!(ctx.get_header(Scope::Resp, "after").as_deref(), Some("[]0"));
    }

    #[test]
    fn a_variable_read_as_another_type_reads_as_unset() {
        let ctx = run(
            r#"sub vcl_recv {
                var.set_int("n", 3);
                set req.http.x = "[" + var.get("n") + "]" + var.get_int("n");
                return (pass);
            }"#,
            &[Sub::Recv],
        );
        assert_eq!(ctx.get_header(Scope::Req, "x").as_deref(), Some("[]3"));
    }

    #[test]
    fn globals_are_shared_by_requests() {
        let src = "vcl 4.1;\nimport var;\nbackend default { .host = \"127.0.0.1\"; }\n\
                   sub vcl_recv { if (req.url == \"/set\") { var.global_set(\"mode\", \"maintenance\"); }\n\
                   set req.http.x = var.global_get(\"mode\"); return (pass); }\n";
        let program = load_str("var.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
        let mut first = TestContext::request("GET", "/set");
        program.run(Sub::Recv, &mut first);
        let mut second = TestContext::request("GET", "/other");
        program.run(Sub::Recv, &mut second);
        assert_eq!(second.get_header(Scope::Req, "x").as_deref(), Some("maintenance"));
    }
}
