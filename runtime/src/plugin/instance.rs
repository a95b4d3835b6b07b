//! One plugin instance: a wasmtime `Store` with its guest exports, the root context, and the
//! HTTP contexts created in it. Every callback gets a fresh CPU deadline; any failure is
//! classified into a [`Cause`] and the caller discards the instance.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;
use wasmtime::{Instance as WasmInstance, InstancePre, Store, Trap, TypedFunc, WasmParams, WasmResults};

use super::abi::{
    headers, AbiViolation, BodyBuffer, BodyKind, CallResponse, Dispatch, HostState, PluginMeta, ProcExit,
    Resumption, Views,
};
use super::error::Cause;
use super::upstream::GrpcEvent;
use super::view::{LocalResponse, RequestView, ResponseView, Verdict};

/// The root context id; HTTP contexts are numbered from 2.
const ROOT_ID: i32 = 1;

/// Why an instance could not be started.
#[derive(Debug)]
pub(crate) enum StartError {
    Failed(Cause),
    /// `proxy_on_vm_start` or `proxy_on_configure` returned false.
    Rejected(&'static str),
}

impl From<Cause> for StartError {
    fn from(c: Cause) -> Self {
        StartError::Failed(c)
    }
}

/// What every instance of one plugin is made from (the engine keeps one per plugin).
pub(crate) struct InstanceSetup {
    pub(crate) meta: Arc<PluginMeta>,
    pub(crate) pre: InstancePre<HostState>,
    /// Linear memory per instance, in bytes.
    pub(crate) memory_limit: usize,
    /// Epoch ticks per callback.
    pub(crate) deadline_ticks: u64,
    /// Epoch ticks for start-up (module start, root context, `proxy_on_vm_start`,
    /// `proxy_on_configure`).
    pub(crate) startup_deadline_ticks: u64,
}

/// `proxy_on_http_call_response(ctx, token, headers, body_size, trailers)`.
type CallResponseArgs = (i32, i32, i32, i32, i32);

struct GuestFuncs {
    on_context_create: TypedFunc<(i32, i32), ()>,
    on_request_headers: Option<TypedFunc<(i32, i32, i32), i32>>,
    on_response_headers: Option<TypedFunc<(i32, i32, i32), i32>>,
    on_request_body: Option<TypedFunc<(i32, i32, i32), i32>>,
    on_response_body: Option<TypedFunc<(i32, i32, i32), i32>>,
    on_done: Option<TypedFunc<i32, i32>>,
    on_log: Option<TypedFunc<i32, ()>>,
    on_delete: Option<TypedFunc<i32, ()>>,
    on_tick: Option<TypedFunc<i32, ()>>,
    on_http_call_response: Option<TypedFunc<CallResponseArgs, ()>>,
    on_queue_ready: Option<TypedFunc<(i32, i32), ()>>,
    on_grpc_receive_initial_metadata: Option<TypedFunc<(i32, i32, i32), ()>>,
    on_grpc_receive: Option<TypedFunc<(i32, i32, i32), ()>>,
    on_grpc_receive_trailing_metadata: Option<TypedFunc<(i32, i32, i32), ()>>,
    on_grpc_close: Option<TypedFunc<(i32, i32, i32), ()>>,
}

/// What a stream callback came to.
pub(crate) enum Outcome {
    Done(Verdict),
    /// The plugin paused the stream; the receiver gets its views back when the plugin continues
    /// or answers it (and fails if the instance goes away first).
    Paused(oneshot::Receiver<Resumption>),
}

/// Whether a callback's action pauses the stream. `1` is the ABI's `Pause`; the
/// AssemblyScript SDK still returns Envoy's wider enum, where `2` (ContinueAndEndStream)
/// continues and `3`/`4` (StopAllIteration...) stop.
fn pauses(action: i32) -> bool {
    action == 1 || action >= 3
}

pub(crate) struct Instance {
    store: Store<HostState>,
    /// Shared so that a callback can hold its function while the store is borrowed mutably
    /// (cloning a `TypedFunc` goes through wasmtime's type registry on every call).
    f: Arc<GuestFuncs>,
    pub(crate) generation: u64,
    next_ctx: u32,
    /// HTTP contexts created and not finished: an outbound call's answer reaches only these
    /// (and the root context).
    live: rustc_hash::FxHashSet<u32>,
    ticks: u64,
    next_tick: Option<Instant>,
}

fn typed<P: WasmParams, R: WasmResults>(
    instance: &WasmInstance,
    store: &mut Store<HostState>,
    name: &str,
) -> Result<Option<TypedFunc<P, R>>, Cause> {
    let Some(func) = instance.get_func(&mut *store, name) else {
        return Ok(None);
    };
    func.typed::<P, R>(&*store)
        .map(Some)
        .map_err(|_| Cause::Abi(format!("export `{name}` has the wrong signature")))
}

/// Turns a wasmtime error from a guest call into a cause.
fn classify(e: wasmtime::Error, state: &HostState) -> Cause {
    let said = state
        .last_error_log
        .as_deref()
        .map(|m| format!(" (plugin logged: {m})"))
        .unwrap_or_default();
    if let Some(ProcExit(code)) = e.downcast_ref::<ProcExit>() {
        return Cause::Trap(format!("proc_exit({code}){said}"));
    }
    if let Some(AbiViolation(msg)) = e.downcast_ref::<AbiViolation>() {
        return Cause::Abi(msg.clone());
    }
    let trap = e.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return Cause::Deadline;
    }
    if state.limiter.exceeded {
        return Cause::OutOfMemory;
    }
    match trap {
        Some(t) => Cause::Trap(format!("{t}{said}")),
        None => Cause::Trap(format!("{e}{said}")),
    }
}

impl Instance {
    /// Instantiates, runs start-up (`_initialize` + `main`, or `_start`), creates the root
    /// context and runs `proxy_on_vm_start` and `proxy_on_configure`.
    pub(crate) fn new(plugin: &InstanceSetup, generation: u64) -> Result<Self, StartError> {
        let engine = plugin.pre.module().engine();
        let mut store = Store::new(engine, HostState::new(plugin.meta.clone(), plugin.memory_limit));
        store.limiter(|s| &mut s.limiter);
        // Pitfall: with epoch interruption on, the default deadline is "now"; set it before
        // instantiation, which runs start sections.
        store.set_epoch_deadline(plugin.startup_deadline_ticks);
        let instance = match plugin.pre.instantiate(&mut store) {
            Ok(i) => i,
            Err(e) => return Err(classify(e, store.data()).into()),
        };
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| Cause::Abi("no `memory` export".into()))?;
        let alloc = match typed::<i32, i32>(&instance, &mut store, "proxy_on_memory_allocate")? {
            Some(a) => a,
            None => typed::<i32, i32>(&instance, &mut store, "malloc")?
                .ok_or_else(|| Cause::Abi("no allocator export".into()))?,
        };
        store.data_mut().memory = Some(memory);
        store.data_mut().alloc = Some(alloc);

        let f = GuestFuncs {
            on_context_create: typed(&instance, &mut store, "proxy_on_context_create")?
                .ok_or_else(|| Cause::Abi("no `proxy_on_context_create` export".into()))?,
            on_request_headers: typed(&instance, &mut store, "proxy_on_request_headers")?,
            on_response_headers: typed(&instance, &mut store, "proxy_on_response_headers")?,
            on_request_body: typed(&instance, &mut store, "proxy_on_request_body")?,
            on_response_body: typed(&instance, &mut store, "proxy_on_response_body")?,
            on_done: typed(&instance, &mut store, "proxy_on_done")?,
            on_log: typed(&instance, &mut store, "proxy_on_log")?,
            on_delete: typed(&instance, &mut store, "proxy_on_delete")?,
            on_tick: typed(&instance, &mut store, "proxy_on_tick")?,
            on_http_call_response: typed(&instance, &mut store, "proxy_on_http_call_response")?,
            on_queue_ready: typed(&instance, &mut store, "proxy_on_queue_ready")?,
            on_grpc_receive_initial_metadata: typed(
                &instance,
                &mut store,
                "proxy_on_grpc_receive_initial_metadata",
            )?,
            on_grpc_receive: typed(&instance, &mut store, "proxy_on_grpc_receive")?,
            on_grpc_receive_trailing_metadata: typed(
                &instance,
                &mut store,
                "proxy_on_grpc_receive_trailing_metadata",
            )?,
            on_grpc_close: typed(&instance, &mut store, "proxy_on_grpc_close")?,
        };
        let initialize = typed::<(), ()>(&instance, &mut store, "_initialize")?;
        let main = typed::<(i32, i32), i32>(&instance, &mut store, "main")?;
        let start = typed::<(), ()>(&instance, &mut store, "_start")?;
        let vm_start = typed::<(i32, i32), i32>(&instance, &mut store, "proxy_on_vm_start")?;
        let configure = typed::<(i32, i32), i32>(&instance, &mut store, "proxy_on_configure")?;

        let mut this = Instance {
            store,
            f: Arc::new(f),
            generation,
            next_ctx: 2,
            live: rustc_hash::FxHashSet::default(),
            ticks: plugin.startup_deadline_ticks,
            next_tick: None,
        };
        if let Some(init) = initialize {
            this.call(&init, 0, ())?;
            if let Some(main) = main {
                this.call(&main, 0, (0, 0))?;
            }
        } else if let Some(start) = start {
            match this.call(&start, 0, ()) {
                // A WASI command that returns from main calls proc_exit(0).
                Err(Cause::Trap(msg)) if msg.starts_with("proc_exit(0)") => {}
                other => other?,
            }
        }
        let funcs = Arc::clone(&this.f);
        this.call(&funcs.on_context_create, ROOT_ID as u32, (ROOT_ID, 0))?;
        if let Some(vm_start) = vm_start {
            let len = plugin.meta.vm_config.len() as i32;
            if this.call(&vm_start, ROOT_ID as u32, (ROOT_ID, len))? == 0 {
                return Err(StartError::Rejected("proxy_on_vm_start"));
            }
        }
        if let Some(configure) = configure {
            let len = plugin.meta.config.len() as i32;
            if this.call(&configure, ROOT_ID as u32, (ROOT_ID, len))? == 0 {
                return Err(StartError::Rejected("proxy_on_configure"));
            }
        }
        this.ticks = plugin.deadline_ticks;
        this.schedule_tick();
        Ok(this)
    }

    /// Calls a guest export with a fresh deadline and `ctx` as the effective context.
    fn call<P: WasmParams, R: WasmResults>(
        &mut self,
        f: &TypedFunc<P, R>,
        ctx: u32,
        args: P,
    ) -> Result<R, Cause> {
        self.store.set_epoch_deadline(self.ticks);
        let state = self.store.data_mut();
        state.effective_context = ctx;
        state.limiter.exceeded = false;
        state.last_error_log = None;
        let result = f
            .call(&mut self.store, args)
            .map_err(|e| classify(e, self.store.data()));
        let state = self.store.data_mut();
        state.stdio.end_callback(&state.meta.name);
        result
    }

    /// Creates an HTTP context (`proxy_on_context_create(ctx, root)`).
    pub(crate) fn create_context(&mut self) -> Result<u32, Cause> {
        let ctx = self.next_ctx;
        self.next_ctx = self.next_ctx.checked_add(1).unwrap_or(2);
        let funcs = Arc::clone(&self.f);
        self.call(&funcs.on_context_create, ctx, (ctx as i32, ROOT_ID))?;
        self.live.insert(ctx);
        Ok(ctx)
    }

    /// Moves the views into the store as `ctx`'s, runs `f`, moves them back (also on failure),
    /// and returns what `f` returned plus the local response, if the plugin sent one for `ctx`.
    fn with_views<T>(
        &mut self,
        ctx: u32,
        req: Option<&mut RequestView>,
        resp: Option<&mut ResponseView>,
        f: impl FnOnce(&mut Self) -> Result<T, Cause>,
    ) -> (Result<T, Cause>, Option<LocalResponse>) {
        let (mut req, mut resp) = (req, resp);
        let lent_req = req
            .as_deref_mut()
            .map(|r| std::mem::replace(r, RequestView::placeholder()));
        let lent_resp = resp
            .as_deref_mut()
            .map(|r| std::mem::replace(r, ResponseView::placeholder()));
        self.store.data_mut().lend_views(ctx, lent_req, lent_resp);
        let result = f(self);
        let state = self.store.data_mut();
        let views = state.take_views(ctx);
        if let (Some(slot), Some(v)) = (req, views.req) {
            *slot = v;
        }
        if let (Some(slot), Some(v)) = (resp, views.resp) {
            *slot = v;
        }
        let local = state
            .local_response
            .take_if(|(answered, _)| *answered == ctx)
            .map(|(_, local)| local);
        (result, local)
    }

    /// Turns a stream callback's action into its outcome: a local response ends it, `Continue`
    /// (or a `proxy_continue_stream` during the callback) goes on, a pause parks `views` until
    /// the plugin continues or answers. Then settles what the callback did to other streams.
    fn outcome(
        &mut self,
        ctx: u32,
        action: i32,
        local: Option<LocalResponse>,
        views: impl FnOnce() -> Views,
    ) -> Outcome {
        let state = self.store.data_mut();
        let continued = state.continued.contains(&ctx);
        state.continued.retain(|c| *c != ctx);
        let outcome = match local {
            Some(local) => Outcome::Done(Verdict::LocalResponse(local)),
            None if !pauses(action) || continued => Outcome::Done(Verdict::Continue),
            None => {
                let (resume, resumed) = oneshot::channel();
                state.park(ctx, views());
                state.paused.insert(ctx, resume);
                Outcome::Paused(resumed)
            }
        };
        state.settle();
        outcome
    }

    pub(crate) fn request_headers(&mut self, ctx: u32, req: &mut RequestView) -> Result<Outcome, Cause> {
        let funcs = Arc::clone(&self.f);
        let Some(f) = funcs.on_request_headers.as_ref() else {
            return Ok(Outcome::Done(Verdict::Continue));
        };
        let n = headers::request_count(req);
        let eos = i32::from(req.end_of_stream);
        let (action, local) = self.with_views(ctx, Some(req), None, |this| {
            this.call(f, ctx, (ctx as i32, n, eos))
        });
        let action = action?;
        Ok(self.outcome(ctx, action, local, || Views {
            req: Some(req.clone()),
            resp: None,
        }))
    }

    /// `proxy_on_response_headers`. A pause parks both views until the plugin continues the
    /// response (`proxy_continue_stream`) or answers it.
    pub(crate) fn response_headers(
        &mut self,
        ctx: u32,
        mut req: Option<&mut RequestView>,
        resp: &mut ResponseView,
    ) -> Result<Outcome, Cause> {
        let funcs = Arc::clone(&self.f);
        let Some(f) = funcs.on_response_headers.as_ref() else {
            return Ok(Outcome::Done(Verdict::Continue));
        };
        let n = headers::response_count(resp);
        let eos = i32::from(resp.end_of_stream);
        let (action, local) = self.with_views(ctx, req.as_deref_mut(), Some(resp), |this| {
            this.call(f, ctx, (ctx as i32, n, eos))
        });
        let action = action?;
        Ok(self.outcome(ctx, action, local, || Views {
            req: req.map(|r| r.clone()),
            resp: Some(resp.clone()),
        }))
    }

    /// `proxy_on_request_body` / `proxy_on_response_body` over the body buffered so far
    /// (`body`, which the plugin may rewrite in place). `Continue`, or `Paused`: before the end
    /// of the body the plugin wants more before it decides (the caller buffers on); at the end
    /// it waits (an outbound call, a tick) and the views are parked as for a headers pause.
    /// Or the plugin's local response.
    pub(crate) fn body(
        &mut self,
        ctx: u32,
        kind: BodyKind,
        (mut req, mut resp): (Option<&mut RequestView>, Option<&mut ResponseView>),
        body: &mut Vec<u8>,
        end_of_stream: bool,
    ) -> Result<Outcome, Cause> {
        let funcs = Arc::clone(&self.f);
        let f = match kind {
            BodyKind::Request => funcs.on_request_body.as_ref(),
            BodyKind::Response => funcs.on_response_body.as_ref(),
        };
        let Some(f) = f else {
            return Ok(Outcome::Done(Verdict::Continue));
        };
        let size = i32::try_from(body.len()).unwrap_or(i32::MAX);
        self.store.data_mut().body = Some(BodyBuffer {
            kind,
            bytes: std::mem::take(body),
        });
        let (action, local) = self.with_views(ctx, req.as_deref_mut(), resp.as_deref_mut(), |this| {
            this.call(f, ctx, (ctx as i32, size, i32::from(end_of_stream)))
        });
        let state = self.store.data_mut();
        if let Some(buffer) = state.body.take() {
            *body = buffer.bytes;
        }
        let action = action?;
        if end_of_stream {
            return Ok(self.outcome(ctx, action, local, || Views {
                req: req.map(|r| r.clone()),
                resp: resp.map(|r| r.clone()),
            }));
        }
        let state = self.store.data_mut();
        state.continued.retain(|c| *c != ctx);
        state.settle();
        Ok(Outcome::Done(match local {
            Some(local) => Verdict::LocalResponse(local),
            None if pauses(action) => Verdict::Paused,
            None => Verdict::Continue,
        }))
    }

    /// `proxy_on_done`, then `proxy_on_log` and `proxy_on_delete`. A plugin that returns
    /// false from `on_done` (it wants to finish later with `proxy_done`) is not waited for:
    /// edgecache has no asynchronous host calls that could complete later.
    pub(crate) fn finish(
        &mut self,
        ctx: u32,
        req: Option<&mut RequestView>,
        resp: Option<&mut ResponseView>,
    ) -> Result<(), Cause> {
        let (result, _local) = self.with_views(ctx, req, resp, |this| {
            let c = ctx as i32;
            let funcs = Arc::clone(&this.f);
            if let Some(f) = &funcs.on_done {
                this.call(f, ctx, c)?;
            }
            if let Some(f) = &funcs.on_log {
                this.call(f, ctx, c)?;
            }
            if let Some(f) = &funcs.on_delete {
                this.call(f, ctx, c)?;
            }
            Ok(())
        });
        self.live.remove(&ctx);
        self.store.data_mut().forget(ctx);
        result
    }

    /// Delivers an outbound call's answer (`None`: the call failed or timed out) to the context
    /// that made it with `proxy_on_http_call_response`, unless that context is finished.
    pub(crate) fn http_call_response(
        &mut self,
        ctx: u32,
        token: u32,
        answer: Option<http::Response<Bytes>>,
    ) -> Result<(), Cause> {
        let funcs = Arc::clone(&self.f);
        let Some(f) = funcs.on_http_call_response.as_ref() else {
            return Ok(());
        };
        if ctx != ROOT_ID as u32 && !self.live.contains(&ctx) {
            return Ok(());
        }
        let (head, body) = match answer {
            Some(response) => {
                let (parts, body) = response.into_parts();
                let mut head = ResponseView::new(parts.status, parts.headers);
                head.version = parts.version;
                head.end_of_stream = true;
                (Some(head), body)
            }
            None => (None, Bytes::new()),
        };
        let n_headers = head.as_ref().map_or(0, headers::response_count);
        let body_size = i32::try_from(body.len()).unwrap_or(i32::MAX);
        let state = self.store.data_mut();
        state.call_response = Some(CallResponse { head, body });
        // The SDKs make the context effective themselves; its views are there either way.
        state.switch_views(ctx);
        // The first argument is the root context, as Envoy passes it (its calls belong to the
        // root context): the Go and AssemblyScript SDKs look the call up there by token and
        // panic on any other id; the Rust SDK ignores it.
        let result = self.call(f, ctx, (ROOT_ID, token as i32, n_headers, body_size, 0));
        let state = self.store.data_mut();
        state.call_response = None;
        state.settle();
        result
    }

    /// Delivers what a gRPC exchange reported to the plugin: a stream's metadata, messages and
    /// close as they come (`proxy_on_grpc_receive_initial_metadata`, `proxy_on_grpc_receive`,
    /// `proxy_on_grpc_receive_trailing_metadata`, `proxy_on_grpc_close`); a call's answer at its
    /// end, as Envoy does (`proxy_on_grpc_receive` on success, else `proxy_on_grpc_close`).
    /// The first argument is the root context, as for HTTP calls. Returns whether more is
    /// wanted: false once closed, cancelled, or the context that opened it is finished.
    pub(crate) fn grpc_event(&mut self, token: u32, event: GrpcEvent) -> Result<bool, Cause> {
        let funcs = Arc::clone(&self.f);
        let state = self.store.data_mut();
        let Some(open) = state.grpc.get_mut(&token) else {
            return Ok(false);
        };
        let ctx = open.ctx;
        if ctx != ROOT_ID as u32 && !self.live.contains(&ctx) {
            state.grpc.remove(&token);
            return Ok(false);
        }
        let metadata = |map: i32, headers: http::HeaderMap| {
            let view = ResponseView::new(http::StatusCode::OK, headers);
            (headers::response_count(&view), Some((map, view)))
        };
        let (f, arg, metadata, message, more) = match event {
            GrpcEvent::InitialMetadata(_) | GrpcEvent::TrailingMetadata(_) if open.unary => return Ok(true),
            GrpcEvent::Message(message) if open.unary => {
                open.reply = Some(message);
                return Ok(true);
            }
            GrpcEvent::InitialMetadata(headers) => {
                let (n, metadata) = metadata(4, headers);
                (&funcs.on_grpc_receive_initial_metadata, n, metadata, None, true)
            }
            GrpcEvent::TrailingMetadata(headers) => {
                let (n, metadata) = metadata(5, headers);
                (&funcs.on_grpc_receive_trailing_metadata, n, metadata, None, true)
            }
            GrpcEvent::Message(message) => {
                let size = i32::try_from(message.len()).unwrap_or(i32::MAX);
                (&funcs.on_grpc_receive, size, None, Some(message), true)
            }
            GrpcEvent::Close { status, message } => {
                let open = state.grpc.remove(&token).expect("looked up above");
                state.grpc_status = (status, message);
                match open.reply {
                    Some(reply) if status == 0 => {
                        let size = i32::try_from(reply.len()).unwrap_or(i32::MAX);
                        (&funcs.on_grpc_receive, size, None, Some(reply), false)
                    }
                    _ => (&funcs.on_grpc_close, status as i32, None, None, false),
                }
            }
        };
        let Some(f) = f.as_ref() else {
            return Ok(more);
        };
        state.grpc_metadata = metadata;
        state.grpc_message = message;
        state.switch_views(ctx);
        let result = self.call(f, ctx, (ROOT_ID, token as i32, arg));
        let state = self.store.data_mut();
        state.grpc_metadata = None;
        state.grpc_message = None;
        state.settle();
        result.map(|()| more)
    }

    /// `proxy_on_queue_ready(root, queue)`: an item was enqueued on a queue this plugin
    /// registered.
    pub(crate) fn queue_ready(&mut self, queue: u32) -> Result<(), Cause> {
        let funcs = Arc::clone(&self.f);
        let Some(f) = funcs.on_queue_ready.as_ref() else {
            return Ok(());
        };
        let result = self.call(f, ROOT_ID as u32, (ROOT_ID, queue as i32));
        self.store.data_mut().settle();
        result
    }

    /// The outbound calls the last callbacks started, for the caller to run.
    pub(crate) fn take_dispatched(&mut self) -> Vec<Dispatch> {
        std::mem::take(&mut self.store.data_mut().dispatched)
    }

    fn schedule_tick(&mut self) {
        self.next_tick = self.store.data().tick_period.map(|p| Instant::now() + p);
    }

    pub(crate) fn tick_period(&self) -> Option<Duration> {
        self.store.data().tick_period
    }

    /// Runs `proxy_on_tick` on the root context if its period has elapsed.
    pub(crate) fn tick_if_due(&mut self, now: Instant) -> Result<bool, Cause> {
        let funcs = Arc::clone(&self.f);
        let (Some(due), Some(f)) = (self.next_tick, funcs.on_tick.as_ref()) else {
            self.schedule_tick();
            return Ok(false);
        };
        if now < due {
            return Ok(false);
        }
        let result = self.call(f, ROOT_ID as u32, ROOT_ID);
        self.store.data_mut().settle();
        result?;
        self.schedule_tick();
        Ok(true)
    }

    /// Guest memory in bytes (for tests and stats).
    pub(crate) fn memory_size(&self) -> usize {
        self.store.data().memory.map_or(0, |m| m.data_size(&self.store))
    }
}
