//! Cache-hit latency over loopback: one HTTP/1.1 keep-alive connection to a running edgecache,
//! asking again and again for a 510-byte object that is already stored. This measures the whole
//! hit path (parse, lookup, response building, write) plus the client's own work.
//! `hit_510B_http1_10k_bans` asks for it after 10,000 bans that do not match it were added:
//! each ban is tested against the object once, so this should cost what a plain hit does.
//!
//! Run: `cargo bench --bench cache_hit`

#[path = "../tests/support/mod.rs"]
mod support;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use support::{keep_alive_connection, start_proxy, Origin, OriginReply};

fn cache_hit(c: &mut Criterion) {
    hit_after_bans(c, "hit_510B_http1", 0);
    hit_after_bans(c, "hit_510B_http1_10k_bans", 10_000);
}

/// Benchmarks hits on one stored object after `bans` bans on other URLs were added.
fn hit_after_bans(c: &mut Criterion, name: &str, bans: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (sender, admin) = runtime.block_on(async {
        let origin = Origin::fixed(OriginReply::ok(vec![b'x'; 510]).cache_control("max-age=3600")).await;
        let (running, proxy) = start_proxy(origin.addr, |config| {
            config.admin_listen = Some("127.0.0.1:0".parse().expect("valid"));
        })
        .await;
        let admin = running.admin_addr().expect("admin API");
        // Both serve until the process ends.
        std::mem::forget((origin, running));
        (keep_alive_connection(proxy).await, admin)
    });
    // One connection, one request at a time: wait until it is ready before each send.
    let sender = std::sync::Arc::new(tokio::sync::Mutex::new(sender));
    let get = move || {
        let sender = sender.clone();
        async move {
            let request = Request::get("/small.gif")
                .header("host", "bench")
                .body(Empty::<Bytes>::new())
                .expect("valid request");
            let mut sender = sender.lock().await;
            sender.ready().await.expect("connection ready");
            let response = sender.send_request(request).await.expect("response");
            assert_eq!(response.status(), 200);
            response.into_body().collect().await.expect("body").to_bytes()
        }
    };
    runtime.block_on(get());
    runtime.block_on(async {
        for n in 0..bans {
            let expr = format!(r#"req.url == "/other/{n}""#);
            let reply = edgecache_runtime::admin::client::call(admin, None, "POST", "/ban", expr)
                .await
                .expect("ban");
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
    });
    c.bench_function(name, |b| b.to_async(&runtime).iter(&get));
}

criterion_group!(benches, cache_hit);
criterion_main!(benches);
