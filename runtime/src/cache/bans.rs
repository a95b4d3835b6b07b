//! The ban list, and testing stored objects against it once per ban and object.
//!
//! A ban applies to the objects stored before it was added, and is applied lazily: the lookup
//! that finds a matching object drops it (as in Varnish). Testing every ban on every hit would
//! make a hit as slow as the list is long, so, as Varnish does, each ban gets a sequence number
//! and each object remembers the newest ban it has been tested against
//! ([`CachedObject::bans_checked`]). A lookup tests only the bans that are newer than that and
//! newer than the object; with 10,000 bans a hit tests none of them after its first lookup.
//! Trimming (`admin::bans`) drops old bans without renumbering the others.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use http::HeaderName;
use parking_lot::RwLock;
use policy_lang::{BanContext, BanExpr};

use super::object::CachedObject;

/// A ban: an expression over objects, applying to those stored before `since`.
struct Ban {
    /// 1 for the first ban, then counting up.
    seq: u64,
    expr: BanExpr,
    since: SystemTime,
}

/// The bans in the order they were added: `seq` increasing, `since` never decreasing.
#[derive(Default)]
struct Bans {
    list: Vec<Ban>,
    /// The newest ban's `seq`, also once it has been trimmed (0: no ban yet).
    newest: u64,
}

#[derive(Default)]
pub(crate) struct BanList {
    bans: RwLock<Bans>,
    /// `Bans::newest`, read without the lock: an object tested against it returns at once.
    newest: AtomicU64,
    /// Ban expressions evaluated against objects (Varnish's `bans_tested`).
    tested: AtomicU64,
}

impl BanList {
    /// Adds a ban on the objects stored before `now`.
    pub fn add(&self, expr: BanExpr, now: SystemTime) {
        let mut bans = self.bans.write();
        // Never before the previous ban, whatever the clock does, so the list stays sorted.
        let since = bans.list.last().map_or(now, |last| last.since.max(now));
        bans.newest += 1;
        let seq = bans.newest;
        bans.list.push(Ban { seq, expr, since });
        self.newest.store(seq, Ordering::Release);
    }

    /// Drops the bans added before `cutoff`; returns how many are kept.
    pub fn trim(&self, cutoff: SystemTime) -> usize {
        let mut bans = self.bans.write();
        bans.list.retain(|ban| ban.since >= cutoff);
        bans.list.len()
    }

    /// Whether a ban added after `object` was stored matches it. Each ban is tested against an
    /// object once: the object remembers the newest ban it has passed.
    pub fn is_banned(&self, object: &CachedObject) -> bool {
        let checked = object.bans_checked();
        if checked >= self.newest.load(Ordering::Acquire) {
            return false;
        }
        let bans = self.bans.read();
        let newer_than_checked = bans.list.partition_point(|ban| ban.seq <= checked);
        let newer_than_object = bans
            .list
            .partition_point(|ban| ban.since < object.head.response_time);
        let untested = &bans.list[newer_than_checked.max(newer_than_object)..];
        let target = BanTarget(object);
        let matched = untested.iter().position(|ban| ban.expr.matches(&target));
        let tested = matched.map_or(untested.len(), |at| at + 1);
        self.tested.fetch_add(tested as u64, Ordering::Relaxed);
        if matched.is_some() {
            return true;
        }
        object.mark_bans_checked(bans.newest);
        false
    }

    /// Ban expressions evaluated against objects so far.
    pub fn tested(&self) -> u64 {
        self.tested.load(Ordering::Relaxed)
    }
}

/// What a ban expression may test about an object.
struct BanTarget<'a>(&'a CachedObject);

impl BanContext for BanTarget<'_> {
    fn obj_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
        self.0
            .head
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(Cow::Borrowed)
    }

    fn obj_status(&self) -> u16 {
        self.0.head.status.as_u16()
    }

    fn req_url(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.0.head.url))
    }

    fn req_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
        if name == http::header::HOST {
            return self
                .0
                .head
                .host
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .map(Cow::Borrowed);
        }
        None
    }
}

#[cfg(test)]
mod tests;
