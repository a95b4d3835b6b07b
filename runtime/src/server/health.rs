//! The health check a load balancer asks the serving listeners (`--health-path`, `/healthz`):
//! answered here, before the proxy, so neither the policy, the cache nor the access log sees
//! it. 200 while serving; 503 from the moment a graceful shutdown starts, through
//! `--drain-time`, so the balancer takes the node out while it still serves what it is sent.

use std::sync::atomic::{AtomicBool, Ordering};

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::cache::body::ProxyBody;

/// The health path and whether this node is draining.
pub(crate) struct Health {
    path: Option<String>,
    draining: AtomicBool,
}

impl Health {
    pub(crate) fn new(path: Option<String>) -> Health {
        Health {
            path,
            draining: AtomicBool::new(false),
        }
    }

    /// From now on the health path answers 503.
    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// The answer to a `GET` or `HEAD` of the health path (the query is not compared);
    /// `None` for every other request.
    pub(crate) fn answer<B>(&self, request: &Request<B>) -> Option<Response<ProxyBody>> {
        let path = self.path.as_deref()?;
        let method = request.method();
        if request.uri().path() != path || (method != Method::GET && method != Method::HEAD) {
            return None;
        }
        let (status, body) = match self.draining.load(Ordering::Relaxed) {
            false => (StatusCode::OK, "serving\n"),
            true => (StatusCode::SERVICE_UNAVAILABLE, "draining\n"),
        };
        let body = match *method == Method::HEAD {
            true => ProxyBody::empty(),
            false => ProxyBody::full(body),
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        // A cache between the balancer and this node must not answer for it.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Some(response)
    }
}
