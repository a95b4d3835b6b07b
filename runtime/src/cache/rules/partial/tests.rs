use std::time::{Duration, SystemTime};

use http::header::HeaderValue;

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

/// A `Content-Range` as (start, end, complete), half-open.
type Placed = Option<(u64, u64, u64)>;

/// (range, complete, slices holding it, first slice's bounds, request for it)
type SliceRow = (
    Range<u64>,
    u64,
    std::ops::RangeInclusive<u64>,
    Range<u64>,
    &'static str,
);

#[test]
fn reading_content_range() {
    #[rustfmt::skip]
    let table: &[(&str, Placed)] = &[
        // RFC 9110 §14.4: first-last/complete, inclusive
        ("bytes 0-499/1234", Some((0, 500, 1234))),
        ("bytes 1233-1233/1234", Some((1233, 1234, 1234))),
        // RFC 9110 §14.4: the unit is case-insensitive
        ("BYTES 10-19/20", Some((10, 20, 20))),
        // RFC 9110 §14.4: unknown complete length: cannot be placed
        ("bytes 0-499/*", None),
        // RFC 9110 §14.4: unsatisfied-range (a 416's)
        ("bytes */1234", None),
        // RFC 9110 §14.4: last < first is invalid
        ("bytes 500-499/1234", None),
        // RFC 9110 §14.4: last at or past the complete length is invalid
        ("bytes 0-1234/1234", None),
        // another unit, garbage, signs
        ("items 0-1/2", None),
        ("bytes 0-1", None),
        ("bytes -1-5/10", None),
        ("bytes 0-+5/10", None),
        ("", None),
    ];
    for (value, want) in table {
        let got = parse_content_range(&HeaderValue::from_str(value).unwrap());
        let want = want.map(|(start, end, complete)| ContentRange {
            range: start..end,
            complete,
        });
        assert_eq!(got, want, "{value}");
    }
}

#[test]
fn the_first_byte_of_a_single_range() {
    #[rustfmt::skip]
    let table: &[(&str, bool, Option<u64>)] = &[
        // (Range, one range?, first byte known before the length)
        // RFC 9110 §14.1.2: int-range and open-ended int-range
        ("bytes=100-199", true, Some(100)),
        ("bytes=100-", true, Some(100)),
        ("Bytes=0-0", true, Some(0)),
        // RFC 9110 §14.1.2: a suffix range counts from the end
        ("bytes=-500", true, None),
        // RFC 9110 §14.1.1: invalid ranges are no range at all
        ("bytes=9-5", false, None),
        ("bytes=x-5", false, None),
        ("bytes=-", false, None),
        ("bytes=5", false, None),
        ("bytes= 0-5", false, None),
        // RFC 9110 §14.6: several ranges are not one part
        ("bytes=0-1,5-6", false, None),
        // another unit, nothing
        ("items=0-1", false, None),
        ("bytes=", false, None),
    ];
    for (value, single, first) in table {
        let value = HeaderValue::from_str(value).unwrap();
        assert_eq!(is_single_range(&value), *single, "{value:?}");
        assert_eq!(first_byte(&value), *first, "{value:?}");
    }
}

#[test]
fn slices_of_a_representation() {
    const SIZE: u64 = 100;
    #[rustfmt::skip]
    let table: &[SliceRow] = &[
        (0..1, 250, 0..=0, 0..100, "bytes=0-99"),
        (0..250, 250, 0..=2, 0..100, "bytes=0-99"),
        (99..101, 250, 0..=1, 0..100, "bytes=0-99"),
        (200..250, 250, 2..=2, 200..250, "bytes=200-299"),
        (100..200, 1000, 1..=1, 100..200, "bytes=100-199"),
    ];
    for (range, complete, slices, bounds, request) in table {
        assert_eq!(slices_of(range, SIZE), *slices, "{range:?}");
        let first = *slices.start();
        assert_eq!(slice_bounds(first, SIZE, *complete), *bounds, "{range:?}");
        assert_eq!(slice_request(first, SIZE), *request, "{range:?}");
    }
    // Past the end a slice is empty.
    assert!(slice_bounds(3, SIZE, 250).is_empty());
}

#[test]
fn a_206_answers_its_slice_only() {
    const SIZE: u64 = 100;
    #[rustfmt::skip]
    let table: &[(&str, u64, bool)] = &[
        // (Content-Range, slice asked for, placed?)
        // the whole slice
        ("bytes 100-199/1000", 1, true),
        // RFC 9110 §14.1.2: the origin clamps the last slice to the end
        ("bytes 200-249/250", 2, true),
        // RFC 9110 §14.2: a server may send less or other than asked (coalesced, shifted):
        // not this slice, not stored as it
        ("bytes 100-149/1000", 1, false),
        ("bytes 0-199/1000", 1, false),
        ("bytes 0-99/1000", 1, false),
        // a slice past the end does not exist
        ("bytes 0-49/50", 1, false),
    ];
    for (content_range, index, placed) in table {
        let got = parse_content_range(&HeaderValue::from_str(content_range).unwrap()).unwrap();
        assert_eq!(answers_slice(&got, *index, SIZE), *placed, "{content_range}");
    }
}

#[test]
fn strong_validators() {
    let date = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let just_before = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(999_990));
    let hour_before = httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(996_400));
    let modified = Validator::LastModified(SystemTime::UNIX_EPOCH + Duration::from_secs(996_400));
    let etag = Validator::ETag(Bytes::from_static(b"v1"));
    let table: &[(Pairs<'_>, Option<Validator>)] = &[
        // RFC 9110 §8.8.3: a strong entity-tag
        (&[("etag", "\"v1\"")], Some(etag.clone())),
        (
            &[
                ("etag", "\"v1\""),
                ("last-modified", &hour_before),
                ("date", &date),
            ],
            Some(etag),
        ),
        // RFC 9110 §8.8.3: a weak one is not, and rules out Last-Modified too
        (
            &[
                ("etag", "W/\"v1\""),
                ("last-modified", &hour_before),
                ("date", &date),
            ],
            None,
        ),
        // RFC 9110 §8.8.2.2: Last-Modified well before Date is strong
        (
            &[("last-modified", &hour_before), ("date", &date)],
            Some(modified),
        ),
        // RFC 9110 §8.8.2.2: modified within the last minute: weak
        (&[("last-modified", &just_before), ("date", &date)], None),
        // no Date to compare with, nothing at all, an invalid entity-tag
        (&[("last-modified", &hour_before)], None),
        (&[], None),
        (&[("etag", "v1")], None),
    ];
    for (pairs, want) in table {
        assert_eq!(strong_validator(&headers(pairs)), *want, "{pairs:?}");
    }
}

#[test]
fn combining_parts() {
    let stored = Validator::ETag(Bytes::from_static(b"v1"));
    #[rustfmt::skip]
    let table: &[(Pairs<'_>, u64, bool)] = &[
        // (new part's fields, its complete length, combinable with "v1" of 1000 bytes?)
        // RFC 9111 §3.4: same strong validator, same representation
        (&[("etag", "\"v1\"")], 1000, true),
        // RFC 9111 §3.4: another validator: the representation changed
        (&[("etag", "\"v2\"")], 1000, false),
        // RFC 9110 §15.3.7.3: only strong validators combine
        (&[("etag", "W/\"v1\"")], 1000, false),
        (&[], 1000, false),
        // RFC 9110 §14.4: another complete length is another representation
        (&[("etag", "\"v1\"")], 999, false),
    ];
    for (pairs, complete, want) in table {
        assert_eq!(
            combinable(&stored, 1000, &headers(pairs), *complete),
            *want,
            "{pairs:?} {complete}"
        );
    }
}

#[test]
fn a_part_describes_the_representation_without_its_range() {
    // RFC 9110 §15.3.7.3: the combined whole is a 200 with the complete length.
    let part = headers(&[
        ("content-range", "bytes 0-99/1000"),
        ("content-length", "100"),
        ("etag", "\"v1\""),
    ]);
    let whole = representation_headers(&part, 1000);
    assert_eq!(whole.get("content-range"), None);
    assert_eq!(whole.get("content-length").unwrap(), "1000");
    assert_eq!(whole.get("etag").unwrap(), "\"v1\"");
}
