//! Header rules of an intermediary: hop-by-hop removal (RFC 9110 §7.6.1), `Via` (§7.6.3),
//! `X-Forwarded-For`.

use std::net::IpAddr;

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
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
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
    let client = client.to_string();
    let value = match headers.get(&XFF).and_then(|v| v.to_str().ok()) {
        Some(previous) => format!("{previous}, {client}"),
        None => client,
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(XFF, value);
    }
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
    fn forwarded_for_appends() {
        let mut headers = HeaderMap::new();
        append_forwarded_for(&mut headers, "10.0.0.1".parse().unwrap());
        append_forwarded_for(&mut headers, "127.0.0.1".parse().unwrap());
        assert_eq!(headers["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
    }
}
