//! bucket: sets `x-bucket: a|b` on the request from a stable hash of a cookie or header,
//! so the policy can put it in `hash_data` and cache one variant per bucket.
//!
//! Plugin configuration (plain text, optional): `cookie=NAME` (default `cookie=uid`) or
//! `header=NAME`. Requests without the cookie/header are hashed on the client address
//! (property `source.address`). The same input always lands in the same bucket (FNV-1a).

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(BucketRoot { source: Rc::new(Source::Cookie("uid".into())) })
    });
}}

enum Source {
    Cookie(String),
    Header(String),
}

struct BucketRoot {
    source: Rc<Source>,
}

impl Context for BucketRoot {}

impl RootContext for BucketRoot {
    fn on_configure(&mut self, _size: usize) -> bool {
        let raw = self
            .get_plugin_configuration()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .unwrap_or_default();
        if raw.is_empty() {
            return true;
        }
        self.source = Rc::new(match raw.split_once('=') {
            Some(("cookie", name)) => Source::Cookie(name.trim().into()),
            Some(("header", name)) => Source::Header(name.trim().to_ascii_lowercase()),
            _ => {
                log::error!("bucket: expected cookie=NAME or header=NAME, got {raw:?}");
                return false;
            }
        });
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Bucket {
            source: self.source.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Bucket {
    source: Rc<Source>,
}

impl Context for Bucket {}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

fn cookie_value(header: &str, name: &str) -> Option<String> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.to_string())
    })
}

impl HttpContext for Bucket {
    fn on_http_request_headers(&mut self, _num_headers: usize, _eos: bool) -> Action {
        let key = match &*self.source {
            Source::Cookie(name) => self
                .get_http_request_header("cookie")
                .and_then(|c| cookie_value(&c, name)),
            Source::Header(name) => self.get_http_request_header(name),
        };
        let key = key
            .map(String::into_bytes)
            .or_else(|| self.get_property(vec!["source", "address"]))
            .unwrap_or_default();
        let bucket = if fnv1a(&key) % 2 == 0 { "a" } else { "b" };
        self.set_http_request_header("x-bucket", Some(bucket));
        Action::Continue
    }
}
