use http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

use super::client::encode_query_value;
use super::{authorized, percent_decode, query_param};

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
