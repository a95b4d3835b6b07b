//! What a client request must satisfy before the policy, the cache or the origin sees it, and
//! what edgecache normalises first: the size of its head (Varnish's `http_req_hdr_len` and
//! `http_req_size`, see [`RequestLimits`]) and which host it is for.
//!
//! Sizes: hyper refuses a head over `max_request_head` itself (its HTTP/1 buffer and the
//! HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE` are set to it, both answer 431), and the server
//! bounds a connection's first request line (`server/first_line.rs`); here every request is
//! held to the per-field limit, its target to the same length (414), and its method to
//! [`MAX_METHOD_LEN`] (501). The number of fields is hyper's to refuse over HTTP/1 (431 past
//! `--max-headers`, set on its parser) and checked here for HTTP/2, whose header list only
//! `SETTINGS_MAX_HEADER_LIST_SIZE` bounds.
//!
//! Host: a request target in absolute form (`GET http://a.example/ HTTP/1.1`) names its host,
//! and RFC 9112 §3.2.2 makes it win over `Host`; HTTP/2's `:authority` wins likewise
//! (RFC 9113 §8.3.1). `Host` is replaced with it, so the cache key, the policy and the origin
//! all see the one host the request is for.

use http::header::{self, HeaderValue};
use http::{Request, StatusCode};

use crate::config::RequestLimits;

/// Longer than any registered method (the longest, `UPDATEREDIRECTREF`, has 17 letters).
pub(crate) const MAX_METHOD_LEN: usize = 32;

/// Why a request is refused before it is served.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error("a method of {0} bytes; no method is longer than {MAX_METHOD_LEN}")]
    MethodTooLong(usize),
    #[error("the request target is {length} bytes; the limit is {limit} (--max-header-size)")]
    TargetTooLong { length: usize, limit: usize },
    #[error("the header field {name} is {length} bytes; the limit is {limit} (--max-header-size)")]
    FieldTooLarge {
        name: http::HeaderName,
        length: usize,
        limit: usize,
    },
    #[error("{count} header fields; the limit is {limit} (--max-headers)")]
    TooManyFields { count: usize, limit: usize },
    #[error("the request target carries user information (RFC 9110 §4.2.4)")]
    UserInfo,
}

impl Refusal {
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Refusal::MethodTooLong(_) => StatusCode::NOT_IMPLEMENTED,
            Refusal::TargetTooLong { .. } => StatusCode::URI_TOO_LONG,
            Refusal::FieldTooLarge { .. } | Refusal::TooManyFields { .. } => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            Refusal::UserInfo => StatusCode::BAD_REQUEST,
        }
    }
}

/// Checks `request` against `limits` and gives `Host` the target's authority when it has one.
/// Call after the check for several `Host` fields: those must be refused, not replaced.
pub(super) fn check<B>(request: &mut Request<B>, limits: &RequestLimits) -> Result<(), Refusal> {
    let method = request.method().as_str().len();
    if method > MAX_METHOD_LEN {
        return Err(Refusal::MethodTooLong(method));
    }
    let uri = request.uri();
    let target = uri.authority().map_or(0, |authority| authority.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > limits.max_header_size {
        return Err(Refusal::TargetTooLong {
            length: target,
            limit: limits.max_header_size,
        });
    }
    let count = request.headers().len();
    if count > limits.max_headers {
        return Err(Refusal::TooManyFields {
            count,
            limit: limits.max_headers,
        });
    }
    // As on the wire: `name: value`.
    let field = request
        .headers()
        .iter()
        .map(|(name, value)| (name, name.as_str().len() + 2 + value.len()))
        .find(|(_, length)| *length > limits.max_header_size);
    if let Some((name, length)) = field {
        return Err(Refusal::FieldTooLarge {
            name: name.clone(),
            length,
            limit: limits.max_header_size,
        });
    }
    authority_wins(request)
}

/// RFC 9112 §3.2.2 / RFC 9113 §8.3.1: the target's authority replaces `Host`.
fn authority_wins<B>(request: &mut Request<B>) -> Result<(), Refusal> {
    let Some(authority) = request.uri().authority() else {
        return Ok(());
    };
    if authority.as_str().contains('@') {
        return Err(Refusal::UserInfo);
    }
    let host = authority.as_str();
    if request
        .headers()
        .get(header::HOST)
        .is_some_and(|value| value == host)
    {
        return Ok(());
    }
    let host = HeaderValue::from_str(host).expect("a parsed authority is a valid field value");
    request.headers_mut().insert(header::HOST, host);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().uri(target);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    fn limits() -> RequestLimits {
        RequestLimits {
            max_header_size: 1024,
            max_request_head: 8192,
            max_headers: 100,
        }
    }

    #[test]
    fn each_limit_has_its_status() {
        let long = "a".repeat(1100);
        let cases = [
            (request(&format!("/{long}"), &[]), StatusCode::URI_TOO_LONG),
            (
                request("/", &[("x-big", &long)]),
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ),
            (request("http://user@a.example/", &[]), StatusCode::BAD_REQUEST),
        ];
        for (mut request, status) in cases {
            let refusal = check(&mut request, &limits()).unwrap_err();
            assert_eq!(refusal.status(), status, "{refusal}");
        }
        let mut request = request("/", &[]);
        *request.method_mut() = http::Method::from_bytes(&[b'M'; 33]).unwrap();
        assert_eq!(
            check(&mut request, &limits()).unwrap_err().status(),
            StatusCode::NOT_IMPLEMENTED
        );
    }

    #[test]
    fn a_field_at_the_limit_passes() {
        // "x-big: " is 7 bytes.
        let mut request = request("/", &[("x-big", &"a".repeat(1024 - 7))]);
        assert!(check(&mut request, &limits()).is_ok());
    }

    #[test]
    fn the_authority_replaces_host() {
        let mut absolute = request("http://a.example:8080/x", &[("host", "b.example")]);
        check(&mut absolute, &limits()).unwrap();
        assert_eq!(absolute.headers()["host"], "a.example:8080");
        assert_eq!(absolute.headers().get_all("host").iter().count(), 1);

        let mut origin_form = request("/x", &[("host", "b.example")]);
        check(&mut origin_form, &limits()).unwrap();
        assert_eq!(origin_form.headers()["host"], "b.example");
    }
}
