//! Object storage: moka, weighted by object bytes, bounded by the configured cache size.
//!
//! A primary key holds the variants `Vary` selects between. The variant set is immutable and
//! replaced as a whole on insert, so a reader never sees it half-updated, and a response being
//! served keeps its `Arc` to the object: eviction never cuts a response short.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use moka::Expiry;

use super::key::{CacheKey, KeyHasher};
use super::keys::KeyIndex;
use super::object::CachedObject;
use super::rules::vary::VaryRule;
use crate::config::CacheAdmission;
use crate::telemetry::Stats;

/// What a primary key costs besides its objects: moka's entry (hash-table slot, access-order
/// and write-order nodes, timer-wheel node, entry info, each its own allocation), the
/// [`Variants`] and its object list. Estimated from moka 0.12's structures; the memory tests
/// (`tests/security_memory.rs`) check the sum against the process's RSS.
const KEY_OVERHEAD: u64 = 512;

/// Most variants kept per primary key; the oldest goes when a new one arrives.
const MAX_VARIANTS: usize = 32;

/// The stored variants of one primary key, all fetched with the same `Vary` rule.
#[derive(Debug)]
pub struct Variants {
    rule: VaryRule,
    /// Boxed, so that a key's list is exactly as long as its variants (a `Vec` pushed to once
    /// holds room for four).
    objects: Box<[Arc<CachedObject>]>,
    weight: u64,
}

impl Variants {
    fn new(key: &CacheKey, rule: VaryRule, objects: Vec<Arc<CachedObject>>) -> Variants {
        let objects = objects.into_boxed_slice();
        let objects_weight: u64 = objects.iter().map(|o| o.weight()).sum();
        let list = (objects.len() * size_of::<Arc<CachedObject>>()) as u64;
        Variants {
            rule,
            objects,
            weight: KEY_OVERHEAD + key.len() as u64 + list + objects_weight,
        }
    }

    fn retention(&self) -> Duration {
        self.objects
            .iter()
            .map(|o| o.head.retention)
            .max()
            .unwrap_or_default()
    }
}

struct RetainFor;

impl Expiry<CacheKey, Arc<Variants>> for RetainFor {
    fn expire_after_create(&self, _key: &CacheKey, value: &Arc<Variants>, _now: Instant) -> Option<Duration> {
        Some(value.retention())
    }

    fn expire_after_update(
        &self,
        _key: &CacheKey,
        value: &Arc<Variants>,
        _now: Instant,
        _current: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.retention())
    }
}

/// Whether a request selects the variant with fingerprint `variant` under `rule`. `Vary: *`
/// gives no fingerprint and so matches nothing (RFC 9111 §4.1).
pub fn variant_matches(rule: &VaryRule, request: &HeaderMap, variant: Option<&[u8]>) -> bool {
    match (rule, variant) {
        (VaryRule::None, _) => true,
        (_, Some(fingerprint)) => rule.matches(request, fingerprint),
        (_, None) => false,
    }
}

/// The object store.
#[derive(Clone)]
pub struct Store {
    objects: Cache<CacheKey, Arc<Variants>, KeyHasher>,
    /// The surrogate keys of the stored objects, kept in step with `objects`: `insert` indexes
    /// the new object and forgets the variants it replaces, the eviction listener forgets what
    /// leaves otherwise (evicted, expired, purged).
    keys: Arc<KeyIndex>,
}

impl Store {
    /// A store holding at most `capacity` bytes; `admission` decides whether a new object may
    /// evict others when it is full; `keys` indexes the objects by their surrogate keys.
    pub fn new(capacity: u64, admission: CacheAdmission, stats: Arc<Stats>, keys: KeyIndex) -> Store {
        let policy = match admission {
            CacheAdmission::Lru => EvictionPolicy::lru(),
            CacheAdmission::TinyLfu => EvictionPolicy::tiny_lfu(),
        };
        let keys = Arc::new(keys);
        let index = keys.clone();
        let objects = Cache::builder()
            .eviction_policy(policy)
            .eviction_listener(move |_key, variants: Arc<Variants>, cause| {
                use moka::notification::RemovalCause;
                if cause == RemovalCause::Size {
                    stats.evictions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // `insert` knows which variants a replacement drops; every other cause drops
                // them all.
                if cause != RemovalCause::Replaced {
                    index.remove(&variants.objects);
                }
            })
            .max_capacity(capacity)
            .weigher(|_key: &CacheKey, variants: &Arc<Variants>| {
                u32::try_from(variants.weight).unwrap_or(u32::MAX)
            })
            .expire_after(RetainFor)
            .build_with_hasher(KeyHasher::default());
        Store { objects, keys }
    }

    /// The surrogate-key index of the stored objects.
    pub fn keys(&self) -> &KeyIndex {
        &self.keys
    }

    /// The stored variant matching the request's headers, if any (fresh or not: the caller
    /// judges freshness).
    pub fn lookup(&self, key: &CacheKey, request: &HeaderMap) -> Option<Arc<CachedObject>> {
        let variants = self.objects.get(key)?;
        variants
            .objects
            .iter()
            .find(|object| variant_matches(&variants.rule, request, object.head.variant()))
            .cloned()
    }

    /// Stores an object fetched under `rule`, replacing the variant with the same fingerprint.
    /// Objects of a different `Vary` rule replace the whole set, as the origin changed its mind.
    ///
    /// One key's variant set is read and replaced atomically (moka's compute), so two inserts
    /// racing for a key keep both variants, and the variants a replacement drops are exactly
    /// the ones the key index forgets.
    pub fn insert(&self, key: CacheKey, rule: VaryRule, object: Arc<CachedObject>) {
        use moka::ops::compute::Op;
        let mut dropped = Vec::new();
        self.keys.insert(&key, &object);
        self.objects.entry_by_ref(&key).and_compute_with(|previous| {
            let previous = previous.map(|entry| entry.into_value());
            let mut objects = Vec::new();
            for existing in previous.iter().flat_map(|previous| &previous.objects) {
                let kept = previous.as_ref().is_some_and(|previous| previous.rule == rule)
                    && existing.head.variant() != object.head.variant();
                if kept { &mut objects } else { &mut dropped }.push(existing.clone());
            }
            if objects.len() >= MAX_VARIANTS {
                dropped.push(objects.remove(0));
            }
            objects.push(object.clone());
            Op::Put(Arc::new(Variants::new(&key, rule, objects)))
        });
        self.keys.remove(&dropped);
    }

    /// Whether `object` is stored under `key` (and not only still held by someone).
    pub fn holds(&self, key: &CacheKey, object: &Arc<CachedObject>) -> bool {
        self.objects
            .get(key)
            .is_some_and(|variants| variants.objects.iter().any(|stored| Arc::ptr_eq(stored, object)))
    }

    /// Every stored variant of a key.
    pub fn variants(&self, key: &CacheKey) -> Vec<Arc<CachedObject>> {
        self.objects
            .get(key)
            .map_or_else(Vec::new, |variants| variants.objects.to_vec())
    }

    /// Every stored object with its key, in no particular order (the ban lurker's walk). Keys
    /// stored or removed meanwhile may or may not be seen.
    pub fn objects(&self) -> impl Iterator<Item = (Arc<CacheKey>, Arc<CachedObject>)> + '_ {
        self.objects.iter().flat_map(|(key, variants)| {
            (0..variants.objects.len()).map(move |at| (key.clone(), variants.objects[at].clone()))
        })
    }

    /// Removes one stored variant of a key, keeping the others; whether it was stored.
    pub fn remove_object(&self, key: &CacheKey, object: &Arc<CachedObject>) -> bool {
        use moka::ops::compute::Op;
        let result = self.objects.entry_by_ref(key).and_compute_with(|entry| {
            let Some(entry) = entry else { return Op::Nop };
            let variants = entry.into_value();
            if !variants.objects.iter().any(|stored| Arc::ptr_eq(stored, object)) {
                return Op::Nop;
            }
            let rest: Vec<_> = variants
                .objects
                .iter()
                .filter(|stored| !Arc::ptr_eq(stored, object))
                .cloned()
                .collect();
            if rest.is_empty() {
                Op::Remove
            } else {
                Op::Put(Arc::new(Variants::new(key, variants.rule.clone(), rest)))
            }
        });
        let removed = !matches!(
            result,
            moka::ops::compute::CompResult::StillNone(_) | moka::ops::compute::CompResult::Unchanged(_)
        );
        if removed {
            // A `Put` replaces the entry, which the eviction listener leaves to us.
            self.keys.remove([object]);
        }
        removed
    }

    /// Removes every variant of a key. Returns whether anything was stored.
    pub fn purge(&self, key: &CacheKey) -> bool {
        self.objects.remove(key).is_some()
    }

    /// Bytes currently accounted (after pending maintenance has run).
    pub fn weighted_size(&self) -> u64 {
        self.objects.run_pending_tasks();
        self.objects.weighted_size()
    }

    /// Number of primary keys stored.
    pub fn entry_count(&self) -> u64 {
        self.objects.run_pending_tasks();
        self.objects.entry_count()
    }
}
