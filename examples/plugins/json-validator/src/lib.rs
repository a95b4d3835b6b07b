//! json-validator: refuses request bodies that are not valid JSON, before they reach the origin.
//! `on_http_request_body` returns `Action::Pause` until the whole body is buffered, parses it,
//! and answers 400 (with the parser's message) when it is not JSON. Requests with a
//! `content-type` other than JSON, and requests without a body, pass untouched.
//!
//! Plugin configuration: none.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(ValidatorRoot) });
}}

struct ValidatorRoot;

impl Context for ValidatorRoot {}

impl RootContext for ValidatorRoot {
    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Validator { json: false }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Validator {
    json: bool,
}

impl Context for Validator {}

impl HttpContext for Validator {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let content_type = self.get_http_request_header("content-type").unwrap_or_default();
        self.json = content_type.contains("json");
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if !self.json {
            return Action::Continue;
        }
        if !end_of_stream {
            return Action::Pause;
        }
        let body = self.get_http_request_body(0, body_size).unwrap_or_default();
        if let Err(error) = serde_json::from_slice::<serde_json::Value>(&body) {
            let message = format!("invalid JSON body: {error}\n");
            self.send_http_response(
                400,
                vec![("content-type", "text/plain"), ("x-json-validator", "refused")],
                Some(message.as_bytes()),
            );
            return Action::Pause;
        }
        self.set_http_request_header("x-json-validated", Some("1"));
        Action::Continue
    }
}
