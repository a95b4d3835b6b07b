//! The sandbox: a memory limit per instance ([`MemoryLimiter`]), a CPU deadline per callback
//! (epoch interruption driven by one [`EpochTicker`] thread), and no filesystem or network
//! (the host simply offers none: see `abi::wasi`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Engine, ResourceLimiter};

/// Per-plugin resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory per instance, in bytes. Default 16 MiB.
    pub memory: usize,
    /// CPU time per callback. Default 5 ms. Precision: one epoch tick (see
    /// [`HostSettings::epoch_tick`](super::HostSettings::epoch_tick)); a callback is stopped
    /// between `deadline` and `deadline + 1 tick`.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: 16 << 20,
            deadline: Duration::from_millis(5),
        }
    }
}

/// Table elements an instance may have (function tables of SDK-built plugins hold hundreds).
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The store's `ResourceLimiter`: refuses memory growth past `max` and remembers that it did,
/// so that the trap that usually follows (a Rust guest aborts on allocation failure) is
/// reported as [`Cause::OutOfMemory`](super::Cause::OutOfMemory).
pub(crate) struct MemoryLimiter {
    max: usize,
    pub(crate) exceeded: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(max: usize) -> Self {
        MemoryLimiter { max, exceeded: false }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.exceeded = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded = true;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Epoch ticks that make up `deadline`, rounded up, plus one because the current tick may
/// be about to end.
pub(crate) fn deadline_ticks(deadline: Duration, tick: Duration) -> u64 {
    let tick = tick.as_nanos().max(1);
    let ticks = deadline.as_nanos().div_ceil(tick);
    u64::try_from(ticks).unwrap_or(u64::MAX - 1).max(1) + 1
}

/// One background thread that increments the engines' epochs every `tick`. Stopped (and
/// joined) when dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Ticks `engine` always, and `late` once it has been initialised (the pooling engine is
    /// created on first use).
    pub(crate) fn start<L: Send + Sync + 'static>(
        engine: Engine,
        late: Arc<OnceLock<L>>,
        late_engine: fn(&L) -> Option<&Engine>,
        tick: Duration,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("plugin-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                    if let Some(e) = late.get().and_then(late_engine) {
                        e.increment_epoch();
                    }
                }
            })
            .expect("spawn the plugin epoch thread");
        EpochTicker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
