//! `std.strftime`: strftime(3) in UTC and the C locale, as Varnish calls it (`gmtime_r`).

use std::fmt::Write;

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A UTC calendar time, as `gmtime` breaks a Unix time down.
struct Tm {
    year: i64,
    /// 1..=12
    month: u32,
    /// 1..=31
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 = Sunday
    weekday: u32,
    /// 0..=365
    yearday: u32,
    epoch: i64,
}

impl Tm {
    fn from_unix(t: i64) -> Tm {
        let days = t.div_euclid(86_400);
        let secs = t.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        let yearday = (days - days_from_civil(year, 1, 1)) as u32;
        Tm {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            weekday: (days + 4).rem_euclid(7) as u32,
            yearday,
            epoch: t,
        }
    }
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats the Unix time `t` (fractions dropped, as `time_t`) with `format`; conversions
/// strftime(3) does not define are copied as written, as glibc does.
pub(crate) fn strftime(t: f64, format: &str) -> String {
    let tm = Tm::from_unix(t.floor() as i64);
    let mut out = String::with_capacity(format.len() + 16);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(conv) = chars.next() else {
            out.push('%');
            break;
        };
        conversion(&mut out, &tm, conv);
    }
    out
}

fn conversion(out: &mut String, tm: &Tm, conv: char) {
    let hour12 = if tm.hour.is_multiple_of(12) {
        12
    } else {
        tm.hour % 12
    };
    let _ = match conv {
        'a' => write!(out, "{}", &DAYS[tm.weekday as usize][..3]),
        'A' => write!(out, "{}", DAYS[tm.weekday as usize]),
        'b' | 'h' => write!(out, "{}", &MONTHS[tm.month as usize - 1][..3]),
        'B' => write!(out, "{}", MONTHS[tm.month as usize - 1]),
        'c' => {
            conversion(out, tm, 'a');
            out.push(' ');
            conversion(out, tm, 'b');
            out.push(' ');
            conversion(out, tm, 'e');
            out.push(' ');
            conversion(out, tm, 'T');
            out.push(' ');
            conversion(out, tm, 'Y');
            Ok(())
        }
        'C' => write!(out, "{:02}", tm.year.div_euclid(100)),
        'd' => write!(out, "{:02}", tm.day),
        'D' => write!(
            out,
            "{:02}/{:02}/{:02}",
            tm.month,
            tm.day,
            tm.year.rem_euclid(100)
        ),
        'e' => write!(out, "{:2}", tm.day),
        'F' => write!(out, "{}-{:02}-{:02}", tm.year, tm.month, tm.day),
        'H' => write!(out, "{:02}", tm.hour),
        'I' => write!(out, "{hour12:02}"),
        'j' => write!(out, "{:03}", tm.yearday + 1),
        'k' => write!(out, "{:2}", tm.hour),
        'l' => write!(out, "{hour12:2}"),
        'm' => write!(out, "{:02}", tm.month),
        'M' => write!(out, "{:02}", tm.minute),
        'n' => writeln!(out),
        'p' => write!(out, "{}", if tm.hour < 12 { "AM" } else { "PM" }),
        'r' => write!(
            out,
            "{hour12:02}:{:02}:{:02} {}",
            tm.minute,
            tm.second,
            if tm.hour < 12 { "AM" } else { "PM" }
        ),
        'R' => write!(out, "{:02}:{:02}", tm.hour, tm.minute),
        's' => write!(out, "{}", tm.epoch),
        'S' => write!(out, "{:02}", tm.second),
        't' => out.write_char('\t'),
        'T' => write!(out, "{:02}:{:02}:{:02}", tm.hour, tm.minute, tm.second),
        'u' => write!(out, "{}", if tm.weekday == 0 { 7 } else { tm.weekday }),
        'w' => write!(out, "{}", tm.weekday),
        'x' => write!(
            out,
            "{:02}/{:02}/{:02}",
            tm.month,
            tm.day,
            tm.year.rem_euclid(100)
        ),
        'X' => write!(out, "{:02}:{:02}:{:02}", tm.hour, tm.minute, tm.second),
        'y' => write!(out, "{:02}", tm.year.rem_euclid(100)),
        'Y' => write!(out, "{}", tm.year),
        'z' => write!(out, "+0000"),
        'Z' => write!(out, "GMT"),
        '%' => write!(out, "%"),
        other => write!(out, "%{other}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_std_documentation_example() {
        // vmod_std.vcc: std.strftime(now, "%Y%m%dT%H%M%SZ"), "e.g. 20210521T175241Z".
        assert_eq!(strftime(1_621_619_561.25, "%Y%m%dT%H%M%SZ"), "20210521T175241Z");
    }

    #[test]
    fn http_dates_and_calendar_edges() {
        // RFC 9110's example date.
        assert_eq!(
            strftime(784_111_777.0, "%a, %d %b %Y %H:%M:%S GMT"),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            strftime(0.0, "%F %T %Z %z %j %u %s"),
            "1970-01-01 00:00:00 GMT +0000 001 4 0"
        );
        // A leap day, and the last day of a leap year.
        assert_eq!(
            strftime(951_782_400.0, "%F %j %A %B"),
            "2000-02-29 060 Tuesday February"
        );
        assert_eq!(strftime(978_220_800.0, "%F %j"), "2000-12-31 366");
        assert_eq!(strftime(-1.0, "%F %T"), "1969-12-31 23:59:59");
        assert_eq!(
            strftime(3_600.0 * 13.0, "%I %l %p %e|%k|%%|%Q"),
            "01  1 PM  1|13|%|%Q"
        );
    }
}
