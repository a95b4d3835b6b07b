//! A backend's health as Varnish keeps it: a shift register of the last `.window` probe results
//! (at most 64), healthy while at least `.threshold` of them are good.
//!
//! The register starts with `.initial` good results, so a backend starts healthy iff
//! `.initial >= .threshold` (Varnish's default `.initial` is `.threshold - 1`: sick until the
//! first good probe). This module does no I/O and reads no clock: the prober
//! ([`super::probe`]) feeds it results with their time, and readers take a [`HealthReport`].

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;
use policy_lang::ProbeDecl;

/// Slots in the shift register; a longer `.window` is cut to this (as in Varnish).
const MAX_WINDOW: u32 = 64;

/// The last `window` probe results, newest in the lowest bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Register {
    bits: u64,
    window: u32,
    threshold: u32,
}

impl Register {
    /// A register holding `initial` good results (both bounded by the window, itself 1..=64).
    pub(super) fn new(window: u32, threshold: u32, initial: u32) -> Register {
        let window = window.clamp(1, MAX_WINDOW);
        let initial = initial.min(window);
        Register {
            bits: mask(initial),
            window,
            threshold,
        }
    }

    /// Shifts in one result, dropping the oldest.
    pub(super) fn push(&mut self, good: bool) {
        self.bits = ((self.bits << 1) | u64::from(good)) & mask(self.window);
    }

    /// Good results in the window.
    pub(super) fn good(&self) -> u32 {
        self.bits.count_ones()
    }

    pub(super) fn healthy(&self) -> bool {
        self.good() >= self.threshold
    }

    /// The window oldest first, `H` for a good result and `-` for a bad one, like the `Happy`
    /// line of Varnish's `backend.list -p`.
    pub(super) fn bits(&self) -> String {
        (0..self.window)
            .rev()
            .map(|slot| if self.bits >> slot & 1 == 1 { 'H' } else { '-' })
            .collect()
    }
}

/// The `n` lowest bits set.
fn mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// What changed when a result was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Transition {
    WentSick,
    WentHealthy,
}

/// One backend's probe state, shared by the prober (writer) and the backend (readers).
#[derive(Debug)]
pub(super) struct Health {
    /// Read on the request path (directors) without the lock.
    healthy: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    register: Register,
    last_change: SystemTime,
    last_failure: Option<String>,
}

impl Health {
    /// The state before the first probe: `.initial` good results, changed `now`.
    pub(super) fn new(probe: &ProbeDecl, now: SystemTime) -> Health {
        let register = Register::new(probe.window, probe.threshold, probe.initial);
        Health {
            healthy: AtomicBool::new(register.healthy()),
            state: Mutex::new(State {
                register,
                last_change: now,
                last_failure: None,
            }),
        }
    }

    pub(super) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Records one probe result (`Err` carries why it failed) made at `now`; returns the
    /// transition it caused, if any.
    pub(super) fn record(&self, result: Result<(), String>, now: SystemTime) -> Option<Transition> {
        let mut state = self.state.lock();
        let was = state.register.healthy();
        state.register.push(result.is_ok());
        if let Err(reason) = result {
            state.last_failure = Some(reason);
        }
        let is = state.register.healthy();
        self.healthy.store(is, Ordering::Relaxed);
        if was == is {
            return None;
        }
        state.last_change = now;
        Some(if is {
            Transition::WentHealthy
        } else {
            Transition::WentSick
        })
    }

    pub(super) fn report(&self) -> HealthReport {
        let state = self.state.lock();
        HealthReport {
            healthy: state.register.healthy(),
            good: state.register.good(),
            threshold: state.register.threshold,
            window: state.register.window,
            bits: state.register.bits(),
            last_change: state.last_change,
            last_failure: state.last_failure.clone(),
        }
    }
}

/// An operator's override of a backend's health (`backend.set_health`, as varnishadm's):
/// `Sick` and `Healthy` win over the probe (and over having none), `Auto` follows it again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdminHealth {
    #[default]
    Auto,
    Healthy,
    Sick,
}

impl AdminHealth {
    pub fn as_str(self) -> &'static str {
        match self {
            AdminHealth::Auto => "auto",
            AdminHealth::Healthy => "healthy",
            AdminHealth::Sick => "sick",
        }
    }
}

impl std::str::FromStr for AdminHealth {
    type Err = UnknownHealth;

    /// `healthy`, `sick` or `auto` (varnishadm's words).
    fn from_str(text: &str) -> Result<AdminHealth, UnknownHealth> {
        [AdminHealth::Auto, AdminHealth::Healthy, AdminHealth::Sick]
            .into_iter()
            .find(|health| health.as_str() == text)
            .ok_or_else(|| UnknownHealth(text.to_string()))
    }
}

/// A `backend.set_health` word that is none of `healthy`, `sick`, `auto`.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a health; accepted: healthy, sick, auto")]
pub struct UnknownHealth(String);

/// The override as the request path reads it: one atomic load.
#[derive(Debug, Default)]
pub(super) struct AdminHealthCell(AtomicU8);

impl AdminHealthCell {
    pub(super) fn get(&self) -> AdminHealth {
        match self.0.load(Ordering::Relaxed) {
            1 => AdminHealth::Healthy,
            2 => AdminHealth::Sick,
            _ => AdminHealth::Auto,
        }
    }

    pub(super) fn set(&self, health: AdminHealth) {
        self.0.store(health as u8, Ordering::Relaxed);
    }
}

/// A backend's probe state at one moment, for the admin API and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthReport {
    pub healthy: bool,
    /// Good results in the window.
    pub good: u32,
    pub threshold: u32,
    /// Window size (`.window`, at most 64).
    pub window: u32,
    /// The window oldest first: `H` good, `-` bad (Varnish's `backend.list -p` `Happy` line).
    pub bits: String,
    /// When the backend last went healthy or sick; its creation time before any change.
    pub last_change: SystemTime,
    /// Why the last failed probe failed ("connection refused", "timeout", "status 500", ...).
    pub last_failure: Option<String>,
}

#[cfg(test)]
mod tests;
