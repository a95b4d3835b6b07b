//! The file watcher: notices edits of the policy and its includes (or of TLS certificates, see
//! [`Watchable`]) and asks for a reload.
//!
//! Editors and deployment tools replace files in different ways, and a watch on the file itself
//! (its inode) misses most of them: vim and `sed -i` write a new file and rename it over the old
//! one, `ln -sfn` swaps a symlink, Kubernetes ConfigMaps swap a `..data` symlink to a new
//! directory. So the watcher watches *directories*, non-recursively:
//!
//! - the directory holding each file, as the path names it (rename-over, truncate-and-write,
//!   `ln -sfn` on the file);
//! - the directory holding the file the path resolves to (edits of a symlink's target);
//! - the directory holding each symlinked ancestor of the path (`ln -sfn v2 current` where the
//!   path is `current/policy.vcl`).
//!
//! An event counts when it names one of those files or symlinks, or a `..`-prefixed entry (the
//! ConfigMap writer's `..data`, `..data_tmp`, `..2024_...`), or any entry of a directory
//! watched whole (a certificate directory, where a new file matters); reads (our own included)
//! never count. Events are debounced: after the first one the watcher waits until 150 ms pass
//! without another (at most 1 s after the first), then fingerprints the files and reloads only if they
//! changed since the last attempt (or the last attempt failed). After every check the watched
//! set is computed again from the active version, since includes and symlinks may have changed.

use std::collections::HashSet;
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What a watcher watches, and what it does when the files change.
pub(crate) trait Watchable: Send + Sync + 'static {
    /// What the files are, for log lines ("policy", "TLS certificate").
    fn what(&self) -> &'static str;
    /// The files as the active version read them.
    fn watched_files(&self) -> Vec<PathBuf>;
    /// Directories in which every entry counts.
    fn watched_dirs(&self) -> Vec<PathBuf> {
        Vec::new()
    }
    /// Whether the files differ from what the last attempt read, or it failed. Reads the files:
    /// called on a blocking thread.
    fn worth_trying(&self) -> bool;
    /// Loads the files again; a failure is logged and the old version keeps serving.
    fn changed(self: Arc<Self>) -> impl Future<Output = ()> + Send;
}

/// Quiet time that ends a burst of events.
const QUIET: Duration = Duration::from_millis(150);
/// Longest wait after the first event of a burst, so a file rewritten non-stop still reloads.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Starts watching the active version's files; the task ends when `stopped` turns true.
pub(crate) fn spawn<T: Watchable>(
    target: Arc<T>,
    mut stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, String> {
    let (events, mut received) = mpsc::unbounded_channel::<notify::Result<Event>>();
    let watcher = notify::recommended_watcher(move |event| {
        let _ = events.send(event);
    })
    .map_err(|error| format!("cannot start the file watcher: {error}"))?;
    let mut watched = Watched {
        watcher,
        what: target.what(),
        dirs: HashSet::new(),
        names: HashSet::new(),
        whole_dirs: HashSet::new(),
    };
    watched.update(&target.watched_files(), &target.watched_dirs());
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stopped.changed() => return,
                event = received.recv() => match event {
                    None => return,
                    Some(event) if watched.counts(&event) => {}
                    Some(_) => continue,
                },
            }
            let first = Instant::now();
            loop {
                let left = MAX_WAIT.saturating_sub(first.elapsed());
                if left.is_zero() {
                    break;
                }
                match tokio::time::timeout(QUIET.min(left), received.recv()).await {
                    Err(_quiet) => break,
                    Ok(None) => return,
                    Ok(Some(_more)) => {}
                }
            }
            if *stopped.borrow() {
                return;
            }
            let check = target.clone();
            let worth_trying = tokio::task::spawn_blocking(move || check.worth_trying())
                .await
                .unwrap_or(true);
            if worth_trying {
                target.clone().changed().await;
            }
            watched.update(&target.watched_files(), &target.watched_dirs());
        }
    }))
}

/// The directories under watch and the entry names that matter in them.
struct Watched {
    watcher: RecommendedWatcher,
    what: &'static str,
    dirs: HashSet<PathBuf>,
    names: HashSet<OsString>,
    /// Directories whose every entry counts.
    whole_dirs: HashSet<PathBuf>,
}

impl Watched {
    /// Watches what `files` and `whole_dirs` need, and stops watching what they no longer need.
    fn update(&mut self, files: &[PathBuf], whole_dirs: &[PathBuf]) {
        let whole_dirs: HashSet<PathBuf> = whole_dirs
            .iter()
            .filter_map(|dir| std::path::absolute(dir).ok())
            .collect();
        let mut dirs = whole_dirs.clone();
        let mut names = HashSet::new();
        for file in files {
            let Ok(path) = std::path::absolute(file) else {
                continue;
            };
            note(&path, &mut dirs, &mut names);
            if let Ok(resolved) = std::fs::canonicalize(&path) {
                note(&resolved, &mut dirs, &mut names);
            }
            for ancestor in path.ancestors().skip(1) {
                if std::fs::symlink_metadata(ancestor).is_ok_and(|meta| meta.is_symlink()) {
                    note(ancestor, &mut dirs, &mut names);
                }
            }
        }
        for gone in self.dirs.difference(&dirs) {
            // The directory may be gone already (a ConfigMap's old `..2024_...`).
            let _ = self.watcher.unwatch(gone);
        }
        for dir in dirs.difference(&self.dirs) {
            if let Err(error) = self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %dir.display(), %error, "cannot watch a {} directory", self.what);
            }
        }
        self.dirs = dirs;
        self.names = names;
        self.whole_dirs = whole_dirs;
    }

    /// Whether an event may have changed a watched file.
    fn counts(&self, event: &notify::Result<Event>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "file watcher error; checking the {} files", self.what);
                return true;
            }
        };
        if event.need_rescan() {
            return true;
        }
        if let EventKind::Access(kind) = event.kind {
            if kind != AccessKind::Close(AccessMode::Write) {
                return false;
            }
        }
        event.paths.iter().any(|path| {
            path.parent().is_some_and(|dir| self.whole_dirs.contains(dir))
                || path.file_name().is_some_and(|name| {
                    self.names.contains(name) || name.as_encoded_bytes().starts_with(b"..")
                })
        })
    }
}

fn note(path: &Path, dirs: &mut HashSet<PathBuf>, names: &mut HashSet<OsString>) {
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        dirs.insert(dir.to_path_buf());
        names.insert(name.to_os_string());
    }
}
