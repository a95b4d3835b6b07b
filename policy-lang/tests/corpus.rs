//! Every policy in `examples/` (and the builtin VCL) loads cleanly,
//! and `default.vcl` behaves exactly like running with no policy.

use std::path::{Path, PathBuf};

use policy_lang::testing::TestContext;
use policy_lang::{load, load_str, Program, Scope, SourceLoader, Sub, Value, Var, BUILTIN_VCL};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn real_world_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/policies/real-world")
}

/// Reads files relative to the including file, as the runtime's loader does.
struct Fs;

impl SourceLoader for Fs {
    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
        let p = match from.and_then(|f| Path::new(f).parent()) {
            Some(dir) if !Path::new(path).is_absolute() => dir.join(path),
            _ => PathBuf::from(path),
        };
        let text = std::fs::read_to_string(&p).map_err(|e| e.to_string())?;
        Ok((p.display().to_string(), text))
    }
}

fn example_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vcl"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_checks_clean() {
    let files = example_files();
    assert!(files.len() >= 3);
    for f in files {
        let name = f.display().to_string();
        match load(&name, &Fs) {
            Ok(p) => {
                if let Some(w) = p.warnings() {
                    panic!("{name} has warnings:\n{}", w.render());
                }
                assert_eq!(p.sources()[0], name);
            }
            Err(d) => panic!("{name} does not load:\n{}", d.render()),
        }
    }
}

#[test]
fn builtin_vcl_loads_on_its_own() {
    // As user code each of its subs is concatenated with the builtin's own, as in Varnish.
    let p = load_str("builtin.vcl", BUILTIN_VCL).unwrap_or_else(|d| panic!("{}", d.render()));
    assert!(p.warnings().is_none(), "{}", p.warnings().unwrap().render());
}

#[test]
fn includes_resolve_relative_to_the_includer() {
    let dir = tempfile_dir("policy-lang-inc");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("main.vcl"),
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\ninclude \"sub/recv.vcl\";\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sub/recv.vcl"),
        "include \"more.vcl\";\nsub vcl_recv { call more; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sub/more.vcl"),
        "sub more { set req.http.X-More = \"1\"; }\n",
    )
    .unwrap();
    let main = dir.join("main.vcl").display().to_string();
    let p = load(&main, &Fs).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(p.sources().len(), 3);
    let mut c = TestContext::request("GET", "/");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_header(Scope::Req, "x-more").as_deref(), Some("1"));

    // A cycle is reported, not followed.
    std::fs::write(dir.join("sub/more.vcl"), "include \"recv.vcl\";\nsub more { }\n").unwrap();
    let d = load(&main, &Fs).unwrap_err();
    assert!(d.render().contains("includes itself"), "{}", d.render());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn includes_are_refused_without_a_loader() {
    let d = load_str("x.vcl", "include \"other.vcl\";").unwrap_err();
    assert!(d.render().contains("cannot include"));
}

/// What one run did, for comparing two programs.
fn outcome(p: &Program, sub: Sub, c: TestContext) -> String {
    outcome_hashing_times(p, sub, c, 1)
}

/// [`outcome`], with the `hash_data` inputs listed `times` times over.
fn outcome_hashing_times(p: &Program, sub: Sub, mut c: TestContext, times: usize) -> String {
    let a = p.run(sub, &mut c);
    c.hash = c
        .hash
        .iter()
        .cycle()
        .take(c.hash.len() * times)
        .cloned()
        .collect();
    // Unsetting twice is unsetting.
    c.unset_vars.dedup();
    let mut headers: Vec<String> = c
        .headers
        .iter()
        .map(|(s, n, x)| format!("{s:?}:{n}={x}"))
        .collect();
    headers.sort();
    let mut vars: Vec<String> = c.vars().map(|(k, v)| format!("{k:?}={v:?}")).collect();
    vars.sort();
    format!(
        "{a:?} {headers:?} {vars:?} {:?} {:?} {:?}",
        c.hash, c.body, c.unset_vars
    )
}

/// Requests and responses on which a policy that only restates the builtin must decide as no
/// policy does.
fn builtin_equivalence_cases() -> Vec<(Sub, TestContext)> {
    let s = |x: &str| Value::Str(x.to_string().into());
    let mut cases: Vec<(Sub, TestContext)> = Vec::new();
    for method in ["GET", "HEAD", "POST", "PUT", "PRI", "BREW", "OPTIONS"] {
        cases.push((Sub::Recv, TestContext::request(method, "/")));
    }
    for (h, v) in [
        ("Cookie", "a=1"),
        ("Authorization", "Basic x"),
        ("Host", "EXAMPLE.com"),
        ("Upgrade", "WebSocket"),
        ("Upgrade", "h2c"),
    ] {
        cases.push((
            Sub::Recv,
            TestContext::request("GET", "/").header(Scope::Req, h, v),
        ));
    }
    let mut no_host = TestContext::request("GET", "/");
    no_host.clear_headers(Scope::Req);
    cases.push((Sub::Recv, no_host.clone()));
    cases.push((Sub::Recv, no_host.clone().var(Var::ReqProto, s("HTTP/1.0"))));
    cases.push((Sub::Hash, TestContext::request("GET", "/a?b=c")));
    cases.push((Sub::Hash, no_host));
    for sub in [Sub::Hit, Sub::Miss, Sub::Pass, Sub::Deliver, Sub::Purge] {
        cases.push((sub, TestContext::request("GET", "/")));
    }
    cases.push((
        Sub::Synth,
        TestContext::request("GET", "/")
            .var(Var::RespStatus, Value::Int(404))
            .var(Var::RespReason, s("Not Found")),
    ));
    for method in ["GET", "POST"] {
        cases.push((Sub::BackendFetch, TestContext::request(method, "/").to_backend()));
    }
    for (ttl, h, v) in [
        (60.0, "X-None", ""),
        (0.0, "X-None", ""),
        (-1.0, "X-None", ""),
        (60.0, "Set-Cookie", "a=b"),
        (60.0, "Cache-Control", "no-cache"),
        (60.0, "Cache-Control", "PRIVATE"),
        (60.0, "Cache-Control", "public, max-age=60"),
        (60.0, "Surrogate-Control", "no-store"),
        (60.0, "Surrogate-Control", "max-age=1"),
        (60.0, "Vary", "*"),
        (60.0, "Vary", "Accept-Encoding"),
        (60.0, "Content-Range", "bytes 0-1/10"),
    ] {
        cases.push((
            Sub::BackendResponse,
            TestContext::backend_response(200, ttl).header(Scope::Beresp, h, v),
        ));
    }
    cases.push((
        Sub::BackendResponse,
        TestContext::backend_response(206, 60.0).header(Scope::Beresp, "Content-Range", "bytes 0-1/10"),
    ));
    cases.push((
        Sub::BackendResponse,
        TestContext::backend_response(200, 0.0).var(Var::BereqUncacheable, Value::Bool(true)),
    ));
    cases.push((
        Sub::BackendError,
        TestContext::backend_response(503, 0.0).var(Var::BerespReason, s("Backend fetch failed")),
    ));
    cases.push((Sub::Init, TestContext::new()));
    cases.push((Sub::Fini, TestContext::new()));

    cases
}

/// Runs every equivalence case through both programs; `other` hashes what `none` hashes,
/// `hash_times` times over.
fn assert_same_decisions(none: &Program, other: &Program, hash_times: usize) {
    for (sub, ctx) in builtin_equivalence_cases() {
        let a = outcome_hashing_times(none, sub, ctx.clone(), hash_times);
        let b = outcome(other, sub, ctx);
        assert_eq!(a, b, "{sub:?} differs");
    }
}

fn no_policy() -> Program {
    load_str(
        "none.vcl",
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }",
    )
    .unwrap()
}

#[test]
fn default_vcl_behaves_like_no_policy() {
    let path = examples_dir().join("default.vcl").display().to_string();
    let default = load(&path, &Fs).unwrap();
    assert_same_decisions(&no_policy(), &default, 1);
}

#[test]
fn a_policy_including_varnish_77_builtin_behaves_like_no_policy() {
    let path = real_world_dir().join("verbose-builtin.vcl").display().to_string();
    let verbose = load(&path, &Fs).unwrap_or_else(|d| panic!("{}", d.render()));
    // Its own vcl_recv answers /healthz; everything else is the builtin's. As in Varnish, the
    // copy's `vcl_builtin_hash` and the builtin's own both run: each input is hashed twice,
    // which splits the cache exactly as the builtin does.
    assert_same_decisions(&no_policy(), &verbose, 2);
    // The copy's subs are the user's, so the runtime must not run its native builtin_recv.
    assert!(verbose.has_sub(Sub::BackendResponse));
}

#[test]
fn every_varnish_7_builtin_hook_can_be_called() {
    // Varnish 7 splits each builtin sub into `vcl_X` calling `vcl_builtin_X`; VCL written in
    // that style calls the hooks from its own subs.
    let src = r#"vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "8080"; }
sub vcl_init { call vcl_builtin_init; }
sub vcl_recv { call vcl_builtin_recv; }
sub vcl_hash { call vcl_builtin_hash; }
sub vcl_pass { call vcl_builtin_pass; }
sub vcl_purge { call vcl_builtin_purge; }
sub vcl_hit { call vcl_builtin_hit; }
sub vcl_miss { call vcl_builtin_miss; }
sub vcl_deliver { call vcl_builtin_deliver; set resp.http.X-Served = "1"; }
sub vcl_synth { call vcl_builtin_synth; }
sub vcl_backend_fetch { call vcl_builtin_backend_fetch; }
sub vcl_backend_response { call vcl_builtin_backend_response; }
sub vcl_backend_error { call vcl_builtin_backend_error; }
sub vcl_fini { call vcl_builtin_fini; }
"#;
    let program = load_str("varnish7.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut ctx = TestContext::request("GET", "/");
    assert_eq!(program.run(Sub::Deliver, &mut ctx), policy_lang::Action::Deliver);
}

#[test]
fn varnish_constructs_that_would_misbehave_here_are_flagged() {
    let base = "vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n";
    // `std.port` of a computed IP has no port to give (the usual HTTPS redirect tests
    // `std.port(server.ip)`, which loads: the listener's port).
    let port = load_str(
        "port.vcl",
        &format!("{base}sub vcl_recv {{ if (std.port(std.ip(req.http.X-Ip, \"0.0.0.0\")) != 443) {{ return (synth(750)); }} }}"),
    )
    .map(|_| String::new())
    .unwrap_or_else(|d| d.render());
    assert!(port.contains("std.port(server.ip)"), "{port}");
    // ESI is processed: `beresp.do_esi` loads without a warning.
    let esi = load_str(
        "esi.vcl",
        &format!("{base}sub vcl_backend_response {{ set beresp.do_esi = true; }}"),
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    let warnings = esi.warnings().map(|w| w.render()).unwrap_or_default();
    assert!(!warnings.contains("do_esi"), "{warnings}");
}

#[test]
fn expression_chains_and_call_chains_are_bounded() {
    // The passes recurse once per operand: with a debug build's frames this needs more than a
    // test thread's 2 MiB (edgecache's own threads have 8 MiB, and release frames are smaller).
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(chains_near_the_limits)
        .expect("spawn")
        .join()
        .expect("no panic");
}

fn chains_near_the_limits() {
    let base = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n";
    let chain = |terms: usize| {
        let tests: Vec<String> = (0..terms).map(|i| format!("req.url == \"/{i}\"")).collect();
        format!(
            "{base}sub vcl_recv {{ if ({}) {{ return (pass); }} }}",
            tests.join(" || ")
        )
    };
    let render = |src: &str| {
        load_str("limits.vcl", src)
            .map(|_| String::new())
            .unwrap_or_else(|d| d.render())
    };
    assert_eq!(render(&chain(450)), "");
    assert!(render(&chain(600)).contains("600 operands in one chain"));

    let calls = |depth: usize| {
        let subs: String = (0..depth)
            .map(|i| format!("sub s{i} {{ call s{}; }}\n", i + 1))
            .collect();
        format!("{base}{subs}sub s{depth} {{ }}\nsub vcl_recv {{ call s0; }}")
    };
    assert_eq!(render(&calls(150)), "");
    assert!(
        render(&calls(5000)).contains("calls nest"),
        "{}",
        render(&calls(300))
    );
}

#[test]
fn times_past_year_9999_print_as_the_last_http_date() {
    let src = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n\
               sub vcl_recv { set req.http.X-Far = now + 999999999999y; }";
    let program = load_str("far.vcl", src).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut ctx = TestContext::request("GET", "/").var(Var::Now, Value::Time(1.7e9));
    program.run(Sub::Recv, &mut ctx);
    assert_eq!(
        ctx.get_header(Scope::Req, "x-far").as_deref(),
        Some("Fri, 31 Dec 9999 23:59:59 GMT")
    );
}

#[test]
fn a_policy_without_its_version_line_is_refused() {
    for text in ["", "sub vcl_recv { return (pass); }\n"] {
        let diagnostics = load_str("truncated.vcl", text).map(|_| ()).expect_err("refused");
        assert!(
            diagnostics.render().contains("does not start with `vcl 4.1;`"),
            "{text:?}"
        );
    }
}

#[test]
fn an_include_inside_a_sub_splices_statements() {
    let dir = tempfile_dir("policy-lang-inc-sub");
    std::fs::write(
        dir.join("main.vcl"),
        "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; }\n\
         sub vcl_recv {\n  if (req.url ~ \"^/static/\") {\n    include \"static.vcl\";\n  }\n  include \"common.vcl\";\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("static.vcl"), "unset req.http.Cookie;\nreturn (hash);\n").unwrap();
    std::fs::write(dir.join("common.vcl"), "set req.http.X-Common = \"1\";\n").unwrap();
    let main = dir.join("main.vcl").display().to_string();
    let p = load(&main, &Fs).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut c = TestContext::request("GET", "/page").header(Scope::Req, "Cookie", "a=1");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_header(Scope::Req, "x-common").as_deref(), Some("1"));
    let mut c = TestContext::request("GET", "/static/x.css").header(Scope::Req, "Cookie", "a=1");
    assert_eq!(p.run(Sub::Recv, &mut c), policy_lang::Action::Lookup);
    assert_eq!(c.get_header(Scope::Req, "cookie"), None);

    // A fragment holds statements only; its errors point into it.
    std::fs::write(dir.join("common.vcl"), "set req.http.X-Common = ;\n").unwrap();
    let rendered = load(&main, &Fs).unwrap_err().render();
    assert!(rendered.contains("common.vcl:1:"), "{rendered}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
