//! vmod_directors' `directors.shard_param()` over real sockets, as its documentation's
//! example uses it: the shard director is chosen on the client side (`resolve=LAZY`), the
//! director's associated parameter set is changed on the backend side, and a retry goes to the
//! next backend on the ring (`p.set(alt=bereq.retries)`).

mod support;

use support::{get, start_proxy, unused_port, write_policy, Origin, OriginReply};

/// Two origins behind a shard director whose picks take `alt` from the associated set `p`;
/// every first attempt is retried once. `fetch` is `vcl_backend_fetch`'s body.
fn policy(one: &Origin, two: &Origin, fetch: &str) -> String {
    format!(
        r#"vcl 4.1;
import directors;
backend one {{ .host = "127.0.0.1"; .port = "{}"; }}
backend two {{ .host = "127.0.0.1"; .port = "{}"; }}
sub vcl_init {{
    new p = directors.shard_param();
    new vd = directors.shard();
    vd.add_backend(one);
    vd.add_backend(two);
    vd.reconfigure();
    vd.associate(p.use());
}}
sub vcl_recv {{
    set req.backend_hint = vd.backend(resolve=LAZY);
    return (pass);
}}
sub vcl_backend_fetch {{
    {fetch}
}}
sub vcl_backend_response {{
    if (bereq.retries == 0) {{
        return (retry);
    }}
    set beresp.http.X-Served-By = beresp.backend.name;
}}
"#,
        one.addr.port(),
        two.addr.port()
    )
}

#[tokio::test]
async fn shard_param_set_on_the_backend_side_sends_the_retry_to_the_next_backend() {
    let one = Origin::start(|_| OriginReply::ok("one")).await;
    let two = Origin::start(|_| OriginReply::ok("two")).await;
    let path = write_policy(
        "shard_param_alt",
        &policy(&one, &two, "p.set(alt=bereq.retries, by=URL);"),
    );
    let dead = unused_port().await;
    let (_proxy, addr) = start_proxy(dead, |config| config.policy = Some(path)).await;

    let reply = get(addr, "/item/42", &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        (one.requests(), two.requests()),
        (1, 1),
        "the retry went to the other backend"
    );
    let served_by = reply.header("x-served-by").unwrap_or("");
    assert_eq!(reply.text(), served_by, "the answer is the second backend's");
}

#[tokio::test]
async fn without_the_backend_side_set_the_retry_stays_on_the_same_backend() {
    let one = Origin::start(|_| OriginReply::ok("one")).await;
    let two = Origin::start(|_| OriginReply::ok("two")).await;
    let path = write_policy("shard_param_none", &policy(&one, &two, ""));
    let dead = unused_port().await;
    let (_proxy, addr) = start_proxy(dead, |config| config.policy = Some(path)).await;

    assert_eq!(get(addr, "/item/42", &[]).await.status, 200);
    let counts = (one.requests(), two.requests());
    assert!(counts == (2, 0) || counts == (0, 2), "{counts:?}");
}
