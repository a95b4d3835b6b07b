//! The two heads of an exchange: the request head as it goes on the wire, with the framing
//! its body needs, and the origin's response head parsed into `http` types, with the framing
//! of the body that follows and whether the connection can carry another exchange.

use std::mem::MaybeUninit;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{request, Method, Response, StatusCode, Version};

use super::Error;

/// Field lines a response head (or a chunked body's trailer section) may have, as hyper's.
pub(super) const MAX_FIELDS: usize = 100;

/// Bytes a response head may take before it is refused, as hyper's default read buffer limit.
pub(super) const MAX_HEAD: usize = 8192 + 4096 * 100;

/// Fields the proxy adds to a relayed response (`Via`, `Age`, `X-Cache`...), so its map does
/// not grow.
const ROOM: usize = 4;

/// How a request's body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RequestFraming {
    /// Exactly this many bytes follow the head (none for a bodiless request).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The request line and fields, with the framing field the body needs, as hyper's client wrote
/// them: a body of known length gets a `Content-Length` unless it has a (truthful) one, a body
/// of unknown length is chunked, except on GET, HEAD and CONNECT, which send none. The caller
/// has already made the framing fields truthful (`frame_as_sent`).
pub(super) fn encode_request(
    head: &request::Parts,
    end_stream: bool,
    exact: Option<u64>,
) -> (Bytes, RequestFraming) {
    let headers = &head.headers;
    let (framing, added) = if end_stream {
        (RequestFraming::Length(0), None)
    } else if let Some(length) = exact {
        let added = (!headers.contains_key(header::CONTENT_LENGTH)).then_some(length);
        (RequestFraming::Length(length), added.map(Added::Length))
    } else if matches!(head.method, Method::GET | Method::HEAD | Method::CONNECT) {
        (RequestFraming::Length(0), None)
    } else {
        (RequestFraming::Chunked, Some(Added::Chunked))
    };
    let target = head.uri.path_and_query().map_or("/", |target| target.as_str());
    let fields: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    let mut out = BytesMut::with_capacity(head.method.as_str().len() + target.len() + fields + 64);
    out.put_slice(head.method.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        // A chunked body's length is in its chunks; a stale length would contradict them.
        if framing == RequestFraming::Chunked && name == header::CONTENT_LENGTH {
            continue;
        }
        put_field(&mut out, name.as_str().as_bytes(), value.as_bytes());
    }
    match added {
        Some(Added::Length(length)) => {
            put_field(&mut out, b"content-length", length.to_string().as_bytes());
        }
        Some(Added::Chunked) => put_field(&mut out, b"transfer-encoding", b"chunked"),
        None => {}
    }
    out.put_slice(b"\r\n");
    (out.freeze(), framing)
}

enum Added {
    Length(u64),
    Chunked,
}

fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// How the body of a response is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body: HEAD, 204, 304, 101, or `Content-Length: 0`.
    Empty,
    Length(u64),
    Chunked,
    /// Until the origin closes the connection.
    UntilClose,
}

/// One response head read from the origin.
pub(super) enum Parsed {
    /// An informational (1xx) response; the final one follows.
    Interim(Response<()>),
    Final(Final),
}

pub(super) struct Final {
    pub head: http::response::Parts,
    pub framing: Framing,
    /// Whether the connection may carry another exchange once this body has been read.
    pub reusable: bool,
}

/// Parses the response head at the start of `buffer`, taking its bytes out; `None` while the
/// head is not complete. Errors: not HTTP/1.x, too large, too many fields, a `Content-Length`
/// that is not one number, a `Transfer-Encoding` on an HTTP/1.0 response.
pub(super) fn parse_response(buffer: &mut BytesMut, method: &Method) -> Result<Option<Parsed>, Error> {
    let mut fields = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
    let mut parsed = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let length = match config.parse_response_with_uninit_headers(&mut parsed, buffer, &mut fields) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) if buffer.len() > MAX_HEAD => return Err(Error::HeadTooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(Error::Parse(error)),
    };
    let status = StatusCode::from_u16(parsed.code.expect("a complete head has a status"))
        .map_err(|_| Error::Invalid("a status code outside 100-999"))?;
    let version = match parsed.version.expect("a complete head has a version") {
        1 => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let reason = parsed
        .reason
        .filter(|reason| Some(*reason) != status.canonical_reason());
    let reason = reason.map(|reason| Bytes::copy_from_slice(reason.as_bytes()));
    let headers = field_map(parsed.headers, &buffer[..length], ROOM)?;
    buffer.advance(length);
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.version_mut() = version;
    *response.headers_mut() = headers;
    if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(Some(Parsed::Interim(response)));
    }
    if let Some(reason) = reason.and_then(|reason| hyper::ext::ReasonPhrase::try_from(reason).ok()) {
        response.extensions_mut().insert(reason);
    }
    let (head, ()) = response.into_parts();
    let framing = framing(&head, method)?;
    let keep_alive = keep_alive(&head.headers, version);
    let both = head.headers.contains_key(header::TRANSFER_ENCODING)
        && head.headers.contains_key(header::CONTENT_LENGTH);
    // After a `101`, or a `2xx` to a CONNECT, the connection is a tunnel.
    let tunnel = head.status == StatusCode::SWITCHING_PROTOCOLS
        || (*method == Method::CONNECT && head.status.is_success());
    let reusable = keep_alive && !both && framing != Framing::UntilClose && !tunnel;
    Ok(Some(Parsed::Final(Final {
        head,
        framing,
        reusable,
    })))
}

/// The `parsed` fields of `section` (a head, or a trailer section), as a map with `room` to
/// spare. The section is copied once, so that the fields do not pin the connection's buffer
/// (it is reused, in place, for every read while nothing else holds a part of it); the values
/// are slices of that copy.
pub(super) fn field_map(
    parsed: &[httparse::Header<'_>],
    section: &[u8],
    room: usize,
) -> Result<HeaderMap, Error> {
    let copy = Bytes::copy_from_slice(section);
    let start = section.as_ptr() as usize;
    let mut headers = HeaderMap::with_capacity(parsed.len() + room);
    for field in parsed {
        let name =
            HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| Error::Invalid("a field name"))?;
        let at = field.value.as_ptr() as usize - start;
        let value = HeaderValue::from_maybe_shared(copy.slice(at..at + field.value.len()))
            .map_err(|_| Error::Invalid("a field value"))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// RFC 9112 §6.3, as hyper's client decides it.
fn framing(head: &http::response::Parts, method: &Method) -> Result<Framing, Error> {
    match head.status.as_u16() {
        101 | 204 | 304 => return Ok(Framing::Empty),
        200..=299 if *method == Method::CONNECT => return Ok(Framing::Empty),
        _ if *method == Method::HEAD => return Ok(Framing::Empty),
        _ => {}
    }
    let headers = &head.headers;
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if head.version == Version::HTTP_10 {
            return Err(Error::Invalid("Transfer-Encoding on an HTTP/1.0 response"));
        }
        return Ok(if chunked_last(headers) {
            Framing::Chunked
        } else {
            Framing::UntilClose
        });
    }
    if !headers.contains_key(header::CONTENT_LENGTH) {
        return Ok(Framing::UntilClose);
    }
    match content_length(headers) {
        Some(0) => Ok(Framing::Empty),
        Some(length) => Ok(Framing::Length(length)),
        None => Err(Error::Invalid("a Content-Length that is not one number")),
    }
}

/// The one length all `Content-Length` values (each possibly a list) agree on.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut agreed = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for item in value.to_str().ok()?.split(',') {
            let item = item.trim();
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let length: u64 = item.parse().ok()?;
            if agreed.is_some_and(|agreed| agreed != length) {
                return None;
            }
            agreed = Some(length);
        }
    }
    agreed
}

/// Whether `chunked` is the last transfer coding.
fn chunked_last(headers: &HeaderMap) -> bool {
    let last = headers.get_all(header::TRANSFER_ENCODING).iter().next_back();
    last.and_then(|value| value.to_str().ok())
        .and_then(|list| list.rsplit(',').next())
        .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
}

/// HTTP/1.1 keeps the connection unless a `Connection` field says `close`. An HTTP/1.0 origin's
/// connection is not kept even when it says `keep-alive`: the next request would go out as
/// HTTP/1.1, possibly chunked, which such an origin need not understand (hyper's client spoke
/// HTTP/1.0 on it instead; origins that old are rare enough to pay a connection per request).
fn keep_alive(headers: &HeaderMap, version: Version) -> bool {
    version == Version::HTTP_11 && !says_close(headers)
}

/// Whether a message's `Connection` fields ask for the connection to be closed after it.
pub(super) fn says_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .any(|value| has_token(value, "close"))
}

fn has_token(value: &HeaderValue, token: &str) -> bool {
    value.to_str().is_ok_and(|list| {
        list.split(',')
            .any(|item| item.trim().eq_ignore_ascii_case(token))
    })
}
