//! HTTP-dates as deployed servers write them (RFC 9110 §5.6.7).
//!
//! A recipient must accept all three formats: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
//! the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
//! (`Sun Nov  6 08:49:37 1994`). Beyond the grammar this accepts what servers in the field
//! send and established caches take: day names, month names and `GMT` in any letter case, and
//! a day name that does not match the date, or the short name where the long one belongs (the
//! day name is redundant: the date counts). Anything else (another zone, a missing comma,
//! extra or missing spaces, a one-digit hour, a day the month does not have) is not a date,
//! and the caller's rule for invalid dates applies: an invalid `Expires` means already expired
//! (RFC 9111 §5.3), an invalid `If-Modified-Since` is ignored (RFC 9110 §13.1.3).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::HeaderValue;

use super::syntax::trim_ows;

#[cfg(test)]
mod tests;

const DAY_NAMES: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// A field value as an HTTP-date (see the module doc for what is accepted); OWS around it is
/// allowed.
pub(crate) fn http_date(value: &HeaderValue) -> Option<SystemTime> {
    parse_http_date(value.as_bytes())
}

/// [`http_date`] on bytes.
pub(crate) fn parse_http_date(value: &[u8]) -> Option<SystemTime> {
    let rest = skip_day_name(trim_ows(value))?;
    match rest.strip_prefix(b", ") {
        Some(rest) => imf_fixdate(rest).or_else(|| rfc850_date(rest)),
        None => asctime_date(rest.strip_prefix(b" ")?),
    }
}

/// What follows a short or long day name in any letter case (the name itself is not checked
/// against the date).
fn skip_day_name(s: &[u8]) -> Option<&[u8]> {
    let short = s.get(..3)?;
    let long = DAY_NAMES
        .iter()
        .find(|name| name[..3].eq_ignore_ascii_case(short))?;
    Some(match s.get(..long.len()) {
        Some(full) if full.eq_ignore_ascii_case(long) => &s[long.len()..],
        _ => &s[3..],
    })
}

/// `DD Mon YYYY HH:MM:SS GMT`, after `day-name ", "`.
fn imf_fixdate(s: &[u8]) -> Option<SystemTime> {
    let [d1, d2, b' ', m1, m2, m3, b' ', y1, y2, y3, y4, b' ', time @ .., b' ', z1, z2, z3] = s else {
        return None;
    };
    gmt(&[*z1, *z2, *z3])?;
    let year = number(&[*y1, *y2, *y3, *y4])?;
    civil(year, month(&[*m1, *m2, *m3])?, number(&[*d1, *d2])?, time)
}

/// `DD-Mon-YY HH:MM:SS GMT`, after `day-name-l ", "`. A two-digit year below 70 is 20YY,
/// otherwise 19YY: RFC 9110 §5.6.7 asks for the most recent year with those digits that is
/// not more than 50 years ahead, and a fixed pivot keeps this clock-free; the two differ only
/// for years 70 to 75 read before 2026 (none is a date anyone sends in this form).
fn rfc850_date(s: &[u8]) -> Option<SystemTime> {
    let [d1, d2, b'-', m1, m2, m3, b'-', y1, y2, b' ', time @ .., b' ', z1, z2, z3] = s else {
        return None;
    };
    gmt(&[*z1, *z2, *z3])?;
    let yy = number(&[*y1, *y2])?;
    let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
    civil(year, month(&[*m1, *m2, *m3])?, number(&[*d1, *d2])?, time)
}

/// `Mon DD HH:MM:SS YYYY` (`DD` may be `SP DIGIT`), after `day-name SP`.
fn asctime_date(s: &[u8]) -> Option<SystemTime> {
    let [m1, m2, m3, b' ', d1, d2, b' ', time @ .., b' ', y1, y2, y3, y4] = s else {
        return None;
    };
    let day = match d1 {
        b' ' => number(&[*d2])?,
        _ => number(&[*d1, *d2])?,
    };
    let year = number(&[*y1, *y2, *y3, *y4])?;
    civil(year, month(&[*m1, *m2, *m3])?, day, time)
}

fn gmt(zone: &[u8; 3]) -> Option<()> {
    zone.eq_ignore_ascii_case(b"GMT").then_some(())
}

/// The month number (1-12) of a three-letter month name in any letter case.
fn month(name: &[u8; 3]) -> Option<u32> {
    let index = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(name))?;
    Some(index as u32 + 1)
}

/// All-digit bytes as a number; `None` for anything else.
fn number(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// The time at `year-month-day` and `time` (`HH:MM:SS`, second 60 for a leap second) UTC, when
/// that day exists in the proleptic Gregorian calendar.
fn civil(year: u32, month: u32, day: u32, time: &[u8]) -> Option<SystemTime> {
    let [h1, h2, b':', n1, n2, b':', s1, s2] = time else {
        return None;
    };
    let (hour, minute, second) = (number(&[*h1, *h2])?, number(&[*n1, *n2])?, number(&[*s1, *s2])?);
    if hour > 23 || minute > 59 || second > 60 || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(i64::from(year), i64::from(month), i64::from(day));
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    match u64::try_from(secs) {
        Ok(after) => UNIX_EPOCH.checked_add(Duration::from_secs(after)),
        Err(_) => UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs())),
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
