use http::{Method, StatusCode, Uri};

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

#[test]
fn unsafe_methods() {
    #[rustfmt::skip]
    let table: &[(&str, bool)] = &[
        // RFC 9110 §9.2.1: safe methods
        ("GET", false), ("HEAD", false), ("OPTIONS", false), ("TRACE", false),
        // RFC 9111 §4.4: unsafe
        ("POST", true), ("PUT", true), ("DELETE", true), ("PATCH", true),
        // RFC 9111 §4.4: methods whose safety is unknown
        ("FROB", true),
    ];
    for (m, want) in table {
        assert_eq!(
            is_unsafe(&Method::from_bytes(m.as_bytes()).unwrap()),
            *want,
            "{m}"
        );
    }
}

#[test]
fn targets() {
    let post = Method::POST;
    let target = "http://Example.com/a/b/c?x=1";
    #[rustfmt::skip]
    let table: &[(&Method, u16, &str, Pairs, &[&str])] = &[
        // (method, status, target, response headers, invalidated URIs)
        // §4.4: non-error response to an unsafe method invalidates the target URI
        (&post, 200, target, &[], &["http://example.com/a/b/c?x=1"]),
        // §4.4: 3xx is a non-error status
        (&post, 303, target, &[], &["http://example.com/a/b/c?x=1"]),
        // §4.4: error responses invalidate nothing
        (&post, 500, target, &[("location", "/z")], &[]),
        // §4.4: 4xx too
        (&post, 404, target, &[], &[]),
        // §4.4: safe methods invalidate nothing
        (&Method::GET, 200, target, &[], &[]),
        // §4.4: unknown methods do
        (&Method::from_bytes(b"FROB").unwrap(), 204, target, &[], &["http://example.com/a/b/c?x=1"]),
        // §4.4: same-origin absolute Location
        (&post, 201, target, &[("location", "http://EXAMPLE.com:80/new")], &["http://example.com/a/b/c?x=1", "http://example.com/new"]),
        // §4.4: other host ignored
        (&post, 201, target, &[("location", "http://other.com/new")], &["http://example.com/a/b/c?x=1"]),
        // §4.4: other scheme is another origin
        (&post, 201, target, &[("location", "https://example.com/new")], &["http://example.com/a/b/c?x=1"]),
        // §4.4: other port is another origin
        (&post, 201, target, &[("location", "http://example.com:8080/new")], &["http://example.com/a/b/c?x=1"]),
        // §4.4 + RFC 3986 §5.2: relative path reference
        (&post, 201, target, &[("location", "d?y=2")], &["http://example.com/a/b/c?x=1", "http://example.com/a/b/d?y=2"]),
        // RFC 3986 §5.2.4: dot segments
        (&post, 201, target, &[("location", "../../e")], &["http://example.com/a/b/c?x=1", "http://example.com/e"]),
        // RFC 3986 §5.2.2: absolute-path reference, fragment dropped
        (&post, 201, target, &[("content-location", "/f#frag")], &["http://example.com/a/b/c?x=1", "http://example.com/f"]),
        // RFC 3986 §5.2.2: network-path reference to another host
        (&post, 201, target, &[("content-location", "//evil.com/f")], &["http://example.com/a/b/c?x=1"]),
        // RFC 3986 §5.2.2: query-only reference
        (&post, 201, target, &[("location", "?q")], &["http://example.com/a/b/c?x=1", "http://example.com/a/b/c?q"]),
        // §4.4: both fields, deduplicated
        (&post, 200, target, &[("location", "/g"), ("content-location", "http://example.com/g")], &["http://example.com/a/b/c?x=1", "http://example.com/g"]),
        // §4.4: Location equal to the target is not repeated
        (&post, 200, target, &[("location", "/a/b/c?x=1")], &["http://example.com/a/b/c?x=1"]),
        // RFC 9110 §4.2.2: https default port
        (&Method::DELETE, 200, "https://example.com:443/x", &[("location", "https://example.com/y")], &["https://example.com/x", "https://example.com/y"]),
        // origin-form target: relative references resolve, absolute ones are ignored
        (&post, 200, "/a/b?x", &[("location", "c"), ("content-location", "http://example.com/d")], &["/a/b?x", "/a/c"]),
        // RFC 3986 §4.2: an unparseable reference is ignored
        (&post, 200, target, &[("location", "http://exa mple.com/")], &["http://example.com/a/b/c?x=1"]),
        // IPv6 literal host with explicit non-default port
        (&post, 200, "http://[::1]:8080/a", &[("location", "http://[::1]:8080/b")], &["http://[::1]:8080/a", "http://[::1]:8080/b"]),
    ];
    for (method, status, target, resp, want) in table {
        let got = invalidation_targets(
            method,
            StatusCode::from_u16(*status).unwrap(),
            &target.parse::<Uri>().unwrap(),
            &headers(resp),
        );
        let got: Vec<String> = got.iter().map(|u| u.to_string()).collect();
        assert_eq!(got, *want, "{method} {status} {target} {resp:?}");
    }
}

#[test]
fn dot_segments() {
    #[rustfmt::skip]
    let table: Pairs = &[
        // RFC 3986 §5.2.4 examples
        ("/a/b/c/./../../g", "/a/g"),
        ("mid/content=5/../6", "mid/6"),
        ("/..", "/"),
        ("/a/..", "/"),
        ("/a/.", "/a/"),
        ("", ""),
    ];
    for (input, want) in table {
        assert_eq!(remove_dot_segments(input), *want, "{input}");
    }
}
