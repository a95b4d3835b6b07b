use bytes::Bytes;
use http::header::HeaderValue;
use http::Method;

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

#[test]
fn parsing_ranges() {
    use RangeOutcome::{Full, Multi, Single, Unsatisfiable};
    #[rustfmt::skip]
    let table: &[(&str, u64, RangeOutcome)] = &[
        // RFC 9110 §14.1.2: first-last, inclusive
        ("bytes=0-499", 1000, Single(0..500)),
        // RFC 9110 §14.1.2: open-ended
        ("bytes=500-", 1000, Single(500..1000)),
        // RFC 9110 §14.1.2: suffix
        ("bytes=-200", 1000, Single(800..1000)),
        // RFC 9110 §14.1.2: suffix longer than the representation: all of it
        ("bytes=-5000", 1000, Single(0..1000)),
        // RFC 9110 §14.1.2: last-pos past the end is clamped
        ("bytes=900-5000", 1000, Single(900..1000)),
        // RFC 9110 §14.1.1: unit is case-insensitive
        ("Bytes=0-0", 10, Single(0..1)),
        // RFC 9110 §14.1.2: first-pos at the end: unsatisfiable
        ("bytes=1000-", 1000, Unsatisfiable),
        // RFC 9110 §14.1.2: zero-length suffix: unsatisfiable
        ("bytes=-0", 1000, Unsatisfiable),
        // RFC 9110 §14.1.2: one satisfiable among unsatisfiable ones
        ("bytes=2000-3000, 5-9", 1000, Single(5..10)),
        // RFC 9110 §14.6: several ranges, request order kept
        ("bytes=500-599, 0-99", 1000, Multi(vec![500..600, 0..100])),
        // RFC 9110 §14.2: overlapping ranges are coalesced
        ("bytes=0-99, 50-149", 1000, Single(0..150)),
        // RFC 9110 §14.2: adjacent ranges are coalesced
        ("bytes=0-99,100-199,300-", 1000, Multi(vec![0..200, 300..1000])),
        // RFC 9110 §14.2: many overlapping ranges asking for more than the whole: ignored
        ("bytes=0-999, 0-999, 0-999", 1000, Full),
        // RFC 9110 §14.1.1: first > last is invalid: ignored
        ("bytes=5-4", 1000, Full),
        // RFC 9110 §14.1.1: no ranges
        ("bytes=", 1000, Full),
        // RFC 9110 §14.1.1: garbage
        ("bytes=a-b", 1000, Full),
        // RFC 9110 §14.1.1: a bare number
        ("bytes=5", 1000, Full),
        // RFC 9110 §14.1.1: "-" alone
        ("bytes=-", 1000, Full),
        // RFC 9110 §14.2: unknown unit ignored
        ("items=0-5", 1000, Full),
        // RFC 9110 §14.1.1: no whitespace around "="
        ("bytes =0-5", 1000, Full),
        // RFC 9110 §14.1.1: a negative first-pos is a suffix spec syntax error here
        ("bytes=--5", 1000, Full),
        // RFC 9110 §14.1.2: an empty representation: serve it whole
        ("bytes=0-5", 0, Full),
        // RFC 9110 §14.1.2: huge numbers saturate (unsatisfiable first-pos)
        ("bytes=99999999999999999999999-", 1000, Unsatisfiable),
        // RFC 9110 §14.1.2: huge last-pos clamps
        ("bytes=1-99999999999999999999999", 1000, Single(1..1000)),
        // RFC 9110 §5.6.1: empty list elements
        ("bytes=0-1,,", 10, Single(0..2)),
    ];
    for (value, len, want) in table {
        assert_eq!(
            parse_range(&HeaderValue::from_str(value).unwrap(), *len),
            *want,
            "{value} / {len}"
        );
    }
    // RFC 9110 §14.2: too many parts: ignored
    let many: Vec<String> = (0..(MAX_PARTS as u64 + 1))
        .map(|i| format!("{}-{}", i * 10, i * 10 + 1))
        .collect();
    let value = HeaderValue::from_str(&format!("bytes={}", many.join(","))).unwrap();
    assert_eq!(parse_range(&value, 10_000), Full);
}

#[test]
fn evaluating_requests() {
    use RangeOutcome::{Full, Single};
    let stored = headers(&[
        ("etag", "\"a\""),
        ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
        ("date", "Tue, 02 Jan 2024 00:00:00 GMT"),
    ]);
    #[rustfmt::skip]
    let table: &[(Method, Pairs, RangeOutcome)] = &[
        // RFC 9110 §14.2: GET with Range
        (Method::GET, &[("range", "bytes=0-1")], Single(0..2)),
        // RFC 9110 §14.2: Range is only defined for GET
        (Method::HEAD, &[("range", "bytes=0-1")], Full),
        // RFC 9110 §14.2: no Range
        (Method::GET, &[], Full),
        // RFC 9110 §14.2: two Range lines: ignored
        (Method::GET, &[("range", "bytes=0-1"), ("range", "bytes=3-4")], Full),
        // RFC 9110 §13.1.5: If-Range matches (strong ETag)
        (Method::GET, &[("range", "bytes=0-1"), ("if-range", "\"a\"")], Single(0..2)),
        // RFC 9110 §13.1.5: If-Range does not match: whole representation
        (Method::GET, &[("range", "bytes=0-1"), ("if-range", "\"b\"")], Full),
        // RFC 9110 §13.1.5: If-Range date equal to a strong Last-Modified
        (Method::GET, &[("range", "bytes=0-1"), ("if-range", "Mon, 01 Jan 2024 00:00:00 GMT")], Single(0..2)),
        // RFC 9110 §13.1.5: If-Range with a weak tag never matches
        (Method::GET, &[("range", "bytes=0-1"), ("if-range", "W/\"a\"")], Full),
        // RFC 9110 §13.1.5: If-Range without Range is ignored
        (Method::GET, &[("if-range", "\"b\"")], Full),
    ];
    for (method, req, want) in table {
        assert_eq!(
            evaluate_range(method, &headers(req), &stored, 100),
            *want,
            "{method} {req:?}"
        );
    }
}

#[test]
fn content_range_values() {
    // RFC 9110 §14.4: complete-length form
    assert_eq!(content_range(&(0..500), 1000), "bytes 0-499/1000");
    assert_eq!(content_range(&(999..1000), 1000), "bytes 999-999/1000");
    // RFC 9110 §14.4 + §15.5.17: unsatisfied-range form
    assert_eq!(unsatisfied_content_range(1000), "bytes */1000");
}

#[test]
fn multipart_byteranges() {
    // RFC 9110 §14.6: one part per range with its Content-Type and Content-Range
    let body = Bytes::from_static(b"0123456789");
    let ct = HeaderValue::from_static("text/plain");
    let got = multipart_body(&body.into(), &[0..2, 8..10], Some(ct.as_bytes()), "B0UND");
    let want = "--B0UND\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n01\r\n\
                --B0UND\r\nContent-Type: text/plain\r\nContent-Range: bytes 8-9/10\r\n\r\n89\r\n\
                --B0UND--\r\n";
    assert_eq!(got, want.as_bytes());
    assert_eq!(
        multipart_content_type("B0UND").unwrap(),
        "multipart/byteranges; boundary=B0UND"
    );
}
