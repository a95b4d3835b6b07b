//! The ban lurker: applies bans on `obj.*` to every stored object in the background, at a
//! bounded rate, and drops each ban once every object older than it has been tested.
//!
//! Without it, a ban is only applied when a lookup finds an object, so the list grows with
//! every ban and only shrinks when old objects expire. The lurker is Varnish's, with the same
//! parameters: it leaves a ban alone until it is `ban_lurker_age` old (bans come in bursts, and
//! the traffic tests a young ban anyway), then walks the store once for all the bans that are
//! old enough, testing each object against those newer than it and than the newest ban a lookup
//! already tested it against, and removing the ones that match. It examines at most
//! `--ban-lurker-rate` objects per second: Varnish's `ban_lurker_batch` objects, then a sleep of
//! `ban_lurker_sleep` (1000 and 10 ms, so 100,000 per second by default); batches are a
//! hundredth of the rate, at most 1000, so a low rate still moves in small steps.
//!
//! Bans that test `req.*` need a request and are left to lookups; the walk skips them (an
//! object is still tested against them at its next lookup, since the walk does not move
//! [`CachedObject::bans_checked`]).
//!
//! A ban applies to objects whose response arrived before it. An object is stored when its
//! body is complete, so a slow fill may reach the store after the walk passed: bans younger
//! than `ban_lurker_age` are never dropped, which covers fills shorter than that (as the trim of
//! `admin::bans` does for bans on `req.*`).
//!
//! The walk runs on its own thread (moka's iterator is not held across an `await`), which waits
//! on the ban list's condition variable between batches and when there is nothing to do.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::BanList;
use crate::cache::SharedCache;

/// Most objects examined between two pauses (Varnish's `ban_lurker_batch` default).
const MAX_BATCH: u64 = 1000;
/// Longest sleep with nothing to do: the lurker then checks whether its server is gone
/// (a server dropped without `shutdown` stops it only this way).
const IDLE: Duration = Duration::from_secs(1);

/// How the lurker paces itself (`--ban-lurker-rate`, `ban_lurker_age`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LurkerSettings {
    /// Objects examined per second at most; 0 turns the lurker off.
    pub rate: u64,
    /// Bans younger than this are left to lookups.
    pub age: Duration,
}

/// Starts the lurker on `cache` (unless the rate is 0); the task returned ends, and stops it,
/// when `stopped` turns true.
pub(crate) fn spawn(
    cache: SharedCache,
    settings: LurkerSettings,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let bans = cache.bans.clone();
    if settings.rate > 0 {
        let watching = stopped.clone();
        let started = std::thread::Builder::new()
            .name("ban-lurker".into())
            .spawn(move || run(&cache, settings, &watching));
        if let Err(error) = started {
            tracing::error!(%error, "the ban lurker cannot start: bans on obj.* are applied at lookup only");
        }
    }
    tokio::spawn(async move {
        // An error: the server is gone without `shutdown`, which stops the lurker as well.
        let _ = stopped.wait_for(|stopped| *stopped).await;
        bans.stop_lurker();
    })
}

fn run(cache: &SharedCache, settings: LurkerSettings, stopped: &watch::Receiver<bool>) {
    let bans: &BanList = &cache.bans;
    let batch = (settings.rate / 100).clamp(1, MAX_BATCH);
    let pause = Duration::from_secs_f64(batch as f64 / settings.rate as f64);
    let gone = || stopped.has_changed().is_err() || *stopped.borrow();
    loop {
        if gone() {
            return;
        }
        let added = bans.added();
        let cutoff = cache
            .clock
            .now()
            .checked_sub(settings.age)
            .unwrap_or(std::time::UNIX_EPOCH);
        let (work, next) = bans.lurk_work(cutoff);
        if work.is_empty() {
            let wait = next.map_or(IDLE, |next| next.min(IDLE));
            if !bans.sleep(added, wait) {
                return;
            }
            continue;
        }
        let mut examined = 0u64;
        let mut removed = 0u64;
        for (key, object) in cache.store.objects() {
            examined += 1;
            if examined.is_multiple_of(batch) && !bans.pause(pause) {
                return;
            }
            if bans.lurk(&object, &work) {
                cache.store.remove_object(&key, &object);
                removed += 1;
            }
        }
        bans.lurked(&work);
        tracing::debug!(
            bans = work.len(),
            examined,
            removed,
            "ban lurker: bans applied to every older object and dropped"
        );
    }
}
