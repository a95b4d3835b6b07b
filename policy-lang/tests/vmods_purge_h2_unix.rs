//! Varnish 7.7's vmod_purge, vmod_h2 and vmod_unix against their `.vcc` documentation:
//! where each may be called (`$Restrict`, with diagnostics) and what each answers.

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Action, Scope, Sub, Value, Var};

fn program(imports: &str, body: &str) -> Result<policy_lang::Program, String> {
    load_str(
        "v.vcl",
        &format!("vcl 4.1;\n{imports}\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n"),
    )
    .map_err(|d| d.render())
}

fn refused(imports: &str, body: &str) -> String {
    program(imports, body).err().unwrap_or_default()
}

#[test]
fn purge_hard_example_answers_with_the_count() {
    // vmod_purge.vcc's example: `set req.http.purged = purge.hard();` in a sub vcl_hit and
    // vcl_miss call, then synth 404 when nothing was purged.
    let p = program(
        "import purge;",
        r#"sub my_purge {
    set req.http.purged = purge.hard();
    if (req.http.purged == "0") { return (synth(404)); } else { return (synth(200)); }
}
sub vcl_hit { if (req.method == "PURGE") { call my_purge; } }
sub vcl_miss { if (req.method == "PURGE") { call my_purge; } }"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = TestContext::request("PURGE", "/a");
    assert!(matches!(
        p.run(Sub::Hit, &mut c),
        Action::Synth { status: 200, .. }
    ));
    assert_eq!(c.get_header(Scope::Req, "purged").as_deref(), Some("1"));
    assert_eq!(*c.purges.borrow(), [false]);
    let mut c = TestContext::request("GET", "/a");
    assert_eq!(p.run(Sub::Miss, &mut c), Action::Fetch);
    assert!(c.purges.borrow().is_empty());
}

#[test]
fn purge_soft_defaults_make_stale_and_all_zero_is_hard() {
    let p = program(
        "import purge;",
        "sub vcl_hit { set req.http.soft = purge.soft(); set req.http.soft2 = purge.soft(0s, -1s, -1s);\n\
         set req.http.hard = purge.soft(ttl = 0s, grace = 0s, keep = 0s); }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = TestContext::request("GET", "/");
    p.run(Sub::Hit, &mut c);
    assert_eq!(*c.purges.borrow(), [true, true, false]);
    // Reductions the cache's soft purge cannot make are refused, with a hint.
    let e = refused(
        "import purge;",
        "sub vcl_hit { set req.http.x = purge.soft(ttl = 10s); }",
    );
    assert!(
        e.contains("E060") && e.contains("v.vcl:4:") && e.contains("hint:"),
        "{e}"
    );
    assert!(refused(
        "import purge;",
        "sub vcl_miss { set req.http.x = purge.soft(grace = 10s); }"
    )
    .contains("E060"));
}

#[test]
fn purge_is_restricted_to_vcl_hit_and_vcl_miss() {
    // `$Restrict vcl_hit vcl_miss`, also through a call.
    let e = refused("import purge;", "sub vcl_recv { set req.http.x = purge.hard(); }");
    assert!(
        e.contains("`purge.hard()` is not available in `vcl_recv`") && e.contains("v.vcl:4:"),
        "{e}"
    );
    let e = refused(
        "import purge;",
        "sub p { set req.http.x = purge.soft(); }\nsub vcl_hit { call p; }\nsub vcl_deliver { call p; }",
    );
    assert!(
        e.contains("not available in `vcl_deliver`, which calls `p`"),
        "{e}"
    );
    assert!(refused("", "sub vcl_hit { set req.http.x = purge.hard(); }").contains("needs `import purge;`"));
}

#[test]
fn h2_is_tells_http2_requests() {
    let p = program("import h2;", "sub vcl_deliver { set resp.http.X-H2 = h2.is(); }")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut c = TestContext::request("GET", "/").var(Var::ReqProto, Value::str("HTTP/2.0"));
    p.run(Sub::Deliver, &mut c);
    assert_eq!(c.get_header(Scope::Resp, "x-h2").as_deref(), Some("true"));
    let mut c = TestContext::request("GET", "/");
    p.run(Sub::Deliver, &mut c);
    assert_eq!(c.get_header(Scope::Resp, "x-h2").as_deref(), Some("false"));
    // `$Restrict client`; the per-session rapid-reset knobs name edgecache's flags.
    assert!(refused(
        "import h2;",
        "sub vcl_backend_fetch { set bereq.http.x = h2.is(); }"
    )
    .contains("`h2.is()` is not available in `vcl_backend_fetch`"));
    let e = refused(
        "import h2;",
        "sub vcl_recv { set req.http.x = h2.rapid_reset_limit(10); }",
    );
    assert!(e.contains("E060") && e.contains("--h2-rapid-reset-limit"), "{e}");
}

#[test]
fn unix_off_a_unix_socket_answers_null_and_minus_one() {
    // vmod_unix.vcc: "If the current listener is not a Unix domain socket ... (user, group)
    // return NULL, while ... (uid, gid) return -1."
    let p = program(
        "import unix;",
        "sub vcl_recv { if (unix.user() != \"trusteduser\") { set req.http.X-User = \"[\" + unix.user() + \"]\"; }\n\
         set req.http.X-Uid = unix.uid(); set req.http.X-Gid = unix.gid();\n\
         if (!unix.group()) { set req.http.X-No-Group = \"1\"; } }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = TestContext::request("GET", "/");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_header(Scope::Req, "x-user").as_deref(), Some("[]"));
    assert_eq!(c.get_header(Scope::Req, "x-uid").as_deref(), Some("-1"));
    assert_eq!(c.get_header(Scope::Req, "x-gid").as_deref(), Some("-1"));
    assert_eq!(c.get_header(Scope::Req, "x-no-group").as_deref(), Some("1"));
    // "None of them may be called in vcl_init{} or vcl_fini{}".
    let e = refused(
        "import unix;",
        "sub vcl_init { if (unix.uid() == 0) { return (fail); } }",
    );
    assert!(e.contains("`unix.uid()` is not available in `vcl_init`"), "{e}");
}
