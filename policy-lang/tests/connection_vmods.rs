//! `import proxy;` (Varnish's vmod_proxy) and `import tls;` (Varnish Enterprise's vmod_tls):
//! their functions, Varnish's return types, where they may be called, and what they say about
//! a connection that has nothing to tell.

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Diagnostics, Program, Scope, Sub};

fn load(body: &str) -> Result<Program, Diagnostics> {
    let src = format!("vcl 4.1;\n{body}\n");
    load_str("connection.vcl", &src)
}

fn errors(body: &str) -> String {
    match load(body) {
        Ok(_) => panic!("expected the policy to be refused"),
        Err(d) => d.render(),
    }
}

#[test]
fn proxy_and_tls_functions_have_varnish_types_and_are_empty_without_a_header() {
    let p = load(
        r#"import proxy;
import tls;
backend default { .host = "127.0.0.1"; }
sub vcl_recv {
    set req.http.X-Alpn = "[" + proxy.alpn() + proxy.authority() + proxy.ssl_version()
        + proxy.ssl_cipher() + proxy.cert_sign() + proxy.cert_key() + proxy.client_cert_cn() + "]";
    if (!proxy.is_ssl() && !proxy.client_has_cert_sess() && !proxy.client_has_cert_conn()) {
        set req.http.X-Plain = "yes";
    }
    set req.http.X-Verify = proxy.ssl_verify_result() + 1;
    if (!tls.is_tls()) {
        set req.http.X-Tls = "[" + tls.version() + tls.cipher() + tls.authority() + tls.alpn() + "]";
    }
}"#,
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    let mut c = TestContext::request("GET", "/");
    p.run(Sub::Recv, &mut c);
    assert_eq!(c.get_header(Scope::Req, "X-Alpn").as_deref(), Some("[]"));
    assert_eq!(c.get_header(Scope::Req, "X-Plain").as_deref(), Some("yes"));
    // INT: 0 (X509_V_OK) by default, so arithmetic gives 1.
    assert_eq!(c.get_header(Scope::Req, "X-Verify").as_deref(), Some("1"));
    assert_eq!(c.get_header(Scope::Req, "X-Tls").as_deref(), Some("[]"));
}

#[test]
fn proxy_function_without_import_is_refused() {
    let out = errors(
        r#"backend default { .host = "127.0.0.1"; }
sub vcl_recv { if (proxy.is_ssl()) { return (pass); } }"#,
    );
    assert!(out.contains("needs `import proxy;`"), "{out}");
}

#[test]
fn tls_function_without_import_is_refused() {
    let out = errors(
        r#"import proxy;
backend default { .host = "127.0.0.1"; }
sub vcl_recv { set req.http.X = tls.version(); }"#,
    );
    assert!(out.contains("needs `import tls;`"), "{out}");
}

#[test]
fn connection_function_with_an_argument_is_refused() {
    let out = errors(
        r#"import proxy;
backend default { .host = "127.0.0.1"; }
sub vcl_recv { set req.http.X = proxy.alpn("h2"); }"#,
    );
    assert!(out.contains("proxy.alpn"), "{out}");
}

#[test]
fn bool_connection_function_is_not_a_string() {
    let out = errors(
        r#"import proxy;
backend default { .host = "127.0.0.1"; }
sub vcl_recv { if (proxy.is_ssl() == "true") { return (pass); } }"#,
    );
    assert!(
        out.contains("BOOL") || out.contains("Bool") || out.contains("bool"),
        "{out}"
    );
}

#[test]
fn connection_function_on_the_backend_side_is_refused() {
    let out = errors(
        r#"import tls;
backend default { .host = "127.0.0.1"; }
sub vcl_backend_fetch { set bereq.http.X-Tls = tls.version(); }"#,
    );
    assert!(
        out.contains("`tls.version()` is not allowed in `vcl_backend_fetch`"),
        "{out}"
    );
}

#[test]
fn unknown_proxy_function_suggests_a_known_one() {
    let out = errors(
        r#"import proxy;
backend default { .host = "127.0.0.1"; }
sub vcl_recv { if (proxy.is_tls()) { return (pass); } }"#,
    );
    assert!(out.contains("unknown function `proxy.is_tls`"), "{out}");
    assert!(out.contains("did you mean `proxy.is_ssl`"), "{out}");
}

#[test]
fn proxy_and_tls_imports_are_accepted() {
    load(
        r#"import proxy;
import tls;
backend default { .host = "127.0.0.1"; }"#,
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
}
