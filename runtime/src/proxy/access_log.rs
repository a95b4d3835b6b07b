//! One access-log event per request, on the `edgecache::access` tracing target.

use std::time::Duration;

use http::{Method, StatusCode, Uri};

use crate::cache::state::CacheState;

/// What the access log records about a finished request.
pub struct AccessRecord<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub status: StatusCode,
    pub cache: CacheState,
    pub bytes: Option<u64>,
    pub duration: Duration,
    pub backend: Option<&'a str>,
    pub client: std::net::IpAddr,
    /// The TLS version of the client connection (`TLSv1.3`); `None` for plain HTTP.
    pub tls: Option<&'static str>,
    /// The request's id: `req.xid` in a policy, the `XID` of the builtin error pages.
    pub xid: i64,
}

pub fn record(entry: AccessRecord<'_>) {
    tracing::info!(
        target: "edgecache::access",
        client = %entry.client,
        method = %entry.method,
        url = %entry.uri,
        status = entry.status.as_u16(),
        cache = entry.cache.as_str(),
        bytes = entry.bytes,
        duration_us = entry.duration.as_micros() as u64,
        backend = entry.backend.unwrap_or("-"),
        tls = entry.tls.unwrap_or("-"),
        xid = entry.xid,
    );
}
