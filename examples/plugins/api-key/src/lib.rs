//! api-key: answers 401 to requests without a valid API key header.
//!
//! Plugin configuration, either JSON or plain text:
//! - JSON: `{"header": "x-api-key", "keys": ["k1", "k2"]}` (`"key": "k1"` also accepted);
//! - plain: the key itself (header `x-api-key`), or several keys separated by commas.
//!
//! With no key configured every request is denied (fail closed). The key header is removed
//! before the request goes to the origin.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use serde::Deserialize;
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(ApiKeyRoot { config: Rc::new(Config::default()) })
    });
}}

#[derive(Default)]
struct Config {
    header: String,
    keys: Vec<String>,
}

#[derive(Deserialize)]
struct JsonConfig {
    header: Option<String>,
    key: Option<String>,
    #[serde(default)]
    keys: Vec<String>,
}

fn parse_config(raw: &str) -> Result<Config, String> {
    let raw = raw.trim();
    if raw.starts_with('{') {
        let json: JsonConfig = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        let mut keys = json.keys;
        keys.extend(json.key);
        Ok(Config {
            header: json
                .header
                .unwrap_or_else(|| "x-api-key".into())
                .to_ascii_lowercase(),
            keys,
        })
    } else {
        Ok(Config {
            header: "x-api-key".into(),
            keys: raw
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(String::from)
                .collect(),
        })
    }
}

struct ApiKeyRoot {
    config: Rc<Config>,
}

impl Context for ApiKeyRoot {}

impl RootContext for ApiKeyRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let raw = self
            .get_plugin_configuration()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        match parse_config(&raw) {
            Ok(config) => {
                if config.keys.is_empty() {
                    log::warn!("api-key: no key configured, every request is denied");
                }
                self.config = Rc::new(config);
                true
            }
            Err(e) => {
                log::error!("api-key: bad configuration: {e}");
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(ApiKey {
            config: self.config.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct ApiKey {
    config: Rc<Config>,
}

impl Context for ApiKey {}

impl HttpContext for ApiKey {
    fn on_http_request_headers(&mut self, _num_headers: usize, _eos: bool) -> Action {
        let presented = self.get_http_request_header_bytes(&self.config.header);
        let valid = presented
            .as_deref()
            .is_some_and(|k| self.config.keys.iter().any(|good| good.as_bytes() == k));
        if valid {
            self.set_http_request_header(&self.config.header, None);
            return Action::Continue;
        }
        let path = self.get_http_request_header(":path").unwrap_or_default();
        log::info!(
            "api-key: denied {path} (key {})",
            if presented.is_some() { "invalid" } else { "missing" }
        );
        self.send_http_response(
            401,
            vec![("content-type", "text/plain"), ("www-authenticate", "ApiKey")],
            Some(b"missing or invalid API key\n"),
        );
        Action::Pause
    }
}
