//! `Vary` as secondary keys (RFC 9111 §4.1): one stored variant per selecting header value,
//! `Vary: *` never matches.

mod support;

use support::{get, start_proxy, Origin, OriginReply};

fn by_language() -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    |request| {
        let language = request
            .headers()
            .get("accept-language")
            .map_or("none", |v| v.to_str().unwrap());
        OriginReply::ok(format!("in {language}"))
            .cache_control("max-age=60")
            .header("vary", "Accept-Language")
    }
}

#[tokio::test]
async fn each_accept_language_gets_its_variant() {
    let origin = Origin::start(by_language()).await;
    let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    let en = get(addr, "/page", &[("accept-language", "en")]).await;
    assert_eq!((en.cache(), en.text().as_str()), ("MISS", "in en"));
    let fr = get(addr, "/page", &[("accept-language", "fr")]).await;
    assert_eq!(
        (fr.cache(), fr.text().as_str()),
        ("MISS", "in fr"),
        "a different variant is not a hit"
    );
    assert_eq!(origin.requests(), 2, "two values, two origin fetches");

    let en = get(addr, "/page", &[("accept-language", "en")]).await;
    assert_eq!((en.cache(), en.text().as_str()), ("HIT", "in en"));
    let fr = get(addr, "/page", &[("accept-language", "fr")]).await;
    assert_eq!((fr.cache(), fr.text().as_str()), ("HIT", "in fr"));
    assert_eq!(fr.header("vary"), Some("Accept-Language"));
    assert_eq!(origin.requests(), 2, "both variants served from cache");
    assert_eq!(proxy.cache_usage().keys, 1, "variants live under one primary key");
}

#[tokio::test]
async fn a_request_without_the_header_is_its_own_variant() {
    let origin = Origin::start(by_language()).await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

    get(addr, "/page", &[("accept-language", "en")]).await;
    let none = get(addr, "/page", &[]).await;
    assert_eq!(
        none.text(),
        "in none",
        "the en variant must not answer a request without Accept-Language"
    );
    assert_eq!(origin.requests(), 2);
    let none = get(addr, "/page", &[]).await;
    assert_eq!((none.cache(), none.text().as_str()), ("HIT", "in none"));
    assert_eq!(origin.requests(), 2);
}

#[tokio::test]
async fn vary_star_never_matches() {
    let origin = Origin::fixed(
        OriginReply::ok("star")
            .cache_control("max-age=60")
            .header("vary", "*"),
    )
    .await;
    let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;
    for round in 1..=3 {
        let reply = get(addr, "/star", &[]).await;
        assert_eq!(reply.body, "star");
        assert_ne!(reply.cache(), "HIT", "round {round}");
        assert_eq!(origin.requests(), round);
    }
}
