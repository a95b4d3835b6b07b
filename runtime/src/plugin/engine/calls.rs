//! Outbound calls of a plugin's instances (`proxy_http_call`, `proxy_grpc_*`): each runs as a
//! tokio task, and its answer is delivered to the instance that made it ([`Binding`]), if that
//! instance still exists. Used by streams (calls their callbacks start) and by the engine
//! (calls started at load and from `proxy_on_queue_ready`).

use std::sync::Arc;

use parking_lot::Mutex;

use super::PluginInner;
use crate::plugin::abi::{Dispatch, DispatchKind};
use crate::plugin::instance::Instance;

/// Where a stream's instance lives.
#[derive(Clone)]
pub(crate) enum Binding {
    /// One of the plugin's shared instances.
    Shared { slot: usize },
    /// The stream's own instance (per-request isolation), shared with the outbound calls it
    /// started so that their answers can reach it.
    Owned(Arc<Mutex<Option<Instance>>>),
}

impl Binding {
    pub(crate) fn cell<'a>(&'a self, plugin: &'a PluginInner) -> &'a Mutex<Option<Instance>> {
        match self {
            Binding::Shared { slot } => &plugin.slots[*slot],
            Binding::Owned(cell) => cell,
        }
    }
}

/// Runs each outbound call as a task (an HTTP call bounded by its own timeout, or by the pause
/// timeout when the plugin gave none) and delivers its answer (a gRPC exchange: each event, in
/// order) to the instance that started it, if that instance still exists.
pub(crate) fn start_calls(
    plugin: &Arc<PluginInner>,
    binding: &Binding,
    generation: u64,
    calls: Vec<Dispatch>,
) {
    if calls.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(target: "edgecache::plugin", plugin = &*plugin.setup.meta.name, "outbound calls dropped: no async runtime to run them on");
        return;
    };
    for Dispatch { ctx, token, kind } in calls {
        let (plugin, binding) = (plugin.clone(), binding.clone());
        match kind {
            DispatchKind::Http { call, timeout } => {
                let timeout = if timeout.is_zero() {
                    plugin.pause_timeout
                } else {
                    timeout
                };
                runtime.spawn(async move {
                    let answer = match tokio::time::timeout(timeout, call).await {
                        Ok(Ok(response)) => Some(response),
                        Ok(Err(why)) => {
                            tracing::debug!(target: "edgecache::plugin", plugin = &*plugin.setup.meta.name, token, "outbound call failed: {why}");
                            None
                        }
                        Err(_) => {
                            tracing::debug!(target: "edgecache::plugin", plugin = &*plugin.setup.meta.name, token, "outbound call timed out after {timeout:?}");
                            None
                        }
                    };
                    deliver(&plugin, &binding, generation, (ctx, token), answer);
                });
            }
            DispatchKind::Grpc { task, mut events } => {
                runtime.spawn(task);
                // Dropping `events` (the plugin is done with the exchange) stops the task.
                runtime.spawn(async move {
                    while let Some(event) = events.recv().await {
                        if !deliver_grpc(&plugin, &binding, generation, token, event) {
                            break;
                        }
                    }
                });
            }
        }
    }
}

/// Delivers one gRPC event; false when nothing more is wanted (closed, cancelled, the context
/// or the instance gone).
fn deliver_grpc(
    plugin: &Arc<PluginInner>,
    binding: &Binding,
    generation: u64,
    token: u32,
    event: crate::plugin::upstream::GrpcEvent,
) -> bool {
    let mut guard = binding.cell(plugin).lock();
    let Some(inst) = guard.as_mut().filter(|inst| inst.generation == generation) else {
        return false;
    };
    match inst.grpc_event(token, event) {
        Ok(more) => {
            let calls = inst.take_dispatched();
            drop(guard);
            start_calls(plugin, binding, generation, calls);
            more
        }
        Err(cause) => {
            *guard = None;
            drop(guard);
            let _ = plugin.fail(cause);
            false
        }
    }
}

fn deliver(
    plugin: &Arc<PluginInner>,
    binding: &Binding,
    generation: u64,
    (ctx, token): (u32, u32),
    answer: Option<http::Response<bytes::Bytes>>,
) {
    let mut guard = binding.cell(plugin).lock();
    let Some(inst) = guard.as_mut().filter(|inst| inst.generation == generation) else {
        return;
    };
    match inst.http_call_response(ctx, token, answer) {
        Ok(()) => {
            let more = inst.take_dispatched();
            drop(guard);
            start_calls(plugin, binding, generation, more);
        }
        Err(cause) => {
            // Dropping the instance fails the streams paused in it.
            *guard = None;
            drop(guard);
            let _ = plugin.fail(cause);
        }
    }
}
