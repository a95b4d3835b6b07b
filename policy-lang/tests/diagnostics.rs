//! Snapshot tests: one broken policy per diagnostic kind in
//! `tests/diagnostics/*.vcl`; the rendered diagnostics are compared with
//! `tests/snapshots/diagnostics__NAME.snap`.
//!
//! To accept changed output: `INSTA_UPDATE=always cargo test -p policy-lang
//! --test diagnostics` (or `cargo insta review`), then review the `.snap` diff.

use std::path::Path;

#[test]
fn every_broken_policy_renders_its_diagnostic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagnostics");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/diagnostics exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "vcl"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "expected one policy per diagnostic kind");
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = format!("diagnostics/{stem}.vcl");
        let rendered = match policy_lang::load_str(&name, &text) {
            Ok(_) => panic!("{name} should not load"),
            Err(d) => {
                assert!(d.has_errors(), "{name}: no errors");
                d.render()
            }
        };
        insta::with_settings!({ snapshot_suffix => "", description => name.clone(), omit_expression => true }, {
            insta::assert_snapshot!(stem, rendered);
        });
    }
}
