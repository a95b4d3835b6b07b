use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// 2024-01-01T00:00:00Z, a Monday.
const T0: u64 = 1_704_067_200;
/// 1994-11-06T08:49:37Z, a Sunday: RFC 9110 §5.6.7's example.
const EXAMPLE: u64 = 784_111_777;

#[test]
fn http_dates_as_servers_write_them() {
    #[rustfmt::skip]
    let table: &[(&str, Option<SystemTime>)] = &[
        // RFC 9110 §5.6.7: the three formats, each with the section's example
        ("Sun, 06 Nov 1994 08:49:37 GMT", Some(at(EXAMPLE))),
        ("Sunday, 06-Nov-94 08:49:37 GMT", Some(at(EXAMPLE))),
        ("Sun Nov  6 08:49:37 1994", Some(at(EXAMPLE))),
        // §5.6.7: asctime with a two-digit day
        ("Mon Jan 01 00:00:00 2024", Some(at(T0))),
        // §5.6.7: RFC 850 two-digit years: 00-69 are 20YY, 70-99 are 19YY
        ("Monday, 01-Jan-24 00:00:00 GMT", Some(at(T0))),
        ("Thursday, 01-Jan-70 00:00:00 GMT", Some(at(0))),
        // §5.6.7 (recipients): day name, month and GMT in any letter case
        ("MON, 01 JAN 2024 00:00:00 GMT", Some(at(T0))),
        ("mon, 01 jan 2024 00:00:00 gmt", Some(at(T0))),
        ("Mon, 01 Jan 2024 00:00:00 gMT", Some(at(T0))),
        ("MONDAY, 01-jan-24 00:00:00 Gmt", Some(at(T0))),
        ("mon JAN  1 00:00:00 2024", Some(at(T0))),
        // §5.6.7 (recipients): a day name that does not match the date is ignored
        ("Thu, 01 Jan 2024 00:00:00 GMT", Some(at(T0))),
        ("Friday, 01-Jan-24 00:00:00 GMT", Some(at(T0))),
        ("Sat Jan  1 00:00:00 2024", Some(at(T0))),
        // §5.6.7 (recipients): short and long day names in either form
        ("Monday, 01 Jan 2024 00:00:00 GMT", Some(at(T0))),
        ("Mon, 01-Jan-24 00:00:00 GMT", Some(at(T0))),
        // §5.6.7: OWS around the field value (RFC 9110 §5.5)
        ("  Mon, 01 Jan 2024 00:00:00 GMT\t", Some(at(T0))),
        // §5.6.7: second 60 is a leap second
        ("Sun, 31 Dec 2023 23:59:60 GMT", Some(at(T0))),
        // §5.6.7: leap day
        ("Thu, 29 Feb 2024 00:00:00 GMT", Some(at(T0 + 59 * 86_400))),
        // §5.6.7: before 1970 is still a date (in the past)
        ("Mon, 01 Jan 1900 00:00:00 GMT", UNIX_EPOCH.checked_sub(Duration::from_secs(2_208_988_800))),
        // §5.6.7: far future
        ("Thu, 18 Aug 2050 02:01:18 GMT", Some(at(2_544_400_878))),
        // not a day name
        ("Xyz, 01 Jan 2024 00:00:00 GMT", None),
        // §5.6.7: another zone than GMT
        ("Mon, 01 Jan 2024 00:00:00 UTC", None),
        ("Mon, 01 Jan 2024 00:00:00 +0000", None),
        // §5.6.7: a two-digit year in IMF-fixdate
        ("Mon, 01 Jan 24 00:00:00 GMT", None),
        // §5.6.7: a missing comma
        ("Mon 01 Jan 2024 00:00:00 GMT", None),
        // §5.6.7: extra spaces
        ("Mon, 01  Jan  2024 00:00:00 GMT", None),
        // §5.6.7: dashes in IMF-fixdate with a four-digit year
        ("Mon, 01-Jan-2024 00:00:00 GMT", None),
        // §5.6.7: periods in the time
        ("Mon, 01 Jan 2024 00.00.00 GMT", None),
        // §5.6.7: a one-digit hour
        ("Mon, 01 Jan 2024 0:00:00 GMT", None),
        // §5.6.7: a day the month does not have; hour, minute, second out of range
        ("Sat, 30 Feb 2024 00:00:00 GMT", None),
        ("Thu, 29 Feb 2023 00:00:00 GMT", None),
        ("Mon, 00 Jan 2024 00:00:00 GMT", None),
        ("Mon, 01 Jan 2024 24:00:00 GMT", None),
        ("Mon, 01 Jan 2024 00:60:00 GMT", None),
        ("Mon, 01 Jan 2024 00:00:61 GMT", None),
        // not a month
        ("Mon, 01 Jnu 2024 00:00:00 GMT", None),
        // RFC 9111 §5.3: the usual invalid Expires values
        ("0", None),
        ("-1", None),
        ("", None),
        ("2024-01-01", None),
        ("Mon, 01 Jan 2024 00:00:00 GMT trailing", None),
        ("Mon, 01 Jan 2024", None),
    ];
    for (value, want) in table {
        assert_eq!(parse_http_date(value.as_bytes()), *want, "{value:?}");
    }
}

#[test]
fn http_date_reads_field_values() {
    // RFC 9110 §5.6.7: obs-text is not part of any date
    let value = HeaderValue::from_bytes(b"Mon, 01 Jan 2024 00:00:00 GMT\xff").unwrap();
    assert_eq!(http_date(&value), None);
    let value = HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT");
    assert_eq!(http_date(&value), Some(at(T0)));
}
