//! Stamps the binary with the commit it was built from and its build profile, for `--version`
//! (what an operator pastes into a bug report). Outside a git checkout, such as a crate
//! downloaded from a registry, the commit reads `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|commit| commit.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=EDGECACHE_COMMIT={commit}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=EDGECACHE_PROFILE={profile}");
    // Rebuild the stamp when HEAD moves: HEAD itself names the branch, the branch's ref file
    // (or packed-refs) the commit.
    let git = Path::new(".git");
    if git.is_dir() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        println!("cargo:rerun-if-changed=.git/packed-refs");
        if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
            if let Some(reference) = head.strip_prefix("ref: ") {
                println!("cargo:rerun-if-changed=.git/{}", reference.trim());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
