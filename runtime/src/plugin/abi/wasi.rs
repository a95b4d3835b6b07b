//! The WASI preview1 functions SDK-built plugins import, written by hand (no filesystem, no
//! environment, no sockets). Registered under `wasi_snapshot_preview1` and `wasi_unstable`.
//! Any other WASI import is stubbed at load time to return `ENOSYS`.
//!
//! | function | behaviour |
//! |---|---|
//! | `fd_write` | fd 1 → info log, fd 2 → warn log, others `EBADF` |
//! | `fd_read`, `fd_close`, `fd_seek`, `fd_prestat_get`, `fd_prestat_dir_name` | `EBADF` (no preopened directories) |
//! | `fd_fdstat_get` | fds 0–2 are character devices, others `EBADF` |
//! | `environ_*`, `args_*` | empty |
//! | `clock_time_get`, `clock_res_get` | realtime and monotonic clocks (CPU-time clocks read as monotonic) |
//! | `random_get` | the OS CSPRNG |
//! | `sched_yield` | success |
//! | `poll_oneoff` | clock subscriptions fire at once (a callback never sleeps: its CPU deadline runs); fd subscriptions get `EBADF` |
//! | `proc_exit` | ends the callback as a trap; the instance is replaced |

use std::sync::LazyLock;
use std::time::Instant;

use wasmtime::{Caller, Linker};

use super::log::{emit, truncate};
use super::time::unix_nanos;
use super::{memory, range, write, write_u32, write_u64, HostState, ProcExit};

const SUCCESS: i32 = 0;
const EBADF: i32 = 8;
const EFAULT: i32 = 21;
const EINVAL: i32 = 28;
const ENOSYS: i32 = 52;
pub(crate) const ENOSYS_STUB: i32 = ENOSYS;

static START: LazyLock<Instant> = LazyLock::new(Instant::now);

pub(super) fn define(linker: &mut Linker<HostState>, module: &str) -> wasmtime::Result<()> {
    linker.func_wrap(module, "fd_write", fd_write)?;
    linker.func_wrap(
        module,
        "fd_read",
        |_: Caller<'_, HostState>, _: i32, _: i32, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(module, "fd_close", |_: Caller<'_, HostState>, _: i32| EBADF)?;
    linker.func_wrap(
        module,
        "fd_seek",
        |_: Caller<'_, HostState>, _: i32, _: i64, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(
        module,
        "fd_prestat_get",
        |_: Caller<'_, HostState>, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(
        module,
        "fd_prestat_dir_name",
        |_: Caller<'_, HostState>, _: i32, _: i32, _: i32| EBADF,
    )?;
    linker.func_wrap(module, "fd_fdstat_get", fd_fdstat_get)?;
    linker.func_wrap(module, "environ_sizes_get", zero_sizes)?;
    linker.func_wrap(
        module,
        "environ_get",
        |_: Caller<'_, HostState>, _: i32, _: i32| SUCCESS,
    )?;
    linker.func_wrap(module, "args_sizes_get", zero_sizes)?;
    linker.func_wrap(module, "args_get", |_: Caller<'_, HostState>, _: i32, _: i32| {
        SUCCESS
    })?;
    linker.func_wrap(module, "clock_time_get", clock_time_get)?;
    linker.func_wrap(module, "clock_res_get", clock_res_get)?;
    linker.func_wrap(module, "random_get", random_get)?;
    linker.func_wrap(module, "sched_yield", |_: Caller<'_, HostState>| SUCCESS)?;
    linker.func_wrap(module, "poll_oneoff", poll_oneoff)?;
    linker.func_wrap(
        module,
        "proc_exit",
        |_: Caller<'_, HostState>, code: i32| -> wasmtime::Result<()> { Err(ProcExit(code).into()) },
    )?;
    Ok(())
}

fn fd_write(mut caller: Caller<'_, HostState>, fd: i32, iovs: i32, iovs_len: i32, nwritten: i32) -> i32 {
    if fd != 1 && fd != 2 {
        return EBADF;
    }
    let Some(mem) = memory(&mut caller) else {
        return EFAULT;
    };
    let mut text = Vec::new();
    {
        let data = mem.data(&caller);
        let Some(count) = usize::try_from(iovs_len).ok().filter(|n| *n <= 1024) else {
            return EINVAL;
        };
        for i in 0..count {
            let Some(iov) = range(data, iovs.wrapping_add((i * 8) as i32), 8) else {
                return EFAULT;
            };
            let ptr = i32::from_le_bytes(iov[0..4].try_into().expect("4 bytes"));
            let len = i32::from_le_bytes(iov[4..8].try_into().expect("4 bytes"));
            let Some(buf) = range(data, ptr, len) else {
                return EFAULT;
            };
            text.extend_from_slice(buf);
        }
    }
    let state = caller.data_mut();
    state.stdio.write(&state.meta.name, fd, &text);
    if fd == 2 {
        // A Go plugin's panic goes to stderr (a few bytes per write) before proc_exit: quote
        // what the callback wrote there in the trap.
        state.last_error_log = Some(truncate(&state.stdio.stderr_quote(), 300));
    }
    if write_u32(&mut caller, nwritten, text.len() as u32) {
        SUCCESS
    } else {
        EFAULT
    }
}

/// What a guest writes to stdout and stderr, logged a line at a time: the Go runtime writes a
/// panic a few bytes per `fd_write`.
#[derive(Default)]
pub(crate) struct Stdio {
    /// Text after the last newline, per stream (stdout, stderr).
    partial: [Vec<u8>; 2],
    /// What the current callback wrote to stderr, at most [`STDERR_QUOTE`] bytes.
    stderr: String,
}

/// Longest partial line kept before it is logged as it is.
const MAX_LINE: usize = 4096;
const STDERR_QUOTE: usize = 1024;

impl Stdio {
    fn write(&mut self, plugin: &str, fd: i32, bytes: &[u8]) {
        let stream = usize::from(fd == 2);
        let partial = &mut self.partial[stream];
        partial.extend_from_slice(bytes);
        while let Some(end) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=end).collect();
            log_line(plugin, stream, &line);
        }
        if partial.len() > MAX_LINE {
            log_line(plugin, stream, &std::mem::take(partial));
        }
        if stream == 1 {
            let text = String::from_utf8_lossy(bytes);
            let mut room = STDERR_QUOTE.saturating_sub(self.stderr.len()).min(text.len());
            while !text.is_char_boundary(room) {
                room -= 1;
            }
            self.stderr.push_str(&text[..room]);
        }
    }

    /// What the current callback wrote to stderr, on one line.
    pub(crate) fn stderr_quote(&self) -> String {
        self.stderr.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// After a callback: logs the lines it left unfinished and forgets its stderr text.
    pub(crate) fn end_callback(&mut self, plugin: &str) {
        for stream in 0..2 {
            if !self.partial[stream].is_empty() {
                log_line(plugin, stream, &std::mem::take(&mut self.partial[stream]));
            }
        }
        self.stderr.clear();
    }
}

/// stdout at info level, stderr at warn.
fn log_line(plugin: &str, stream: usize, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    if !text.is_empty() {
        emit(plugin, if stream == 0 { 2 } else { 3 }, text);
    }
}

fn fd_fdstat_get(mut caller: Caller<'_, HostState>, fd: i32, ret: i32) -> i32 {
    if !(0..=2).contains(&fd) {
        return EBADF;
    }
    // fdstat: filetype u8 (2 = character device), flags u16, rights base/inheriting u64.
    let mut stat = [0u8; 24];
    stat[0] = 2;
    if write(&mut caller, ret, &stat) {
        SUCCESS
    } else {
        EFAULT
    }
}

fn zero_sizes(mut caller: Caller<'_, HostState>, count_ptr: i32, size_ptr: i32) -> i32 {
    if write_u32(&mut caller, count_ptr, 0) && write_u32(&mut caller, size_ptr, 0) {
        SUCCESS
    } else {
        EFAULT
    }
}

fn clock_time_get(mut caller: Caller<'_, HostState>, clock: i32, _precision: i64, ret: i32) -> i32 {
    let nanos = match clock {
        0 => unix_nanos(),
        1..=3 => u64::try_from(START.elapsed().as_nanos()).unwrap_or(u64::MAX),
        _ => return EINVAL,
    };
    if write_u64(&mut caller, ret, nanos) {
        SUCCESS
    } else {
        EFAULT
    }
}

fn clock_res_get(mut caller: Caller<'_, HostState>, clock: i32, ret: i32) -> i32 {
    if !(0..=3).contains(&clock) {
        return EINVAL;
    }
    if write_u64(&mut caller, ret, 1_000) {
        SUCCESS
    } else {
        EFAULT
    }
}

fn random_get(mut caller: Caller<'_, HostState>, ptr: i32, len: i32) -> i32 {
    let Ok(len) = usize::try_from(len) else {
        return EINVAL;
    };
    if len > 1 << 20 {
        return EINVAL;
    }
    let mut buf = vec![0u8; len];
    if getrandom::fill(&mut buf).is_err() {
        return ENOSYS;
    }
    if write(&mut caller, ptr, &buf) {
        SUCCESS
    } else {
        EFAULT
    }
}

/// The Go runtime calls `poll_oneoff` with a clock subscription when all its goroutines wait
/// (a timer, `time.Sleep`). Sleeping would hold the thread inside a callback with a CPU
/// deadline, so every clock subscription is reported as due now; fd subscriptions fail with
/// `EBADF` (there are no fds to wait on). Layouts: subscription 48 bytes (userdata u64, tag u8
/// at 8), event 32 bytes (userdata u64, errno u16 at 8, type u8 at 10).
fn poll_oneoff(mut caller: Caller<'_, HostState>, subs: i32, events: i32, count: i32, ret_n: i32) -> i32 {
    let Some(mem) = memory(&mut caller) else {
        return EFAULT;
    };
    let Some(count) = usize::try_from(count).ok().filter(|n| (1..=1024).contains(n)) else {
        return EINVAL;
    };
    let mut out = Vec::with_capacity(count * 32);
    {
        let data = mem.data(&caller);
        let Some(subscriptions) = range(data, subs, (count * 48) as i32) else {
            return EFAULT;
        };
        for sub in subscriptions.chunks_exact(48) {
            let mut event = [0u8; 32];
            event[0..8].copy_from_slice(&sub[0..8]);
            let tag = sub[8];
            let errno: u16 = if tag == 0 { 0 } else { EBADF as u16 };
            event[8..10].copy_from_slice(&errno.to_le_bytes());
            event[10] = tag;
            out.extend_from_slice(&event);
        }
    }
    if write(&mut caller, events, &out) && write_u32(&mut caller, ret_n, count as u32) {
        SUCCESS
    } else {
        EFAULT
    }
}
