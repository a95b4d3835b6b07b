//! add-header: adds one response header to every response.
//!
//! Plugin configuration: `name: value` (for example `x-served-by: edgecache`), or just a
//! value, in which case the header name is `x-edge-plugin`. Empty configuration means
//! `x-edge-plugin: add-header`.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(AddHeaderRoot { header: Rc::new(default_header()) })
    });
}}

fn default_header() -> (String, String) {
    ("x-edge-plugin".to_string(), "add-header".to_string())
}

struct AddHeaderRoot {
    header: Rc<(String, String)>,
}

impl Context for AddHeaderRoot {}

impl RootContext for AddHeaderRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let config = self
            .get_plugin_configuration()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .unwrap_or_default();
        let header = if config.is_empty() {
            default_header()
        } else if let Some((name, value)) = config.split_once(':') {
            (name.trim().to_ascii_lowercase(), value.trim().to_string())
        } else {
            ("x-edge-plugin".to_string(), config)
        };
        log::info!("add-header configured: {}: {}", header.0, header.1);
        self.header = Rc::new(header);
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(AddHeader {
            header: self.header.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct AddHeader {
    header: Rc<(String, String)>,
}

impl Context for AddHeader {}

impl HttpContext for AddHeader {
    fn on_http_response_headers(&mut self, _num_headers: usize, _eos: bool) -> Action {
        self.add_http_response_header(&self.header.0, &self.header.1);
        Action::Continue
    }
}
