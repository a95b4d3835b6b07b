//! One request's HTTP context in one plugin ([`PluginStream`]): its phases, its pause, and the
//! outbound calls its callbacks start.
//!
//! A paused stream holds no lock and no thread: its views wait in the instance, and the
//! request's task awaits a oneshot that the instance fires when the plugin continues or
//! answers the stream (from `proxy_on_http_call_response`, `proxy_on_tick`, ...). Outbound
//! calls run as tokio tasks (`engine::calls`); each locks the instance only to deliver its answer.

use tokio::sync::oneshot;

use super::abi::{once, BodyKind, Resumption};
use super::engine::calls::{start_calls, Binding};
use super::error::{Cause, PluginError};
use super::instance::{Instance, Outcome};
use super::view::{RequestView, ResponseView, Verdict};
use super::Plugin;

/// One request's HTTP context in one plugin. Call the phases in order; each is optional.
/// Dropping an unfinished stream finishes it (without views).
pub struct PluginStream {
    plugin: Plugin,
    binding: Binding,
    /// (instance generation, context id) once the context exists.
    ctx: Option<(u64, u32)>,
    /// Set while a phase is paused (headers, or a body at its end).
    paused: Option<oneshot::Receiver<Resumption>>,
    finished: bool,
}

impl PluginStream {
    pub(crate) fn new(plugin: Plugin, binding: Binding) -> Self {
        PluginStream {
            plugin,
            binding,
            ctx: None,
            paused: None,
            finished: false,
        }
    }

    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// `proxy_on_request_headers`. The plugin may edit `req` (headers, `:path`, `:method`,
    /// `:authority`, `:scheme`), answer with a local response, or pause the request
    /// ([`Verdict::Paused`]: then await [`resumed`](Self::resumed)).
    pub fn on_request_headers(&mut self, req: &mut RequestView) -> Result<Verdict, PluginError> {
        let outcome = self.with_instance(true, |inst, ctx| inst.request_headers(ctx, req))?;
        Ok(self.hold(outcome))
    }

    /// `proxy_on_response_headers`. The plugin may edit `resp` (headers, `:status`), replace
    /// it with a local response, or pause it ([`Verdict::Paused`]: then await
    /// [`resumed`](Self::resumed)). `req` (if given) is readable by the plugin.
    pub fn on_response_headers(
        &mut self,
        req: Option<&mut RequestView>,
        resp: &mut ResponseView,
    ) -> Result<Verdict, PluginError> {
        let outcome = self.with_instance(true, |inst, ctx| inst.response_headers(ctx, req, resp))?;
        Ok(self.hold(outcome))
    }

    /// Keeps a paused phase's receiver for [`resumed`](Self::resumed).
    fn hold(&mut self, outcome: Option<Outcome>) -> Verdict {
        match outcome {
            None => Verdict::Continue,
            Some(Outcome::Done(verdict)) => verdict,
            Some(Outcome::Paused(resumed)) => {
                self.paused = Some(resumed);
                Verdict::Paused
            }
        }
    }

    /// Waits until the plugin resumes a paused stream (`proxy_continue_stream`) or answers it
    /// (`proxy_send_local_response`), at most the host's pause timeout. `req` and `resp` (the
    /// latter for a paused response) become the views as the plugin left them. Fails with
    /// [`Cause::PauseTimeout`] when the time is up or the instance holding the stream was
    /// replaced. Without a pause: `Continue` at once.
    pub async fn resumed(
        &mut self,
        req: &mut RequestView,
        resp: Option<&mut ResponseView>,
    ) -> Result<Verdict, PluginError> {
        let Some(resumed) = self.paused.take() else {
            return Ok(Verdict::Continue);
        };
        let plugin = &self.plugin.inner;
        match tokio::time::timeout(plugin.pause_timeout, resumed).await {
            Ok(Ok(Resumption { views, local })) => {
                if let Some(view) = views.req {
                    *req = view;
                }
                if let (Some(slot), Some(view)) = (resp, views.resp) {
                    *slot = view;
                }
                Ok(local.map_or(Verdict::Continue, Verdict::LocalResponse))
            }
            // The instance went away (its failure is counted and logged where it failed).
            Ok(Err(_)) => Err(PluginError {
                plugin: plugin.setup.meta.name.clone(),
                cause: Cause::PauseTimeout,
            }),
            Err(_) => Err(plugin.fail(Cause::PauseTimeout)),
        }
    }

    /// Where the host cannot wait (`vcl_backend_response`, whose sub runs while the fetch
    /// holds the object's fill): a pause is not held and the response goes on as the plugin
    /// left it when it paused (logged once per plugin).
    pub fn release_pause(&mut self) {
        if self.paused.take().is_some() {
            self.plugin.inner.setup.meta.log_once(
                once::PAUSE,
                "a callback paused where edgecache cannot wait (vcl_backend_response); it continues",
            );
        }
    }

    /// `proxy_on_request_body` over the request body buffered so far (`body`, rewritten in
    /// place by the plugin). [`Verdict::Paused`]: before the end of the body, the plugin wants
    /// more before it decides; at the end, it waits: await [`resumed`](Self::resumed).
    pub fn on_request_body(
        &mut self,
        req: &mut RequestView,
        body: &mut Vec<u8>,
        end_of_stream: bool,
    ) -> Result<Verdict, PluginError> {
        let outcome = self.with_instance(true, |inst, ctx| {
            inst.body(ctx, BodyKind::Request, (Some(req), None), body, end_of_stream)
        })?;
        Ok(self.hold(outcome))
    }

    /// `proxy_on_response_body` over the response body buffered so far (`body`, rewritten
    /// in place by the plugin); `resp`'s headers may still change (the caller sends them after
    /// the body is decided). [`Verdict::Paused`] as for the request body.
    pub fn on_response_body(
        &mut self,
        req: Option<&mut RequestView>,
        resp: &mut ResponseView,
        body: &mut Vec<u8>,
        end_of_stream: bool,
    ) -> Result<Verdict, PluginError> {
        let outcome = self.with_instance(true, |inst, ctx| {
            inst.body(ctx, BodyKind::Response, (req, Some(resp)), body, end_of_stream)
        })?;
        Ok(self.hold(outcome))
    }

    /// `proxy_on_done`, `proxy_on_log`, `proxy_on_delete`: the plugin forgets the request.
    /// The views (if given) are readable in `on_log`. Errors are counted and logged; the
    /// request is over, so there is nothing else to do with them. Idempotent.
    pub fn finish(&mut self, req: Option<&mut RequestView>, resp: Option<&mut ResponseView>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.paused = None;
        if self.ctx.is_some() {
            let _ = self.with_instance(false, |inst, ctx| inst.finish(ctx, req, resp));
        }
        if let Binding::Owned(cell) = &self.binding {
            // The request's own instance ends with it (calls still in flight find it gone).
            cell.lock().take();
        }
    }

    /// Runs `f` on this stream's instance with its context, then starts the outbound calls
    /// the callback made. With `create`, the instance and the context are created if needed
    /// (also when the instance was replaced since the context was made: the plugin then sees
    /// a new context); without, nothing runs if the context is gone (`Ok(None)`).
    fn with_instance<T>(
        &mut self,
        create: bool,
        f: impl FnOnce(&mut Instance, u32) -> Result<T, Cause>,
    ) -> Result<Option<T>, PluginError> {
        let plugin = &self.plugin.inner;
        let mut guard = self.binding.cell(plugin).lock();
        let instance = &mut *guard;
        if instance.is_none() {
            if !create {
                return Ok(None);
            }
            *instance = Some(plugin.new_instance().map_err(|e| plugin.start_error(e))?);
        }
        let inst = instance.as_mut().expect("just set");
        let ctx = match self.ctx {
            Some((generation, ctx)) if generation == inst.generation => ctx,
            _ if !create => return Ok(None),
            _ => match inst.create_context() {
                Ok(ctx) => {
                    self.ctx = Some((inst.generation, ctx));
                    ctx
                }
                Err(cause) => {
                    *instance = None;
                    return Err(plugin.fail(cause));
                }
            },
        };
        match f(inst, ctx) {
            Ok(v) => {
                let (generation, calls) = (inst.generation, inst.take_dispatched());
                drop(guard);
                start_calls(plugin, &self.binding, generation, calls);
                Ok(Some(v))
            }
            Err(cause) => {
                *instance = None;
                self.ctx = None;
                Err(plugin.fail(cause))
            }
        }
    }
}

impl Drop for PluginStream {
    fn drop(&mut self) {
        self.finish(None, None);
    }
}

impl std::fmt::Debug for PluginStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginStream")
            .field("plugin", &self.plugin.name())
            .field("context", &self.ctx.map(|(_, c)| c))
            .field("paused", &self.paused.is_some())
            .finish_non_exhaustive()
    }
}
