//! Evaluator tests: run compiled policies against `TestContext`.

use std::borrow::Cow;

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Action, Program, Scope, Sub, Value, Var};

fn program(src: &str) -> Program {
    match load_str("test.vcl", src) {
        Ok(p) => p,
        Err(d) => panic!("policy should load:\n{}", d.render()),
    }
}

/// Asserts that `src` is refused with a diagnostic containing `wanted`.
fn refused(src: &str, wanted: &str) {
    let diagnostics = load_str("test.vcl", src).map(|_| ()).expect_err("refused");
    assert!(diagnostics.render().contains(wanted), "{}", diagnostics.render());
}

fn synth(status: u16, reason: &str) -> Action {
    Action::Synth {
        status,
        reason: reason.into(),
    }
}

const EMPTY: &str = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n";

#[test]
fn builtin_recv_looks_up_plain_gets() {
    let p = program(EMPTY);
    assert!(!p.has_sub(Sub::Recv));
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("GET", "/")),
        Action::Lookup
    );
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("HEAD", "/")),
        Action::Lookup
    );
}

#[test]
fn builtin_recv_passes_cookies_auth_and_posts() {
    let p = program(EMPTY);
    let mut c = TestContext::request("GET", "/").header(Scope::Req, "Cookie", "a=b");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Pass);
    let mut c = TestContext::request("GET", "/").header(Scope::Req, "Authorization", "x");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Pass);
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("POST", "/")),
        Action::Pass
    );
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("PRI", "/")),
        synth(405, "Method Not Allowed")
    );
    // Unknown methods go to the origin, which decides (Varnish 7 pipes them).
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("BREW", "/")),
        Action::Pass
    );
    let mut upgrade = TestContext::request("GET", "/chat").header(Scope::Req, "Upgrade", "WebSocket");
    assert_eq!(p.run(Sub::Recv, &mut upgrade), Action::Pipe);
}

#[test]
fn builtin_recv_requires_host_and_lowercases_it() {
    let p = program(EMPTY);
    let mut c = TestContext::request("GET", "/");
    c.clear_headers(Scope::Req);
    assert_eq!(p.run(Sub::Recv, &mut c), synth(400, "Bad Request"));
    let mut c = TestContext::request("GET", "/");
    c.clear_headers(Scope::Req);
    let mut c = c.header(Scope::Req, "Host", "Example.COM");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    assert_eq!(c.get_header(Scope::Req, "host").as_deref(), Some("example.com"));
}

#[test]
fn builtin_hash_uses_url_and_host() {
    let p = program(EMPTY);
    let mut c = TestContext::request("GET", "/a?b");
    assert_eq!(p.run(Sub::Hash, &mut c), Action::Lookup);
    assert_eq!(c.hash, vec!["/a?b".to_string(), "example.com".to_string()]);
    let mut c = TestContext::request("GET", "/a");
    c.clear_headers(Scope::Req);
    p.run(Sub::Hash, &mut c);
    assert_eq!(c.hash, vec!["/a".to_string(), "127.0.0.1".to_string()]);
}

#[test]
fn user_hash_data_then_builtin() {
    let p = program(&format!(
        "{EMPTY}sub vcl_hash {{ if (req.http.X-Lang) {{ hash_data(req.http.X-Lang); }} }}"
    ));
    let mut c = TestContext::request("GET", "/").header(Scope::Req, "X-Lang", "fr");
    p.run(Sub::Hash, &mut c);
    assert_eq!(c.hash, vec!["fr", "/", "example.com"]);
}

#[test]
fn builtin_backend_response_hit_for_miss() {
    let p = program(EMPTY);
    // Cacheable.
    let mut c = TestContext::backend_response(200, 60.0);
    assert_eq!(p.run(Sub::BackendResponse, &mut c), Action::Deliver);
    assert_eq!(c.get_var(Var::BerespUncacheable), Value::Bool(false));
    assert_eq!(c.get_var(Var::BerespTtl), Value::Duration(60.0));
    // ttl <= 0 -> hit-for-miss for 120 s.
    let mut c = TestContext::backend_response(200, 0.0);
    assert_eq!(p.run(Sub::BackendResponse, &mut c), Action::Deliver);
    assert_eq!(c.get_var(Var::BerespUncacheable), Value::Bool(true));
    assert_eq!(c.get_var(Var::BerespTtl), Value::Duration(120.0));
    // Set-Cookie, Cache-Control private, Vary *, Surrogate-Control no-store.
    for (h, v) in [
        ("Set-Cookie", "a=b"),
        ("Cache-Control", "max-age=60, Private"),
        ("Vary", "*"),
        ("Surrogate-Control", "no-store"),
    ] {
        let mut c = TestContext::backend_response(200, 60.0).header(Scope::Beresp, h, v);
        p.run(Sub::BackendResponse, &mut c);
        assert_eq!(c.get_var(Var::BerespUncacheable), Value::Bool(true), "{h}: {v}");
    }
    // Surrogate-Control present without no-store overrides Cache-Control.
    let mut c = TestContext::backend_response(200, 60.0)
        .header(Scope::Beresp, "Surrogate-Control", "max-age=10")
        .header(Scope::Beresp, "Cache-Control", "private");
    p.run(Sub::BackendResponse, &mut c);
    assert_eq!(c.get_var(Var::BerespUncacheable), Value::Bool(false));
    // Content-Range dropped unless 206/416.
    let mut c =
        TestContext::backend_response(200, 60.0).header(Scope::Beresp, "Content-Range", "bytes 0-1/2");
    p.run(Sub::BackendResponse, &mut c);
    assert_eq!(c.get_header(Scope::Beresp, "content-range"), None);
}

#[test]
fn user_return_skips_builtin() {
    let p = program(&format!(
        "{EMPTY}sub vcl_backend_response {{ if (bereq.url ~ \"test\\.php$\") {{ set beresp.ttl = 45s; set beresp.http.Cache-Control = \"max-age=45\"; return (deliver); }} }}"
    ));
    let mut c =
        TestContext::backend_response(200, 0.0).var(Var::BereqUrl, Value::Str(Cow::Borrowed("/test.php")));
    assert_eq!(p.run(Sub::BackendResponse, &mut c), Action::Deliver);
    assert_eq!(c.get_var(Var::BerespTtl), Value::Duration(45.0));
    assert_eq!(c.get_var(Var::BerespUncacheable), Value::Bool(false));
    assert_eq!(
        c.get_header(Scope::Beresp, "cache-control").as_deref(),
        Some("max-age=45")
    );
}

#[test]
fn synth_with_custom_page_and_builtin_page() {
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{ if (req.url == \"/forbidden\") {{ return (synth(403, \"Go away\")); }} }}\n\
         sub vcl_synth {{ if (resp.status == 403) {{ set resp.http.Content-Type = \"text/plain\"; synthetic(\"no: \" + resp.reason); return (deliver); }} }}"
    ));
    let mut c = TestContext::request("GET", "/forbidden");
    assert_eq!(p.run(Sub::Recv, &mut c), synth(403, "Go away"));
    let mut c = c
        .var(Var::RespStatus, Value::Int(403))
        .var(Var::RespReason, Value::Str(Cow::Borrowed("Go away")));
    assert_eq!(p.run(Sub::Synth, &mut c), Action::Deliver);
    assert_eq!(c.body.as_deref(), Some("no: Go away"));
    // Other statuses get the builtin HTML page.
    let mut c = TestContext::request("GET", "/")
        .var(Var::RespStatus, Value::Int(503))
        .var(Var::RespReason, Value::Str(Cow::Borrowed("Service Unavailable")));
    p.run(Sub::Synth, &mut c);
    let body = c.body.clone().unwrap();
    assert!(body.contains("<title>503 Service Unavailable</title>"), "{body}");
    assert!(body.contains("XID: 1"));
    assert_eq!(c.get_header(Scope::Resp, "retry-after").as_deref(), Some("5"));
}

#[test]
fn cookies_stripped_make_request_cacheable() {
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{ if (req.url ~ \"\\.(css|js|png)$\") {{ unset req.http.Cookie; }} }}"
    ));
    let mut c = TestContext::request("GET", "/a.css").header(Scope::Req, "Cookie", "x=1");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    let mut c = TestContext::request("GET", "/a.html").header(Scope::Req, "Cookie", "x=1");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Pass);
}

#[test]
fn regsub_and_regsuball() {
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{\n\
           set req.url = regsuball(req.url, \"(utm_[a-z]+|fbclid|gclid)=[^&]*&?\", \"\");\n\
           set req.url = regsub(req.url, \"[?&]$\", \"\");\n\
           set req.http.X-First = regsub(\"/a/b/c\", \"^/([^/]+)/.*\", \"\\1!\");\n\
         }}"
    ));
    let mut c = TestContext::request("GET", "/p?utm_source=x&id=3&fbclid=abc");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_var(Var::ReqUrl), Value::Str(Cow::Borrowed("/p?id=3")));
    assert_eq!(c.get_header(Scope::Req, "x-first").as_deref(), Some("a!"));
}

#[test]
fn acl_purge_and_ban() {
    let p = program(&format!(
        "{EMPTY}acl purgers {{ \"127.0.0.1\"; \"10.0.0.0\"/8; }}\n\
         sub vcl_recv {{\n\
           if (req.method == \"PURGE\") {{\n\
             if (!client.ip ~ purgers) {{ return (synth(405, \"Not allowed\")); }}\n\
             return (purge);\n\
           }}\n\
           if (req.method == \"BAN\") {{\n\
             ban(\"obj.http.X-Url ~ \" + req.url);\n\
             return (synth(200, \"Banned\"));\n\
           }}\n\
         }}"
    ));
    let mut c = TestContext::request("PURGE", "/x");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Purge);
    let mut c =
        TestContext::request("PURGE", "/x").var(Var::ClientIp, Value::Ip("192.168.1.1".parse().unwrap()));
    assert_eq!(p.run(Sub::Recv, &mut c), synth(405, "Not allowed"));
    let mut c = TestContext::request("BAN", "^/news");
    assert_eq!(p.run(Sub::Recv, &mut c), synth(200, "Banned"));
    assert_eq!(c.bans.len(), 1);
    assert_eq!(c.bans[0].as_str(), "obj.http.X-Url ~ ^/news");
    // Purge builtin.
    assert_eq!(
        p.run(Sub::Purge, &mut TestContext::request("PURGE", "/")),
        synth(200, "Purged")
    );
}

#[test]
fn acl_masks_may_be_written_inside_the_quotes() {
    let p = program(&format!(
        "{EMPTY}acl internal {{ \"172.16.0.0/12\"; \"2001:db8::/32\"; }}\n\
         sub vcl_recv {{ if (client.ip ~ internal) {{ return (pass); }} }}"
    ));
    for (ip, inside) in [("172.20.1.1", true), ("172.32.0.1", false), ("2001:db8::7", true)] {
        let mut c = TestContext::request("GET", "/").var(Var::ClientIp, Value::Ip(ip.parse().unwrap()));
        assert_eq!(p.run(Sub::Recv, &mut c) == Action::Pass, inside, "{ip}");
    }
}

#[test]
fn restart_and_custom_subs() {
    let p = program(&format!(
        "{EMPTY}sub vcl_deliver {{ call check_status; set resp.http.X-Hits = obj.hits; }}\n\
         sub check_status {{ if (resp.status == 404 && req.restarts < 1) {{ return (restart); }} return; }}"
    ));
    let mut c = TestContext::request("GET", "/")
        .var(Var::RespStatus, Value::Int(404))
        .var(Var::ObjHits, Value::Int(3));
    assert_eq!(p.run(Sub::Deliver, &mut c), Action::Restart);
    let mut c = c.var(Var::ReqRestarts, Value::Int(1));
    assert_eq!(p.run(Sub::Deliver, &mut c), Action::Deliver);
    assert_eq!(c.get_header(Scope::Resp, "x-hits").as_deref(), Some("3"));
}

#[test]
fn if_elsif_else_run_the_first_branch_that_holds_and_returns_inside_them_end_the_sub() {
    // Top-level `if`s are run by the block and nested ones by `exec`: both ways agree, and a
    // `return` in a branch (bare in a custom sub, with an action in a method) ends its sub.
    let p = program(&format!(
        "{EMPTY}sub pick {{\n\
         if (req.url ~ \"^/leave\") {{ set req.http.P = \"left\"; return; }}\n\
         set req.http.P = \"fell through\";\n\
         }}\n\
         sub vcl_recv {{\n\
         if (req.url == \"/a\") {{ set req.http.B = \"a\"; }}\n\
         elsif (req.url ~ \"^/b\") {{ set req.http.B = \"b\"; if (req.url == \"/b/pass\") {{ return (pass); }} }}\n\
         elsif (req.url ~ \"^/leave\") {{ call pick; set req.http.After = \"1\"; }}\n\
         else {{ set req.http.B = \"else\"; if (req.method == \"GET\") {{ }} else {{ return (synth(418)); }} }}\n\
         if (req.http.B) {{ set req.http.Seen = req.http.B; }}\n\
         }}"
    ));
    let run = |method: &str, url: &str| {
        let mut c = TestContext::request(method, url);
        let action = p.run(Sub::Recv, &mut c);
        let header = |name: &str| c.get_header(Scope::Req, name).unwrap_or_default();
        (action, header("b"), header("seen"), header("p"), header("after"))
    };
    let s = String::from;
    assert_eq!(run("GET", "/a"), (Action::Lookup, s("a"), s("a"), s(""), s("")));
    assert_eq!(run("GET", "/b/x"), (Action::Lookup, s("b"), s("b"), s(""), s("")));
    assert_eq!(run("GET", "/b/pass"), (Action::Pass, s("b"), s(""), s(""), s("")));
    assert_eq!(
        run("GET", "/leave"),
        (Action::Lookup, s(""), s(""), s("left"), s("1"))
    );
    assert_eq!(
        run("GET", "/z"),
        (Action::Lookup, s("else"), s("else"), s(""), s(""))
    );
    assert_eq!(
        run("PUT", "/z"),
        (synth(418, "I'm a teapot"), s("else"), s(""), s(""), s(""))
    );
}

#[test]
fn arithmetic_types_and_std() {
    let p = program(
        &format!(
            "{EMPTY}import std;\n\
         sub vcl_backend_response {{\n\
           set beresp.ttl = std.duration(beresp.http.X-Ttl, 10s) + 1m;\n\
           set beresp.grace = beresp.ttl * 2;\n\
           set beresp.http.X-Ttl-Out = beresp.ttl;\n\
           set beresp.http.X-Int = std.integer(\"42\", 0) + 1;\n\
           set beresp.http.X-Lower = std.tolower(\"AbC\") + \"-\" + \"dEf\".upper();\n\
           set beresp.status = 200 + 1;\n\
           std.log(\"ttl is \" + beresp.ttl);\n\
           return (deliver);\n\
         }}",
        )
        .replace("\"dEf\".upper()", "std.toupper(\"dEf\")"),
    );
    let mut c = TestContext::backend_response(200, 1.0).header(Scope::Beresp, "X-Ttl", "30s");
    p.run(Sub::BackendResponse, &mut c);
    assert_eq!(c.get_var(Var::BerespTtl), Value::Duration(90.0));
    assert_eq!(c.get_var(Var::BerespGrace), Value::Duration(180.0));
    assert_eq!(
        c.get_header(Scope::Beresp, "x-ttl-out").as_deref(),
        Some("90.000")
    );
    assert_eq!(c.get_header(Scope::Beresp, "x-int").as_deref(), Some("43"));
    assert_eq!(c.get_header(Scope::Beresp, "x-lower").as_deref(), Some("abc-DEF"));
    assert_eq!(c.get_var(Var::BerespStatus), Value::Int(201));
    assert_eq!(c.logs, vec!["ttl is 90.000"]);
}

#[test]
fn backends_and_directors() {
    let p = program(
        "vcl 4.1;\nimport directors;\n\
         probe health { .url = \"/health\"; .interval = 2s; }\n\
         backend a { .host = \"10.0.0.1:8080\"; .probe = health; .connect_timeout = 1s; }\n\
         backend b { .host = \"10.0.0.2\"; .port = \"81\"; .max_connections = 10; .probe = { .url = \"/\"; .window = 5; .threshold = 2; } }\n\
         sub vcl_init { new rr = directors.round_robin(); rr.add_backend(a); rr.add_backend(b); }\n\
         sub vcl_recv { set req.backend_hint = rr.backend(); if (req.url ~ \"^/b\") { set req.backend_hint = b; } }",
    );
    let bs = p.backends();
    assert_eq!(bs.len(), 2);
    assert_eq!((bs[0].host.as_str(), bs[0].port), ("10.0.0.1", 8080));
    assert_eq!(bs[0].probe.as_ref().unwrap().url, "/health");
    assert_eq!(bs[0].connect_timeout, Some(std::time::Duration::from_secs(1)));
    assert_eq!((bs[1].port, bs[1].max_connections), (81, Some(10)));
    assert_eq!(bs[1].probe.as_ref().unwrap().initial, 1);
    assert_eq!(p.default_backend(), Some(policy_lang::BackendId::new(0)));
    assert_eq!(p.run(Sub::Init, &mut TestContext::new()), Action::Ok);
    // The hint is the director; the runtime picks a member at fetch time.
    let mut picks = Vec::new();
    for _ in 0..4 {
        let mut c = TestContext::request("GET", "/");
        p.run(Sub::Recv, &mut c);
        let Value::Backend(Some(hint)) = c.get_var(Var::ReqBackendHint) else {
            panic!("no backend hint");
        };
        assert_eq!(p.backend_name(hint), "rr");
        picks.push(p.resolve_backend(hint, &c));
    }
    assert_ne!(picks[0], picks[1]);
    assert_eq!(picks[0], picks[2]);
    let mut c = TestContext::request("GET", "/b");
    p.run(Sub::Recv, &mut c);
    assert_eq!(
        c.get_var(Var::ReqBackendHint),
        Value::Backend(Some(policy_lang::BackendId::new(1)))
    );
}

#[test]
fn method_sub_concatenation() {
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{ set req.http.X-A = \"1\"; }}\nsub vcl_recv {{ set req.http.X-B = req.http.X-A + \"2\"; }}"
    ));
    let mut c = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    assert_eq!(c.get_header(Scope::Req, "x-b").as_deref(), Some("12"));
}

#[test]
fn multi_valued_headers_join() {
    let p = program(&format!(
        "{EMPTY}import std;\nsub vcl_recv {{ std.collect(req.http.X-A); }}"
    ));
    let mut c = TestContext::request("GET", "/")
        .header(Scope::Req, "X-A", "1")
        .header(Scope::Req, "X-A", "2");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.headers.iter().filter(|(_, n, _)| n == "x-a").count(), 1);
    assert_eq!(c.get_header(Scope::Req, "x-a").as_deref(), Some("1, 2"));
}

#[test]
fn hash_always_miss_and_grace() {
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{ if (req.http.X-Refresh) {{ set req.hash_always_miss = true; }} set req.grace = 10s; }}"
    ));
    let mut c = TestContext::request("GET", "/").header(Scope::Req, "X-Refresh", "1");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_var(Var::ReqHashAlwaysMiss), Value::Bool(true));
    assert_eq!(c.get_var(Var::ReqGrace), Value::Duration(10.0));
}

#[test]
fn program_is_shareable() {
    let p = std::sync::Arc::new(program(EMPTY));
    let q = p.clone();
    std::thread::spawn(move || {
        assert_eq!(
            q.run(Sub::Recv, &mut TestContext::request("GET", "/")),
            Action::Lookup
        );
    })
    .join()
    .unwrap();
    assert_eq!(p.sources(), ["test.vcl"]);
}

#[test]
fn string_comparisons_and_matches_in_conditions() {
    // Comparisons with a literal on either side, unset headers reading as
    // "", and `~` fast paths (literal alternations, `(?i)`) agreeing with
    // the regex engine.
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{\n\
         if (\"on\" == req.http.X-A) {{ set req.http.R1 = \"1\"; }}\n\
         if (req.http.X-Missing == \"\") {{ set req.http.R2 = \"1\"; }}\n\
         if (req.http.X-Missing != \"x\" && !req.http.X-Missing) {{ set req.http.R3 = \"1\"; }}\n\
         if (\"/b\" > req.url) {{ set req.http.R4 = \"1\"; }}\n\
         if (req.url >= \"/a\" && req.url <= \"/a/\") {{ set req.http.R5 = \"1\"; }}\n\
         if (req.url ~ \"(?i)\\.(JPG|png|k)$\") {{ set req.http.R6 = \"1\"; }}\n\
         if (req.url !~ \"^/(b|c)\") {{ set req.http.R7 = \"1\"; }}\n\
         if (req.http.X-A ~ \"[[:upper:]]\" || req.method == \"POST\") {{ set req.http.R8 = \"1\"; }}\n\
         }}"
    ));
    let run = |url: &str, xa: &str| -> String {
        let mut c = TestContext::request("GET", url).header(Scope::Req, "X-A", xa);
        p.run(Sub::Recv, &mut c);
        (1..=8)
            .map(|i| match c.get_header(Scope::Req, &format!("r{i}")) {
                Some(_) => char::from(b'0' + i as u8),
                None => '-',
            })
            .collect()
    };
    assert_eq!(run("/a/x.jpg", "on"), "1234-67-");
    assert_eq!(run("/b/x.PNG", "On"), "-23--6-8");
    // `(?i)` folds the Kelvin sign to `k`, as the regex engine does.
    assert_eq!(run("/a/x.\u{212A}", "on"), "1234-67-");
    assert_eq!(run("/a", "ON"), "-2345-78");
}

#[test]
fn nested_boolean_operators_agree_with_their_truth_table() {
    // Operands of `&&`, `||` and `!` are tests run in place or nested operators: every mix of
    // the two, over every combination of three inputs.
    let p = program(&format!(
        "{EMPTY}sub vcl_recv {{\n\
         if (!(req.http.A || req.url ~ \"^/b\") && (req.method == \"GET\" || !req.http.A)) {{ set req.http.R1 = \"1\"; }}\n\
         if (req.http.A && !(req.method != \"GET\") || req.url ~ \"^/b\" && !req.http.A) {{ set req.http.R2 = \"1\"; }}\n\
         if (!!req.http.A || !(req.url !~ \"^/b\" && req.method == \"GET\")) {{ set req.http.R3 = \"1\"; }}\n\
         }}"
    ));
    for bits in 0..8u8 {
        let (a, b, get) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let mut c = TestContext::request(if get { "GET" } else { "POST" }, if b { "/b" } else { "/c" });
        if a {
            c = c.header(Scope::Req, "A", "");
        }
        p.run(Sub::Recv, &mut c);
        let set = |name: &str| c.get_header(Scope::Req, name).is_some();
        // Each line's condition, simplified by hand.
        let wanted = [!a && !b, a && get || b && !a, a || b || !get];
        assert_eq!([set("r1"), set("r2"), set("r3")], wanted, "a={a} b={b} get={get}");
    }
}

#[test]
fn pass_in_backend_response_is_hit_for_pass() {
    let p = program(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n\
         sub vcl_backend_response {\n\
           if (beresp.http.x-for) { return (pass(2m + 3s)); }\n\
           return (pass);\n\
         }\n",
    );
    let mut c = TestContext::backend_response(200, 60.0).header(Scope::Beresp, "x-for", "1");
    assert_eq!(
        p.run(Sub::BackendResponse, &mut c),
        Action::HitForPass {
            ttl: std::time::Duration::from_secs(123)
        }
    );
    // Without a duration: hit-for-pass for `beresp.ttl`, which the runtime reads.
    let mut c = TestContext::backend_response(200, 60.0);
    assert_eq!(p.run(Sub::BackendResponse, &mut c), Action::Pass);
}

#[test]
fn return_vcl_switches_to_a_label_from_vcl_recv_only() {
    let p = program(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n\
         sub vcl_recv {\n\
           if (req.http.host == \"a.example\") { return (vcl(site_a)); }\n\
           if (req.http.host == \"b.example\") { return (vcl(site_b)); }\n\
           if (req.url == \"/again\") { return (vcl(site_a)); }\n\
         }\n",
    );
    assert_eq!(p.labels(), ["site_a", "site_b"]);
    let mut c = TestContext::request("GET", "/again");
    assert_eq!(
        p.run(Sub::Recv, &mut c),
        Action::Vcl {
            label: "site_a".into()
        }
    );
    // Falls through to the builtin otherwise.
    let mut c = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    let refused_sub = |body: &str, wanted: &str| {
        refused(
            &format!("vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; }}\n{body}\n"),
            wanted,
        )
    };
    refused_sub(
        "sub vcl_deliver { return (vcl(site_a)); }",
        "`return (vcl)` is not allowed in `vcl_deliver`",
    );
    refused_sub(
        "sub vcl_recv { return (vcl(\"site_a\")); }",
        "`vcl(...)` takes one label name",
    );
    refused_sub(
        "sub vcl_recv { return (vcl); }",
        "`vcl(...)` takes one label name",
    );
}

#[test]
fn pass_with_duration_outside_backend_response_is_refused() {
    refused(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\nsub vcl_recv { return (pass(10s)); }\n",
        "only allowed in `vcl_backend_response`",
    );
    // A STRING is not a DURATION.
    refused(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\nsub vcl_backend_response { return (pass(\"x\")); }\n",
        "DURATION",
    );
}

#[test]
fn probe_default_is_the_probe_of_backends_without_one() {
    let p = program(
        "vcl 4.1;\n\
         probe default { .url = \"/health\"; .interval = 1s; }\n\
         probe own { .url = \"/own\"; }\n\
         backend default { .host = \"10.0.0.1\"; }\n\
         backend mine { .host = \"10.0.0.2\"; .probe = own; }\n\
         sub vcl_recv { if (req.url ~ \"^/m\") { set req.backend_hint = mine; } }\n",
    );
    let urls: Vec<_> = p
        .backends()
        .iter()
        .map(|b| (b.name.as_str(), b.probe.as_ref().map(|probe| probe.url.as_str())))
        .collect();
    assert_eq!(urls, [("default", Some("/health")), ("mine", Some("/own"))]);

    refused(
        "vcl 4.1;\nprobe default { .url = \"/a\"; }\nprobe default { .url = \"/b\"; }\nbackend default { .host = \"127.0.0.1\"; }\n",
        "`probe default` is defined more than once",
    );
}

#[test]
fn varnish_request_state_variables_check_and_req_top_is_read_only() {
    let p = program(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n\
         sub vcl_miss { if (req.is_hitmiss) { set req.http.x-hm = \"1\"; } }\n\
         sub vcl_pass { if (req.is_hitpass) { set req.http.x-hp = \"1\"; } }\n\
         sub vcl_recv { set req.http.x-top = req_top.url + req_top.method + req_top.proto + req_top.http.host; \
                        set req.http.x-req = req.url + req.method + req.proto + req.http.host; \
                        set req.http.x-server = server.hostname + server.identity + local.socket + local.endpoint; }\n\
         sub vcl_backend_fetch { if (bereq.is_bgfetch) { set bereq.http.x-bg = \"1\"; } }\n\
         sub vcl_backend_response { set beresp.http.x-backend = beresp.backend; }\n\
         sub vcl_deliver { if (obj.can_esi) { set resp.http.x-esi = \"1\"; } }\n",
    );
    let mut c = TestContext::request("GET", "/a");
    p.run(Sub::Recv, &mut c);
    let top = c.get_header(Scope::Req, "x-top");
    assert!(
        top.as_deref().is_some_and(|top| top.starts_with("/aGET")),
        "{top:?}"
    );
    assert_eq!(
        top,
        c.get_header(Scope::Req, "x-req"),
        "req_top is req without ESI"
    );

    // req_top is read-only.
    refused(
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\nsub vcl_recv { set req_top.url = \"/x\"; }\n",
        "req_top.url",
    );
}

#[test]
fn directors_may_be_created_in_a_sub_vcl_init_calls() {
    let p = program(
        "vcl 4.1;\nimport directors;\n\
         backend a { .host = \"10.0.0.1\"; }\n\
         backend b { .host = \"10.0.0.2\"; }\n\
         sub make_directors { new rr = directors.round_robin(); rr.add_backend(a); rr.add_backend(b); }\n\
         sub vcl_init { call make_directors; }\n\
         sub vcl_recv { set req.backend_hint = rr.backend(); }",
    );
    assert_eq!(p.run(Sub::Init, &mut TestContext::new()), Action::Ok);
    let mut picks = Vec::new();
    for _ in 0..2 {
        let mut c = TestContext::request("GET", "/");
        p.run(Sub::Recv, &mut c);
        let Value::Backend(Some(hint)) = c.get_var(Var::ReqBackendHint) else {
            panic!("no backend hint");
        };
        assert_eq!(p.backend_name(hint), "rr");
        picks.push(p.resolve_backend(hint, &c));
    }
    assert_ne!(picks[0], picks[1], "round robin over the members the sub added");
}
