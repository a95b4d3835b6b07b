//! Cache-hit latency over loopback: one HTTP/1.1 keep-alive connection to a running edgecache,
//! asking again and again for a 510-byte object that is already stored. This measures the whole
//! hit path (parse, lookup, response building, write) plus the client's own work.
//!
//! Run: `cargo bench --bench cache_hit`

#[path = "support/loopback.rs"]
mod loopback;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use edgecache_runtime::Config;
use http_body_util::{BodyExt, Empty};
use hyper::Request;

fn cache_hit(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sender = runtime.block_on(async {
        let origin = loopback::origin(Bytes::from(vec![b'x'; 510]), "max-age=3600").await;
        let config = Config {
            listen: vec!["127.0.0.1:0".parse().expect("valid")],
            backend: Some(origin.to_string()),
            ..Config::default()
        };
        let running = edgecache_runtime::start(config).await.expect("start edgecache");
        let proxy = running.listen_addrs()[0];
        std::mem::forget(running);
        loopback::connect(proxy).await
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
    c.bench_function("hit_510B_http1", |b| b.to_async(&runtime).iter(&get));
}

criterion_group!(benches, cache_hit);
criterion_main!(benches);
