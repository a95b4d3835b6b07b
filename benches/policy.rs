//! Policy language costs: compiling a ~1,000-line policy (target < 50 ms) and running
//! `vcl_recv` of a 50-rule policy on one request (target < 1 µs median).
//!
//! Run: `cargo bench --bench policy`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use policy_lang::testing::TestContext;
use policy_lang::{load_str, Scope, Sub};

/// A policy of about `rules` * 7 lines: an `if` per rule in `vcl_recv` (URL regexes, header
/// tests, ACL checks, cookie matches) and a TTL rule per rule in `vcl_backend_response`.
fn policy(rules: usize) -> String {
    let mut text =
        String::from("vcl 4.1;\nimport std;\nbackend default { .host = \"127.0.0.1\"; .port = \"8080\"; }\n");
    text.push_str("acl internal { \"10.0.0.0\"/8; \"192.168.0.0\"/16; }\nsub vcl_recv {\n");
    for i in 0..rules {
        let rule = match i % 5 {
            0 => format!("    if (req.url ~ \"^/section{i}/\") {{\n        set req.http.X-Section = \"{i}\";\n    }}\n"),
            1 => format!("    if (req.http.X-Rule{i} == \"on\" && req.method == \"GET\") {{\n        return (pass);\n    }}\n"),
            2 => format!("    if (req.url ~ \"(?i)\\.(ext{i}|png)$\" && client.ip ~ internal) {{\n        unset req.http.Cookie;\n    }}\n"),
            3 => format!("    if (req.http.Cookie ~ \"session{i}=\") {{\n        return (pass);\n    }}\n"),
            _ => format!("    if (req.http.host == \"site{i}.example.com\") {{\n        set req.backend_hint = default;\n    }}\n"),
        };
        text.push_str(&rule);
    }
    text.push_str("}\nsub vcl_backend_response {\n");
    for i in 0..rules {
        text.push_str(&format!(
            "    if (bereq.url ~ \"^/ttl{i}/\") {{\n        set beresp.ttl = {}s;\n        set beresp.http.X-Rule = \"r\" + {i};\n    }}\n",
            i + 1
        ));
    }
    text.push_str("}\n");
    text
}

fn compile(c: &mut Criterion) {
    let source = policy(140);
    let lines = source.lines().count();
    c.bench_with_input(
        BenchmarkId::new("compile_policy_lines", lines),
        &source,
        |b, source| b.iter(|| load_str("big.vcl", source).expect("the generated policy compiles")),
    );
}

fn eval(c: &mut Criterion) {
    let program = load_str("p50.vcl", &policy(50)).expect("the generated policy compiles");
    let request =
        TestContext::request("GET", "/section999/page.html").header(Scope::Req, "User-Agent", "curl/8");
    c.bench_function("vcl_recv_50_rules", |b| {
        b.iter_batched_ref(
            || request.clone(),
            |ctx| program.run(Sub::Recv, ctx),
            criterion::BatchSize::SmallInput,
        )
    });
    let wordpress = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies/wordpress.vcl"
    ))
    .expect("examples/policies/wordpress.vcl is readable");
    let program = load_str("wordpress.vcl", &wordpress).expect("the WordPress example compiles");
    let request = TestContext::request("GET", "/2024/05/hello-world/?utm_source=news&id=3").header(
        Scope::Req,
        "Cookie",
        "_ga=GA1.2.3; theme=dark",
    );
    c.bench_function("vcl_recv_wordpress", |b| {
        b.iter_batched_ref(
            || request.clone(),
            |ctx| program.run(Sub::Recv, ctx),
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, compile, eval);
criterion_main!(benches);
