//! Loading policy files from disk for the policy language (which does no I/O itself).

use std::path::{Path, PathBuf};

use policy_lang::{Diagnostics, Program, SourceLoader};

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
