//! POST requests cached by their body (`std.cache_req_body` + vmod `bodyaccess`, as API and
//! GraphQL caches do it in Varnish), over real sockets: the body becomes part of the cache key,
//! the origin receives it with the fetch, and a body over the size is refused.

mod support;

use http::StatusCode;
use support::{send, start_with_policy, Origin, OriginReply};

/// vmod_bodyaccess's example, with the body size Varnish's docs use.
const POLICY: &str = r#"vcl 4.1;
import std;
import bodyaccess;
sub vcl_recv {
    unset req.http.X-Body-Len;
    if (req.method == "POST") {
        if (!std.cache_req_body(1KB)) {
            return (synth(413, "The request body size exceeds the limit"));
        }
        set req.http.X-Body-Len = bodyaccess.len_req_body();
        return (hash);
    }
}
sub vcl_hash {
    if (req.http.X-Body-Len) {
        bodyaccess.hash_req_body();
    } else {
        hash_data("");
    }
}
sub vcl_backend_fetch {
    if (bereq.http.X-Body-Len) {
        set bereq.method = "POST";
    }
}
"#;

#[tokio::test]
async fn posts_with_the_same_body_are_one_origin_fetch_and_another_body_is_another() {
    let origin = Origin::start(|request| {
        let body = String::from_utf8_lossy(request.body()).into_owned();
        OriginReply::ok(format!("answer to {body}")).cache_control("max-age=60")
    })
    .await;
    let (_proxy, addr) = start_with_policy("bodyaccess", POLICY, &origin).await;
    let query = r#"{"query":"{ user(id: 1) { name } }"}"#;

    let first = send("POST", addr, "/graphql", &[], query).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(first.text(), format!("answer to {query}"));
    let seen = origin.last();
    assert_eq!(seen.method, http::Method::POST, "the fetch is a POST again");
    assert_eq!(
        &seen.body[..],
        query.as_bytes(),
        "the origin gets the buffered body"
    );

    let again = send("POST", addr, "/graphql", &[], query).await;
    assert_eq!(again.text(), format!("answer to {query}"));
    assert_eq!(origin.requests(), 1, "the same body is a hit");

    let other = r#"{"query":"{ user(id: 2) { name } }"}"#;
    let second = send("POST", addr, "/graphql", &[], other).await;
    assert_eq!(second.text(), format!("answer to {other}"));
    assert_eq!(origin.requests(), 2, "another body is another object");

    let big = send("POST", addr, "/graphql", &[], vec![b'x'; 2048]).await;
    assert_eq!(big.status, StatusCode::from_u16(413).unwrap());
    assert_eq!(
        origin.requests(),
        2,
        "a body over the size never reaches the origin"
    );
}
