//! A loaded version of the configuration: the compiled policy, the backends and the plugins it
//! declares.
//!
//! Versions are immutable. The active one sits in an `ArcSwap` inside the proxy's shared
//! state; each request loads it once at its start and keeps its `Arc` to the end, so a reload
//! never changes a request midway and an old version is dropped when its last request ends.
//! Cache storage lives outside versions, so a reload keeps every object.

use std::path::PathBuf;
use std::time::SystemTime;

use std::borrow::Cow;

use http::HeaderName;
use policy_lang::{BackendId, BanExpr, Context, Program, Scope, Sub, Task, Value, Var};

use crate::backend::{Backend, Roots, TlsOptions};
use crate::config::{BackendTimeouts, Config};
use crate::dns::Resolver;
use crate::plugin::{HostSettings, Plugin, PluginHost};
use crate::{policy, StartError};

/// Where a version's policy came from.
#[derive(Clone, Debug)]
pub struct PolicySource {
    pub path: PathBuf,
    /// Every file read: the entry and its includes (what a watcher must watch).
    pub files: Vec<String>,
    pub loaded_at: SystemTime,
}

/// One loaded configuration.
pub struct Version {
    pub policy: Option<Program>,
    pub backends: Vec<Backend>,
    /// The policy's plugins, indexed by `PluginId` (empty without a policy or plugins).
    pub plugins: Vec<Plugin>,
    /// The host the plugins run on; one per process, handed from version to version so
    /// plugin shared data survives reloads. Created with the first policy that declares a
    /// plugin.
    pub plugin_host: Option<PluginHost>,
    /// 1 for the version loaded at start, +1 per successful reload.
    pub generation: u64,
    /// The policy has `return (vcl(LABEL))`: a request keeps its head as received, for the
    /// labelled policy to start over from.
    pub switches_labels: bool,
    pub source: Option<PolicySource>,
}

impl Version {
    /// Reads and compiles the policy (if any) and sets up its backends. `previous` lends its
    /// backends where name and address are unchanged, so their connection pools survive.
    pub fn load(config: &Config, generation: u64, previous: Option<&Version>) -> Result<Version, StartError> {
        let (policy, source) = match &config.policy {
            Some(path) => {
                let program = policy::load(
                    path,
                    config.policy_format,
                    &Resolver::new(config.hosts_file.clone()),
                )
                .map_err(|diagnostics| StartError::Policy {
                    path: path.display().to_string(),
                    rendered: diagnostics.render(),
                })?;
                // Plugin files are watched with the policy: rebuilding a plugin reloads it.
                let files = program
                    .sources()
                    .iter()
                    .cloned()
                    .chain(program.plugins().iter().map(|plugin| plugin.path.clone()))
                    .collect();
                let source = PolicySource {
                    path: path.clone(),
                    files,
                    loaded_at: SystemTime::now(),
                };
                (Some(program), Some(source))
            }
            None => (None, None),
        };
        let declares_plugins = policy
            .as_ref()
            .is_some_and(|program| !program.plugins().is_empty());
        let plugin_host = previous
            .and_then(|version| version.plugin_host.clone())
            .or_else(|| {
                declares_plugins.then(|| {
                    PluginHost::new(HostSettings {
                        limits: config.plugin_limits,
                        pause_timeout: config.plugin_pause_timeout,
                        ..HostSettings::default()
                    })
                })
            });
        let backends = backends(config, policy.as_ref(), previous)?;
        let plugins = match (&policy, &plugin_host) {
            (Some(program), Some(host)) => {
                policy::load_plugins(program, host, &backends).map_err(|error| StartError::Plugin {
                    path: source
                        .as_ref()
                        .map_or(String::new(), |s| s.path.display().to_string()),
                    error,
                })?
            }
            _ => Vec::new(),
        };
        let switches_labels = policy
            .as_ref()
            .is_some_and(|program| !program.labels().is_empty());
        Ok(Version {
            switches_labels,
            policy,
            backends,
            plugins,
            plugin_host,
            generation,
            source,
        })
    }

    /// The backend used when the policy picks none.
    pub fn default_backend(&self) -> &Backend {
        let index = self
            .policy
            .as_ref()
            .and_then(Program::default_backend)
            .map_or(0, BackendId::index);
        self.backends.get(index).unwrap_or(&self.backends[0])
    }

    /// The backend a fetch goes to for `hint` (`req.backend_hint`: a backend, a director, or
    /// `None` for the default). A director picks now among its healthy members; when none is
    /// healthy it picks as if all were, so the fetch fails on a named backend as in Varnish. A
    /// declared backend is returned as is.
    pub fn pick(&self, hint: Option<BackendId>) -> &Backend {
        self.pick_for_task(hint, None)
    }

    /// [`Version::pick`] for a backend request whose `task` holds what its subs changed in
    /// shard parameter sets (`p.set(...)`), which a lazy shard pick reads.
    pub fn pick_for_task(&self, hint: Option<BackendId>, task: Option<&Task>) -> &Backend {
        let Some(program) = self.policy.as_ref() else {
            return self.default_backend();
        };
        let Some(wanted) = hint.or_else(|| program.default_backend()) else {
            return self.default_backend();
        };
        let healthy = Picking {
            backends: &self.backends,
            left_out: None,
            all_healthy: false,
            task,
        };
        let any = Picking {
            all_healthy: true,
            ..healthy
        };
        program
            .resolve_backend(wanted, &healthy)
            .or_else(|| program.resolve_backend(wanted, &any))
            .and_then(|id| self.backends.get(id.index()))
            .unwrap_or_else(|| self.default_backend())
    }

    /// Another healthy backend for a retry after `failed`, when `hint` is a director with one.
    pub fn pick_other(&self, hint: Option<BackendId>, failed: BackendId) -> Option<&Backend> {
        let program = self.policy.as_ref()?;
        let hint = hint.or_else(|| program.default_backend())?;
        let healthy = Picking {
            backends: &self.backends,
            left_out: Some(failed),
            all_healthy: false,
            task: None,
        };
        let id = program.resolve_backend(hint, &healthy)?;
        (id != failed).then(|| self.backends.get(id.index())).flatten()
    }

    /// The id of a backend of this version (by name), for [`Version::pick_other`].
    pub fn backend_id(&self, backend: &Backend) -> BackendId {
        let index = self
            .backends
            .iter()
            .position(|b| b.name() == backend.name())
            .unwrap_or(0);
        BackendId::new(index as u32)
    }

    /// The policy, when it defines `sub` itself (the builtin alone needs no run there).
    pub fn policy_defining(&self, sub: Sub) -> Option<&Program> {
        self.policy.as_ref().filter(|program| program.has_sub(sub))
    }
}

/// The origins: those the policy declares, or the `-b` one when it declares none.
fn backends(
    config: &Config,
    policy: Option<&Program>,
    previous: Option<&Version>,
) -> Result<Vec<Backend>, StartError> {
    // A backend is reused only when nothing about it changed (a changed probe starts a new one).
    let reuse =
        |name: &str, address: &str, options: crate::backend::BackendOptions| -> Result<Backend, StartError> {
            if is_own_listen_address(address, &config.listen) {
                return Err(StartError::Backend(format!(
                    "{name}: {address} is edgecache's own listen address, so every request would \
                     loop back into edgecache; point the backend at the origin server"
                )));
            }
            let kept = previous
                .into_iter()
                .flat_map(|version| version.backends.iter())
                .find(|backend| {
                    backend.name() == name && backend.address() == address && *backend.options() == options
                });
            match kept {
                Some(backend) => Ok(backend.clone()),
                None => Backend::new(name, address, options)
                    .map_err(|error| StartError::Backend(format!("{name}: {error}"))),
            }
        };
    let dns = crate::backend::Dns {
        resolver: Resolver::new(config.hosts_file.clone()),
        ttl: config.dns_ttl,
    };
    let declared = policy.map_or(&[][..], Program::backends);
    if declared.is_empty() {
        let address = config.backend.as_deref().ok_or_else(|| {
            StartError::Backend("no backend given (-b HOST:PORT) and the policy declares none".into())
        })?;
        let (address, tls) = no_policy_origin(address, config)?;
        let options = crate::backend::BackendOptions {
            timeouts: config.timeouts,
            max_connections: None,
            probe: None,
            host_header: None,
            tls,
            proxy_header: None,
            dns: dns.clone(),
        };
        return Ok(vec![reuse("default", &address, options)?]);
    }
    declared
        .iter()
        .map(|decl| {
            let timeouts = BackendTimeouts {
                connect: decl.connect_timeout.unwrap_or(config.timeouts.connect),
                first_byte: decl.first_byte_timeout.unwrap_or(config.timeouts.first_byte),
                between_bytes: decl
                    .between_bytes_timeout
                    .unwrap_or(config.timeouts.between_bytes),
            };
            let options = crate::backend::BackendOptions {
                timeouts,
                max_connections: decl.max_connections,
                probe: decl.probe.clone(),
                host_header: decl.host_header.clone(),
                tls: decl
                    .tls
                    .as_ref()
                    .map(|tls| backend_tls(&decl.name, tls))
                    .transpose()?,
                proxy_header: decl.proxy_header,
                dns: dns.clone(),
            };
            reuse(&decl.name, &format!("{}:{}", decl.host, decl.port), options)
        })
        .collect()
}

/// The TLS options of a backend with `.ssl = 1;`: its `.ssl_ca` is read now, so a missing or
/// broken file refuses the policy (naming the file and the line of the attribute).
fn backend_tls(name: &str, tls: &policy_lang::BackendTls) -> Result<TlsOptions, StartError> {
    let roots = match &tls.ca {
        None => Roots::System,
        Some(ca) => Roots::from_file(&ca.path).map_err(|error| {
            StartError::Backend(format!(
                "{}: `.ssl_ca` of backend {name}: {error}",
                ca.declared_at
            ))
        })?,
    };
    Ok(TlsOptions {
        sni: tls.sni,
        verify_peer: tls.verify_peer,
        verify_host: tls.verify_host,
        roots,
    })
}

/// `-b`'s `HOST:PORT`, `http://HOST:PORT` or `https://HOST[:PORT]` (TLS, verified against
/// the system's roots or `--backend-ca`; port 443 by default).
fn no_policy_origin(address: &str, config: &Config) -> Result<(String, Option<TlsOptions>), StartError> {
    let Some(rest) = address.strip_prefix("https://") else {
        let plain = address.strip_prefix("http://").unwrap_or(address);
        return Ok((plain.trim_end_matches('/').to_string(), None));
    };
    let rest = rest.trim_end_matches('/');
    let address = match rest.parse::<http::uri::Authority>() {
        Ok(authority) if authority.port_u16().is_none() => format!("{rest}:443"),
        _ => rest.to_string(),
    };
    let roots = match &config.backend_ca {
        None => Roots::System,
        Some(path) => Roots::from_file(&path.display().to_string())
            .map_err(|error| StartError::Backend(format!("--backend-ca: {error}")))?,
    };
    Ok((address, Some(TlsOptions::verified(roots))))
}

/// Whether `address` (`HOST:PORT`) names one of `listen`: a backend there would send every
/// request back to edgecache. Host names other than `localhost` are not resolved here.
fn is_own_listen_address(address: &str, listen: &[crate::config::ListenSpec]) -> bool {
    let target = match address.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}").parse(),
        None => address.parse::<std::net::SocketAddr>(),
    };
    let Ok(target) = target else { return false };
    listen.iter().map(|spec| spec.addr).any(|own| {
        own.port() == target.port()
            && (own.ip() == target.ip() || (own.ip().is_unspecified() && target.ip().is_loopback()))
    })
}

/// What a director reads when it picks: each backend's health and load, and a random number.
/// The policy's variables are not involved, so the rest of the context is empty.
#[derive(Clone, Copy)]
struct Picking<'a> {
    backends: &'a [Backend],
    /// Counted as sick: the backend a retry already failed on.
    left_out: Option<BackendId>,
    /// Every backend counts as healthy (the last resort when none is).
    all_healthy: bool,
    /// The backend request's task (its shard parameter sets), when picking for one.
    task: Option<&'a Task>,
}

impl Context for Picking<'_> {
    fn task(&self) -> Option<&Task> {
        self.task
    }

    fn healthy(&self, backend: BackendId) -> bool {
        self.left_out != Some(backend)
            && (self.all_healthy || self.backends.get(backend.index()).is_some_and(Backend::healthy))
    }

    fn in_flight(&self, backend: BackendId) -> usize {
        self.backends.get(backend.index()).map_or(0, Backend::in_flight)
    }

    fn healthy_for(&self, backend: BackendId) -> Option<f64> {
        self.backends.get(backend.index()).and_then(Backend::healthy_for)
    }

    fn random(&self) -> f64 {
        fastrand::f64()
    }

    fn get(&self, _var: Var) -> Value<'_> {
        Value::Unset
    }

    fn set(&mut self, _var: Var, _value: Value<'static>) {}

    fn header(&self, _scope: Scope, _name: &HeaderName) -> Option<Cow<'_, str>> {
        None
    }

    fn set_header(&mut self, _scope: Scope, _name: &HeaderName, _value: String) {}

    fn unset_header(&mut self, _scope: Scope, _name: &HeaderName) {}

    fn hash_data(&mut self, _data: &str) {}

    fn synthetic(&mut self, _body: String) {}

    fn ban(&mut self, _ban: BanExpr) {}

    fn log(&mut self, _msg: &str) {}
}
