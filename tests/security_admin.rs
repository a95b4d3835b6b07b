//! The admin API against pages in the operator's browser: cross-site `POST`s (the shapes a page
//! can send without a CORS preflight) and DNS rebinding are refused with 403, while shells,
//! same-origin JSON requests, requests with the token and `edgecache admin` still work.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::process::Command;

use reload_support::*;
use support::{eventually_stored, get, Origin, OriginReply, RawConn, RawResponse};

async fn cacheable_origin() -> Origin {
    Origin::fixed(OriginReply::ok("page").cache_control("max-age=600")).await
}

/// Sends `head` (lines without the final empty line) and `body` to the admin API as is.
async fn raw(admin: SocketAddr, head: &[String], body: &str) -> RawResponse {
    let mut conn = RawConn::connect(admin).await;
    let mut request = head.join("\r\n");
    request.push_str(&format!(
        "\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    conn.send(&request).await;
    conn.response(false).await
}

fn text(response: &RawResponse) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// A cached `/page` and an admin API on loopback.
async fn cached_page() -> (Origin, PolicyFile, edgecache_runtime::Running, SocketAddr) {
    let origin = cacheable_origin().await;
    let (policy, running, addr) =
        start_watching(origin.addr, &marking("A"), |config| config.watch_policy = false).await;
    get(addr, "/page", &[]).await;
    eventually_stored(&running, 1).await;
    assert_eq!(get(addr, "/page", &[]).await.cache(), "HIT");
    (origin, policy, running, addr)
}

#[tokio::test]
async fn cross_site_ban_is_refused() {
    let (_origin, _dir, running, addr) = cached_page().await;
    let admin = running.admin_addr().unwrap();
    let ban = r#"req.url ~ ".""#;
    // What `fetch("http://127.0.0.1:6082/ban", {method: "POST", mode: "no-cors", body})` sends.
    let from_a_page = [
        "POST /ban HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Origin: http://evil.example".to_string(),
        "Content-Type: text/plain;charset=UTF-8".to_string(),
        "Sec-Fetch-Site: cross-site".to_string(),
    ];
    let refused = raw(admin, &from_a_page, ban).await;
    assert_eq!(refused.status, 403, "{}", text(&refused));
    assert!(text(&refused).contains("Origin"), "says why: {}", text(&refused));

    // A form posted from a sandboxed page or a redirect: Origin null.
    let form = [
        "POST /ban HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Origin: null".to_string(),
        "Content-Type: application/x-www-form-urlencoded".to_string(),
    ];
    assert_eq!(raw(admin, &form, ban).await.status, 403);

    // Even without an Origin (older browsers, some redirects), a simple body type is refused.
    let no_origin = [
        "POST /ban HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Content-Type: text/plain".to_string(),
    ];
    let refused = raw(admin, &no_origin, ban).await;
    assert_eq!(refused.status, 403);
    assert!(
        text(&refused).contains("application/json"),
        "says what to send: {}",
        text(&refused)
    );

    assert_eq!(
        admin_json(&running, "/stats").await["bans"],
        0,
        "no ban was added"
    );
    assert_eq!(
        get(addr, "/page", &[]).await.cache(),
        "HIT",
        "the object survives"
    );
}

#[tokio::test]
async fn cross_site_reload_is_refused() {
    let (_origin, _dir, running, _addr) = cached_page().await;
    let admin = running.admin_addr().unwrap();
    let from_a_page = [
        "POST /reload HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Origin: http://evil.example".to_string(),
    ];
    let refused = raw(admin, &from_a_page, "").await;
    assert_eq!(refused.status, 403, "{}", text(&refused));
    let as_a_form = [
        "POST /reload HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Content-Type: application/x-www-form-urlencoded".to_string(),
    ];
    assert_eq!(raw(admin, &as_a_form, "x=1").await.status, 403);
    assert_eq!(running.active_version().generation, 1, "no reload ran");
    assert_eq!(running.reload_status().ok + running.reload_status().failed, 0);
}

#[tokio::test]
async fn dns_rebinding_host_cannot_read_status() {
    let (_origin, _dir, running, _addr) = cached_page().await;
    let admin = running.admin_addr().unwrap();
    let port = admin.port();
    let status = |host: String| {
        let head = ["GET /status HTTP/1.1".to_string(), format!("Host: {host}")];
        async move { raw(admin, &head, "").await }
    };
    let rebound = status(format!("evil.example:{port}")).await;
    assert_eq!(rebound.status, 403, "{}", text(&rebound));
    assert!(text(&rebound).contains("DNS rebinding"), "{}", text(&rebound));
    assert!(!text(&rebound).contains("generation"), "nothing of /status leaks");
    for foreign in [
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost:{}", port ^ 1),
        "localhost".to_string(),
    ] {
        assert_eq!(status(foreign.clone()).await.status, 403, "{foreign}");
    }
    for own in [
        admin.to_string(),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("127.0.0.2:{port}"),
    ] {
        assert_eq!(status(own.clone()).await.status, 200, "{own}");
    }
    // A cross-origin read (fetch with CORS) carries the page's Origin.
    let read = [
        "GET /status HTTP/1.1".to_string(),
        format!("Host: {admin}"),
        "Origin: http://evil.example".to_string(),
    ];
    assert_eq!(raw(admin, &read, "").await.status, 403);
}

#[tokio::test]
async fn same_origin_json_requests_still_work() {
    let (origin, _dir, running, addr) = cached_page().await;
    let admin = running.admin_addr().unwrap();
    let json_post = |target: &str| {
        [
            format!("POST {target} HTTP/1.1"),
            format!("Host: {admin}"),
            format!("Origin: http://{admin}"),
            "Content-Type: application/json; charset=utf-8".to_string(),
        ]
    };
    let banned = raw(admin, &json_post("/ban"), r#"{"ban": "req.url ~ \"^/page\""}"#).await;
    assert_eq!(banned.status, 200, "{}", text(&banned));
    assert_eq!(get(addr, "/page", &[]).await.cache(), "MISS", "the ban applied");
    assert_eq!(origin.requests(), 2);

    let not_a_ban = raw(admin, &json_post("/ban"), r#"{"expr": "req.url ~ \".\""}"#).await;
    assert_eq!(not_a_ban.status, 400, "{}", text(&not_a_ban));
    assert!(
        text(&not_a_ban).contains(r#"{"ban": "EXPR""#),
        "{}",
        text(&not_a_ban)
    );

    eventually_stored(&running, 1).await;
    let purge = json_post(&format!("/purge?url=/page&host={addr}"));
    let purged = raw(admin, &purge, "").await;
    assert_eq!(purged.status, 200, "{}", text(&purged));
    let reloaded = raw(admin, &json_post("/reload"), "").await;
    assert_eq!(reloaded.status, 200, "{}", text(&reloaded));
    assert_eq!(running.active_version().generation, 2);

    let read = [
        "GET /stats HTTP/1.1".to_string(),
        format!("Host: localhost:{}", admin.port()),
        format!("Origin: http://localhost:{}", admin.port()),
    ];
    assert_eq!(raw(admin, &read, "").await.status, 200);
}

#[tokio::test]
async fn requests_with_the_token_skip_the_browser_checks() {
    let dir = temp_dir();
    let token_file = path_in(&dir, "admin.token");
    std::fs::write(&token_file, "t0ken\n").unwrap();
    let origin = cacheable_origin().await;
    let (running, addr) = support::start_proxy(origin.addr, move |config| {
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.admin_token_file = Some(token_file);
    })
    .await;
    get(addr, "/page", &[]).await;
    eventually_stored(&running, 1).await;
    let admin = running.admin_addr().unwrap();
    // A remote name (the listener may be on 0.0.0.0) and a plain-text body, as curl sends it.
    let plain = [
        "POST /ban HTTP/1.1".to_string(),
        "Host: cache1.internal:6082".to_string(),
        "Authorization: Bearer t0ken".to_string(),
        "Content-Type: text/plain".to_string(),
    ];
    let banned = raw(admin, &plain, r#"req.url ~ "^/page""#).await;
    assert_eq!(banned.status, 200, "{}", text(&banned));
    assert_eq!(get(addr, "/page", &[]).await.cache(), "MISS");
    // The token does not make another site's Origin acceptable.
    let mut foreign = plain.to_vec();
    foreign.push("Origin: http://evil.example".to_string());
    assert_eq!(raw(admin, &foreign, r#"req.url ~ ".""#).await.status, 403);
}

#[tokio::test]
async fn the_admin_cli_still_works() {
    let (origin, _dir, running, addr) = cached_page().await;
    let admin = running.admin_addr().unwrap().to_string();
    let edgecache = |args: &'static [&'static str]| {
        let admin = admin.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                Command::new(env!("CARGO_BIN_EXE_edgecache"))
                    .args(["admin", "-T", &admin])
                    .args(args)
                    .output()
                    .expect("runs edgecache")
            })
            .await
            .unwrap()
        }
    };
    let ban = edgecache(&["ban", "req.url", "~", "\"^/page\""]).await;
    assert!(ban.status.success(), "{}", String::from_utf8_lossy(&ban.stderr));
    assert_eq!(get(addr, "/page", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests(), 2);
    let reload = edgecache(&["reload"]).await;
    assert!(
        reload.status.success(),
        "{}",
        String::from_utf8_lossy(&reload.stderr)
    );
    assert_eq!(running.active_version().generation, 2);
    let status = edgecache(&["status"]).await;
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
}
