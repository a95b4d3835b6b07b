//! http-auth: asks an authorization service about every request before it goes on, the way
//! Envoy's ext_authz-style plugins do: `dispatch_http_call` to a cluster, `Action::Pause`, and
//! in `on_http_call_response` either `resume_http_request` or a local response.
//!
//! Plugin configuration: space-separated `key=value` pairs, all optional:
//! - `cluster=NAME` (default `auth`): the upstream, as the policy's `.upstreams` names it;
//! - `path=/PATH` (default `/check`): the path asked on the auth service;
//! - `timeout_ms=N` (default `1000`);
//! - `phase=request|response` (default `request`): `response` asks after the origin answered,
//!   pausing the response instead (`plugin.response(...)` in `vcl_deliver`): an allowed
//!   response gets the service's `x-auth-user`, a denied one is replaced by the 403.
//!
//! The call is a `GET` carrying the request's `authorization` header and its path in
//! `x-original-path`. The auth service answers 200 to allow (its `x-auth-user` header, if any, is
//! copied onto the request for the origin) and anything else to deny (403). When the call fails
//! (service down, timeout, unknown cluster) the request gets 503: the plugin fails closed.

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
    path: String,
    timeout: Duration,
    in_response: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cluster: "auth".into(),
            path: "/check".into(),
            timeout: Duration::from_millis(1000),
            in_response: false,
        }
    }
}

fn parse(raw: &str) -> Result<Settings, String> {
    let mut settings = Settings::default();
    for item in raw.split_whitespace() {
        match item.split_once('=') {
            Some(("cluster", v)) => settings.cluster = v.to_string(),
            Some(("path", v)) => settings.path = v.to_string(),
            Some(("timeout_ms", v)) => {
                let ms = v.parse::<u64>().map_err(|e| format!("timeout_ms: {e}"))?;
                settings.timeout = Duration::from_millis(ms);
            }
            Some(("phase", "request")) => settings.in_response = false,
            Some(("phase", "response")) => settings.in_response = true,
            _ => return Err(format!("unknown setting `{item}`")),
        }
    }
    Ok(settings)
}

#[derive(Default)]
struct AuthRoot {
    settings: Settings,
}

impl Context for AuthRoot {}

impl RootContext for AuthRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let raw = self
            .get_plugin_configuration()
            .map(|c| String::from_utf8_lossy(&c).into_owned())
            .unwrap_or_default();
        match parse(&raw) {
            Ok(settings) => {
                self.settings = settings;
                true
            }
            Err(e) => {
                log::error!("http-auth: bad configuration: {e}");
                false
            }
        }
    }

    fn create_http_context(&self, _: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Auth {
            settings: self.settings.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Auth {
    settings: Settings,
}

impl HttpContext for Auth {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        if self.settings.in_response {
            return Action::Continue;
        }
        self.ask()
    }

    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        if !self.settings.in_response {
            return Action::Continue;
        }
        self.ask()
    }
}

impl Auth {
    /// Calls the auth service about this request and pauses the phase until it answers.
    fn ask(&mut self) -> Action {
        let path = self.get_http_request_header(":path").unwrap_or_default();
        let authorization = self.get_http_request_header("authorization");
        let mut headers = vec![
            (":method", "GET"),
            (":path", self.settings.path.as_str()),
            (":authority", self.settings.cluster.as_str()),
            ("x-original-path", path.as_str()),
        ];
        if let Some(value) = authorization.as_deref() {
            headers.push(("authorization", value));
        }
        match self.dispatch_http_call(&self.settings.cluster, headers, None, vec![], self.settings.timeout) {
            Ok(_) => Action::Pause,
            Err(status) => {
                log::warn!("http-auth: cannot call `{}`: {status:?}", self.settings.cluster);
                self.send_http_response(503, vec![("x-auth", "call-failed")], Some(b"auth unavailable\n"));
                Action::Pause
            }
        }
    }
}

impl Context for Auth {
    fn on_http_call_response(&mut self, _: u32, num_headers: usize, _: usize, _: usize) {
        if num_headers == 0 {
            // The call failed: no answer at all.
            self.send_http_response(503, vec![("x-auth", "unreachable")], Some(b"auth unavailable\n"));
            return;
        }
        match self.get_http_call_response_header(":status").as_deref() {
            Some("200") => {
                let user = self.get_http_call_response_header("x-auth-user");
                if self.settings.in_response {
                    self.set_http_response_header("x-auth-user", user.as_deref());
                    self.resume_http_response();
                } else {
                    self.set_http_request_header("x-auth-user", user.as_deref());
                    self.resume_http_request();
                }
            }
            _ => {
                self.send_http_response(403, vec![("x-auth", "denied")], Some(b"denied\n"));
            }
        }
    }
}
