//! The arrows between modules point one way, as drawn in `docs/architecture.md`.
//!
//! Reads the `use` lines and the `crate::...` / `super::...` paths of every module of
//! `runtime/src` and `policy-lang/src` (plain file reading: nothing is built or parsed beyond
//! that) and fails when a module imports one its layer may not, when a new top-level module is
//! not on the map, or when files import each other in a circle. Test code (`mod tests { .. }`,
//! `tests.rs`) may use anything.
//!
//! Allowed exceptions are listed in `ALLOWED`, one line each with its reason; an entry that is
//! no longer needed fails the test, so delete it with the fix.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate root (`lib.rs`): the facade, which may import everything.
const ROOT: &str = "<root>";
/// In a rule: any module of the crate.
const ANY: &str = "*";

/// What each top-level module of policy-lang may import: parse -> check -> compile -> eval,
/// talking through the checked tree, over the vocabulary and the diagnostics.
#[rustfmt::skip]
const POLICY_LANG: &[(&str, &[&str])] = &[
    ("diagnostics", &[]),
    ("vocab", &["diagnostics"]),
    ("tree", &["vocab", "diagnostics"]),
    ("grammar", &["diagnostics"]),
    ("ast", &["grammar", "vocab", "diagnostics"]),
    // The second front end: `.htaccess` rules written out as VCL source for the pipeline.
    ("rewrite", &["vocab", "diagnostics"]),
    ("ban", &["vocab", "diagnostics"]),
    ("check", &["ast", "tree", "vocab", "diagnostics"]),
    ("compile", &["tree", "vocab", "diagnostics"]),
    ("eval", &["compile", "tree", "vocab", "ban", "diagnostics"]),
    // Steps of the pipeline in lib.rs, which calls the phases in order.
    ("acl_names", &[ANY]),
    ("host_values", &[ANY]),
    ("fragment", &[ANY]),
];

/// What each top-level module of the runtime may import: `server -> proxy -> cache / backend /
/// plugin`; the proxy reads the active version from `reload`; `admin` beside the proxy talks to
/// the cache and the counters through handles; `telemetry` and `config` at the bottom.
#[rustfmt::skip]
const RUNTIME: &[(&str, &[&str])] = &[
    ("telemetry", &[]),
    ("trace", &[]),
    ("turn", &[]),
    ("poll_time", &[]),
    ("config", &[]),
    ("demo", &[]),
    ("dns", &["config", "telemetry"]),
    ("logging", &["config", "telemetry"]),
    ("cache", &["config", "telemetry", "poll_time"]),
    ("plugin", &["config", "telemetry"]),
    ("backend", &["dns", "config", "telemetry", "turn", "poll_time"]),
    ("policy", &["plugin", "backend", "dns", "config", "telemetry"]),
    ("version", &["policy", "backend", "plugin", "dns", "config", "telemetry"]),
    ("reload", &["version", "config", "telemetry"]),
    // The fan-out of invalidations to the other nodes, which the admin API and the proxy share.
    ("peers", &["dns", "config", "telemetry"]),
    ("admin", &["peers", "reload", "version", "cache", "dns", "config", "telemetry", "trace"]),
    ("proxy", &["peers", "reload", "version", "cache", "backend", "plugin", "dns", "logging", "config", "telemetry", "trace", "poll_time"]),
    ("server", &["proxy", "admin", "reload", "version", "cache", "backend", "plugin", "dns", "logging", "config", "telemetry", "trace", "turn", "poll_time"]),
    // The fuzz target's entry point, like lib.rs a way into the whole crate.
    ("fuzzing", &[ANY]),
];

/// Arrows against the map that are known and tolerated: (crate, from, to, reason). `from` and
/// `to` are modules (`proxy`) or files (`proxy/fetch`); one line each, delete with the fix.
#[rustfmt::skip]
const ALLOWED: &[(&str, &str, &str, &str)] = &[
    ("runtime", "backend", "cache", "`BoxError` lives in `cache::body`; it belongs below both (#19)"),
    ("runtime", "config", "plugin", "`Config::plugin_limits` is a `plugin::Limits` (#19)"),
    ("runtime", "admin", ROOT, "`StartError` is defined in lib.rs (#19)"),
    ("runtime", "reload", ROOT, "`StartError` is defined in lib.rs (#19)"),
    ("runtime", "version", ROOT, "`StartError` is defined in lib.rs (#19)"),
];

#[test]
fn policy_lang_arrows_point_one_way() {
    assert_arrows("policy-lang", POLICY_LANG);
}

#[test]
fn runtime_arrows_point_one_way() {
    assert_arrows("runtime", RUNTIME);
}

fn assert_arrows(krate: &str, rules: &[(&str, &[&str])]) {
    let files = module_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(krate).join("src"));
    let graph = import_graph(&files);
    let allowed: Vec<(&str, &str, &str)> = ALLOWED
        .iter()
        .filter(|(c, ..)| *c == krate)
        .map(|(_, from, to, reason)| (*from, *to, *reason))
        .collect();
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    let rule = |module: &str| rules.iter().find(|(m, _)| *m == module).map(|(_, deps)| *deps);
    let tolerated = |from: &str, to: &str, used: &mut BTreeSet<(String, String)>| {
        let hit = allowed
            .iter()
            .find(|(f, t, _)| (*f == from || *f == top(from)) && (*t == to || *t == top(to)));
        if let Some((f, t, _)) = hit {
            used.insert((f.to_string(), t.to_string()));
        }
        hit.is_some()
    };

    for module in files.keys().map(|m| top(m)).collect::<BTreeSet<_>>() {
        if module != ROOT && rule(module).is_none() {
            problems.push(format!(
                "module `{module}` is not on the map: give it a layer in tests/architecture.rs and docs/architecture.md"
            ));
        }
    }
    for (from, targets) in &graph {
        let (from_top, deps) = (top(from), rule(top(from)).unwrap_or(&[ANY]));
        for to in targets {
            let to_top = top(to);
            if from_top == ROOT || from_top == to_top || deps.contains(&ANY) || deps.contains(&to_top) {
                continue;
            }
            if !tolerated(from, to, &mut used) {
                problems.push(format!(
                    "{krate}: `{from}` imports `{to}`, but `{from_top}` may only import {deps:?}"
                ));
            }
        }
    }
    // Circles between files, whatever their modules (a module and its own submodules aside).
    let mut acyclic = graph.clone();
    for (from, targets) in &mut acyclic {
        targets
            .retain(|to| !is_ancestor(to, from) && !is_ancestor(from, to) && !tolerated(from, to, &mut used));
    }
    for cycle in cycles(&acyclic) {
        problems.push(format!(
            "{krate}: files import each other in a circle: {}",
            cycle.join(", ")
        ));
    }
    for (from, to, reason) in &allowed {
        if !used.contains(&(from.to_string(), to.to_string())) {
            problems.push(format!(
                "{krate}: ALLOWED entry `{from}` -> `{to}` (\"{reason}\") is no longer needed: delete it"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "arrows against docs/architecture.md:\n  {}",
        problems.join("\n  ")
    );
}

/// Module path (`proxy/fetch`, `check/types`, [`ROOT`]) -> file, for every `.rs` under `src`.
fn module_files(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("source directory is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let Ok(rel) = path.strip_prefix(src) else { continue };
            let Some(rel) = rel.to_str().and_then(|r| r.strip_suffix(".rs")) else {
                continue;
            };
            let module = rel.strip_suffix("/mod").unwrap_or(rel);
            let module = if module == "lib" { ROOT } else { module };
            // Test code may use anything.
            if module == "tests" || module.ends_with("/tests") || module.contains("/tests/") {
                continue;
            }
            out.insert(module.to_string(), path);
        }
    }
    out
}

/// Which modules each module refers to (by file), from its source.
fn import_graph(files: &BTreeMap<String, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for (module, path) in files {
        let text = std::fs::read_to_string(path).expect("source file is readable");
        let code = without_test_modules(&without_comments(&text));
        let segments: Vec<&str> = if module == ROOT {
            vec![]
        } else {
            module.split('/').collect()
        };
        let mut targets = BTreeSet::new();
        for path in paths(&code) {
            let absolute = match path.first().map(String::as_str) {
                Some("crate") => path[1..].to_vec(),
                Some("super") => {
                    let ups = path.iter().take_while(|s| *s == "super").count();
                    // `super` of `a/b` (a/b.rs or a/b/mod.rs) is `a`.
                    let base = &segments[..segments.len().saturating_sub(ups)];
                    base.iter()
                        .map(ToString::to_string)
                        .chain(path[ups..].iter().cloned())
                        .collect()
                }
                _ => continue,
            };
            let target = (1..=absolute.len())
                .rev()
                .map(|n| absolute[..n].join("/"))
                .find(|m| files.contains_key(m))
                .unwrap_or_else(|| ROOT.to_string());
            if target != *module {
                targets.insert(target);
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

/// The `crate::`/`super::` paths of `code`: each path of each `use` tree, and every other
/// `crate::a::b` / `super::a` written inline.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let tree: String = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        if tree.starts_with("crate::") || tree.starts_with("super::") {
            expand_use_tree(&tree, Vec::new(), &mut out);
        }
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':')
            {
                continue;
            }
            let path: Vec<String> = code[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            out.push(path);
        }
    }
    out
}

/// `a::{b, c::{d, e as f}}` -> `a::b`, `a::c::d`, `a::c::e`.
fn expand_use_tree(tree: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("");
        let mut full = prefix;
        full.extend(
            path.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "self")
                .map(str::to_string),
        );
        out.push(full);
        return;
    };
    let Some(close) = tree.rfind('}').filter(|close| *close > open) else {
        return;
    };
    let mut base = prefix;
    base.extend(
        tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    );
    let (mut depth, mut part_start) = (0, open + 1);
    for (i, c) in tree[..close].char_indices().skip(open + 1) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand_use_tree(&tree[part_start..i], base.clone(), out);
                part_start = i + 1;
            }
            _ => {}
        }
    }
    if !tree[part_start..close].trim().is_empty() {
        expand_use_tree(&tree[part_start..close], base, out);
    }
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `code` without its inline `mod tests { ... }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("mod tests {") {
        let body = at + "mod tests ".len();
        let mut depth = 0;
        let end = out[body..]
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => return None,
                }
                (depth == 0).then_some(body + i + 1)
            })
            .unwrap_or(out.len());
        out.replace_range(at..end, "");
    }
    out
}

fn top(module: &str) -> &str {
    module.split('/').next().unwrap_or(module)
}

/// Whether `ancestor` is `module` itself or a module it is nested in.
fn is_ancestor(ancestor: &str, module: &str) -> bool {
    ancestor == ROOT || module == ancestor || module.starts_with(&format!("{ancestor}/"))
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|x| *x == v).unwrap_or(0);
                let component: Vec<String> = self.stack.drain(at..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}
