//! Directors at run time: picking a member of a director value.
//!
//! `d.backend()` evaluates to a [`BackendId`] naming
//! the director (and, for `hash`, carrying the key's hash); the runtime turns
//! it into a member with [`Program::resolve_backend`] when it fetches, so the
//! pick sees the health and load of that moment (and a retry can pick again).
//!
//! Kinds (members whose `ctx.healthy` is false are skipped by all of them):
//! * `round_robin`: the next member in turn, as Varnish's (a sick member
//!   uses up its turn, so the healthy ones share the traffic evenly);
//! * `fallback`: the first healthy member in `add_backend` order;
//! * `random`: weighted random, from [`Context::random`];
//! * `hash`: weighted rendezvous hashing (HRW) of the key: every member gets
//!   the score `-weight / ln(u)` with `u` in (0, 1) a hash of the key and
//!   the member's name, and the highest score wins. A member going sick or
//!   being removed only moves the keys it had;
//! * `shard`: Varnish's consistent-hashing ring (`eval/shard.rs`);
//! * `least_connections`: the member with the fewest requests in flight
//!   ([`Context::in_flight`]) per unit of weight; among equals, the starting
//!   point rotates.
//!
//! A member may itself be a director (`fb.add_backend(rr.backend())`): it is
//! healthy while any of its members is, its load is the sum of theirs, and
//! once picked it picks in turn. The checker refuses cycles.

use std::sync::atomic::Ordering;

use super::Context;
use crate::compile::Program;
use crate::tree::{Director, DirectorKind, Member};
use crate::vocab::hash::{fmix64, key_hash};
use crate::vocab::BackendId;

impl Program {
    /// Turns a BACKEND value into a backend to fetch from.
    ///
    /// A plain backend is returned as is, healthy or not (the runtime
    /// decides what to do with a sick one). A director picks one of its
    /// members now, skipping those for which [`Context::healthy`] is false;
    /// `None` when no member is healthy, the director has no members, or
    /// `id` does not belong to this program.
    pub fn resolve_backend(&self, id: BackendId, ctx: &dyn Context) -> Option<BackendId> {
        if id.index() < self.backends.len() {
            return Some(id);
        }
        let member = self.pick(self.director(id)?, id.key(), ctx)?;
        self.resolve_backend(member, ctx)
    }

    /// `std.healthy(b)`: a backend's health; for a director, whether any
    /// member it could pick is healthy.
    pub(crate) fn healthy(&self, id: BackendId, ctx: &dyn Context) -> bool {
        if id.index() < self.backends.len() {
            return ctx.healthy(id);
        }
        self.director(id).is_some_and(|d| {
            d.members
                .iter()
                .any(|m| eligible(m) && self.healthy(m.backend, ctx))
        })
    }

    /// Requests in flight to a backend, or to all the members of a director.
    fn in_flight(&self, id: BackendId, ctx: &dyn Context) -> usize {
        match self.director(id) {
            None => ctx.in_flight(id),
            Some(d) => d.members.iter().map(|m| self.in_flight(m.backend, ctx)).sum(),
        }
    }

    /// The value of `d.backend()` / `d.backend(key)` for director `d`.
    pub(crate) fn director_value(&self, d: usize, key: Option<&str>) -> BackendId {
        let index = (self.backends.len() + d) as u32;
        match (self.directors.get(d).map(|d| d.kind), key) {
            (Some(DirectorKind::Hash), Some(k)) => BackendId::with_key(index, key_hash(k)),
            _ => BackendId::new(index),
        }
    }

    fn pick(&self, d: &Director, key: u64, ctx: &dyn Context) -> Option<BackendId> {
        let n = d.members.len();
        if n == 0 {
            return None;
        }
        let usable = |m: &Member| eligible(m) && self.healthy(m.backend, ctx);
        match d.kind {
            DirectorKind::RoundRobin => (0..n).find_map(|_| {
                let m = &d.members[d.next.fetch_add(1, Ordering::Relaxed) % n];
                usable(m).then_some(m.backend)
            }),
            DirectorKind::Fallback => d.members.iter().find(|m| usable(m)).map(|m| m.backend),
            DirectorKind::Shard => self.shard_resolve(d, key, ctx),
            DirectorKind::Random => {
                let total: f64 = d.members.iter().filter(|m| usable(m)).map(|m| m.weight).sum();
                if total <= 0.0 || !total.is_finite() {
                    return None;
                }
                let mut x = ctx.random() * total;
                let mut last = None;
                for m in d.members.iter().filter(|m| usable(m)) {
                    if x < m.weight {
                        return Some(m.backend);
                    }
                    x -= m.weight;
                    last = Some(m.backend);
                }
                last
            }
            DirectorKind::Hash => d
                .members
                .iter()
                .filter(|m| usable(m))
                .map(|m| (hrw_score(key, m.seed, m.weight), m.backend))
                .fold(None, |best: Option<(f64, BackendId)>, (s, b)| match best {
                    Some((bs, _)) if bs >= s => best,
                    _ => Some((s, b)),
                })
                .map(|(_, b)| b),
            DirectorKind::LeastConnections => {
                let load = |m: &Member| self.in_flight(m.backend, ctx) as f64 / m.weight;
                // The lowest load, and how many members share it.
                let mut min: Option<(f64, BackendId)> = None;
                let mut ties = 0;
                for m in d.members.iter().filter(|m| usable(m)) {
                    let l = load(m);
                    match min {
                        Some((best, _)) if l > best => {}
                        Some((best, _)) if l == best => ties += 1,
                        _ => {
                            min = Some((l, m.backend));
                            ties = 1;
                        }
                    }
                }
                let (best, first) = min?;
                // Take turns among the equally loaded.
                let turn = d.next.fetch_add(1, Ordering::Relaxed) % ties;
                d.members
                    .iter()
                    .filter(|m| usable(m) && load(m) == best)
                    .nth(turn)
                    .map_or(Some(first), |m| Some(m.backend))
            }
        }
    }
}

/// Members with weight <= 0 (or NaN) are never picked.
fn eligible(m: &Member) -> bool {
    m.weight > 0.0
}

/// HRW score of a member for a key: `-weight / ln(u)`, `u` uniform in (0, 1)
/// from the key's and the member's hashes. The member with the highest score
/// owns the key; a member's share of keys is proportional to its weight.
fn hrw_score(key: u64, seed: u64, weight: f64) -> f64 {
    let h = fmix64(key ^ seed);
    // 53 random bits, centred in their interval: never 0, never 1.
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    -weight / u.ln()
}
