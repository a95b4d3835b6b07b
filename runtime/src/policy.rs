//! Loading policy files from disk for the policy language (which does no I/O itself), and the
//! WebAssembly plugins a policy declares.

use std::path::{Path, PathBuf};

use policy_lang::{Diagnostics, PluginIsolation, Program, SourceLoader};

use crate::plugin::{Isolation, LoadError, Plugin, PluginHost, PluginSpec};

/// Reads the entry file and its `include`s, each relative to the file that includes it.
struct FileLoader;

impl SourceLoader for FileLoader {
    fn load(&self, path: &str, from: Option<&str>) -> Result<(String, String), String> {
        let base = from
            .and_then(|file| Path::new(file).parent())
            .unwrap_or(Path::new(""));
        let full: PathBuf = base.join(path);
        let text = std::fs::read_to_string(&full)
            .map_err(|error| format!("cannot read {}: {error}", full.display()))?;
        Ok((full.display().to_string(), text))
    }
}

/// Parses, checks and compiles the policy at `path`.
pub fn load(path: &Path) -> Result<Program, Diagnostics> {
    policy_lang::load(&path.display().to_string(), &FileLoader)
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
