//! Interim responses (RFC 9110 §15.2): the `1xx` responses an origin sends before its final
//! one reach the client, in order, each with its own fields, on HTTP/1.1 and HTTP/2, and are
//! never stored or merged into the final response; an HTTP/1.0 client gets none.

mod support;

use std::future::poll_fn;

use support::{start_proxy, H2Frames, Origin, RawConn};

/// Two `103 Early Hints`, then a cacheable `200`.
const EARLY_HINTS_THEN_OK: &str = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
    HTTP/1.1 103 Early Hints\r\nLink: </b.js>; rel=preload\r\nX-Hint: 2\r\n\r\n\
    HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nfinal";

support::modes! {
    async fn early_hints_reach_an_http1_client_in_order_and_are_not_stored() {
        let origin = Origin::raw(EARLY_HINTS_THEN_OK).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /page HTTP/1.1\r\nHost: example.test\r\n\r\n")
            .await;
        let first = conn.response(false).await;
        assert_eq!(first.status, 103, "{first:?}");
        assert_eq!(first.header("link"), Some("</a.css>; rel=preload"));
        let second = conn.response(false).await;
        assert_eq!(second.status, 103, "{second:?}");
        assert_eq!(second.header("link"), Some("</b.js>; rel=preload"));
        assert_eq!(second.header("x-hint"), Some("2"));
        let last = conn.response(false).await;
        assert_eq!((last.status, last.body.as_slice()), (200, &b"final"[..]));
        assert_eq!(last.cache(), "MISS");
        assert!(
            !last.has_header("link"),
            "interim fields are not merged into the final response"
        );

        support::eventually_stored(&proxy, 1).await;
        conn.send("GET /page HTTP/1.1\r\nHost: example.test\r\n\r\n")
            .await;
        let hit = conn.response(false).await;
        assert_eq!(
            (hit.status, hit.cache()),
            (200, "HIT"),
            "no interim response is stored: {hit:?}"
        );
        assert!(!hit.has_header("link"));
        assert_eq!(origin.requests(), 1);
    }
}

support::modes! {
    async fn early_hints_reach_a_passed_request() {
        let origin = Origin::raw(EARLY_HINTS_THEN_OK).await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /account HTTP/1.1\r\nHost: example.test\r\nCookie: s=1\r\n\r\n")
            .await;
        let statuses = [
            conn.response(false).await.status,
            conn.response(false).await.status,
        ];
        assert_eq!(statuses, [103, 103]);
        let last = conn.response(false).await;
        assert_eq!((last.status, last.cache()), (200, "PASS"));
    }
}

support::modes! {
    async fn early_hints_reach_an_http2_client_in_order() {
        let origin = Origin::raw(EARLY_HINTS_THEN_OK).await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let mut h2 = H2Frames::connect(addr).await;
        let (mut response, _) = h2
            .open(&format!("http://{addr}/page"), &[])
            .await
            .expect("stream opened");
        let mut interim = Vec::new();
        let collect = async {
            while let Some(next) = poll_fn(|cx| response.poll_informational(cx)).await {
                interim.push(next.expect("an informational response"));
            }
        };
        tokio::time::timeout(support::EXCHANGE_LIMIT, collect)
            .await
            .expect("the final response in time");
        let hints: Vec<(u16, Option<&str>)> = interim
            .iter()
            .map(|r| {
                (
                    r.status().as_u16(),
                    r.headers().get("link").and_then(|v| v.to_str().ok()),
                )
            })
            .collect();
        assert_eq!(
            hints,
            [
                (103, Some("</a.css>; rel=preload")),
                (103, Some("</b.js>; rel=preload"))
            ]
        );
        let last = tokio::time::timeout(support::EXCHANGE_LIMIT, response)
            .await
            .expect("in time")
            .expect("the final response");
        assert_eq!(last.status(), 200);
        assert!(last.headers().get("link").is_none());
    }
}

support::modes! {
    async fn an_http10_client_gets_no_interim_response() {
        let origin = Origin::raw(EARLY_HINTS_THEN_OK).await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let mut conn = RawConn::connect(addr).await;
        conn.send("GET /old HTTP/1.0\r\nHost: example.test\r\n\r\n").await;
        let only = conn.response(false).await;
        assert_eq!(
            (only.status, only.body.as_slice()),
            (200, &b"final"[..]),
            "{only:?}"
        );
    }
}
