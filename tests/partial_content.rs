//! Partial content (RFC 9111 §3.3, §3.4; RFC 9110 §14): `206` parts stored as slices, ranges
//! served from what is stored, a whole object completed from its parts with range requests
//! for the missing ones only, a changed representation's parts discarded, and objects over
//! `--max-object-size` cached as their slices.
//!
//! The origin serves byte ranges of one representation (which a test can replace) and logs
//! the `Range` of every request, so each test asserts exactly what the cache asked for.

mod support;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use support::{get, start_proxy, Origin, OriginReply};

/// 256 KiB: a 1 MiB object is four slices.
const SLICE: u64 = 256 * 1024;

/// A representation the origin serves: its bytes and its entity-tag.
#[derive(Clone)]
struct Representation {
    body: Bytes,
    etag: &'static str,
}

/// Bytes `0, 1, ..., 250, 0, 1, ...` seeded by `seed`, so that every offset is told apart
/// from its neighbours and two representations differ everywhere.
fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed)
        .collect::<Vec<u8>>()
        .into()
}

/// An origin answering `Range: bytes=first-last` (one range, end clamped) with a `206` of the
/// current representation, and any other request with the whole of it; both fresh for a
/// minute, with the representation's strong `ETag`.
async fn ranged_origin(current: Arc<Mutex<Representation>>) -> Origin {
    Origin::start(move |request| reply_from(&current.lock().unwrap(), request)).await
}

/// What [`ranged_origin`] answers `request` with when `now` is its representation.
fn reply_from(now: &Representation, request: &http::Request<Bytes>) -> OriginReply {
    let len = now.body.len() as u64;
    let range = request
        .headers()
        .get("range")
        .map(|value| value.to_str().unwrap().to_owned());
    let reply = match range.as_deref().and_then(|value| value.strip_prefix("bytes=")) {
        Some(spec) => {
            let (first, last) = spec.split_once('-').expect("one int-range");
            let first: u64 = first.parse().unwrap();
            let last = last.parse::<u64>().map_or(len - 1, |last| last.min(len - 1));
            OriginReply::with_status(206, now.body.slice(first as usize..=last as usize))
                .header("content-range", format!("bytes {first}-{last}/{len}"))
        }
        None => OriginReply::ok(now.body.clone()),
    };
    reply
        .header("etag", now.etag)
        .header("content-type", "application/octet-stream")
        .cache_control("max-age=60")
}

/// The `Range` of every request the origin got, in order (`"whole"` for none).
fn ranges_asked(origin: &Origin) -> Vec<String> {
    origin
        .log()
        .iter()
        .map(|seen| seen.header("range").unwrap_or("whole").to_owned())
        .collect()
}

fn slice_request(index: u64) -> String {
    format!("bytes={}-{}", index * SLICE, (index + 1) * SLICE - 1)
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// A 1 MiB object fetched by two ranges, then asked for whole: only the slice no range
    /// covered is fetched, the whole is assembled from the parts as a `200`, and the next
    /// whole request is a hit.
    async fn a_1mb_object_fetched_by_ranges_is_served_whole_without_a_second_full_fetch() {
        let body = pattern(1024 * 1024, 0);
        let current = Arc::new(Mutex::new(Representation { body: body.clone(), etag: "\"v1\"" }));
        let origin = ranged_origin(current).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        let head = get(addr, "/video", &[("range", "bytes=0-299999")]).await;
        assert_eq!((head.status.as_u16(), head.cache()), (206, "MISS"));
        assert_eq!(head.header("content-range"), Some("bytes 0-299999/1048576"));
        assert_eq!(head.body, body.slice(..300_000));

        let tail = get(addr, "/video", &[("range", "bytes=-100000")]).await;
        assert_eq!((tail.status.as_u16(), tail.cache()), (206, "MISS"));
        assert_eq!(tail.header("content-range"), Some("bytes 948576-1048575/1048576"));
        assert_eq!(tail.body, body.slice(948_576..));
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), slice_request(1), slice_request(3)],
            "each range is fetched as the slices that hold it"
        );

        let whole = get(addr, "/video", &[]).await;
        assert_eq!((whole.status.as_u16(), whole.cache()), (200, "MISS"));
        assert_eq!(whole.header("content-length"), Some("1048576"));
        assert_eq!(whole.header("content-range"), None);
        assert_eq!(whole.header("etag"), Some("\"v1\""));
        assert!(whole.body == body, "the whole object assembled from its parts");
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), slice_request(1), slice_request(3), slice_request(2)],
            "completing the object asks for the missing slice only, never the whole"
        );

        let again = get(addr, "/video", &[]).await;
        assert_eq!((again.status.as_u16(), again.cache()), (200, "HIT"));
        assert!(again.body == body);
        assert_eq!(origin.requests(), 4);
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// One stored slice answers every range inside it (`first-last`, `first-`, suffix) as a
    /// hit with the right `Content-Range`; a range reaching past it fetches only the slices it
    /// lacks.
    async fn a_range_inside_a_stored_part_is_served_from_it() {
        let body = pattern(600_000, 7);
        let current = Arc::new(Mutex::new(Representation { body: body.clone(), etag: "\"p1\"" }));
        let origin = ranged_origin(current).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        let first = get(addr, "/file", &[("range", "bytes=0-99")]).await;
        assert_eq!((first.status.as_u16(), first.cache()), (206, "MISS"));
        assert_eq!(first.body, body.slice(..100));
        assert_eq!(ranges_asked(&origin), [slice_request(0)]);

        let inside: &[(&str, &str, std::ops::Range<usize>)] = &[
            ("bytes=100-199", "bytes 100-199/600000", 100..200),
            ("bytes=262000-262143", "bytes 262000-262143/600000", 262_000..262_144),
            ("bytes=0-0", "bytes 0-0/600000", 0..1),
        ];
        for (range, content_range, bytes) in inside {
            let reply = get(addr, "/file", &[("range", range)]).await;
            assert_eq!((reply.status.as_u16(), reply.cache()), (206, "HIT"), "{range}");
            assert_eq!(reply.header("content-range"), Some(*content_range), "{range}");
            assert_eq!(reply.header("content-length"), Some(bytes.len().to_string().as_str()));
            assert_eq!(reply.body, body.slice(bytes.clone()), "{range}");
        }
        assert_eq!(origin.requests(), 1, "ranges inside the stored slice stay in the cache");

        let across = get(addr, "/file", &[("range", "bytes=262100-")]).await;
        assert_eq!((across.status.as_u16(), across.cache()), (206, "MISS"));
        assert_eq!(across.header("content-range"), Some("bytes 262100-599999/600000"));
        assert_eq!(across.body, body.slice(262_100..));
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), slice_request(1), slice_request(2)],
            "the range past the stored slice fetched the two it lacked"
        );

        let now_held: &[(&str, &str, std::ops::Range<usize>)] = &[
            ("bytes=-1000", "bytes 599000-599999/600000", 599_000..600_000),
            ("bytes=300000-", "bytes 300000-599999/600000", 300_000..600_000),
            ("bytes=-999999", "bytes 0-599999/600000", 0..600_000),
        ];
        for (range, content_range, bytes) in now_held {
            let reply = get(addr, "/file", &[("range", range)]).await;
            assert_eq!((reply.status.as_u16(), reply.cache()), (206, "HIT"), "{range}");
            assert_eq!(reply.header("content-range"), Some(*content_range), "{range}");
            assert_eq!(reply.body, body.slice(bytes.clone()), "{range}");
        }
        let past = get(addr, "/file", &[("range", "bytes=600000-")]).await;
        assert_eq!((past.status.as_u16(), past.cache()), (416, "HIT"));
        assert_eq!(past.header("content-range"), Some("bytes */600000"));
        assert_eq!(origin.requests(), 3);
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// RFC 9111 §3.4: a part is combined with stored ones only when they share a strong
    /// validator. The origin's representation changes after one slice was stored; completing
    /// the object finds the new `ETag`, drops the stored slice, and serves the new
    /// representation whole, never a mix of the two.
    async fn a_validator_mismatch_when_completing_discards_the_stored_part() {
        let old = pattern(512 * 1024, 1);
        let new = pattern(512 * 1024, 2);
        let current = Arc::new(Mutex::new(Representation { body: old.clone(), etag: "\"old\"" }));
        let origin = ranged_origin(current.clone()).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        let part = get(addr, "/doc", &[("range", "bytes=0-9")]).await;
        assert_eq!((part.status.as_u16(), part.body.clone()), (206, old.slice(..10)));

        *current.lock().unwrap() = Representation { body: new.clone(), etag: "\"new\"" };
        let whole = get(addr, "/doc", &[]).await;
        assert_eq!((whole.status.as_u16(), whole.cache()), (200, "MISS"));
        assert_eq!(whole.header("etag"), Some("\"new\""));
        assert!(whole.body == new, "the new representation, not the old slice with a new one");
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), slice_request(1), slice_request(0)],
            "the missing slice showed the change; the stored one was fetched again"
        );

        let part = get(addr, "/doc", &[("range", "bytes=0-9")]).await;
        assert_eq!((part.status.as_u16(), part.cache()), (206, "HIT"));
        assert_eq!(part.body, new.slice(..10));
        assert_eq!(part.header("etag"), Some("\"new\""));
        assert_eq!(origin.requests(), 3);
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// An object over `--max-object-size` was never cached. Now the first whole request
    /// passes it through and the next one fetches it by slices, which are stored: the third
    /// request, and any range of it, never reach the origin.
    async fn an_object_over_max_object_size_is_cached_as_its_slices() {
        let body = pattern(1024 * 1024, 3);
        let current = Arc::new(Mutex::new(Representation { body: body.clone(), etag: "\"big\"" }));
        let origin = ranged_origin(current).await;
        // The slices are at most --max-object-size (the default --slice-size is larger).
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = SLICE).await;

        let passed = get(addr, "/big.iso", &[]).await;
        assert_eq!(passed.status, 200);
        assert!(passed.body == body);
        assert_eq!(ranges_asked(&origin), ["whole"], "too large: passed as it came");

        let sliced = get(addr, "/big.iso", &[]).await;
        assert_eq!((sliced.status.as_u16(), sliced.cache()), (200, "MISS"));
        assert_eq!(sliced.header("content-length"), Some("1048576"));
        assert!(sliced.body == body);
        let by_slices: Vec<String> = (0..4).map(slice_request).collect();
        assert_eq!(ranges_asked(&origin)[1..], by_slices[..], "fetched slice by slice");

        let hit = get(addr, "/big.iso", &[]).await;
        assert_eq!((hit.status.as_u16(), hit.cache()), (200, "HIT"));
        assert!(hit.body == body);
        let range = get(addr, "/big.iso", &[("range", "bytes=500000-500009")]).await;
        assert_eq!((range.status.as_u16(), range.cache()), (206, "HIT"));
        assert_eq!(range.body, body.slice(500_000..500_010));
        assert_eq!(origin.requests(), 5, "the second request stored it all");
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// A range on an unknown object over `--max-object-size` is fetched as its slice and
    /// stored: the second request for it does not reach the origin.
    async fn a_range_of_an_object_over_max_object_size_is_cached() {
        let body = pattern(1024 * 1024, 4);
        let current = Arc::new(Mutex::new(Representation { body: body.clone(), etag: "\"big\"" }));
        let origin = ranged_origin(current).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.max_object_size = SLICE).await;

        for expected in ["MISS", "HIT"] {
            let reply = get(addr, "/big.iso", &[("range", "bytes=700000-700099")]).await;
            assert_eq!((reply.status.as_u16(), reply.cache()), (206, expected));
            assert_eq!(reply.header("content-range"), Some("bytes 700000-700099/1048576"));
            assert_eq!(reply.body, body.slice(700_000..700_100));
        }
        assert_eq!(ranges_asked(&origin), [slice_request(2)]);
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// RFC 9110 §15.3.7.3: only parts with a strong validator can be combined. A `206` with a
    /// weak `ETag` is not stored: the range goes to the origin as the client sent it, and so
    /// does the next one.
    async fn a_part_without_a_strong_validator_is_not_stored() {
        let origin = Origin::start(|request| match request.headers().get("range") {
            Some(_) => OriginReply::with_status(206, "0123456789")
                .header("content-range", "bytes 0-9/100")
                .header("etag", "W/\"weak\"")
                .cache_control("max-age=60"),
            None => OriginReply::ok(vec![b'x'; 100]).cache_control("max-age=60"),
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        let first = get(addr, "/weak", &[("range", "bytes=0-9")]).await;
        assert_eq!(first.status, 206);
        assert_eq!(first.body, "0123456789");
        let second = get(addr, "/weak", &[("range", "bytes=0-9")]).await;
        assert_eq!(second.status, 206);
        assert_eq!(second.body, "0123456789");
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), "bytes=0-9".to_owned(), "bytes=0-9".to_owned()],
            "after one try at the slice, the client's own range is passed"
        );
    }
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// An origin that ignores `Range` answers the slice request with the whole `200`: it is
    /// judged and stored as any miss's response, so the next requests, ranges or not, are hits.
    async fn an_origin_that_ignores_ranges_has_its_whole_response_stored() {
        let body = pattern(100_000, 5);
        let whole = body.clone();
        let origin = Origin::start(move |_| {
            OriginReply::ok(whole.clone())
                .header("etag", "\"w\"")
                .cache_control("max-age=60")
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        let first = get(addr, "/plain", &[("range", "bytes=10-19")]).await;
        assert_eq!((first.status.as_u16(), first.cache()), (200, "MISS"));
        assert!(first.body == body, "the origin's whole answer");
        support::eventually_stored(&proxy, 1).await;

        let range = get(addr, "/plain", &[("range", "bytes=10-19")]).await;
        assert_eq!((range.status.as_u16(), range.cache()), (206, "HIT"));
        assert_eq!(range.body, body.slice(10..20));
        let again = get(addr, "/plain", &[]).await;
        assert_eq!((again.status.as_u16(), again.cache()), (200, "HIT"));
        assert_eq!(ranges_asked(&origin), [slice_request(0)]);
    }
}

/// `PURGE` removes a URL's slices with its objects: the next range goes to the origin again.
#[tokio::test]
async fn purge_removes_the_stored_slices() {
    let body = pattern(300_000, 6);
    let current = Arc::new(Mutex::new(Representation {
        body: body.clone(),
        etag: "\"s\"",
    }));
    let origin = ranged_origin(current).await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

    let first = get(addr, "/clip", &[("range", "bytes=0-9")]).await;
    assert_eq!((first.status.as_u16(), first.cache()), (206, "MISS"));
    let hit = get(addr, "/clip", &[("range", "bytes=10-19")]).await;
    assert_eq!((hit.status.as_u16(), hit.cache()), (206, "HIT"));

    let purged = support::send("PURGE", addr, "/clip", &[], Bytes::new()).await;
    assert_eq!(purged.status, 200, "the slices were what was stored for the URL");
    let again = get(addr, "/clip", &[("range", "bytes=10-19")]).await;
    assert_eq!((again.status.as_u16(), again.cache()), (206, "MISS"));
    assert_eq!(again.body, body.slice(10..20));
    assert_eq!(ranges_asked(&origin), [slice_request(0), slice_request(0)]);
}

support::modes! {
    differs_with_default_vcl = "slices bypass policy subs, and default.vcl defines vcl_hit/vcl_miss/vcl_backend_*";
    /// RFC 9111 §3.4 while the body streams: the representation changes after the head went
    /// out (the origin serves the new one from its third request on). The client's response
    /// is cut short rather than finished with bytes of another representation, the stored
    /// slices are dropped, and the next request is a plain miss for the new representation.
    async fn a_representation_that_changes_mid_response_cuts_it_short() {
        let old = Representation { body: pattern(1024 * 1024, 8), etag: "\"a\"" };
        let new = Representation { body: pattern(1024 * 1024, 9), etag: "\"b\"" };
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let fresh = new.clone();
        let origin = Origin::start(move |request| {
            let n = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            reply_from(if n < 2 { &old } else { &fresh }, request)
        })
        .await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        // Slice 0 learns the representation, slice 1 is fetched before the head, slice 2 is new.
        let cut = support::try_get(addr, "/live", &[("range", "bytes=0-")]).await;
        assert!(cut.is_err(), "the response is incomplete, not a mix: {cut:?}");
        assert_eq!(
            ranges_asked(&origin),
            [slice_request(0), slice_request(1), slice_request(2)]
        );

        let whole = get(addr, "/live", &[]).await;
        assert_eq!((whole.status.as_u16(), whole.header("etag")), (200, Some("\"b\"")));
        assert!(whole.body == new.body, "the new representation only");
        assert_eq!(
            ranges_asked(&origin)[3..],
            ["whole"],
            "the old slices were dropped: nothing stored was used"
        );
    }
}

support::modes! {
    differs_with_policy = "with a policy, a request's no-store on the whole-object path makes the key hit-for-pass (builtin VCL path, before slices)";
    /// RFC 9111 §5.2.1.5: a client's `no-store` keeps its response out of the cache and says
    /// nothing about the URL: the next client's range is fetched by slices and stored.
    async fn a_range_with_no_store_stores_nothing_and_marks_nothing() {
        let body = pattern(300_000, 10);
        let current = Arc::new(Mutex::new(Representation { body: body.clone(), etag: "\"n\"" }));
        let origin = ranged_origin(current).await;
        let (_proxy, addr) = start_proxy(origin.addr, |config| config.slice_size = SLICE).await;

        // Left to the whole-object path, which answers the range or the whole (both correct).
        let private = get(addr, "/n", &[("range", "bytes=0-9"), ("cache-control", "no-store")]).await;
        match private.status.as_u16() {
            206 => assert!(private.body == body.slice(..10)),
            200 => assert!(private.body == body),
            other => panic!("status {other}"),
        }
        let first = get(addr, "/n", &[("range", "bytes=0-9")]).await;
        assert_eq!((first.status.as_u16(), first.cache()), (206, "MISS"));
        let second = get(addr, "/n", &[("range", "bytes=0-9")]).await;
        assert_eq!((second.status.as_u16(), second.cache()), (206, "HIT"));
        assert_eq!(second.body, body.slice(..10));
        assert_eq!(ranges_asked(&origin)[1..], [slice_request(0)], "the second request stored it");
    }
}
