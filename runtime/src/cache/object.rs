//! A stored response and the facts needed to judge its freshness later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::StatusCode;

use super::body::StoredBody;
use super::rules::age;
use super::rules::control::ResponseDirectives;

mod headers;

pub use headers::{field_text, Requested, StoredHeaders};

/// Response metadata fixed when the origin's headers arrive; shared by the stored object and
/// by requests served while the body is still streaming in.
#[derive(Debug)]
pub struct ObjectHead {
    pub status: StatusCode,
    /// Headers as stored: hop-by-hop fields and `Age` removed (edgecache computes `Age`);
    /// with them, what the response was requested for ([`ObjectHead::requested`]).
    pub headers: StoredHeaders,
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
    /// `beresp.do_esi`: the body is parsed for ESI when stored (see [`EsiInstructions`]).
    pub esi: bool,
}

impl ObjectHead {
    /// The object's age at `now` (RFC 9111 §4.2.3 `current_age`).
    pub fn age_at(&self, now: SystemTime) -> Duration {
        age::current_age(self.initial_age, self.response_time, now)
    }

    /// The URL, `Host` and `Vary` fingerprint it was fetched for.
    pub fn requested(&self) -> Requested<'_> {
        self.headers.requested()
    }

    /// The `Vary` fingerprint it was fetched for (`None`: no `Vary`).
    pub fn variant(&self) -> Option<&[u8]> {
        self.headers.variant()
    }
}

/// What the allocator adds to every allocation (glibc: a 16-byte header, sizes rounded up).
const MALLOC_OVERHEAD: usize = 16;

/// An ESI object's body as delivery steps, parsed once when it is stored (`proxy::esi`
/// parses; the cache only keeps them): the stored bytes to send as they are, and the includes
/// fetched in their place.
#[derive(Debug)]
pub struct EsiInstructions(pub Vec<EsiStep>);

#[derive(Debug)]
pub enum EsiStep {
    /// These bytes of the stored body, as they are.
    Verbatim(std::ops::Range<u64>),
    Include(EsiInclude),
}

/// `<esi:include src="..."/>`, resolved against the URL of the page that holds it.
#[derive(Debug)]
pub struct EsiInclude {
    /// The path and query to request.
    pub url: Box<str>,
    /// The `Host` of a same-host absolute `src` (`http://host/path`); `None`: the page's.
    pub host: Option<Box<str>>,
    /// `onerror="continue"`: a failing fragment is left out instead of aborting the page.
    pub continue_on_error: bool,
}

impl EsiInstructions {
    /// Bytes the instructions hold (for the object's weight).
    fn weight(&self) -> usize {
        let include = |include: &EsiInclude| {
            include.url.len() + include.host.as_ref().map_or(0, |host| host.len()) + 2 * MALLOC_OVERHEAD
        };
        let steps: usize = self
            .0
            .iter()
            .map(|step| match step {
                EsiStep::Verbatim(_) => 0,
                EsiStep::Include(included) => include(included),
            })
            .sum();
        self.0.capacity() * size_of::<EsiStep>() + steps + size_of::<Self>() + 2 * MALLOC_OVERHEAD
    }
}

/// Parses a complete body into ESI instructions for the object `head` describes (`None`: the
/// body holds no ESI and is served as it is). The proxy provides it (see `fill::Fill`).
pub type EsiParser = fn(&ObjectHead, &StoredBody) -> Option<EsiInstructions>;

/// A complete stored response.
#[derive(Debug)]
pub struct CachedObject {
    pub head: Arc<ObjectHead>,
    pub body: StoredBody,
    /// The parsed ESI body when `beresp.do_esi` was set and the body holds ESI.
    pub esi: Option<Arc<EsiInstructions>>,
    hits: AtomicU64,
    /// The newest ban this object has been tested against (`proxy::bans`; 0: none yet).
    bans_checked: AtomicU64,
    /// The freshness lifetime a soft purge cut `head.ttl` down to, in nanoseconds
    /// ([`NOT_SOFT_PURGED`]: none). The head is shared and immutable, so the cut lives here.
    soft_purged_ttl: AtomicU64,
}

/// [`CachedObject::soft_purged_ttl`] of an object no soft purge has touched.
const NOT_SOFT_PURGED: u64 = u64::MAX;

impl CachedObject {
    pub fn new(head: Arc<ObjectHead>, body: StoredBody) -> CachedObject {
        CachedObject {
            head,
            body,
            esi: None,
            hits: AtomicU64::new(0),
            bans_checked: AtomicU64::new(0),
            soft_purged_ttl: AtomicU64::new(NOT_SOFT_PURGED),
        }
    }

    /// The object with its parsed ESI body.
    pub fn with_esi(mut self, esi: Option<Arc<EsiInstructions>>) -> CachedObject {
        self.esi = esi;
        self
    }

    /// Bytes this object really holds: the object and its head with their `Arc`s, the packed
    /// fields (with the URL, `Host` and `Vary` fingerprint kept for bans and variant
    /// selection), and the body. The store adds what each key costs.
    pub fn weight(&self) -> u64 {
        // Two `Arc`s: strong and weak counts, and the allocator's overhead.
        const FIXED: usize = size_of::<CachedObject>() + size_of::<ObjectHead>() + 2 * (16 + MALLOC_OVERHEAD);
        let esi = self.esi.as_ref().map_or(0, |esi| esi.weight() + 16);
        (FIXED + self.head.headers.weight() + esi) as u64 + self.body.weight()
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

    /// The freshness lifetime: `head.ttl`, or less once a soft purge ended it.
    pub fn ttl(&self) -> Duration {
        match self.soft_purged_ttl.load(Ordering::Relaxed) {
            NOT_SOFT_PURGED => self.head.ttl,
            cut => self.head.ttl.min(Duration::from_nanos(cut)),
        }
    }

    /// Whether a soft purge made this object stale (it is then served in grace while one
    /// background fetch refreshes it).
    pub fn is_soft_purged(&self) -> bool {
        self.soft_purged_ttl.load(Ordering::Relaxed) != NOT_SOFT_PURGED
    }

    /// Soft purge (vmod xkey's `softpurge`, Varnish's `purge.soft()`): the freshness ends at
    /// `now`, so the grace and keep windows start from now. Returns `false`, changing nothing,
    /// when the object is already stale at `now`, as xkey skips (and does not count) those.
    pub fn soft_purge(&self, now: SystemTime) -> bool {
        let age = self.head.age_at(now);
        if age >= self.ttl() {
            return false;
        }
        let nanos = u64::try_from(age.as_nanos()).unwrap_or(NOT_SOFT_PURGED - 1);
        self.soft_purged_ttl.fetch_min(nanos, Ordering::Relaxed);
        true
    }

    /// Counts a hit and returns the count before it (`obj.hits` in VCL terms).
    pub fn record_hit(&self) -> u64 {
        self.hits.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
impl CachedObject {
    /// A stored `200` for `url` with `headers` and a short body, fresh for ten minutes from
    /// `response_time`, with no grace, the variant of `Vary` fingerprint `variant` (for unit
    /// tests).
    pub fn for_tests(
        url: &str,
        headers: http::HeaderMap,
        variant: Option<&[u8]>,
        response_time: SystemTime,
    ) -> CachedObject {
        let requested = Requested {
            url,
            host: None,
            variant,
        };
        let head = ObjectHead {
            status: StatusCode::OK,
            headers: StoredHeaders::new(requested, &headers),
            response_time,
            initial_age: Duration::ZERO,
            ttl: Duration::from_secs(600),
            grace: Duration::ZERO,
            retention: Duration::from_secs(600),
            directives: Default::default(),
            esi: false,
        };
        CachedObject::new(Arc::new(head), bytes::Bytes::from_static(b"body").into())
    }
}
