//! A stored response and the facts needed to judge its freshness later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::body::StoredBody;
use super::rules::age;
use super::rules::control::ResponseDirectives;

/// Response metadata fixed when the origin's headers arrive; shared by the stored object and
/// by requests served while the body is still streaming in.
#[derive(Debug)]
pub struct ObjectHead {
    pub status: StatusCode,
    /// Headers as stored: hop-by-hop fields and `Age` removed (edgecache computes `Age`).
    pub headers: HeaderMap,
    /// When the response arrived (`response_time` of RFC 9111 §4.2.3).
    pub response_time: SystemTime,
    /// `corrected_initial_age` of RFC 9111 §4.2.3.
    pub initial_age: Duration,
    /// Freshness lifetime (RFC 9111 §4.2.1), after the policy's `beresp.ttl`.
    pub ttl: Duration,
    /// How long past `ttl` it may be served while the origin fails (`beresp.grace`).
    pub grace: Duration,
    /// How long the store keeps it from insertion (freshness left, stale windows, keep).
    pub retention: Duration,
    /// The response's cache directives, for the stale and revalidation rules.
    pub directives: ResponseDirectives,
    /// The `Vary` fingerprint of the request that fetched it (`None` = no `Vary`).
    pub variant: Option<Bytes>,
    /// The URL and `Host` it was fetched for, for bans on `req.url` / `req.http.host`.
    pub url: Box<str>,
    pub host: Option<http::HeaderValue>,
}

impl ObjectHead {
    /// The object's age at `now` (RFC 9111 §4.2.3 `current_age`).
    pub fn age_at(&self, now: SystemTime) -> Duration {
        age::current_age(self.initial_age, self.response_time, now)
    }
}

/// A copy of `headers` whose values all live in one buffer of exactly their size, with room
/// for `room` more fields. Values parsed by hyper are slices of the connection's read buffer
/// (8 KiB or more); a stored object holding them would keep that whole buffer alive while
/// the weigher counts a few bytes.
pub fn compact_headers(headers: &HeaderMap, room: usize) -> HeaderMap {
    let total = headers.values().map(HeaderValue::len).sum();
    let mut buffer = BytesMut::with_capacity(total);
    for value in headers.values() {
        buffer.extend_from_slice(value.as_bytes());
    }
    let buffer = buffer.freeze();
    let mut compact = HeaderMap::with_capacity(headers.len() + room);
    let mut offset = 0;
    for (name, value) in headers {
        let end = offset + value.len();
        // The bytes were a valid value a moment ago; keeping the original is the fallback.
        let mut copy =
            HeaderValue::from_maybe_shared(buffer.slice(offset..end)).unwrap_or_else(|_| value.clone());
        copy.set_sensitive(value.is_sensitive());
        compact.append(name.clone(), copy);
        offset = end;
    }
    compact
}

/// A copy of `value` in a buffer of its own size (see [`compact_headers`]).
pub fn compact_value(value: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
    copy.set_sensitive(value.is_sensitive());
    copy
}

/// What the allocator adds to every allocation (glibc: a 16-byte header, sizes rounded up).
const MALLOC_OVERHEAD: usize = 16;

/// Bytes a header map holds: its entry table at capacity, its index table, the links of
/// repeated names, field names (each counted as its own allocation, though standard names are
/// static) and values (as one buffer, see [`compact_headers`]).
fn header_bytes(headers: &HeaderMap) -> usize {
    // The `http` crate's entry (hash, links, name, value) and extra value (links, value).
    const ENTRY: usize = size_of::<(u16, Option<(usize, usize)>, HeaderName, HeaderValue)>();
    const EXTRA: usize = size_of::<((usize, usize), (usize, usize), HeaderValue)>();
    // An index slot is two u16; the table is a power of two at most 3/4 full.
    const SLOT: usize = 4;
    let slots = (headers.capacity() * 4 / 3).next_power_of_two();
    let extra = headers.len() - headers.keys_len();
    let names: usize = headers
        .keys()
        .map(|name| name.as_str().len() + MALLOC_OVERHEAD)
        .sum();
    let values: usize = headers.values().map(HeaderValue::len).sum();
    // Three allocations (entries, indices, values) with the `Bytes` shared header (32 bytes).
    headers.capacity() * ENTRY + slots * SLOT + extra * EXTRA + names + values + 3 * MALLOC_OVERHEAD + 32
}

/// A complete stored response.
#[derive(Debug)]
pub struct CachedObject {
    pub head: Arc<ObjectHead>,
    pub body: StoredBody,
    hits: AtomicU64,
    /// The newest ban this object has been tested against (`proxy::bans`; 0: none yet).
    bans_checked: AtomicU64,
}

impl CachedObject {
    pub fn new(head: Arc<ObjectHead>, body: StoredBody) -> CachedObject {
        CachedObject {
            head,
            body,
            hits: AtomicU64::new(0),
            bans_checked: AtomicU64::new(0),
        }
    }

    /// Bytes this object really holds: the object and its head with their `Arc`s, the header
    /// map as allocated, the body's buffers, and the URL, `Host` and `Vary` fingerprint kept
    /// for bans and variant selection. The store adds what each key costs.
    pub fn weight(&self) -> u64 {
        const FIXED: usize = size_of::<CachedObject>()
            + size_of::<ObjectHead>()
            // Two `Arc`s (strong and weak counts) and the body's chunk list.
            + 2 * (16 + MALLOC_OVERHEAD)
            + 16
            + MALLOC_OVERHEAD;
        let head = &self.head;
        let chunks = self.body.chunk_count() * size_of::<Bytes>();
        let kept = head.url.len()
            + head.host.as_ref().map_or(0, |host| host.len() + MALLOC_OVERHEAD)
            + head
                .variant
                .as_ref()
                .map_or(0, |variant| variant.len() + MALLOC_OVERHEAD)
            + 2 * MALLOC_OVERHEAD;
        (FIXED + header_bytes(&head.headers) + chunks + kept) as u64 + self.body.allocated()
    }

    /// Hits so far (`obj.hits`).
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// The sequence number of the newest ban this object has been tested against.
    pub fn bans_checked(&self) -> u64 {
        self.bans_checked.load(Ordering::Relaxed)
    }

    /// Records that the bans up to `seq` have been tested against this object.
    pub fn mark_bans_checked(&self, seq: u64) {
        self.bans_checked.fetch_max(seq, Ordering::Relaxed);
    }

    /// Counts a hit and returns the count before it (`obj.hits` in VCL terms).
    pub fn record_hit(&self) -> u64 {
        self.hits.fetch_add(1, Ordering::Relaxed)
    }
}
