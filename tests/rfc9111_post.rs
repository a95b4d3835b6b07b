//! POST responses reused for GET (RFC 9111 §4, RFC 9110 §9.3.3): a response to POST with
//! explicit freshness and a `Content-Location` naming the target URI invalidates what was
//! stored for the URI (RFC 9111 §4.4) and is then stored as its response, so the next GET is a
//! hit on it. Without both conditions, for requests with cookies (unless `--lookup-with-cookie`),
//! with `store_post_responses = false`, or when a policy's own `vcl_recv` passes the POST (as
//! Varnish does), the POST is only passed. With a policy whose `vcl_recv` leaves POST to the
//! builtin, the same rules hold as without one.

mod support;

use support::{get, send, start_proxy, Origin, OriginReply};

/// `POST /cart` answers "after post" with `post_headers`; `GET /cart` answers "from get",
/// fresh for a minute.
fn cart(
    post_headers: &'static [(&'static str, &'static str)],
) -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    move |request| {
        if request.method() != http::Method::POST {
            return OriginReply::ok("from get").cache_control("max-age=60");
        }
        let host = request.headers()["host"].to_str().unwrap();
        let mut reply = OriginReply::ok("after post");
        for (name, value) in post_headers {
            reply = reply.header(name, value.replace("{host}", host));
        }
        reply
    }
}

/// GETs `/cart`, POSTs to it, and GETs it again: the second GET's reply and how many GETs
/// reached the origin.
async fn get_post_get(
    origin: &Origin,
    addr: std::net::SocketAddr,
    proxy: &edgecache_runtime::Running,
) -> (support::Reply, usize) {
    assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
    support::eventually_stored(proxy, 1).await;
    let posted = send("POST", addr, "/cart", &[], "item=1").await;
    assert_eq!((posted.status.as_u16(), posted.cache()), (200, "PASS"));
    assert_eq!(
        posted.body, "after post",
        "the client gets the origin's answer to its POST"
    );
    support::eventually_stored(proxy, 1).await;
    let after = get(addr, "/cart", &[]).await;
    let gets = origin
        .log()
        .iter()
        .filter(|seen| seen.method == http::Method::GET)
        .count();
    (after, gets)
}

support::modes! {
    async fn post_with_content_location_and_freshness_answers_the_next_get() {
        let origin = Origin::start(cart(&[
            ("cache-control", "max-age=60"),
            ("content-location", "http://{host}/cart"),
        ]))
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let (after, gets) = get_post_get(&origin, addr, &proxy).await;
        assert_eq!((after.cache(), after.text().as_str()), ("HIT", "after post"));
        assert_eq!(
            gets, 1,
            "the GET after the POST was answered from the POST's response"
        );
        let head = send("HEAD", addr, "/cart", &[], "").await;
        assert_eq!(head.cache(), "HIT");
    }
}

support::modes! {
    async fn post_with_a_relative_content_location_is_stored_too() {
        let origin = Origin::start(cart(&[
            ("expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
            ("content-location", "cart"),
        ]))
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let (after, gets) = get_post_get(&origin, addr, &proxy).await;
        assert_eq!((after.cache(), after.text().as_str()), ("HIT", "after post"));
        assert_eq!(gets, 1);
    }
}

support::modes! {
    async fn post_without_both_conditions_only_invalidates() {
        let cases: [&'static [(&'static str, &'static str)]; 3] = [
            // Fresh, but no Content-Location.
            &[("cache-control", "max-age=60")],
            // Content-Location names another resource.
            &[("cache-control", "max-age=60"), ("content-location", "/cart/1")],
            // Content-Location, but only heuristic freshness.
            &[
                ("content-location", "/cart"),
                ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ],
        ];
        for post_headers in cases {
            let origin = Origin::start(cart(post_headers)).await;
            let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
            assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
            support::eventually_stored(&proxy, 1).await;
            send("POST", addr, "/cart", &[], "item=1").await;
            let after = get(addr, "/cart", &[]).await;
            assert_eq!(
                (after.cache(), after.text().as_str()),
                ("MISS", "from get"),
                "{post_headers:?}: the POST invalidated /cart and stored nothing"
            );
        }
    }
}

support::modes! {
    async fn post_with_a_cookie_is_not_stored() {
        let origin = Origin::start(cart(&[
            ("cache-control", "max-age=60"),
            ("content-location", "/cart"),
        ]))
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
        support::eventually_stored(&proxy, 1).await;
        send("POST", addr, "/cart", &[("cookie", "s=1")], "item=1").await;
        let after = get(addr, "/cart", &[]).await;
        assert_eq!((after.cache(), after.text().as_str()), ("MISS", "from get"));
    }
}

support::modes! {
    async fn no_store_post_responses_passes_every_post() {
        let origin = Origin::start(cart(&[
            ("cache-control", "max-age=60"),
            ("content-location", "/cart"),
        ]))
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.store_post_responses = false).await;
        assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
        support::eventually_stored(&proxy, 1).await;
        send("POST", addr, "/cart", &[], "item=1").await;
        let after = get(addr, "/cart", &[]).await;
        assert_eq!((after.cache(), after.text().as_str()), ("MISS", "from get"));
    }
}

support::modes! {
    async fn post_with_a_cookie_is_stored_with_lookup_with_cookie() {
        let origin = Origin::start(cart(&[
            ("cache-control", "max-age=60"),
            ("content-location", "/cart"),
        ]))
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.lookup_with_cookie = true).await;
        assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
        support::eventually_stored(&proxy, 1).await;
        send("POST", addr, "/cart", &[("cookie", "s=1")], "item=1").await;
        support::eventually_stored(&proxy, 1).await;
        let after = get(addr, "/cart", &[]).await;
        assert_eq!((after.cache(), after.text().as_str()), ("HIT", "after post"));
    }
}

/// Varnish's meaning wins where the policy's own code decides: a `vcl_recv` that returns
/// `pass` for POST gets a pass, whose response is never stored (the GET after it still sees
/// the invalidation).
#[tokio::test]
async fn a_policy_that_passes_post_itself_stores_nothing() {
    let origin = Origin::start(cart(&[
        ("cache-control", "max-age=60"),
        ("content-location", "/cart"),
    ]))
    .await;
    let policy = "vcl 4.1;\nsub vcl_recv { if (req.method == \"POST\") { return (pass); } }\n";
    let (proxy, addr) = support::start_with_policy("post_pass", policy, &origin).await;
    assert_eq!(get(addr, "/cart", &[]).await.cache(), "MISS");
    support::eventually_stored(&proxy, 1).await;
    let posted = send("POST", addr, "/cart", &[], "item=1").await;
    assert_eq!((posted.cache(), posted.text().as_str()), ("PASS", "after post"));
    let after = get(addr, "/cart", &[]).await;
    assert_eq!(
        (after.cache(), after.text().as_str()),
        ("MISS", "from get"),
        "the POST invalidated /cart and its response was not stored"
    );
}
