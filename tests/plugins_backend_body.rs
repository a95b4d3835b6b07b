//! Body plugins run from `vcl_backend_response`, over real sockets: what they leave of the
//! origin's body is what the cache stores and every hit serves, with its `Content-Length`;
//! a body past their `.max_body` fails the fetch and nothing is stored.

mod support;

use std::time::Duration;

use http::StatusCode;
use support::plugins::{start_with_generous_deadline, wasm, wat};
use support::{get, Origin, OriginReply};

/// `body_rewrite.wasm` (`origin` → `edge`) in `vcl_backend_response`, with `max_body`;
/// `vcl_recv` passes `/pass/...` and `vcl_backend_response` makes `/uncacheable/...` so.
fn policy(max_body: &str) -> String {
    format!(
        r#"vcl 4.1;
plugin rewrite {{ .path = "{}"; .config = "origin=edge"; .max_body = {max_body}; }}
sub vcl_recv {{ if (req.url ~ "^/pass/") {{ return (pass); }} }}
sub vcl_backend_response {{
    plugin.response(rewrite);
    if (bereq.url ~ "^/uncacheable/") {{ set beresp.uncacheable = true; }}
}}
"#,
        wasm("body_rewrite.wasm")
    )
}

const LINE: &str = "from the origin server\n"; // 23 bytes, `origin` once

/// About 100 KB of `LINE`, sent chunked in 16 chunks, storable for 10 minutes.
fn text_origin_reply() -> (OriginReply, usize) {
    let lines = 100 * 1024 / LINE.len();
    let text = LINE.repeat(lines);
    let chunks = text
        .as_bytes()
        .chunks(text.len() / 16 + 1)
        .map(|chunk| (Duration::ZERO, bytes::Bytes::copy_from_slice(chunk)))
        .collect();
    let reply = OriginReply::ok("")
        .header("content-type", "text/plain")
        .cache_control("max-age=600")
        .chunks(chunks);
    (reply, lines)
}

#[tokio::test]
async fn a_body_plugin_in_vcl_backend_response_rewrites_the_stored_copy_every_hit_serves() {
    let (reply, lines) = text_origin_reply();
    let origin = Origin::fixed(reply).await;
    let (proxy, addr) = start_with_generous_deadline(&policy("1MB"), &origin).await;
    let expected = "from the edge server\n".repeat(lines);
    let length = expected.len().to_string();

    let miss = get(addr, "/big.txt", &[]).await;
    assert_eq!(miss.status, StatusCode::OK);
    assert_eq!(miss.cache(), "MISS");
    assert!(miss.text() == expected, "the requester gets the rewritten body");
    assert_eq!(miss.header("content-length"), Some(length.as_str()));
    assert_eq!(miss.header("transfer-encoding"), None);
    assert_eq!(miss.header("x-body-rewritten"), Some(lines.to_string().as_str()));

    support::eventually_stored(&proxy, 1).await;
    let hit = get(addr, "/big.txt", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert!(hit.text() == expected, "the stored copy is the rewritten one");
    assert_eq!(hit.header("content-length"), Some(length.as_str()));
    assert_eq!(
        hit.header("x-body-rewritten"),
        Some(lines.to_string().as_str()),
        "headers set in the body callbacks are stored too"
    );
    assert_eq!(origin.requests(), 1, "the hit did not go to the origin");
}

#[tokio::test]
async fn a_10_mb_body_past_a_1_mb_max_body_in_vcl_backend_response_fails_the_fetch_and_nothing_is_stored() {
    let origin = Origin::fixed(
        OriginReply::ok(vec![b'x'; 10 << 20])
            .header("content-type", "text/plain")
            .cache_control("max-age=600"),
    )
    .await;
    let (proxy, addr) = start_with_generous_deadline(&policy("1MB"), &origin).await;
    for attempt in 1..=2 {
        let reply = get(addr, "/huge.txt", &[]).await;
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "attempt {attempt}");
        assert!(
            reply
                .text()
                .contains("larger than 1048576 bytes, the `.max_body` of a plugin"),
            "{}",
            reply.text()
        );
        assert_eq!(proxy.cache_usage().keys, 0, "nothing is stored");
        assert_eq!(origin.requests(), attempt, "each request fetches again");
    }
}

#[tokio::test]
async fn passes_and_uncacheable_responses_get_the_body_vcl_backend_response_plugins_leave() {
    let origin = Origin::fixed(
        OriginReply::ok("said the origin")
            .header("content-type", "text/plain")
            .cache_control("max-age=600"),
    )
    .await;
    let (proxy, addr) = start_with_generous_deadline(&policy("1MB"), &origin).await;
    for target in ["/pass/a", "/uncacheable/a"] {
        for _ in 0..2 {
            let reply = get(addr, target, &[]).await;
            assert_eq!(reply.status, StatusCode::OK, "{target}");
            assert_eq!(reply.text(), "said the edge", "{target}");
            assert_eq!(reply.header("content-length"), Some("13"), "{target}");
        }
    }
    assert_eq!(origin.requests(), 4, "none of them is stored");
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn a_pause_at_the_end_of_the_body_in_vcl_backend_response_holds_the_fetch_until_the_plugin_resumes_it()
{
    let origin = Origin::fixed(
        OriginReply::ok("origin body")
            .header("content-type", "text/plain")
            .cache_control("max-age=600"),
    )
    .await;
    // It appends `+held` and pauses at the end of the body; only its tick resumes the
    // response, stamping `x-resumed: tick`.
    let policy = format!(
        r#"vcl 4.1;
plugin hold {{ .path = "{}"; .max_body = 1MB; }}
sub vcl_backend_response {{ plugin.response(hold); }}
"#,
        wat("hold_body.wat")
    );
    let (proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let miss = get(addr, "/held", &[]).await;
    assert_eq!(miss.status, StatusCode::OK, "{}", miss.text());
    assert_eq!(miss.header("x-resumed"), Some("tick"), "resumed by the tick");
    assert_eq!(miss.text(), "origin body+held");
    assert_eq!(miss.header("content-length"), Some("16"));
    support::eventually_stored(&proxy, 1).await;
    let hit = get(addr, "/held", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.text(), "origin body+held", "stored as the plugin resumed it");
    assert_eq!(hit.header("x-resumed"), Some("tick"));
    assert_eq!(origin.requests(), 1);
}
