//! Age calculation (RFC 9111 §4.2.3, §5.1) and the `Date` a stored response must carry
//! (RFC 9110 §6.6.1).
//!
//! All ages saturate at 2^31 seconds (RFC 9111 §1.2.2).

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, HeaderValue, AGE, DATE};

use super::date::http_date;
use super::syntax::{list_members, parse_delta, DELTA_SECONDS_MAX};

#[cfg(test)]
mod tests;

/// The largest age, as a duration (RFC 9111 §1.2.2).
const AGE_MAX: Duration = Duration::from_secs(DELTA_SECONDS_MAX);

/// The `Age` value in seconds, or `None` when absent or invalid (RFC 9111 §5.1).
///
/// Of a list (or several field lines) the first non-empty member counts and the rest are
/// discarded; if that member is not `1*DIGIT` (a sign, a fraction, a prefix or suffix, a
/// non-ASCII digit) the whole field is ignored. Values above 2^31 saturate (§1.2.2).
pub(crate) fn parse_age(headers: &HeaderMap) -> Option<u64> {
    let first = headers
        .get_all(AGE)
        .iter()
        .find_map(|line| list_members(line.as_bytes()).next())?;
    parse_delta(first)
}

/// The `Date` of a response as a time, or `None` when absent or not a valid HTTP-date
/// (RFC 9110 §6.6.1, §5.6.7). The first field line counts.
pub(crate) fn parse_date(headers: &HeaderMap) -> Option<SystemTime> {
    http_date(headers.get(DATE)?)
}

/// Makes sure a received response carries a valid `Date`, inserting `response_time` when it
/// has none or an unparseable one (RFC 9110 §6.6.1: a recipient with a clock MUST add `Date`
/// to a response it caches or forwards). Call once when the response arrives, before
/// [`initial_age`] and `freshness_lifetime`; a valid origin `Date` is kept as is.
pub(crate) fn ensure_date(resp: &mut HeaderMap, response_time: SystemTime) {
    if parse_date(resp).is_none() {
        resp.insert(DATE, date_value(response_time));
    }
}

/// Formats a time as an IMF-fixdate header value (RFC 9110 §5.6.7).
pub(crate) fn date_value(t: SystemTime) -> HeaderValue {
    let s = httpdate::fmt_http_date(t);
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

/// `corrected_initial_age` of RFC 9111 §4.2.3, computed once when the response arrives.
///
/// ```text
/// apparent_age          = max(0, response_time - date_value)
/// response_delay        = response_time - request_time
/// corrected_age_value   = age_value + response_delay
/// corrected_initial_age = max(apparent_age, corrected_age_value)
/// ```
///
/// `request_time` is when the request that produced this response was sent, `response_time`
/// when the response was received. A missing or invalid `Date` counts as `response_time`
/// (apparent age 0; RFC 9110 §6.6.1), a missing or invalid `Age` as 0 (§5.1). Clock skew
/// never makes an age negative; the result saturates at 2^31 s.
pub(crate) fn initial_age(resp: &HeaderMap, request_time: SystemTime, response_time: SystemTime) -> Duration {
    let date_value = parse_date(resp).unwrap_or(response_time);
    let apparent_age = since(response_time, date_value);
    let response_delay = since(response_time, request_time);
    let age_value = Duration::from_secs(parse_age(resp).unwrap_or(0));
    let corrected_age_value = age_value.saturating_add(response_delay);
    apparent_age.max(corrected_age_value).min(AGE_MAX)
}

/// `current_age` of RFC 9111 §4.2.3: `corrected_initial_age + (now - response_time)`.
/// A `now` before `response_time` adds nothing; the result saturates at 2^31 s.
pub(crate) fn current_age(initial_age: Duration, response_time: SystemTime, now: SystemTime) -> Duration {
    initial_age.saturating_add(since(now, response_time)).min(AGE_MAX)
}

/// The `Age` header value for a response of this current age: whole seconds, rounded down
/// (RFC 9111 §5.1), at most 2^31.
pub(crate) fn age_value(current_age: Duration) -> HeaderValue {
    HeaderValue::from(current_age.as_secs().min(DELTA_SECONDS_MAX))
}

/// `later - earlier`, or zero when `later` is not later.
fn since(later: SystemTime, earlier: SystemTime) -> Duration {
    later.duration_since(earlier).unwrap_or(Duration::ZERO)
}
