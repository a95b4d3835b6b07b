use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

const D0: &str = "Mon, 01 Jan 2024 00:00:00 GMT";
const D1: &str = "Mon, 01 Jan 2024 01:00:00 GMT";
const D2: &str = "Mon, 01 Jan 2024 02:00:00 GMT";
/// D1 as a time.
fn t1() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_704_070_800)
}

#[test]
fn entity_tags() {
    #[rustfmt::skip]
    let table: &[(&str, Option<(bool, &str)>)] = &[
        // RFC 9110 §8.8.3: strong
        ("\"abc\"", Some((false, "abc"))),
        // RFC 9110 §8.8.3: weak
        ("W/\"abc\"", Some((true, "abc"))),
        // RFC 9110 §8.8.3: empty opaque-tag is valid
        ("\"\"", Some((false, ""))),
        // RFC 9110 §8.8.3: unquoted is invalid
        ("abc", None),
        // RFC 9110 §8.8.3: lowercase w/ is not the weak prefix
        ("w/\"abc\"", None),
        // RFC 9110 §8.8.3: DQUOTE inside is invalid
        ("\"a\"b\"", None),
        // RFC 9110 §8.8.3: a comma is an etagc
        ("\"a,b\"", Some((false, "a,b"))),
    ];
    for (s, want) in table {
        let got = EntityTag::parse(s.as_bytes())
            .map(|t| (t.weak, std::str::from_utf8(t.opaque).unwrap().to_owned()));
        assert_eq!(got, want.map(|(w, o)| (w, o.to_owned())), "{s}");
    }
}

#[test]
fn client_conditionals() {
    use ConditionalOutcome::{NotModified as NM, Proceed as P};
    let etag_lm: &[(&str, &str)] = &[("etag", "\"v1\""), ("last-modified", D0), ("date", D1)];
    let weak: &[(&str, &str)] = &[("etag", "W/\"v1\""), ("date", D1)];
    let lm_only: &[(&str, &str)] = &[("last-modified", D1), ("date", D2)];
    let date_only: &[(&str, &str)] = &[("date", D1)];
    let nothing: &[(&str, &str)] = &[];
    #[rustfmt::skip]
    let table: &[(Pairs, Pairs, ConditionalOutcome)] = &[
        // (request, stored, outcome)
        // RFC 9110 §13.1.2: matching tag → 304
        (&[("if-none-match", "\"v1\"")], etag_lm, NM),
        // RFC 9110 §13.1.2: weak comparison, weak request tag vs strong stored
        (&[("if-none-match", "W/\"v1\"")], etag_lm, NM),
        // RFC 9110 §13.1.2: weak comparison, strong request tag vs weak stored
        (&[("if-none-match", "\"v1\"")], weak, NM),
        // RFC 9110 §13.1.2: list, one matches
        (&[("if-none-match", "\"a\", \"v1\"")], etag_lm, NM),
        // RFC 9110 §13.1.2: several field lines
        (&[("if-none-match", "\"a\""), ("if-none-match", "W/\"v1\"")], etag_lm, NM),
        // RFC 9110 §13.1.2: no match → proceed
        (&[("if-none-match", "\"v2\"")], etag_lm, P),
        // RFC 9110 §13.1.2: * matches any stored representation
        (&[("if-none-match", "*")], nothing, NM),
        // RFC 9110 §13.1.2: no stored ETag, list → proceed
        (&[("if-none-match", "\"v1\"")], lm_only, P),
        // RFC 9110 §13.1.2: invalid members skipped
        (&[("if-none-match", "v1, \"v1\"")], etag_lm, NM),
        // RFC 9110 §13.1.3: If-None-Match wins: IMS ignored even though it would match
        (&[("if-none-match", "\"v2\""), ("if-modified-since", D2)], etag_lm, P),
        // RFC 9110 §13.1.3: not modified since (equal)
        (&[("if-modified-since", D0)], etag_lm, NM),
        // RFC 9110 §13.1.3: not modified since (later date)
        (&[("if-modified-since", D1)], etag_lm, NM),
        // RFC 9110 §13.1.3: modified since
        (&[("if-modified-since", D0)], lm_only, P),
        // RFC 9111 §4.3.2: no Last-Modified: stored Date is used
        (&[("if-modified-since", D1)], date_only, NM),
        // RFC 9111 §4.3.2: no Last-Modified: Date later than IMS → proceed
        (&[("if-modified-since", D0)], date_only, P),
        // RFC 9111 §4.3.2: neither: the time it was stored (t1) is used
        (&[("if-modified-since", D1)], nothing, NM),
        // RFC 9111 §4.3.2: neither: stored after IMS → proceed
        (&[("if-modified-since", D0)], nothing, P),
        // RFC 9110 §5.6.7 + §13.1.3: IMS in the RFC 850 form, stored Date only
        (&[("if-modified-since", "Monday, 01-Jan-24 01:00:00 GMT")], date_only, NM),
        // RFC 9110 §5.6.7 + §13.1.3: IMS in asctime form, lower case, wrong day name
        (&[("if-modified-since", "fri jan  1 01:00:00 2024")], date_only, NM),
        // RFC 9110 §13.1.3: invalid date ignored
        (&[("if-modified-since", "yesterday")], etag_lm, P),
        // RFC 9110 §13.1.3: more than one member ignored
        (&[("if-modified-since", D2), ("if-modified-since", D2)], etag_lm, P),
        // RFC 9110 §13.1.1: If-Match is for the origin, not evaluated here
        (&[("if-match", "\"nope\"")], etag_lm, P),
        // no conditionals
        (&[], etag_lm, P),
    ];
    for (req, stored, want) in table {
        let got = evaluate_client_conditional(&headers(req), StatusCode::OK, &headers(stored), t1());
        assert_eq!(got, *want, "{req:?} vs {stored:?}");
    }
    // RFC 9110 §13.2.1: preconditions are ignored for non-2xx stored responses
    let got = evaluate_client_conditional(
        &headers(&[("if-none-match", "*")]),
        StatusCode::NOT_FOUND,
        &headers(etag_lm),
        t1(),
    );
    assert_eq!(got, P);
}

#[test]
fn not_modified_response_headers() {
    let stored = headers(&[
        ("etag", "\"v1\""),
        ("cache-control", "max-age=60"),
        ("cache-control", "public"),
        ("expires", D2),
        ("vary", "accept"),
        ("date", D1),
        ("content-location", "/a"),
        ("last-modified", D0),
        ("content-type", "text/plain"),
        ("content-length", "5"),
        ("set-cookie", "a=b"),
    ]);
    let got = not_modified_headers(&stored);
    // RFC 9110 §15.4.5: the listed fields, all lines
    for name in ["etag", "expires", "vary", "date", "content-location"] {
        assert_eq!(got.get(name), stored.get(name), "{name}");
    }
    assert_eq!(got.get_all("cache-control").iter().count(), 2);
    // RFC 9110 §15.4.5: no other representation metadata when there is an ETag
    for name in ["last-modified", "content-type", "content-length", "set-cookie"] {
        assert!(!got.contains_key(name), "{name}");
    }
    // RFC 9110 §15.4.5: Last-Modified guides updates when there is no ETag
    let got = not_modified_headers(&headers(&[("last-modified", D0), ("date", D1)]));
    assert_eq!(got.get("last-modified").unwrap(), D0);
}

#[test]
fn revalidation_request_headers() {
    #[rustfmt::skip]
    let table: &[(Pairs, Option<&str>, Option<&str>)] = &[
        // RFC 9111 §4.3.1: both validators
        (&[("etag", "W/\"x\""), ("last-modified", D0)], Some("W/\"x\""), Some(D0)),
        // RFC 9111 §4.3.1: invalid ETag not sent
        (&[("etag", "x"), ("last-modified", D0)], None, Some(D0)),
        // RFC 9111 §4.3.1: invalid Last-Modified not sent
        (&[("etag", "\"x\""), ("last-modified", "0")], Some("\"x\""), None),
        // RFC 9111 §4.3.1: nothing to validate with
        (&[("date", D0)], None, None),
    ];
    for (stored, inm, ims) in table {
        let got = conditional_request_headers(&headers(stored));
        assert_eq!(
            got.get("if-none-match").map(|v| v.to_str().unwrap()),
            *inm,
            "{stored:?}"
        );
        assert_eq!(
            got.get("if-modified-since").map(|v| v.to_str().unwrap()),
            *ims,
            "{stored:?}"
        );
    }
}

#[test]
fn selecting_stored_response_for_update() {
    #[rustfmt::skip]
    let table: &[(Pairs, Pairs, bool)] = &[
        // (stored, 304, selected)
        // §4.3.4: same strong validator
        (&[("etag", "\"a\"")], &[("etag", "\"a\"")], true),
        // §4.3.4: different strong validator: MUST NOT update
        (&[("etag", "\"a\"")], &[("etag", "\"b\"")], false),
        // §4.3.4: strong in 304, weak stored: not the same strong validator
        (&[("etag", "W/\"a\"")], &[("etag", "\"a\"")], false),
        // §4.3.4: weak validators correspond
        (&[("etag", "\"a\"")], &[("etag", "W/\"a\"")], true),
        // §4.3.4: 304 ETag but stored has none
        (&[("last-modified", D0)], &[("etag", "\"a\"")], false),
        // §4.3.4: Last-Modified equal
        (&[("last-modified", D0)], &[("last-modified", D0)], true),
        // §4.3.4: Last-Modified differs
        (&[("last-modified", D0)], &[("last-modified", D1)], false),
        // §4.3.4: 304 without validators updates the response we asked about
        (&[("etag", "\"a\"")], &[("date", D1)], true),
    ];
    for (stored, nm, want) in table {
        assert_eq!(
            validates_stored(&headers(stored), &headers(nm)),
            *want,
            "{stored:?} / {nm:?}"
        );
    }
}

#[test]
fn merging_a_304() {
    let mut stored = headers(&[
        ("etag", "\"a\""),
        ("cache-control", "max-age=10"),
        ("cache-control", "public"),
        ("content-length", "5"),
        ("content-type", "text/plain"),
        ("content-encoding", "gzip"),
        ("x-old", "1"),
        ("age", "30"),
        ("date", D0),
    ]);
    let nm = headers(&[
        ("etag", "\"a\""),
        ("cache-control", "max-age=60"),
        ("content-length", "0"),
        ("content-encoding", "br"),
        ("transfer-encoding", "chunked"),
        ("connection", "x-hop"),
        ("x-hop", "secret"),
        ("keep-alive", "timeout=5"),
        ("proxy-authenticate", "Basic"),
        ("x-new", "2"),
        ("date", D1),
    ]);
    merge_304(&mut stored, &nm);
    // §4.3.4: fields in the 304 replace all stored lines of that field
    let cc: Vec<_> = stored.get_all("cache-control").iter().collect();
    assert_eq!(cc, vec!["max-age=60"]);
    assert_eq!(stored.get("date").unwrap(), D1);
    assert_eq!(stored.get("x-new").unwrap(), "2");
    // §4.3.4: fields absent from the 304 are kept
    assert_eq!(stored.get("x-old").unwrap(), "1");
    assert_eq!(stored.get("content-type").unwrap(), "text/plain");
    // §3.2: Content-Length is not updated
    assert_eq!(stored.get("content-length").unwrap(), "5");
    // §3.2: the stored body's coding is not updated
    assert_eq!(stored.get("content-encoding").unwrap(), "gzip");
    // §3.1 + RFC 9110 §7.6.1: hop-by-hop, Connection-named and proxy fields are not stored
    for name in [
        "transfer-encoding",
        "connection",
        "x-hop",
        "keep-alive",
        "proxy-authenticate",
    ] {
        assert!(!stored.contains_key(name), "{name}");
    }
    // §4.2.3: the old Age does not survive a 304 without one
    assert!(!stored.contains_key("age"));
    // §4.2.3: a 304 Age replaces it
    merge_304(&mut stored, &headers(&[("age", "3")]));
    assert_eq!(stored.get("age").unwrap(), "3");
}

#[test]
fn if_range_validators() {
    let stored = headers(&[("etag", "\"a\""), ("last-modified", D0), ("date", D1)]);
    let recent = headers(&[
        ("etag", "W/\"a\""),
        ("last-modified", D0),
        ("date", "Mon, 01 Jan 2024 00:00:30 GMT"),
    ]);
    #[rustfmt::skip]
    let table: &[(&str, &HeaderMap, bool)] = &[
        // RFC 9110 §13.1.5: strong entity-tag equal
        ("\"a\"", &stored, true),
        // RFC 9110 §13.1.5: different tag
        ("\"b\"", &stored, false),
        // RFC 9110 §13.1.5: weak tags never match
        ("W/\"a\"", &stored, false),
        // RFC 9110 §13.1.5: stored weak ETag never matches
        ("\"a\"", &recent, false),
        // RFC 9110 §13.1.5 + §8.8.2.2: exact Last-Modified, 1 h before Date: strong
        (D0, &stored, true),
        // RFC 9110 §13.1.5: different date
        (D1, &stored, false),
        // RFC 9110 §8.8.2.2: Last-Modified only 30 s before Date is weak
        (D0, &recent, false),
        // RFC 9110 §13.1.5: neither a tag nor a date
        ("tomorrow", &stored, false),
    ];
    for (value, stored, want) in table {
        assert_eq!(
            if_range_matches(&HeaderValue::from_str(value).unwrap(), stored),
            *want,
            "{value}"
        );
    }
}
