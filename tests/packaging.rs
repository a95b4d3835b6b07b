//! What a packager and an operator rely on: `--version` names the build, `edgecache man`
//! renders the manual page, the systemd unit in `dist/` passes `systemd-analyze verify`, and a
//! `Type=notify` unit learns when edgecache is ready.

mod support;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};

use support::EXCHANGE_LIMIT;

const EDGECACHE: &str = env!("CARGO_BIN_EXE_edgecache");

fn output_of(args: &[&str]) -> String {
    let output = Command::new(EDGECACHE).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "edgecache {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn version_names_the_commit_and_the_build_profile() {
    let version = output_of(&["--version"]);
    let pattern = regex::Regex::new(
        r"^edgecache \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown), (debug|release) build\)\n$",
    )
    .unwrap();
    assert!(pattern.is_match(&version), "{version:?}");
}

#[test]
fn man_page_documents_every_flag_and_subcommand() {
    let page = output_of(&["man"]);
    assert!(
        page.contains(".TH edgecache 1"),
        "a section 1 page: {}",
        &page[..200.min(page.len())]
    );
    for needle in [
        r"\-\-policy",
        r"\-\-admin\-listen",
        r"\-\-cache\-size",
        r"\-\-backend",
        "check",
        "admin",
    ] {
        assert!(page.contains(needle), "the page mentions {needle}");
    }
}

/// The unit as shipped, with ExecStart pointing at the binary under test and its manual page
/// installed where `man` finds it (verify runs `man` for the Documentation= line).
#[test]
fn systemd_unit_verifies() {
    if Command::new("systemd-analyze").arg("--version").output().is_err() {
        eprintln!("systemd-analyze is not installed here; the unit is not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/edgecache.service")).unwrap();
    assert!(unit.contains("Type=notify") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"));
    let unit = unit.replace("/usr/local/bin/edgecache", EDGECACHE);
    let unit_path = dir.path().join("edgecache.service");
    std::fs::write(&unit_path, unit).unwrap();
    let man_dir = dir.path().join("man/man1");
    std::fs::create_dir_all(&man_dir).unwrap();
    std::fs::write(man_dir.join("edgecache.1"), output_of(&["man"])).unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path)
        .env("MANPATH", dir.path().join("man"))
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// systemd's notify protocol: one datagram `READY=1` on $NOTIFY_SOCKET, sent once the
/// listener accepts connections.
#[tokio::test]
async fn notify_socket_hears_ready_once_edgecache_listens() {
    let origin = support::Origin::fixed(support::OriginReply::ok("ready")).await;
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(EXCHANGE_LIMIT)).unwrap();
    let listen = support::unused_port().await;
    let admin = support::unused_port().await;
    let mut child = Command::new(EDGECACHE)
        .args(["--no-watch", "-a", &listen.to_string(), "-T", &admin.to_string()])
        .args(["-b", &origin.addr.to_string()])
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut message = [0u8; 256];
    let received = socket.recv(&mut message);
    let answered = match &received {
        Ok(_) => support::try_get(listen, "/ready", &[])
            .await
            .map(|reply| reply.status),
        Err(_) => Err("no notification".to_string()),
    };
    let _ = child.kill();
    let _ = child.wait();
    let length = received.expect("edgecache notifies $NOTIFY_SOCKET");
    assert_eq!(std::str::from_utf8(&message[..length]).unwrap().trim(), "READY=1");
    assert_eq!(answered.unwrap(), 200, "ready means the listener already answers");
}
