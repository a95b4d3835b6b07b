//! `check_fragment`: a file made to be included, checked on its own (`edgecache check
//! --fragment`).

use std::collections::HashMap;

use policy_lang::{check_fragment, Code, Diagnostics, Severity, SourceLoader};

/// Files by name, for fragments that include each other.
struct Files(HashMap<&'static str, &'static str>);

impl SourceLoader for Files {
    fn load(&self, path: &str, _from: Option<&str>) -> Result<(String, String), String> {
        let text = self.0.get(path).ok_or("no such file")?;
        Ok((path.to_string(), text.to_string()))
    }
}

fn check(files: &[(&'static str, &'static str)]) -> Diagnostics {
    check_fragment(files[0].0, &Files(files.iter().copied().collect()))
}

fn with(d: &Diagnostics, severity: Severity) -> Vec<(Code, String)> {
    d.iter()
        .filter(|d| d.severity == severity)
        .map(|d| (d.code, d.message.clone()))
        .collect()
}

#[test]
fn names_a_fragment_leaves_to_its_includer_are_notes() {
    let d = check(&[(
        "purge.vcl",
        r#"
sub purge_endpoint {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) { return (synth(405)); }
        std.log("purge " + req.url);
        return (purge);
    }
    set req.backend_hint = cluster.backend();
    if (req.url ~ "^/static/") { set req.backend_hint = assets; }
    call normalize;
}
"#,
    )]);
    assert!(!d.has_errors(), "{}", d.render());
    let notes = with(&d, Severity::Note);
    let codes: Vec<Code> = notes.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        [
            Code::UndefinedAcl,
            Code::UnknownFunction,
            Code::UnknownFunction,
            Code::UndefinedBackend,
            Code::UndefinedSub
        ],
        "{notes:?}"
    );
    // No "sub `purge_endpoint` is never called": the includer calls it.
    assert!(with(&d, Severity::Warning).is_empty(), "{}", d.render());
    assert!(
        d.render().contains("note[E042]: undefined ACL `purgers`"),
        "{}",
        d.render()
    );
}

#[test]
fn mistakes_in_a_fragment_are_still_errors() {
    let d = check(&[(
        "typos.vcl",
        r#"
import std;
sub normalize {
    set req.http.X-Url = std.tolowr(req.url);
    set req.http.X-Path = req.ulr;
    return (lokup);
}
"#,
    )]);
    let errors = with(&d, Severity::Error);
    let codes: Vec<Code> = errors.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        [Code::UnknownFunction, Code::UnknownVariable, Code::UnknownReturn],
        "{}",
        d.render()
    );
}

#[test]
fn a_fragment_needs_no_version_line_and_may_have_one() {
    for text in [
        "acl office { \"192.0.2.0\"/24; }\n",
        "vcl 4.0;\nacl office { \"192.0.2.0\"/24; }\n",
    ] {
        let d = check(&[("acl.vcl", text)]);
        assert!(d.is_empty(), "{}", d.render());
    }
}

#[test]
fn what_a_fragment_includes_is_declared() {
    let d = check(&[
        (
            "site.vcl",
            "include \"acl.vcl\";\nsub gate { if (client.ip !~ office) { return (synth(403)); } }\n",
        ),
        ("acl.vcl", "acl office { \"192.0.2.0\"/24; }\n"),
    ]);
    assert!(d.is_empty(), "{}", d.render());
}

#[test]
fn a_fragment_that_cannot_be_read_is_an_error() {
    let d = check_fragment("missing.vcl", &Files(HashMap::new()));
    assert!(d.has_errors());
    assert!(d.render().contains("cannot read `missing.vcl`"), "{}", d.render());
}
