//! Requests with `Authorization` or `Cookie` (RFC 9111 §3.5). By default the builtin
//! `vcl_recv` passes them, as Varnish's does (`rfc9111_details.rs`); `--lookup-with-authorization`
//! and `--lookup-with-cookie` look them up instead, with or without a policy wherever the
//! builtin decides. A response to a request with `Authorization` is then stored only when it
//! allows a shared cache to (`public`, `s-maxage`, `must-revalidate`); anything else is fetched
//! again for every request. A policy whose own `vcl_recv` passes such requests still passes
//! them.

mod support;

use support::{get, start_proxy, Origin, OriginReply};

/// Answers `for <Authorization or Cookie>` with the `Cache-Control` its path names, and
/// `Vary: Cookie` under `/varied`.
async fn origin() -> Origin {
    Origin::start(|request| {
        let who = request
            .headers()
            .get("authorization")
            .or_else(|| request.headers().get("cookie"))
            .map_or("anyone".to_string(), |v| v.to_str().unwrap().to_string());
        let reply = OriginReply::ok(format!("for {who}"));
        match request.uri().path() {
            "/public" => reply.cache_control("public, max-age=60"),
            "/s-maxage" => reply.cache_control("s-maxage=60"),
            "/must-revalidate" => reply.cache_control("max-age=60, must-revalidate"),
            "/varied" => reply.cache_control("max-age=60").header("vary", "cookie"),
            _ => reply.cache_control("max-age=60"),
        }
    })
    .await
}

support::modes! {
    async fn lookup_with_authorization_stores_only_what_section_3_5_allows() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.lookup_with_authorization = true).await;
        let alice = ("authorization", "Bearer alice");
        let bob = ("authorization", "Bearer bob");

        for (n, path) in ["/public", "/s-maxage", "/must-revalidate"].into_iter().enumerate() {
            let first = get(addr, path, &[alice]).await;
            assert_eq!((first.cache(), first.text().as_str()), ("MISS", "for Bearer alice"), "{path}");
            assert_eq!(origin.last().header("authorization"), Some("Bearer alice"), "{path}: forwarded");
            support::eventually_stored(&proxy, n as u64 + 1).await;
            let shared = get(addr, path, &[bob]).await;
            assert_eq!(
                (shared.cache(), shared.text().as_str()),
                ("HIT", "for Bearer alice"),
                "{path}: the response allows a shared cache to reuse it"
            );
        }
        assert_eq!(origin.requests(), 3);

        // Only max-age: not stored for requests with Authorization (RFC 9111 §3.5).
        let first = get(addr, "/private-by-default", &[alice]).await;
        assert_eq!(first.text(), "for Bearer alice");
        let again = get(addr, "/private-by-default", &[bob]).await;
        assert_eq!(again.text(), "for Bearer bob", "the origin answered again");
        assert_eq!(origin.requests(), 5);

        // Cookies are still passed: the two switches are independent.
        let cookie = get(addr, "/public", &[("cookie", "s=1")]).await;
        assert_eq!((cookie.cache(), cookie.text().as_str()), ("PASS", "for s=1"));
    }
}

support::modes! {
    async fn lookup_with_cookie_looks_up_requests_with_cookies() {
        let origin = origin().await;
        let (proxy, addr) = start_proxy(origin.addr, |config| config.lookup_with_cookie = true).await;

        let first = get(addr, "/page", &[("cookie", "s=1")]).await;
        assert_eq!((first.cache(), first.text().as_str()), ("MISS", "for s=1"));
        assert_eq!(origin.last().header("cookie"), Some("s=1"), "forwarded");
        support::eventually_stored(&proxy, 1).await;
        for cookie in [&[("cookie", "s=2")][..], &[]] {
            let hit = get(addr, "/page", cookie).await;
            assert_eq!((hit.cache(), hit.text().as_str()), ("HIT", "for s=1"), "{cookie:?}");
        }

        // `Vary: Cookie` keeps one variant per cookie.
        let first = get(addr, "/varied", &[("cookie", "a=1")]).await;
        assert_eq!((first.cache(), first.text().as_str()), ("MISS", "for a=1"));
        support::eventually_stored(&proxy, 2).await;
        let other = get(addr, "/varied", &[("cookie", "b=2")]).await;
        assert_eq!((other.cache(), other.text().as_str()), ("MISS", "for b=2"));
        let again = get(addr, "/varied", &[("cookie", "a=1")]).await;
        assert_eq!((again.cache(), again.text().as_str()), ("HIT", "for a=1"));

        // Authorization is still passed.
        let authorized = get(addr, "/page", &[("authorization", "Bearer alice")]).await;
        assert_eq!(authorized.cache(), "PASS");
    }
}

/// The switches change the builtin's decision only: a policy whose own `vcl_recv` passes
/// requests with cookies still passes them.
#[tokio::test]
async fn a_policy_that_passes_cookies_itself_still_passes_them() {
    let origin = origin().await;
    let policy = "vcl 4.1;\nsub vcl_recv { if (req.http.cookie) { return (pass); } }\n";
    let path = support::write_policy("cookie_pass", policy);
    let (_proxy, addr) = start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.lookup_with_cookie = true;
    })
    .await;
    for _ in 0..2 {
        let reply = get(addr, "/page", &[("cookie", "s=1")]).await;
        assert_eq!(reply.cache(), "PASS");
    }
    assert_eq!(origin.requests(), 2);
}
