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

    /// Opens a gRPC call or stream to `cluster` (`proxy_grpc_call`, `proxy_grpc_stream`), or
    /// `None` when there is no such cluster. The returned task runs the exchange (the host
    /// spawns it after the callback) and reports what arrives on `events`, ending with one
    /// [`GrpcEvent::Close`]; it stops early when `events` is closed (the plugin cancelled).
    /// Default: no gRPC.
    fn grpc(&self, cluster: &str, request: GrpcRequest, events: GrpcEventSender) -> Option<UpstreamTask> {
        let _ = (cluster, request, events);
        None
    }
}

/// A spawned outbound exchange.
pub type UpstreamTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A gRPC call or stream as a plugin opened it.
pub struct GrpcRequest {
    /// Fully qualified service name, e.g. `grpc.health.v1.Health`.
    pub service: String,
    pub method: String,
    /// Initial metadata (request headers).
    pub metadata: http::HeaderMap,
    /// The request messages, unframed, in order; the request stream ends when the sender is
    /// dropped (a call sends one message and drops it).
    pub messages: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    /// A call's deadline (`grpc-timeout` and a local timer); streams have none.
    pub timeout: Option<std::time::Duration>,
}

/// What a gRPC exchange reports, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrpcEvent {
    /// The response headers.
    InitialMetadata(http::HeaderMap),
    /// One response message, unframed.
    Message(Bytes),
    /// The trailers (without `grpc-status` / `grpc-message`, which come with `Close`).
    TrailingMetadata(http::HeaderMap),
    /// The end: a gRPC status code (`0` OK; `14` UNAVAILABLE when the upstream could not be
    /// reached, `4` DEADLINE_EXCEEDED past the timeout) and its message.
    Close { status: u32, message: String },
}

pub type GrpcEventSender = tokio::sync::mpsc::UnboundedSender<GrpcEvent>;

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
