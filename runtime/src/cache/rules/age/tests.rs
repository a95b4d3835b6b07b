use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{HeaderMap, DATE};

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// 2024-01-01T00:00:00Z
const T0: u64 = 1_704_067_200;
const T0_DATE: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

#[test]
fn parse_age_values() {
    #[rustfmt::skip]
    let table: &[(&[&str], Option<u64>)] = &[
        // §5.1: plain delta-seconds
        (&["60"], Some(60)),
        // §5.1: leading zeros are digits
        (&["007"], Some(7)),
        // §5.1: OWS around the value
        (&["  12 "], Some(12)),
        // §5.1: non-numeric is ignored
        (&["abc"], None),
        // §5.1: negative is ignored
        (&["-5"], None),
        // §5.1: a plus sign is a prefix, ignored
        (&["+5"], None),
        // §5.1: a suffix is ignored
        (&["5s"], None),
        // §5.1: a float is ignored
        (&["1.5"], None),
        // §5.1: empty is ignored
        (&[""], None),
        // §5.1: list value, first member counts
        (&["10, 20"], Some(10)),
        // §5.1: list value whose first member is invalid: ignored
        (&["x, 20"], None),
        // §5.1: duplicate lines, first counts
        (&["30", "40"], Some(30)),
        // §5.1: duplicate lines, first invalid: ignored
        (&["x", "40"], None),
        // §5.1 + RFC 9110 §5.6.1: empty members are not members
        (&[", 15"], Some(15)),
        // §1.2.2: saturate at 2^31
        (&["99999999999999999999999999"], Some(1 << 31)),
        // §1.2.2: 2^31 itself
        (&["2147483648"], Some(1 << 31)),
    ];
    for (lines, want) in table {
        let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("age", *l)).collect();
        assert_eq!(parse_age(&headers(&pairs)), *want, "{lines:?}");
    }
    // §5.1: absent
    assert_eq!(parse_age(&HeaderMap::new()), None);
}

#[test]
fn corrected_initial_age() {
    #[rustfmt::skip]
    let table: &[(Pairs, u64, u64, u64)] = &[
        // (headers, request_time, response_time, expected initial age)
        // §4.2.3: no Age, Date == response_time: 0
        (&[("date", T0_DATE)], T0, T0, 0),
        // §4.2.3: apparent_age = response_time - date_value
        (&[("date", T0_DATE)], T0 + 10, T0 + 10, 10),
        // §4.2.3: corrected_age_value = age_value + response_delay wins
        (&[("date", T0_DATE), ("age", "100")], T0, T0 + 2, 102),
        // §4.2.3: a received Age counts even with Date in the future (clock skew)
        (&[("date", "Mon, 01 Jan 2024 01:00:00 GMT"), ("age", "5")], T0, T0, 5),
        // §4.2.3: apparent age never negative
        (&[("date", "Mon, 01 Jan 2024 01:00:00 GMT")], T0, T0, 0),
        // §4.2.3 + RFC 9110 §6.6.1: missing Date counts as response_time
        (&[("age", "7")], T0, T0 + 1, 8),
        // §4.2.3: invalid Date counts as response_time
        (&[("date", "yesterday")], T0, T0 + 3, 3),
        // §5.1: invalid Age ignored, delay still counts
        (&[("date", T0_DATE), ("age", "1.5")], T0, T0 + 4, 4),
        // §4.2.3: request_time after response_time (clock step) adds nothing
        (&[("date", T0_DATE)], T0 + 50, T0, 0),
        // §1.2.2: saturation at 2^31
        (&[("date", T0_DATE), ("age", "2147483648")], T0, T0 + 100, 1 << 31),
    ];
    for (pairs, req, resp, want) in table {
        let got = initial_age(&headers(pairs), at(*req), at(*resp));
        assert_eq!(got, Duration::from_secs(*want), "{pairs:?}");
    }
}

#[test]
fn current_age_values() {
    #[rustfmt::skip]
    let table: &[(u64, u64, u64, u64)] = &[
        // (initial, response_time, now, expected)
        // §4.2.3: resident_time = now - response_time
        (5, T0, T0 + 10, 15),
        // §4.2.3: now before response_time adds nothing
        (5, T0, T0 - 10, 5),
        // §1.2.2: saturates
        (1 << 31, T0, T0 + 10, 1 << 31),
    ];
    for (initial, resp, now, want) in table {
        let got = current_age(Duration::from_secs(*initial), at(*resp), at(*now));
        assert_eq!(got, Duration::from_secs(*want));
    }
}

#[test]
fn date_helpers() {
    // RFC 9110 §6.6.1: Date added when missing
    let mut h = HeaderMap::new();
    ensure_date(&mut h, at(T0));
    assert_eq!(h.get(DATE).unwrap(), T0_DATE);
    // RFC 9110 §6.6.1: a valid origin Date is kept
    let mut h = headers(&[("date", "Sun, 31 Dec 2023 00:00:00 GMT")]);
    ensure_date(&mut h, at(T0));
    assert_eq!(h.get(DATE).unwrap(), "Sun, 31 Dec 2023 00:00:00 GMT");
    // RFC 9110 §5.6.7: an invalid Date is replaced
    let mut h = headers(&[("date", "0")]);
    ensure_date(&mut h, at(T0));
    assert_eq!(h.get(DATE).unwrap(), T0_DATE);
    // RFC 9110 §5.6.7: a Date in another letter case is valid and kept as sent
    let mut h = headers(&[("date", "mon, 01 jan 2024 00:00:00 gmt")]);
    ensure_date(&mut h, at(T0 + 5));
    assert_eq!(h.get(DATE).unwrap(), "mon, 01 jan 2024 00:00:00 gmt");
    // RFC 9111 §5.1: Age header value is whole seconds, saturated
    assert_eq!(age_value(Duration::from_millis(2_999)), "2");
    assert_eq!(age_value(Duration::from_secs(u64::MAX)), "2147483648");
}
