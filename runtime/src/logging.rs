//! Log output: tracing to stderr, `RUST_LOG` respected, compact lines or JSON; and where the
//! access log goes: with the rest on stderr, or to `--access-log FILE` (reopened on SIGUSR1,
//! for logrotate), NCSA lines (`--log-format ncsa`) to that file or stdout as varnishncsa.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::filter::{filter_fn, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, NcsaFormat};

/// The tracing target of the access log's events.
pub(crate) const ACCESS_TARGET: &str = "edgecache::access";

/// The NCSA format and where its lines are written, when that is the format.
static NCSA_SINK: OnceLock<(Arc<NcsaFormat>, AccessSink)> = OnceLock::new();

/// Installs the global subscriber. Default level `info` (access log included). With
/// `access_log`, access events go to that file instead of stderr; it is created if missing
/// and appended to.
pub fn init(format: LogFormat, access_log: Option<&Path>) -> std::io::Result<()> {
    let file = access_log.map(AccessFile::open).transpose()?;
    if let Some(file) = &file {
        file.reopen_on_sigusr1()?;
    }
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let access_elsewhere = file.is_some() || matches!(format, LogFormat::Ncsa(_));
    if access_elsewhere {
        // A directive, not a `filter_fn`: a filter function gives no level hint, and without
        // one every `trace!` span of hyper and h2 reaches the registry (most of an HTTP/2
        // request's cost, measured with callgrind).
        filter = filter.add_directive(format!("{ACCESS_TARGET}=off").parse().expect("a valid directive"));
    }
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours);
    let stderr = match format {
        LogFormat::Json => stderr.json().flatten_event(true).boxed(),
        LogFormat::Compact | LogFormat::Ncsa(_) => stderr.compact().with_target(false).boxed(),
    }
    .with_filter(filter);
    let access = match (format, file) {
        (LogFormat::Ncsa(ncsa), file) => {
            let sink = match file {
                Some(file) => AccessSink::File(file),
                None => AccessSink::Stdout,
            };
            let _ = NCSA_SINK.set((ncsa, sink));
            None
        }
        (format, Some(file)) => {
            let layer = tracing_subscriber::fmt::layer()
                .with_writer(move || file.clone())
                .with_ansi(false);
            let layer = match format {
                LogFormat::Json => layer.json().flatten_event(true).boxed(),
                _ => layer.compact().with_target(false).boxed(),
            };
            let access_events =
                filter_fn(|meta| meta.target() == ACCESS_TARGET).with_max_level_hint(LevelFilter::INFO);
            Some(layer.with_filter(access_events))
        }
        (_, None) => None,
    };
    tracing_subscriber::registry().with(stderr).with(access).init();
    Ok(())
}

/// Writes one NCSA access line, made by `line` in the configured format, when that is the
/// log format; false otherwise (the access event then goes through tracing).
pub(crate) fn write_ncsa(line: impl FnOnce(&NcsaFormat) -> String) -> bool {
    let Some((format, sink)) = NCSA_SINK.get() else {
        return false;
    };
    let line = line(format) + "\n";
    let _ = match sink {
        AccessSink::Stdout => std::io::stdout().lock().write_all(line.as_bytes()),
        AccessSink::File(file) => file.clone().write_all(line.as_bytes()),
    };
    true
}

enum AccessSink {
    Stdout,
    File(AccessFile),
}

/// The `--access-log` file, shared by every writer; [`AccessFile::reopen`] swaps in the file
/// now at its path, so logrotate's `postrotate` can `kill -USR1` after moving it away.
#[derive(Clone)]
struct AccessFile {
    path: Arc<PathBuf>,
    file: Arc<Mutex<File>>,
}

impl AccessFile {
    fn open(path: &Path) -> std::io::Result<AccessFile> {
        Ok(AccessFile {
            file: Arc::new(Mutex::new(Self::append(path)?)),
            path: Arc::new(path.to_path_buf()),
        })
    }

    fn append(path: &Path) -> std::io::Result<File> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| {
                std::io::Error::new(
                    error.kind(),
                    format!("--access-log: cannot open {}: {error}", path.display()),
                )
            })
    }

    fn reopen(&self) {
        match Self::append(&self.path) {
            Ok(file) => {
                *self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = file;
                tracing::info!(path = %self.path.display(), "access log reopened (SIGUSR1)");
            }
            Err(error) => tracing::error!(%error, "access log not reopened; still writing the old file"),
        }
    }

    /// Registers SIGUSR1 now (so a signal from then on reopens instead of killing the
    /// process) and serves it on a thread of its own: the proxy's runtime does not exist yet.
    fn reopen_on_sigusr1(&self) -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let mut signal = runtime.block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        })?;
        let file = self.clone();
        std::thread::Builder::new()
            .name("access-log-reopen".into())
            .spawn(move || {
                runtime.block_on(async {
                    while signal.recv().await.is_some() {
                        file.reopen();
                    }
                })
            })?;
        Ok(())
    }
}

impl Write for AccessFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .write(bytes)
    }

    /// A whole line under one lock, so lines of concurrent requests do not interleave.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .write_all(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .flush()
    }
}
