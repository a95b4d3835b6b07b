//! `std.rollback(req)` over real sockets: after `vcl_recv` rewrote the request, a rollback
//! sends the origin the request the client sent.

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
