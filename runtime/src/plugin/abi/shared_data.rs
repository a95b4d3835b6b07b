//! Shared data (`proxy_get_shared_data`, `proxy_set_shared_data` with compare-and-swap),
//! process-wide: every plugin and every instance see the same key space (Envoy scopes it
//! per VM id; we have one VM per process). Shared queues (`proxy_register/resolve/enqueue/
//! dequeue_shared_queue`), process-wide and named per VM id: any instance may enqueue; the
//! plugin that registered a queue last is told of each item (`proxy_on_queue_ready`, as on
//! Envoy) and dequeues, then or from `proxy_on_tick`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;
use wasmtime::{Caller, Linker};

use super::{hand_over, read, status, write_u32, HostState, QueueListener};

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

// === shared queues: process-wide, named per VM id, bounded; consumers dequeue (on a tick) ===

/// Items a queue keeps; past it the oldest item is dropped (a slow consumer loses data rather
/// than grow the proxy's memory).
const MAX_QUEUE_ITEMS: usize = 10_000;

#[derive(Default)]
struct Queues {
    /// (VM id, queue name) -> queue id.
    ids: HashMap<(String, Vec<u8>), u32>,
    items: HashMap<u32, VecDeque<Vec<u8>>>,
    /// Queue id -> the plugin that registered it last.
    listeners: HashMap<u32, QueueListener>,
}

static QUEUES: LazyLock<Mutex<Queues>> = LazyLock::new(Default::default);

/// Registers (or finds) the queue `name` of the plugin's VM id.
fn register_queue(mut caller: Caller<'_, HostState>, ptr: i32, len: i32, ret_id: i32) -> i32 {
    let Some(name) = read(&mut caller, ptr, len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let meta = &caller.data().meta;
    let (vm_id, listener) = (meta.vm_id.clone(), meta.queue_listener.get().cloned());
    let id = {
        let mut queues = QUEUES.lock();
        let queues = &mut *queues;
        let id = *queues.ids.entry((vm_id, name)).or_insert_with(|| {
            let id = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
            queues.items.insert(id, VecDeque::new());
            id
        });
        if let Some(listener) = listener {
            queues.listeners.insert(id, listener);
        }
        id
    };
    if write_u32(&mut caller, ret_id, id) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

fn resolve_queue(
    mut caller: Caller<'_, HostState>,
    vm_ptr: i32,
    vm_len: i32,
    name_ptr: i32,
    name_len: i32,
    ret_id: i32,
) -> i32 {
    let (Some(vm_id), Some(name)) = (
        read(&mut caller, vm_ptr, vm_len),
        read(&mut caller, name_ptr, name_len),
    ) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let key = (String::from_utf8_lossy(&vm_id).into_owned(), name);
    let Some(id) = QUEUES.lock().ids.get(&key).copied() else {
        return status::NOT_FOUND;
    };
    if write_u32(&mut caller, ret_id, id) {
        status::OK
    } else {
        status::INVALID_MEMORY_ACCESS
    }
}

/// `EMPTY` when there is nothing (the SDKs read it as "no item"), `NOT_FOUND` for an unknown id.
fn dequeue(mut caller: Caller<'_, HostState>, id: i32, ret_ptr: i32, ret_len: i32) -> wasmtime::Result<i32> {
    let item = match QUEUES.lock().items.get_mut(&(id as u32)) {
        None => return Ok(status::NOT_FOUND),
        Some(items) => items.pop_front(),
    };
    match item {
        Some(item) => hand_over(&mut caller, &item, ret_ptr, ret_len),
        None => Ok(status::EMPTY),
    }
}

fn enqueue(mut caller: Caller<'_, HostState>, id: i32, ptr: i32, len: i32) -> i32 {
    let Some(item) = read(&mut caller, ptr, len) else {
        return status::INVALID_MEMORY_ACCESS;
    };
    let listener = {
        let mut queues = QUEUES.lock();
        let Some(items) = queues.items.get_mut(&(id as u32)) else {
            return status::NOT_FOUND;
        };
        if items.len() >= MAX_QUEUE_ITEMS {
            items.pop_front();
        }
        items.push_back(item);
        queues.listeners.get(&(id as u32)).cloned()
    };
    if let Some(listener) = listener {
        listener(id as u32);
    }
    status::OK
}
