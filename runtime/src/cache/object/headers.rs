//! The text of a stored response, packed into one buffer: what it was requested for (the
//! target, `Host`, the `Vary` fingerprint) and its header fields.
//!
//! A small object's head is mostly text, and every separate allocation of it costs a size
//! class and a header: as a `HeaderMap` its fields cost about 104 bytes each plus an index,
//! as `(HeaderName, HeaderValue)` slots 72 bytes each; here a field is its value and five
//! bytes (docs/BENCHMARKS.md, "Session 11: memory per cached object, below Varnish's"). A
//! hit pays for it by checking each value's bytes again as it builds its response's map
//! (`runtime` has no `unsafe` to skip that).

use std::ops::Range;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::MALLOC_OVERHEAD;

#[cfg(test)]
mod tests;

/// What a stored response was fetched for: kept for bans on `req.url` and `req.http.host`,
/// and for choosing between the variants of one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requested<'a> {
    /// The request target: path and query.
    pub url: &'a str,
    pub host: Option<&'a str>,
    /// The request's `Vary` fingerprint (`None`: the response has no `Vary`).
    pub variant: Option<&'a [u8]>,
}

/// The header fields of a stored response in arrival order, and what it was requested for,
/// in one buffer of exactly their size. Values parsed by hyper are slices of the
/// connection's read buffer (8 KiB or more); a stored object holding them would keep that
/// whole buffer alive while the weigher counts a few bytes, hence the copy.
///
/// A hit builds its response's map from it ([`StoredHeaders::to_map`]); the few readers that
/// look a field up (validators, ranges, surrogate keys) scan the fields, which for the dozen
/// fields of a response costs less than hashing.
#[derive(Clone, Debug)]
pub struct StoredHeaders {
    /// The number of fields; the lengths of the URL, the host and the fingerprint
    /// ([`ABSENT`]: none), each a little-endian `u32`, then those three; then one record per
    /// field: its name's tag (its place in [`NAMES`], or [`CUSTOM`]: the next of
    /// `custom_names`; [`SENSITIVE`] added when the value is), the value's length (`u32`),
    /// the value.
    packed: Bytes,
    /// The names outside [`NAMES`], in the order their fields come.
    custom_names: Option<Box<[HeaderName]>>,
}

/// Field names a record refers to by position, the ones responses carry most first. A
/// standard name missing here is stored as a custom one.
static NAMES: [HeaderName; 79] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::DATE,
    header::SERVER,
    header::CACHE_CONTROL,
    header::ETAG,
    header::LAST_MODIFIED,
    header::EXPIRES,
    header::VARY,
    header::VIA,
    header::ACCEPT_RANGES,
    header::CONTENT_ENCODING,
    header::SET_COOKIE,
    header::LINK,
    header::LOCATION,
    header::X_CONTENT_TYPE_OPTIONS,
    header::X_FRAME_OPTIONS,
    header::STRICT_TRANSPORT_SECURITY,
    header::CONTENT_SECURITY_POLICY,
    header::REFERRER_POLICY,
    header::ACCESS_CONTROL_ALLOW_ORIGIN,
    header::CONTENT_LANGUAGE,
    header::CONTENT_DISPOSITION,
    header::CONTENT_LOCATION,
    header::CONTENT_RANGE,
    header::CDN_CACHE_CONTROL,
    header::PRAGMA,
    header::AGE,
    header::ALLOW,
    header::ALT_SVC,
    header::CACHE_STATUS,
    header::X_XSS_PROTECTION,
    header::X_DNS_PREFETCH_CONTROL,
    header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    header::ACCESS_CONTROL_ALLOW_HEADERS,
    header::ACCESS_CONTROL_ALLOW_METHODS,
    header::ACCESS_CONTROL_EXPOSE_HEADERS,
    header::ACCESS_CONTROL_MAX_AGE,
    header::CONTENT_SECURITY_POLICY_REPORT_ONLY,
    header::RETRY_AFTER,
    header::REFRESH,
    header::WARNING,
    header::WWW_AUTHENTICATE,
    header::PROXY_AUTHENTICATE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::UPGRADE,
    header::PUBLIC_KEY_PINS,
    header::PUBLIC_KEY_PINS_REPORT_ONLY,
    header::ACCEPT,
    header::ACCEPT_CHARSET,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::ACCESS_CONTROL_REQUEST_HEADERS,
    header::ACCESS_CONTROL_REQUEST_METHOD,
    header::AUTHORIZATION,
    header::COOKIE,
    header::DNT,
    header::EXPECT,
    header::FORWARDED,
    header::FROM,
    header::HOST,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_MATCH,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::MAX_FORWARDS,
    header::ORIGIN,
    header::PROXY_AUTHORIZATION,
    header::RANGE,
    header::REFERER,
    header::SEC_WEBSOCKET_ACCEPT,
    header::SEC_WEBSOCKET_EXTENSIONS,
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_PROTOCOL,
    header::SEC_WEBSOCKET_VERSION,
    header::USER_AGENT,
];

/// The tag of a name outside [`NAMES`].
const CUSTOM: u8 = 0x7f;
/// Added to a tag when the value is sensitive (`HeaderValue::is_sensitive`).
const SENSITIVE: u8 = 0x80;
/// A length standing for "absent" (a `Host` or fingerprint the request did not have).
const ABSENT: u32 = u32::MAX;
/// The count and the three lengths.
const PREFIX: usize = 16;
/// A record's tag and length.
const RECORD_HEAD: usize = 5;

impl StoredHeaders {
    /// A packed copy of `fields`, for a response fetched for `requested`.
    pub fn new(requested: Requested<'_>, fields: &HeaderMap) -> StoredHeaders {
        let Requested { url, host, variant } = requested;
        let host = host.map(str::as_bytes);
        let text = url.len() + host.map_or(0, <[u8]>::len) + variant.map_or(0, <[u8]>::len);
        let records: usize = fields.values().map(|value| RECORD_HEAD + value.len()).sum();
        let mut packed = Vec::with_capacity(PREFIX + text + records);
        packed.extend_from_slice(&length(fields.len()).to_le_bytes());
        packed.extend_from_slice(&length(url.len()).to_le_bytes());
        for part in [host, variant] {
            packed.extend_from_slice(&part.map_or(ABSENT, |part| length(part.len())).to_le_bytes());
        }
        packed.extend_from_slice(url.as_bytes());
        packed.extend_from_slice(host.unwrap_or_default());
        packed.extend_from_slice(variant.unwrap_or_default());
        let mut custom_names = Vec::new();
        for (name, value) in fields {
            let tag = match NAMES.iter().position(|known| known == name) {
                Some(place) => place as u8,
                None => {
                    custom_names.push(name.clone());
                    CUSTOM
                }
            };
            packed.push(if value.is_sensitive() {
                tag | SENSITIVE
            } else {
                tag
            });
            packed.extend_from_slice(&length(value.len()).to_le_bytes());
            packed.extend_from_slice(value.as_bytes());
        }
        StoredHeaders {
            packed: Bytes::from(packed),
            custom_names: (!custom_names.is_empty()).then(|| custom_names.into_boxed_slice()),
        }
    }

    /// What the response was fetched for.
    pub fn requested(&self) -> Requested<'_> {
        let lengths = self.lengths();
        let text = |range: Option<Range<usize>>| range.map(|range| &self.packed[range]);
        let as_str = |bytes| std::str::from_utf8(bytes).expect("packed from a str");
        Requested {
            url: as_str(&self.packed[lengths.url.clone()]),
            host: text(lengths.host).map(as_str),
            variant: text(lengths.variant),
        }
    }

    /// The request's `Vary` fingerprint alone: what a lookup compares, without checking the
    /// URL's and host's bytes as `requested` does.
    pub fn variant(&self) -> Option<&[u8]> {
        self.lengths().variant.map(|range| &self.packed[range])
    }

    /// The fields as a map with room for `room` more without a rehash (a hit adds `Age`, the
    /// cache-status header and whatever `vcl_deliver` or a plugin sets).
    pub fn to_map(&self, room: usize) -> HeaderMap {
        let lengths = self.lengths();
        let mut map = HeaderMap::with_capacity(lengths.fields + room);
        for field in self.fields_from(lengths.records) {
            let mut value = HeaderValue::from_maybe_shared(self.packed.slice(field.value))
                .expect("packed from a HeaderValue");
            value.set_sensitive(field.sensitive);
            map.append(field.name.clone(), value);
        }
        map
    }

    /// Changes the fields through a map: for the edits made once, before an object is stored
    /// (body plugins, gzip marks), never on a hit.
    pub fn edit<R>(&mut self, change: impl FnOnce(&mut HeaderMap) -> R) -> R {
        let mut map = self.to_map(0);
        let result = change(&mut map);
        *self = StoredHeaders::new(self.requested(), &map);
        result
    }

    /// The first value of `name`.
    pub fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.fields()
            .find(|field| field.name == name)
            .map(|field| &self.packed[field.value])
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.fields()
            .filter(move |field| field.name == name)
            .map(|field| &self.packed[field.value])
    }

    /// Bytes the fields hold: the buffer, its `Bytes` shared header, and the custom names
    /// (each its own allocation).
    pub(super) fn weight(&self) -> usize {
        let custom = self.custom_names.as_deref().map_or(0, |names| {
            let each: usize = names
                .iter()
                .map(|name| name.as_str().len() + MALLOC_OVERHEAD)
                .sum();
            each + size_of_val(names) + MALLOC_OVERHEAD
        });
        self.packed.len() + 32 + 2 * MALLOC_OVERHEAD + custom
    }

    fn lengths(&self) -> Lengths {
        let read = |at: usize| u32::from_le_bytes(self.packed[at..at + 4].try_into().expect("four bytes"));
        let mut end = PREFIX;
        let mut next = |length: u32| {
            (length != ABSENT).then(|| {
                let start = end;
                end += length as usize;
                start..end
            })
        };
        let url = next(read(4)).expect("a URL is always there");
        let host = next(read(8));
        let variant = next(read(12));
        Lengths {
            fields: read(0) as usize,
            url,
            host,
            variant,
            records: end,
        }
    }

    fn fields(&self) -> Fields<'_> {
        self.fields_from(self.lengths().records)
    }

    /// The fields, the first record starting at `records`.
    fn fields_from(&self, records: usize) -> Fields<'_> {
        Fields {
            packed: &self.packed,
            at: records,
            custom_names: self.custom_names.as_deref().unwrap_or_default().iter(),
        }
    }
}

/// A stored value as text, as `HeaderValue::to_str` reads one: `None` unless every byte is
/// visible ASCII or a tab (obs-text is not text here either).
pub fn field_text(value: &[u8]) -> Option<&str> {
    if !value
        .iter()
        .all(|&byte| byte == b'\t' || (b' '..=b'~').contains(&byte))
    {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// Where the parts of [`StoredHeaders::packed`] are.
struct Lengths {
    fields: usize,
    url: Range<usize>,
    host: Option<Range<usize>>,
    variant: Option<Range<usize>>,
    /// Where the first record starts.
    records: usize,
}

/// One field of [`StoredHeaders`]: its name, and where its value is in the buffer.
struct Field<'a> {
    name: &'a HeaderName,
    value: Range<usize>,
    sensitive: bool,
}

struct Fields<'a> {
    packed: &'a [u8],
    at: usize,
    custom_names: std::slice::Iter<'a, HeaderName>,
}

impl<'a> Iterator for Fields<'a> {
    type Item = Field<'a>;

    fn next(&mut self) -> Option<Field<'a>> {
        let head = self.packed.get(self.at..self.at + RECORD_HEAD)?;
        let tag = head[0] & !SENSITIVE;
        let len = u32::from_le_bytes(head[1..].try_into().expect("four bytes")) as usize;
        let name = match tag {
            CUSTOM => self.custom_names.next().expect("one custom name per custom tag"),
            known => &NAMES[known as usize],
        };
        let start = self.at + RECORD_HEAD;
        self.at = start + len;
        Some(Field {
            name,
            value: start..self.at,
            sensitive: head[0] & SENSITIVE != 0,
        })
    }
}

/// A length as the buffer keeps it. Lengths of a request target, a header value or a field
/// count are bounded by the request and response limits, far below 4 GiB.
fn length(len: usize) -> u32 {
    u32::try_from(len).expect("bounded by the header limits")
}
