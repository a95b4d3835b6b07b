//! vmod std functions against the examples in Varnish 7.7's `vmod_std.vcc`.

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Action, Program, Scope, Sub, Value, Var};

fn deliver(body: &str) -> Program {
    let src = format!(
        "vcl 4.1;\nimport std;\nbackend default {{ .host = \"127.0.0.1\"; }}\nsub vcl_deliver {{\n{body}\n}}\n"
    );
    load_str("std.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()))
}

/// Runs vcl_deliver at `now` and returns the `resp.http.X-*` headers it set, by name.
fn headers_at(p: &Program, now: f64, url: &str) -> impl Fn(&str) -> String {
    let mut c = TestContext::request("GET", url).var(Var::Now, Value::Time(now));
    p.run(Sub::Deliver, &mut c);
    move |name: &str| c.get_header(Scope::Resp, name).unwrap_or_default()
}

#[test]
fn fnmatch_examples() {
    let p = deliver(
        r#"
    if (std.fnmatch("/foo/*", req.url)) { set resp.http.X-Star = "1"; }
    if (std.fnmatch("/foo/*/quux", req.url)) { set resp.http.X-Quux = "1"; }
    if (std.fnmatch("/foo/*/quux", req.url, pathname=false)) { set resp.http.X-Quux-Any = "1"; }
    if (std.fnmatch("/foo/?ar", req.url)) { set resp.http.X-Ar = "1"; }
    if (std.fnmatch("/foo/[!0-9]", req.url)) { set resp.http.X-Non-Digit = "1"; }
"#,
    );
    let h = headers_at(&p, 0.0, "/foo/bar");
    assert_eq!(
        (h("X-Star"), h("X-Ar"), h("X-Quux")),
        ("1".into(), "1".into(), "".into())
    );
    let h = headers_at(&p, 0.0, "/foo/bar/baz/quux");
    assert_eq!(
        (h("X-Star"), h("X-Quux"), h("X-Quux-Any")),
        ("".into(), "".into(), "1".into())
    );
    let h = headers_at(&p, 0.0, "/foo/bar/quux");
    assert_eq!((h("X-Quux"), h("X-Quux-Any")), ("1".into(), "1".into()));
    assert_eq!(headers_at(&p, 0.0, "/foo/x")("X-Non-Digit"), "1");
    assert_eq!(headers_at(&p, 0.0, "/foo/7")("X-Non-Digit"), "");
}

#[test]
fn strftime_example() {
    let p = deliver(r#"    set resp.http.X-Iso = std.strftime(now, "%Y%m%dT%H%M%SZ");"#);
    // "e.g. 20210521T175241Z"
    assert_eq!(headers_at(&p, 1_621_619_561.0, "/")("X-Iso"), "20210521T175241Z");
}

#[test]
fn deprecated_conversions_examples() {
    let p = deliver(
        r#"
    set resp.http.X-Integer = std.real2integer(1140618699.00, 0);
    set resp.http.X-Posone = std.real2integer( 0.5, 0);
    set resp.http.X-Negone = std.real2integer(-0.5, 0);
    set resp.http.X-Too-Big = std.real2integer(1000000000000000000.0, 7);
    set resp.http.X-Time = std.time2integer(std.real2time(1140618699.00, now), 0);
    set resp.http.X-Int = std.time2integer(now, 0);
    set resp.http.X-Real = std.time2real(now, 1.0);
"#,
    );
    let h = headers_at(&p, 1_700_000_000.25, "/");
    assert_eq!(h("X-Integer"), "1140618699");
    assert_eq!(h("X-Posone"), "1");
    assert_eq!(h("X-Negone"), "-1");
    assert_eq!(h("X-Too-Big"), "7");
    assert_eq!(h("X-Time"), "1140618699");
    assert_eq!(h("X-Int"), "1700000000");
    assert_eq!(h("X-Real"), "1700000000.250");
}

#[test]
fn ban_error_example() {
    // vmod_std.vcc: `if (std.ban(...)) { ... } else { ... std.ban_error() ... }`.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv {\n\
                 if (std.ban(req.http.X-Ban)) { return (synth(200, \"Ban added\")); }\n\
                 return (synth(400, std.ban_error()));\n\
               }\n";
    let p = load_str("ban.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let run = |ban: &str| {
        let mut c = TestContext::request("BAN", "/").header(Scope::Req, "x-ban", ban);
        let action = p.run(Sub::Recv, &mut c);
        (action, c.bans.len())
    };
    let (ok, banned) = run("req.url ~ ^/foo");
    assert!(matches!(ok, Action::Synth { status: 200, .. }), "{ok:?}");
    assert_eq!(banned, 1, "the condition bans");
    let (refused, banned) = run("req.nothing == 1");
    match refused {
        Action::Synth { status: 400, reason } => assert!(!reason.is_empty(), "says why"),
        other => panic!("{other:?}"),
    }
    assert_eq!(banned, 0);
}

#[test]
fn syntax_late_100_continue_and_set_ip_tos_examples() {
    let p = deliver(
        r#"
    if (std.syntax(4.0)) { set resp.http.X-40 = "1"; }
    if (std.syntax(4.1)) { set resp.http.X-41 = "1"; }
    if (std.syntax(4.2)) { set resp.http.X-42 = "1"; }
"#,
    );
    let h = headers_at(&p, 0.0, "/");
    assert_eq!(
        (h("X-40"), h("X-41"), h("X-42")),
        ("1".into(), "1".into(), "".into())
    );
    // Accepted where Varnish accepts them; they change nothing edgecache sends.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv { std.late_100_continue(true); if (req.url ~ \"^/video\") { std.set_ip_tos(46); } }\n";
    let p = load_str("t.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut c = TestContext::request("GET", "/video/1");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
}

#[test]
fn cache_req_body_example() {
    // vmod_std.vcc: `if (std.cache_req_body(1KB)) { ... }` in vcl_recv.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv { if (!std.cache_req_body(1KB)) { return (synth(413)); } }\n";
    let p = load_str("c.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(p.req_body_limit(), Some(1024));
    let mut small = TestContext::request("POST", "/");
    small.req_body = Some(vec![b'x'; 1024]);
    assert_eq!(p.run(Sub::Recv, &mut small), Action::Pass);
    let mut unbuffered = TestContext::request("POST", "/");
    assert!(matches!(
        p.run(Sub::Recv, &mut unbuffered),
        Action::Synth { status: 413, .. }
    ));
    let err = |body: &str| {
        load_str(
            "c.vcl",
            &format!("vcl 4.1;\nimport std;\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n"),
        )
        .map(|_| String::new())
        .unwrap_or_else(|d| d.render())
    };
    assert!(
        err("sub vcl_recv { std.cache_req_body(std.bytes(req.http.x, 1KB)); }")
            .contains("takes a constant size")
    );
    assert!(err("sub vcl_deliver { std.cache_req_body(1KB); }").contains("not allowed in `vcl_deliver`"));
}

#[test]
fn rollback_example() {
    // vmod_std.vcc: `std.rollback(req)` restores the request as received.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv { set req.url = \"/rewritten\"; if (req.http.X-Undo) { std.rollback(req); } }\n";
    let p = load_str("r.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    assert!(p.rolls_back(), "the runtime must keep the request as received");
    let mut c = TestContext::request("GET", "/").header(Scope::Req, "x-undo", "1");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.rollbacks, [Scope::Req]);
    let err = |body: &str| {
        load_str(
            "r.vcl",
            &format!("vcl 4.1;\nimport std;\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n"),
        )
        .map(|_| String::new())
        .unwrap_or_else(|d| d.render())
    };
    // vmod_std's `$Restrict`, and `req` / `bereq` readable only on their own side.
    assert!(err("sub vcl_backend_fetch { std.rollback(req); }")
        .contains("`std.rollback(req)` is not available in `vcl_backend_fetch`"));
    assert!(err("sub vcl_deliver { std.rollback(bereq); }")
        .contains("`std.rollback(bereq)` is not available in `vcl_deliver`"));
    // std_c00001.vtc: "Not available in subroutine 'vcl_pipe'", for both.
    for h in ["req", "bereq"] {
        let e = err(&format!("sub vcl_pipe {{ std.rollback({h}); }}"));
        assert!(e.contains("is not available in `vcl_pipe`"), "{e}");
        assert!(e.contains("r.vcl:4:"), "{e}");
    }
    // VRT_Rollback has nothing to go back to for responses (Varnish 7.7 panics).
    let e = err("sub vcl_deliver { std.rollback(resp); }");
    assert!(
        e.contains("`std.rollback(resp)` is not possible") && e.contains("hint:"),
        "{e}"
    );
    assert!(err("sub vcl_backend_response { std.rollback(beresp); }")
        .contains("`std.rollback(beresp)` is not possible"));
    assert!(err("sub vcl_recv { std.rollback(obj); }").contains("takes one of req, bereq, resp, beresp"));
    assert!(
        !load_str("n.vcl", "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n")
            .unwrap_or_else(|d| panic!("{}", d.render()))
            .rolls_back()
    );
}

#[test]
fn rollback_of_bereq_clears_the_task_and_is_reported_to_the_runtime() {
    // std_c00001.vtc: `std.rollback(bereq)` in vcl_backend_response, then `return (retry)`.
    let src = "vcl 4.1;\nimport std;\nimport var;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_backend_response { var.set(\"k\", \"v\"); if (beresp.status == 400) { std.rollback(bereq); }\n\
               set beresp.http.X-Var = \"[\" + var.get(\"k\") + \"]\"; }\n";
    let p = load_str("r.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    assert!(p.rolls_back_bereq() && !p.rolls_back());
    let mut c = TestContext::request("GET", "/").var(Var::BerespStatus, Value::Int(400));
    p.run(Sub::BackendResponse, &mut c);
    assert_eq!(c.rollbacks, [Scope::Bereq]);
    assert_eq!(c.get_header(Scope::Beresp, "x-var").as_deref(), Some("[]"));
    let mut c = TestContext::request("GET", "/").var(Var::BerespStatus, Value::Int(200));
    p.run(Sub::BackendResponse, &mut c);
    assert!(c.rollbacks.is_empty());
    assert_eq!(c.get_header(Scope::Beresp, "x-var").as_deref(), Some("[v]"));
}

fn refusal(body: &str) -> String {
    load_str(
        "t.vcl",
        &format!("vcl 4.1;\nimport std;\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n"),
    )
    .map(|_| String::new())
    .unwrap_or_else(|d| d.render())
}

#[test]
fn timed_call_runs_the_sub_and_gives_a_duration() {
    // vmod_std.vcc: `DURATION timed_call(SUB)`.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub tagged { set resp.http.X-In = \"1\"; }\n\
               sub refuse { if (req.url == \"/no\") { return (synth(403)); } }\n\
               sub vcl_deliver {\n\
                 set resp.http.X-Took = std.timed_call(tagged) + 10s;\n\
                 std.log(\"refuse took \" + std.timed_call(refuse));\n\
                 set resp.http.X-After = \"1\";\n\
               }\n";
    let p = load_str("t.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut c = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Deliver, &mut c), Action::Deliver);
    assert_eq!(c.get_header(Scope::Resp, "x-in").as_deref(), Some("1"));
    let took: f64 = c
        .get_header(Scope::Resp, "x-took")
        .unwrap_or_default()
        .parse()
        .unwrap_or(0.0);
    assert!((10.0..11.0).contains(&took), "the sub's time plus 10 s: {took}");
    assert!(
        c.logs.iter().any(|l| l.starts_with("refuse took 0.")),
        "{:?}",
        c.logs
    );
    // A return in the timed sub ends vcl_deliver once the statement has run.
    let mut c = TestContext::request("GET", "/no");
    assert!(matches!(
        p.run(Sub::Deliver, &mut c),
        Action::Synth { status: 403, .. }
    ));
    assert!(c.logs.iter().any(|l| l.starts_with("refuse took")));
    assert_eq!(c.get_header(Scope::Resp, "x-after"), None);
}

#[test]
fn timed_call_is_checked_like_a_call() {
    // The timed sub runs in the caller's sub: Varnish's "Dynamic call ... not allowed from here".
    let e = refusal(
        "sub ttl { set beresp.ttl = 1s; }\nsub vcl_deliver { set resp.http.X = std.timed_call(ttl); }",
    );
    assert!(
        e.contains("E012") && e.contains("`vcl_deliver`, which calls `ttl`"),
        "{e}"
    );
    let e = refusal("sub vcl_deliver { set resp.http.X = std.timed_call(nosuch); }");
    assert!(
        e.contains("E040") && e.contains("takes the name of a sub") && e.contains("t.vcl:4:"),
        "{e}"
    );
    let e = refusal(
        "sub s { }\nsub vcl_deliver { if (req.url == \"/\") { } elsif (std.timed_call(s) > 1s) { } }",
    );
    assert!(
        e.contains("in an `elsif` condition") && e.contains("hint:"),
        "{e}"
    );
    let e = refusal("sub s { }\nsub vcl_deliver { set resp.http.X = std.timed_call(s) + \"x\"; }");
    assert!(e.is_empty(), "a DURATION converts to a string: {e}");
    // Called through timed_call only: not "never called".
    let p = load_str(
        "t.vcl",
        "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\nsub s { }\n\
         sub vcl_recv { set req.http.X = std.timed_call(s); }\n",
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    assert!(p.warnings().is_none_or(|w| !w.render().contains("never called")));
}

#[test]
fn file_exists_asks_at_each_call() {
    // vmod_std.vcc's example: a maintenance flag file.
    let src = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; }\n\
               sub vcl_recv { if (std.file_exists(\"/etc/return_503\")) {\n\
               return (synth(503, \"Varnish is in maintenance\")); } }\n";
    let p = load_str("f.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut c = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    c.files.push("/etc/return_503".into());
    assert!(matches!(
        p.run(Sub::Recv, &mut c),
        Action::Synth { status: 503, .. }
    ));
}

#[test]
fn port_of_the_connection_addresses() {
    let p = deliver(
        "set resp.http.X-Server = std.port(server.ip);\nset resp.http.X-Client = std.port(client.ip);\n\
         if (std.port(server.ip) != 443) { set resp.http.X-Plain = \"1\"; }",
    );
    let mut c = TestContext::request("GET", "/");
    c.ports = vec![(Var::ServerIp, 8080), (Var::ClientIp, 50123)];
    p.run(Sub::Deliver, &mut c);
    assert_eq!(c.get_header(Scope::Resp, "x-server").as_deref(), Some("8080"));
    assert_eq!(c.get_header(Scope::Resp, "x-client").as_deref(), Some("50123"));
    assert_eq!(c.get_header(Scope::Resp, "x-plain").as_deref(), Some("1"));
    let e = refusal("sub vcl_recv { set req.http.X = std.port(std.ip(\"1.2.3.4\", \"0.0.0.0\")); }");
    assert!(
        e.contains("E060") && e.contains("`std.port` takes `client.ip`") && e.contains("hint:"),
        "{e}"
    );
    assert!(refusal("sub vcl_recv { set req.http.X = std.port(req.url); }").contains("E060"));
}
