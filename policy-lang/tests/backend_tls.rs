//! Backend attributes for TLS to origins (`.ssl`, `.ssl_sni`, `.ssl_verify_peer`,
//! `.ssl_verify_host`, `.ssl_ca`) and the PROXY header (`.proxy_header`).

use policy_lang::{load_str, BackendDecl};

fn backend(attrs: &str) -> BackendDecl {
    let src = format!("vcl 4.1;\nbackend origin {{\n  .host = \"origin.test\";\n{attrs}\n}}\n");
    let program = load_str("/etc/edgecache/main.vcl", &src).unwrap_or_else(|d| panic!("{}", d.render()));
    program.backends()[0].clone()
}

fn refusal(attrs: &str) -> String {
    let src = format!("vcl 4.1;\nbackend origin {{\n  .host = \"origin.test\";\n{attrs}\n}}\n");
    match load_str("main.vcl", &src) {
        Ok(_) => panic!("`{attrs}` was accepted"),
        Err(diagnostics) => diagnostics.render(),
    }
}

#[test]
fn ssl_backend_verifies_by_default_and_defaults_to_port_443() {
    let b = backend(".ssl = 1;");
    let tls = b.tls.expect(".ssl = 1 turns TLS on");
    assert!(tls.sni && tls.verify_peer && tls.verify_host);
    assert_eq!(tls.ca, None);
    assert_eq!(b.port, 443);
    assert_eq!(backend(".ssl = 1; .port = \"8443\";").port, 8443);
    assert_eq!(backend(".ssl = 0;").tls, None);
    assert_eq!(backend("").port, 80);
}

#[test]
fn ssl_ca_is_resolved_against_the_policy_file_and_remembers_its_line() {
    let tls = backend(".ssl = 1;\n  .ssl_ca = \"ca.pem\";\n  .ssl_verify_host = 0;")
        .tls
        .unwrap();
    let ca = tls.ca.unwrap();
    assert_eq!(ca.path, "/etc/edgecache/ca.pem");
    assert_eq!(ca.declared_at, "/etc/edgecache/main.vcl:5");
    assert!(!tls.verify_host && tls.verify_peer);
}

#[test]
fn proxy_header_takes_version_1_or_2() {
    assert_eq!(backend(".proxy_header = 1;").proxy_header, Some(1));
    assert_eq!(backend(".proxy_header = 2;").proxy_header, Some(2));
    assert_eq!(backend("").proxy_header, None);
    assert!(refusal(".proxy_header = 3;").contains("`.proxy_header` expects `1` or `2`"));
}

#[test]
fn bad_ssl_values_and_unknown_attributes_are_errors() {
    assert!(refusal(".ssl = \"yes\";").contains("`.ssl` expects `1` or `0`"));
    assert!(refusal(".ssl = 1; .ssl_ca = \"\";").contains("empty `.ssl_ca`"));
    assert!(refusal(".ssl_verify_peers = 0;").contains("did you mean `.ssl_verify_peer`?"));
}

#[test]
fn ssl_attributes_without_ssl_warn() {
    let src = "vcl 4.1;\nbackend origin { .host = \"o\"; .ssl_sni = 0; }\n";
    let program = load_str("main.vcl", src).expect("a warning only");
    let warnings = program.warnings().expect("a warning").render();
    assert!(
        warnings.contains("`.ssl_sni` has no effect without `.ssl = 1;`"),
        "{warnings}"
    );
}
