//! Plugin errors: [`PluginError`] for a failed callback at request time, [`LoadError`] for a
//! plugin that cannot be loaded (reported at policy check / load).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a plugin callback failed. The instance that failed is always discarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The guest trapped (`unreachable`, out-of-bounds access, a Rust panic, `proc_exit`, ...).
    /// The text is wasmtime's trap message, plus the last error the plugin logged if any.
    Trap(String),
    /// The callback ran past its CPU deadline (epoch interruption).
    Deadline,
    /// The guest tried to grow its memory past the limit and then failed.
    OutOfMemory,
    /// The guest broke the ABI: called an unsupported host function, a callback rejected the
    /// configuration, a required export is missing, ...
    Abi(String),
    /// A paused stream was not resumed within the pause timeout (`--plugin-pause-timeout`),
    /// or the instance holding it was replaced.
    PauseTimeout,
}

impl Cause {
    /// A stable short name, for counters and log fields.
    pub fn kind(&self) -> &'static str {
        match self {
            Cause::Trap(_) => "trap",
            Cause::Deadline => "deadline",
            Cause::OutOfMemory => "out_of_memory",
            Cause::Abi(_) => "abi",
            Cause::PauseTimeout => "pause_timeout",
        }
    }

    pub(crate) fn index(&self) -> usize {
        match self {
            Cause::Trap(_) => 0,
            Cause::Deadline => 1,
            Cause::OutOfMemory => 2,
            Cause::Abi(_) => 3,
            Cause::PauseTimeout => 4,
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Trap(msg) => write!(f, "trap: {msg}"),
            Cause::Deadline => f.write_str("CPU deadline exceeded"),
            Cause::OutOfMemory => f.write_str("memory limit exceeded"),
            Cause::Abi(msg) => write!(f, "ABI error: {msg}"),
            Cause::PauseTimeout => f.write_str("the paused stream was not resumed in time"),
        }
    }
}

/// A plugin callback failed. The proxy applies the plugin's `.on_error`; the host has
/// already discarded the instance, counted the error and logged it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugin `{plugin}`: {cause}")]
pub struct PluginError {
    pub plugin: Arc<str>,
    pub cause: Cause,
}

impl PluginError {
    pub fn is_trap(&self) -> bool {
        matches!(self.cause, Cause::Trap(_))
    }
    pub fn is_deadline(&self) -> bool {
        matches!(self.cause, Cause::Deadline)
    }
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self.cause, Cause::OutOfMemory)
    }
    pub fn is_abi(&self) -> bool {
        matches!(self.cause, Cause::Abi(_))
    }
    pub fn is_pause_timeout(&self) -> bool {
        matches!(self.cause, Cause::PauseTimeout)
    }
}

/// A plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("plugin `{plugin}` ({}): {kind}", path.display())]
pub struct LoadError {
    pub plugin: String,
    pub path: PathBuf,
    pub kind: LoadErrorKind,
}

/// What was wrong with the plugin file.
#[derive(Debug, thiserror::Error)]
pub enum LoadErrorKind {
    #[error("file not found")]
    NotFound,
    #[error("cannot read the file: {0}")]
    Read(std::io::Error),
    #[error("not a WebAssembly module: {0}")]
    NotWasm(String),
    #[error("invalid WebAssembly module: {0}")]
    Compile(String),
    #[error(
        "not a proxy-wasm plugin: it exports neither `proxy_abi_version_0_2_0` nor \
         `proxy_abi_version_0_2_1`"
    )]
    NoAbiVersion,
    #[error("unsupported proxy-wasm ABI `{found}`; edgecache supports `proxy_abi_version_0_2_0` and `proxy_abi_version_0_2_1`")]
    UnsupportedAbi { found: String },
    #[error("missing export `{0}`")]
    MissingExport(&'static str),
    #[error("imports that edgecache does not provide: {}", .0.join(", "))]
    MissingImports(Vec<String>),
    #[error("cannot instantiate: {0}")]
    Instantiate(String),
    #[error("start-up failed: {0}")]
    Startup(Cause),
    #[error("`{0}` returned false: the plugin rejected its configuration")]
    Rejected(&'static str),
    #[error("`.upstreams` sends cluster `{cluster}` to `{backend}`, which is not a backend of the policy")]
    UnknownUpstream { cluster: String, backend: String },
}
