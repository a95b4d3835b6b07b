//! Header rules of an intermediary: hop-by-hop removal (RFC 9110 §7.6.1), what a client's
//! `Connection` may name, `Via` (§7.6.3), `X-Forwarded-For`.

use std::net::IpAddr;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Version};

/// Fields that describe one connection, never forwarded or stored (RFC 9110 §7.6.1, plus the
/// RFC 2616 list that deployed software still sends).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes hop-by-hop fields, including every field the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one look at each name, cheaper than removing all eight, finds
    // that out (a field `Connection` names is there only with a `Connection`).
    if !headers.keys().any(|name| HOP_BY_HOP.contains(name)) {
        return;
    }
    for name in connection_options(headers).iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// The field names listed in `Connection`.
fn connection_options(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect()
}

/// Well-known end-to-end fields (Varnish 7's `tbl/http_headers.h` without the ones it filters
/// on a pass): the cache key, `Vary`, the freshness rules, the policy or the origin read them.
const END_TO_END: [HeaderName; 43] = [
    header::ACCEPT,
    header::ACCEPT_CHARSET,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::ACCEPT_RANGES,
    header::AGE,
    header::ALLOW,
    header::AUTHORIZATION,
    header::CACHE_CONTROL,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::CONTENT_LENGTH,
    header::CONTENT_LOCATION,
    HeaderName::from_static("content-md5"),
    header::CONTENT_RANGE,
    header::CONTENT_TYPE,
    header::COOKIE,
    header::DATE,
    header::ETAG,
    header::EXPECT,
    header::EXPIRES,
    header::FROM,
    header::HOST,
    header::IF_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_NONE_MATCH,
    header::IF_RANGE,
    header::IF_UNMODIFIED_SINCE,
    header::LAST_MODIFIED,
    header::LOCATION,
    header::MAX_FORWARDS,
    header::PRAGMA,
    header::RANGE,
    header::REFERER,
    header::RETRY_AFTER,
    header::SERVER,
    header::SET_COOKIE,
    header::USER_AGENT,
    header::VARY,
    header::VIA,
    header::WARNING,
    header::WWW_AUTHENTICATE,
    HeaderName::from_static("x-forwarded-for"),
];

/// A client's `Connection` named an end-to-end field.
#[derive(Debug, thiserror::Error)]
#[error("Connection names {0}, an end-to-end field: it cannot be removed for this hop")]
pub struct NamesEndToEnd(HeaderName);

/// Applies a client's `Connection` options to its own request (RFC 9110 §7.6.1): the fields it
/// names are for this hop only and are removed before the cache key, the policy or the origin
/// sees the request, so that all three see the same one (a variant stored under `X-Device:
/// mobile` must be the origin's answer with that field). A request naming a well-known
/// end-to-end field is refused, as Varnish 7's `http_DoConnection` refuses it (400): `Host`
/// stripped before the fetch would store the origin's default site under the client's host.
/// `Upgrade` stays: whether to pipe is decided on it (`req.http.upgrade` in `vcl_recv`), and
/// [`strip_hop_by_hop`] keeps it from every request that is not piped.
pub fn take_connection_options(headers: &mut HeaderMap) -> Result<(), NamesEndToEnd> {
    // Most requests have no `Connection` (HTTP/2 never): one lookup, no list built.
    if !headers.contains_key(header::CONNECTION) {
        return Ok(());
    }
    let named = connection_options(headers);
    if let Some(refused) = named.iter().find(|name| END_TO_END.contains(name)) {
        return Err(NamesEndToEnd(refused.clone()));
    }
    for name in &named {
        if name != header::CONNECTION && name != header::UPGRADE {
            headers.remove(name);
        }
    }
    Ok(())
}

/// The `Via` entry for a message received with `version`.
fn via_entry(version: Version) -> &'static str {
    match version {
        Version::HTTP_10 => "1.0 edgecache",
        Version::HTTP_2 => "2 edgecache",
        Version::HTTP_3 => "3 edgecache",
        _ => "1.1 edgecache",
    }
}

/// Appends edgecache to `Via`.
pub fn append_via(headers: &mut HeaderMap, received: Version) {
    headers.append(header::VIA, HeaderValue::from_static(via_entry(received)));
}

/// Appends the client's address to `X-Forwarded-For`, keeping what earlier proxies wrote on one
/// line as most origins parse only the first.
pub fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
    let previous = headers.get(&XFF).filter(|v| v.to_str().is_ok());
    let mut text = [0; IP_TEXT_MAX];
    let ip = write_ip(&mut text, client);
    // Copied once into a block of the exact size (a `Bytes` made from a `Vec` with room to
    // spare allocates a second block to share it).
    let value = match previous {
        None => Bytes::copy_from_slice(ip),
        Some(previous) => Bytes::from([previous.as_bytes(), b", ", ip].concat()),
    };
    if let Ok(value) = HeaderValue::from_maybe_shared(value) {
        headers.insert(XFF, value);
    }
}

/// Room for any address in text (`INET6_ADDRSTRLEN` without its NUL).
const IP_TEXT_MAX: usize = 45;

/// Writes `ip` as `Display` does into `out`, returning what was written; IPv4 digit by digit,
/// without the formatting machinery, as every origin request writes one.
fn write_ip(out: &mut [u8; IP_TEXT_MAX], ip: IpAddr) -> &[u8] {
    let mut len = 0;
    match ip {
        IpAddr::V4(v4) => {
            let mut push = |byte| {
                out[len] = byte;
                len += 1;
            };
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    push(b'.');
                }
                if octet >= 100 {
                    push(b'0' + octet / 100);
                }
                if octet >= 10 {
                    push(b'0' + octet / 10 % 10);
                }
                push(b'0' + octet % 10);
            }
        }
        IpAddr::V6(v6) => {
            use std::io::Write;
            let mut rest = &mut out[..];
            let _ = write!(rest, "{v6}");
            len = IP_TEXT_MAX - rest.len();
        }
    }
    &out[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_listed_and_connection_named_fields() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close, X-Secret"));
        headers.insert("x-secret", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key(header::CONTENT_TYPE));
    }

    #[test]
    fn connection_may_name_hop_fields_but_not_end_to_end_ones() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("close, X-Device, te"),
        );
        headers.insert("x-device", HeaderValue::from_static("mobile"));
        headers.insert(header::HOST, HeaderValue::from_static("site.test"));
        take_connection_options(&mut headers).expect("hop fields may be named");
        assert!(!headers.contains_key("x-device"), "{headers:?}");
        assert!(headers.contains_key(header::CONNECTION) && headers.contains_key(header::HOST));

        for named in ["Host", "close, host", "Accept-Encoding", "x-forwarded-for"] {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONNECTION, HeaderValue::from_static(named));
            headers.insert(header::HOST, HeaderValue::from_static("site.test"));
            assert!(take_connection_options(&mut headers).is_err(), "{named}");
            assert!(
                headers.contains_key(header::HOST),
                "nothing removed from a refused request"
            );
        }
    }

    #[test]
    fn forwarded_for_appends() {
        let mut headers = HeaderMap::new();
        append_forwarded_for(&mut headers, "10.0.0.1".parse().unwrap());
        append_forwarded_for(&mut headers, "127.0.0.1".parse().unwrap());
        assert_eq!(headers["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
    }

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for text in [
            "0.0.0.0",
            "10.2.30.255",
            "127.0.0.1",
            "192.168.100.9",
            "::1",
            "2001:db8::ff:1",
            "::ffff:10.0.0.1",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "1:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            let mut out = [0; IP_TEXT_MAX];
            let written = write_ip(&mut out, ip);
            assert_eq!(std::str::from_utf8(written).unwrap(), ip.to_string(), "{text}");
        }
    }
}
