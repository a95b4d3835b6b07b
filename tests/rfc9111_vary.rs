//! `Vary` on weighted lists (RFC 9111 §4.1; RFC 9110 §12.4.2, §12.5.3, §12.5.4): requests
//! whose `Accept-Language` means the same (order, whitespace, case, how weights are written)
//! share a variant; `Accept-Encoding` of a looked-up request is washed to `gzip` or removed,
//! as Varnish's `http_gzip_support` does, so the origin is asked for gzip or identity and an
//! object varying on it has at most two variants. Passed requests keep their own.

mod support;

use support::{get, send, start_proxy, Origin, OriginReply};

/// Answers with the value of `field` it received, varying on it.
fn echo(field: &'static str) -> impl Fn(&http::Request<bytes::Bytes>) -> OriginReply + Send + Sync + 'static {
    move |request| {
        let value = request
            .headers()
            .get(field)
            .map_or("none", |v| v.to_str().unwrap());
        OriginReply::ok(format!("{field}={value}"))
            .cache_control("max-age=60")
            .header("vary", field)
    }
}

support::modes! {
    async fn equivalent_accept_language_values_share_a_variant() {
        let origin = Origin::start(echo("accept-language")).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let first = get(addr, "/page", &[("accept-language", "en-US, fr;q=0.8, de;q=0.5")]).await;
        assert_eq!(first.cache(), "MISS");
        support::eventually_stored(&proxy, 1).await;
        for same in [
            "en-US, fr;q=0.8, de;q=0.5",
            "de;q=0.50, FR;q=0.8,en-us",
            "en-us;q=1.0 , fr ; q=0.800, de;q=0.5",
        ] {
            let reply = get(addr, "/page", &[("accept-language", same)]).await;
            assert_eq!(reply.cache(), "HIT", "Accept-Language: {same}");
            assert_eq!(reply.text(), "accept-language=en-US, fr;q=0.8, de;q=0.5");
        }
        assert_eq!(origin.requests(), 1);

        // Other weights or another tag mean another answer.
        for other in [
            "fr, en-US;q=0.8, de;q=0.5",
            "en-US, fr;q=0.8",
            "en, fr;q=0.8, de;q=0.5",
        ] {
            let reply = get(addr, "/page", &[("accept-language", other)]).await;
            assert_eq!(reply.cache(), "MISS", "Accept-Language: {other}");
            assert_eq!(reply.text(), format!("accept-language={other}"));
        }
        assert_eq!(origin.requests(), 4);
    }
}

support::modes! {
    async fn accept_encoding_is_washed_to_gzip_or_nothing_for_lookups() {
        let origin = Origin::start(echo("accept-encoding")).await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let gzip = get(addr, "/asset", &[("accept-encoding", "br, gzip;q=0.9, deflate")]).await;
        assert_eq!(gzip.cache(), "MISS");
        assert_eq!(
            origin.last().header("accept-encoding"),
            Some("gzip"),
            "the origin is asked for gzip only"
        );
        support::eventually_stored(&proxy, 1).await;
        for accepts_gzip in ["gzip", "GZIP;q=1.0, br", "x-gzip", "deflate, gzip;q=0.1"] {
            let reply = get(addr, "/asset", &[("accept-encoding", accepts_gzip)]).await;
            assert_eq!(
                (reply.cache(), reply.text().as_str()),
                ("HIT", "accept-encoding=gzip"),
                "Accept-Encoding: {accepts_gzip}"
            );
        }

        let identity = get(addr, "/asset", &[("accept-encoding", "br")]).await;
        assert_eq!(identity.cache(), "MISS");
        assert_eq!(
            identity.text(),
            "accept-encoding=none",
            "removed: the origin answers identity"
        );
        for no_gzip in ["identity", "gzip;q=0, br", "*"] {
            let reply = get(addr, "/asset", &[("accept-encoding", no_gzip)]).await;
            assert_eq!(
                (reply.cache(), reply.text().as_str()),
                ("HIT", "accept-encoding=none"),
                "Accept-Encoding: {no_gzip}"
            );
        }
        let without = get(addr, "/asset", &[]).await;
        assert_eq!(
            (without.cache(), without.text().as_str()),
            ("HIT", "accept-encoding=none")
        );
        assert_eq!(origin.requests(), 2, "two variants for eleven spellings");
    }
}

support::modes! {
    async fn passed_requests_keep_their_accept_encoding() {
        let origin = Origin::start(echo("accept-encoding")).await;
        let (_proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        let with_cookie = get(addr, "/account", &[("accept-encoding", "br"), ("cookie", "s=1")]).await;
        assert_eq!(with_cookie.cache(), "PASS");
        assert_eq!(with_cookie.text(), "accept-encoding=br");
        let posted = send("POST", addr, "/form", &[("accept-encoding", "br, gzip")], "x=1").await;
        assert_eq!(posted.cache(), "PASS");
        assert_eq!(posted.text(), "accept-encoding=br, gzip");
    }
}
