//! Surrogate keys: which stored objects carry which keys, so that one purge finds every object
//! tagged with a key without knowing their URLs (varnish-modules' vmod xkey, Fastly's
//! `Surrogate-Key`, Cloudflare's `Cache-Tag`).
//!
//! An object's keys are the tokens of its key headers (`--surrogate-key-headers`, by default
//! `xkey`, `Surrogate-Key` and `Cache-Tag`), split as vmod xkey splits them: on commas and
//! blanks, so `Surrogate-Key: a b` and `Cache-Tag: a,b` both give `a` and `b`. The store
//! indexes an object when it is inserted and forgets it when it is replaced, evicted, expires
//! or is purged (see `store`); the keys are read again from the stored headers then, so the
//! index holds no copy of them per object. An object without key headers never takes the
//! index's lock, and nothing here runs on a hit.
//!
//! The index holds each object weakly (by the address of its allocation, which a `Weak` keeps
//! from being reused): it never keeps an evicted body alive. The store replaces a key's
//! variants atomically, so every object it drops is forgotten here; a purge still checks what
//! it finds against the store (an insert may be under way), and counts only what it removed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use http::HeaderName;
use parking_lot::RwLock;

use super::key::CacheKey;
use super::object::{field_text, CachedObject, StoredHeaders};

#[cfg(test)]
mod tests;

/// The tokens of a key list (a key header's value, or `xkey.purge`'s argument): separated by
/// commas, spaces and tabs, as vmod xkey's `xkey_tok` reads them.
pub fn tokens(list: &str) -> impl Iterator<Item = &str> {
    list.split([',', ' ', '\t']).filter(|token| !token.is_empty())
}

/// An object indexed under a key: the cache key it is stored under, and the object.
struct Tagged {
    key: CacheKey,
    object: Weak<CachedObject>,
}

/// The objects under each surrogate key, by the address of each object's allocation.
type Index = HashMap<Box<str>, HashMap<usize, Tagged>>;

/// The surrogate-key index the store keeps up to date.
pub struct KeyIndex {
    headers: Vec<HeaderName>,
    index: RwLock<Index>,
    /// Objects indexed under at least one key.
    objects: AtomicU64,
    /// Objects removed or made stale by a purge by key (`xkey.purge`, `POST /purge?key=`).
    purged: AtomicU64,
}

impl KeyIndex {
    /// An empty index reading the keys of the response headers `headers`; none turns the
    /// index off.
    pub fn new(headers: Vec<HeaderName>) -> KeyIndex {
        KeyIndex {
            headers,
            index: RwLock::default(),
            objects: AtomicU64::new(0),
            purged: AtomicU64::new(0),
        }
    }

    /// The key headers, which delivery removes unless told to keep them.
    pub fn headers(&self) -> &[HeaderName] {
        &self.headers
    }

    /// Whether `headers` name any key.
    fn carries_keys(&self, headers: &StoredHeaders) -> bool {
        self.keys_of(headers).next().is_some()
    }

    /// Every key in `headers`, in order (a key repeated is given again).
    fn keys_of<'a>(&'a self, headers: &'a StoredHeaders) -> impl Iterator<Item = &'a str> {
        self.headers
            .iter()
            .flat_map(move |name| headers.get_all(name))
            .filter_map(field_text)
            .flat_map(tokens)
    }

    /// Indexes `object`, stored under `key`, by the keys of its headers.
    pub fn insert(&self, key: &CacheKey, object: &Arc<CachedObject>) {
        if !self.carries_keys(&object.head.headers) {
            return;
        }
        let address = Arc::as_ptr(object) as usize;
        let mut index = self.index.write();
        for name in self.keys_of(&object.head.headers) {
            let tagged = || Tagged {
                key: key.clone(),
                object: Arc::downgrade(object),
            };
            match index.get_mut(name) {
                Some(objects) => {
                    objects.entry(address).or_insert_with(tagged);
                }
                None => {
                    index.insert(name.into(), HashMap::from([(address, tagged())]));
                }
            }
        }
        self.objects.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets `objects`, which the store no longer holds.
    pub fn remove<'a>(&self, objects: impl IntoIterator<Item = &'a Arc<CachedObject>>) {
        let mut tagged = objects
            .into_iter()
            .filter(|object| self.carries_keys(&object.head.headers))
            .peekable();
        if tagged.peek().is_none() {
            return;
        }
        let mut index = self.index.write();
        for object in tagged {
            let address = Arc::as_ptr(object) as usize;
            let mut found = false;
            for name in self.keys_of(&object.head.headers) {
                if let Some(objects) = index.get_mut(name) {
                    found |= objects.remove(&address).is_some();
                    if objects.is_empty() {
                        index.remove(name);
                    }
                }
            }
            if found {
                self.objects.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// The live objects under any of the keys in `list` (see [`tokens`]), each once, with the
    /// cache key each is stored under.
    pub fn tagged(&self, list: &str) -> Vec<(CacheKey, Arc<CachedObject>)> {
        let index = self.index.read();
        let mut seen = std::collections::HashSet::new();
        let mut found = Vec::new();
        for name in tokens(list) {
            for (address, tagged) in index.get(name).into_iter().flatten() {
                if !seen.insert(*address) {
                    continue;
                }
                if let Some(object) = tagged.object.upgrade() {
                    found.push((tagged.key.clone(), object));
                }
            }
        }
        found
    }

    /// Counts objects a purge by key removed or made stale.
    pub fn count_purged(&self, objects: usize) {
        self.purged.fetch_add(objects as u64, Ordering::Relaxed);
    }

    /// Keys indexed (each with at least one object).
    pub fn keys(&self) -> usize {
        self.index.read().len()
    }

    /// Objects indexed under at least one key.
    pub fn objects(&self) -> u64 {
        self.objects.load(Ordering::Relaxed)
    }

    /// Bytes the index holds, from its tables' capacities as hashbrown lays them out (buckets a
    /// power of two, at most 7/8 full, a control byte each) and each key's string. Not part of
    /// `--cache-size`, which bounds the objects.
    pub fn bytes(&self) -> usize {
        /// What the allocator adds to every allocation (see `object::MALLOC_OVERHEAD`).
        const MALLOC_OVERHEAD: usize = 16;
        fn table<K, V>(map: &HashMap<K, V>) -> usize {
            let capacity = map.capacity();
            if capacity == 0 {
                return 0;
            }
            let buckets = if capacity < 8 {
                (capacity + 1).next_power_of_two()
            } else {
                (capacity * 8 / 7).next_power_of_two()
            };
            // hashbrown's 16 trailing control bytes.
            buckets * (size_of::<(K, V)>() + 1) + 16 + MALLOC_OVERHEAD
        }
        let index = self.index.read();
        let keys: usize = index
            .iter()
            .map(|(key, objects)| key.len() + MALLOC_OVERHEAD + table(objects))
            .sum();
        table(&index) + keys
    }

    /// Objects purges by key removed or made stale, since start.
    pub fn purged(&self) -> u64 {
        self.purged.load(Ordering::Relaxed)
    }
}
