//! Policy language costs: compiling a ~1,000-line policy (target < 50 ms) and running
//! `vcl_recv` of a 50-rule policy on one request (target < 1 µs median).
//!
//! Run: `cargo bench --bench policy`

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
