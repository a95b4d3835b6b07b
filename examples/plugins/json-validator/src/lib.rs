//! json-validator: refuses request bodies that are not valid JSON, before they reach the origin.
//! `on_http_request_body` returns `Action::Pause` until the whole body is buffered, parses it,
//! and answers 400 (with the parser's message) when it is not JSON. Requests with a
//! `content-type` other than JSON, and requests without a body, pass untouched.
//!
//! Plugin configuration: empty, or `check=CLUSTER`: a body that parses is then also sent
//! (`POST /validate`) to the upstream the policy's `.upstreams` names CLUSTER, the body phase
//! pausing at its end until it answers: 200 lets the request go on (with its
//! `x-validated-by`), anything else (or no answer) is refused with 422.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use std::time::Duration;

use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(ValidatorRoot::default()) });
}}

#[derive(Default)]
struct ValidatorRoot {
    /// The upstream that checks parsed bodies (`check=CLUSTER`), if any.
    check: Option<String>,
}

impl Context for ValidatorRoot {}

impl RootContext for ValidatorRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let raw = self.get_plugin_configuration().unwrap_or_default();
        let raw = String::from_utf8_lossy(&raw);
        match raw.trim() {
            "" => true,
            item => match item.strip_prefix("check=") {
                Some(cluster) => {
                    self.check = Some(cluster.to_string());
                    true
                }
                None => {
                    log::error!("json-validator: unknown setting `{item}`");
                    false
                }
            },
        }
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Validator {
            json: false,
            check: self.check.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Validator {
    json: bool,
    check: Option<String>,
}

impl Context for Validator {
    fn on_http_call_response(&mut self, _: u32, num_headers: usize, _: usize, _: usize) {
        let status = (num_headers > 0)
            .then(|| self.get_http_call_response_header(":status"))
            .flatten();
        if status.as_deref() != Some("200") {
            self.send_http_response(
                422,
                vec![("content-type", "text/plain"), ("x-json-validator", "refused-by-check")],
                Some(b"the body was refused by its check\n"),
            );
            return;
        }
        let by = self.get_http_call_response_header("x-validated-by");
        self.set_http_request_header("x-json-validated", Some("1"));
        self.set_http_request_header("x-validated-by", by.as_deref());
        self.resume_http_request();
    }
}

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
        let Some(cluster) = self.check.clone() else {
            self.set_http_request_header("x-json-validated", Some("1"));
            return Action::Continue;
        };
        let headers = vec![
            (":method", "POST"),
            (":path", "/validate"),
            (":authority", cluster.as_str()),
            ("content-type", "application/json"),
        ];
        if self
            .dispatch_http_call(&cluster, headers, Some(&body), vec![], Duration::from_secs(1))
            .is_err()
        {
            self.send_http_response(503, vec![("x-json-validator", "check-failed")], Some(b"check unavailable\n"));
        }
        // Waits for the check's answer (on_http_call_response).
        Action::Pause
    }
}
