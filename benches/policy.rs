//! Policy language costs: compiling a ~1,000-line policy (target < 50 ms) and running
//! `vcl_recv` of a 50-rule policy on one request (target < 1 µs median).
//!
//! Run: `cargo bench --bench policy`
//!
//! Results (2 cores, others building; `cargo bench --bench policy`, criterion defaults):
//! `vcl_recv_50_rules` 2.20 µs before the evaluator work of issue #4, 723 ns after
//! (conditions evaluated as bool without a `Value` per node, string comparisons with a
//! literal compiled to `StrCmp`, literal alternations such as `(?i)\.(png|jpg)$` and
//! `[[:upper:]]` matched without the regex engine, no call for an empty `else`);
//! `vcl_recv_wordpress` 957 ns -> 803 ns; `compile_policy_lines/988` 15.0 ms -> 14.7 ms.
//! A profile of the same loop: `policy-lang/examples/recv_profile.rs`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use policy_lang::testing::{generated_policy, TestContext};
use policy_lang::{load_str, Scope, Sub};

fn policy(rules: usize) -> String {
    generated_policy(rules, "127.0.0.1", 8080, "")
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
    let wordpress = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/wordpress.vcl"))
        .expect("examples/wordpress.vcl is readable");
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
