//! The `edgecache` command with policies: `edgecache check FILE.vcl...` (exit 0 clean, 1 on
//! errors, diagnostics as `file:line:col`) and `edgecache -f FILE.vcl -b HOST:PORT` serving
//! through the policy with the `-b` origin as the default backend.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use support::{get, unused_port, Origin, OriginReply};

const EDGECACHE: &str = env!("CARGO_BIN_EXE_edgecache");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(files: &[PathBuf]) -> Output {
    Command::new(EDGECACHE)
        .arg("check")
        .args(files)
        .output()
        .expect("edgecache check runs")
}

/// stdout and stderr together: diagnostics go to stderr, the per-file summary to stdout.
fn all_output(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn example_policies() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .expect("examples exists")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "vcl"))
        .collect();
    files.sort();
    files
}

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/policies").join(name)
}

#[test]
fn check_accepts_every_example_policy() {
    let files = example_policies();
    assert!(
        files.len() >= 3,
        "expected default.vcl, wordpress.vcl and litespeed.vcl at least, found {files:?}"
    );
    for file in &files {
        let output = check(std::slice::from_ref(file));
        let text = all_output(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "edgecache check {} failed:\n{text}",
            file.display()
        );
        assert!(text.contains(": ok"), "{}: {text}", file.display());
        assert!(!text.contains("error"), "{}: {text}", file.display());
    }
    // All at once, as an operator would run it.
    let output = check(&files);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
}

#[test]
fn check_reports_an_unknown_variable_with_file_line_and_column() {
    let file = fixture("broken_unknown_variable.vcl");
    let output = check(std::slice::from_ref(&file));
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("broken_unknown_variable.vcl:4:9"),
        "`req.ulr` is on line 4, column 9:\n{text}"
    );
    assert!(text.contains("req.ulr"), "{text}");
    assert!(text.contains("req.url"), "did-you-mean hint:\n{text}");
    assert!(text.contains('^'), "caret under the span:\n{text}");
}

#[test]
fn check_reports_a_syntax_error_with_file_line_and_column() {
    let file = fixture("broken_missing_semicolon.vcl");
    let output = check(std::slice::from_ref(&file));
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("broken_missing_semicolon.vcl:4:27"),
        "the missing `;` is after `\"a\"` on line 4, column 27:\n{text}"
    );
}

#[test]
fn check_reports_several_errors_at_once() {
    let file = fixture("broken_two_errors.vcl");
    let output = check(std::slice::from_ref(&file));
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("broken_two_errors.vcl:5:13"),
        "`return (lookup)` in vcl_recv:\n{text}"
    );
    assert!(
        text.contains("broken_two_errors.vcl:9:22"),
        "string assigned to beresp.ttl:\n{text}"
    );
}

#[test]
fn check_of_a_clean_and_a_broken_file_exits_1() {
    let files = [
        fixture("clean_no_backend.vcl"),
        fixture("broken_unknown_variable.vcl"),
    ];
    let output = check(&files);
    let text = all_output(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("clean_no_backend.vcl: ok"), "{text}");
    assert!(text.contains("broken_unknown_variable.vcl:4:9"), "{text}");
}

// === edgecache -f FILE.vcl -b HOST:PORT ===

/// Kills the server it wraps when dropped (a failed assertion must not leave it running).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_listening(addr: SocketAddr, server: &mut Server) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        if let Some(status) = server.0.try_wait().expect("try_wait") {
            panic!("edgecache exited early with {status}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "edgecache never listened on {addr}"
        );
        // Polling is the only signal a separate process gives that it is listening.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn serve_with_a_policy_without_backends_uses_the_b_origin() {
    let origin = Origin::fixed(OriginReply::ok("from origin").cache_control("max-age=600")).await;
    let listen = unused_port().await;
    let mut server = Server(
        Command::new(EDGECACHE)
            .arg("-f")
            .arg(fixture("clean_no_backend.vcl"))
            .arg("-b")
            .arg(origin.addr.to_string())
            .arg("-a")
            .arg(listen.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("edgecache starts"),
    );
    wait_listening(listen, &mut server).await;

    let first = get(listen, "/cli", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.text(), "from origin");
    assert_eq!(
        first.header("x-policy"),
        Some("clean_no_backend"),
        "vcl_deliver ran"
    );
    assert_eq!(first.cache(), "MISS");
    let second = get(listen, "/cli", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.header("x-policy"), Some("clean_no_backend"));
    assert_eq!(origin.requests(), 1);
}

#[test]
fn serve_refuses_a_broken_policy() {
    let output = Command::new(EDGECACHE)
        .arg("-f")
        .arg(fixture("broken_unknown_variable.vcl"))
        .arg("-b")
        .arg("127.0.0.1:9")
        .arg("-a")
        .arg("127.0.0.1:0")
        .output()
        .expect("edgecache runs");
    let text = all_output(&output);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("broken_unknown_variable.vcl:4:9"), "{text}");
}
