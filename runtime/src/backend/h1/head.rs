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
    let fields = FramingFields::of(parsed.headers);
    let framing = framing(status, version, &fields, method);
    // An HTTP/1.0 origin's connection is not kept even when it says `keep-alive`: the next
    // request would go out as HTTP/1.1, possibly chunked, which such an origin need not
    // understand (hyper's client spoke HTTP/1.0 on it instead; origins that old are rare enough
    // to pay a connection per request).
    let keep_alive = version == Version::HTTP_11 && !fields.close;
    let both = fields.transfer_encoding.is_some() && fields.content_length.is_some();
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
    let framing = framing?;
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

/// What the framing rules read of a response head, gathered from the parsed field lines in one
/// pass before the map is built: a few comparisons of short names, where six map lookups would
/// each hash a name.
struct FramingFields<'h> {
    /// The last `Transfer-Encoding` line, when there is one.
    transfer_encoding: Option<&'h [u8]>,
    /// Whether any `Content-Length` line is present, and the one length they all agree on
    /// (`None` when one is not a number or two disagree).
    content_length: Option<Option<u64>>,
    /// Whether a `Connection` line says `close`.
    close: bool,
}

impl<'h> FramingFields<'h> {
    fn of(parsed: &[httparse::Header<'h>]) -> Self {
        let mut fields = FramingFields {
            transfer_encoding: None,
            content_length: None,
            close: false,
        };
        for field in parsed {
            let name = field.name;
            if name.eq_ignore_ascii_case("transfer-encoding") {
                fields.transfer_encoding = Some(field.value);
            } else if name.eq_ignore_ascii_case("content-length") {
                fields.content_length = Some(match fields.content_length {
                    Some(None) => None,
                    before => agreed_length(field.value, before.flatten()),
                });
            } else if name.eq_ignore_ascii_case("connection") {
                fields.close |= visible(field.value).is_some_and(|list| has_token(list, "close"));
            }
        }
        fields
    }
}

/// RFC 9112 §6.3, as hyper's client decides it.
fn framing(
    status: StatusCode,
    version: Version,
    fields: &FramingFields<'_>,
    method: &Method,
) -> Result<Framing, Error> {
    match status.as_u16() {
        101 | 204 | 304 => return Ok(Framing::Empty),
        200..=299 if *method == Method::CONNECT => return Ok(Framing::Empty),
        _ if *method == Method::HEAD => return Ok(Framing::Empty),
        _ => {}
    }
    if let Some(coding) = fields.transfer_encoding {
        if version == Version::HTTP_10 {
            return Err(Error::Invalid("Transfer-Encoding on an HTTP/1.0 response"));
        }
        return Ok(if chunked_last(coding) {
            Framing::Chunked
        } else {
            Framing::UntilClose
        });
    }
    match fields.content_length {
        None => Ok(Framing::UntilClose),
        Some(Some(0)) => Ok(Framing::Empty),
        Some(Some(length)) => Ok(Framing::Length(length)),
        Some(None) => Err(Error::Invalid("a Content-Length that is not one number")),
    }
}

/// The length one `Content-Length` line (possibly a list) gives, when it agrees with the length
/// of the lines before it (`agreed`); `None` when an item is not a number or two differ.
fn agreed_length(value: &[u8], mut agreed: Option<u64>) -> Option<u64> {
    for item in value.split(|&b| b == b',') {
        let length = decimal(item.trim_ascii())?;
        if agreed.is_some_and(|agreed| agreed != length) {
            return None;
        }
        agreed = Some(length);
    }
    agreed
}

/// A non-empty run of ASCII digits as a number; `None` for anything else or on overflow.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |number, &digit| {
        let digit = digit.checked_sub(b'0').filter(|digit| *digit <= 9)?;
        number.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A field value as text when it is visible ASCII (tabs allowed), as `HeaderValue::to_str`
/// takes it.
fn visible(value: &[u8]) -> Option<&str> {
    std::str::from_utf8(value)
        .ok()
        .filter(|text| text.bytes().all(|b| b == b'\t' || (b' '..0x7f).contains(&b)))
}

/// Whether `chunked` is the last transfer coding of the last `Transfer-Encoding` line.
fn chunked_last(coding: &[u8]) -> bool {
    visible(coding)
        .and_then(|list| list.rsplit(',').next())
        .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"))
}

/// Whether a message's `Connection` fields ask for the connection to be closed after it.
pub(super) fn says_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .any(|value| value.to_str().is_ok_and(|list| has_token(list, "close")))
}

fn has_token(list: &str, token: &str) -> bool {
    list.split(',')
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}
