//! VCL as operators write it (`tests/policies/real-world/`, each file naming the pattern it
//! exercises) checks clean, Varnish 7.7's own builtin.vcl among them, and user definitions
//! of Varnish 7's builtin helper subs run before the builtin's body.

use std::path::{Path, PathBuf};

use policy_lang::testing::TestContext;
use policy_lang::{
    check_fragment, load, load_str, Action, Code, Program, Scope, SourceLoader, Sub, Value, Var,
};

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

const VARNISH_BUILTIN: &str = "includes/varnish-7.7-builtin.vcl";

fn program(src: &str) -> Program {
    load_str("test.vcl", src).unwrap_or_else(|d| panic!("policy should load:\n{}", d.render()))
}

#[test]
fn every_real_world_policy_checks_clean() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(real_world_dir())
        .expect("tests/policies/real-world exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "vcl"))
        .collect();
    files.sort();
    assert!(files.len() >= 25, "{files:?}");
    for file in files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("# Pattern: "),
            "{name} does not say what it exercises"
        );
        let program = load(&name, &Fs).unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
        // Only the verbatim builtin.vcl may warn (about pipe mode).
        if let Some(w) = program.warnings() {
            for d in w.iter() {
                let file = w.sources().get(d.primary.span.file).name.clone();
                assert!(file.ends_with(VARNISH_BUILTIN), "{name}:\n{}", w.render());
            }
        }
    }
}

#[test]
fn every_real_world_fragment_checks_clean_on_its_own() {
    let mut fragments: Vec<PathBuf> = std::fs::read_dir(real_world_dir().join("includes"))
        .expect("tests/policies/real-world/includes exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "vcl"))
        .collect();
    fragments.sort();
    assert!(fragments.len() >= 2, "{fragments:?}");
    for file in fragments {
        let name = file.display().to_string();
        let d = check_fragment(&name, &Fs);
        assert!(!d.has_errors(), "{name}:\n{}", d.render());
    }
}

#[test]
fn varnish_77_builtin_checks_as_a_main_file() {
    let text = std::fs::read_to_string(real_world_dir().join(VARNISH_BUILTIN)).unwrap();
    assert!(text.contains("SPDX-License-Identifier: BSD-2-Clause"));
    let with_backend = text.replacen(
        "vcl 4.0;\n",
        "vcl 4.0;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n",
        1,
    );
    for (name, src) in [("builtin.vcl", &text), ("with-backend.vcl", &with_backend)] {
        let p = load_str(name, src).unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
        // Pipe mode is the only thing it says edgecache does differently.
        let w = p.warnings().expect("pipe warnings");
        assert!(
            w.iter()
                .all(|d| d.code == Code::NoEffect && d.message.contains("pipe")),
            "{}",
            w.render()
        );
        // Unknown methods, which Varnish 7 pipes, are passed as edgecache's builtin does.
        let mut brew = TestContext::request("BREW", "/");
        assert_eq!(p.run(Sub::Recv, &mut brew), Action::Pass);
    }
}

#[test]
fn a_user_vcl_req_cookie_decides_before_the_builtin_body() {
    let p = program(
        r#"vcl 4.1;
backend default { .host = "127.0.0.1"; }
sub vcl_req_cookie {
    if (req.http.Cookie ~ "^consent=") { return (hash); }
}
"#,
    );
    // Only the helper is the user's, yet vcl_recv now runs the user's code: the runtime must
    // not answer it natively.
    assert!(p.has_sub(Sub::Recv));
    assert!(!p.has_sub(Sub::Deliver));
    let mut consent = TestContext::request("GET", "/").header(Scope::Req, "Cookie", "consent=yes");
    assert_eq!(p.run(Sub::Recv, &mut consent), Action::Lookup);
    // Any other cookie reaches the builtin body after the user's: pass.
    let mut session = TestContext::request("GET", "/").header(Scope::Req, "Cookie", "sid=1");
    assert_eq!(p.run(Sub::Recv, &mut session), Action::Pass);
    // The helpers before it still run: a POST passes before vcl_req_cookie is reached.
    let mut post = TestContext::request("POST", "/").header(Scope::Req, "Cookie", "consent=yes");
    assert_eq!(p.run(Sub::Recv, &mut post), Action::Pass);
}

#[test]
fn a_user_vcl_beresp_cookie_runs_inside_the_builtin_backend_response() {
    let p = program(
        r#"vcl 4.1;
backend default { .host = "127.0.0.1"; }
sub vcl_beresp_cookie {
    if (beresp.http.Set-Cookie ~ "^consent=") { unset beresp.http.Set-Cookie; }
}
"#,
    );
    assert!(p.has_sub(Sub::BackendResponse));
    assert!(!p.has_sub(Sub::Recv));
    let mut consent =
        TestContext::backend_response(200, 60.0).header(Scope::Beresp, "Set-Cookie", "consent=1");
    assert_eq!(p.run(Sub::BackendResponse, &mut consent), Action::Deliver);
    assert_eq!(consent.get_var(Var::BerespUncacheable), Value::Bool(false));
    // Another Set-Cookie is left to the builtin body: hit-for-miss.
    let mut sid = TestContext::backend_response(200, 60.0).header(Scope::Beresp, "Set-Cookie", "sid=1");
    assert_eq!(p.run(Sub::BackendResponse, &mut sid), Action::Deliver);
    assert_eq!(sid.get_var(Var::BerespUncacheable), Value::Bool(true));
}

#[test]
fn builtin_helpers_concatenate_but_custom_subs_are_defined_once() {
    // Varnish: a sub builtin.vcl defines may be defined any number of times...
    let p = program(
        r#"vcl 4.1;
backend default { .host = "127.0.0.1"; }
sub vcl_req_host { set req.http.X-First = "1"; }
sub vcl_req_host { set req.http.X-Second = "1"; }
"#,
    );
    let mut c = TestContext::request("GET", "/");
    assert_eq!(p.run(Sub::Recv, &mut c), Action::Lookup);
    assert_eq!(c.get_header(Scope::Req, "X-First").as_deref(), Some("1"));
    assert_eq!(c.get_header(Scope::Req, "X-Second").as_deref(), Some("1"));
    // ...any other sub once ("Subroutine 'normalize' redefined").
    let d = load_str(
        "twice.vcl",
        r#"vcl 4.1;
backend default { .host = "127.0.0.1"; }
sub normalize { }
sub normalize { }
sub vcl_recv { call normalize; }
"#,
    )
    .unwrap_err();
    assert!(d.iter().any(|d| d.code == Code::Duplicate), "{}", d.render());
}

#[test]
fn return_pipe_outside_the_method_helper_pipes() {
    let p = program(
        r#"vcl 4.1;
backend default { .host = "127.0.0.1"; }
sub vcl_recv { if (req.method == "TUNNEL") { return (pipe); } }
"#,
    );
    let mut tunnel = TestContext::request("TUNNEL", "/");
    assert_eq!(p.run(Sub::Recv, &mut tunnel), Action::Pipe);
}

#[test]
fn pcre_look_arounds_and_back_references_decide_as_in_varnish() {
    let path = real_world_dir()
        .join("pcre-lookarounds.vcl")
        .display()
        .to_string();
    let p = load(&path, &Fs).unwrap_or_else(|d| panic!("{}", d.render()));
    let mut tracked = TestContext::request("GET", "/p?utm_source=x&id=1&fbclid=y");
    assert_eq!(p.run(Sub::Recv, &mut tracked), Action::Lookup);
    assert_eq!(tracked.get_var(Var::ReqUrl), Value::Str("/p?id=1".into()));
    // The negative look-ahead: the back office keeps its Authorization (and passes).
    let mut admin =
        TestContext::request("GET", "/admin-dev/index.php").header(Scope::Req, "Authorization", "x");
    assert_eq!(p.run(Sub::Recv, &mut admin), Action::Pass);
    let mut shop = TestContext::request("GET", "/shop/item").header(Scope::Req, "Authorization", "x");
    assert_eq!(p.run(Sub::Recv, &mut shop), Action::Lookup);
    // The back-reference.
    let mut doubled = TestContext::request("GET", "/wiki/wiki/Main_Page");
    let action = p.run(Sub::Recv, &mut doubled);
    assert_eq!(
        action,
        Action::Synth {
            status: 301,
            reason: "Doubled path".into()
        }
    );
    let mut synth = doubled.var(Var::RespStatus, Value::Int(301));
    p.run(Sub::Synth, &mut synth);
    assert_eq!(
        synth.get_header(Scope::Resp, "Location").as_deref(),
        Some("/wiki/Main_Page")
    );
    assert_eq!(
        p.run(Sub::Recv, &mut TestContext::request("GET", "/wiki/w/x")),
        Action::Lookup
    );
}
