//! Shared data (`proxy_get_shared_data`, `proxy_set_shared_data` with compare-and-swap),
//! process-wide: every plugin and every instance see the same key space (Envoy scopes it
//! per VM id; we have one VM per process). Shared queues are stubs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;
use wasmtime::{Caller, Linker};

use super::{hand_over, once, read, status, write_u32, HostState};

/// The total size of keys and values the store accepts; a set past it fails with
/// `INTERNAL_FAILURE` (the Rust SDK then panics, so the plugin fails, not the proxy).
const MAX_TOTAL_BYTES: usize = 64 << 20;

struct Entry {
    value: Vec<u8>,
    cas: u32,
}

#[derive(Default)]
struct Store {
    entries: HashMap<Vec<u8>, Entry>,
    bytes: usize,
}

static SHARED: LazyLock<Mutex<Store>> = LazyLock::new(Default::default);
static NEXT_CAS: AtomicU32 = AtomicU32::new(1);
static NEXT_QUEUE: AtomicU32 = AtomicU32::new(1);

fn next_cas() -> u32 {
    loop {
        let cas = NEXT_CAS.fetch_add(1, Ordering::Relaxed);
        if cas != 0 {
            return cas;
        }
    }
}

pub(super) fn define(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap("env", "proxy_get_shared_data", get)?;
    linker.func_wrap("env", "proxy_set_shared_data", set)?;
    linker.func_wrap("env", "proxy_register_shared_queue", register_queue)?;
    linker.func_wrap("env", "proxy_resolve_shared_queue", resolve_queue)?;
    linker.func_wrap("env", "proxy_dequeue_shared_queue", dequeue)?;
    linker.func_wrap("env", "proxy_enqueue_shared_queue", enqueue)?;
    Ok(())
}

fn get(
    mut caller: Caller<'_, HostState>,
    key_ptr: i32,
    key_len: i32,
    ret_ptr: i32,
    ret_len: i32,
    ret_cas: i32,
) -> wasmtime::Result<i32> {
    let Some(key) = read(&mut caller, key_ptr, key_len) else {
        return Ok(status::INVALID_MEMORY_ACCESS);
    };
    let found = SHARED.lock().entries.get(&key).map(|e| (e.value.clone(), e.cas));
    let Some((value, cas)) = found else {
        return Ok(status::NOT_FOUND);
    };
    let st = hand_over(&mut caller, &value, ret_ptr, ret_len)?;
    if st != status::OK {
        return Ok(st);
    }
    if write_u32(&mut caller, ret_cas, cas) {
        Ok(status::OK)
    } else {
        Ok(status::INVALID_MEMORY_ACCESS)
    }
}

fn set(
    mut caller: Caller<'_, HostState>,
    key_ptr: i32,
    key_len: i32,
    v_ptr: i32,
    v_len: i32,
    cas: i32,
) -> i32 {
    let (Some(key), Some(value)) = (
        read(&mut caller, key_ptr, key_len),
        read(&mut caller, v_ptr, v_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let cas = cas as u32;
    let mut shared = SHARED.lock();
    let old = shared.entries.get(&key).map(|e| (e.cas, e.value.len()));
    if let Some((current, _)) = old {
        if cas != 0 && cas != current {
            return status::CAS_MISMATCH;
        }
    }
    let freed = old.map_or(0, |(_, len)| len + key.len());
    let bytes = shared.bytes - freed + key.len() + value.len();
    if bytes > MAX_TOTAL_BYTES {
        return status::INTERNAL_FAILURE;
    }
    shared.bytes = bytes;
    let cas = next_cas();
    shared.entries.insert(key, Entry { value, cas });
    status::OK
}

fn log_queue(caller: &Caller<'_, HostState>) {
    caller.data().meta.log_once(
        once::QUEUE,
        "shared queues are not supported (queue calls return NOT_FOUND)",
    );
}

fn register_queue(mut caller: Caller<'_, HostState>, _ptr: i32, _len: i32, ret_id: i32) -> i32 {
    log_queue(&caller);
    // The Rust SDK accepts only OK here: hand out an id that no queue will ever serve.
    let id = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
    if write_u32(&mut caller, ret_id, id) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

fn resolve_queue(caller: Caller<'_, HostState>, _vp: i32, _vl: i32, _np: i32, _nl: i32, _ret: i32) -> i32 {
    log_queue(&caller);
    status::NOT_FOUND
}

fn dequeue(caller: Caller<'_, HostState>, _id: i32, _ret_ptr: i32, _ret_len: i32) -> i32 {
    log_queue(&caller);
    status::NOT_FOUND
}

fn enqueue(caller: Caller<'_, HostState>, _id: i32, _ptr: i32, _len: i32) -> i32 {
    log_queue(&caller);
    status::NOT_FOUND
}
