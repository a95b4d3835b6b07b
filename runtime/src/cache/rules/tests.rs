use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::control::ResponseDirectives;
use super::strip_field_scoped;

/// Header name/value pairs of a table row.
pub(in crate::cache::rules) type Pairs<'a> = &'a [(&'a str, &'a str)];

/// A header map from a table row's pairs (repeated names become several lines).
pub(in crate::cache::rules) fn headers(pairs: Pairs<'_>) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

#[test]
fn strips_field_scoped_directives() {
    #[rustfmt::skip]
    let table: &[(&str, &[&str], &[&str])] = &[
        // (cache-control, removed, kept)
        // RFC 9111 §5.2.2.4: no-cache="..." fields are not reused without revalidation
        ("no-cache=\"Set-Cookie, X-A\", max-age=5", &["set-cookie", "x-a"], &["x-b", "x-c"]),
        // RFC 9111 §5.2.2.7: private="..." fields are not stored by shared caches
        ("private=\"x-b\"", &["x-b"], &["set-cookie", "x-a", "x-c"]),
        // RFC 9111 §5.2.2.4 + §5.2.2.7 together
        ("private=x-c, no-cache=x-a", &["x-a", "x-c"], &["set-cookie", "x-b"]),
        // RFC 9111 §5.2.2.4: unqualified forms strip nothing
        ("no-cache", &[], &["set-cookie", "x-a", "x-b", "x-c"]),
    ];
    for (cc, removed, kept) in table {
        let mut h = HeaderMap::new();
        for name in ["set-cookie", "x-a", "x-b", "x-c"] {
            h.append(HeaderName::from_static(name), HeaderValue::from_static("1"));
            h.append(HeaderName::from_static(name), HeaderValue::from_static("2"));
        }
        h.insert(
            HeaderName::from_static("cache-control"),
            HeaderValue::from_str(cc).unwrap(),
        );
        let dirs = ResponseDirectives::from_headers(&h, None);
        strip_field_scoped(&mut h, &dirs);
        for name in *removed {
            assert!(!h.contains_key(*name), "{cc}: {name} removed");
        }
        for name in *kept {
            assert_eq!(h.get_all(*name).iter().count(), 2, "{cc}: {name} kept");
        }
    }
}
