//! `std.rollback(req)` and `std.rollback(bereq)` over real sockets, as Varnish 7.7's
//! `VRT_Rollback` (std_c00001.vtc, r03353.vtc): after `vcl_recv` rewrote the request, a
//! rollback sends the origin the request the client sent; in `vcl_deliver` it builds `resp`
//! again; `bereq` goes back to the request as built before `vcl_backend_fetch`, and in
//! `vcl_backend_response` it lets the response go (the fetch fails unless the sub retries).

mod support;

use support::{get, start_with_policy, Origin, OriginReply};

#[tokio::test]
async fn rollback_sends_the_request_as_the_client_sent_it() {
    let origin = Origin::start(|_| OriginReply::ok("ok")).await;
    let policy = r#"vcl 4.1;
import std;
sub vcl_recv {
    set req.url = "/rewritten";
    set req.http.X-Added = "1";
    unset req.http.X-Keep;
    if (req.http.X-Undo) {
        std.rollback(req);
    }
    return (pass);
}
"#;
    let (_proxy, addr) = start_with_policy("rollback", policy, &origin).await;

    get(addr, "/original?q=1", &[("x-keep", "yes")]).await;
    let seen = origin.last();
    assert_eq!(seen.target, "/rewritten");
    assert_eq!((seen.header("x-added"), seen.header("x-keep")), (Some("1"), None));

    get(addr, "/original?q=1", &[("x-keep", "yes"), ("x-undo", "1")]).await;
    let seen = origin.last();
    assert_eq!(seen.target, "/original?q=1", "the URL as sent");
    assert_eq!(
        (seen.header("x-added"), seen.header("x-keep")),
        (None, Some("yes"))
    );
}

#[tokio::test]
async fn rollback_of_req_in_vcl_deliver_builds_resp_again() {
    // std_c00001.vtc: `std.rollback(req)` in vcl_deliver, then `req.http.test` as sent.
    let origin = Origin::start(|_| OriginReply::ok("ok").header("x-from-origin", "1")).await;
    let policy = r#"vcl 4.1;
import std;
sub vcl_recv {
    unset req.http.test;
    return (pass);
}
sub vcl_deliver {
    set resp.http.X-Set-Before = "1";
    unset resp.http.X-From-Origin;
    if (req.http.X-Undo) {
        std.rollback(req);
    }
    set resp.http.X-Test = "[" + req.http.test + "]";
}
"#;
    let (_proxy, addr) = start_with_policy("rollback_deliver", policy, &origin).await;

    let kept = get(addr, "/6", &[("test", "1")]).await;
    assert_eq!(kept.header("x-test"), Some("[]"));
    assert_eq!(
        (kept.header("x-set-before"), kept.header("x-from-origin")),
        (Some("1"), None)
    );

    let rolled = get(addr, "/6", &[("test", "1"), ("x-undo", "1")]).await;
    assert_eq!(
        rolled.header("x-test"),
        Some("[1]"),
        "req.http.test as the client sent it"
    );
    assert_eq!(
        (rolled.header("x-set-before"), rolled.header("x-from-origin")),
        (None, Some("1")),
        "resp as vcl_deliver began with it"
    );
}

#[tokio::test]
async fn rollback_of_bereq_then_retry_sends_the_request_as_built() {
    // The origin refuses what vcl_backend_fetch made of the request.
    let origin = Origin::start(|request| {
        if request.uri().path() == "/edited" {
            OriginReply::with_status(400, "no")
        } else {
            OriginReply::ok("ok")
        }
    })
    .await;
    let policy = r#"vcl 4.1;
import std;
sub vcl_recv {
    return (pass);
}
sub vcl_backend_fetch {
    if (bereq.retries == 0) {
        set bereq.url = "/edited";
        set bereq.http.X-Edit = "1";
    }
}
sub vcl_backend_response {
    if (beresp.status == 400) {
        std.rollback(bereq);
        return (retry);
    }
}
"#;
    let (_proxy, addr) = start_with_policy("rollback_bereq_retry", policy, &origin).await;

    let reply = get(addr, "/baz", &[("x-client", "c")]).await;
    assert_eq!(reply.status, 200);
    let log = origin.log();
    let targets: Vec<&str> = log.iter().map(|seen| seen.target.as_str()).collect();
    assert_eq!(
        targets,
        ["/edited", "/baz"],
        "the retry is the request as built, not as edited"
    );
    let retried = &log[1];
    assert_eq!(
        (retried.header("x-edit"), retried.header("x-client")),
        (None, Some("c"))
    );
}

#[tokio::test]
async fn rollback_of_bereq_in_vcl_backend_response_fails_the_fetch_unless_retried() {
    // r03353.vtc: the rollback lets the response go; vcl_backend_error runs and may retry.
    let origin = Origin::start(|_| OriginReply::ok("xxx")).await;
    let policy = r#"vcl 4.1;
import std;
sub vcl_recv {
    return (pass);
}
sub vcl_backend_response {
    if (bereq.retries == 0) {
        std.rollback(bereq);
    }
}
sub vcl_backend_error {
    set beresp.http.X-Error-Retries = bereq.retries;
    if (bereq.retries == 0 && bereq.url == "/retry") {
        return (retry);
    }
}
"#;
    let (_proxy, addr) = start_with_policy("rollback_bereq_error", policy, &origin).await;

    let retried = get(addr, "/retry", &[]).await;
    assert_eq!(retried.status, 200);
    assert_eq!(retried.text(), "xxx");
    assert_eq!(origin.requests_for("/retry"), 2);

    let failed = get(addr, "/once", &[]).await;
    assert_eq!(failed.status, 503, "the response was let go: the fetch fails");
    assert_eq!(
        failed.header("x-error-retries"),
        Some("0"),
        "vcl_backend_error made the page"
    );
    assert_eq!(origin.requests_for("/once"), 1);
}
