//! No request is lost to a reload: 8 keep-alive connections stay busy on loopback while the
//! policy is rewritten 100 times, alternating two valid versions and a broken one.
//!
//! Each connection is one hyper HTTP/1.1 connection on its own socket (no pool), so a reset or
//! a closed connection fails the test instead of being retried. Every response must be a 200
//! carrying one of the two valid markers, from the cache (`/cached`) or the origin (`/pass`).
//!
//! The rewrites are renames over the file: a write in place can be read half-written, and half
//! of a valid policy may be another valid policy (e.g. one without the marker), which is a
//! hazard of the editor, not of the reload. After each rewrite the test also asks for a reload
//! itself (what SIGHUP does), so every one of the 100 versions is loaded or refused once while
//! the watcher reloads on its own schedule too: at least 67 swaps and 33 refusals under load.
//! Bounded: 100 rewrites and reloads; about 1 s in a release build, about 10 s in a debug build
//! (where compiling the policy's regexes dominates a reload).

mod reload_support;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use reload_support::*;
use support::{Origin, OriginReply};
use tokio::net::TcpStream;

const CONNECTIONS: usize = 8;
const REWRITES: usize = 100;

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    failures: Vec<String>,
    markers: std::collections::BTreeMap<String, usize>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_request_fails_while_the_policy_is_rewritten_100_times() {
    let origin = Origin::start(|request| {
        if request.uri().path().starts_with("/cached") {
            OriginReply::ok("cached").cache_control("max-age=600")
        } else {
            OriginReply::ok("passed").cache_control("no-store")
        }
    })
    .await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("one"), |_| {}).await;

    let done = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for connection in 0..CONNECTIONS {
        let done = done.clone();
        clients.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let stream = TcpStream::connect(addr).await.expect("connect");
            stream.set_nodelay(true).unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .expect("handshake");
            let conn = tokio::spawn(conn);
            let mut n = 0usize;
            while !done.load(Ordering::Relaxed) {
                n += 1;
                let path = if n.is_multiple_of(2) {
                    format!("/cached/{}", (n / 2) % 16)
                } else {
                    format!("/pass/{connection}")
                };
                let request = Request::get(&path)
                    .header("host", addr.to_string())
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let exchange = async {
                    sender
                        .ready()
                        .await
                        .map_err(|e| format!("connection not ready: {e}"))?;
                    let response = sender
                        .send_request(request)
                        .await
                        .map_err(|e| format!("request: {e}"))?;
                    let status = response.status();
                    let marker = response
                        .headers()
                        .get("x-policy")
                        .map_or(String::new(), |v| v.to_str().unwrap().to_string());
                    let body = response
                        .into_body()
                        .collect()
                        .await
                        .map_err(|e| format!("body: {e}"))?
                        .to_bytes();
                    Ok::<_, String>((status, marker, body))
                };
                match tokio::time::timeout(support::EXCHANGE_LIMIT, exchange).await {
                    Ok(Ok((status, marker, body))) => {
                        let expected_body: &[u8] = if path.starts_with("/cached") {
                            b"cached"
                        } else {
                            b"passed"
                        };
                        if status != 200 || body != expected_body || !(marker == "one" || marker == "two") {
                            tally
                                .failures
                                .push(format!("{path}: {status} marker {marker:?} body {body:?}"));
                        } else {
                            tally.ok += 1;
                        }
                        *tally.markers.entry(marker).or_default() += 1;
                    }
                    Ok(Err(error)) => {
                        tally.failures.push(format!("{path}: {error}"));
                        break;
                    }
                    Err(_) => {
                        tally.failures.push(format!("{path}: no response in time"));
                        break;
                    }
                }
            }
            drop(sender);
            let _ = conn.await;
            tally
        }));
    }

    // Let every connection get going before the first rewrite.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (mut swapped, mut refused) = (0, 0);
    for i in 0..REWRITES {
        let text = match i % 3 {
            0 => marking("two"),
            1 => broken("three"),
            _ => marking("one"),
        };
        rename_over(&policy, &text);
        match running.reload().await {
            Ok(_) => swapped += 1,
            Err(_) => refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Keep the load on past the watcher's last debounce.
    tokio::time::sleep(Duration::from_millis(300)).await;
    done.store(true, Ordering::Relaxed);

    let mut total = Tally::default();
    for client in clients {
        let tally = client.await.expect("client task");
        total.ok += tally.ok;
        total.failures.extend(tally.failures);
        for (marker, count) in tally.markers {
            *total.markers.entry(marker).or_default() += count;
        }
    }
    let status = running.reload_status();
    eprintln!(
        "{} responses over {CONNECTIONS} connections; markers {:?}; {swapped} swaps and {refused} refusals asked, \
         reloads {status:?}",
        total.ok, total.markers
    );
    assert!(
        total.failures.is_empty(),
        "{} failed: {:?}",
        total.failures.len(),
        &total.failures[..total.failures.len().min(10)]
    );
    assert_eq!((swapped, refused), (67, 33));
    assert!(status.ok >= 67 && status.failed >= 33, "{status:?}");
    assert!(
        total.markers.get("one").is_some_and(|&n| n > 0) && total.markers.get("two").is_some_and(|&n| n > 0)
    );
    assert!(
        total.ok >= REWRITES,
        "the connections were busy: {} responses",
        total.ok
    );
    // Cached objects survived all of it: each of the 16 cached paths was fetched once.
    assert_eq!(
        (0..16)
            .map(|n| origin.requests_for(&format!("/cached/{n}")))
            .sum::<usize>(),
        16
    );
}
