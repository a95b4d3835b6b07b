//! varnish-modules' vmod xkey: `purge` and `softpurge` of the objects tagged with surrogate
//! keys, which the runtime's key index finds ([`Context::purge_keys`]).

use super::Context;
use crate::compile::Program;
use crate::tree::{Expr, XkeyFn};
use crate::vocab::Value;

/// `xkey.purge(keys)` / `xkey.softpurge(keys)`: the number of objects purged.
pub(super) fn value<'a>(p: &'a Program, f: XkeyFn, args: &'a [Expr], ctx: &'a dyn Context) -> Value<'a> {
    let keys = p.string_arg(args, 0, ctx);
    Value::Int(ctx.purge_keys(&keys, f == XkeyFn::Softpurge))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::cell::RefCell;

    use http::HeaderName;

    use crate::testing::TestContext;
    use crate::{load_str, BanExpr, Context, Scope, Sub, Value, Var};

    /// A context whose cache holds 3 objects under every key, recording each purge asked for.
    struct Purges {
        inner: TestContext,
        asked: RefCell<Vec<(String, bool)>>,
    }

    impl Context for Purges {
        fn get(&self, var: Var) -> Value<'_> {
            self.inner.get(var)
        }
        fn set(&mut self, var: Var, value: Value<'static>) {
            self.inner.set(var, value);
        }
        fn header(&self, scope: Scope, name: &HeaderName) -> Option<Cow<'_, str>> {
            Context::header(&self.inner, scope, name)
        }
        fn set_header(&mut self, scope: Scope, name: &HeaderName, value: String) {
            self.inner.set_header(scope, name, value);
        }
        fn unset_header(&mut self, scope: Scope, name: &HeaderName) {
            self.inner.unset_header(scope, name);
        }
        fn hash_data(&mut self, data: &str) {
            self.inner.hash_data(data);
        }
        fn synthetic(&mut self, body: String) {
            self.inner.synthetic(body);
        }
        fn ban(&mut self, ban: BanExpr) {
            self.inner.ban(ban);
        }
        fn log(&mut self, msg: &str) {
            self.inner.log(msg);
        }
        fn purge_keys(&self, keys: &str, soft: bool) -> i64 {
            self.asked.borrow_mut().push((keys.to_string(), soft));
            3
        }
    }

    fn run_recv(body: &str, method: &str) -> Purges {
        let source = format!("vcl 4.1;\nimport xkey;\nbackend default {{ .host = \"127.0.0.1\"; }}\nsub vcl_recv {{\n{body}\n}}\n");
        let program = load_str("xkey.vcl", &source).unwrap_or_else(|d| panic!("{}", d.render()));
        let inner = TestContext::request(method, "/").header(Scope::Req, "xkey", "k1 k2");
        let mut ctx = Purges {
            inner,
            asked: RefCell::default(),
        };
        program.run(Sub::Recv, &mut ctx);
        ctx
    }

    #[test]
    fn purge_and_softpurge_return_the_count_and_reach_the_cache() {
        let ctx = run_recv(
            "set req.http.n-gone = xkey.purge(req.http.xkey);\n\
             set req.http.n-soft = \"expired \" + xkey.softpurge(\"a, b\");",
            "PURGE",
        );
        assert_eq!(
            ctx.asked.into_inner(),
            [("k1 k2".to_string(), false), ("a, b".to_string(), true)]
        );
        assert_eq!(ctx.inner.get_header(Scope::Req, "n-gone").as_deref(), Some("3"));
        assert_eq!(
            ctx.inner.get_header(Scope::Req, "n-soft").as_deref(),
            Some("expired 3")
        );
    }

    #[test]
    fn a_purge_behind_a_false_condition_does_not_run() {
        let ctx = run_recv(
            "if (req.method == \"PURGE\" && xkey.purge(req.http.xkey) > 0) { return (synth(200)); }",
            "GET",
        );
        assert!(ctx.asked.into_inner().is_empty());
    }

    #[test]
    fn xkey_needs_its_import_and_a_client_sub() {
        let without_import = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n\
             sub vcl_recv { set req.http.n = xkey.purge(\"a\"); }\n";
        assert!(load_str("t.vcl", without_import).is_err());
        let backend_side = "vcl 4.1;\nimport xkey;\nbackend default { .host = \"127.0.0.1\"; }\n\
             sub vcl_backend_response { set beresp.http.n = xkey.purge(\"a\"); }\n";
        let refused = load_str("t.vcl", backend_side).expect_err("xkey is client-side only");
        assert!(refused.render().contains("xkey.purge"), "{}", refused.render());
    }
}
