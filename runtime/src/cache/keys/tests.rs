use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::tokens;
use crate::cache::key::CacheKey;
use crate::cache::object::CachedObject;
use crate::cache::rules::vary::VaryRule;
use crate::cache::SharedCache;
use crate::config::Config;

/// A cache with the default key headers and `cache_size` bytes.
fn cache(cache_size: u64) -> SharedCache {
    let config = Config {
        cache_size,
        ..Config::default()
    };
    SharedCache::new(&config, Arc::default())
}

/// Stores an object for `url` whose headers are `fields`.
fn store(cache: &SharedCache, url: &str, fields: &[(&str, &str)]) -> Arc<CachedObject> {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let object = Arc::new(CachedObject::for_tests(url, headers, None, cache.clock.now()));
    cache.store.insert(key(url), VaryRule::None, object.clone());
    object
}

/// Stores the `Accept-Language: language` variant of `/page`, tagged `key`.
fn store_variant(cache: &SharedCache, language: &'static str, key: &str) {
    let mut headers = HeaderMap::new();
    headers.insert("xkey", HeaderValue::from_str(key).unwrap());
    let variant = Some(language.as_bytes());
    let object = Arc::new(CachedObject::for_tests(
        "/page",
        headers,
        variant,
        cache.clock.now(),
    ));
    let rule = VaryRule::Fields(vec![HeaderName::from_static("accept-language")]);
    cache.store.insert(self::key("/page"), rule, object);
}

fn key(url: &str) -> CacheKey {
    CacheKey::from_host_and_target("example.com", url)
}

#[test]
fn keys_are_separated_by_commas_and_blanks_as_xkey_reads_them() {
    let split: Vec<&str> = tokens(" a,b  c\t,d,, e ").collect();
    assert_eq!(split, ["a", "b", "c", "d", "e"]);
    assert_eq!(tokens(" , ").count(), 0);
}

#[test]
fn purging_a_key_removes_exactly_the_objects_that_carry_it() {
    let cache = cache(1 << 20);
    store(&cache, "/a", &[("xkey", "a b")]);
    store(&cache, "/b", &[("surrogate-key", "b"), ("cache-tag", "c")]);
    store(&cache, "/untagged", &[("x-other", "b")]);
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (3, 2));

    assert_eq!(cache.purge_keys("b", false), 2);
    for gone in ["/a", "/b"] {
        assert!(cache.store.variants(&key(gone)).is_empty(), "{gone} is purged");
    }
    assert_eq!(cache.store.variants(&key("/untagged")).len(), 1);
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (0, 0));
    assert_eq!(
        cache.purge_keys("a b c", false),
        0,
        "nothing is left under those keys"
    );
    assert_eq!(cache.store.keys().purged(), 2);
}

#[test]
fn an_object_under_several_purged_keys_counts_once() {
    let cache = cache(1 << 20);
    store(&cache, "/a", &[("xkey", "a"), ("xkey", "b")]);
    assert_eq!(cache.purge_keys("a,b", false), 1);
}

#[test]
fn a_soft_purge_makes_fresh_objects_stale_and_counts_only_those() {
    let cache = cache(1 << 20);
    let page = store(&cache, "/a", &[("xkey", "a")]);
    assert_eq!(cache.purge_keys("a", true), 1);
    assert!(page.is_soft_purged());
    assert!(
        page.ttl() <= page.head.age_at(cache.clock.now()),
        "its freshness has ended"
    );
    assert_eq!(
        cache.store.variants(&key("/a")).len(),
        1,
        "still stored, for grace and keep"
    );
    assert_eq!(cache.purge_keys("a", true), 0, "already stale: not counted again");
    assert_eq!(cache.purge_keys("a", false), 1, "a hard purge still removes it");
}

#[test]
fn a_replaced_object_is_indexed_by_its_new_keys_only() {
    let cache = cache(1 << 20);
    store(&cache, "/a", &[("xkey", "old shared")]);
    store(&cache, "/a", &[("xkey", "new shared")]);
    assert_eq!(cache.purge_keys("old", false), 0);
    assert_eq!(cache.store.keys().objects(), 1);
    assert_eq!(cache.purge_keys("shared", false), 1);
}

#[test]
fn evicted_objects_leave_the_index() {
    let cache = cache(64 * 1024);
    for n in 0..500 {
        store(
            &cache,
            &format!("/page/{n}"),
            &[("xkey", &format!("page-{n} all"))],
        );
    }
    let stored = cache.store.entry_count();
    assert!(stored < 500, "the cache evicted some: {stored} stored");
    assert_eq!(
        cache.store.keys().objects(),
        stored,
        "one index entry per stored object"
    );
    assert_eq!(
        cache.store.keys().keys() as u64,
        stored + 1,
        "their own keys and `all`"
    );
    assert_eq!(
        cache.purge_keys("all", false) as u64,
        stored,
        "only stored objects count"
    );
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (0, 0));
}

#[test]
fn a_url_purge_leaves_the_index_too() {
    let cache = cache(1 << 20);
    store(&cache, "/a", &[("xkey", "a")]);
    assert!(cache.purge(&key("/a")));
    cache.store.entry_count();
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (0, 0));
}

#[test]
fn without_key_headers_the_index_stays_empty() {
    let config = Config {
        surrogate_key_headers: Vec::new(),
        ..Config::default()
    };
    let cache = SharedCache::new(&config, Arc::default());
    store(&cache, "/a", &[("xkey", "a")]);
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (0, 0));
    assert_eq!(cache.purge_keys("a", false), 0);
}

#[test]
fn the_index_size_grows_with_what_it_holds() {
    let cache = cache(1 << 20);
    assert_eq!(cache.store.keys().bytes(), 0);
    store(&cache, "/a", &[("xkey", "a")]);
    let one = cache.store.keys().bytes();
    for n in 0..100 {
        store(&cache, &format!("/page/{n}"), &[("xkey", "a")]);
    }
    let many = cache.store.keys().bytes();
    assert!(
        one > 0 && many > one + 100 * 32,
        "one object: {one} B, 101 under one key: {many} B"
    );
    cache.purge_keys("a", false);
    assert!(
        cache.store.keys().bytes() < one,
        "only the emptied outer table is left"
    );
}

#[test]
fn purging_one_variant_keeps_the_others_and_their_keys() {
    let cache = cache(1 << 20);
    store_variant(&cache, "en", "english");
    store_variant(&cache, "fr", "french");
    assert_eq!(cache.store.variants(&key("/page")).len(), 2);
    assert_eq!(cache.purge_keys("english", false), 1);
    assert_eq!(
        cache.store.variants(&key("/page")).len(),
        1,
        "the French variant stays"
    );
    assert_eq!((cache.store.keys().keys(), cache.store.keys().objects()), (1, 1));
    assert_eq!(cache.purge_keys("french", false), 1);
    assert!(cache.store.variants(&key("/page")).is_empty());
}
