//! The ban list, testing stored objects against it once per ban and object, and the ban lurker.
//!
//! A ban applies to the objects stored before it was added. It is applied at lookup (as in
//! Varnish): the lookup that finds a matching object drops it. Testing every ban on every hit
//! would make a hit as slow as the list is long, so, as Varnish does, each ban gets a sequence
//! number and each object remembers the newest ban it has been tested against
//! ([`CachedObject::bans_checked`]). A lookup tests only the bans that are newer than that and
//! newer than the object; with 10,000 bans a hit tests none of them after its first lookup.
//!
//! A ban that tests only `obj.*` does not need the request, so the lurker ([`lurker`]) also
//! tests it against every stored object in the background, and drops it once every object
//! older than it has been tested (Varnish's ban lurker); bans on `req.*` stay until trimming
//! (`admin::bans`) finds no object old enough for them. Dropping a ban, by either, keeps the
//! numbering of the others.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::HeaderName;
use parking_lot::{Condvar, Mutex, RwLock};
use policy_lang::{BanContext, BanExpr};

use super::object::{field_text, CachedObject};

pub(crate) mod lurker;

/// [`CachedObject::bans_checked`] of an object a ban matched: every later lookup drops it,
/// even if a store race kept it in the store after the lurker removed it (Varnish's
/// `HSH_Kill`). It is at least every sequence number, so a killed object takes the fast path.
const KILLED: u64 = u64::MAX;

/// A ban: an expression over objects, applying to those stored before `since`.
struct Ban {
    /// 1 for the first ban, then counting up.
    seq: u64,
    expr: BanExpr,
    since: SystemTime,
    /// The objects it applies to are those stored before this: `since`, or the earlier time
    /// the ban was created on another node (a ban forwarded by a peer arrives late, and must
    /// not remove what this node stored after it was issued).
    before: SystemTime,
    /// Only `obj.*` is tested: the lurker applies it (Varnish's `BANS_FLAG_OBJ`).
    lurkable: bool,
    /// Objects this ban removed, at lookup or by the lurker.
    removed: AtomicU64,
}

/// The bans in the order they were added: `seq` increasing, `since` never decreasing.
#[derive(Default)]
struct Bans {
    list: Vec<Arc<Ban>>,
    /// The newest ban's `seq`, also once it has been dropped (0: no ban yet).
    newest: u64,
}

/// One ban as `GET /bans` shows it.
#[derive(Clone, Debug)]
pub(crate) struct BanRow {
    pub seq: u64,
    pub expr: String,
    pub since: SystemTime,
    /// Whether the lurker applies it (it tests only `obj.*`); otherwise it is applied at lookup.
    pub lurkable: bool,
    /// Objects it has removed so far.
    pub removed: u64,
}

/// What the bans have done so far (Varnish's `bans_*` counters).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BanCounters {
    /// Ban expressions evaluated against objects at lookup (`bans_tested`).
    pub tested: u64,
    /// Bans the lurker tested against every older object and dropped (`bans_completed`).
    pub lurked: u64,
    /// Ban expressions the lurker evaluated (`bans_lurker_tests_tested`).
    pub lurker_tested: u64,
    /// Objects the lurker removed (`bans_lurker_obj_killed`).
    pub lurker_removed: u64,
}

#[derive(Default)]
pub(crate) struct BanList {
    bans: RwLock<Bans>,
    /// `Bans::newest`, read without the lock: an object tested against it returns at once.
    newest: AtomicU64,
    tested: AtomicU64,
    lurked: AtomicU64,
    lurker_tested: AtomicU64,
    lurker_removed: AtomicU64,
    /// Wakes the lurker when a ban is added or it is told to stop.
    signal: Mutex<Signal>,
    wake: Condvar,
}

#[derive(Default)]
struct Signal {
    /// Counts the bans added, so that a lurker about to sleep sees one it has not looked at.
    added: u64,
    stopped: bool,
}

impl BanList {
    /// Adds a ban on the objects stored before `now`.
    pub fn add(&self, expr: BanExpr, now: SystemTime) {
        self.add_created(expr, now, now);
    }

    /// Adds, at `now`, a ban created at `created` (on a peer): it applies to the objects stored
    /// before the earlier of the two.
    pub fn add_created(&self, expr: BanExpr, created: SystemTime, now: SystemTime) {
        let mut bans = self.bans.write();
        // Never before the previous ban, whatever the clock does, so the list stays sorted.
        let since = bans.list.last().map_or(now, |last| last.since.max(now));
        bans.newest += 1;
        let seq = bans.newest;
        let lurkable = expr.is_lurker_friendly();
        bans.list.push(Arc::new(Ban {
            seq,
            expr,
            since,
            before: created.min(since),
            lurkable,
            removed: AtomicU64::new(0),
        }));
        self.newest.store(seq, Ordering::Release);
        drop(bans);
        if lurkable {
            self.signal.lock().added += 1;
            self.wake.notify_all();
        }
    }

    /// Drops the bans added before `cutoff`; returns how many are kept.
    pub fn trim(&self, cutoff: SystemTime) -> usize {
        let mut bans = self.bans.write();
        bans.list.retain(|ban| ban.since >= cutoff);
        bans.list.len()
    }

    /// The list, oldest first.
    pub fn rows(&self) -> Vec<BanRow> {
        self.bans
            .read()
            .list
            .iter()
            .map(|ban| BanRow {
                seq: ban.seq,
                expr: ban.expr.as_str().to_string(),
                since: ban.since,
                lurkable: ban.lurkable,
                removed: ban.removed.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Whether a ban added after `object` was stored matches it. Each ban is tested against an
    /// object once: the object remembers the newest ban it has passed.
    pub fn is_banned(&self, object: &CachedObject) -> bool {
        let checked = object.bans_checked();
        if checked >= self.newest.load(Ordering::Acquire) {
            return checked == KILLED;
        }
        let bans = self.bans.read();
        let newer_than_checked = bans.list.partition_point(|ban| ban.seq <= checked);
        let newer_than_object = bans
            .list
            .partition_point(|ban| ban.since < object.head.response_time);
        let untested = &bans.list[newer_than_checked.max(newer_than_object)..];
        let target = BanTarget(object);
        let matched = untested
            .iter()
            .position(|ban| ban.applies_to(object) && ban.expr.matches(&target));
        let tested = matched.map_or(untested.len(), |at| at + 1);
        self.tested.fetch_add(tested as u64, Ordering::Relaxed);
        if let Some(at) = matched {
            untested[at].removed.fetch_add(1, Ordering::Relaxed);
            object.mark_bans_checked(KILLED);
            return true;
        }
        object.mark_bans_checked(bans.newest);
        false
    }

    pub fn counters(&self) -> BanCounters {
        BanCounters {
            tested: self.tested.load(Ordering::Relaxed),
            lurked: self.lurked.load(Ordering::Relaxed),
            lurker_tested: self.lurker_tested.load(Ordering::Relaxed),
            lurker_removed: self.lurker_removed.load(Ordering::Relaxed),
        }
    }

    // === for the lurker ===

    /// The bans the lurker works on now: those testing only `obj.*` added at or before
    /// `cutoff`, oldest first; and when none is, how long until the next one is (`None`: no
    /// lurkable ban at all).
    fn lurk_work(&self, cutoff: SystemTime) -> (Vec<Arc<Ban>>, Option<Duration>) {
        let bans = self.bans.read();
        let mut ready = Vec::new();
        for ban in bans.list.iter().filter(|ban| ban.lurkable) {
            if ban.since > cutoff {
                let wait = ban.since.duration_since(cutoff).unwrap_or_default();
                return (ready, Some(wait));
            }
            ready.push(ban.clone());
        }
        (ready, None)
    }

    /// Tests `object` against the bans of `work` (oldest first) that are newer than it and
    /// than the newest ban a lookup tested it against. Returns whether one matched: the
    /// object is then killed and the caller removes it from the store.
    fn lurk(&self, object: &CachedObject, work: &[Arc<Ban>]) -> bool {
        let checked = object.bans_checked();
        if checked == KILLED {
            return true;
        }
        let newer_than_checked = work.partition_point(|ban| ban.seq <= checked);
        let newer_than_object = work.partition_point(|ban| ban.since < object.head.response_time);
        let untested = &work[newer_than_checked.max(newer_than_object)..];
        let target = BanTarget(object);
        let matched = untested
            .iter()
            .position(|ban| ban.applies_to(object) && ban.expr.matches(&target));
        let tested = matched.map_or(untested.len(), |at| at + 1);
        self.lurker_tested.fetch_add(tested as u64, Ordering::Relaxed);
        let Some(at) = matched else { return false };
        untested[at].removed.fetch_add(1, Ordering::Relaxed);
        self.lurker_removed.fetch_add(1, Ordering::Relaxed);
        object.mark_bans_checked(KILLED);
        true
    }

    /// Drops the bans of `work`: every object older than them has been tested.
    fn lurked(&self, work: &[Arc<Ban>]) {
        let mut bans = self.bans.write();
        let before = bans.list.len();
        bans.list
            .retain(|ban| work.binary_search_by_key(&ban.seq, |done| done.seq).is_err());
        let dropped = before - bans.list.len();
        self.lurked.fetch_add(dropped as u64, Ordering::Relaxed);
    }

    /// Bans added so far that the lurker may work on; what [`BanList::sleep`] compares.
    fn added(&self) -> u64 {
        self.signal.lock().added
    }

    /// Waits up to `timeout`, or until a lurkable ban is added after `added` was read, or the
    /// lurker is stopped. Returns false once stopped.
    fn sleep(&self, added: u64, timeout: Duration) -> bool {
        let mut signal = self.signal.lock();
        if !signal.stopped && signal.added == added {
            self.wake.wait_for(&mut signal, timeout);
        }
        !signal.stopped
    }

    /// Waits `pause` (pacing the lurker), returning early only when it is stopped. Returns
    /// false once stopped.
    fn pause(&self, pause: Duration) -> bool {
        let deadline = std::time::Instant::now() + pause;
        let mut signal = self.signal.lock();
        while !signal.stopped && !self.wake.wait_until(&mut signal, deadline).timed_out() {}
        !signal.stopped
    }

    /// Tells the lurker to stop.
    fn stop_lurker(&self) {
        self.signal.lock().stopped = true;
        self.wake.notify_all();
    }
}

impl Ban {
    /// Whether `object` was stored before this ban was created (`since` only orders the list).
    fn applies_to(&self, object: &CachedObject) -> bool {
        object.head.response_time < self.before
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
            .and_then(field_text)
            .map(Cow::Borrowed)
    }

    fn obj_status(&self) -> u16 {
        self.0.head.status.as_u16()
    }

    fn req_url(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.0.head.requested().url))
    }

    fn req_header(&self, name: &HeaderName) -> Option<Cow<'_, str>> {
        if name == http::header::HOST {
            return self.0.head.requested().host.map(Cow::Borrowed);
        }
        None
    }
}

#[cfg(test)]
mod tests;
