//! `proxy_log` and `proxy_get_log_level`: plugin logs go to `tracing` (target
//! `edgecache::plugin`) with the plugin's name as a field.

use tracing::level_filters::LevelFilter;
use wasmtime::{Caller, Linker};

use super::{read, status, write_u32, HostState};

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_log", proxy_log)?;
    linker.func_wrap("env", "proxy_get_log_level", get_log_level)?;
    Ok(())
}

/// Emits one plugin log line. Levels: 0 trace, 1 debug, 2 info, 3 warn, 4 error, 5 critical.
pub(crate) fn emit(plugin: &str, level: i32, msg: &str) {
    match level {
        0 => tracing::trace!(target: "edgecache::plugin", plugin, "{msg}"),
        1 => tracing::debug!(target: "edgecache::plugin", plugin, "{msg}"),
        2 => tracing::info!(target: "edgecache::plugin", plugin, "{msg}"),
        3 => tracing::warn!(target: "edgecache::plugin", plugin, "{msg}"),
        _ => tracing::error!(target: "edgecache::plugin", plugin, critical = level >= 5, "{msg}"),
    }
}

/// Whether a plugin line at `level` would be written: checked before anything else, so a log
/// call below the active level costs the check alone.
fn enabled(level: i32) -> bool {
    match level {
        0 => tracing::enabled!(target: "edgecache::plugin", tracing::Level::TRACE),
        1 => tracing::enabled!(target: "edgecache::plugin", tracing::Level::DEBUG),
        2 => tracing::enabled!(target: "edgecache::plugin", tracing::Level::INFO),
        3 => tracing::enabled!(target: "edgecache::plugin", tracing::Level::WARN),
        _ => true,
    }
}

fn proxy_log(mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32) -> i32 {
    // Always OK: the Rust SDK panics on any other status, even here.
    if !enabled(level) {
        return status::OK;
    }
    let Some(bytes) = read(&mut caller, ptr, len) else {
        emit(
            &caller.data().meta.name,
            3,
            "proxy_log with an out-of-bounds message",
        );
        return status::OK;
    };
    let msg = String::from_utf8_lossy(&bytes);
    let state = caller.data_mut();
    emit(&state.meta.name, level, &msg);
    if level >= 4 {
        state.last_error_log = Some(truncate(&msg, 300));
    }
    status::OK
}

pub(crate) fn truncate(msg: &str, max: usize) -> String {
    if msg.len() <= max {
        return msg.to_string();
    }
    let mut end = max;
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &msg[..end])
}

fn get_log_level(mut caller: Caller<'_, HostState>, ret_ptr: i32) -> i32 {
    let level = match LevelFilter::current() {
        LevelFilter::TRACE => 0,
        LevelFilter::DEBUG => 1,
        LevelFilter::INFO => 2,
        LevelFilter::WARN => 3,
        LevelFilter::ERROR => 4,
        _ => 5,
    };
    if write_u32(&mut caller, ret_ptr, level) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}
