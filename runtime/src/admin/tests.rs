use http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use super::client::encode_query_value;
use super::guard::{Guard, Refusal};
use super::{authorized, ban_expression, percent_decode, query_param};

#[test]
fn query_params_are_percent_decoded() {
    let cases = [
        ("url=/a", "url", Some("/a")),
        ("host=x&url=%2Fnews%3Fpage%3D2", "url", Some("/news?page=2")),
        ("url=/a+b", "url", Some("/a+b")),
        ("url", "url", Some("")),
        ("host=x", "url", None),
        ("url=%zz", "url", Some("%zz")),
    ];
    for (query, name, expected) in cases {
        assert_eq!(query_param(query, name).as_deref(), expected, "{query}");
    }
}

#[test]
fn encoding_round_trips() {
    for value in [
        "/news?page=2&x=1",
        "/a b#c",
        "/ünï",
        "http://example.com:8080/p?q",
    ] {
        assert_eq!(percent_decode(&encode_query_value(value)), value);
    }
}

#[test]
fn bearer_tokens_are_checked() {
    let expected: [u8; 32] = Sha256::digest(b"s3cret").into();
    let cases = [
        (Some("Bearer s3cret"), true),
        (Some("bearer s3cret"), true),
        (Some("Bearer  s3cret "), true),
        (Some("Bearer s3cre"), false),
        (Some("Bearer s3cretx"), false),
        (Some("Basic s3cret"), false),
        (Some("s3cret"), false),
        (None, false),
    ];
    for (header, ok) in cases {
        let mut headers = HeaderMap::new();
        if let Some(value) = header {
            headers.insert("authorization", HeaderValue::from_static(value));
        }
        assert_eq!(authorized(&headers, &expected), ok, "{header:?}");
    }
}

#[test]
fn the_guard_refuses_what_a_page_of_another_site_can_send() {
    let guard = Guard::new("127.0.0.1:6082".parse().unwrap());
    let allowed = |method: &str, fields: &[(&'static str, &'static str)], token: bool| {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(*name, HeaderValue::from_static(value));
        }
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        guard.check(&method, &headers, token)
    };
    const JSON: (&str, &str) = ("content-type", "application/json");
    // method, header fields, carries the token, which rule refuses it
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        bool,
        Option<&'static str>,
    );
    let cases: [Case; 16] = [
        ("GET", &[("host", "127.0.0.1:6082")], false, None),
        ("GET", &[], false, None),
        ("GET", &[("host", "localhost:6082")], false, None),
        ("GET", &[("host", "[::1]:6082")], false, None),
        ("GET", &[("host", "evil.example:6082")], false, Some("host")),
        ("GET", &[("host", "127.0.0.1:6083")], false, Some("host")),
        ("GET", &[("host", "localhost")], false, Some("host")),
        ("GET", &[("host", "evil.example:6082")], true, None),
        ("POST", &[("host", "127.0.0.1:6082"), JSON], false, None),
        (
            "POST",
            &[
                ("host", "127.0.0.1:6082"),
                ("content-type", "Application/JSON; charset=utf-8"),
            ],
            false,
            None,
        ),
        (
            "POST",
            &[("host", "127.0.0.1:6082"), ("content-type", "text/plain")],
            false,
            Some("json"),
        ),
        ("POST", &[("host", "127.0.0.1:6082")], false, Some("json")),
        ("POST", &[("content-type", "text/plain")], true, None),
        ("POST", &[("origin", "http://127.0.0.1:6082"), JSON], false, None),
        (
            "POST",
            &[("origin", "http://evil.example"), JSON],
            true,
            Some("origin"),
        ),
        (
            "POST",
            &[("host", "cache1:6082"), ("origin", "http://cache1:6082")],
            true,
            None,
        ),
    ];
    for (method, fields, token, refused) in cases {
        let outcome = match allowed(method, fields, token) {
            Ok(()) => None,
            Err(Refusal::ForeignHost { .. }) => Some("host"),
            Err(Refusal::ForeignOrigin { .. }) => Some("origin"),
            Err(Refusal::NotJson { .. }) => Some("json"),
        };
        assert_eq!(outcome, refused, "{method} {fields:?} token={token}");
    }
    for origin in [
        "null",
        "https://127.0.0.1:6082",
        "http://127.0.0.1:6082/",
        "http://localhost:80",
    ] {
        let mut headers = HeaderMap::new();
        headers.insert("origin", HeaderValue::from_str(origin).unwrap());
        assert!(
            guard.check(&http::Method::GET, &headers, false).is_err(),
            "{origin}"
        );
    }
}

#[test]
fn ban_bodies_are_a_json_string_or_an_object() {
    let cases: [(&str, bool, Option<&str>); 7] = [
        (r#""req.url ~ \"^/a\"""#, true, Some(r#"req.url ~ "^/a""#)),
        (r#"{"ban": "req.url == \"/\""}"#, true, Some(r#"req.url == "/""#)),
        (r#"{"ban": "x", "more": 1}"#, true, None),
        (r#"{"expr": "x"}"#, true, None),
        (r#"req.url ~ "^/a""#, true, None),
        ("[]", true, None),
        (r#"req.url ~ "^/a""#, false, Some(r#"req.url ~ "^/a""#)),
    ];
    for (body, json, expected) in cases {
        assert_eq!(
            ban_expression(body.as_bytes(), json)
                .ok()
                .as_ref()
                .map(|(expr, _)| expr.as_str()),
            expected,
            "{body}"
        );
    }
}

#[test]
fn a_ban_forwarded_by_a_peer_carries_its_creation_time() {
    let body = r#"{"ban": "req.url == \"/\"", "created": 1767225600.5}"#;
    assert_eq!(
        ban_expression(body.as_bytes(), true),
        Ok((r#"req.url == "/""#.to_string(), Some(1_767_225_600.5)))
    );
    assert!(ban_expression(br#"{"ban": "x", "created": "yesterday"}"#, true).is_err());
}
