//! Several policies loaded at once, as Varnish's `vcl.load` / `vcl.use` / `vcl.label` /
//! `vcl.discard` / `vcl.list` keep them: each by name (the one `-f` loaded is `boot`), one of
//! them active (new requests start on it), labels pointing at others so that the active one
//! can send a request there with `return (vcl(LABEL))` (the multi-site label router).
//!
//! Each policy is reloaded from its own files ([`super::Reloader`], one per policy, with its
//! own watcher), and a reload replaces only that policy, wherever it is used: as the active
//! one, behind its labels. `vcl.use` of a policy loaded earlier is the rollback. Nothing piles
//! up: a replaced or discarded version is dropped when its last request ends (requests hold an
//! `Arc` of theirs); until then `vcl.list` shows a discarded one as `discarded`, with its
//! requests as busy.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::version::Version;

/// The name of the policy given at start (`-f`), as Varnish names it.
pub const BOOT: &str = "boot";

/// What requests read: the version each label points to now.
#[derive(Default)]
pub(crate) struct Labels {
    map: ArcSwap<HashMap<Arc<str>, Arc<Version>>>,
}

impl Labels {
    /// The version `label` points to; `None` when no such label is loaded.
    pub fn get(&self, label: &str) -> Option<Arc<Version>> {
        self.map.load().get(label).cloned()
    }
}

/// Why a `vcl.*` command was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum VclError {
    #[error("`{0}` is already loaded (as a policy or a label); discard it first or pick another name")]
    Exists(String),
    #[error("no policy or label is called `{0}`")]
    Unknown(String),
    #[error("`{0}` is not a valid name: use letters, digits, `_` and `-`, starting with a letter")]
    BadName(String),
    #[error("`{0}` is the active policy; `vcl.use` another one first")]
    Active(String),
    #[error("`{name}` is labelled by {labels}; discard the labels first")]
    Labelled { name: String, labels: String },
    #[error("label `{label}` is used by `return (vcl({label}))` in {users}")]
    LabelInUse { label: String, users: String },
    #[error("`{0}` is a label; a label points to a policy, not to another label")]
    LabelOfLabel(String),
    #[error("`{name}` switches to labels itself (`return (vcl(...))`), so it cannot be labelled: labels do not nest")]
    Nested { name: String },
    #[error("{0}")]
    Load(String),
}

/// One row of `vcl.list`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    pub name: String,
    /// `active`, `available` or `discarded` (busy, dropped when its last request ends).
    pub status: &'static str,
    /// `warm` (active, labelled or busy), `cold` (serves nothing), or `busy` once discarded.
    pub temperature: &'static str,
    /// References running work holds, as Varnish counts them (a client request, and its
    /// backend fetch while it runs); 0 when nothing runs on it.
    pub busy: usize,
    /// For a label: the policy it points to.
    pub label_of: Option<String>,
    pub generation: Option<u64>,
    pub path: Option<String>,
}

struct Entry {
    name: Arc<str>,
    path: Option<PathBuf>,
    version: Arc<Version>,
    /// Stops this policy's file watcher when the entry goes (`vcl.discard`).
    _watching: Option<watch::Sender<bool>>,
}

struct Registry {
    active: Arc<str>,
    loaded: Vec<Entry>,
    /// Label -> policy name, in the order made.
    labels: Vec<(Arc<str>, Arc<str>)>,
    /// Discarded or replaced versions still serving requests, until those end.
    discarded: Vec<(Arc<str>, Weak<Version>)>,
}

/// The loaded policies, the active one and the labels; the only writer of the active version.
pub(crate) struct Policies {
    active: Arc<ArcSwap<Version>>,
    labels: Arc<Labels>,
    registry: parking_lot::Mutex<Registry>,
}

impl Policies {
    /// The registry of a server that started on `active`'s version, named [`BOOT`].
    pub fn new(active: Arc<ArcSwap<Version>>, labels: Arc<Labels>, boot: Option<PathBuf>) -> Policies {
        let version = active.load_full();
        Policies {
            active,
            labels,
            registry: parking_lot::Mutex::new(Registry {
                active: Arc::from(BOOT),
                loaded: vec![Entry {
                    name: Arc::from(BOOT),
                    path: boot,
                    version,
                    _watching: None,
                }],
                labels: Vec::new(),
                discarded: Vec::new(),
            }),
        }
    }

    /// The current version of the policy `name`.
    pub fn version(&self, name: &str) -> Option<Arc<Version>> {
        let registry = self.registry.lock();
        registry.entry(name).map(|entry| entry.version.clone())
    }

    /// Refuses a name that is taken or not a VCL name, before anything is loaded.
    pub fn check_new_name(&self, name: &str) -> Result<(), VclError> {
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(VclError::BadName(name.to_string()));
        }
        if self.registry.lock().taken(name) {
            return Err(VclError::Exists(name.to_string()));
        }
        Ok(())
    }

    /// Adds the newly loaded policy `name` (`vcl.load`), watched until discarded through
    /// `watching`.
    pub fn add(
        &self,
        name: &str,
        path: PathBuf,
        version: Arc<Version>,
        watching: Option<watch::Sender<bool>>,
    ) -> Result<(), VclError> {
        let mut registry = self.registry.lock();
        if registry.taken(name) {
            return Err(VclError::Exists(name.to_string()));
        }
        registry.loaded.push(Entry {
            name: Arc::from(name),
            path: Some(path),
            version,
            _watching: watching,
        });
        Ok(())
    }

    /// A reload of `name` succeeded: its new version serves wherever the policy is used.
    pub fn installed(&self, name: &str, version: Arc<Version>) {
        let mut registry = self.registry.lock();
        let Some(entry) = registry.loaded.iter_mut().find(|entry| &*entry.name == name) else {
            // Discarded while it reloaded: nothing uses it any more.
            return;
        };
        let old = std::mem::replace(&mut entry.version, version.clone());
        let entry_name = entry.name.clone();
        registry.discarded.push((entry_name, Arc::downgrade(&old)));
        drop(old);
        if &*registry.active == name {
            self.active.store(version);
        }
        self.publish_labels(&mut registry);
    }

    /// `vcl.use NAME`: new requests start on `name`; requests running keep theirs.
    pub fn use_policy(&self, name: &str) -> Result<(), VclError> {
        let mut registry = self.registry.lock();
        if registry.label(name).is_some() {
            return Err(VclError::LabelOfLabel(name.to_string()));
        }
        let version = registry
            .entry(name)
            .map(|entry| entry.version.clone())
            .ok_or_else(|| VclError::Unknown(name.to_string()))?;
        registry.active = Arc::from(name);
        self.active.store(version);
        Ok(())
    }

    /// `vcl.label LABEL NAME`: `return (vcl(LABEL))` goes to `name` from now on (a label that
    /// exists is moved).
    pub fn label(&self, label: &str, name: &str) -> Result<(), VclError> {
        let mut registry = self.registry.lock();
        if registry.entry(label).is_some() {
            return Err(VclError::Exists(label.to_string()));
        }
        if registry.label(name).is_some() {
            return Err(VclError::LabelOfLabel(name.to_string()));
        }
        let entry = registry
            .entry(name)
            .ok_or_else(|| VclError::Unknown(name.to_string()))?;
        if entry
            .version
            .policy
            .as_ref()
            .is_some_and(|program| !program.labels().is_empty())
        {
            return Err(VclError::Nested {
                name: name.to_string(),
            });
        }
        let target: Arc<str> = entry.name.clone();
        match registry
            .labels
            .iter_mut()
            .find(|(existing, _)| &**existing == label)
        {
            Some((_, points_to)) => *points_to = target,
            None => registry.labels.push((Arc::from(label), target)),
        }
        self.publish_labels(&mut registry);
        Ok(())
    }

    /// `vcl.discard NAME`: removes a policy (not the active one, nor one a label points to),
    /// or a label (not one a loaded policy switches to). A policy's version is dropped when
    /// its last request ends.
    pub fn discard(&self, name: &str) -> Result<(), VclError> {
        let mut registry = self.registry.lock();
        if registry.label(name).is_some() {
            let users: Vec<&str> = registry
                .loaded
                .iter()
                .filter(|entry| {
                    entry
                        .version
                        .policy
                        .as_ref()
                        .is_some_and(|program| program.labels().contains(&name))
                })
                .map(|entry| &*entry.name)
                .collect();
            if !users.is_empty() {
                return Err(VclError::LabelInUse {
                    label: name.to_string(),
                    users: users.join(", "),
                });
            }
            registry.labels.retain(|(label, _)| &**label != name);
            self.publish_labels(&mut registry);
            return Ok(());
        }
        if registry.entry(name).is_none() {
            return Err(VclError::Unknown(name.to_string()));
        }
        if &*registry.active == name {
            return Err(VclError::Active(name.to_string()));
        }
        let labels: Vec<&str> = registry
            .labels
            .iter()
            .filter(|(_, target)| &**target == name)
            .map(|(label, _)| &**label)
            .collect();
        if !labels.is_empty() {
            return Err(VclError::Labelled {
                name: name.to_string(),
                labels: labels.join(", "),
            });
        }
        let at = registry
            .loaded
            .iter()
            .position(|entry| &*entry.name == name)
            .expect("found above");
        let entry = registry.loaded.remove(at);
        registry
            .discarded
            .push((entry.name.clone(), Arc::downgrade(&entry.version)));
        Ok(())
    }

    /// `vcl.list`: the policies in load order, then the labels, then what was discarded and
    /// still serves requests.
    pub fn list(&self) -> Vec<Listed> {
        let mut registry = self.registry.lock();
        registry
            .discarded
            .retain(|(_, version)| version.strong_count() > 0);
        let registry = &*registry;
        let mut rows = Vec::new();
        for entry in &registry.loaded {
            let active = *entry.name == *registry.active;
            let labelled = registry
                .labels
                .iter()
                .filter(|(_, target)| *target == entry.name)
                .count();
            // The references the registry, the active slot and the label map hold are not
            // requests.
            let held = 1 + usize::from(active) + labelled;
            let busy = Arc::strong_count(&entry.version).saturating_sub(held);
            rows.push(Listed {
                name: entry.name.to_string(),
                status: if active { "active" } else { "available" },
                temperature: if active || labelled > 0 || busy > 0 {
                    "warm"
                } else {
                    "cold"
                },
                busy,
                label_of: None,
                generation: Some(entry.version.generation),
                path: entry.path.as_ref().map(|path| path.display().to_string()),
            });
        }
        for (label, target) in &registry.labels {
            rows.push(Listed {
                name: label.to_string(),
                status: "available",
                temperature: "warm",
                busy: 0,
                label_of: Some(target.to_string()),
                generation: None,
                path: None,
            });
        }
        for (name, version) in &registry.discarded {
            let busy = version.strong_count();
            rows.push(Listed {
                name: name.to_string(),
                status: "discarded",
                temperature: "busy",
                busy,
                label_of: None,
                generation: version.upgrade().map(|version| version.generation),
                path: None,
            });
        }
        rows
    }

    /// Rebuilds the label map requests read.
    fn publish_labels(&self, registry: &mut Registry) {
        let map = registry
            .labels
            .iter()
            .filter_map(|(label, target)| Some((label.clone(), registry.entry(target)?.version.clone())))
            .collect();
        self.labels.map.store(Arc::new(map));
        registry
            .discarded
            .retain(|(_, version)| version.strong_count() > 0);
    }
}

impl Registry {
    fn entry(&self, name: &str) -> Option<&Entry> {
        self.loaded.iter().find(|entry| &*entry.name == name)
    }

    fn label(&self, name: &str) -> Option<&Arc<str>> {
        self.labels
            .iter()
            .find(|(label, _)| &**label == name)
            .map(|(_, target)| target)
    }

    /// Policies and labels share one name space, as in Varnish.
    fn taken(&self, name: &str) -> bool {
        self.entry(name).is_some() || self.label(name).is_some()
    }
}

/// `vcl.list` as varnishadm prints it: status, state, temperature, busy, name.
pub fn render_list(rows: &[Listed]) -> String {
    let mut out = String::new();
    for row in rows {
        let state = if row.label_of.is_some() { "label" } else { "auto" };
        let name = match &row.label_of {
            Some(target) => format!("{} -> {target}", row.name),
            None => row.name.clone(),
        };
        out.push_str(&format!(
            "{:<10} {:>5} {:>6} {:>10}    {name}\n",
            row.status, state, row.temperature, row.busy
        ));
    }
    out
}
