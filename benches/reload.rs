//! Reload latency with a 1,000-line policy, over loopback, against a running edgecache.
//!
//! - `reload/api`: `Running::reload()` (what SIGHUP and `POST /reload` do): read, check and
//!   compile the policy on a blocking thread, set up its backends, swap the version in.
//! - `reload/file_change_to_serving`: rename a new version of the file over the old one, then
//!   send requests on a keep-alive connection until a response carries the new version's
//!   marker. This is what an operator sees; it includes the watcher's 150 ms debounce.
//!
//! Run: `cargo bench --bench reload`

#[path = "../tests/reload_support/mod.rs"]
mod reload_support;
#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use edgecache_runtime::Running;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use policy_lang::testing::generated_policy;
use reload_support::{rename_over, start_watching, PolicyFile};
use support::{keep_alive_connection, Origin, OriginReply};

/// A policy of about 1,000 lines (the shape of policy-lang's `tests/perf.rs`) whose
/// `vcl_deliver` sets `X-Policy: marker`.
fn policy(origin: SocketAddr, marker: &str) -> String {
    let deliver = format!("    set resp.http.X-Policy = \"{marker}\";\n");
    generated_policy(140, &origin.ip().to_string(), origin.port(), &deliver)
}

async fn marker(sender: &mut SendRequest<Empty<Bytes>>, proxy: SocketAddr) -> String {
    let request = Request::get("/page")
        .header("host", proxy.to_string())
        .body(Empty::new())
        .expect("request");
    sender.ready().await.expect("ready");
    let response = sender.send_request(request).await.expect("response");
    let marker = response
        .headers()
        .get("x-policy")
        .map_or(String::new(), |v| v.to_str().unwrap().to_string());
    response.into_body().collect().await.expect("body");
    marker
}

/// edgecache watching a 1,000-line policy, and its origin.
struct Setup {
    running: Running,
    proxy: SocketAddr,
    policy: PolicyFile,
    origin: Origin,
}

async fn setup() -> Setup {
    let origin = Origin::fixed(OriginReply::ok("ok").cache_control("no-store")).await;
    let text = policy(origin.addr, "0");
    eprintln!("policy: {} lines", text.lines().count());
    let (policy, running, proxy) = start_watching(origin.addr, &text, |_| {}).await;
    Setup {
        running,
        proxy,
        policy,
        origin,
    }
}

fn reload(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let setup = runtime.block_on(setup());
    let mut sender = runtime.block_on(async { keep_alive_connection(setup.proxy).await });
    let mut group = c.benchmark_group("reload");
    group.sample_size(20);

    group.bench_function("api", |b| {
        b.to_async(&runtime)
            .iter(|| async { setup.running.reload().await.expect("reloads") })
    });

    let mut next = 1u64;
    // Each iteration takes the debounce and more: one iteration per sample.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("file_change_to_serving", |b| {
        b.iter_custom(|iterations| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    next += 1;
                    let wanted = next.to_string();
                    let text = policy(setup.origin.addr, &wanted);
                    let started = Instant::now();
                    rename_over(&setup.policy, &text);
                    while marker(&mut sender, setup.proxy).await != wanted {
                        assert!(
                            started.elapsed() < Duration::from_secs(10),
                            "the change was never served"
                        );
                    }
                    total += started.elapsed();
                }
                total
            })
        })
    });
    group.finish();
}

criterion_group!(benches, reload);
criterion_main!(benches);
