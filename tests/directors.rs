//! Many origins over real sockets: directors (round-robin, least-connections, consistent
//! hash, shard), health probes that take an origin out and put it back, grace while every origin is
//! down, and the retry of a refused connection. Three origins in each test answer with their
//! own name, so a response tells which one served it.

mod support;

use std::collections::HashMap;
use std::net::SocketAddr;

use std::time::Duration;

use edgecache_runtime::Running;
use http::StatusCode;
use support::{get, until, Origin, OriginReply};

/// An origin that answers with `name` (and `extra` applied to the reply).
async fn named(name: &'static str, extra: fn(OriginReply) -> OriginReply) -> Origin {
    Origin::start(move |_| extra(OriginReply::ok(name))).await
}

fn plain(reply: OriginReply) -> OriginReply {
    reply
}

async fn three() -> [Origin; 3] {
    [
        named("a", plain).await,
        named("b", plain).await,
        named("c", plain).await,
    ]
}

/// `backend a {...} backend b {...} backend c {...}` for the origins, with `extra` inside each.
fn backends(origins: &[&Origin], extra: &str) -> String {
    origins
        .iter()
        .zip(["a", "b", "c"])
        .map(|(origin, name)| {
            format!(
                "backend {name} {{ .host = \"127.0.0.1\"; .port = \"{}\"; {extra} }}\n",
                origin.addr.port()
            )
        })
        .collect()
}

async fn start(policy: &str) -> (Running, SocketAddr) {
    let path = support::write_policy("directors", policy);
    // No -b: the policy's backends are the origins.
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        policy: Some(path),
        ..Default::default()
    };
    let running = edgecache_runtime::start(config).await.expect("edgecache starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

async fn served_by(addr: SocketAddr, target: &str) -> String {
    let reply = get(addr, target, &[]).await;
    assert_eq!(reply.status, StatusCode::OK, "{target}: {}", reply.text());
    reply.text()
}

#[tokio::test]
async fn round_robin_spreads_requests_evenly() {
    let [a, b, c] = three().await;
    let policy = format!(
        "vcl 4.1;\nimport directors;\n{}
sub vcl_init {{ new rr = directors.round_robin(); rr.add_backend(a); rr.add_backend(b); rr.add_backend(c); }}
sub vcl_recv {{ set req.backend_hint = rr.backend(); return (pass); }}\n",
        backends(&[&a, &b, &c], "")
    );
    let (_proxy, addr) = start(&policy).await;
    for i in 0..30 {
        served_by(addr, &format!("/r{i}")).await;
    }
    assert_eq!([a.requests(), b.requests(), c.requests()], [10, 10, 10]);
}

#[tokio::test]
async fn least_connections_avoids_the_origin_holding_requests() {
    // `a` holds every request for a long time; `b` and `c` answer at once.
    let a = named("a", |reply| reply.delay(Duration::from_secs(30))).await;
    let (b, c) = (named("b", plain).await, named("c", plain).await);
    let policy = format!(
        "vcl 4.1;\nimport directors;\n{}
sub vcl_init {{ new lc = directors.least_connections(); lc.add_backend(a); lc.add_backend(b); lc.add_backend(c); }}
sub vcl_recv {{ set req.backend_hint = lc.backend(); return (pass); }}\n",
        backends(&[&a, &b, &c], "")
    );
    let (_proxy, addr) = start(&policy).await;
    let mut held = Vec::new();
    for i in 0..30 {
        let before = a.requests() + b.requests() + c.requests();
        let before_a = a.requests();
        let request = tokio::spawn(async move { get(addr, &format!("/l{i}"), &[]).await });
        // Wait for the request to reach an origin (the signal: an origin counted it).
        while a.requests() + b.requests() + c.requests() == before {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if a.requests() > before_a {
            held.push(request); // in flight at `a` for the rest of the test
        } else {
            assert_eq!(request.await.expect("request task").status, StatusCode::OK);
        }
    }
    assert!(
        a.requests() <= 1,
        "a holds a connection, so it is not picked again: {}",
        a.requests()
    );
    assert_eq!(b.requests() + c.requests(), 30 - a.requests());
    assert!(
        b.requests().abs_diff(c.requests()) <= 1,
        "round-robin among equals: b {} c {}",
        b.requests(),
        c.requests()
    );
    for request in held {
        request.abort();
    }
}

#[tokio::test]
async fn hash_director_keeps_each_url_on_one_origin_and_moves_only_a_removed_share() {
    consistent_director_keeps_urls_and_moves_only_a_removed_share(
        "new h = directors.hash(); h.add_backend(a, 1.0); h.add_backend(b, 1.0); h.add_backend(c, 1.0);",
        "new h = directors.hash(); h.add_backend(a, 1.0); h.add_backend(b, 1.0);",
        "h.backend(req.url)",
    )
    .await;
}

#[tokio::test]
async fn shard_director_keeps_each_url_on_one_origin_and_moves_only_a_removed_share() {
    consistent_director_keeps_urls_and_moves_only_a_removed_share(
        "new vd = directors.shard(); vd.add_backend(a); vd.add_backend(b); vd.add_backend(c); vd.reconfigure();",
        // Removed the way a cluster operator does it: the backend stays declared.
        "new vd = directors.shard(); vd.add_backend(a); vd.add_backend(b); vd.add_backend(c); \
         vd.remove_backend(c); vd.reconfigure();",
        "vd.backend(by=URL)",
    )
    .await;
}

/// With `all` (three members) in `vcl_init`, each of 300 URLs stays on one origin and `c` holds
/// about a third; after a reload with `two` (no `c`), exactly the URLs `c` held move.
async fn consistent_director_keeps_urls_and_moves_only_a_removed_share(all: &str, two: &str, pick: &str) {
    let [a, b, c] = three().await;
    let policy = |init: &str| {
        format!(
            "vcl 4.1;\nimport directors;\n{}
sub vcl_init {{ {init} }}
sub vcl_recv {{ set req.backend_hint = {pick}; return (pass); }}\n",
            backends(&[&a, &b, &c], "")
        )
    };
    let path = support::write_policy("directors", &policy(all));
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        policy: Some(path.clone()),
        watch_policy: false,
        ..Default::default()
    };
    let proxy = edgecache_runtime::start(config).await.expect("edgecache starts");
    let addr = proxy.listen_addrs()[0];

    let urls: Vec<String> = (0..300).map(|i| format!("/item/{i}")).collect();
    let mut before = HashMap::new();
    for url in &urls {
        before.insert(url.clone(), served_by(addr, url).await);
    }
    for url in urls.iter().take(50) {
        assert_eq!(
            served_by(addr, url).await,
            before[url],
            "{url} stays on one origin"
        );
    }
    let on_c = before.values().filter(|origin| *origin == "c").count();
    assert!(
        (60..=140).contains(&on_c),
        "c holds about a third of 300 URLs: {on_c}"
    );

    // `c` leaves the director: only the URLs it held may move.
    std::fs::write(&path, policy(two)).expect("edit");
    proxy.reload().await.expect("the edited policy loads");
    let mut moved = 0;
    for url in &urls {
        let now = served_by(addr, url).await;
        if now != before[url] {
            assert_eq!(
                before[url], "c",
                "{url} moved from {} to {now} though its origin stayed",
                before[url]
            );
            moved += 1;
        }
    }
    assert_eq!(moved, on_c, "every URL of the removed origin moved, nothing else");
    let fraction = moved as f64 / urls.len() as f64;
    assert!((0.2..=0.47).contains(&fraction), "moved fraction {fraction}");
}

#[tokio::test]
async fn a_probe_takes_a_failing_origin_out_and_puts_it_back() {
    let a = named("a", plain).await;
    let a_addr = a.addr;
    let policy = format!(
        "vcl 4.1;\nimport std;\n
probe health {{ .url = \"/health\"; .interval = 50ms; .timeout = 500ms; .window = 3; .threshold = 2; .initial = 2; }}
{}
sub vcl_recv {{
    if (!std.healthy(a)) {{ return (synth(503, \"a is sick\")); }}
    return (pass);
}}\n",
        backends(&[&a], ".probe = health;")
    );
    let (_proxy, addr) = start(&policy).await;
    assert_eq!(
        served_by(addr, "/").await,
        "a",
        "initial = threshold: healthy from the start"
    );
    a.stop().await;
    until("the probe marks a sick", async || {
        get(addr, "/", &[]).await.text().contains("a is sick")
    })
    .await;
    let a = named_at(a_addr).await;
    until("the probe marks a healthy again", async || {
        get(addr, "/", &[]).await.status == StatusCode::OK
    })
    .await;
    assert!(
        a.requests_for("/health") >= 2,
        "threshold good probes brought it back"
    );
}

async fn named_at(addr: SocketAddr) -> Origin {
    Origin::start_at(addr, |_| OriginReply::ok("a")).await
}

#[tokio::test]
async fn grace_serves_the_stale_object_while_every_origin_is_down() {
    let fresh = |reply: OriginReply| reply.cache_control("max-age=1");
    let (a, b) = (named("a", fresh).await, named("b", fresh).await);
    let policy = format!(
        "vcl 4.1;\nimport std;\nimport directors;\n
probe health {{ .url = \"/\"; .interval = 50ms; .timeout = 500ms; .window = 2; .threshold = 1; .initial = 1; }}
{}
sub vcl_init {{ new rr = directors.round_robin(); rr.add_backend(a); rr.add_backend(b); }}
sub vcl_recv {{ set req.backend_hint = rr.backend(); }}
sub vcl_backend_response {{ set beresp.grace = 1h; }}
sub vcl_backend_error {{ set beresp.http.X-Director-Healthy = std.healthy(bereq.backend); }}\n",
        backends(&[&a, &b], ".probe = health;")
    );
    let (proxy, addr) = start(&policy).await;
    let first = get(addr, "/page", &[]).await;
    assert_eq!(first.cache(), "MISS");
    support::eventually_stored(&proxy, 1).await;
    a.stop().await;
    b.stop().await;
    until("the probes (every 50 ms) mark both sick", async || {
        get(addr, "/probed", &[]).await.header("x-director-healthy") == Some("false")
    })
    .await;
    // Freshness (1 s) running out is the point of the test: the cache's clock moves past it.
    proxy.clock().advance(Duration::from_millis(1100));
    let stale = get(addr, "/page", &[]).await;
    assert_eq!(stale.status, StatusCode::OK);
    assert_eq!(stale.text(), first.text());
    assert_eq!(stale.cache(), "STALE");
    let never_cached = get(addr, "/other", &[]).await;
    assert_eq!(never_cached.status, StatusCode::SERVICE_UNAVAILABLE);
    // Both are sick: the fetch is not even tried.
    assert_eq!(never_cached.header("x-director-healthy"), Some("false"));
    assert!(
        never_cached.text().contains("503 Service Unavailable"),
        "the builtin vcl_backend_error page: {}",
        never_cached.text()
    );
}

#[tokio::test]
async fn a_refused_connection_is_retried_on_another_backend() {
    let b = named("b", plain).await;
    let closed = support::unused_port().await;
    let policy = format!(
        "vcl 4.1;\nimport directors;\n
backend down {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
backend b {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_init {{ new rr = directors.round_robin(); rr.add_backend(down); rr.add_backend(b); }}
sub vcl_recv {{ set req.backend_hint = rr.backend(); return (pass); }}\n",
        closed.port(),
        b.addr.port()
    );
    let (_proxy, addr) = start(&policy).await;
    for i in 0..10 {
        assert_eq!(served_by(addr, &format!("/x{i}")).await, "b");
    }
    assert_eq!(b.requests(), 10, "the five that picked `down` were retried on b");
}

#[tokio::test]
async fn a_director_inside_a_director_picks_among_its_own_members() {
    let [a, b, c] = three().await;
    let closed = support::unused_port().await;
    let policy = format!(
        "vcl 4.1;\nimport directors;\n{}backend down {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_init {{
    new pair = directors.round_robin(); pair.add_backend(a); pair.add_backend(b);
    new spare = directors.round_robin(); spare.add_backend(down); spare.add_backend(c);
    new site = directors.fallback(); site.add_backend(pair.backend()); site.add_backend(spare.backend());
}}
sub vcl_recv {{
    if (req.url ~ \"^/spare\") {{ set req.backend_hint = spare.backend(); }}
    else {{ set req.backend_hint = site.backend(); }}
    return (pass);
}}\n",
        backends(&[&a, &b, &c], ""),
        closed.port()
    );
    let (_proxy, addr) = start(&policy).await;
    for i in 0..6 {
        served_by(addr, &format!("/site{i}")).await;
    }
    assert_eq!(
        [a.requests(), b.requests(), c.requests()],
        [3, 3, 0],
        "fallback's first member, itself a round-robin, takes every request"
    );
    for i in 0..4 {
        assert_eq!(served_by(addr, &format!("/spare{i}")).await, "c");
    }
    assert_eq!(
        c.requests(),
        4,
        "picks of `down` were retried inside the inner director"
    );
}

// === the bundled examples ===

/// An example policy from `examples/` with its three backends' ports (8081-8083)
/// pointed at `origins`.
fn example(name: &str, origins: &[&Origin; 3]) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let mut text = std::fs::read_to_string(&path).expect("read the example");
    for (port, origin) in ["8081", "8082", "8083"].iter().zip(origins) {
        let declared = format!(".port = \"{port}\";");
        assert_eq!(
            text.matches(&declared).count(),
            1,
            "{name}: one backend on {port}"
        );
        text = text.replace(&declared, &format!(".port = \"{}\";", origin.addr.port()));
    }
    text
}

#[tokio::test]
async fn balanced_example_spreads_load_and_survives_a_dead_server() {
    let [a, b, c] = three().await;
    let (_proxy, addr) = start(&example("balanced.vcl", &[&a, &b, &c])).await;
    let mut served = HashMap::<String, usize>::new();
    for i in 0..30 {
        let reply = get(addr, &format!("/page/{i}"), &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let server = reply.header("x-served-by").expect("X-Served-By").to_string();
        *served.entry(server).or_default() += 1;
    }
    assert_eq!(served.len(), 3, "{served:?}");
    assert!(
        served.values().all(|n| *n == 10),
        "equal servers share evenly: {served:?}"
    );
    // A server that goes away is retried around at once, before its probe notices.
    b.stop().await;
    for i in 0..12 {
        let reply = get(addr, &format!("/after/{i}"), &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_ne!(
            reply.header("x-served-by"),
            Some("app2"),
            "{} {:?}",
            reply.text(),
            reply.headers
        );
    }
}

#[tokio::test]
async fn sharded_example_keeps_each_url_on_one_shard() {
    let [a, b, c] = three().await;
    let (_proxy, addr) = start(&example("sharded.vcl", &[&a, &b, &c])).await;
    let mut first = HashMap::new();
    for i in 0..60 {
        // The origins send no freshness information, so nothing is stored and every request
        // goes to its shard again.
        let url = format!("/obj/{i}");
        first.insert(url.clone(), served_by(addr, &url).await);
    }
    for (url, origin) in &first {
        assert_eq!(&served_by(addr, url).await, origin, "{url} stays on its shard");
    }
    let shards: std::collections::HashSet<_> = first.values().collect();
    assert_eq!(shards.len(), 3, "60 URLs land on all three shards");
}

#[tokio::test]
async fn vcl_backend_error_retry_is_bounded_by_max_retries() {
    // An origin that reads the request and hangs up without answering.
    let broken = Origin::raw("").await;
    let policy = |condition: &str| {
        format!(
            "vcl 4.1;
backend broken {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_recv {{ return (pass); }}
sub vcl_backend_error {{
    if ({condition}) {{ return (retry); }}
    set beresp.http.X-Retries = bereq.retries;
}}\n",
            broken.addr.port()
        )
    };
    let (_proxy, addr) = start(&policy("bereq.retries < 2")).await;
    let reply = get(addr, "/twice", &[]).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{}", reply.text());
    assert_eq!(
        reply.header("x-retries"),
        Some("2"),
        "the page is the one vcl_backend_error built after the last retry"
    );
    assert_eq!(
        broken.requests_for("/twice"),
        3,
        "the first attempt and two retries"
    );

    let (_proxy, addr) = start(&policy("true")).await;
    let reply = get(addr, "/always", &[]).await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "as Varnish: a retry past max_retries fails the fetch"
    );
    assert!(reply.text().contains("may not be sent again"), "{}", reply.text());
    assert_eq!(
        broken.requests_for("/always"),
        5,
        "one attempt and max_retries (4) retries"
    );
}

/// An origin that answers 503 to its first `failures` requests, then a cacheable 200.
async fn failing_first(failures: usize) -> Origin {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    Origin::start(move |_| {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < failures {
            OriginReply::with_status(503, "origin busy")
        } else {
            OriginReply::ok("fine").cache_control("max-age=60")
        }
    })
    .await
}

fn retry_on_5xx(origin: &Origin, condition: &str) -> String {
    format!(
        "vcl 4.1;
backend origin {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_recv {{ if (req.url ~ \"^/pass\") {{ return (pass); }} }}
sub vcl_backend_response {{
    if (beresp.status >= 500 && {condition}) {{ return (retry); }}
    set beresp.http.X-Retries = bereq.retries;
}}
sub vcl_backend_error {{
    set beresp.http.X-Retries = bereq.retries;
    synthetic(\"gave up\");
    return (deliver);
}}\n",
        origin.addr.port()
    )
}

#[tokio::test]
async fn vcl_backend_response_retry_fetches_again() {
    for target in ["/cached", "/pass"] {
        let origin = failing_first(2).await;
        let (_proxy, addr) = start(&retry_on_5xx(&origin, "bereq.retries < 3")).await;
        let reply = get(addr, target, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{target}: {}", reply.text());
        assert_eq!(reply.text(), "fine");
        assert_eq!(reply.header("x-retries"), Some("2"), "{target}");
        assert_eq!(origin.requests(), 3, "{target}: two 503s, then the answer");
    }
    let origin = failing_first(1).await;
    let (_proxy, addr) = start(&retry_on_5xx(&origin, "bereq.retries < 3")).await;
    get(addr, "/cached", &[]).await;
    let again = get(addr, "/cached", &[]).await;
    assert_eq!(again.cache(), "HIT", "the retried response was stored");
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn vcl_backend_response_retry_is_bounded_by_max_retries() {
    for target in ["/cached", "/pass"] {
        let origin = failing_first(usize::MAX).await;
        let (_proxy, addr) = start(&retry_on_5xx(&origin, "true")).await;
        let reply = get(addr, target, &[]).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{target}");
        assert_eq!(reply.text(), "gave up", "{target}: vcl_backend_error's page");
        assert_eq!(reply.header("x-retries"), Some("4"), "{target}");
        assert_eq!(
            origin.requests(),
            5,
            "{target}: one attempt and max_retries (4) retries"
        );
    }

    let origin = failing_first(usize::MAX).await;
    let (_proxy, addr) = start(&retry_on_5xx(&origin, "true")).await;
    let reply = support::send("POST", addr, "/pass-post", &[], "form=1").await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.text(), "gave up");
    assert_eq!(origin.requests(), 1, "a request with a body is not sent twice");
}

#[tokio::test]
async fn a_retry_runs_vcl_backend_fetch_again_which_may_pick_another_backend() {
    let primary = Origin::fixed(OriginReply::with_status(503, "primary busy")).await;
    let secondary = named("secondary", plain).await;
    let policy = format!(
        "vcl 4.1;
backend primary {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
backend secondary {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_backend_fetch {{
    set bereq.http.X-Attempt = bereq.retries;
    if (bereq.retries > 0) {{ set bereq.backend = secondary; }}
}}
sub vcl_backend_response {{
    if (beresp.status >= 500 && bereq.retries == 0) {{ return (retry); }}
}}\n",
        primary.addr.port(),
        secondary.addr.port()
    );
    let (_proxy, addr) = start(&policy).await;
    assert_eq!(served_by(addr, "/page").await, "secondary");
    assert_eq!(primary.requests(), 1);
    assert_eq!(primary.last().header("x-attempt"), Some("0"));
    assert_eq!(secondary.last().header("x-attempt"), Some("1"));
}

#[tokio::test]
async fn vcl_backend_response_retry_of_a_revalidation_revalidates_again() {
    // Stale on arrival (Age beyond max-age) but with a validator: stored for revalidation.
    let origin = Origin::start(|request| {
        if request.headers().get("if-none-match").is_some() {
            OriginReply::with_status(304, "")
                .header("etag", "\"v1\"")
                .header("x-retry-me", "1")
        } else {
            OriginReply::ok("v1")
                .header("etag", "\"v1\"")
                .header("age", "100")
                .cache_control("max-age=60")
        }
    })
    .await;
    let policy = format!(
        "vcl 4.1;
backend origin {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}
sub vcl_backend_response {{
    if (beresp.http.X-Retry-Me && bereq.retries == 0) {{ return (retry); }}
    set beresp.http.X-Retries = bereq.retries;
    set beresp.grace = 0s;
    set beresp.keep = 1h;
    return (deliver);
}}\n",
        origin.addr.port()
    );
    let (_proxy, addr) = start(&policy).await;
    assert_eq!(get(addr, "/doc", &[]).await.text(), "v1");
    let revalidated = get(addr, "/doc", &[]).await;
    assert_eq!(revalidated.status, StatusCode::OK);
    assert_eq!(revalidated.text(), "v1");
    assert_eq!(revalidated.header("x-retries"), Some("1"));
    let conditional = origin
        .log()
        .iter()
        .filter(|seen| seen.header("if-none-match").is_some())
        .count();
    assert_eq!(conditional, 2, "the 304 was retried once");
}

#[tokio::test]
async fn host_header_is_sent_when_the_client_sent_no_host() {
    let origin = named("a", plain).await;
    let policy = format!(
        "vcl 4.1;\n{}sub vcl_recv {{ return (pass); }}\n",
        backends(&[&origin], ".host_header = \"www.example.com\";")
    );
    let (_proxy, addr) = start(&policy).await;
    let mut conn = support::RawConn::connect(addr).await;
    conn.send("GET /no-host HTTP/1.0\r\n\r\n").await;
    assert_eq!(conn.response(false).await.status, 200);
    assert_eq!(origin.last().header("host"), Some("www.example.com"));

    get(addr, "/with-host", &[("host", "site.test")]).await;
    assert_eq!(
        origin.last().header("host"),
        Some("site.test"),
        "a client's Host is kept"
    );
}

#[tokio::test]
async fn bereq_backend_set_in_vcl_backend_fetch_picks_the_origin() {
    let [a, b, c] = three().await;
    let policy = format!(
        "vcl 4.1;\nimport directors;\n{}
sub vcl_init {{ new rr = directors.round_robin(); rr.add_backend(b); rr.add_backend(c); }}
sub vcl_recv {{ return (pass); }}
sub vcl_backend_fetch {{
    if (bereq.url ~ \"^/spread\") {{ set bereq.backend = rr.backend(); }}
    elsif (bereq.url ~ \"^/b\") {{ set bereq.backend = b; }}
}}\n",
        backends(&[&a, &b, &c], "")
    );
    let (_proxy, addr) = start(&policy).await;
    assert_eq!(
        served_by(addr, "/a").await,
        "a",
        "the default backend (first declared)"
    );
    assert_eq!(served_by(addr, "/b").await, "b");
    for i in 0..4 {
        served_by(addr, &format!("/spread/{i}")).await;
    }
    assert_eq!(
        (a.requests(), b.requests(), c.requests()),
        (1, 3, 2),
        "the director picked in vcl_backend_fetch"
    );
}
