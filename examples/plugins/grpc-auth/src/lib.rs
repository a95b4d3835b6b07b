//! grpc-auth: asks a gRPC service about every request before it goes on, with the SDK's gRPC
//! calls: `dispatch_grpc_call` (one message, an answer or a status) or, with `mode=stream`,
//! `open_grpc_stream` (two messages, an answer to each, then the close). The request waits
//! (`Action::Pause`) and goes on or is refused in the gRPC callbacks.
//!
//! Plugin configuration: space-separated `key=value` pairs, all optional:
//! - `cluster=NAME` (default `auth`): the upstream, as the policy's `.upstreams` names it;
//! - `mode=call|stream` (default `call`).
//!
//! A call sends the request's path as the message to `edge.Auth/Check`, with the request's
//! `x-user` as metadata; status OK lets the request go on with the answer in `x-auth-reply`,
//! any other status refuses it: 403 with `grpc status N: MESSAGE` as the body. A stream sends
//! the path, then `x-user`, to `edge.Auth/Watch`, and on close (status OK) sets
//! `x-stream-replies` to the answers joined with `,` and `x-stream-metadata` to the initial
//! metadata's `x-served-by`.
//!
//! The messages are opaque bytes here: real services exchange protobuf, which the plugin would
//! encode and decode itself.

use std::time::Duration;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(AuthRoot::default()) });
}}

#[derive(Clone)]
struct Settings {
    cluster: String,
    stream: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cluster: "auth".into(),
            stream: false,
        }
    }
}

#[derive(Default)]
struct AuthRoot {
    settings: Settings,
}

impl Context for AuthRoot {}

impl RootContext for AuthRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let config = self.get_plugin_configuration().unwrap_or_default();
        let config = String::from_utf8_lossy(&config);
        for pair in config.split_whitespace() {
            match pair.split_once('=') {
                Some(("cluster", v)) => self.settings.cluster = v.to_string(),
                Some(("mode", "call")) => self.settings.stream = false,
                Some(("mode", "stream")) => self.settings.stream = true,
                _ => return false,
            }
        }
        true
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(GrpcAuth {
            settings: self.settings.clone(),
            replies: Vec::new(),
            served_by: String::new(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct GrpcAuth {
    settings: Settings,
    replies: Vec<String>,
    served_by: String,
}

impl GrpcAuth {
    fn refuse(&self, status: u32) {
        let (_, message) = self.get_grpc_status();
        let body = format!("grpc status {status}: {}\n", message.unwrap_or_default());
        self.send_http_response(403, vec![("content-type", "text/plain")], Some(body.as_bytes()));
    }
}

impl HttpContext for GrpcAuth {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        let path = self.get_http_request_header(":path").unwrap_or_default();
        let user = self.get_http_request_header("x-user").unwrap_or_default();
        let cluster = &self.settings.cluster;
        let opened = if self.settings.stream {
            self.open_grpc_stream(cluster, "edge.Auth", "Watch", vec![])
                .inspect(|&token| {
                    self.send_grpc_stream_message(token, Some(path.as_bytes()), false);
                    self.send_grpc_stream_message(token, Some(user.as_bytes()), true);
                })
        } else {
            self.dispatch_grpc_call(
                cluster,
                "edge.Auth",
                "Check",
                vec![("x-user", user.as_bytes())],
                Some(path.as_bytes()),
                Duration::from_secs(1),
            )
        };
        match opened {
            Ok(_) => Action::Pause,
            Err(status) => {
                let body = format!("cannot call the auth service: {status:?}\n");
                self.send_http_response(503, vec![], Some(body.as_bytes()));
                Action::Pause
            }
        }
    }
}

impl Context for GrpcAuth {
    fn on_grpc_call_response(&mut self, _: u32, status: u32, size: usize) {
        if status != 0 {
            return self.refuse(status);
        }
        let reply = self.get_grpc_call_response_body(0, size).unwrap_or_default();
        self.set_http_request_header("x-auth-reply", Some(&String::from_utf8_lossy(&reply)));
        self.resume_http_request();
    }

    fn on_grpc_stream_initial_metadata(&mut self, _: u32, _: u32) {
        if let Some(value) = self.get_grpc_stream_initial_metadata_value("x-served-by") {
            self.served_by = String::from_utf8_lossy(&value).into_owned();
        }
    }

    fn on_grpc_stream_message(&mut self, _: u32, size: usize) {
        let message = self.get_grpc_stream_message(0, size).unwrap_or_default();
        self.replies.push(String::from_utf8_lossy(&message).into_owned());
    }

    fn on_grpc_stream_close(&mut self, _: u32, status: u32) {
        if status != 0 {
            return self.refuse(status);
        }
        self.set_http_request_header("x-stream-replies", Some(&self.replies.join(",")));
        self.set_http_request_header("x-stream-metadata", Some(&self.served_by));
        self.resume_http_request();
    }
}
