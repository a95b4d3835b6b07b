//! Loading policy files from disk for the policy language (which does no I/O itself), with the
//! host names of its ACLs resolved ([`crate::dns`]), and the WebAssembly plugins a policy
//! declares.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use policy_lang::{Diagnostics, PluginIsolation, PolicyFormat, Program, SourceLoader};

use crate::backend::Backend;
use crate::dns::Resolver;
use crate::plugin::{
    GrpcEventSender, GrpcRequest, Isolation, LoadError, LoadErrorKind, Plugin, PluginHost, PluginSpec,
    UpstreamCall, UpstreamSet, UpstreamTask, Upstreams,
};

/// Reads the entry file and its `include`s, each relative to the file that includes it, and
/// resolves the ACLs' host names.
struct FileLoader<'a> {
    resolver: &'a Resolver,
}

/// A policy file larger than this is a mistake (a log, a device, a disk image), not a policy.
const MAX_POLICY_FILE: u64 = 16 << 20;

impl SourceLoader for FileLoader<'_> {
    fn getenv(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn resolve_host(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String> {
        self.resolver.lookup(name).map_err(|error| match error {
            crate::dns::ResolveError::NotFound { cause, .. } => cause,
            other => other.to_string(),
        })
    }

    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
        let (name, bytes) = self.load_bytes(path, from)?;
        let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
        Ok((name, text))
    }

    fn load_bytes(&self, path: &str, from: Option<&str>) -> Result<(String, Vec<u8>), String> {
        let base = from
            .and_then(|file| Path::new(file).parent())
            .unwrap_or(Path::new(""));
        let full: PathBuf = base.join(path);
        // Checked before opening: opening a FIFO would wait for a writer, and a device such
        // as /dev/zero never ends.
        let metadata = std::fs::metadata(&full).map_err(|error| error.to_string())?;
        if !metadata.is_file() {
            return Err("not a regular file".to_string());
        }
        if metadata.len() > MAX_POLICY_FILE {
            return Err(format!(
                "{} bytes; a policy file may have at most {} MiB",
                metadata.len(),
                MAX_POLICY_FILE >> 20
            ));
        }
        let bytes = std::fs::read(&full).map_err(|error| error.to_string())?;
        Ok((full.display().to_string(), bytes))
    }
}

/// Parses, checks and compiles the policy at `path`, written in `format` (`None`: as its name
/// says, see [`PolicyFormat::of_path`]); ACL host names are looked up with `resolver`.
pub fn load(path: &Path, format: Option<PolicyFormat>, resolver: &Resolver) -> Result<Program, Diagnostics> {
    let name = path.display().to_string();
    let loader = FileLoader { resolver };
    match format.unwrap_or_else(|| PolicyFormat::of_path(&name)) {
        PolicyFormat::Vcl => policy_lang::load(&name, &loader),
        PolicyFormat::Rewrite => policy_lang::load_rewrite(&name, &loader),
    }
}

/// The rewrite rules at `path` loaded, and the VCL policy equivalent to them (`edgecache check
/// --explain`).
pub fn explain_rewrite(path: &Path, resolver: &Resolver) -> Result<(Program, String), Diagnostics> {
    policy_lang::explain_rewrite(&path.display().to_string(), &FileLoader { resolver })
}

/// Checks the include fragment at `path` on its own (`edgecache check --fragment`): names
/// it leaves to the including file are notes.
pub fn check_fragment(path: &Path, resolver: &Resolver) -> Diagnostics {
    policy_lang::check_fragment(&path.display().to_string(), &FileLoader { resolver })
}

/// Compiles and starts every plugin the policy declares, in declaration order (so a
/// `PluginId` indexes the result). `backends` are the version's, indexed like the policy's
/// backend declarations: a plugin's `.upstreams` name them (empty for `edgecache check`: the
/// names are checked, no call can be made). Blocking: compiling takes ~100 ms
/// per SDK-built plugin.
pub fn load_plugins(
    program: &Program,
    host: &PluginHost,
    backends: &[Backend],
) -> Result<Vec<Plugin>, LoadError> {
    program
        .plugins()
        .iter()
        .map(|decl| {
            let isolation = match decl.isolation {
                PluginIsolation::Shared => Isolation::Shared,
                PluginIsolation::PerRequest => Isolation::PerRequest,
            };
            let upstreams = plugin_upstreams(program, decl, backends)?;
            let spec = PluginSpec::new(&decl.name, &decl.path)
                .config(decl.config.clone().into_bytes())
                .vm_config(decl.vm_config.clone().into_bytes())
                .root_id(&decl.root_id)
                .vm_id(&decl.vm_id)
                .upstreams(upstreams)
                .max_body(
                    decl.max_body
                        .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
                )
                .isolation(isolation);
            host.load(&spec)
        })
        .collect()
}

/// A plugin's `.upstreams`: each cluster with the declared backend it names.
fn plugin_upstreams(
    program: &Program,
    decl: &policy_lang::PluginDecl,
    backends: &[Backend],
) -> Result<UpstreamSet, LoadError> {
    let mut clusters = Vec::with_capacity(decl.upstreams.len());
    for (cluster, name) in &decl.upstreams {
        let index = program
            .backends()
            .iter()
            .position(|declared| declared.name == *name)
            .ok_or_else(|| LoadError {
                plugin: decl.name.clone(),
                path: PathBuf::from(&decl.path),
                kind: LoadErrorKind::UnknownUpstream {
                    cluster: cluster.clone(),
                    backend: name.clone(),
                },
            })?;
        if let Some(backend) = backends.get(index) {
            clusters.push((cluster.clone(), backend.clone()));
        }
    }
    Ok(UpstreamSet(Arc::new(BackendUpstreams { clusters })))
}

/// The largest answer body a plugin's outbound call reads; a larger one fails the call.
const MAX_CALL_BODY: usize = 16 << 20;

/// Outbound calls of one plugin, sent to the backends its `.upstreams` names, through their
/// connection pools and with their timeouts.
struct BackendUpstreams {
    clusters: Vec<(String, Backend)>,
}

impl Upstreams for BackendUpstreams {
    fn call(&self, cluster: &str, request: http::Request<Bytes>) -> Option<UpstreamCall> {
        let backend = self
            .clusters
            .iter()
            .find(|(name, _)| name == cluster)
            .map(|(_, backend)| backend.clone())?;
        Some(Box::pin(async move {
            let request = request.map(|body| Full::new(body).map_err(|never| match never {}).boxed_unsync());
            let response = backend.send(request).await.map_err(|error| error.to_string())?;
            let (head, body) = response.into_parts();
            let body = Limited::new(body, MAX_CALL_BODY)
                .collect()
                .await
                .map_err(|error| format!("reading the answer of backend {}: {error}", backend.name()))?
                .to_bytes();
            Ok(http::Response::from_parts(head, body))
        }))
    }

    /// gRPC over HTTP/2 cleartext to the backend's addresses (not through its HTTP/1.1 pool),
    /// with its connect timeout; a TLS backend fails the call `UNAVAILABLE`.
    fn grpc(&self, cluster: &str, request: GrpcRequest, events: GrpcEventSender) -> Option<UpstreamTask> {
        let backend = self
            .clusters
            .iter()
            .find(|(name, _)| name == cluster)
            .map(|(_, backend)| backend.clone())?;
        if backend.options().tls.is_some() {
            let _ = events.send(crate::plugin::GrpcEvent::Close {
                status: 14,
                message: format!("backend {} uses TLS; gRPC calls need h2c", backend.name()),
            });
            return Some(Box::pin(async {}));
        }
        let authority = backend.address().to_string();
        Some(Box::pin(crate::plugin::grpc_exchange(
            backend.resolved(),
            backend.timeouts().connect,
            authority,
            request,
            events,
        )))
    }
}
