//! A loaded version of the configuration: the compiled policy and the backends it declares.
//!
//! Versions are immutable. The active one sits in an `ArcSwap` inside the proxy's shared
//! state; each request loads it once at its start and keeps its `Arc` to the end, so a reload
//! never changes a request midway and an old version is dropped when its last request ends.
//! Cache storage lives outside versions, so a reload keeps every object.

use std::path::PathBuf;
use std::time::SystemTime;

use policy_lang::{BackendId, Program, Sub};

use crate::backend::Backend;
use crate::config::{BackendTimeouts, Config};
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
    /// 1 for the version loaded at start, +1 per successful reload.
    pub generation: u64,
    pub source: Option<PolicySource>,
}

impl Version {
    /// Reads and compiles the policy (if any) and sets up its backends. `previous` lends its
    /// backends where name and address are unchanged, so their connection pools survive.
    pub fn load(config: &Config, generation: u64, previous: Option<&Version>) -> Result<Version, StartError> {
        let (policy, source) = match &config.policy {
            Some(path) => {
                let program = policy::load(path).map_err(|diagnostics| StartError::Policy {
                    path: path.display().to_string(),
                    rendered: diagnostics.render(),
                })?;
                let source = PolicySource {
                    path: path.clone(),
                    files: program.sources().to_vec(),
                    loaded_at: SystemTime::now(),
                };
                (Some(program), Some(source))
            }
            None => (None, None),
        };
        let backends = backends(config, policy.as_ref(), previous)?;
        Ok(Version {
            policy,
            backends,
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

    /// The backend `req.backend_hint` names, or the default.
    pub fn backend_for(&self, hint: Option<BackendId>) -> &Backend {
        hint.and_then(|id| self.backends.get(id.index()))
            .unwrap_or_else(|| self.default_backend())
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
    let declared = policy.map_or(&[][..], Program::backends);
    if declared.is_empty() {
        let address = config.backend.as_deref().ok_or_else(|| {
            StartError::Backend("no backend given (-b HOST:PORT) and the policy declares none".into())
        })?;
        let options = crate::backend::BackendOptions {
            timeouts: config.timeouts,
            max_connections: None,
            probe: None,
        };
        return Ok(vec![reuse("default", address, options)?]);
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
            };
            reuse(&decl.name, &format!("{}:{}", decl.host, decl.port), options)
        })
        .collect()
}
