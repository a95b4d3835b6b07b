//! Runs `vcl_recv` of the generated 50-rule policy in a loop, for profilers
//! (`valgrind --tool=callgrind`, `perf`):
//! `cargo run -p policy-lang --features test-util --release --example recv_profile -- 1000000`

use std::time::Instant;

use policy_lang::testing::{generated_policy, TestContext};
use policy_lang::{load_str, Scope, Sub};

fn main() {
    let iters: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let program = load_str("p50.vcl", &generated_policy(50, "127.0.0.1", 8080, "")).expect("compiles");
    let request =
        TestContext::request("GET", "/section999/page.html").header(Scope::Req, "User-Agent", "curl/8");
    let mut ctx = request.clone();
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(program.run(Sub::Recv, std::hint::black_box(&mut ctx)));
    }
    println!("vcl_recv, 50 rules: {:?} per run", t.elapsed() / iters);
}
