//! Request coalescing and hit-for-pass (`cache/coalesce.rs`): concurrent misses for one key make
//! one origin fetch; uncacheable keys are never serialised.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use support::{concurrently, get, start_proxy, Origin, OriginReply, RawConn};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_misses_make_one_origin_request() {
    // The delay keeps the first fetch in flight while the other 99 arrive.
    let reply = OriginReply::ok("the one body")
        .cache_control("max-age=60")
        .delay(Duration::from_millis(300));
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let replies = concurrently(100, |_| get(addr, "/slow", &[])).await;

    assert_eq!(
        origin.requests(),
        1,
        "exactly one origin request for 100 concurrent misses"
    );
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply.status, 200, "request {i}");
        assert_eq!(reply.body, "the one body", "request {i}");
    }
    let misses = replies.iter().filter(|r| r.cache() == "MISS").count();
    let hits = replies.iter().filter(|r| r.cache() == "HIT").count();
    assert_eq!((misses, hits), (1, 99), "one leader, 99 served from its fetch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_read_a_streaming_body() {
    // The body trickles in; waiters join while it streams and all get all of it.
    let chunks = (0..4)
        .map(|i| (Duration::from_millis(50), Bytes::from(format!("part{i};"))))
        .collect();
    let reply = OriginReply::ok("").cache_control("max-age=60").chunks(chunks);
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let replies = concurrently(20, |_| get(addr, "/stream", &[])).await;
    assert_eq!(origin.requests(), 1);
    for reply in &replies {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "part0;part1;part2;part3;");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_going_away_does_not_abort_the_fetch_for_the_others() {
    let arrived = Arc::new(Notify::new());
    let signal = arrived.clone();
    let origin = Origin::start(move |_| {
        signal.notify_one();
        let chunks = (0..3)
            .map(|i| (Duration::from_millis(100), Bytes::from(format!("c{i}"))))
            .collect();
        OriginReply::ok("")
            .cache_control("max-age=60")
            .chunks(chunks)
            .delay(Duration::from_millis(100))
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    // The leader's client asks, and hangs up once its request is at the origin.
    let mut leader = RawConn::connect(addr).await;
    leader
        .send("GET /abandoned HTTP/1.1\r\nHost: edgecache.test\r\n\r\n")
        .await;
    arrived.notified().await;
    // The waiter joins the fetch in flight (the origin holds the head for 100 ms more).
    let waiter = tokio::spawn(async move {
        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /abandoned HTTP/1.1\r\nHost: edgecache.test\r\n\r\n")
            .await;
        conn.response(false).await
    });
    drop(leader);

    let waiter = waiter.await.expect("waiter task");
    assert_eq!(waiter.status, 200);
    assert_eq!(waiter.body, b"c0c1c2");
    assert_eq!(
        origin.requests(),
        1,
        "the waiter was served by the abandoned leader's fetch"
    );
    let mut again = RawConn::connect(addr).await;
    again
        .send("GET /abandoned HTTP/1.1\r\nHost: edgecache.test\r\n\r\n")
        .await;
    assert_eq!(
        again.response(false).await.cache(),
        "HIT",
        "the abandoned fetch filled the cache"
    );
    assert_eq!(origin.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_on_an_uncacheable_response_go_to_the_origin_themselves() {
    let served = AtomicUsize::new(0);
    let origin = Origin::start(move |_| {
        let n = served.fetch_add(1, Ordering::SeqCst);
        OriginReply::ok(format!("response {n}"))
            .cache_control("no-store")
            .delay(Duration::from_millis(300))
    })
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let replies = concurrently(10, |_| get(addr, "/personal", &[])).await;
    assert_eq!(origin.requests(), 10, "every request reached the origin");
    let mut bodies: Vec<_> = replies.iter().map(|r| r.text()).collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(
        bodies.len(),
        10,
        "nobody was handed another request's uncacheable response: {bodies:?}"
    );
    assert!(replies.iter().all(|r| r.status == 200 && r.cache() != "HIT"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hit_for_pass_requests_reach_the_origin_concurrently() {
    const N: usize = 10;
    let reply = OriginReply::ok("uncacheable")
        .cache_control("private")
        .delay(Duration::from_millis(300));
    let origin = Origin::fixed(reply).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    // The first response marks the key hit-for-pass.
    let first = get(addr, "/hfp", &[]).await;
    assert_ne!(first.cache(), "HIT");
    assert_eq!(origin.max_in_flight(), 1);

    let replies = concurrently(N, |_| get(addr, "/hfp", &[])).await;
    assert_eq!(origin.requests(), N + 1);
    assert!(replies.iter().all(|r| r.status == 200 && r.body == "uncacheable"));
    assert!(
        replies.iter().all(|r| r.cache() == "PASS"),
        "{:?}",
        replies.iter().map(|r| r.cache()).collect::<Vec<_>>()
    );
    assert_eq!(
        origin.max_in_flight(),
        N,
        "all {N} requests were at the origin at the same time: none waited on another"
    );
}
