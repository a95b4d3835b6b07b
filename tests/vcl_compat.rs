//! Varnish VCL that edgecache runs as Varnish 7.7 does (issue 17 #2), over real sockets: a
//! policy written for the test, edgecache running it, a counting origin behind it.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use reload_support::{admin, admin_json};
use support::{shared_clock, start_proxy, start_with_policy, CapturedLog, Client, Origin, OriginReply};

// === return (pass(DURATION)) in vcl_backend_response ===

#[tokio::test]
async fn pass_with_duration_makes_the_key_hit_for_pass_for_that_long() {
    // Only the first response asks to be passed; the ones after are cacheable, and hit-for-pass
    // (unlike `beresp.uncacheable`'s hit-for-miss) keeps them out of the store until it expires.
    static SERVED: AtomicUsize = AtomicUsize::new(0);
    let origin = Origin::start(|_: &http::Request<Bytes>| {
        let n = SERVED.fetch_add(1, Ordering::SeqCst);
        let reply = OriginReply::ok(format!("#{n}")).cache_control("max-age=600");
        if n == 0 {
            reply.header("x-pass", "yes")
        } else {
            reply
        }
    })
    .await;
    let (proxy, addr) = start_with_policy(
        "hit_for_pass",
        r#"vcl 4.1;
sub vcl_backend_response {
    if (beresp.http.x-pass) {
        return (pass(1s));
    }
}
sub vcl_deliver {
    set resp.http.x-hitpass = req.is_hitpass;
    set resp.http.x-top = req_top.url;
}
"#,
        &origin,
    )
    .await;
    let clock = shared_clock(&proxy, &origin);
    let client = Client::new();

    let first = client.get(addr, "/page", &[]).await;
    assert_eq!((first.status.as_u16(), first.text().as_str()), (200, "#0"));
    for expected in ["#1", "#2"] {
        let passed = client.get(addr, "/page", &[]).await;
        assert_eq!(passed.cache(), "PASS");
        assert_eq!(passed.text(), expected, "each request goes to the origin");
        assert_eq!(passed.header("x-hitpass"), Some("true"));
        assert_eq!(
            passed.header("x-top"),
            Some("/page"),
            "req_top is req without ESI"
        );
    }
    assert_eq!(origin.requests_for("/page"), 3);

    // The mark's duration is what this test is about: let it run out.
    clock.advance(Duration::from_millis(1100));
    let refetched = client.get(addr, "/page", &[]).await;
    assert_eq!((refetched.cache(), refetched.text().as_str()), ("MISS", "#3"));
    assert_eq!(refetched.header("x-hitpass"), Some("false"));
    let hit = client.get(addr, "/page", &[]).await;
    assert_eq!((hit.cache(), hit.text().as_str()), ("HIT", "#3"));
    assert_eq!(origin.requests_for("/page"), 4);
}

// === probe default ===

#[tokio::test]
async fn probe_default_marks_a_backend_named_default_sick() {
    let origin = Origin::start(|request: &http::Request<Bytes>| match request.uri().path() {
        "/health" => OriginReply::with_status(500, "down"),
        _ => OriginReply::ok("up"),
    })
    .await;
    let policy = format!(
        "vcl 4.1;
probe default {{ .url = \"/health\"; .interval = 50ms; .timeout = 500ms; .window = 2; .threshold = 1; .initial = 1; }}
backend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_recv {{ return (pass); }}
",
        origin.addr.port()
    );
    let (_proxy, addr) = start_with_policy("probe_default", &policy, &origin).await;
    let client = Client::new();
    assert_eq!(
        client.get(addr, "/", &[]).await.text(),
        "up",
        "initial = threshold: healthy"
    );
    // The probe's next failing run is the event.
    support::until("the default probe marks the backend sick", async || {
        client.get(addr, "/", &[]).await.status == http::StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    assert!(origin.requests_for("/health") >= 1);
}

// === req.xid / bereq.xid ===

/// The number after `XID: ` on a builtin error page.
fn page_xid(page: &str) -> &str {
    let start = page.find("XID: ").expect("the page shows an XID") + "XID: ".len();
    let digits = page[start..]
        .find(|c: char| !c.is_ascii_digit())
        .expect("text after the XID");
    &page[start..start + digits]
}

#[tokio::test]
async fn error_pages_show_the_xid_of_the_access_log_line() {
    let log = CapturedLog::default();
    let _guard = log.install("edgecache::access=info");
    // An origin that is not listening: the fetch fails, `vcl_backend_error` writes the page.
    let down = support::unused_port().await;
    let policy = format!(
        "vcl 4.1;
backend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; .connect_timeout = 1s; }}
sub vcl_recv {{ if (req.url == \"/denied\") {{ return (synth(503)); }} }}
",
        down.port()
    );
    let path = support::write_policy("xid", &policy);
    let (_proxy, addr) = start_proxy(down, |config| config.policy = Some(path)).await;
    let client = Client::new();

    let mut seen = Vec::new();
    for target in ["/denied", "/fetched"] {
        let page = client.get(addr, target, &[]).await;
        assert_eq!(page.status, http::StatusCode::SERVICE_UNAVAILABLE, "{target}");
        let xid = page_xid(&page.text()).to_string();
        let line = log
            .text()
            .lines()
            .find(|line| line.contains(&format!("url={target} ")))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no access-log line for {target}: {}", log.text()));
        assert!(
            line.contains(&format!("xid={xid}")),
            "{target}: page XID {xid}, log line {line}"
        );
        seen.push(xid);
    }
    assert_ne!(seen[0], seen[1], "each request has its own id");
}

// === builtin subs ===

#[tokio::test]
async fn a_user_vcl_req_cookie_returning_hash_caches_a_request_with_that_cookie() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=600")).await;
    let (_proxy, addr) = start_with_policy(
        "req_cookie",
        r#"vcl 4.1;
sub vcl_req_cookie {
    if (req.http.cookie ~ "^consent=") {
        return (hash);
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let consent = [("cookie", "consent=yes")];
    assert_eq!(client.get(addr, "/", &consent).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/", &consent).await.cache(), "HIT");
    // The builtin's decision stays for other cookies: passed.
    assert_eq!(
        client.get(addr, "/", &[("cookie", "session=1")]).await.cache(),
        "PASS"
    );
    assert_eq!(origin.requests(), 2);
}

// === PCRE2 limits ===

#[tokio::test]
async fn a_regex_that_hits_the_pcre_limit_is_no_match_and_counted_in_stats_and_metrics() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    // Nested quantifiers with a look-behind (PCRE2 only): exponential backtracking on a URL
    // that almost matches.
    let path = support::write_policy(
        "pcre_limit",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/(a+)+(?<!b)$") {
        return (synth(200, "matched"));
    }
    return (synth(404, "no match"));
}
"#,
    );
    let (running, addr) = start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    let before = admin_json(&running, "/stats").await["pcre_limit_hits"]
        .as_u64()
        .expect("pcre_limit_hits in /stats");
    let target = format!("/{}!", "a".repeat(40));
    assert_eq!(Client::new().get(addr, &target, &[]).await.status.as_u16(), 404);
    let after = admin_json(&running, "/stats").await["pcre_limit_hits"]
        .as_u64()
        .unwrap();
    assert!(after > before, "{before} -> {after}");
    let metrics = admin(&running, "GET", "/metrics", "").await.body;
    let line = metrics
        .lines()
        .find(|line| line.starts_with("edgecache_pcre_limit_hits_total "))
        .unwrap_or_else(|| panic!("no counter: {metrics}"));
    let counted: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(counted >= after, "{line}");
}

// === local.socket / local.endpoint / server.hostname ===

#[tokio::test]
async fn local_socket_and_endpoint_name_the_listener_the_request_came_in_on() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "listener_names",
        r#"vcl 4.1;
sub vcl_recv {
    return (synth(200, local.socket + " " + local.endpoint + " " + server.hostname));
}
"#,
        &origin,
    )
    .await;
    let page = Client::new().get(addr, "/", &[]).await;
    let reason = page.text();
    let mut words = reason
        .split("<h1>Error 200 ")
        .nth(1)
        .expect("the builtin page")
        .split(' ');
    assert_eq!(words.next(), Some("a0"), "{reason}");
    assert_eq!(words.next(), Some(addr.to_string().as_str()), "{reason}");
    assert!(words.next().is_some_and(|host| !host.is_empty()), "{reason}");
}
