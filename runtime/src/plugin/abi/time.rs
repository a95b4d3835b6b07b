//! `proxy_get_current_time_nanoseconds` and `proxy_set_tick_period_milliseconds`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmtime::{Caller, Linker};

use super::{status, write_u64, HostState};

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_current_time_nanoseconds", now)?;
    linker.func_wrap("env", "proxy_set_tick_period_milliseconds", set_tick_period)?;
    Ok(())
}

pub(crate) fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn now(mut caller: Caller<'_, HostState>, ret_ptr: i32) -> i32 {
    if write_u64(&mut caller, ret_ptr, unix_nanos()) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

/// 0 turns ticks off. The host's tick task (see `Plugin::drive_ticks`) runs `proxy_on_tick`.
fn set_tick_period(mut caller: Caller<'_, HostState>, millis: i32) -> i32 {
    let millis = millis as u32;
    caller.data_mut().tick_period = (millis > 0).then(|| Duration::from_millis(u64::from(millis)));
    status::OK
}
