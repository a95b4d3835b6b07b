//! Purge by surrogate key at scale: 100,000 objects under 1,000 keys (100 each, in an `xkey`
//! header) filled into a running edgecache over loopback, then one key at a time purged through
//! the admin API (`POST /purge?key=`: the time an operator's call takes, loopback HTTP
//! included; the same call for a key nothing carries gives that overhead). Each purge must
//! remove exactly its key's 100 objects: the answer's count and the store's object count say
//! so, and a page under another key is still a hit. Prints the purge times and the key index's
//! memory per key and per object (`GET /stats`, `surrogate_key_index_bytes`: the index's tables
//! as allocated).
//!
//! Run: `cargo bench --bench surrogate_keys` (filling takes a few seconds).

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use serde_json::Value;
use support::{eventually_stored, keep_alive_connection, start_proxy, Origin, OriginReply};

const OBJECTS: usize = 100_000;
const KEYS: usize = 1_000;
/// Keys purged, one after the other, for the timing.
const PURGES: usize = 20;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(measure());
}

async fn measure() {
    let origin = Origin::start(|request| {
        let n: usize = request
            .uri()
            .path()
            .trim_start_matches("/o/")
            .parse()
            .unwrap_or(0);
        OriginReply::ok("x")
            .cache_control("max-age=3600")
            .header("xkey", format!("k{}", n % KEYS))
    })
    .await;
    origin.count_only();
    let (running, proxy) = start_proxy(origin.addr, |config| {
        config.admin_listen = Some("127.0.0.1:0".parse().expect("valid"));
        config.cache_size = 1 << 30;
    })
    .await;
    let admin = running.admin_addr().expect("admin API");
    let mut connection = keep_alive_connection(proxy).await;
    let filling = Instant::now();
    for n in 0..OBJECTS {
        get(&mut connection, n).await;
    }
    eventually_stored(&running, OBJECTS as u64).await;
    let filled = filling.elapsed();

    let cache = stats(admin).await;
    assert_eq!(cache["surrogate_keys"], KEYS, "{cache}");
    assert_eq!(cache["surrogate_key_objects"], OBJECTS, "{cache}");
    let index = cache["surrogate_key_index_bytes"].as_u64().expect("a size") as f64;

    // The admin call itself (a new loopback connection, routing, JSON): a key nothing carries.
    let mut empty = Vec::with_capacity(PURGES);
    for _ in 0..PURGES {
        let started = Instant::now();
        let reply = edgecache_runtime::admin::client::call(admin, None, "POST", "/purge?key=none", "")
            .await
            .expect("purge");
        empty.push(started.elapsed());
        assert!(reply.body.contains("\"purged\": 0"), "{}", reply.body);
    }
    let mut times = Vec::with_capacity(PURGES);
    for key in 0..PURGES {
        let started = Instant::now();
        let reply =
            edgecache_runtime::admin::client::call(admin, None, "POST", &format!("/purge?key=k{key}"), "")
                .await
                .expect("purge");
        times.push(started.elapsed());
        let answer: Value = serde_json::from_str(&reply.body).expect("JSON");
        assert_eq!(answer["purged"], OBJECTS / KEYS, "k{key}: {answer}");
        let left = stats(admin).await["objects"].as_u64().expect("a count");
        assert_eq!(
            left as usize,
            OBJECTS - (key + 1) * OBJECTS / KEYS,
            "only k{key}'s objects went"
        );
    }
    // Object PURGES + 1 carries the next key, untouched.
    assert_eq!(get(&mut connection, PURGES).await, "HIT");
    assert_eq!(get(&mut connection, 0).await, "MISS", "object 0 carried k0");
    times.sort();
    empty.sort();
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "filled {OBJECTS} objects under {KEYS} keys in {:.1} s; index {:.1} MiB: {:.0} B per object, {:.0} B per key",
        filled.as_secs_f64(),
        index / f64::from(1 << 20),
        index / OBJECTS as f64,
        index / KEYS as f64,
    );
    println!(
        "purge one key ({} objects) over the admin API, {PURGES} keys: min {:.0} µs, median {:.0} µs, max {:.0} µs",
        OBJECTS / KEYS,
        micros(times[0]),
        micros(times[PURGES / 2]),
        micros(times[PURGES - 1]),
    );
    println!(
        "the same call for a key nothing carries: min {:.0} µs, median {:.0} µs, max {:.0} µs",
        micros(empty[0]),
        micros(empty[PURGES / 2]),
        micros(empty[PURGES - 1]),
    );
}

/// `GET /o/N` on the keep-alive connection; the `X-Cache` it was answered with.
async fn get(connection: &mut SendRequest<Empty<Bytes>>, n: usize) -> String {
    let request = Request::get(format!("/o/{n}"))
        .header("host", "bench")
        .body(Empty::<Bytes>::new())
        .expect("valid request");
    connection.ready().await.expect("connection ready");
    let response = connection.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    let cache = response.headers()["x-cache"].to_str().expect("ASCII").to_string();
    response.into_body().collect().await.expect("body");
    cache
}

/// The `cache` section of `GET /stats`.
async fn stats(admin: SocketAddr) -> Value {
    let reply = edgecache_runtime::admin::client::call(admin, None, "GET", "/stats", "")
        .await
        .expect("stats");
    let stats: Value = serde_json::from_str(&reply.body).expect("JSON");
    stats["cache"].clone()
}
