//! The file watcher: notices edits of the policy and its includes and asks for a reload.
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
//! ConfigMap writer's `..data`, `..data_tmp`, `..2024_...`); reads (our own included) never
//! count. Events are debounced: after the first one the watcher waits until 150 ms pass without
//! another (at most 1 s after the first), then fingerprints the files and reloads only if they
//! changed since the last attempt (or the last attempt failed). After every check the watched
//! set is computed again from the active version, since includes and symlinks may have changed.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Reloader, Trigger};

/// Quiet time that ends a burst of events.
const QUIET: Duration = Duration::from_millis(150);
/// Longest wait after the first event of a burst, so a file rewritten non-stop still reloads.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// Starts watching the active version's files; the task ends when `stopped` turns true.
pub(crate) fn spawn(
    reloader: Arc<Reloader>,
    mut stopped: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, String> {
    let (events, mut received) = mpsc::unbounded_channel::<notify::Result<Event>>();
    let watcher = notify::recommended_watcher(move |event| {
        let _ = events.send(event);
    })
    .map_err(|error| format!("cannot start the file watcher: {error}"))?;
    let mut watched = Watched {
        watcher,
        dirs: HashSet::new(),
        names: HashSet::new(),
    };
    watched.update(&reloader.watched_files());
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
            let check = reloader.clone();
            let worth_trying = tokio::task::spawn_blocking(move || check.worth_trying())
                .await
                .unwrap_or(true);
            if worth_trying {
                // A failure is logged and recorded by the reloader; the old version serves on.
                let _ = reloader.reload(Trigger::Watch).await;
            }
            let files = reloader.watched_files();
            watched.update(&files);
        }
    }))
}

/// The directories under watch and the entry names that matter in them.
struct Watched {
    watcher: RecommendedWatcher,
    dirs: HashSet<PathBuf>,
    names: HashSet<OsString>,
}

impl Watched {
    /// Watches what `files` need, and stops watching what they no longer need.
    fn update(&mut self, files: &[PathBuf]) {
        let mut dirs = HashSet::new();
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
                tracing::warn!(dir = %dir.display(), %error, "cannot watch a policy directory");
            }
        }
        self.dirs = dirs;
        self.names = names;
    }

    /// Whether an event may have changed a policy file.
    fn counts(&self, event: &notify::Result<Event>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "file watcher error; checking the policy files");
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
        event
            .paths
            .iter()
            .filter_map(|path| path.file_name())
            .any(|name| self.names.contains(name) || name.as_encoded_bytes().starts_with(b".."))
    }
}

fn note(path: &Path, dirs: &mut HashSet<PathBuf>, names: &mut HashSet<OsString>) {
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        dirs.insert(dir.to_path_buf());
        names.insert(name.to_os_string());
    }
}
