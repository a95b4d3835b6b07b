//! HTTP/2 "rapid reset" (CVE-2023-44487) in the variant that resets streams after the server
//! accepted them, and stream floods: one connection may not make the origin work for streams
//! its client abandons, and gets GOAWAY past `--h2-rapid-reset-limit` or
//! `--h2-max-streams-per-second`. Ordinary HTTP/2 clients are not affected.

mod support;

use std::time::Duration;

use http::StatusCode;
use support::{start_proxy, H2Frames, Origin, OriginReply, EXCHANGE_LIMIT};

/// The attack's shape: streams on one connection, at most this many open at a time.
const STREAMS: usize = 20_000;
const OPEN_AT_ONCE: usize = 100;

/// An origin whose misses take long enough that a reset always comes before the response.
async fn slow_origin() -> Origin {
    Origin::start(|request| {
        let reply = OriginReply::ok("page").cache_control("max-age=60");
        if request.uri().path().starts_with("/slow/") {
            reply.delay(Duration::from_millis(500))
        } else {
            reply
        }
    })
    .await
}

/// Waits until the origin has seen every request started so far: its count stays put for a
/// while. Polling, as a last resort: the fills of reset streams run on after the client left,
/// and nothing signals the last of them reaching the origin.
async fn settled(origin: &Origin) -> usize {
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    let mut seen = origin.requests();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = origin.requests();
        if now == seen || tokio::time::Instant::now() > deadline {
            return now;
        }
        seen = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_rapid_reset_after_accept_gets_goaway() {
    const LIMIT: u32 = 50;
    let origin = slow_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.h2_limits.rapid_reset_limit = LIMIT;
        // This test is about resets alone.
        config.h2_limits.max_streams_per_second = 0;
    })
    .await;

    let mut attacker = H2Frames::connect(addr).await;
    let mut opened = 0;
    let refused = 'attack: loop {
        let mut batch = Vec::with_capacity(OPEN_AT_ONCE);
        for _ in 0..OPEN_AT_ONCE {
            match attacker
                .open(&format!("http://edgecache.test/slow/{opened}"), &[])
                .await
            {
                Ok(stream) => batch.push(stream),
                Err(error) => break 'attack error,
            }
            opened += 1;
        }
        // Reset only once the server has accepted the streams (resets before accept are h2's
        // own business): their requests reached the origin, or it answered one (429).
        let admitted = async {
            while origin.requests() < opened {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        let answered = futures_util::future::select_all(batch.iter_mut().map(|(response, _)| response));
        tokio::time::timeout(EXCHANGE_LIMIT, async {
            tokio::select! {
                _ = admitted => {}
                _ = answered => {}
            }
        })
        .await
        .expect("the streams were accepted or answered");
        for (_response, mut stream) in batch {
            stream.send_reset(h2::Reason::CANCEL);
        }
        assert!(
            opened < STREAMS,
            "{STREAMS} streams opened and reset without a GOAWAY; the origin saw {}",
            origin.requests()
        );
    };
    assert!(
        refused.is_go_away(),
        "the connection ended with {refused:?}, not GOAWAY"
    );
    // edgecache's graceful GOAWAY (NO_ERROR) stops it accepting streams; an attacker that goes
    // on resetting the ones it still opens meets h2's cap on resets before accept next.
    assert!(
        [h2::Reason::NO_ERROR, h2::Reason::ENHANCE_YOUR_CALM].contains(&refused.reason().unwrap()),
        "{refused:?}"
    );

    let fetched = settled(&origin).await;
    // The streams open when the cap was reached had started their fetches too.
    assert!(
        fetched <= LIMIT as usize + OPEN_AT_ONCE,
        "{opened} streams opened before GOAWAY, the origin saw {fetched} requests; \
         the cap is {LIMIT} plus the {OPEN_AT_ONCE} streams open at a time"
    );
    assert!(fetched > LIMIT as usize, "the cap counts fetches: {fetched}");

    // Other clients are served.
    let mut next = H2Frames::connect(addr).await;
    let reply = next
        .get("http://edgecache.test/fast", &[])
        .await
        .expect("a new connection is served");
    assert_eq!(reply.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_clients_with_many_sequential_streams_are_unaffected() {
    let origin = slow_origin().await;
    // The default caps.
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let mut client = H2Frames::connect(addr).await;
    for round in 0..3_000 {
        let reply = client
            .get(&format!("http://edgecache.test/page/{}", round % 50), &[])
            .await
            .unwrap_or_else(|error| panic!("stream {round}: {error}"));
        assert_eq!(reply.status, StatusCode::OK, "stream {round}");
    }
    // A browser cancels a few slow loads (a navigation away): below the cap.
    for n in 0..20 {
        let (_response, mut stream) = client
            .open(&format!("http://edgecache.test/slow/{n}"), &[])
            .await
            .expect("a stream");
        client.round_trip().await.expect("a PONG");
        stream.send_reset(h2::Reason::CANCEL);
    }
    let reply = client
        .get("http://edgecache.test/page/0", &[])
        .await
        .expect("the connection still serves");
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.cache(), "HIT");
    assert!(!client.connection.is_finished(), "no GOAWAY");
    assert_eq!(origin.requests_for("/page/0"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_stream_floods_past_the_rate_get_goaway() {
    const RATE: u32 = 200;
    let origin = slow_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.h2_limits.max_streams_per_second = RATE;
    })
    .await;

    let mut flooder = H2Frames::connect(addr).await;
    let mut answered = Vec::new();
    let ended = 'flood: loop {
        let mut batch = Vec::with_capacity(OPEN_AT_ONCE);
        for _ in 0..OPEN_AT_ONCE {
            match flooder.open("http://edgecache.test/page/1", &[]).await {
                Ok((response, _)) => batch.push(response),
                Err(error) => break 'flood error,
            }
        }
        for response in batch {
            match response.await {
                Ok(response) => answered.push(response.status()),
                Err(error) => break 'flood error,
            }
        }
        assert!(
            answered.len() < STREAMS,
            "{STREAMS} streams within a second without a GOAWAY"
        );
    };
    assert!(
        ended.is_go_away(),
        "the connection ended with {ended:?}, not GOAWAY"
    );
    let served = answered
        .iter()
        .filter(|status| **status == StatusCode::OK)
        .count();
    // The bucket starts full and refills while the flood runs (well under a second).
    assert!(
        served < 2 * RATE as usize,
        "{served} streams served at a rate of {RATE}/s"
    );
    assert!(
        answered.contains(&StatusCode::TOO_MANY_REQUESTS),
        "streams opened before the client saw GOAWAY get 429: {answered:?}"
    );
}

#[tokio::test]
async fn h2_clients_are_told_100_concurrent_streams() {
    let origin = slow_origin().await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    let mut client = H2Frames::connect(addr).await;
    // The server's SETTINGS came before its answer to this PING.
    client.round_trip().await.expect("a PONG");
    assert_eq!(
        client.send.current_max_send_streams(),
        100,
        "SETTINGS_MAX_CONCURRENT_STREAMS, Varnish's h2_max_concurrent_streams"
    );
}
