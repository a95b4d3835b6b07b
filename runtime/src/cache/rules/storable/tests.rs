use std::time::Duration;

use http::header::{HeaderMap, HeaderName};
use http::{Method, StatusCode, Uri};

use super::*;
use crate::cache::rules::control::ResponseDirectives;
use crate::cache::rules::tests::headers;

const DATE: &str = "Mon, 01 Jan 2024 00:00:00 GMT";
const OLD: &str = "Sun, 31 Dec 2023 00:00:00 GMT";

struct Row {
    method: Method,
    req: &'static [(&'static str, &'static str)],
    status: u16,
    resp: &'static [(&'static str, &'static str)],
    want: Result<(), NotStorable>,
}

fn row(
    method: Method,
    req: &'static [(&'static str, &'static str)],
    status: u16,
    resp: &'static [(&'static str, &'static str)],
    want: Result<(), NotStorable>,
) -> Row {
    Row {
        method,
        req,
        status,
        resp,
        want,
    }
}

#[test]
fn storability() {
    use NotStorable as N;
    let get = || Method::GET;
    let ma = &[("date", DATE), ("cache-control", "max-age=60")];
    #[rustfmt::skip]
    let table = vec![
        // §3: explicit freshness, GET, 200
        row(get(), &[], 200, ma, Ok(())),
        // §3: only GET is stored; POST is not
        row(Method::POST, &[], 200, ma, Err(N::Method)),
        // §3: unknown methods are not stored
        row(Method::from_bytes(b"FOO").unwrap(), &[], 200, ma, Err(N::Method)),
        // §3 + RFC 9110 §9.3.2: HEAD responses have no body; not stored
        row(Method::HEAD, &[], 200, ma, Err(N::Head)),
        // §3: interim responses are never stored (100, 102, 103)
        row(get(), &[], 100, ma, Err(N::Status)),
        // §3
        row(get(), &[], 103, ma, Err(N::Status)),
        // §3: 206 not stored by this cache
        row(get(), &[], 206, ma, Err(N::Status)),
        // §3, §4.3.4: 304 only updates
        row(get(), &[], 304, ma, Err(N::Status)),
        // §5.2.1.5: request no-store
        row(get(), &[("cache-control", "no-store")], 200, ma, Err(N::RequestNoStore)),
        // §5.2.2.5: response no-store
        row(get(), &[], 200, &[("cache-control", "max-age=60, no-store")], Err(N::NoStore)),
        // §5.2.2.3: must-understand with an understood status ignores no-store
        row(get(), &[], 200, &[("cache-control", "max-age=60, no-store, must-understand")], Ok(())),
        // §5.2.2.3: must-understand with an unknown status: not stored
        row(get(), &[], 299, &[("cache-control", "max-age=60, no-store, must-understand")], Err(N::MustUnderstand)),
        // §5.2.2.7: private
        row(get(), &[], 200, &[("cache-control", "private, max-age=60")], Err(N::Private)),
        // §5.2.2.7: qualified private only strips fields
        row(get(), &[], 200, &[("cache-control", "private=\"x-user\", max-age=60")], Ok(())),
        // §3.5: Authorization without explicit permission
        row(get(), &[("authorization", "Basic eA==")], 200, ma, Err(N::Authorization)),
        // §3.5: public allows it
        row(get(), &[("authorization", "Basic eA==")], 200, &[("cache-control", "public, max-age=60")], Ok(())),
        // §3.5: s-maxage allows it
        row(get(), &[("authorization", "Basic eA==")], 200, &[("cache-control", "s-maxage=60")], Ok(())),
        // §3.5: must-revalidate allows it
        row(get(), &[("authorization", "Basic eA==")], 200, &[("cache-control", "must-revalidate, max-age=60")], Ok(())),
        // §4.1: Vary: * in any position is never reusable
        row(get(), &[], 200, &[("cache-control", "max-age=60"), ("vary", "accept, *")], Err(N::VaryStar)),
        // §4.1: Vary: * on a second field line
        row(get(), &[], 200, &[("cache-control", "max-age=60"), ("vary", "accept"), ("vary", "*")], Err(N::VaryStar)),
        // Varnish builtin: Set-Cookie not stored by default
        row(get(), &[], 200, &[("cache-control", "max-age=60"), ("set-cookie", "a=b")], Err(N::SetCookie)),
        // §5.2.2.4: no-cache="set-cookie" strips it, so the rest is stored
        row(get(), &[], 200, &[("cache-control", "max-age=60, no-cache=\"Set-Cookie\""), ("set-cookie", "a=b")], Ok(())),
        // §5.2.2.7: private="set-cookie" strips it too
        row(get(), &[], 200, &[("cache-control", "max-age=60, private=set-cookie"), ("set-cookie", "a=b")], Ok(())),
        // §3: any status may be stored with explicit freshness
        row(get(), &[], 500, &[("cache-control", "max-age=60")], Ok(())),
        // §3: invalid Expires still counts as explicit (already stale, revalidated)
        row(get(), &[], 302, &[("date", DATE), ("expires", "0")], Ok(())),
        // §3: 302 without explicit freshness is not stored
        row(get(), &[], 302, &[("date", DATE), ("etag", "\"a\"")], Err(N::NoFreshness)),
        // §3 + §5.2.2.9: public makes it heuristically cacheable
        row(get(), &[], 302, &[("date", DATE), ("etag", "\"a\""), ("cache-control", "public")], Ok(())),
        // §3: heuristically cacheable with Last-Modified (heuristic + validator)
        row(get(), &[], 200, &[("date", DATE), ("last-modified", OLD)], Ok(())),
        // §3: heuristically cacheable with ETag only (revalidated on use)
        row(get(), &[], 404, &[("date", DATE), ("etag", "W/\"x\"")], Ok(())),
        // §3: nothing to reuse it with: no freshness, no validator, -t 0
        row(get(), &[], 200, &[("date", DATE)], Err(N::NoFreshness)),
        // §3: ... unless a stale window makes it reusable
        row(get(), &[], 200, &[("date", DATE), ("cache-control", "stale-if-error=60")], Ok(())),
        // §5.2.2.4: no-cache with a validator: stored, revalidated on each use
        row(get(), &[], 200, &[("cache-control", "no-cache, max-age=60"), ("etag", "\"v\"")], Ok(())),
        // §5.2.2.4: no-cache without a validator: never reusable without a full fetch
        row(get(), &[], 200, &[("cache-control", "no-cache, max-age=60")], Err(N::NoCacheWithoutValidator)),
        // §3: an invalid Last-Modified is not a validator
        row(get(), &[], 200, &[("date", DATE), ("last-modified", "never")], Err(N::NoFreshness)),
    ];
    let opts = StoreOptions::default();
    for r in &table {
        let req = headers(r.req);
        let resp = headers(r.resp);
        let dirs = ResponseDirectives::from_headers(&resp, None);
        let status = StatusCode::from_u16(r.status).unwrap();
        let got = check_storable(&r.method, &req, status, &resp, &dirs, &opts);
        assert_eq!(got, r.want, "{} {:?} {} {:?}", r.method, r.req, r.status, r.resp);
    }
}

#[test]
fn options_change_the_outcome() {
    let resp = headers(&[("date", DATE), ("set-cookie", "a=b")]);
    let dirs = ResponseDirectives::from_headers(&resp, None);
    let req = HeaderMap::new();
    #[rustfmt::skip]
    let table: &[(bool, u64, Result<(), NotStorable>)] = &[
        // Varnish builtin default: Set-Cookie refused
        (false, 120, Err(NotStorable::SetCookie)),
        // store_set_cookie + -t 120: stored with the default TTL
        (true, 120, Ok(())),
        // §3: store_set_cookie but -t 0 and no validator: nothing to reuse
        (true, 0, Err(NotStorable::NoFreshness)),
    ];
    for (set_cookie, ttl, want) in table {
        let opts = StoreOptions {
            store_set_cookie: *set_cookie,
            default_ttl: Duration::from_secs(*ttl),
        };
        let got = check_storable(&Method::GET, &req, StatusCode::OK, &resp, &dirs, &opts);
        assert_eq!(got, *want, "{set_cookie} {ttl}");
    }
}

#[test]
fn targeted_field_governs_storability() {
    // RFC 9213 §2.2: CDN-Cache-Control replaces Cache-Control: private there does not apply
    let cdn = HeaderName::from_static("cdn-cache-control");
    let resp = headers(&[
        ("cache-control", "private, no-store"),
        ("cdn-cache-control", "max-age=60"),
    ]);
    let dirs = ResponseDirectives::from_headers(&resp, Some(&cdn));
    let got = check_storable(
        &Method::GET,
        &HeaderMap::new(),
        StatusCode::OK,
        &resp,
        &dirs,
        &StoreOptions::default(),
    );
    assert_eq!(got, Ok(()));
}

#[test]
fn reason_names() {
    // Stable names for logs.
    assert_eq!(NotStorable::NoStore.as_str(), "no-store");
    assert_eq!(NotStorable::VaryStar.to_string(), "vary-star");
}

#[test]
fn post_responses_reusable_for_get() {
    let target: Uri = "http://example.com/cart?id=1".parse().unwrap();
    #[rustfmt::skip]
    let table: &[(crate::cache::rules::tests::Pairs, bool)] = &[
        // RFC 9110 §9.3.3: explicit freshness and Content-Location equal to the target URI
        (&[("cache-control", "max-age=60"), ("content-location", "http://example.com/cart?id=1")], true),
        // §9.3.3 + RFC 3986 §5.2: a reference resolved against the target URI
        (&[("cache-control", "max-age=60"), ("content-location", "/cart?id=1")], true),
        (&[("cache-control", "max-age=60"), ("content-location", "cart?id=1")], true),
        (&[("cache-control", "max-age=60"), ("content-location", "/x/../cart?id=1")], true),
        // RFC 3986 §6.2: scheme and host in any case, the default port, a fragment
        (&[("cache-control", "max-age=60"), ("content-location", "HTTP://Example.COM:80/cart?id=1#top")], true),
        // RFC 9111 §4.2.1: s-maxage and Expires are explicit freshness too
        (&[("cache-control", "s-maxage=60"), ("content-location", "/cart?id=1")], true),
        (&[("expires", DATE), ("content-location", "/cart?id=1")], true),
        // §9.3.3: no explicit freshness (heuristics do not count)
        (&[("content-location", "/cart?id=1"), ("last-modified", OLD)], false),
        (&[("cache-control", "public"), ("content-location", "/cart?id=1")], false),
        // §9.3.3: no Content-Location
        (&[("cache-control", "max-age=60")], false),
        // §9.3.3: Content-Location names another resource
        (&[("cache-control", "max-age=60"), ("content-location", "/cart")], false),
        (&[("cache-control", "max-age=60"), ("content-location", "/cart?id=2")], false),
        (&[("cache-control", "max-age=60"), ("content-location", "/Cart?id=1")], false),
        (&[("cache-control", "max-age=60"), ("content-location", "http://other.example/cart?id=1")], false),
        (&[("cache-control", "max-age=60"), ("content-location", "https://example.com/cart?id=1")], false),
        (&[("cache-control", "max-age=60"), ("content-location", "http://example.com:8080/cart?id=1")], false),
    ];
    for (resp, want) in table {
        let resp = headers(resp);
        let dirs = ResponseDirectives::from_headers(&resp, None);
        assert_eq!(post_reusable_for_get(&target, &resp, &dirs), *want, "{resp:?}");
    }
}
