//! Hot reload: builds a new [`Version`] off the request path and swaps it in only if it loaded.
//!
//! Three things ask for a reload: the file watcher ([`watch`]), `SIGHUP`, and the admin API's
//! `POST /reload`. They all go through [`Reloader::reload`], which runs one reload at a time:
//!
//! 1. fingerprint (sha256) the files the active version was read from, so the watcher can tell
//!    later whether the disk changed since this attempt;
//! 2. `Version::load(config, generation + 1, Some(&active))` on a blocking thread: read, check and
//!    compile the policy, set up its backends (unchanged backends keep their pools and counters);
//! 3. on success, store the new version in the `ArcSwap`. Requests already running keep the
//!    `Arc` of the version they started on; the old version is dropped when the last one ends.
//!    On failure, log the rendered diagnostics (`file:line:col`) at error level, remember the
//!    failure for `/status`, and keep serving the old version.
//!
//! This is the only module that writes `Shared::active` after start. The cache lives outside
//! versions, so every stored object survives a reload.
//!
//! Several policies may be loaded at once (`vcl.load`, [`policies`]): each has a reloader of
//! its own, watching its own files; the one above reloads the policy given at start (`boot`).

mod policies;
mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::version::Version;
use crate::StartError;

use policies::BOOT;
pub(crate) use policies::{render_list, Labels, Policies, VclError};
pub(crate) use watch::{spawn as spawn_watcher, Watchable};

/// What asked for a reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The file watcher saw the policy or an include change.
    Watch,
    /// `SIGHUP`.
    Signal,
    /// `POST /reload` on the admin API.
    Admin,
    /// [`crate::Running::reload`], from code embedding the runtime.
    Api,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Watch => "watch",
            Trigger::Signal => "signal",
            Trigger::Admin => "admin",
            Trigger::Api => "api",
        }
    }
}

/// A reload that failed; the previous version kept serving.
#[derive(Clone, Debug)]
pub struct ReloadFailure {
    pub at: SystemTime,
    pub trigger: Trigger,
    /// The rendered diagnostics (`file:line:col: error[...]`), or the backend error.
    pub message: String,
}

impl std::fmt::Display for ReloadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What the admin status reports about reloads.
#[derive(Clone, Debug, Default)]
pub struct ReloadStatus {
    /// Successful reloads since start.
    pub ok: u64,
    /// Failed reloads since start (the old version kept serving each time).
    pub failed: u64,
    /// Hex sha256 of the active version's policy files (paths and contents, in load order);
    /// `None` without a policy.
    pub active_sha256: Option<String>,
    /// The most recent failure, kept after later successes (compare `at` with the active
    /// version's `loaded_at`).
    pub last_error: Option<ReloadFailure>,
    /// Whether the most recent attempt failed, i.e. what is on disk is not what serves.
    pub failing: bool,
}

struct State {
    status: ReloadStatus,
    /// Fingerprint of the files taken just before the last attempt (success or failure).
    attempted: Option<[u8; 32]>,
}

/// Runs reloads, one at a time, and remembers how they went.
pub(crate) struct Reloader {
    /// Its `policy` is the file of this reloader's policy.
    config: Config,
    /// The policy this reloader reloads ([`BOOT`] for the one given at start).
    name: Arc<str>,
    policies: Arc<Policies>,
    one_at_a_time: tokio::sync::Mutex<()>,
    state: parking_lot::Mutex<State>,
    /// Also run on a reload that is not the policy watcher's (SIGHUP, `POST /reload`, the
    /// API): reading the TLS certificates again. Blocking; logs its own outcome.
    also: Option<Arc<dyn Fn(Trigger) + Send + Sync>>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("status", &self.state.lock().status)
            .finish_non_exhaustive()
    }
}

impl Reloader {
    /// A reloader for the version `active` serves now (the [`BOOT`] policy); it writes
    /// `active`, and `labels` for the policies loaded later. Reads the policy files once to
    /// fingerprint them (a change between the start-up load and this read is caught by the
    /// next event or reload).
    pub fn new(config: &Config, active: Arc<ArcSwap<Version>>, labels: Arc<Labels>) -> Reloader {
        let policies = Arc::new(Policies::new(active, labels, config.policy.clone()));
        Reloader::for_policy(config.clone(), Arc::from(BOOT), policies)
    }

    /// The reloader of the policy `name` of `policies`, whose file is `config.policy`.
    fn for_policy(config: Config, name: Arc<str>, policies: Arc<Policies>) -> Reloader {
        let current = policies.version(&name).expect("the policy is registered first");
        let files = watched_files(&config, &current);
        let fingerprint = config.policy.as_ref().map(|_| fingerprint(&files));
        Reloader {
            config,
            name,
            policies,
            one_at_a_time: tokio::sync::Mutex::new(()),
            state: parking_lot::Mutex::new(State {
                status: ReloadStatus {
                    active_sha256: fingerprint.as_ref().map(hex),
                    ..ReloadStatus::default()
                },
                attempted: fingerprint,
            }),
            also: None,
        }
    }

    /// Runs `also` on every reload but the policy watcher's.
    pub fn also_reload(&mut self, also: impl Fn(Trigger) + Send + Sync + 'static) {
        self.also = Some(Arc::new(also));
    }

    /// Loads the configuration again and swaps it in if it loaded. Returns the new generation,
    /// or the failure (already logged at error level). Waits for a reload in progress first.
    pub async fn reload(&self, trigger: Trigger) -> Result<u64, ReloadFailure> {
        let _turn = self.one_at_a_time.lock().await;
        let Some(active) = self.policies.version(&self.name) else {
            return Err(ReloadFailure {
                at: SystemTime::now(),
                trigger,
                message: format!("policy `{}` was discarded", self.name),
            });
        };
        let config = self.config.clone();
        let generation = active.generation + 1;
        let started = std::time::Instant::now();
        let also = self.also.clone().filter(|_| trigger != Trigger::Watch);
        let loaded = tokio::task::spawn_blocking(move || {
            if let Some(also) = also {
                also(trigger);
            }
            let files = watched_files(&config, &active);
            let before = fingerprint(&files);
            let loaded = Version::load(&config, generation, Some(&active)).map(|version| {
                let now_files = watched_files(&config, &version);
                // Includes may have changed: fingerprint the new set (what the watcher compares).
                let after = if now_files == files {
                    before
                } else {
                    fingerprint(&now_files)
                };
                (version, after)
            });
            (before, loaded)
        })
        .await;
        let (before, loaded) = match loaded {
            Ok(result) => result,
            Err(join_error) => (
                [0; 32],
                Err(StartError::Backend(format!(
                    "the reload task failed: {join_error}"
                ))),
            ),
        };
        let mut state = self.state.lock();
        state.attempted = Some(before);
        match loaded {
            Ok((version, fingerprint)) => {
                let files = version
                    .source
                    .as_ref()
                    .map(|source| source.files.join(", "))
                    .unwrap_or_default();
                self.policies.installed(&self.name, Arc::new(version));
                state.status.ok += 1;
                state.status.failing = false;
                state.status.active_sha256 = self.config.policy.as_ref().map(|_| hex(&fingerprint));
                state.attempted = Some(fingerprint);
                tracing::info!(
                    policy = %self.name,
                    generation,
                    trigger = trigger.as_str(),
                    files = %files,
                    took_ms = started.elapsed().as_secs_f64() * 1e3,
                    "reloaded: new requests use the new version"
                );
                Ok(generation)
            }
            Err(error) => {
                let message = match error {
                    StartError::Policy { rendered, .. } => rendered,
                    other => other.to_string(),
                };
                tracing::error!(
                    "reload ({}) failed; the previous version keeps serving:\n{message}",
                    trigger.as_str()
                );
                let failure = ReloadFailure {
                    at: SystemTime::now(),
                    trigger,
                    message,
                };
                state.status.failed += 1;
                state.status.failing = true;
                state.status.last_error = Some(failure.clone());
                Err(failure)
            }
        }
    }

    /// How reloads went so far.
    pub fn status(&self) -> ReloadStatus {
        self.state.lock().status.clone()
    }

    /// Whether a reload should be tried: the policy files differ from what the last attempt
    /// read, or the last attempt failed (its includes are unknown, so any change may fix it).
    /// Reads the files: call off the request path.
    fn worth_trying(&self) -> bool {
        let files = self.watched_files();
        let now = fingerprint(&files);
        let state = self.state.lock();
        state.status.failing || state.attempted != Some(now)
    }

    /// The policy file and every file it includes, as the active version read them.
    fn watched_files(&self) -> Vec<PathBuf> {
        match self.policies.version(&self.name) {
            Some(version) => watched_files(&self.config, &version),
            None => Vec::new(),
        }
    }

    /// The loaded policies, the active one and the labels (`vcl.*`).
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// `vcl.load NAME FILE`: reads, checks and compiles `path` as the policy `name`, not
    /// active (`vcl.use` makes it so), reloaded from then on when its files change (when the
    /// policy files are watched). Returns its generation (1).
    pub async fn vcl_load(&self, name: &str, path: PathBuf) -> Result<u64, VclError> {
        self.policies.check_new_name(name)?;
        let config = Config {
            policy: Some(path.clone()),
            ..self.config.clone()
        };
        let loading = config.clone();
        let loaded = tokio::task::spawn_blocking(move || Version::load(&loading, 1, None))
            .await
            .map_err(|error| VclError::Load(format!("the load task failed: {error}")))?;
        let version = loaded.map_err(|error| {
            VclError::Load(match error {
                StartError::Policy { rendered, .. } => rendered,
                other => other.to_string(),
            })
        })?;
        let generation = version.generation;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let watching = config.watch_policy.then_some(stop);
        self.policies
            .add(name, path.clone(), Arc::new(version), watching)?;
        let name: Arc<str> = Arc::from(name);
        let policies = self.policies.clone();
        let reloader =
            tokio::task::spawn_blocking(move || Arc::new(Reloader::for_policy(config, name, policies)))
                .await
                .map_err(|error| VclError::Load(format!("the load task failed: {error}")))?;
        if reloader.config.watch_policy {
            if let Err(error) = spawn_watcher(reloader, stopped) {
                tracing::error!(%error, path = %path.display(), "the loaded policy's files are not watched");
            }
        }
        Ok(generation)
    }
}

impl Watchable for Reloader {
    fn what(&self) -> &'static str {
        "policy"
    }

    fn watched_files(&self) -> Vec<PathBuf> {
        Reloader::watched_files(self)
    }

    fn worth_trying(&self) -> bool {
        Reloader::worth_trying(self)
    }

    async fn changed(self: Arc<Self>) {
        // A failure is logged and recorded by the reloader; the old version serves on.
        let _ = self.reload(Trigger::Watch).await;
    }
}

/// The files a version was read from: the entry first, then its includes.
fn watched_files(config: &Config, version: &Version) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = config.policy.iter().cloned().collect();
    for file in version.source.iter().flat_map(|source| source.files.iter()) {
        let file = PathBuf::from(file);
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

/// sha256 over each file's path and contents (a missing file, or one that is not a regular
/// file, hashes as missing: a FIFO or a device would block or never end).
pub(crate) fn fingerprint(files: &[PathBuf]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        let regular = std::fs::metadata(file).is_ok_and(|metadata| metadata.is_file());
        match regular.then(|| std::fs::read(file).ok()).flatten() {
            Some(contents) => {
                hasher.update((contents.len() as u64).to_be_bytes());
                hasher.update(&contents);
            }
            None => hasher.update(b"\xffmissing"),
        }
    }
    hasher.finalize().into()
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
