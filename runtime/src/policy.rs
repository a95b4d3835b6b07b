//! Loading policy files from disk for the policy language (which does no I/O itself), and the
//! WebAssembly plugins a policy declares.

use std::path::{Path, PathBuf};

use policy_lang::{Diagnostics, PluginIsolation, Program, SourceLoader};

use crate::plugin::{Isolation, LoadError, Plugin, PluginHost, PluginSpec};

/// Reads the entry file and its `include`s, each relative to the file that includes it.
struct FileLoader;

/// A policy file larger than this is a mistake (a log, a device, a disk image), not a policy.
const MAX_POLICY_FILE: u64 = 16 << 20;

impl SourceLoader for FileLoader {
    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
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
        let text = std::fs::read_to_string(&full).map_err(|error| match error.kind() {
            std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
            _ => error.to_string(),
        })?;
        Ok((full.display().to_string(), text))
    }
}

/// Parses, checks and compiles the policy at `path`.
pub fn load(path: &Path) -> Result<Program, Diagnostics> {
    policy_lang::load(&path.display().to_string(), &FileLoader)
}

/// Checks the include fragment at `path` on its own (`edgecache check --fragment`): names
/// it leaves to the including file are notes.
pub fn check_fragment(path: &Path) -> Diagnostics {
    policy_lang::check_fragment(&path.display().to_string(), &FileLoader)
}

/// Compiles and starts every plugin the policy declares, in declaration order (so a
/// `PluginId` indexes the result). Blocking: compiling takes ~100 ms per SDK-built plugin.
pub fn load_plugins(program: &Program, host: &PluginHost) -> Result<Vec<Plugin>, LoadError> {
    program
        .plugins()
        .iter()
        .map(|decl| {
            let isolation = match decl.isolation {
                PluginIsolation::Shared => Isolation::Shared,
                PluginIsolation::PerRequest => Isolation::PerRequest,
            };
            let spec = PluginSpec::new(&decl.name, &decl.path)
                .config(decl.config.clone().into_bytes())
                .isolation(isolation);
            host.load(&spec)
        })
        .collect()
}
