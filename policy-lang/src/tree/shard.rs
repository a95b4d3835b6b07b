//! The `shard` director's configuration and consistent-hashing ring, as Varnish's
//! vmod_directors builds them.
//!
//! `vcl_init` queues changes (`add_backend`, `remove_backend`, `clear`); `reconfigure(replicas)`
//! applies the queue and rebuilds the ring, and a queue left at the end of `vcl_init` is applied
//! with Varnish's default of 67 replicas. On the ring every member stands `replicas × weight`
//! times (capped so the ring has fewer than 2³² points), point `j` of a member being the 32-bit
//! hash of its ident (its backend's name unless `ident` is given) followed by `j` in decimal.
//! Because points depend only on idents, a member leaving takes only its own points away: keys
//! that landed on the others stay where they were.

use sha2::{Digest, Sha256};

use super::Expr;
use crate::vocab::BackendId;

/// Parameter sets a lazy pick can name (4 bits, 0 for none).
pub(crate) const MAX_SHARD_PARAMS: usize = 15;

/// Varnish's default for `reconfigure()` and for the reconfiguration at the end of `vcl_init`.
pub(crate) const DEFAULT_REPLICAS: u32 = 67;

/// One member of the ring.
#[derive(Debug, Clone)]
pub(crate) struct ShardMember {
    pub backend: BackendId,
    /// The backend's name.
    pub name: String,
    /// `add_backend(..., ident = ...)`: tells apart several instances of one backend.
    pub ident: Option<String>,
    /// `add_backend(..., rampup = ...)`; the director's default when `None`.
    pub rampup: Option<f64>,
    replicas: u32,
}

impl ShardMember {
    /// The string the ring is built from.
    fn ident(&self) -> &str {
        self.ident.as_deref().unwrap_or(&self.name)
    }
}

/// A queued change, applied by the next `reconfigure`.
#[derive(Debug, Clone)]
pub(crate) enum ShardChange {
    Add {
        backend: BackendId,
        name: String,
        ident: Option<String>,
        rampup: Option<f64>,
        /// At least 1 (Varnish ignores a smaller weight).
        weight: f64,
    },
    /// Every instance of `backend` when no `ident` is given, else the instance with that ident.
    Remove {
        backend: Option<BackendId>,
        ident: Option<String>,
    },
    Clear,
}

/// A point of the ring: a hash and the member it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Point {
    pub hash: u32,
    pub member: usize,
}

/// A `shard` director: members, ring and the defaults `.backend()` falls back to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Shard {
    pub members: Vec<ShardMember>,
    /// Sorted by hash.
    pub ring: Vec<Point>,
    /// `set_warmup`: the share of requests sent to the next backend to warm it up.
    pub warmup: f64,
    /// `set_rampup`: how long a backend that just turned healthy takes to get its full share.
    pub rampup: f64,
    /// `associate(p.use())`: the `directors.shard_param()` set its picks take defaults from.
    pub associated: Option<usize>,
    queued: Vec<ShardChange>,
}

impl Shard {
    pub fn queue(&mut self, change: ShardChange) {
        self.queued.push(change);
    }

    /// Applies the queued changes and rebuilds the ring; `false` (and an empty ring) when no
    /// member is left, which Varnish reports as an error.
    pub fn reconfigure(&mut self, replicas: u32) -> bool {
        if self.queued.is_empty() {
            return true;
        }
        // Nothing before the last `clear` matters.
        let from = self
            .queued
            .iter()
            .rposition(|c| matches!(c, ShardChange::Clear))
            .map_or(0, |i| {
                self.members.clear();
                i + 1
            });
        for change in std::mem::take(&mut self.queued).into_iter().skip(from) {
            match change {
                ShardChange::Add {
                    backend,
                    name,
                    ident,
                    rampup,
                    weight,
                } => {
                    let member = ShardMember {
                        backend,
                        name,
                        ident,
                        rampup,
                        replicas: (f64::from(replicas) * weight.max(1.0)).min(f64::from(u32::MAX)) as u32,
                    };
                    // Adding an ident already on the ring is skipped, as Varnish does.
                    if !self.members.iter().any(|m| m.ident() == member.ident()) {
                        self.members.push(member);
                    }
                }
                ShardChange::Remove { backend, ident } => self.members.retain(|m| match &ident {
                    Some(ident) => m.ident() != ident,
                    None => Some(m.backend) != backend,
                }),
                ShardChange::Clear => self.members.clear(),
            }
        }
        self.build_ring();
        !self.members.is_empty()
    }

    /// The reconfiguration Varnish does at the end of the task that queued changes.
    pub fn finish(&mut self) -> bool {
        self.reconfigure(DEFAULT_REPLICAS)
    }

    fn build_ring(&mut self) {
        self.ring.clear();
        let Ok(n) = u32::try_from(self.members.len()) else {
            return;
        };
        if n == 0 {
            return;
        }
        let most = (u32::MAX - 1) / n;
        for (index, m) in self.members.iter().enumerate() {
            for j in 0..m.replicas.min(most) {
                self.ring.push(Point {
                    hash: hash32(&[m.ident(), &j.to_string()]),
                    member: index,
                });
            }
        }
        self.ring.sort_by_key(|p| p.hash);
    }

    /// Where the walk for `key` starts: the first point at or after `key`; a key past the last
    /// point starts at the last one (Varnish's lookup does not wrap around).
    pub fn start(&self, key: u32) -> usize {
        self.ring
            .partition_point(|p| p.hash < key)
            .min(self.ring.len().saturating_sub(1))
    }
}

/// `shard.backend(...)`: where the key comes from and how to walk the ring.
#[derive(Debug)]
pub(crate) struct ShardPick {
    pub director: usize,
    pub by: ShardBy,
    /// The INT `key` (by=KEY), the BLOB `key_blob` (by=BLOB) or the URL to hash (by=HASH,
    /// URL: `req.url` on the client side, `bereq.url` on the backend side).
    pub key: Expr,
    /// `alt`, `warmup`, `rampup`: [`Expr::Const`] `Unset` when not given.
    pub alt: Expr,
    pub warmup: Expr,
    pub rampup: Expr,
    pub healthy: ShardHealthy,
    /// `resolve=LAZY` (the default in `vcl_init`): the director, picking when the fetch starts.
    pub lazy: bool,
    /// `param=p.use()`: the parameter set for what is not given (else the director's
    /// `associate`d one).
    pub param: Option<usize>,
    /// Which arguments were given ([`GIVEN_BY`], ...): they win over a parameter set's.
    pub given: u8,
}

/// `by` (with its `key` / `key_blob`) was given to `.backend()`.
pub(crate) const GIVEN_BY: u8 = 1;
pub(crate) const GIVEN_ALT: u8 = 2;
pub(crate) const GIVEN_WARMUP: u8 = 4;
pub(crate) const GIVEN_RAMPUP: u8 = 8;
pub(crate) const GIVEN_HEALTHY: u8 = 16;

/// What `p.get_by()`, `p.get_key()`, ... read of a parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamField {
    By,
    Key,
    Alt,
    Warmup,
    Rampup,
    Healthy,
}

/// A `directors.shard_param()` set: the `.backend()` arguments it gives, `None` where it gives
/// none (the `.backend()` default then applies). `key` is `key`, or `key_blob`'s key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ShardParams {
    pub by: Option<ShardBy>,
    pub key: Option<u32>,
    pub alt: Option<u32>,
    pub warmup: Option<f64>,
    pub rampup: Option<bool>,
    pub healthy: Option<ShardHealthy>,
}

impl ShardParams {
    /// These, with what `over` sets instead (`set` keeps what it does not name).
    pub fn merged(&self, over: &ShardParams) -> ShardParams {
        ShardParams {
            by: over.by.or(self.by),
            key: over.key.or(self.key),
            alt: over.alt.or(self.alt),
            warmup: over.warmup.or(self.warmup),
            rampup: over.rampup.or(self.rampup),
            healthy: over.healthy.or(self.healthy),
        }
    }
}

/// `by=`: how the key is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardBy {
    Hash,
    Url,
    Key,
    Blob,
}

impl ShardBy {
    /// The ENUM word (`by=URL`); an unknown word is the default, HASH.
    pub fn from_word(word: &str) -> ShardBy {
        match word {
            "URL" => ShardBy::Url,
            "KEY" => ShardBy::Key,
            "BLOB" => ShardBy::Blob,
            _ => ShardBy::Hash,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            ShardBy::Hash => "HASH",
            ShardBy::Url => "URL",
            ShardBy::Key => "KEY",
            ShardBy::Blob => "BLOB",
        }
    }
}

impl ShardHealthy {
    /// The ENUM word (`healthy=ALL`); an unknown word is the default, CHOSEN.
    pub fn from_word(word: &str) -> ShardHealthy {
        match word {
            "IGNORE" => ShardHealthy::Ignore,
            "ALL" => ShardHealthy::All,
            _ => ShardHealthy::Chosen,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            ShardHealthy::Chosen => "CHOSEN",
            ShardHealthy::Ignore => "IGNORE",
            ShardHealthy::All => "ALL",
        }
    }
}

/// `healthy=`: which backends' health the walk looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardHealthy {
    /// The chosen backend must be healthy; skipped alternatives need not be.
    Chosen,
    /// Health does not matter (nor do rampup and warmup).
    Ignore,
    /// Skipped alternatives and the chosen backend must all be healthy.
    All,
}

/// Varnish's `VRT_HashStrands32`: SHA-256 of the parts one after the other, the last four
/// bytes of the digest read little-endian. `.key()` and `by=URL` use it too.
pub(crate) fn hash32(parts: &[&str]) -> u32 {
    let mut sha = Sha256::new();
    for part in parts {
        sha.update(part.as_bytes());
    }
    let digest = sha.finalize();
    u32::from_le_bytes([digest[28], digest[29], digest[30], digest[31]])
}

/// by=BLOB: the first four bytes, big-endian, a shorter blob padded with zeros in front.
/// BLOBs travel as hex digits; an empty or unreadable one is key 0, as in Varnish.
pub(crate) fn blob_key(hex: &str) -> u32 {
    let bytes: Vec<u8> = hex
        .as_bytes()
        .chunks(2)
        .map_while(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .take(4)
        .collect();
    bytes.iter().fold(0u32, |key, b| key << 8 | u32::from(*b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(shard: &mut Shard, index: u32, name: &str) {
        shard.queue(ShardChange::Add {
            backend: BackendId::new(index),
            name: name.to_string(),
            ident: None,
            rampup: None,
            weight: 1.0,
        });
    }

    #[test]
    fn the_ring_holds_replicas_points_per_member_in_order() {
        let mut shard = Shard::default();
        add(&mut shard, 0, "a");
        add(&mut shard, 1, "b");
        assert!(shard.reconfigure(10));
        assert_eq!(shard.ring.len(), 20);
        assert!(shard.ring.windows(2).all(|w| w[0].hash <= w[1].hash));
        assert!(shard.ring.contains(&Point {
            hash: hash32(&["a", "0"]),
            member: 0
        }));
        assert!(shard.ring.contains(&Point {
            hash: hash32(&["b", "9"]),
            member: 1
        }));
    }

    #[test]
    fn the_implicit_reconfiguration_uses_67_replicas_and_weight_scales_them() {
        let mut shard = Shard::default();
        add(&mut shard, 0, "a");
        shard.queue(ShardChange::Add {
            backend: BackendId::new(1),
            name: "b".into(),
            ident: None,
            rampup: None,
            weight: 2.0,
        });
        assert!(shard.finish());
        let of = |m| shard.ring.iter().filter(|p| p.member == m).count();
        assert_eq!((of(0), of(1)), (67, 134));
    }

    #[test]
    fn adding_a_member_twice_is_skipped_and_ident_makes_a_second_instance() {
        let mut shard = Shard::default();
        add(&mut shard, 0, "a");
        add(&mut shard, 0, "a");
        shard.queue(ShardChange::Add {
            backend: BackendId::new(0),
            name: "a".into(),
            ident: Some("a-2".into()),
            rampup: None,
            weight: 1.0,
        });
        assert!(shard.reconfigure(5));
        assert_eq!(shard.members.len(), 2);
        // Without an ident every instance of the backend goes.
        shard.queue(ShardChange::Remove {
            backend: Some(BackendId::new(0)),
            ident: None,
        });
        assert!(!shard.reconfigure(5), "no member left");
        assert!(shard.ring.is_empty());
    }

    #[test]
    fn clear_drops_what_came_before_it() {
        let mut shard = Shard::default();
        add(&mut shard, 0, "a");
        shard.queue(ShardChange::Clear);
        add(&mut shard, 1, "b");
        assert!(shard.finish());
        assert_eq!(shard.members.len(), 1);
        assert_eq!(shard.members[0].name, "b");
    }

    #[test]
    fn a_key_past_the_last_point_starts_at_the_last_point() {
        let mut shard = Shard::default();
        add(&mut shard, 0, "a");
        assert!(shard.reconfigure(3));
        let last = shard.ring.len() - 1;
        assert_eq!(shard.start(u32::MAX), last);
        assert_eq!(shard.start(0), 0);
        assert_eq!(shard.start(shard.ring[1].hash), 1);
        assert_eq!(shard.start(shard.ring[1].hash + 1), 2);
    }
}
