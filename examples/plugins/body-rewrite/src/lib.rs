//! body-rewrite: replaces a word in response bodies, the way the Rust SDK's `http_body`
//! example does: each `on_http_response_body` returns `Action::Pause` until the whole body is
//! there (`end_of_stream`), then rewrites it with `set_http_response_body`. The host sets the
//! response's `Content-Length` to the new length.
//!
//! Plugin configuration: `FROM=TO` (default `origin=edge`). Only `text/*` and JSON responses
//! are rewritten; others pass untouched. Rewritten responses get `x-body-rewritten: N` (the
//! number of replacements).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(RewriteRoot { from: "origin".into(), to: "edge".into() })
    });
}}

struct RewriteRoot {
    from: String,
    to: String,
}

impl Context for RewriteRoot {}

impl RootContext for RewriteRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let raw = self
            .get_plugin_configuration()
            .map(|c| String::from_utf8_lossy(&c).trim().to_string())
            .unwrap_or_default();
        if raw.is_empty() {
            return true;
        }
        match raw.split_once('=') {
            Some((from, to)) if !from.is_empty() => {
                (self.from, self.to) = (from.to_string(), to.to_string());
                true
            }
            _ => {
                log::error!("body-rewrite: the configuration must be FROM=TO, got `{raw}`");
                false
            }
        }
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Rewrite {
            from: self.from.clone(),
            to: self.to.clone(),
            textual: false,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Rewrite {
    from: String,
    to: String,
    textual: bool,
}

impl Context for Rewrite {}

impl HttpContext for Rewrite {
    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        let content_type = self.get_http_response_header("content-type").unwrap_or_default();
        self.textual = content_type.starts_with("text/") || content_type.contains("json");
        Action::Continue
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if !self.textual {
            return Action::Continue;
        }
        if !end_of_stream {
            // Wait for the whole body: a word may straddle two chunks.
            return Action::Pause;
        }
        let Some(body) = self.get_http_response_body(0, body_size) else {
            return Action::Continue;
        };
        let text = String::from_utf8_lossy(&body);
        let count = text.matches(self.from.as_str()).count();
        if count > 0 {
            let rewritten = text.replace(self.from.as_str(), &self.to);
            self.set_http_response_body(0, body_size, rewritten.as_bytes());
            self.set_http_response_header("x-body-rewritten", Some(&count.to_string()));
        }
        Action::Continue
    }
}
