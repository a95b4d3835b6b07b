//! Rough performance guards (the criterion benches live in the workspace
//! `benches/`). Run with `cargo test -p policy-lang --release --test perf -- --ignored --nocapture`.

use std::time::Instant;

use policy_lang::testing::TestContext;
use policy_lang::{load_str, Scope, Sub};

/// A policy of about `rules` * 5 lines: one `if` per rule in vcl_recv plus backend-side rules.
pub fn policy(rules: usize) -> String {
    let mut s =
        String::from("vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n");
    s.push_str("acl internal { \"10.0.0.0\"/8; \"192.168.0.0\"/16; }\nsub vcl_recv {\n");
    for i in 0..rules {
        match i % 5 {
            0 => s.push_str(&format!("    if (req.url ~ \"^/section{i}/\") {{\n        set req.http.X-Section = \"{i}\";\n    }}\n")),
            1 => s.push_str(&format!("    if (req.http.X-Rule{i} == \"on\" && req.method == \"GET\") {{\n        return (pass);\n    }}\n")),
            2 => s.push_str(&format!("    if (req.url ~ \"(?i)\\.(ext{i}|png)$\" && client.ip ~ internal) {{\n        unset req.http.Cookie;\n    }}\n")),
            3 => s.push_str(&format!("    if (req.http.Cookie ~ \"session{i}=\") {{\n        return (pass);\n    }}\n")),
            _ => s.push_str(&format!("    if (req.http.host == \"site{i}.example.com\") {{\n        set req.backend_hint = default;\n    }}\n")),
        }
    }
    s.push_str("}\nsub vcl_backend_response {\n");
    for i in 0..rules {
        s.push_str(&format!("    if (bereq.url ~ \"^/ttl{i}/\") {{\n        set beresp.ttl = {}s;\n        set beresp.http.X-Rule = \"r\" + {i};\n    }}\n", i + 1));
    }
    s.push_str("}\n");
    s
}

#[test]
#[ignore]
fn compile_1000_lines_and_eval_50_rules() {
    let big = policy(140);
    let lines = big.lines().count();
    let t = Instant::now();
    let n = 20;
    for _ in 0..n {
        load_str("big.vcl", &big).unwrap();
    }
    println!("compile {lines} lines: {:?} per load", t.elapsed() / n);

    let p = load_str("p50.vcl", &policy(50)).unwrap();
    let base =
        TestContext::request("GET", "/section999/page.html").header(Scope::Req, "User-Agent", "curl/8");
    let mut ctx = base.clone();
    let iters = 200_000;
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(p.run(Sub::Recv, &mut ctx));
    }
    println!("vcl_recv, 50 rules: {:?} per run", t.elapsed() / iters);
}
