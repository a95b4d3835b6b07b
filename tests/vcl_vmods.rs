//! The cookie, var and header vmods over real sockets: what `cookie.*` and `var.*` keep lasts
//! for the task (a client task from `vcl_recv` to `vcl_deliver`, a backend task from
//! `vcl_backend_fetch` to `vcl_backend_response`), and `header.*` keeps the lines of a repeated
//! field such as `Set-Cookie` apart. The std functions that ask the connection or the host at
//! each request: `std.port`, `std.file_exists`, `std.timed_call`. Varnish's vmod_purge
//! (`purge.hard()`, `purge.soft()` in vcl_hit / vcl_miss), vmod_h2 (`h2.is()`) and vmod_unix
//! (off a Unix socket).

mod support;

use support::{get, start_with_policy, until, Client, H2c, Origin, OriginReply, Reply};

/// Every `Set-Cookie` line of `reply`, in order.
fn set_cookies(reply: &Reply) -> Vec<&str> {
    reply
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().expect("ASCII header"))
        .collect()
}

#[tokio::test]
async fn cookie_filter_in_vcl_recv_reaches_the_origin_filtered() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "cookie_filter",
        r#"vcl 4.1;
import cookie;
sub vcl_recv {
    cookie.parse(req.http.cookie);
    cookie.filter("_ga,_gid");
    set req.http.cookie = cookie.get_string();
    return (pass);
}
"#,
        &origin,
    )
    .await;

    let reply = get(
        addr,
        "/",
        &[("cookie", "_ga=GA1.2; session=abc; _gid=x; theme=dark")],
    )
    .await;

    assert_eq!(reply.status, 200);
    assert_eq!(
        origin.last().header("cookie"),
        Some("session=abc; theme=dark;"),
        "the tracking cookies are filtered out before the fetch (get_string ends with `;`, as in Varnish 7)"
    );
}

#[tokio::test]
async fn var_set_in_vcl_recv_is_read_in_vcl_deliver() {
    let origin = Origin::start(|_| OriginReply::ok("page").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_with_policy(
        "var_client_task",
        r#"vcl 4.1;
import var;
sub vcl_recv {
    var.set("original-url", req.url);
    set req.url = "/rewritten";
}
sub vcl_deliver {
    set resp.http.x-original-url = var.get("original-url");
}
"#,
        &origin,
    )
    .await;

    let first = get(addr, "/asked?x=1", &[]).await;
    let second = get(addr, "/other", &[]).await;

    assert_eq!(origin.last().target, "/rewritten");
    assert_eq!(first.header("x-original-url"), Some("/asked?x=1"));
    assert_eq!(
        second.header("x-original-url"),
        Some("/other"),
        "each request has its own task, also on a hit"
    );
    assert_eq!(second.cache(), "HIT");
}

#[tokio::test]
async fn var_set_in_vcl_backend_fetch_is_read_in_vcl_backend_response_not_by_the_client() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "var_backend_task",
        r#"vcl 4.1;
import var;
sub vcl_recv {
    var.set("side", "client");
    return (pass);
}
sub vcl_backend_fetch {
    set bereq.http.x-seen-by-backend = "[" + var.get("side") + "]";
    var.set("side", "backend");
}
sub vcl_backend_response {
    set beresp.http.x-backend-side = var.get("side");
}
sub vcl_deliver {
    set resp.http.x-client-side = var.get("side");
}
"#,
        &origin,
    )
    .await;

    let reply = get(addr, "/", &[]).await;

    assert_eq!(
        origin.last().header("x-seen-by-backend"),
        Some("[]"),
        "the backend task starts empty"
    );
    assert_eq!(reply.header("x-backend-side"), Some("backend"));
    assert_eq!(reply.header("x-client-side"), Some("client"));
}

#[tokio::test]
async fn header_append_gives_the_client_a_second_set_cookie_line() {
    let origin =
        Origin::start(|_| OriginReply::ok("page").header("set-cookie", "session=abc; HttpOnly")).await;
    let (_proxy, addr) = start_with_policy(
        "header_append",
        r#"vcl 4.1;
import header;
sub vcl_backend_response {
    header.append(beresp.http.Set-Cookie, "theme=dark; Path=/");
}
"#,
        &origin,
    )
    .await;

    let reply = get(addr, "/", &[]).await;

    assert_eq!(
        set_cookies(&reply),
        ["session=abc; HttpOnly", "theme=dark; Path=/"],
        "two lines, not one joined with a comma"
    );
}

#[tokio::test]
async fn header_remove_drops_only_the_lines_its_regex_matches() {
    let origin = Origin::start(|_| {
        OriginReply::ok("page")
            .header("set-cookie", "session=abc")
            .header("set-cookie", "tracking=1; Max-Age=99999")
            .header("set-cookie", "theme=dark")
    })
    .await;
    let (_proxy, addr) = start_with_policy(
        "header_remove",
        r#"vcl 4.1;
import header;
sub vcl_deliver {
    header.remove(resp.http.Set-Cookie, "^tracking=");
    set resp.http.x-theme = header.get(resp.http.Set-Cookie, "^theme=");
}
"#,
        &origin,
    )
    .await;

    let reply = get(addr, "/", &[]).await;

    assert_eq!(set_cookies(&reply), ["session=abc", "theme=dark"]);
    assert_eq!(reply.header("x-theme"), Some("theme=dark"));
}

#[tokio::test]
async fn std_port_of_server_ip_is_the_listeners_port() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "std_port",
        r#"vcl 4.1;
import std;
sub vcl_recv {
    if (std.port(server.ip) != 443) {
        return (synth(750, "https://" + req.http.host + req.url));
    }
}
sub vcl_synth {
    if (resp.status == 750) {
        set resp.status = 301;
        set resp.http.Location = resp.reason;
        set resp.http.X-Server-Port = std.port(server.ip);
        set resp.http.X-Client-Port = std.port(client.ip);
        return (deliver);
    }
}
"#,
        &origin,
    )
    .await;

    let reply = get(addr, "/login", &[("host", "shop.example")]).await;
    assert_eq!(
        reply.status, 301,
        "a plain listener is not 443: the HTTPS redirect"
    );
    assert_eq!(reply.header("location"), Some("https://shop.example/login"));
    assert_eq!(
        reply.header("x-server-port"),
        Some(addr.port().to_string().as_str())
    );
    let client_port: u16 = reply.header("x-client-port").unwrap_or("0").parse().unwrap_or(0);
    assert!(client_port > 0 && client_port != addr.port(), "{client_port}");
}

#[tokio::test]
async fn std_file_exists_flag_file_turns_maintenance_on_and_off() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let flag = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("edgecache-maintenance-{}", std::process::id()));
    let _ = std::fs::remove_file(&flag);
    let policy = format!(
        r#"vcl 4.1;
import std;
sub vcl_recv {{
    if (std.file_exists("{}")) {{
        return (synth(503, "in maintenance"));
    }}
    return (pass);
}}
"#,
        flag.display()
    );
    let (_proxy, addr) = start_with_policy("std_file_exists", &policy, &origin).await;

    assert_eq!(get(addr, "/", &[]).await.status, 200);
    std::fs::write(&flag, "").expect("write the flag file");
    assert_eq!(
        get(addr, "/", &[]).await.status,
        503,
        "asked at each request, no reload"
    );
    std::fs::remove_file(&flag).expect("remove the flag file");
    assert_eq!(get(addr, "/", &[]).await.status, 200);
}

#[tokio::test]
async fn std_timed_call_runs_the_sub_and_reports_its_seconds() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "std_timed_call",
        r#"vcl 4.1;
import std;
sub normalize {
    set req.url = regsub(req.url, "\?.*$", "");
}
sub vcl_recv {
    set req.http.X-Normalize-Took = std.timed_call(normalize);
    return (pass);
}
"#,
        &origin,
    )
    .await;

    assert_eq!(get(addr, "/a?utm=1", &[]).await.status, 200);
    let seen = origin.last();
    assert_eq!(seen.target, "/a", "the sub ran");
    let took: f64 = seen
        .header("x-normalize-took")
        .unwrap_or("x")
        .parse()
        .expect("seconds");
    assert!((0.0..1.0).contains(&took), "{took}");
}

/// vmod_purge.vcc's example: PURGE looks the object up and vcl_hit / vcl_miss purge its
/// variants with `purge.hard()` or, with `X-Soft`, `purge.soft()`; vcl_synth reports the count.
const PURGE_POLICY: &str = r#"vcl 4.1;
import purge;
sub vcl_recv {
    if (req.method == "PURGE") {
        return (hash);
    }
}
sub my_purge {
    if (req.http.X-Soft) {
        set req.http.purged = purge.soft();
    } else {
        set req.http.purged = purge.hard();
    }
    if (req.http.purged == "0") {
        return (synth(404));
    } else {
        return (synth(200));
    }
}
sub vcl_hit {
    if (req.method == "PURGE") {
        call my_purge;
    }
}
sub vcl_miss {
    if (req.method == "PURGE") {
        call my_purge;
    }
}
sub vcl_backend_response {
    set beresp.grace = 1m;
}
sub vcl_synth {
    if (req.method == "PURGE") {
        if (req.http.purged) {
            set resp.http.purged = req.http.purged;
        }
        return (deliver);
    }
}
"#;

#[tokio::test]
async fn purge_hard_in_vcl_hit_removes_the_object_and_reports_the_count() {
    let origin = Origin::start(|_| OriginReply::ok("page").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_with_policy("purge_hard", PURGE_POLICY, &origin).await;
    let client = Client::new();
    assert_eq!(client.get(addr, "/p", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/p", &[]).await.cache(), "HIT");

    let purged = client.send("PURGE", addr, "/p", &[], "").await;
    assert_eq!(
        (purged.status.as_u16(), purged.header("purged")),
        (200, Some("1"))
    );
    assert_eq!(
        client.get(addr, "/p", &[]).await.cache(),
        "MISS",
        "gone: fetched again"
    );
    assert_eq!(origin.requests_for("/p"), 2);

    let nothing = client.send("PURGE", addr, "/never", &[], "").await;
    assert_eq!(
        (nothing.status.as_u16(), nothing.header("purged")),
        (404, Some("0")),
        "vcl_miss: nothing stored"
    );
}

#[tokio::test]
async fn purge_soft_in_vcl_hit_serves_the_object_stale_while_it_is_refetched() {
    let origin = Origin::start(|_| OriginReply::ok("page").cache_control("max-age=60")).await;
    let (_proxy, addr) = start_with_policy("purge_soft", PURGE_POLICY, &origin).await;
    let client = Client::new();
    assert_eq!(client.get(addr, "/s", &[]).await.cache(), "MISS");

    let purged = client.send("PURGE", addr, "/s", &[("x-soft", "1")], "").await;
    assert_eq!(
        (purged.status.as_u16(), purged.header("purged")),
        (200, Some("1"))
    );
    let stale = client.get(addr, "/s", &[]).await;
    assert_eq!(
        (stale.cache(), stale.text().as_str()),
        ("STALE", "page"),
        "kept, in grace"
    );
    until("the background fetch reached the origin", async || {
        origin.requests_for("/s") == 2
    })
    .await;
    until("the refreshed object is fresh again", async || {
        client.get(addr, "/s", &[]).await.cache() == "HIT"
    })
    .await;
    assert_eq!(origin.requests_for("/s"), 2, "one background fetch");
}

#[tokio::test]
async fn h2_is_true_over_h2c_and_false_over_http1() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "h2_is",
        "vcl 4.1;\nimport h2;\nsub vcl_deliver { set resp.http.X-H2 = h2.is(); }\n",
        &origin,
    )
    .await;
    assert_eq!(get(addr, "/", &[]).await.header("x-h2"), Some("false"));
    let mut h2c = H2c::connect(addr).await;
    assert_eq!(h2c.get("/", &[]).await.header("x-h2"), Some("true"));
}

#[tokio::test]
async fn unix_credentials_off_a_unix_socket_are_null_and_minus_one() {
    let origin = Origin::start(|_| OriginReply::ok("page")).await;
    let (_proxy, addr) = start_with_policy(
        "unix_tcp",
        r#"vcl 4.1;
import unix;
sub vcl_recv {
    if (unix.uid() != 4711) {
        return (synth(403, "uid " + unix.uid() + " user [" + unix.user() + "]"));
    }
}
"#,
        &origin,
    )
    .await;
    let reply = get(addr, "/", &[]).await;
    assert_eq!(
        reply.status, 403,
        "a TCP peer has no credentials: not the trusted uid"
    );
    assert!(reply.text().contains("uid -1 user []"), "{}", reply.text());
    assert_eq!(origin.requests(), 0);
}
