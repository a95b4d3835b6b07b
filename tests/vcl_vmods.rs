//! The cookie, var and header vmods over real sockets: what `cookie.*` and `var.*` keep lasts
//! for the task (a client task from `vcl_recv` to `vcl_deliver`, a backend task from
//! `vcl_backend_fetch` to `vcl_backend_response`), and `header.*` keeps the lines of a repeated
//! field such as `Set-Cookie` apart.

mod support;

use support::{get, start_with_policy, Origin, OriginReply, Reply};

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
