//! Plugin statements in the evaluator: `plugin.request(NAME);` and
//! `plugin.response(NAME);` against a `TestContext` with scripted outcomes.

use policy_lang::testing::TestContext;
use policy_lang::{
    load_str, Action, Context, PluginId, PluginOutcome, PluginPhase, Program, Scope, Sub, Value, Var,
};

fn program(src: &str) -> Program {
    match load_str("test.vcl", src) {
        Ok(p) => p,
        Err(d) => panic!("policy should load:\n{}", d.render()),
    }
}

const POLICY: &str = r#"
vcl 4.1;
backend default { .host = "127.0.0.1"; }

plugin auth {
    .path = "plugins/auth.wasm";
    .config = """{"key": "s3cret"}""";
    .on_error = deny;
}
plugin bucket { .path = "plugins/bucket.wasm"; }
plugin headers { .path = "plugins/add-header.wasm"; .on_error = continue; }

sub vcl_recv {
    set req.http.X-Before = "1";
    plugin.request(auth);
    call pick_bucket;
    if (req.http.X-Bucket == "b") {
        set req.http.X-Seen-Bucket = req.http.X-Bucket;
    }
    set req.http.X-After = "1";
    return (hash);
}

sub pick_bucket {
    plugin.request(bucket);
}

sub vcl_hash {
    hash_data(req.url);
    hash_data(req.http.X-Bucket);
    return (lookup);
}

sub vcl_backend_response {
    plugin.response(headers);
    set beresp.http.X-After = "1";
}

sub vcl_deliver {
    plugin.response(headers);
    set resp.http.X-After = resp.http.X-Plugin;
}
"#;

const AUTH: PluginId = PluginId(0);
const BUCKET: PluginId = PluginId(1);
const HEADERS: PluginId = PluginId(2);

#[test]
fn ids_follow_declaration_order() {
    let p = program(POLICY);
    assert_eq!(p.plugin_id("auth"), Some(AUTH));
    assert_eq!(p.plugin_id("bucket"), Some(BUCKET));
    assert_eq!(p.plugin_id("headers"), Some(HEADERS));
    assert_eq!(p.plugins()[2].path, "plugins/add-header.wasm");
}

#[test]
fn continue_runs_the_phases_in_order_and_sees_plugin_headers() {
    let p = program(POLICY);
    let mut c = TestContext::request("GET", "/").plugin_sets_header(
        BUCKET,
        PluginPhase::Request,
        Scope::Req,
        "x-bucket",
        "b",
    );
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    assert_eq!(
        c.plugin_calls,
        [(AUTH, PluginPhase::Request), (BUCKET, PluginPhase::Request)]
    );
    // The header the plugin set is visible to the statements after it...
    assert_eq!(c.get_header(Scope::Req, "x-seen-bucket").as_deref(), Some("b"));
    assert_eq!(c.get_header(Scope::Req, "x-after").as_deref(), Some("1"));
    // ... and to vcl_hash, so the cache key follows what the plugin decided.
    p.run(Sub::Hash, &mut c);
    assert_eq!(c.hash, ["/", "b"]);
}

#[test]
fn unscripted_contexts_continue() {
    // The trait's default `run_plugin` continues: a context without a host
    // runs the policy as if the plugin were not there.
    struct Bare(TestContext);
    impl Context for Bare {
        fn get(&self, var: Var) -> Value<'_> {
            self.0.get(var)
        }
        fn set(&mut self, var: Var, value: Value<'static>) {
            self.0.set(var, value)
        }
        fn header(&self, scope: Scope, name: &http::HeaderName) -> Option<std::borrow::Cow<'_, str>> {
            Context::header(&self.0, scope, name)
        }
        fn set_header(&mut self, scope: Scope, name: &http::HeaderName, value: String) {
            self.0.set_header(scope, name, value)
        }
        fn unset_header(&mut self, scope: Scope, name: &http::HeaderName) {
            self.0.unset_header(scope, name)
        }
        fn hash_data(&mut self, data: &str) {
            self.0.hash_data(data)
        }
        fn synthetic(&mut self, body: String) {
            self.0.synthetic(body)
        }
        fn ban(&mut self, ban: policy_lang::BanExpr) {
            self.0.ban(ban)
        }
        fn log(&mut self, msg: &str) {
            self.0.log(msg)
        }
    }
    let p = program(POLICY);
    let mut c = Bare(TestContext::request("GET", "/"));
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    assert!(c.0.plugin_calls.is_empty());
    assert_eq!(c.0.get_header(Scope::Req, "x-after").as_deref(), Some("1"));
}

#[test]
fn local_response_ends_the_sub_at_once() {
    let p = program(POLICY);
    let mut c = TestContext::request("GET", "/").plugin(
        AUTH,
        PluginPhase::Request,
        PluginOutcome::LocalResponse { status: 401 },
    );
    assert_eq!(p.run(Sub::Recv, &mut c), Action::PluginResponse { plugin: AUTH });
    assert_eq!(Action::PluginResponse { plugin: AUTH }.name(), "plugin_response");
    // Nothing after the plugin ran: not the next plugin, not the next statement.
    assert_eq!(c.plugin_calls, [(AUTH, PluginPhase::Request)]);
    assert_eq!(c.get_header(Scope::Req, "x-before").as_deref(), Some("1"));
    assert_eq!(c.get_header(Scope::Req, "x-after"), None);
}

#[test]
fn local_response_from_a_called_sub_ends_the_method() {
    let p = program(POLICY);
    let mut c = TestContext::request("GET", "/").plugin(
        BUCKET,
        PluginPhase::Request,
        PluginOutcome::LocalResponse { status: 302 },
    );
    assert_eq!(
        p.run(Sub::Recv, &mut c),
        Action::PluginResponse { plugin: BUCKET }
    );
    assert_eq!(c.get_header(Scope::Req, "x-after"), None);
}

#[test]
fn failure_is_a_503_named_after_the_plugin() {
    let p = program(POLICY);
    let mut c = TestContext::request("GET", "/").plugin(AUTH, PluginPhase::Request, PluginOutcome::Failed);
    assert_eq!(
        p.run(Sub::Recv, &mut c),
        Action::Synth {
            status: 503,
            reason: "plugin auth failed".into()
        }
    );
    assert_eq!(c.get_header(Scope::Req, "x-after"), None);

    // Client side after delivery: synth as well.
    let mut c =
        TestContext::request("GET", "/").plugin(HEADERS, PluginPhase::Response, PluginOutcome::Failed);
    assert_eq!(
        p.run(Sub::Deliver, &mut c),
        Action::Synth {
            status: 503,
            reason: "plugin headers failed".into()
        }
    );

    // Backend side, where `synth` is not an action: `error` (vcl_backend_error).
    let mut c = TestContext::backend_response(200, 60.0).plugin(
        HEADERS,
        PluginPhase::Response,
        PluginOutcome::Failed,
    );
    assert_eq!(
        p.run(Sub::BackendResponse, &mut c),
        Action::Error {
            status: 503,
            reason: "plugin headers failed".into()
        }
    );
    assert_eq!(c.get_header(Scope::Beresp, "x-after"), None);
}

#[test]
fn response_phase_in_backend_response_and_deliver() {
    let p = program(POLICY);
    let mut c = TestContext::backend_response(200, 60.0).plugin_sets_header(
        HEADERS,
        PluginPhase::Response,
        Scope::Beresp,
        "x-plugin",
        "stored",
    );
    assert_eq!(p.run(Sub::BackendResponse, &mut c), Action::Deliver);
    assert_eq!(c.plugin_calls, [(HEADERS, PluginPhase::Response)]);
    assert_eq!(c.get_header(Scope::Beresp, "x-plugin").as_deref(), Some("stored"));
    assert_eq!(c.get_header(Scope::Beresp, "x-after").as_deref(), Some("1"));

    let mut c = TestContext::request("GET", "/").plugin_sets_header(
        HEADERS,
        PluginPhase::Response,
        Scope::Resp,
        "x-plugin",
        "hit-too",
    );
    assert_eq!(p.run(Sub::Deliver, &mut c), Action::Deliver);
    assert_eq!(c.get_header(Scope::Resp, "x-after").as_deref(), Some("hit-too"));

    let mut c = TestContext::request("GET", "/").plugin(
        HEADERS,
        PluginPhase::Response,
        PluginOutcome::LocalResponse { status: 451 },
    );
    assert_eq!(
        p.run(Sub::Deliver, &mut c),
        Action::PluginResponse { plugin: HEADERS }
    );
}

#[test]
fn a_later_script_replaces_the_outcome_and_keeps_headers() {
    let c = TestContext::new()
        .plugin_sets_header(AUTH, PluginPhase::Request, Scope::Req, "x-a", "1")
        .plugin(AUTH, PluginPhase::Request, PluginOutcome::Failed);
    assert_eq!(c.plugin_script.len(), 1);
    assert_eq!(c.plugin_script[0].outcome, PluginOutcome::Failed);
    assert_eq!(c.plugin_script[0].set_headers.len(), 1);
}
