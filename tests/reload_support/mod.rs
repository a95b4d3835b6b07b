//! Helpers shared by the reload and admin tests: policy files in a temp dir, the ways editors
//! and deployment tools replace them, waiting for a reload, and admin API calls.
//!
//! Waiting for a reload is the one place these tests poll: the watcher reacts to a file-system
//! event after a debounce, and there is no signal to wait on from outside but the new version
//! itself. [`wait_for_generation`] polls `Running::active_version()` every 10 ms and gives up
//! after [`RELOAD_LIMIT`], far above the ~150 ms a reload takes.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgecache_runtime::admin::client::{self, Reply};
use edgecache_runtime::{Config, Running};

/// Upper bound for a reload to be seen; never reached when things work.
pub const RELOAD_LIMIT: Duration = Duration::from_secs(10);
/// How often a wait for a reload looks again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// A policy whose `vcl_deliver` marks every response with `X-Policy: marker`.
pub fn marking(marker: &str) -> String {
    format!("vcl 4.1;\n\nsub vcl_deliver {{\n    set resp.http.X-Policy = \"{marker}\";\n}}\n")
}

/// A policy with a syntax error on line 4 (a missing `;`).
pub fn broken(marker: &str) -> String {
    format!("vcl 4.1;\n\nsub vcl_deliver {{\n    set resp.http.X-Policy = \"{marker}\"\n}}\n")
}

/// Truncates the file and writes the new contents into the same inode (what `>` and many
/// editors' "save" do).
pub fn write_in_place(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write policy in place");
}

/// Writes a sibling temp file and renames it over `path` (vim, `sed -i`, atomic writers).
pub fn rename_over(path: &Path, text: &str) {
    let temp = path.with_extension("vcl.tmp");
    std::fs::write(&temp, text).expect("write temp policy");
    std::fs::rename(&temp, path).expect("rename over the policy");
}

/// `ln -sfn target link`: a new symlink renamed over the old one.
pub fn swap_symlink(target: &Path, link: &Path) {
    let temp = link.with_extension("link.tmp");
    let _ = std::fs::remove_file(&temp);
    std::os::unix::fs::symlink(target, &temp).expect("create symlink");
    std::fs::rename(&temp, link).expect("rename symlink over the link");
}

/// Starts edgecache in front of `backend` with `policy`, the admin API on `127.0.0.1:0`, after
/// `tweak`.
pub async fn start_with_policy(
    backend: SocketAddr,
    policy: &Path,
    tweak: impl FnOnce(&mut Config),
) -> (Running, SocketAddr) {
    super::support::start_proxy(backend, |config| {
        config.policy = Some(policy.to_path_buf());
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        tweak(config);
    })
    .await
}

/// A policy file alone in a temp dir that is removed when this is dropped; derefs to its path.
pub struct PolicyFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for PolicyFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

/// Writes `text` to `policy.vcl` in a fresh temp dir and starts edgecache on it as
/// [`start_with_policy`] does. Keep the file for the whole test: it is where edits go.
pub async fn start_watching(
    backend: SocketAddr,
    text: &str,
    tweak: impl FnOnce(&mut Config),
) -> (PolicyFile, Running, SocketAddr) {
    let dir = temp_dir();
    let path = path_in(&dir, "policy.vcl");
    write_in_place(&path, text);
    let (running, addr) = start_with_policy(backend, &path, tweak).await;
    (PolicyFile { path, _dir: dir }, running, addr)
}

/// Waits until the active version's generation reaches `generation` (bounded polling; see the
/// module doc).
pub async fn wait_for_generation(running: &Running, generation: u64) {
    super::support::poll_until(RELOAD_LIMIT, POLL_EVERY, || {
        let active = running.active_version().generation;
        (active >= generation).then_some(()).ok_or_else(|| {
            format!(
                "generation {generation} never came (still {active}); reloads: {:?}",
                running.reload_status()
            )
        })
    })
    .await
}

/// Waits until `failed` reloads have failed (bounded polling; see the module doc).
pub async fn wait_for_failures(running: &Running, failed: u64) {
    super::support::poll_until(RELOAD_LIMIT, POLL_EVERY, || {
        let status = running.reload_status();
        (status.failed >= failed)
            .then_some(())
            .ok_or_else(|| format!("{failed} failed reload(s) never came: {status:?}"))
    })
    .await
}

/// The `X-Policy` header of a response ("" when absent).
/// Waits for `generation` to be active, then checks that it serves: a request gets `marker`.
pub async fn serves_generation(
    running: &Running,
    addr: std::net::SocketAddr,
    generation: u64,
    marker_text: &str,
) {
    wait_for_generation(running, generation).await;
    let reply = super::support::get(addr, "/", &[]).await;
    assert_eq!(marker(&reply), marker_text, "generation {generation}");
}

pub fn marker(reply: &super::support::Reply) -> String {
    reply
        .headers
        .get("x-policy")
        .map_or(String::new(), |v| v.to_str().unwrap().to_string())
}

/// One admin API call without a token.
pub async fn admin(running: &Running, method: &str, target: &str, body: &str) -> Reply {
    admin_with_token(running, None, method, target, body).await
}

pub async fn admin_with_token(
    running: &Running,
    token: Option<&str>,
    method: &str,
    target: &str,
    body: &str,
) -> Reply {
    let addr = running.admin_addr().expect("the admin API is on");
    client::call(addr, token, method, target, body.to_string())
        .await
        .unwrap_or_else(|error| panic!("{method} {target}: {error}"))
}

/// `GET target` on the admin API, parsed as JSON.
pub async fn admin_json(running: &Running, target: &str) -> serde_json::Value {
    let reply = admin(running, "GET", target, "").await;
    assert_eq!(reply.status, 200, "{target}: {}", reply.body);
    serde_json::from_str(&reply.body).unwrap_or_else(|error| panic!("{target}: {error}: {}", reply.body))
}

/// A temp dir that lives as long as the test.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

pub fn path_in(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}
