//! `Range` on a stored object (RFC 9110 §14, §13.1.5): 206 with `Content-Range`, several
//! ranges as `multipart/byteranges`, 416 when unsatisfiable, `If-Range` honoured; with
//! `--slice-size 0`, a range request on a miss fetches the whole object for the cache (slices:
//! `tests/partial_content.rs`).

mod support;

use std::net::SocketAddr;

use bytes::Bytes;
use support::{get, http_date_from_now, start_proxy, Origin, OriginReply};

const BODY: &str = "0123456789abcdefghijklmnopqrstuvwxyz";

async fn stored_object() -> (Origin, edgecache_runtime::Running, SocketAddr) {
    let origin = Origin::fixed(
        OriginReply::ok(BODY)
            .header("etag", "\"r1\"")
            .header("last-modified", http_date_from_now(-3600))
            .header("content-type", "text/plain")
            .cache_control("max-age=60"),
    )
    .await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let first = get(addr, "/obj", &[]).await;
    assert_eq!(first.body, BODY);
    support::eventually_stored(&proxy, 1).await;
    (origin, proxy, addr)
}

support::modes! {
    async fn a_single_range_is_a_206_from_the_cache() {
        let (origin, _proxy, addr) = stored_object().await;
        let cases: &[(&str, &str, &str)] = &[
            ("bytes=0-3", "bytes 0-3/36", "0123"),
            ("bytes=10-", "bytes 10-35/36", &BODY[10..]),
            ("bytes=-4", "bytes 32-35/36", "wxyz"),
            ("bytes=30-1000", "bytes 30-35/36", "uvwxyz"),
            ("bytes=0-1,1-3", "bytes 0-3/36", "0123"),
        ];
        for &(range, content_range, body) in cases {
            let reply = get(addr, "/obj", &[("range", range)]).await;
            assert_eq!(reply.status, 206, "{range}");
            assert_eq!(reply.cache(), "HIT", "{range}");
            assert_eq!(reply.header("content-range"), Some(content_range), "{range}");
            assert_eq!(reply.body, body, "{range}");
            assert_eq!(
                reply.header("content-length"),
                Some(body.len().to_string().as_str())
            );
        }
        assert_eq!(origin.requests(), 1, "every range came from the stored object");
        assert_eq!(origin.last().header("range"), None);
    }
}

support::modes! {
    async fn several_ranges_are_a_multipart_206() {
        let (origin, _proxy, addr) = stored_object().await;
        let reply = get(addr, "/obj", &[("range", "bytes=0-1, 10-12")]).await;
        assert_eq!(reply.status, 206);
        let content_type = reply.header("content-type").expect("content-type");
        let boundary = content_type
            .strip_prefix("multipart/byteranges; boundary=")
            .unwrap_or_else(|| panic!("multipart content type: {content_type}"));
        let text = reply.text();
        let expected = format!(
            "--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/36\r\n\r\n01\r\n\
             --{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 10-12/36\r\n\r\nabc\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(text, expected);
        assert_eq!(
            reply.header("content-range"),
            None,
            "parts carry their own Content-Range"
        );
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    async fn an_unsatisfiable_range_is_416() {
        let (origin, _proxy, addr) = stored_object().await;
        for range in ["bytes=36-", "bytes=100-200", "bytes=-0"] {
            let reply = get(addr, "/obj", &[("range", range)]).await;
            assert_eq!(reply.status, 416, "{range}");
            assert_eq!(reply.header("content-range"), Some("bytes */36"), "{range}");
            assert!(reply.body.is_empty());
        }
        // An invalid or foreign-unit Range is ignored: the whole object.
        for range in ["bytes=5-2", "items=0-1", "bytes=x-y"] {
            let reply = get(addr, "/obj", &[("range", range)]).await;
            assert_eq!(reply.status, 200, "{range}");
            assert_eq!(reply.body, BODY, "{range}");
        }
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    async fn if_range_is_honoured() {
        let (origin, _proxy, addr) = stored_object().await;
        let first = get(addr, "/obj", &[]).await;
        let last_modified = first.header("last-modified").unwrap().to_string();
        let cases: &[(&str, u16)] = &[
            // Matching strong entity-tag: the range.
            ("\"r1\"", 206),
            // Another entity-tag: the whole representation.
            ("\"r0\"", 200),
            // A weak entity-tag never matches (strong comparison, RFC 9110 §13.1.5).
            ("W/\"r1\"", 200),
            // Last-Modified an hour before Date is a strong validator: the range.
            (last_modified.as_str(), 206),
            // Any other date: the whole representation.
            (&http_date_from_now(-60), 200),
        ];
        for &(if_range, status) in cases {
            let reply = get(addr, "/obj", &[("range", "bytes=0-3"), ("if-range", if_range)]).await;
            assert_eq!(reply.status, status, "If-Range: {if_range}");
            assert_eq!(reply.cache(), "HIT");
            match status {
                206 => assert_eq!(reply.body, "0123"),
                _ => {
                    assert_eq!(reply.body, BODY);
                    assert_eq!(reply.header("content-range"), None);
                }
            }
        }
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    /// Without slices (`--slice-size 0`), as Varnish: the range is cut from the whole object.
    async fn a_range_request_on_a_miss_stores_the_whole_object() {
        let origin = Origin::fixed(OriginReply::ok(BODY).cache_control("max-age=60")).await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = 0).await;

        let reply = get(addr, "/cold", &[("range", "bytes=0-3")]).await;
        assert_eq!(reply.cache(), "MISS");
        // Either answer is correct for the client: the range, or the whole representation.
        match reply.status.as_u16() {
            206 => assert_eq!(reply.body, "0123"),
            200 => assert_eq!(reply.body, BODY),
            other => panic!("status {other}"),
        }
        assert_eq!(
            origin.last().header("range"),
            None,
            "the cache asks for the whole object"
        );
        support::eventually_stored(&proxy, 1).await;

        let full = get(addr, "/cold", &[]).await;
        assert_eq!((full.status.as_u16(), full.cache()), (200, "HIT"));
        assert_eq!(full.body, BODY);
        let part = get(addr, "/cold", &[("range", "bytes=-3")]).await;
        assert_eq!((part.status.as_u16(), part.cache()), (206, "HIT"));
        assert_eq!(part.body, "xyz");
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    /// Above `max_object_size` the object cannot be stored, so fetching all of it for the cache is
    /// pointless: once edgecache knows that (hit-for-pass), a range request goes to the origin
    /// with its `Range`, and the client gets the origin's 206.
    async fn a_range_request_for_an_object_too_large_to_store_keeps_its_range() {
        let big = Bytes::from(vec![b'x'; 4096]);
        let origin =
            Origin::start(
                move |request| match request.headers().get("range").map(|v| v.to_str().unwrap()) {
                    Some("bytes=0-9") => OriginReply::with_status(206, "xxxxxxxxxx")
                        .header("content-range", "bytes 0-9/4096")
                        .cache_control("max-age=60"),
                    _ => OriginReply::ok(big.clone()).cache_control("max-age=60"),
                },
            )
            .await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = 1024).await;

        // The first request learns that the object is too large.
        let first = get(addr, "/big", &[]).await;
        assert_eq!(first.body.len(), 4096);

        let reply = get(addr, "/big", &[("range", "bytes=0-9")]).await;
        assert_eq!(
            origin.last().header("range"),
            Some("bytes=0-9"),
            "an object known to be too large to store is fetched with the client's Range"
        );
        assert_eq!(reply.status, 206);
        assert_eq!(reply.body.len(), 10);
    }
}
