//! Size limits: objects over `max_object_size` stream through unstored; the store's weight stays
//! within `cache_size` when filled past it.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::{get, start_proxy, Client, Origin, OriginReply};

const KIB: u64 = 1024;

fn big_body(len: usize) -> Bytes {
    (0..len)
        .map(|i| b"0123456789abcdef"[i % 16])
        .collect::<Vec<u8>>()
        .into()
}

#[tokio::test]
async fn objects_over_max_object_size_stream_through_unstored() {
    let body = big_body(64 * 1024);
    let origin = Origin::fixed(OriginReply::ok(body.clone()).cache_control("max-age=60")).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = 16 * KIB).await;

    for round in 1..=3 {
        let reply = get(addr, "/big", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), body.len(), "round {round}: full body delivered");
        assert!(reply.body == body, "round {round}: body intact");
        assert_ne!(reply.cache(), "HIT", "round {round}");
        assert_eq!(
            origin.requests(),
            round,
            "round {round}: too large to store, so fetched again"
        );
    }
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn objects_over_max_object_size_without_length_stream_through_unstored() {
    // No Content-Length: the proxy only finds out while streaming.
    let chunk = big_body(8 * 1024);
    let chunks = (0..8)
        .map(|_| (Duration::ZERO, chunk.clone()))
        .collect::<Vec<_>>();
    let origin = Origin::fixed(OriginReply::ok("").cache_control("max-age=60").chunks(chunks)).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = 16 * KIB).await;

    for round in 1..=2 {
        let reply = get(addr, "/big-chunked", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), 64 * 1024, "round {round}: full body delivered");
        assert_eq!(origin.requests(), round, "round {round}");
    }
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn objects_under_max_object_size_are_stored() {
    let body = big_body(8 * 1024);
    let origin = Origin::fixed(OriginReply::ok(body.clone()).cache_control("max-age=60")).await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = 16 * KIB).await;
    get(addr, "/fits", &[]).await;
    let hit = get(addr, "/fits", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert!(hit.body == body);
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn the_store_stays_within_cache_size() {
    const CACHE_SIZE: u64 = 64 * KIB;
    let body = big_body(4 * 1024);
    let origin = Origin::fixed(OriginReply::ok(body).cache_control("max-age=600")).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| {
        config.cache_size = CACHE_SIZE;
        config.max_object_size = 8 * KIB;
    })
    .await;

    let client = Client::new();
    let mut peak = 0;
    for i in 0..100 {
        let reply = client.get(addr, &format!("/object/{i}"), &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), 4 * 1024);
        let usage = proxy.cache_usage();
        assert!(
            usage.bytes <= CACHE_SIZE,
            "after object {i}: {usage:?} over {CACHE_SIZE}"
        );
        peak = peak.max(usage.bytes);
    }
    assert_eq!(origin.requests(), 100);
    let usage = proxy.cache_usage();
    assert!(usage.bytes <= CACHE_SIZE, "{usage:?}");
    assert!(
        usage.keys < 100,
        "400 KiB of objects cannot all fit in 64 KiB: {usage:?}"
    );
    assert!(
        peak > CACHE_SIZE / 2,
        "the store was actually used (peak {peak} bytes)"
    );
    // Each stored object weighs at least its body.
    assert!(usage.bytes >= usage.keys * 4 * KIB, "{usage:?}");
}
