//! stats: metrics and a shared queue, the two ways instances report to one place.
//!
//! - Metrics (`define_metric` / `increment_metric` / `record_metric`): a counter `requests`,
//!   a gauge `last_path_bytes`, a histogram `request_headers`. The host sums them over every
//!   instance and exports them on `/metrics`, labelled with the plugin's name.
//! - A shared queue `paths`: every instance (one per worker thread) enqueues each request's path;
//!   the root context's tick (every 20 ms) drains the queue and adds what it took to the shared
//!   data key `stats.seen`. Responses carry `x-stats-seen: N`, the total drained so far.
//!   With the configuration `drain=ready` there is no tick: the queue is drained when the host
//!   says it has items (`on_queue_ready`).
//!
//! Plugin configuration: empty, or `drain=ready`.

use std::time::Duration;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(StatsRoot::default()) });
}}

const QUEUE: &str = "paths";
const SEEN: &str = "stats.seen";

#[derive(Clone, Copy, Default)]
struct Metrics {
    requests: u32,
    last_path_bytes: u32,
    request_headers: u32,
}

#[derive(Default)]
struct StatsRoot {
    metrics: Metrics,
    queue: Option<u32>,
}

impl Context for StatsRoot {}

impl RootContext for StatsRoot {
    fn on_vm_start(&mut self, _: usize) -> bool {
        let define = |kind, name| hostcalls::define_metric(kind, name).unwrap_or_default();
        self.metrics = Metrics {
            requests: define(MetricType::Counter, "requests"),
            last_path_bytes: define(MetricType::Gauge, "last_path_bytes"),
            request_headers: define(MetricType::Histogram, "request_headers"),
        };
        self.queue = self.register_shared_queue(QUEUE).into();
        true
    }

    fn on_configure(&mut self, _: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        match config.as_slice() {
            b"" => self.set_tick_period(Duration::from_millis(20)),
            b"drain=ready" => {}
            _ => return false,
        }
        true
    }

    fn on_queue_ready(&mut self, _queue: u32) {
        self.drain();
    }

    fn on_tick(&mut self) {
        self.drain();
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Stats {
            metrics: self.metrics,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

impl StatsRoot {
    /// Takes every path queued so far and adds their number to `stats.seen`.
    fn drain(&mut self) {
        let Some(queue) = self.queue else { return };
        let mut taken = 0u64;
        while let Ok(Some(_path)) = self.dequeue_shared_queue(queue) {
            taken += 1;
        }
        if taken == 0 {
            return;
        }
        // Several instances tick: compare-and-swap until the addition lands.
        loop {
            let (value, cas) = self.get_shared_data(SEEN);
            let seen = value
                .and_then(|v| String::from_utf8(v).ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let next = (seen + taken).to_string();
            if self.set_shared_data(SEEN, Some(next.as_bytes()), cas).is_ok() {
                return;
            }
        }
    }
}

struct Stats {
    metrics: Metrics,
}

impl Context for Stats {}

impl HttpContext for Stats {
    fn on_http_request_headers(&mut self, headers: usize, _: bool) -> Action {
        let path = self.get_http_request_header(":path").unwrap_or_default();
        let _ = hostcalls::increment_metric(self.metrics.requests, 1);
        let _ = hostcalls::record_metric(self.metrics.last_path_bytes, path.len() as u64);
        let _ = hostcalls::record_metric(self.metrics.request_headers, headers as u64);
        // Each instance finds the queue by name (the root context of another instance made it).
        if let Some(queue) = self.resolve_shared_queue("", QUEUE) {
            let _ = self.enqueue_shared_queue(queue, Some(path.as_bytes()));
        }
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        let seen = self
            .get_shared_data(SEEN)
            .0
            .and_then(|v| String::from_utf8(v).ok())
            .unwrap_or_else(|| "0".into());
        self.set_http_response_header("x-stats-seen", Some(&seen));
        Action::Continue
    }
}
