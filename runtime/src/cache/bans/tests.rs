use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::StatusCode;

use super::BanList;
use crate::cache::object::{CachedObject, ObjectHead, Requested, StoredHeaders};

fn object(url: &str, response_time: SystemTime) -> CachedObject {
    let head = ObjectHead {
        status: StatusCode::OK,
        headers: StoredHeaders::new(
            Requested {
                url,
                ..Requested::default()
            },
            &Default::default(),
        ),
        response_time,
        initial_age: Duration::ZERO,
        ttl: Duration::from_secs(600),
        grace: Duration::ZERO,
        retention: Duration::from_secs(600),
        directives: Default::default(),
        esi: false,
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
    assert_eq!(bans.counters().tested, BANS, "100 lookups test each ban once");

    // An object stored after every ban is tested against none of them.
    let young = object("/page", SystemTime::now() + Duration::from_secs(1));
    for _ in 0..100 {
        assert!(!bans.is_banned(&young));
    }
    assert_eq!(bans.counters().tested, BANS);

    // A new ban is tested once more against the old object, not the whole list again.
    ban(&bans, r#"req.url == "/other/new""#);
    assert!(!bans.is_banned(&old));
    assert!(!bans.is_banned(&old));
    assert_eq!(bans.counters().tested, BANS + 1);

    // Trimming keeps the numbering: after it, only bans added later are tested.
    assert_eq!(bans.trim(SystemTime::now() + Duration::from_secs(1)), 0);
    assert!(!bans.is_banned(&old));
    ban(&bans, r#"req.url ~ "^/page""#);
    assert!(bans.is_banned(&old), "a matching ban still bans");
    assert_eq!(bans.counters().tested, BANS + 2);
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

fn with_header(name: &'static str, value: &'static str, response_time: SystemTime) -> CachedObject {
    let mut object = object("/page", response_time);
    let head = Arc::get_mut(&mut object.head).expect("not shared yet");
    head.headers
        .edit(|fields| fields.insert(name, http::HeaderValue::from_static(value)));
    object
}

#[test]
fn the_lurker_works_on_obj_bans_old_enough_and_drops_them_when_done() {
    let bans = BanList::default();
    let now = SystemTime::now();
    let old = now - Duration::from_secs(60);
    let news = with_header("x-section", "news", old);
    let sport = with_header("x-section", "sport", old);
    ban(&bans, r#"obj.http.x-section == "news""#);
    ban(&bans, r#"req.url ~ "^/page""#);

    // Younger than the cutoff: nothing to do yet, and the wait says when there will be.
    let (work, next) = bans.lurk_work(now - Duration::from_secs(10));
    assert!(work.is_empty());
    assert!(
        next.is_some_and(|next| next >= Duration::from_secs(9)),
        "{next:?}"
    );

    let (work, next) = bans.lurk_work(SystemTime::now());
    assert_eq!(
        (work.len(), next),
        (1, None),
        "only the obj.* ban is the lurker's"
    );
    assert!(bans.lurk(&news, &work), "the news object matches");
    assert!(bans.is_banned(&news), "and is killed for every later lookup");
    assert!(!bans.lurk(&sport, &work));
    bans.lurked(&work);

    let rows = bans.rows();
    assert_eq!(rows.len(), 1, "the lurked ban is dropped");
    assert!(!rows[0].lurkable, "the req.* ban stays for lookups");
    assert!(bans.is_banned(&sport), "and is applied at lookup");
    let counters = bans.counters();
    assert_eq!(
        (counters.lurked, counters.lurker_removed, counters.lurker_tested),
        (1, 1, 2)
    );
}

#[test]
fn the_lurker_skips_bans_a_lookup_already_tested() {
    let bans = BanList::default();
    let stored = with_header("x-section", "sport", SystemTime::now() - Duration::from_secs(1));
    ban(&bans, r#"obj.http.x-section == "news""#);
    assert!(!bans.is_banned(&stored), "a lookup tests the ban");
    let (work, _) = bans.lurk_work(SystemTime::now());
    assert!(!bans.lurk(&stored, &work));
    assert_eq!(
        bans.counters().lurker_tested,
        0,
        "the lurker does not test it again"
    );
}

#[test]
fn a_ban_created_earlier_on_a_peer_spares_objects_stored_after_it() {
    let bans = BanList::default();
    let now = SystemTime::now();
    let created = now - Duration::from_secs(30);
    let before = object("/page", now - Duration::from_secs(40));
    let after = object("/page", now - Duration::from_secs(20));
    bans.add_created(
        policy_lang::parse_ban(r#"req.url == "/page""#).expect("a valid ban"),
        created,
        now,
    );
    assert!(
        !bans.is_banned(&after),
        "stored after the ban was created on the peer"
    );
    assert!(bans.is_banned(&before), "stored before the ban was created");
}
