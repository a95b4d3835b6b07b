use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::BanList;
use crate::cache::object::{CachedObject, ObjectHead};

fn object(url: &str, response_time: SystemTime) -> CachedObject {
    let head = ObjectHead {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        response_time,
        initial_age: Duration::ZERO,
        ttl: Duration::from_secs(600),
        grace: Duration::ZERO,
        retention: Duration::from_secs(600),
        directives: Default::default(),
        variant: None,
        url: url.into(),
        host: None,
    };
    CachedObject::new(Arc::new(head), Bytes::from_static(b"body").into())
}

fn ban(bans: &BanList, expr: &str) {
    bans.add(
        policy_lang::parse_ban(expr).expect("a valid ban"),
        SystemTime::now(),
    );
}

#[test]
fn each_ban_is_tested_once_per_object() {
    const BANS: u64 = 10_000;
    let bans = BanList::default();
    let old = object("/page", SystemTime::now() - Duration::from_secs(60));
    for n in 0..BANS {
        ban(&bans, &format!(r#"req.url == "/other/{n}""#));
    }
    for _ in 0..100 {
        assert!(!bans.is_banned(&old));
    }
    assert_eq!(bans.tested(), BANS, "100 lookups test each ban once");

    // An object stored after every ban is tested against none of them.
    let young = object("/page", SystemTime::now() + Duration::from_secs(1));
    for _ in 0..100 {
        assert!(!bans.is_banned(&young));
    }
    assert_eq!(bans.tested(), BANS);

    // A new ban is tested once more against the old object, not the whole list again.
    ban(&bans, r#"req.url == "/other/new""#);
    assert!(!bans.is_banned(&old));
    assert!(!bans.is_banned(&old));
    assert_eq!(bans.tested(), BANS + 1);

    // Trimming keeps the numbering: after it, only bans added later are tested.
    assert_eq!(bans.trim(SystemTime::now() + Duration::from_secs(1)), 0);
    assert!(!bans.is_banned(&old));
    ban(&bans, r#"req.url ~ "^/page""#);
    assert!(bans.is_banned(&old), "a matching ban still bans");
    assert_eq!(bans.tested(), BANS + 2);
    assert!(!bans.is_banned(&young), "not a ban on objects stored after it");
}

#[test]
fn a_ban_applies_to_objects_stored_before_it_only() {
    let bans = BanList::default();
    let before = object("/news/1", SystemTime::now() - Duration::from_secs(1));
    ban(&bans, r#"req.url ~ "^/news/""#);
    let after = object("/news/2", SystemTime::now() + Duration::from_secs(1));
    assert!(bans.is_banned(&before));
    assert!(!bans.is_banned(&after));
    assert!(!bans.is_banned(&object("/about", SystemTime::now() - Duration::from_secs(1))));
}
