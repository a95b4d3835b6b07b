//! Representations stored by parts (RFC 9111 §3.3, §3.4): the index of what the cache knows
//! about each one, and its slices in the object store.
//!
//! A sliced representation is kept as fixed-size slices (see `rules::partial`), each a
//! `206` stored as an object of its own in the [`Store`](super::store::Store) under a key
//! derived from the representation's key, so slices count against `--cache-size`, are evicted
//! one by one and carry their own freshness, like nginx's `slice` module stores them. The index
//! holds, per key, what the last part said of the whole: its fields, complete length and strong
//! validator, so a request learns which slices it needs without asking the origin.
//!
//! This module never calls a backend: `proxy::partial` fetches the missing slices.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use moka::sync::Cache;

use super::key::{CacheKey, KeyHasher};
use super::object::{CachedObject, ObjectHead};
use super::rules::partial::{self as rules, Validator};
use super::rules::vary::VaryRule;
use super::store::Store;

/// Most representations the index knows at once. An entry is a few hundred bytes (the fields
/// of one response); its slices, which hold the bytes, are weighed by the store.
const MAX_INDEXED: u64 = 100_000;

/// How long the index remembers that a representation is too large to store whole, so that its
/// next request fetches it by slices.
const TOO_LARGE_REMEMBERED: Duration = Duration::from_secs(600);

/// What the index knows of a key.
#[derive(Debug, Clone)]
pub(crate) enum Known {
    /// A response too large for `--max-object-size` was seen, with a strong validator: fetch
    /// it by slices next time.
    TooLarge,
    /// Parts are stored (or were: slices may have been evicted since).
    Sliced(Arc<Representation>),
}

/// The whole representation, as its newest stored part describes it (RFC 9111 §3.4: the
/// newest part's fields replace the stored ones).
#[derive(Debug)]
pub(crate) struct Representation {
    /// A `200` head with the representation's fields (`Content-Length` the complete length,
    /// no `Content-Range`) and the newest part's freshness.
    pub head: Arc<ObjectHead>,
    pub complete: u64,
    pub validator: Validator,
    /// The slice size the parts were cut with (a reload may change `--slice-size`).
    pub slice_size: u64,
}

impl Representation {
    /// Number of slices of the whole.
    pub fn slice_count(&self) -> u64 {
        self.complete.div_ceil(self.slice_size)
    }
}

/// The index of sliced representations, and their slices in `store`. Clones share them.
#[derive(Clone)]
pub(crate) struct Partials {
    known: Cache<CacheKey, Known, KeyHasher>,
    /// Whether anything was ever put in `known`: until then the misses, passes and purges
    /// that ask need not hash their key into it (most caches never see a range or an object
    /// too large to store whole).
    any_known: Arc<AtomicBool>,
    store: Store,
}

impl Partials {
    pub fn new(store: Store) -> Partials {
        let known = Cache::builder()
            .max_capacity(MAX_INDEXED)
            .expire_after(RememberFor)
            .build_with_hasher(KeyHasher::default());
        Partials {
            known,
            any_known: Arc::default(),
            store,
        }
    }

    pub fn known(&self, key: &CacheKey) -> Option<Known> {
        self.any_known
            .load(Ordering::Relaxed)
            .then(|| self.known.get(key))
            .flatten()
    }

    /// Remembers that `key`'s representation, whose response with `fields` is too large to
    /// store whole, can be stored by slices (it has a strong validator and no `Vary`), so that
    /// its next request fetches it that way; unless parts of it are stored already.
    pub fn remember_too_large(&self, key: &CacheKey, fields: &HeaderMap) {
        if rules::strong_validator(fields).is_some() && !fields.contains_key(http::header::VARY) {
            self.known.entry_by_ref(key).or_insert_with(|| Known::TooLarge);
            self.any_known.store(true, Ordering::Relaxed);
        }
    }

    /// Records `representation` as what `key`'s parts are now.
    pub fn describe(&self, key: &CacheKey, representation: Arc<Representation>) {
        self.known.insert(key.clone(), Known::Sliced(representation));
        self.any_known.store(true, Ordering::Relaxed);
    }

    /// The stored slice `index` of `representation` under `key`, if it is still in the store.
    pub fn slice(
        &self,
        key: &CacheKey,
        representation: &Representation,
        index: u64,
    ) -> Option<Arc<CachedObject>> {
        let slice_key = slice_key(key, representation.slice_size, index);
        self.store.lookup(&slice_key, &HeaderMap::new())
    }

    /// Stores `object` (a `206` holding exactly slice `index`) as that slice of `key`.
    pub fn store_slice(&self, key: &CacheKey, slice_size: u64, index: u64, object: Arc<CachedObject>) {
        self.store
            .insert(slice_key(key, slice_size, index), VaryRule::None, object);
    }

    /// The stored slices of `key`'s representation.
    pub fn slices(&self, key: &CacheKey) -> Vec<Arc<CachedObject>> {
        let Some(Known::Sliced(representation)) = self.known(key) else {
            return Vec::new();
        };
        (0..representation.slice_count())
            .filter_map(|index| self.slice(key, &representation, index))
            .collect()
    }

    /// Forgets `key`'s representation and removes its slices (a purge, or parts of another
    /// representation arrived, RFC 9111 §3.4). Returns whether anything was known.
    pub fn remove(&self, key: &CacheKey) -> bool {
        if !self.any_known.load(Ordering::Relaxed) {
            return false;
        }
        let Some(known) = self.known.remove(key) else {
            return false;
        };
        if let Known::Sliced(representation) = known {
            for index in 0..representation.slice_count() {
                self.store
                    .purge(&slice_key(key, representation.slice_size, index));
            }
        }
        true
    }

    /// Representations indexed (after pending maintenance has run).
    pub fn count(&self) -> u64 {
        self.known.run_pending_tasks();
        self.known.entry_count()
    }
}

/// The store key of slice `index` (cut with `slice_size`) of the representation under `key`:
/// `key`, then a separator no key built from a host and a target contains, then the slice.
fn slice_key(key: &CacheKey, slice_size: u64, index: u64) -> CacheKey {
    let mut bytes = key.as_bytes().to_vec();
    bytes.extend_from_slice(format!("\0slice\0{slice_size}\0{index}").as_bytes());
    CacheKey::from_hash_data(&bytes)
}

/// A sliced representation is remembered as long as its newest part is kept; a "too large"
/// mark for [`TOO_LARGE_REMEMBERED`].
struct RememberFor;

impl moka::Expiry<CacheKey, Known> for RememberFor {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        value: &Known,
        _now: std::time::Instant,
    ) -> Option<Duration> {
        Some(match value {
            Known::TooLarge => TOO_LARGE_REMEMBERED,
            Known::Sliced(representation) => representation.head.retention,
        })
    }

    fn expire_after_update(
        &self,
        key: &CacheKey,
        value: &Known,
        now: std::time::Instant,
        _current: Option<Duration>,
    ) -> Option<Duration> {
        self.expire_after_create(key, value, now)
    }
}
