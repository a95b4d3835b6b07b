//! Each VCL phase and action over real sockets: a policy written for the test, edgecache
//! running it, a counting origin behind it.
//!
//! Policies here declare no backend, so the origin is `Config.backend` (what `-b` sets), except
//! where a test declares one on purpose.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use support::{
    eventually_stored, send, shared_clock, start_proxy, start_with_policy, Client, Origin, OriginReply,
};

// === helpers ===

/// An origin whose bodies change with every response, so a cached body is recognisable.
fn counting_body(request: &http::Request<Bytes>) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    format!("{target} #{}", N.fetch_add(1, Ordering::Relaxed))
}

fn cacheable(request: &http::Request<Bytes>) -> OriginReply {
    OriginReply::ok(counting_body(request)).cache_control("max-age=600")
}

// === vcl_backend_response: beresp.ttl ===

#[tokio::test]
async fn beresp_ttl_sets_a_per_url_ttl() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "per_url_ttl",
        r#"vcl 4.1;
sub vcl_backend_response {
    if (bereq.url ~ "^/short") {
        set beresp.ttl = 1s;
    } elsif (bereq.url ~ "^/none") {
        set beresp.ttl = 1h;
    }
}
"#,
        &origin,
    )
    .await;
    let clock = shared_clock(&proxy, &origin);
    let client = Client::new();

    // /short: the origin's max-age=600 is overridden by 1 s.
    assert_eq!(client.get(addr, "/short", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/short", &[]).await.cache(), "HIT");
    // /long keeps the origin's 600 s.
    assert_eq!(client.get(addr, "/long", &[]).await.cache(), "MISS");
    clock.advance(Duration::from_millis(2100));
    assert_eq!(
        client.get(addr, "/short", &[]).await.cache(),
        "MISS",
        "1 s ttl is over"
    );
    assert_eq!(origin.requests_for("/short"), 2);
    assert_eq!(client.get(addr, "/long", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests_for("/long"), 1);
}

#[tokio::test]
async fn beresp_ttl_makes_a_response_without_freshness_cacheable() {
    let origin = Origin::start(|request| OriginReply::ok(counting_body(request))).await;
    let (_proxy, addr) = start_with_policy(
        "ttl_no_freshness",
        r#"vcl 4.1;
sub vcl_backend_response {
    if (bereq.url ~ "^/none") {
        set beresp.ttl = 1h;
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let first = client.get(addr, "/none", &[]).await;
    assert_eq!(first.cache(), "MISS");
    let second = client.get(addr, "/none", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.text(), first.text());
    assert_eq!(origin.requests_for("/none"), 1);
    // Without the policy's TTL the same response is not stored (builtin: ttl 0 → hit-for-miss).
    assert_eq!(client.get(addr, "/other", &[]).await.cache(), "PASS");
    assert_eq!(client.get(addr, "/other", &[]).await.cache(), "PASS");
    assert_eq!(origin.requests_for("/other"), 2);
}

// === vcl_recv: return (pass) ===

#[tokio::test]
async fn recv_return_pass_bypasses_the_cache() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "recv_pass",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/account/") {
        return (pass);
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    for _ in 0..3 {
        let reply = client.get(addr, "/account/me", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.cache(), "PASS");
    }
    assert_eq!(origin.requests_for("/account/me"), 3);
    // Other URLs fall through to the builtin and are cached.
    assert_eq!(client.get(addr, "/news", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/news", &[]).await.cache(), "HIT");
    eventually_stored(&proxy, 1).await;
    assert_eq!(proxy.cache_usage().keys, 1, "the passes stored nothing");
}

// === vcl_recv: return (synth(...)) and vcl_synth ===

const SYNTH_POLICY: &str = r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/admin") {
        return (synth(403, "Forbidden"));
    }
    if (req.url ~ "^/gone") {
        return (synth(410));
    }
}

sub vcl_synth {
    if (resp.status == 403) {
        set resp.http.Content-Type = "text/plain; charset=utf-8";
        set resp.http.X-Denied-By = "policy";
        synthetic("Access denied: " + resp.reason + " (" + req.url + ")");
        return (deliver);
    }
}
"#;

#[tokio::test]
async fn recv_synth_403_with_a_custom_vcl_synth_page() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy("synth_403", SYNTH_POLICY, &origin).await;
    let reply = Client::new().get(addr, "/admin/users", &[]).await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.text(), "Access denied: Forbidden (/admin/users)");
    assert_eq!(reply.header("x-denied-by"), Some("policy"));
    assert_eq!(reply.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(reply.cache(), "SYNTH");
    assert_eq!(origin.requests(), 0, "a synth never reaches the origin");
}

#[tokio::test]
async fn synth_falling_through_gets_the_builtin_error_page() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy("synth_builtin", SYNTH_POLICY, &origin).await;
    let reply = Client::new().get(addr, "/gone", &[]).await;
    assert_eq!(reply.status, 410);
    assert_eq!(reply.header("x-denied-by"), None);
    assert_eq!(reply.header("retry-after"), Some("5"), "builtin vcl_synth");
    assert!(reply.text().contains("Error 410 Gone"), "{}", reply.text());
    assert_eq!(origin.requests(), 0);
}

// === vcl_recv: header edits make a request cacheable ===

#[tokio::test]
async fn recv_cookie_stripping_makes_a_request_cacheable() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "strip_cookie",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/static/") {
        unset req.http.Cookie;
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let cookie = [("cookie", "session=s3cr3t")];

    let first = client.get(addr, "/static/app.js", &cookie).await;
    assert_eq!(first.cache(), "MISS");
    assert_eq!(
        origin.last().header("cookie"),
        None,
        "the cookie is not forwarded"
    );
    let second = client.get(addr, "/static/app.js", &cookie).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.text(), first.text());
    assert_eq!(origin.requests_for("/static/app.js"), 1);

    // Control: elsewhere the builtin passes requests with cookies.
    assert_eq!(client.get(addr, "/page", &cookie).await.cache(), "PASS");
    assert_eq!(client.get(addr, "/page", &cookie).await.cache(), "PASS");
    assert_eq!(origin.last().header("cookie"), Some("session=s3cr3t"));
}

// === vcl_hash: hash_data ===

#[tokio::test]
async fn hash_data_on_a_header_creates_separate_objects() {
    let origin = Origin::start(|request| {
        let variant = request
            .headers()
            .get("x-variant")
            .map_or("none", |v| v.to_str().unwrap());
        OriginReply::ok(format!("variant {variant}")).cache_control("max-age=600")
    })
    .await;
    let (proxy, addr) = start_with_policy(
        "hash_variant",
        r#"vcl 4.1;
sub vcl_hash {
    hash_data(req.http.X-Variant);
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let a1 = client.get(addr, "/h", &[("x-variant", "a")]).await;
    let a2 = client.get(addr, "/h", &[("x-variant", "a")]).await;
    let b1 = client.get(addr, "/h", &[("x-variant", "b")]).await;
    let b2 = client.get(addr, "/h", &[("x-variant", "b")]).await;
    assert_eq!(
        [a1.cache(), a2.cache(), b1.cache(), b2.cache()],
        ["MISS", "HIT", "MISS", "HIT"]
    );
    assert_eq!(a2.text(), "variant a");
    assert_eq!(
        b2.text(),
        "variant b",
        "the origin sent no Vary: the hash alone separates"
    );
    assert_eq!(origin.requests_for("/h"), 2);
    eventually_stored(&proxy, 2).await;
    assert_eq!(
        proxy.cache_usage().keys,
        2,
        "two objects, not two variants of one"
    );
    // The builtin hash still runs after the user's (URL + host): another URL is another object.
    assert_eq!(
        client.get(addr, "/other", &[("x-variant", "a")]).await.cache(),
        "MISS"
    );
}

// === vcl_recv: return (purge) with an ACL ===

fn purge_policy(acl_entry: &str) -> String {
    format!(
        r#"vcl 4.1;
acl purgers {{
    {acl_entry};
}}

sub vcl_recv {{
    if (req.method == "PURGE") {{
        if (client.ip !~ purgers) {{
            return (synth(405));
        }}
        return (purge);
    }}
}}
"#
    )
}

#[tokio::test]
async fn purge_from_vcl_for_a_client_in_the_acl() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy("purge_allowed", &purge_policy(r#""127.0.0.1""#), &origin).await;
    let client = Client::new();
    client.get(addr, "/p", &[]).await;
    client.get(addr, "/q", &[]).await;
    assert_eq!(client.get(addr, "/p", &[]).await.cache(), "HIT");
    eventually_stored(&proxy, 2).await;

    let purged = send("PURGE", addr, "/p", &[], Bytes::new()).await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    assert_eq!(purged.cache(), "SYNTH");
    assert_eq!(origin.requests_for("/p"), 1, "PURGE is not forwarded");
    assert_eq!(proxy.cache_usage().keys, 1);

    assert_eq!(client.get(addr, "/p", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests_for("/p"), 2);
    assert_eq!(
        client.get(addr, "/q", &[]).await.cache(),
        "HIT",
        "only /p was purged"
    );
}

#[tokio::test]
async fn purge_from_vcl_for_a_client_outside_the_acl_is_refused() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy("purge_refused", &purge_policy(r#""10.0.0.0"/8"#), &origin).await;
    let client = Client::new();
    client.get(addr, "/p", &[]).await;
    eventually_stored(&proxy, 1).await;

    let refused = send("PURGE", addr, "/p", &[], Bytes::new()).await;
    assert_eq!(refused.status, 405);
    assert_eq!(proxy.cache_usage().keys, 1, "nothing purged");
    assert_eq!(client.get(addr, "/p", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests_for("/p"), 1);
}

// === ban() ===

#[tokio::test]
async fn ban_from_vcl_makes_matching_objects_miss() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "ban",
        r#"vcl 4.1;
acl banners { "127.0.0.1"; }

sub vcl_recv {
    if (req.method == "BAN") {
        if (!client.ip ~ banners) {
            return (synth(405, "Not allowed"));
        }
        ban("req.url ~ ^/news/");
        return (synth(200, "Ban added"));
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    for target in ["/news/a", "/news/b", "/sport/a"] {
        assert_eq!(client.get(addr, target, &[]).await.cache(), "MISS");
    }
    eventually_stored(&proxy, 3).await;
    for target in ["/news/a", "/news/b", "/sport/a"] {
        assert_eq!(client.get(addr, target, &[]).await.cache(), "HIT", "{target}");
    }

    let banned = send("BAN", addr, "/", &[], Bytes::new()).await;
    assert_eq!(banned.status, 200, "{}", banned.text());
    assert_eq!(origin.requests_for("/"), 0, "BAN is answered by the policy");

    assert_eq!(client.get(addr, "/news/a", &[]).await.cache(), "MISS", "banned");
    assert_eq!(client.get(addr, "/news/b", &[]).await.cache(), "MISS", "banned");
    assert_eq!(
        client.get(addr, "/sport/a", &[]).await.cache(),
        "HIT",
        "not matched"
    );
    assert_eq!(origin.requests_for("/news/a"), 2);
    assert_eq!(origin.requests_for("/sport/a"), 1);

    // Objects fetched after the ban are not affected by it.
    eventually_stored(&proxy, 3).await;
    assert_eq!(client.get(addr, "/news/a", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests_for("/news/a"), 2);
}

#[tokio::test]
async fn ban_on_an_object_header() {
    let origin = Origin::start(|request| {
        let section = if request.uri().path().starts_with("/news") {
            "news"
        } else {
            "sport"
        };
        cacheable(request).header("x-section", section)
    })
    .await;
    let (proxy, addr) = start_with_policy(
        "ban_obj_header",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.method == "BAN") {
        ban("obj.http.X-Section == " + req.http.X-Ban-Section);
        return (synth(200, "Ban added"));
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    client.get(addr, "/news/1", &[]).await;
    client.get(addr, "/sport/1", &[]).await;
    eventually_stored(&proxy, 2).await;

    let banned = send("BAN", addr, "/", &[("x-ban-section", "sport")], Bytes::new()).await;
    assert_eq!(banned.status, 200);
    assert_eq!(client.get(addr, "/sport/1", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/news/1", &[]).await.cache(), "HIT");
}

// === return (restart) ===

#[tokio::test]
async fn restart_forever_is_stopped_by_max_restarts() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "restart_forever",
        r#"vcl 4.1;
sub vcl_recv {
    return (restart);
}
"#,
        &origin,
    )
    .await;
    let started = std::time::Instant::now();
    let reply = Client::new().get(addr, "/loop", &[]).await;
    assert_eq!(reply.status, 503);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered quickly: {:?}",
        started.elapsed()
    );
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn max_restarts_is_4() {
    let origin = Origin::start(cacheable).await;
    // Restarts until req.restarts reaches the limit given in the URL, then serves.
    let (_proxy, addr) = start_with_policy(
        "restart_n",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/four" && req.restarts < 4) {
        return (restart);
    }
    if (req.url ~ "^/five" && req.restarts < 5) {
        return (restart);
    }
}

sub vcl_deliver {
    set resp.http.X-Restarts = req.restarts;
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let four = client.get(addr, "/four", &[]).await;
    assert_eq!(four.status, 200, "4 restarts are allowed: {}", four.text());
    assert_eq!(four.header("x-restarts"), Some("4"));
    let five = client.get(addr, "/five", &[]).await;
    assert_eq!(five.status, 503, "the 5th restart is one too many");
    assert_eq!(origin.requests_for("/five"), 0);
}

#[tokio::test]
async fn restart_once_with_a_changed_url_serves_the_second_url() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/missing" => OriginReply::with_status(404, "not here"),
        _ => OriginReply::ok(format!("fallback for {}", request.uri().path())).cache_control("max-age=600"),
    })
    .await;
    let (_proxy, addr) = start_with_policy(
        "restart_fallback",
        r#"vcl 4.1;
sub vcl_deliver {
    if (resp.status == 404 && req.restarts == 0) {
        set req.url = "/fallback";
        return (restart);
    }
    set resp.http.X-Restarts = req.restarts;
}
"#,
        &origin,
    )
    .await;
    let reply = Client::new().get(addr, "/missing", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.text(), "fallback for /fallback");
    assert_eq!(reply.header("x-restarts"), Some("1"));
    assert_eq!(origin.requests_for("/missing"), 1);
    assert_eq!(origin.requests_for("/fallback"), 1);
}

#[tokio::test]
async fn restart_from_recv_with_a_rewritten_url() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "restart_recv",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.restarts == 0 && req.url == "/old") {
        set req.url = "/new";
        return (restart);
    }
}
"#,
        &origin,
    )
    .await;
    let reply = Client::new().get(addr, "/old", &[]).await;
    assert_eq!(reply.status, 200);
    assert!(reply.text().starts_with("/new #"), "{}", reply.text());
    assert_eq!(origin.requests_for("/old"), 0);
    assert_eq!(origin.requests_for("/new"), 1);
}

// === vcl_deliver ===

#[tokio::test]
async fn deliver_header_edits_apply_to_misses_and_hits() {
    let origin = Origin::start(|request| cacheable(request).header("x-internal", "secret")).await;
    let (_proxy, addr) = start_with_policy(
        "deliver_edits",
        r#"vcl 4.1;
sub vcl_deliver {
    set resp.http.X-Served-By = "edge-1";
    unset resp.http.X-Internal;
    if (obj.hits > 0) {
        set resp.http.X-Hit = "yes";
    } else {
        set resp.http.X-Hit = "no";
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let miss = client.get(addr, "/d", &[]).await;
    assert_eq!(miss.cache(), "MISS");
    assert_eq!(miss.header("x-served-by"), Some("edge-1"));
    assert_eq!(miss.header("x-internal"), None);
    assert_eq!(miss.header("x-hit"), Some("no"));

    let hit = client.get(addr, "/d", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.header("x-served-by"), Some("edge-1"));
    assert_eq!(hit.header("x-internal"), None, "removed from the hit too");
    assert_eq!(hit.header("x-hit"), Some("yes"));
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn deliver_can_change_the_status() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "deliver_status",
        r#"vcl 4.1;
sub vcl_deliver {
    if (req.url ~ "^/teapot") {
        set resp.status = 418;
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    assert_eq!(client.get(addr, "/teapot", &[]).await.status, 418);
    let hit = client.get(addr, "/teapot", &[]).await;
    assert_eq!(hit.status, 418);
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(client.get(addr, "/other", &[]).await.status, 200);
}

// === vcl_backend_fetch ===

const BACKEND_FETCH_POLICY: &str = r#"vcl 4.1;
sub vcl_recv {
    if (req.url ~ "^/pass") {
        return (pass);
    }
}

sub vcl_backend_fetch {
    set bereq.http.X-Edge = "edgecache";
    set bereq.http.X-Original-Url = bereq.url;
    unset bereq.http.X-Secret;
    if (bereq.url ~ "^/old/") {
        set bereq.url = regsub(bereq.url, "^/old/", "/new/");
    }
}
"#;

#[tokio::test]
async fn backend_fetch_edits_reach_the_origin_on_a_miss() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy("backend_fetch_miss", BACKEND_FETCH_POLICY, &origin).await;
    let client = Client::new();
    let headers = [("x-secret", "token"), ("x-keep", "1")];
    assert_eq!(client.get(addr, "/old/page", &headers).await.cache(), "MISS");
    let seen = origin.last();
    assert_eq!(seen.target, "/new/page", "bereq.url rewritten");
    assert_eq!(seen.header("x-edge"), Some("edgecache"));
    assert_eq!(seen.header("x-original-url"), Some("/old/page"));
    assert_eq!(seen.header("x-secret"), None);
    assert_eq!(seen.header("x-keep"), Some("1"));
    // The object is stored under the client's URL.
    assert_eq!(client.get(addr, "/old/page", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn backend_fetch_edits_reach_the_origin_on_a_pass() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy("backend_fetch_pass", BACKEND_FETCH_POLICY, &origin).await;
    let reply = Client::new().get(addr, "/pass/x", &[("x-secret", "token")]).await;
    assert_eq!(reply.cache(), "PASS");
    let seen = origin.last();
    assert_eq!(seen.header("x-edge"), Some("edgecache"));
    assert_eq!(seen.header("x-secret"), None);
}

// === vcl_backend_response ===

#[tokio::test]
async fn beresp_uncacheable_is_not_stored() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "uncacheable",
        r#"vcl 4.1;
sub vcl_backend_response {
    if (bereq.url ~ "^/live/") {
        set beresp.uncacheable = true;
        return (deliver);
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    for _ in 0..3 {
        let reply = client.get(addr, "/live/score", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.cache(), "PASS");
    }
    assert_eq!(origin.requests_for("/live/score"), 3);
    assert_eq!(proxy.cache_usage().keys, 0);
    // The same origin response elsewhere is stored.
    assert_eq!(client.get(addr, "/static", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/static", &[]).await.cache(), "HIT");
}

#[tokio::test]
async fn beresp_header_edits_are_stored() {
    let origin = Origin::start(|request| {
        cacheable(request)
            .header("x-origin-only", "internal")
            .header("set-cookie", "a=1")
    })
    .await;
    let (_proxy, addr) = start_with_policy(
        "beresp_headers",
        r#"vcl 4.1;
sub vcl_backend_response {
    set beresp.http.X-Stored = "by-vcl " + bereq.url;
    set beresp.http.Cache-Control = "public, max-age=60";
    unset beresp.http.X-Origin-Only;
    unset beresp.http.Set-Cookie;
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let miss = client.get(addr, "/b", &[]).await;
    assert_eq!(miss.cache(), "MISS", "storable once Set-Cookie is gone");
    assert_eq!(miss.header("x-stored"), Some("by-vcl /b"));
    let hit = client.get(addr, "/b", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.header("x-stored"), Some("by-vcl /b"), "the edit was stored");
    assert_eq!(hit.header("cache-control"), Some("public, max-age=60"));
    assert_eq!(hit.header("x-origin-only"), None);
    assert_eq!(hit.header("set-cookie"), None);
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn beresp_status_edit_is_stored() {
    let origin = Origin::start(|request| {
        OriginReply::with_status(404, counting_body(request)).cache_control("max-age=600")
    })
    .await;
    let (_proxy, addr) = start_with_policy(
        "beresp_status",
        r#"vcl 4.1;
sub vcl_backend_response {
    if (beresp.status == 404) {
        set beresp.status = 200;
        set beresp.http.X-Was = "404";
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let miss = client.get(addr, "/s", &[]).await;
    assert_eq!(miss.status, 200);
    let hit = client.get(addr, "/s", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.status, 200);
    assert_eq!(hit.header("x-was"), Some("404"));
}

// === a declared backend instead of -b ===

#[tokio::test]
async fn declared_backend_is_used_instead_of_config_backend() {
    let origin = Origin::start(cacheable).await;
    let policy = format!(
        r#"vcl 4.1;
backend origin {{
    .host = "{}";
    .port = "{}";
}}
"#,
        origin.addr.ip(),
        origin.addr.port()
    );
    let path = support::write_policy("declared_backend", &policy);
    let dead = support::unused_port().await;
    let (_proxy, addr) = start_proxy(dead, |config| config.policy = Some(path)).await;
    let reply = Client::new().get(addr, "/x", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(origin.requests(), 1);
}

// === vcl_hit / vcl_miss / vcl_pass ===

#[tokio::test]
async fn vcl_hit_can_turn_a_hit_into_a_synth() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "vcl_hit",
        r#"vcl 4.1;
sub vcl_hit {
    if (req.http.X-Refuse-Hit) {
        return (synth(409, "Hit refused"));
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    client.get(addr, "/h", &[]).await;
    eventually_stored(&proxy, 1).await;
    let reply = client.get(addr, "/h", &[("x-refuse-hit", "1")]).await;
    assert_eq!(reply.status, 409, "vcl_hit ran");
}

#[tokio::test]
async fn vcl_miss_can_pass() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "vcl_miss",
        r#"vcl 4.1;
sub vcl_miss {
    if (req.url ~ "^/no-fill") {
        return (pass);
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    assert_eq!(
        client.get(addr, "/no-fill", &[]).await.cache(),
        "PASS",
        "vcl_miss ran"
    );
    assert_eq!(client.get(addr, "/no-fill", &[]).await.cache(), "PASS");
    assert_eq!(proxy.cache_usage().keys, 0);
}

#[tokio::test]
async fn vcl_pass_can_synth() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "vcl_pass",
        r#"vcl 4.1;
sub vcl_pass {
    if (req.method == "POST") {
        return (synth(403, "Read-only"));
    }
}
"#,
        &origin,
    )
    .await;
    let reply = send("POST", addr, "/form", &[], Bytes::from_static(b"x=1")).await;
    assert_eq!(reply.status, 403, "vcl_pass ran");
    assert_eq!(origin.requests(), 0);
}

// === req.hash_always_miss ===

#[tokio::test]
async fn hash_always_miss_refreshes_the_stored_object() {
    let origin = Origin::start(cacheable).await;
    let (proxy, addr) = start_with_policy(
        "hash_always_miss",
        r#"vcl 4.1;
sub vcl_recv {
    if (req.http.X-Refresh == "1") {
        set req.hash_always_miss = true;
    }
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let first = client.get(addr, "/r", &[]).await;
    eventually_stored(&proxy, 1).await;
    assert_eq!(client.get(addr, "/r", &[]).await.text(), first.text());

    let refreshed = client.get(addr, "/r", &[("x-refresh", "1")]).await;
    assert_eq!(refreshed.cache(), "MISS", "looked up nothing, fetched");
    assert_ne!(refreshed.text(), first.text());
    assert_eq!(origin.requests_for("/r"), 2);

    // The refreshed copy replaced the old one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        // Polled: the new object is inserted after its last byte reached the client.
        let later = client.get(addr, "/r", &[]).await;
        assert_eq!(later.cache(), "HIT");
        if later.text() == refreshed.text() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "old object still served");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(origin.requests_for("/r"), 2);
}

// === vcl_backend_error ===

#[tokio::test]
async fn backend_error_builds_the_error_page() {
    let dead = support::unused_port().await;
    let path = support::write_policy(
        "backend_error",
        r#"vcl 4.1;
sub vcl_backend_error {
    set beresp.http.Content-Type = "text/plain";
    set beresp.http.X-Backend-Error = "policy";
    synthetic("The origin is down (" + beresp.status + ")");
    return (deliver);
}
"#,
    );
    let (_proxy, addr) = start_proxy(dead, |config| config.policy = Some(path)).await;
    let reply = Client::new().get(addr, "/down", &[]).await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.header("x-backend-error"), Some("policy"));
    assert_eq!(reply.text(), "The origin is down (503)");
}

// === obj.hits ===

#[tokio::test]
async fn obj_hits_counts_the_hits_of_the_object() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "obj_hits",
        r#"vcl 4.1;
sub vcl_deliver {
    set resp.http.X-Hits = obj.hits;
}
"#,
        &origin,
    )
    .await;
    let client = Client::new();
    let mut hits = Vec::new();
    for _ in 0..4 {
        let reply = client.get(addr, "/o", &[]).await;
        hits.push(reply.header("x-hits").map(str::to_string));
    }
    // Varnish: obj.hits in vcl_deliver is 0 on the miss, then how often the object was hit.
    assert_eq!(
        hits,
        ["0", "1", "2", "3"].map(|n| Some(n.to_string())),
        "obj.hits per request"
    );
}

// === max_restarts goes through vcl_synth ===

#[tokio::test]
async fn too_many_restarts_runs_vcl_synth_with_503() {
    let origin = Origin::start(cacheable).await;
    let (_proxy, addr) = start_with_policy(
        "restart_synth",
        r#"vcl 4.1;
sub vcl_recv {
    return (restart);
}

sub vcl_synth {
    set resp.http.X-Synth = "policy";
}
"#,
        &origin,
    )
    .await;
    let reply = Client::new().get(addr, "/loop", &[]).await;
    assert_eq!(reply.status, 503);
    // Varnish (cnt_restart): past max_restarts the request goes to vcl_synth with 503.
    assert_eq!(reply.header("x-synth"), Some("policy"));
}

// === the builtin vcl_recv: native (no vcl_recv in the policy) and interpreted agree ===

#[tokio::test]
async fn builtin_vcl_recv_runs_the_same_natively_and_interpreted() {
    let origin = Origin::start(cacheable).await;
    // No vcl_recv, or one that falls through: the runtime runs the builtin natively. Calling
    // the builtin's parts one by one runs the interpreted builtin.vcl.
    let (_native, native) =
        start_with_policy("native_recv", "vcl 4.1;\nsub vcl_deliver { }\n", &origin).await;
    let (_through, through) =
        start_with_policy("fall_through", "vcl 4.1;\nsub vcl_recv { }\n", &origin).await;
    let (_interpreted, interpreted) = start_with_policy(
        "interpreted_recv",
        "vcl 4.1;\nsub vcl_recv { call vcl_req_host; call vcl_req_method; \
         call vcl_req_authorization; call vcl_req_cookie; }\n",
        &origin,
    )
    .await;
    let cases: [(&str, &str, support::Headers<'_>); 8] = [
        ("GET", "/a", &[]),
        ("GET", "/a", &[]),
        ("HEAD", "/a", &[]),
        ("POST", "/a", &[]),
        ("FOO", "/a", &[]),
        ("GET", "/b", &[("cookie", "x=1")]),
        ("GET", "/c", &[("authorization", "Basic eDp5")]),
        ("GET", "/d", &[("host", "EXAMPLE.com")]),
    ];
    for (method, target, headers) in cases {
        let reference = send(method, interpreted, target, headers, "").await;
        for addr in [native, through] {
            let reply = send(method, addr, target, headers, "").await;
            assert_eq!(
                (reply.status, reply.cache()),
                (reference.status, reference.cache()),
                "{method} {target} {headers:?}"
            );
        }
    }
    // The host was lower-cased before the key was made: the lower-case host hits.
    for addr in [native, through, interpreted] {
        let hit = send("GET", addr, "/d", &[("host", "example.com")], "").await;
        assert_eq!(hit.cache(), "HIT");
    }
    // HTTP/1.1 without Host: 400 from all three.
    for addr in [native, through, interpreted] {
        let mut conn = support::RawConn::connect(addr).await;
        conn.send("GET /e HTTP/1.1\r\n\r\n").await;
        assert_eq!(conn.response(false).await.status, 400);
    }
}
