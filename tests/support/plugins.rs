//! The example plugins of `examples/plugins/`, built by its `build.sh` once per test binary,
//! and paths to them and to the WAT sandbox plugins.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use edgecache_runtime::Running;

use super::Origin;

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins")
}

/// Builds the example plugins once per test run and returns `dist/` with what `build.sh`
/// printed. The test command installs the wasm32-wasip1 target (`.ci/run`), so a failed build
/// fails the tests.
pub fn built() -> &'static (PathBuf, String) {
    static BUILT: OnceLock<(PathBuf, String)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Command::new("bash")
            .arg(examples().join("build.sh"))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .expect("run examples/plugins/build.sh");
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "examples/plugins/build.sh failed:\n{log}");
        (examples().join("dist"), log)
    })
}

pub fn dist() -> PathBuf {
    built().0.clone()
}

pub fn wat(name: &str) -> String {
    examples().join("wat").join(name).display().to_string()
}

pub fn wasm(name: &str) -> String {
    dist().join(name).display().to_string()
}

/// The proxy in front of `origin` with `policy`. The CPU deadline is wall-clock, on a machine
/// shared with parallel tests (and body callbacks do work in proportion to the body): tests
/// not about the deadline get 100 ms, not 5 ms.
pub async fn start_with_generous_deadline(policy: &str, origin: &Origin) -> (Running, SocketAddr) {
    let path = super::write_policy("plugins-generous", policy);
    super::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(100);
    })
    .await
}
