//! HTTP-dates as deployed servers write them (RFC 9110 §5.6.7) and `If-Modified-Since`
//! against a stored response without `Last-Modified` (RFC 9110 §13.1.3, RFC 9111 §4.3.2):
//! an `Expires` with letters in another case, a wrong day name or an obsolete form still gives
//! freshness; a date in another zone is invalid, so already expired; a stored response
//! without `Last-Modified` answers `If-Modified-Since` by its `Date`.

mod support;

use std::time::{Duration, SystemTime};

use support::{get, http_date, start_proxy, Origin, OriginReply};

/// `Expires` values an hour ahead, each spelled as some deployed server does, served on the
/// path `/N` for the Nth.
fn lenient_expires(now: SystemTime) -> Vec<String> {
    let imf = http_date(now + Duration::from_secs(3600));
    let asctime = {
        // "Mon, 01 Jan 2024 01:00:00 GMT" -> "Mon Jan  1 01:00:00 2024"
        let words: Vec<&str> = imf.split(' ').collect();
        let day: u32 = words[1].parse().unwrap();
        format!(
            "{} {} {day:>2} {} {}",
            &words[0][..3],
            words[2],
            words[4],
            words[3]
        )
    };
    let other_day = {
        let weekday = &imf[..3];
        let wrong = if weekday == "Mon" { "Tue" } else { "Mon" };
        format!("{wrong}{}", &imf[3..])
    };
    vec![imf.to_uppercase(), imf.to_lowercase(), other_day, asctime]
}

support::modes! {
    async fn expires_in_any_letter_case_wrong_day_name_or_asctime_gives_freshness() {
        let now = SystemTime::now();
        let values = lenient_expires(now);
        let served = values.clone();
        let date = http_date(now);
        let origin = Origin::start(move |request| {
            let index: usize = request.uri().path()[1..].parse().unwrap();
            OriginReply::ok("dated")
                .header("date", &date)
                .header("expires", &served[index])
        })
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        for (index, value) in values.iter().enumerate() {
            let path = format!("/{index}");
            assert_eq!(get(addr, &path, &[]).await.cache(), "MISS", "Expires: {value}");
            support::eventually_stored(&proxy, index as u64 + 1).await;
            let again = get(addr, &path, &[]).await;
            assert_eq!(
                again.cache(),
                "HIT",
                "Expires: {value} is a valid date an hour ahead"
            );
            assert_eq!(again.header("expires"), Some(value.as_str()), "forwarded as sent");
            assert_eq!(origin.requests_for(&path), 1, "Expires: {value}");
        }
    }
}

support::modes! {
    async fn expires_in_another_zone_is_already_expired() {
        let now = SystemTime::now();
        let utc = http_date(now + Duration::from_secs(3600)).replace("GMT", "UTC");
        let date = http_date(now);
        let origin = Origin::fixed(
            OriginReply::ok("utc")
                .header("date", &date)
                .header("expires", &utc)
                .header("etag", "\"u\""),
        )
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;
        get(addr, "/utc", &[]).await;
        support::eventually_stored(&proxy, 1).await;
        let again = get(addr, "/utc", &[]).await;
        assert_ne!(
            again.cache(),
            "HIT",
            "an Expires in UTC is not an HTTP-date (§5.6.7)"
        );
        assert_eq!(origin.requests(), 2);
    }
}

support::modes! {
    async fn if_modified_since_without_last_modified_compares_the_stored_date() {
        let now = SystemTime::now();
        let date = now - Duration::from_secs(600);
        let date_value = http_date(date);
        let origin = Origin::fixed(
            OriginReply::ok("no last-modified")
                .header("date", &date_value)
                .cache_control("max-age=3600"),
        )
        .await;
        let (proxy, addr) = start_proxy(origin.addr, |_| {}).await;

        // A miss with a condition the stored Date satisfies: fetched whole, answered 304.
        let first = get(addr, "/no-lm", &[("if-modified-since", &date_value)]).await;
        assert_eq!((first.status.as_u16(), first.cache()), (304, "MISS"));
        assert_eq!(origin.last().header("if-modified-since"), None);
        support::eventually_stored(&proxy, 1).await;

        let rfc850 = {
            // "Mon, 01 Jan 2024 01:00:00 GMT" -> "Monday, 01-Jan-24 01:00:00 GMT"
            let later = http_date(date + Duration::from_secs(60));
            let words: Vec<&str> = later.split(' ').collect();
            let long_day = [
                "Monday",
                "Tuesday",
                "Wednesday",
                "Thursday",
                "Friday",
                "Saturday",
                "Sunday",
            ]
            .into_iter()
            .find(|day| day.starts_with(&words[0][..3]))
            .unwrap();
            format!(
                "{long_day}, {}-{}-{} {} GMT",
                words[1],
                words[2],
                &words[3][2..],
                words[4]
            )
        };
        let cases: &[(String, u16)] = &[
            // Not modified since its Date (§13.1.3: earlier than or equal).
            (date_value.clone(), 304),
            (http_date(date + Duration::from_secs(60)), 304),
            // The same, in the RFC 850 form (§5.6.7).
            (rfc850, 304),
            // Dated after the given time: it may have changed, so the whole response.
            (http_date(date - Duration::from_secs(60)), 200),
        ];
        for (value, status) in cases {
            let reply = get(addr, "/no-lm", &[("if-modified-since", value)]).await;
            assert_eq!(reply.status, *status, "If-Modified-Since: {value}");
            assert_eq!(reply.cache(), "HIT", "If-Modified-Since: {value}");
            if *status == 304 {
                assert_eq!(reply.header("date"), Some(date_value.as_str()));
                assert!(reply.body.is_empty());
            } else {
                assert_eq!(reply.body, "no last-modified");
            }
        }
        assert_eq!(origin.requests(), 1, "every answer came from the stored response");
    }
}
