//! ESI: pages stored with `beresp.do_esi` are assembled at delivery from their stored bytes
//! and their includes, each include a request of its own through the policy and the cache.
//! The policy is `tests/policies/esi.vcl`: the origin marks ESI pages with `x-esi: 1` and
//! echoes what the policy saw of each request (`req.esi_level`, `req_top.url`).

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use reload_support::admin_json;
use support::{
    get, keep_alive_connection, start_proxy, try_get, write_policy, Origin, OriginReply, EXCHANGE_LIMIT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const POLICY: &str = include_str!("policies/esi.vcl");

/// An ESI page: `x-esi: 1` makes the policy set `beresp.do_esi`.
fn page(body: &str) -> OriginReply {
    OriginReply::ok(body.to_string())
        .header("x-esi", "1")
        .header("content-type", "text/html")
        .cache_control("max-age=3600")
}

/// edgecache with the ESI policy (plus `extra` VCL) in front of `origin`; `tweak` adjusts the
/// configuration.
async fn start(
    origin: &Origin,
    extra: &str,
    tweak: impl FnOnce(&mut edgecache_runtime::Config),
) -> (edgecache_runtime::Running, SocketAddr) {
    let path = write_policy("esi", &format!("{POLICY}\n{extra}"));
    start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        tweak(config);
    })
    .await
}

/// `/stats` of the admin API.
async fn stats(proxy: &edgecache_runtime::Running) -> serde_json::Value {
    admin_json(proxy, "/stats").await
}

/// The origin of most tests: a page with three includes, a fragment cached for an hour, one
/// the policy passes, one that is missing (404), and the same page without `onerror`.
async fn three_include_origin() -> (Origin, Arc<AtomicUsize>) {
    let passes = Arc::new(AtomicUsize::new(0));
    let counter = passes.clone();
    let origin = Origin::start(move |request| match request.uri().path() {
        "/page" => page(concat!(
            "<html>A",
            r#"<esi:include src="/cached"/>"#,
            "B",
            r#"<esi:include src="passed"/>"#,
            "C",
            r#"<esi:include src="/missing" onerror="continue"/>"#,
            "D<esi:remove>no ESI here</esi:remove><!--esi E-->",
            r#"<esi:comment text="left out"/></html>"#,
        )),
        "/strict" => page(r#"<html>A<esi:include src="/cached"/>B<esi:include src="/missing"/>C</html>"#),
        "/cached" => OriginReply::ok("[cached]").cache_control("max-age=3600"),
        "/passed" => {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            OriginReply::ok(format!("[passed #{n}]"))
        }
        _ => OriginReply::with_status(404, "not here"),
    })
    .await;
    (origin, passes)
}

#[tokio::test]
async fn page_with_three_includes_is_assembled_byte_exact_and_fragments_keep_their_own_ttl() {
    let (origin, _) = three_include_origin().await;
    let (proxy, addr) = start(&origin, "", |_| {}).await;

    let first = get(addr, "/page", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "<html>A[cached]B[passed #1]CD E</html>");
    assert_eq!(
        first.header("content-length"),
        None,
        "the assembled length is not the stored one"
    );
    assert_eq!(first.header("transfer-encoding"), Some("chunked"));
    assert_eq!(first.header("x-can-esi"), Some("true"));

    let second = get(addr, "/page", &[]).await;
    assert_eq!(second.text(), "<html>A[cached]B[passed #2]CD E</html>");
    assert_eq!(second.cache(), "HIT", "the page itself is stored");
    assert_eq!(
        origin.requests_for("/page"),
        1,
        "the page is parsed once, when stored"
    );
    assert_eq!(
        origin.requests_for("/cached"),
        1,
        "the hour-long fragment is not fetched again"
    );
    assert_eq!(
        origin.requests_for("/passed"),
        2,
        "the passed fragment is fetched for each page"
    );
    assert_eq!(
        origin.requests_for("/missing"),
        2,
        "a 404 is not stored by the builtin policy"
    );

    let stats = stats(&proxy).await;
    assert_eq!(stats["esi_includes"], 6, "{stats}");
    assert_eq!(
        stats["esi_include_failures"], 2,
        "the 404 with onerror=continue, twice"
    );
}

#[tokio::test]
async fn failing_include_without_onerror_cuts_the_page_short() {
    let (origin, _) = three_include_origin().await;
    let (_proxy, addr) = start(&origin, "", |_| {}).await;

    let cut = try_get(addr, "/strict", &[]).await;
    let error = cut.expect_err("a page whose include failed without onerror=continue must not end cleanly");
    assert!(error.contains("body failed"), "{error}");

    // What was sent before the failing include did reach the client, on a raw connection.
    let mut raw = support::RawConn::connect(addr).await;
    raw.send("GET /strict HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut received = Vec::new();
    let read = tokio::time::timeout(EXCHANGE_LIMIT, async {
        let mut stream = raw.into_stream();
        let _ = stream.read_to_end(&mut received).await;
    });
    read.await.expect("the proxy closes the connection");
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("<html>A") && text.contains("[cached]"), "{text}");
    assert!(
        !text.contains("C</html>"),
        "nothing after the failed include: {text}"
    );
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "no last chunk: the client can tell the page is incomplete"
    );
}

#[tokio::test]
async fn nested_includes_stop_at_max_esi_depth() {
    let origin = Origin::start(|request| {
        let depth: u32 = request
            .uri()
            .path()
            .trim_start_matches("/nest/")
            .parse()
            .unwrap_or(0);
        let level = request
            .headers()
            .get("x-esi-level")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        page(&format!(
            r#"<n{depth} level={level}><esi:include src="/nest/{}" onerror="continue"/></n{depth}>"#,
            depth + 1
        ))
    })
    .await;
    let (proxy, addr) = start(&origin, "", |config| config.max_esi_depth = 3).await;

    let nested = get(addr, "/nest/0", &[]).await;
    assert_eq!(
        nested.text(),
        "<n0 level=0><n1 level=1><n2 level=2><n3 level=3></n3></n2></n1></n0>",
        "the page at level 3 (--max-esi-depth 3) makes no include"
    );
    assert_eq!(origin.requests_for("/nest/4"), 0);
    assert_eq!(stats(&proxy).await["esi_include_failures"], 1);
}

#[tokio::test]
async fn default_max_esi_depth_is_varnish_five() {
    assert_eq!(edgecache_runtime::Config::default().max_esi_depth, 5);
}

#[tokio::test]
async fn include_cycle_is_left_out_not_followed() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/a" => page(r#"<a><esi:include src="/b" onerror="continue"/></a>"#),
        "/b" => page(
            r#"<b><esi:include src="/a" onerror="continue"/><esi:include src="/b" onerror="continue"/></b>"#,
        ),
        _ => OriginReply::with_status(404, ""),
    })
    .await;
    let (proxy, addr) = start(&origin, "", |_| {}).await;

    let page = get(addr, "/a", &[]).await;
    assert_eq!(page.text(), "<a><b></b></a>");
    assert_eq!(
        origin.requests_for("/a"),
        1,
        "the cycle back to /a is not requested"
    );
    assert_eq!(origin.requests_for("/b"), 1);
    assert_eq!(stats(&proxy).await["esi_include_failures"], 2);
}

#[tokio::test]
async fn esi_level_and_req_top_reach_the_policy_of_each_include() {
    let origin = Origin::start(|request| {
        let seen = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string()
        };
        let what = format!(
            "({} level={} top={} esi={})",
            request.uri().path(),
            seen("x-esi-level"),
            seen("x-top-url"),
            seen("x-esi-request")
        );
        match request.uri().path() {
            "/top" => page(&format!(r#"<t>{what}<esi:include src="/mid"/></t>"#)),
            "/mid" => page(&format!(r#"<m>{what}<esi:include src="/leaf?x=1"/></m>"#)),
            _ => OriginReply::ok(what).cache_control("max-age=60"),
        }
    })
    .await;
    // A policy that sends level-2 requests elsewhere: req.esi_level is usable in conditions.
    let extra = r#"
sub vcl_recv {
    if (req.esi_level == 2) {
        set req.url = req.url + "&deep=1";
    }
}
"#;
    let (_proxy, addr) = start(&origin, extra, |_| {}).await;

    let top = get(addr, "/top", &[]).await;
    assert_eq!(
        top.text(),
        "<t>(/top level=0 top=/top esi=true)\
         <m>(/mid level=1 top=/top esi=true)\
         (/leaf level=2 top=/top esi=true)</m></t>"
    );
    assert_eq!(
        origin.requests_for("/leaf?x=1&deep=1"),
        1,
        "the level-2 include saw req.esi_level == 2"
    );
}

#[tokio::test]
async fn req_esi_false_and_resp_do_esi_false_send_the_page_unassembled() {
    let body = r#"<p><esi:include src="/f"/></p>"#;
    let origin = Origin::start(move |request| match request.uri().path() {
        "/f" => OriginReply::ok("F"),
        _ => page(body),
    })
    .await;
    let extra = r#"
sub vcl_recv {
    if (req.url ~ "raw-req") { set req.esi = false; }
}
sub vcl_deliver {
    if (req.url ~ "raw-resp") { set resp.do_esi = false; }
}
"#;
    let (_proxy, addr) = start(&origin, extra, |_| {}).await;

    assert_eq!(get(addr, "/assembled", &[]).await.text(), "<p>F</p>");
    assert_eq!(get(addr, "/raw-req", &[]).await.text(), body);
    assert_eq!(get(addr, "/raw-resp", &[]).await.text(), body);
}

#[tokio::test]
async fn esi_page_answers_conditionals_and_ranges_with_the_whole_page() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/f" => OriginReply::ok("fragment"),
        _ => page(r#"<p><esi:include src="/f"/></p>"#).header("etag", "\"v1\""),
    })
    .await;
    let (_proxy, addr) = start(&origin, "", |_| {}).await;
    assert_eq!(get(addr, "/p", &[]).await.text(), "<p>fragment</p>");

    let conditional = get(addr, "/p", &[("if-none-match", "\"v1\"")]).await;
    assert_eq!(
        conditional.status, 200,
        "the page's ETag says nothing of its fragments"
    );
    assert_eq!(conditional.text(), "<p>fragment</p>");

    let ranged = get(addr, "/p", &[("range", "bytes=0-1")]).await;
    assert_eq!(
        ranged.status, 200,
        "no range is cut from a page assembled while it is sent"
    );
    assert_eq!(ranged.text(), "<p>fragment</p>");
    assert_eq!(ranged.header("content-range"), None);
}

/// An origin that holds its answer until `release` fires: a fragment that is slow for as long
/// as the test wants, without a sleep.
async fn held_origin(release: oneshot::Receiver<()>, body: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("the proxy connects");
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.expect("read the request");
            assert!(n > 0, "the proxy closed before sending a request");
            head.extend_from_slice(&buf[..n]);
        }
        let _ = release.await;
        let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        let _ = stream.write_all(response.as_bytes()).await;
    });
    addr
}

#[tokio::test]
async fn first_bytes_reach_the_client_before_a_slow_include_answers() {
    let (release, held) = oneshot::channel();
    let slow = held_origin(held, "[slow]").await;
    let origin =
        Origin::start(|_| page(r#"<html><head>first bytes</head><esi:include src="/slow"/></html>"#)).await;
    let extra = format!(
        r#"
backend slow {{ .host = "127.0.0.1"; .port = "{}"; }}
sub vcl_recv {{
    if (req.url == "/slow") {{
        set req.backend_hint = slow;
        return (pass);
    }}
}}
"#,
        slow.port()
    );
    // The slow backend is declared after the default one: the policy's first backend stays the
    // origin.
    let policy = format!(
        "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n{}\n{extra}",
        origin.addr.port(),
        POLICY.trim_start_matches("vcl 4.1;")
    );
    let path = write_policy("esi-slow", &policy);
    let (_proxy, addr) = start_proxy(origin.addr, |config| config.policy = Some(path)).await;

    let mut connection = keep_alive_connection(addr).await;
    let request = Request::get("/page")
        .header("host", "x")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let exchange = async {
        let response = connection.send_request(request).await.expect("a response head");
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut received = Vec::new();
        while received.len() < "<html><head>first bytes</head>".len() {
            let frame = body.frame().await.expect("more body").expect("a body frame");
            received.extend_from_slice(frame.data_ref().expect("data"));
        }
        assert_eq!(
            received, b"<html><head>first bytes</head>",
            "the page's bytes before the include"
        );
        // Only now may the slow fragment answer.
        release.send(()).expect("the slow origin waits");
        while let Some(frame) = body.frame().await {
            received.extend_from_slice(frame.expect("a body frame").data_ref().expect("data"));
        }
        String::from_utf8(received).expect("text")
    };
    let page = tokio::time::timeout(EXCHANGE_LIMIT, exchange)
        .await
        .expect("the page completes");
    assert_eq!(page, "<html><head>first bytes</head>[slow]</html>");
}

#[tokio::test]
async fn h2_client_gets_the_assembled_page_in_data_frames() {
    let (origin, _) = three_include_origin().await;
    let (_proxy, addr) = start(&origin, "", |_| {}).await;

    let mut h2 = support::H2c::connect(addr).await;
    let page = h2.get("/page", &[]).await;
    assert_eq!(page.version, http::Version::HTTP_2);
    assert_eq!(page.text(), "<html>A[cached]B[passed #1]CD E</html>");
    assert_eq!(page.header("content-length"), None);
    let fragment = origin
        .log()
        .into_iter()
        .find(|seen| seen.target == "/cached")
        .expect("fetched");
    assert_eq!(
        fragment.header("host"),
        Some(addr.to_string().as_str()),
        "an h2 page's :authority is its includes' Host"
    );
}

#[tokio::test]
async fn pages_that_are_not_stored_are_assembled_too() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/fragment" => OriginReply::ok("[fragment]").cache_control("max-age=3600"),
        // Passed in vcl_recv (`^/passed`), and refused by the builtin vcl_backend_response.
        "/passed-page" => page(r#"<p><esi:include src="/fragment"/></p>"#),
        _ => page(r#"<q><esi:include src="/fragment"/></q>"#).cache_control("private"),
    })
    .await;
    let (_proxy, addr) = start(&origin, "", |_| {}).await;

    for _ in 0..2 {
        let passed = get(addr, "/passed-page", &[]).await;
        assert_eq!(
            (passed.cache(), passed.text().as_str()),
            ("PASS", "<p>[fragment]</p>")
        );
        let private = get(addr, "/private", &[]).await;
        assert_eq!(
            (private.cache(), private.text().as_str()),
            ("PASS", "<q>[fragment]</q>")
        );
    }
    assert_eq!(origin.requests_for("/private"), 2, "not stored");
    assert_eq!(origin.requests_for("/fragment"), 1, "its fragment is");
}

fn gzipped(text: &str) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).expect("compress");
    encoder.finish().expect("compress")
}

fn gunzipped(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .expect("a gzip body");
    text
}

/// An origin that answers gzip when asked for it (and marks it so), identity otherwise.
fn gzip_when_asked(request: &Request<Bytes>, reply: OriginReply) -> OriginReply {
    let asked = request
        .headers()
        .get("accept-encoding")
        .is_some_and(|value| value.as_bytes() == b"gzip");
    if !asked {
        return reply.header("vary", "Accept-Encoding");
    }
    let text = String::from_utf8(reply.body.to_vec()).expect("text");
    OriginReply {
        body: gzipped(&text).into(),
        ..reply
    }
    .header("content-encoding", "gzip")
    .header("vary", "Accept-Encoding")
}

#[tokio::test]
async fn gzip_origin_esi_page_is_parsed_and_served_gzip_or_identity() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/page" => gzip_when_asked(
            request,
            page(r#"<p><esi:include src="/f"/>|<esi:include src="/always-gzip"/></p>"#),
        ),
        "/f" => gzip_when_asked(request, OriginReply::ok("fragment").cache_control("max-age=60")),
        // A fragment the origin compresses whatever it is asked: decoded into the page.
        _ => OriginReply::ok(gzipped("always gzip"))
            .header("content-encoding", "gzip")
            .cache_control("max-age=60"),
    })
    .await;
    let (_proxy, addr) = start(&origin, "", |_| {}).await;

    for _ in 0..2 {
        let gzip = get(addr, "/page", &[("accept-encoding", "br, gzip")]).await;
        assert_eq!(gzip.header("content-encoding"), Some("gzip"));
        assert_eq!(gzip.header("vary"), Some("Accept-Encoding"));
        assert_eq!(gunzipped(&gzip.body), "<p>fragment|always gzip</p>");

        let identity = get(addr, "/page", &[]).await;
        assert_eq!(identity.header("content-encoding"), None);
        assert_eq!(identity.text(), "<p>fragment|always gzip</p>");
    }
    assert_eq!(
        origin.requests_for("/page"),
        2,
        "one variant per coding, each parsed once"
    );
    let gzip_asked = origin
        .log()
        .into_iter()
        .filter(|seen| seen.target == "/page" && seen.header("accept-encoding") == Some("gzip"))
        .count();
    assert_eq!(
        gzip_asked, 1,
        "the gzip variant came gzip from the origin and was parsed decompressed"
    );
    assert_eq!(
        origin.requests_for("/f"),
        1,
        "includes ask without Accept-Encoding: one variant"
    );
}

#[tokio::test]
async fn do_gzip_stores_compressed_and_do_gunzip_stores_identity() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/gzip-me" => OriginReply::ok("plain text, compressed here").cache_control("max-age=60"),
        _ => OriginReply::ok(gzipped("compressed text, stored plain"))
            .header("content-encoding", "gzip")
            .cache_control("max-age=60"),
    })
    .await;
    let extra = r#"
sub vcl_backend_response {
    if (bereq.url == "/gzip-me") { set beresp.do_gzip = true; }
    if (bereq.url == "/gunzip-me") { set beresp.do_gunzip = true; }
}
"#;
    let (_proxy, addr) = start(&origin, extra, |_| {}).await;

    let gzip = get(addr, "/gzip-me", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    assert_eq!(gzip.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gunzipped(&gzip.body), "plain text, compressed here");
    let hit = get(addr, "/gzip-me", &[("accept-encoding", "gzip")]).await;
    assert_eq!(
        (hit.cache(), gunzipped(&hit.body).as_str()),
        ("HIT", "plain text, compressed here")
    );
    let identity = get(addr, "/gzip-me", &[]).await;
    assert_eq!(
        identity.header("content-encoding"),
        None,
        "decoded for a client without gzip"
    );
    assert_eq!(identity.text(), "plain text, compressed here");

    for accept in [&[("accept-encoding", "gzip")][..], &[]] {
        let plain = get(addr, "/gunzip-me", accept).await;
        assert_eq!(plain.header("content-encoding"), None);
        assert_eq!(plain.text(), "compressed text, stored plain");
    }
    assert_eq!(
        origin.requests_for("/gunzip-me"),
        1,
        "stored once, decompressed, for everyone"
    );
}
