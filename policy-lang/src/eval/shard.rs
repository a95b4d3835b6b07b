//! The shard director at run time: the key of `shard.backend(...)` and the walk around the
//! ring that picks a member, step for step as Varnish's `sharddir_pick_be`.
//!
//! From the first point at or after the key the walk goes clockwise, each member counted once:
//! * `alt=N` skips N members first (`healthy=ALL`: only healthy ones count as skipped);
//! * the pick is then the next healthy member (`healthy=IGNORE`: the next one); when there is
//!   none, the last healthy member seen, or no backend;
//! * with `alt=0` and health looked at, the member after the pick may take the request instead:
//!   while the pick is in its rampup (it turned healthy less than `rampup` ago) with the
//!   probability of the rampup left, or else with the `warmup` probability.
//!
//! `resolve=NOW` (the default outside `vcl_init`) picks while the sub runs, so the policy can
//! read the backend it got; `resolve=LAZY` returns the director with the key and the
//! parameters packed into the [`BackendId`], and the pick happens when the fetch starts.
//!
//! A `directors.shard_param()` set (`param=p.use()`, or the director's `associate`d one) gives
//! what `.backend()` was not given: its `vcl_init` defaults, with what the backend request's
//! `p.set(...)` changed (kept in the [`Task`](super::Task)). A lazy pick takes the set as it is
//! when the fetch starts, so `p.set(alt=bereq.retries)` in `vcl_backend_fetch` moves a retry to
//! the next backend, as in Varnish.

use super::Context;
use crate::compile::Program;
use crate::tree::shard::{
    blob_key, hash32, ParamField, Shard, ShardBy, ShardHealthy, ShardParams, ShardPick, GIVEN_ALT, GIVEN_BY,
    GIVEN_HEALTHY, GIVEN_RAMPUP, GIVEN_WARMUP, MAX_SHARD_PARAMS,
};
use crate::tree::{Director, Expr, Func};
use crate::vocab::{BackendId, Value};

/// The arguments of one pick, after defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PickArgs {
    key: u32,
    alt: u32,
    /// -1: the director's `set_warmup`.
    warmup: f64,
    rampup: bool,
    healthy: ShardHealthy,
    /// The parameter set for what was not given (`given`: [`GIVEN_BY`], ...).
    param: Option<usize>,
    given: u8,
}

/// `alt` kept in a lazy pick: far more than any director has members.
const ALT_MAX: u32 = 0xff;
const WARMUP_DEFAULT: u64 = 0x3ff;

impl PickArgs {
    /// The arguments in the 64 bits of a [`BackendId`] key: key (32), alt (8), healthy (2),
    /// rampup (1), warmup in thousandths (10; all ones for the director's), the parameter set
    /// plus one (4), which arguments were given (5).
    fn pack(self) -> u64 {
        let healthy = match self.healthy {
            ShardHealthy::Chosen => 0,
            ShardHealthy::Ignore => 1,
            ShardHealthy::All => 2,
        };
        let warmup = if self.warmup < 0.0 {
            WARMUP_DEFAULT
        } else {
            (self.warmup * 1000.0).round() as u64
        };
        let param = self
            .param
            .filter(|p| *p < MAX_SHARD_PARAMS)
            .map_or(0, |p| p as u64 + 1);
        u64::from(self.key)
            | u64::from(self.alt.min(ALT_MAX)) << 32
            | healthy << 40
            | u64::from(self.rampup) << 42
            | warmup << 43
            | param << 53
            | u64::from(self.given & 0x1f) << 57
    }

    fn unpack(bits: u64) -> PickArgs {
        let warmup = (bits >> 43) & WARMUP_DEFAULT;
        let param = ((bits >> 53) & 0xf) as usize;
        PickArgs {
            key: bits as u32,
            alt: ((bits >> 32) as u32) & ALT_MAX,
            healthy: match (bits >> 40) & 3 {
                1 => ShardHealthy::Ignore,
                2 => ShardHealthy::All,
                _ => ShardHealthy::Chosen,
            },
            rampup: (bits >> 42) & 1 == 1,
            warmup: if warmup == WARMUP_DEFAULT {
                -1.0
            } else {
                warmup as f64 / 1000.0
            },
            param: param.checked_sub(1),
            given: ((bits >> 57) & 0x1f) as u8,
        }
    }
}

impl Program {
    /// The value of `shard.backend(...)`.
    pub(super) fn shard_value(&self, pick: &ShardPick, ctx: &dyn Context) -> Value<'_> {
        let Some(args) = self.pick_args(pick, ctx) else {
            return Value::Backend(None);
        };
        let index = (self.backends.len() + pick.director) as u32;
        if pick.lazy {
            return Value::Backend(Some(BackendId::with_key(index, args.pack())));
        }
        let args = self.with_params(args, ctx);
        let lazy = BackendId::with_key(index, args.pack());
        let shard = self.directors.get(pick.director).and_then(|d| d.shard.as_deref());
        // With no healthy member the director itself stays the hint, as a lazy pick: the fetch
        // then fails on one of its members as every director's does, rather than falling to
        // the default backend as an unset hint would.
        Value::Backend(Some(
            shard.and_then(|s| self.shard_pick(s, args, ctx)).unwrap_or(lazy),
        ))
    }

    /// A lazy shard pick, when the fetch starts (see [`Program::resolve_backend`]).
    pub(super) fn shard_resolve(&self, d: &Director, key: u64, ctx: &dyn Context) -> Option<BackendId> {
        let args = self.with_params(PickArgs::unpack(key), ctx);
        self.shard_pick(d.shard.as_deref()?, args, ctx)
    }

    /// `args` with what its parameter set gives for the arguments not given.
    fn with_params(&self, mut args: PickArgs, ctx: &dyn Context) -> PickArgs {
        let Some(set) = args.param else { return args };
        let p = self.shard_params_of(set, ctx);
        let not_given = |flag: u8| args.given & flag == 0;
        if not_given(GIVEN_BY) && matches!(p.by, Some(ShardBy::Key | ShardBy::Blob)) {
            args.key = p.key.unwrap_or(0);
        }
        if let Some(alt) = p.alt.filter(|_| not_given(GIVEN_ALT)) {
            args.alt = alt;
        }
        if let Some(warmup) = p.warmup.filter(|_| not_given(GIVEN_WARMUP)) {
            args.warmup = warmup;
        }
        if let Some(rampup) = p.rampup.filter(|_| not_given(GIVEN_RAMPUP)) {
            args.rampup = rampup;
        }
        if let Some(healthy) = p.healthy.filter(|_| not_given(GIVEN_HEALTHY)) {
            args.healthy = healthy;
        }
        args
    }

    /// Parameter set `set` as this task sees it: `vcl_init`'s, with the backend request's
    /// changes.
    fn shard_params_of(&self, set: usize, ctx: &dyn Context) -> ShardParams {
        let defaults = self.shard_params.get(set).cloned().unwrap_or_default();
        let changed = ctx
            .task()
            .and_then(|task| task.shard_params.iter().find(|(s, _)| *s == set));
        match changed {
            Some((_, over)) => defaults.merged(over),
            None => defaults,
        }
    }

    /// `p.set(...)` / `p.clear()` on the backend side: this backend request's parameter set.
    pub(super) fn shard_param_effect(&self, f: Func, args: &[Expr], ctx: &mut dyn Context) {
        let (set, change) = match f {
            Func::ShardParamSet(set) => {
                let arg = |i: usize| {
                    args.get(i)
                        .map_or(Value::Unset, |e| self.eval(e, &*ctx).into_owned())
                };
                let int = |i: usize| arg(i).as_int().and_then(|n| u32::try_from(n).ok());
                let word = |i: usize| arg(i).as_str().map(str::to_string);
                let key_blob = word(2).map(|hex| blob_key(&hex));
                let change = ShardParams {
                    by: word(0).as_deref().map(ShardBy::from_word),
                    key: int(1).or(key_blob),
                    alt: int(3),
                    warmup: arg(4).as_real().filter(|w| *w == -1.0 || (0.0..=1.0).contains(w)),
                    rampup: match arg(5) {
                        Value::Bool(b) => Some(b),
                        _ => None,
                    },
                    healthy: word(6).as_deref().map(ShardHealthy::from_word),
                };
                (set, Some(change))
            }
            Func::ShardParamClear(set) => (set, None),
            _ => return,
        };
        let Some(task) = ctx.task_mut() else { return };
        let at = task.shard_params.iter().position(|(s, _)| *s == set);
        match (change, at) {
            (Some(change), Some(at)) => task.shard_params[at].1 = task.shard_params[at].1.merged(&change),
            (Some(change), None) => task.shard_params.push((set, change)),
            (None, Some(at)) => {
                task.shard_params.remove(at);
            }
            (None, None) => {}
        }
    }

    /// `p.get_by()`, `p.get_key()`, ...: what a director using set `set` would use.
    pub(super) fn shard_param_get(&self, set: usize, field: ParamField, ctx: &dyn Context) -> Value<'_> {
        let p = self.shard_params_of(set, ctx);
        match field {
            ParamField::By => Value::str(p.by.unwrap_or(ShardBy::Hash).word()),
            ParamField::Key => Value::Int(i64::from(p.key.unwrap_or_else(|| {
                // by=HASH / URL: the URL of the side the call is on.
                let url = match ctx.get(crate::vocab::Var::BereqUrl) {
                    Value::Str(url) => url.into_owned(),
                    _ => ctx
                        .get(crate::vocab::Var::ReqUrl)
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                };
                hash32(&[&url])
            }))),
            ParamField::Alt => Value::Int(i64::from(p.alt.unwrap_or(0))),
            ParamField::Warmup => Value::Real(p.warmup.unwrap_or(-1.0)),
            ParamField::Rampup => Value::Bool(p.rampup.unwrap_or(true)),
            ParamField::Healthy => Value::str(p.healthy.unwrap_or(ShardHealthy::Chosen).word()),
        }
    }

    /// The key and the other arguments; `None` (and a log line) for arguments Varnish fails
    /// the request on.
    fn pick_args(&self, pick: &ShardPick, ctx: &dyn Context) -> Option<PickArgs> {
        // Where Varnish fails the request on an argument, no backend is picked.
        let key = match pick.by {
            ShardBy::Hash | ShardBy::Url => {
                let url = self.eval(&pick.key, ctx);
                hash32(&[url.as_str().unwrap_or("")])
            }
            ShardBy::Key => match self.eval(&pick.key, ctx).as_int().map(u32::try_from) {
                Some(Ok(key)) => key,
                _ => return None,
            },
            ShardBy::Blob => blob_key(self.eval(&pick.key, ctx).as_str().unwrap_or("")),
        };
        let alt = match self.eval(&pick.alt, ctx) {
            Value::Unset => 0,
            v => match v.as_int().map(u32::try_from) {
                Some(Ok(alt)) => alt,
                _ => return None,
            },
        };
        let warmup = match self.eval(&pick.warmup, ctx) {
            Value::Unset => -1.0,
            v => match v.as_real() {
                Some(w) if w == -1.0 || (0.0..=1.0).contains(&w) => w,
                _ => return None,
            },
        };
        let rampup = !matches!(self.eval(&pick.rampup, ctx), Value::Bool(false));
        let associated = || self.directors.get(pick.director)?.shard.as_ref()?.associated;
        Some(PickArgs {
            key,
            alt,
            warmup,
            rampup,
            healthy: pick.healthy,
            param: pick.param.or_else(associated),
            given: pick.given,
        })
    }

    fn shard_pick(&self, shard: &Shard, args: PickArgs, ctx: &dyn Context) -> Option<BackendId> {
        let n = shard.members.len();
        if n == 0 || shard.ring.is_empty() {
            return None;
        }
        let backend = |m: usize| shard.members[m].backend;
        let healthy = |m: usize| self.healthy(backend(m), ctx);
        let alt = (args.alt as usize).min(n - 1);
        let mut walk = Walk::new(shard, args.key);
        if alt > 0
            && walk
                .next(alt - 1, args.healthy == ShardHealthy::All, &healthy)
                .is_none()
        {
            return walk.previous.map(backend);
        }
        let Some(chosen) = walk.next(0, args.healthy != ShardHealthy::Ignore, &healthy) else {
            return walk.previous.map(backend);
        };
        let warmup = if args.warmup < 0.0 {
            shard.warmup
        } else {
            args.warmup
        };
        if alt > 0 || args.healthy == ShardHealthy::Ignore || (!args.rampup && warmup == 0.0) {
            return Some(backend(chosen));
        }
        let Some(next) = walk.next(0, true, &healthy) else {
            return Some(backend(chosen));
        };
        let rampup_of = |m: usize| shard.members[m].rampup.unwrap_or(shard.rampup);
        let up_for = |m: usize| ctx.healthy_for(backend(m)).unwrap_or(f64::INFINITY);
        let (chosen_up, chosen_rampup) = (up_for(chosen), rampup_of(chosen));
        let take_next = if chosen_up < chosen_rampup {
            // The pick is ramping up: the next one takes the share it does not have yet,
            // unless that one is ramping up too.
            args.rampup && up_for(next) >= rampup_of(next) && ctx.random() * chosen_rampup >= chosen_up
        } else {
            warmup > 0.0 && ctx.random() <= warmup
        };
        Some(backend(if take_next { next } else { chosen }))
    }
}

/// The walk around the ring from a key: each member is met once.
struct Walk<'s> {
    shard: &'s Shard,
    at: usize,
    met: Vec<bool>,
    met_count: usize,
    /// The healthy member met before the last pick (Varnish's `state->previous`).
    previous: Option<usize>,
    last: Option<usize>,
}

impl<'s> Walk<'s> {
    fn new(shard: &'s Shard, key: u32) -> Walk<'s> {
        Walk {
            shard,
            at: shard.start(key),
            met: vec![false; shard.members.len()],
            met_count: 0,
            previous: None,
            last: None,
        }
    }

    /// The member after skipping `skip` (healthy ones; with `!healthy_only` sick ones count
    /// too), the first healthy one if `healthy_only`. `None` when the ring runs out.
    fn next(&mut self, skip: usize, healthy_only: bool, healthy: &dyn Fn(usize) -> bool) -> Option<usize> {
        let n = self.met.len();
        let mut skip = skip as i64;
        while self.met_count < n && skip >= 0 {
            let m = self.shard.ring[self.at].member;
            if !self.met[m] {
                self.met[m] = true;
                self.met_count += 1;
                let is_healthy = healthy(m);
                if is_healthy || !healthy_only {
                    if skip == 0 {
                        if self.last.is_some() {
                            self.previous = self.last;
                        }
                        self.last = Some(m);
                        return Some(m);
                    }
                    if is_healthy {
                        self.previous = Some(m);
                    }
                    skip -= 1;
                }
            }
            self.at = (self.at + 1) % self.shard.ring.len();
        }
        None
    }
}

#[cfg(test)]
mod tests;
