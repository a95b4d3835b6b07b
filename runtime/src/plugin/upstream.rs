//! Outbound calls a plugin makes (`proxy_http_call`, `proxy_grpc_call`): the seam through which
//! the proxy lends the plugin host its backends.
//!
//! The plugin host knows no backend. A plugin declaration names the clusters its plugin may call
//! (`.upstreams = "auth=auth_backend";`); the proxy builds an [`Upstreams`] from them, and the
//! host asks it to start each call. The call runs as a future on the proxy's runtime, never while
//! an instance is locked; its answer is delivered to the plugin later
//! (`proxy_on_http_call_response`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

/// A started call: the upstream's response (head and whole body), or why there is none (the
/// plugin then sees a response with no headers, as on Envoy).
pub type UpstreamCall = Pin<Box<dyn Future<Output = Result<http::Response<Bytes>, String>> + Send>>;

/// The clusters one plugin may call.
pub trait Upstreams: Send + Sync + 'static {
    /// Starts a call to `cluster`, or `None` when the plugin's declaration names no such cluster
    /// (the host call then fails with `BAD_ARGUMENT`, as Envoy's does for an unknown cluster).
    /// `request`'s URI is the path and query the plugin asked for; its `host` header is the
    /// plugin's `:authority`.
    fn call(&self, cluster: &str, request: http::Request<Bytes>) -> Option<UpstreamCall>;
}

/// A plugin's [`Upstreams`], cheap to clone (`PluginSpec` is `Clone` and `Debug`).
#[derive(Clone)]
pub struct UpstreamSet(pub Arc<dyn Upstreams>);

impl UpstreamSet {
    /// Clusters: none (every call fails with `BAD_ARGUMENT`).
    pub fn none() -> Self {
        UpstreamSet(Arc::new(NoUpstreams))
    }
}

impl std::fmt::Debug for UpstreamSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpstreamSet")
    }
}

struct NoUpstreams;

impl Upstreams for NoUpstreams {
    fn call(&self, _cluster: &str, _request: http::Request<Bytes>) -> Option<UpstreamCall> {
        None
    }
}
