//! A stored response and the facts needed to judge its freshness later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

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

/// A complete stored response.
#[derive(Debug)]
pub struct CachedObject {
    pub head: Arc<ObjectHead>,
    pub body: Bytes,
    hits: AtomicU64,
}

impl CachedObject {
    pub fn new(head: Arc<ObjectHead>, body: Bytes) -> CachedObject {
        CachedObject {
            head,
            body,
            hits: AtomicU64::new(0),
        }
    }

    /// Bytes this object costs the cache: body plus header names and values, plus a fixed
    /// overhead for the bookkeeping around it.
    pub fn weight(&self) -> u64 {
        const BOOKKEEPING: u64 = 256;
        let headers: usize = self
            .head
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum();
        BOOKKEEPING + headers as u64 + self.body.len() as u64
    }

    /// Hits so far (`obj.hits`).
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Counts a hit and returns the count before it (`obj.hits` in VCL terms).
    pub fn record_hit(&self) -> u64 {
        self.hits.fetch_add(1, Ordering::Relaxed)
    }
}
