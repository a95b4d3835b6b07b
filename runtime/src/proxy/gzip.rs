//! gzip where Varnish's `http_gzip_support` puts it: bodies compressed or decompressed while
//! they stream (`beresp.do_gzip` / `do_gunzip` before they are stored, an ESI page's gzip
//! origin body so that it can be parsed, a gzip fragment spliced into a page), and the choice
//! of gzip or identity by the client's `Accept-Encoding`.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::write::{GzDecoder, GzEncoder};
use flate2::Compression;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

use crate::cache::body::BoxError;
use crate::cache::body::ProxyBody;
pub(super) use crate::cache::rules::vary::accepts_gzip;

/// Whether `headers` (a response's) say the body is gzip.
pub(super) fn is_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let value = value.trim();
            value.eq_ignore_ascii_case("gzip") || value.eq_ignore_ascii_case("x-gzip")
        })
}

/// `response` for a client whose request has `request` fields: a gzip body decompressed as it
/// is sent when the client does not accept gzip (Varnish's `http_gzip_support`). Only whole
/// bodies: a 206 is a part of the coded bytes and stays as it is.
pub(super) fn decoded_unless_accepted(
    response: Response<ProxyBody>,
    request: &HeaderMap,
) -> Response<ProxyBody> {
    let whole = !matches!(
        response.status(),
        StatusCode::PARTIAL_CONTENT | StatusCode::NOT_MODIFIED | StatusCode::NO_CONTENT
    );
    if !whole || !is_gzip(response.headers()) || accepts_gzip(request) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    mark_gunzipped(&mut parts.headers);
    let body = if http_body::Body::is_end_stream(&body) {
        body
    } else {
        ProxyBody::stream(Gzip::decompress(body))
    };
    Response::from_parts(parts, body)
}

/// `response` (an identity body) gzip-compressed as it is sent.
pub(super) fn compressed(response: Response<ProxyBody>) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    mark_gzipped(&mut parts.headers);
    Response::from_parts(parts, ProxyBody::stream(Gzip::compress(body)))
}

/// `headers` for a body that is now gzip: `Content-Encoding: gzip`, `Vary: Accept-Encoding`
/// (added to what it varies on already), no `Content-Length` (it changed) and a weak
/// `ETag` (the bytes changed), as Varnish does when it gzips.
pub(super) fn mark_gzipped(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.remove(header::CONTENT_LENGTH);
    weaken_etag(headers);
    let varies = headers
        .get_all(header::VARY)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|name| {
            let name = name.trim();
            name == "*" || name.eq_ignore_ascii_case("accept-encoding")
        });
    if !varies {
        headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// `headers` for a body that is no longer gzip.
pub(super) fn mark_gunzipped(headers: &mut HeaderMap) {
    headers.remove(header::CONTENT_ENCODING);
    headers.remove(header::CONTENT_LENGTH);
    weaken_etag(headers);
}

/// A strong `ETag` names exact bytes; once they change it can only be weak (RFC 9110 §8.8.1).
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(header::ETAG) else {
        return;
    };
    if etag.as_bytes().starts_with(b"W/") {
        return;
    }
    let mut weak = b"W/".to_vec();
    weak.extend_from_slice(etag.as_bytes());
    if let Ok(weak) = HeaderValue::from_bytes(&weak) {
        headers.insert(header::ETAG, weak);
    }
}

/// How a fetched body's coding changes before it is stored (`vcl_backend_response`'s say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Recode {
    #[default]
    Keep,
    Gzip,
    Gunzip,
}

impl Recode {
    /// What `beresp.do_gzip`, `do_gunzip` and `do_esi` ask of a body with `headers`, as
    /// Varnish decides: a gzip body is decompressed for `do_gunzip`, and for `do_esi` (ESI
    /// pages are parsed and stored as identity, and compressed again for the clients that take
    /// gzip when they are assembled); a body without a coding is compressed for `do_gzip`.
    pub fn decide(do_gzip: bool, do_gunzip: bool, do_esi: bool, headers: &HeaderMap) -> Recode {
        if is_gzip(headers) && (do_gunzip || do_esi) {
            Recode::Gunzip
        } else if do_gzip && !do_gunzip && !do_esi && !headers.contains_key(header::CONTENT_ENCODING) {
            Recode::Gzip
        } else {
            Recode::Keep
        }
    }

    /// The fields of a response whose body is recoded so.
    pub fn mark(self, headers: &mut HeaderMap) {
        match self {
            Recode::Keep => {}
            Recode::Gzip => mark_gzipped(headers),
            Recode::Gunzip => mark_gunzipped(headers),
        }
    }

    /// `body` recoded so.
    pub fn apply<B>(self, body: B) -> UnsyncBoxBody<Bytes, BoxError>
    where
        B: Body<Data = Bytes> + Unpin + Send + 'static,
        B::Error: Into<BoxError>,
    {
        match self {
            Recode::Keep => body.map_err(Into::into).boxed_unsync(),
            Recode::Gzip => Gzip::compress(body).boxed_unsync(),
            Recode::Gunzip => Gzip::decompress(body).boxed_unsync(),
        }
    }
}

enum Coder {
    Compress(GzEncoder<Vec<u8>>),
    Decompress(GzDecoder<Vec<u8>>),
}

/// `inner` compressed or decompressed as it streams. Each frame of `inner` is flushed through
/// the coder, so that a streamed page (an ESI page's fragments) leaves as it is assembled.
pub(super) struct Gzip<B> {
    inner: B,
    coder: Option<Coder>,
}

impl<B> Gzip<B> {
    /// `inner` gzip-compressed (Varnish's `gzip_level` 6).
    pub fn compress(inner: B) -> Gzip<B> {
        let coder = Coder::Compress(GzEncoder::new(Vec::new(), Compression::new(6)));
        Gzip {
            inner,
            coder: Some(coder),
        }
    }

    /// `inner`, gzip, decompressed.
    pub fn decompress(inner: B) -> Gzip<B> {
        Gzip {
            inner,
            coder: Some(Coder::Decompress(GzDecoder::new(Vec::new()))),
        }
    }
}

impl Coder {
    /// What `data` makes of the output so far.
    fn push(&mut self, data: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Coder::Compress(encoder) => {
                encoder.write_all(data)?;
                encoder.flush()?;
                Ok(std::mem::take(encoder.get_mut()))
            }
            Coder::Decompress(decoder) => {
                decoder.write_all(data)?;
                Ok(std::mem::take(decoder.get_mut()))
            }
        }
    }

    /// The rest of the output once the input has ended.
    fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Coder::Compress(encoder) => encoder.finish(),
            Coder::Decompress(decoder) => decoder.finish(),
        }
    }
}

impl<B> Body for Gzip<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        loop {
            if self.coder.is_none() {
                return Poll::Ready(None);
            }
            let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(frame) => frame,
            };
            let output = match frame {
                Some(Err(error)) => {
                    self.coder = None;
                    return Poll::Ready(Some(Err(error.into())));
                }
                // Trailers do not survive a change of coding.
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.coder.as_mut().expect("checked above").push(&data),
                    Err(_) => continue,
                },
                None => self.coder.take().expect("checked above").finish(),
            };
            match output {
                Err(error) => {
                    self.coder = None;
                    return Poll::Ready(Some(Err(format!("gzip: {error}").into())));
                }
                Ok(output) if output.is_empty() => continue,
                Ok(output) => return Poll::Ready(Some(Ok(Frame::data(Bytes::from(output))))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.coder.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::StreamBody;

    use super::*;

    async fn collect<B>(body: B) -> Result<Vec<u8>, BoxError>
    where
        B: Body<Data = Bytes, Error = BoxError>,
    {
        Ok(body.collect().await?.to_bytes().to_vec())
    }

    #[tokio::test]
    async fn compressed_frames_decompress_to_the_input() {
        let frames = ["<html>", "fragment one", "", "fragment two</html>"]
            .map(|text| Ok::<_, BoxError>(Frame::data(Bytes::from_static(text.as_bytes()))));
        let compressed = collect(Gzip::compress(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
        .await
        .unwrap();
        assert_eq!(&compressed[..2], [0x1f, 0x8b], "a gzip member");
        let body = ProxyBody::full(compressed);
        let plain = collect(Gzip::decompress(body)).await.unwrap();
        assert_eq!(plain, b"<html>fragment onefragment two</html>");
    }

    #[tokio::test]
    async fn corrupt_gzip_is_a_body_error() {
        let body = ProxyBody::full(Bytes::from_static(b"\x1f\x8bnot gzip at all"));
        assert!(collect(Gzip::decompress(body)).await.is_err());
    }

    #[test]
    fn gzipping_adds_vary_once_and_weakens_the_etag() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ETAG, HeaderValue::from_static("\"v1\""));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        headers.insert(header::VARY, HeaderValue::from_static("Cookie"));
        mark_gzipped(&mut headers);
        assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
        assert_eq!(headers[header::ETAG], "W/\"v1\"");
        assert!(!headers.contains_key(header::CONTENT_LENGTH));
        let vary: Vec<_> = headers.get_all(header::VARY).iter().collect();
        assert_eq!(vary, ["Cookie", "Accept-Encoding"]);
        mark_gzipped(&mut headers);
        assert_eq!(headers.get_all(header::VARY).iter().count(), 2);
        mark_gunzipped(&mut headers);
        assert!(!headers.contains_key(header::CONTENT_ENCODING));
    }
}
