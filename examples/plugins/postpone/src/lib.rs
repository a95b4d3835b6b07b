//! postpone: holds requests back and lets them go from a timer, the pattern of rate limiters
//! that queue rather than refuse. Every request is paused in `on_http_request_headers`; the root
//! context's `on_tick` (period from the configuration) resumes the requests paused since the
//! last tick, stamping each with `x-postponed-tick: N` (the tick's number) so the origin sees it
//! went through a tick.
//!
//! A held request is stamped `x-postponed: held` before it pauses (a write the policy's sub,
//! run again from the request as it was, does not see before the plugin's call).
//! Requests carrying `x-no-postpone` pass straight through.
//!
//! Plugin configuration: `tick_ms=N` (default 100). VM configuration (the policy's
//! `.vm_config`): a label copied into `x-postpone-vm` on resumed requests (default none).

use std::cell::RefCell;
use std::time::Duration;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MapType};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(PostponeRoot { ticks: 0, vm_label: None })
    });
}}

thread_local! {
    /// Contexts paused since the last tick (one instance runs on one thread at a time).
    static WAITING: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

struct PostponeRoot {
    ticks: u64,
    vm_label: Option<String>,
}

impl Context for PostponeRoot {}

impl RootContext for PostponeRoot {
    fn on_vm_start(&mut self, _: usize) -> bool {
        self.vm_label = self
            .get_vm_configuration()
            .map(|c| String::from_utf8_lossy(&c).trim().to_string())
            .filter(|l| !l.is_empty());
        true
    }

    fn on_configure(&mut self, _: usize) -> bool {
        let raw = self
            .get_plugin_configuration()
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .unwrap_or_default();
        let mut tick = Duration::from_millis(100);
        for item in raw.split_whitespace() {
            match item.split_once('=') {
                Some(("tick_ms", v)) => match v.parse::<u64>() {
                    Ok(ms) if ms > 0 => tick = Duration::from_millis(ms),
                    _ => {
                        log::error!("postpone: bad tick_ms `{v}`");
                        return false;
                    }
                },
                _ => {
                    log::error!("postpone: unknown setting `{item}`");
                    return false;
                }
            }
        }
        self.set_tick_period(tick);
        true
    }

    fn on_tick(&mut self) {
        self.ticks += 1;
        let tick = self.ticks.to_string();
        for context_id in WAITING.with(|w| std::mem::take(&mut *w.borrow_mut())) {
            // A root context acts on a request by making its context the effective one.
            if hostcalls::set_effective_context(context_id).is_err() {
                continue;
            }
            let _ = hostcalls::set_map_value(MapType::HttpRequestHeaders, "x-postponed-tick", Some(&tick));
            if let Some(label) = &self.vm_label {
                let _ = hostcalls::set_map_value(MapType::HttpRequestHeaders, "x-postpone-vm", Some(label));
            }
            let _ = hostcalls::resume_http_request();
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Postponed { context_id }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Postponed {
    context_id: u32,
}

impl Context for Postponed {}

impl HttpContext for Postponed {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        if self.get_http_request_header("x-no-postpone").is_some() {
            return Action::Continue;
        }
        self.set_http_request_header("x-postponed", Some("held"));
        WAITING.with(|w| w.borrow_mut().push(self.context_id));
        Action::Pause
    }

    fn on_log(&mut self) {
        // A request that ended while waiting (client gone, pause timeout) is not resumed.
        WAITING.with(|w| w.borrow_mut().retain(|id| *id != self.context_id));
    }
}
