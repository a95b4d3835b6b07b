//! Rough performance guards (the criterion benches live in the workspace
//! `benches/`). Run with `cargo test -p policy-lang --release --test perf -- --ignored --nocapture`.

use std::time::Instant;

use policy_lang::testing::{generated_policy, TestContext};
use policy_lang::{load_str, Scope, Sub};

fn policy(rules: usize) -> String {
    generated_policy(rules, "127.0.0.1", 8080, "")
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
