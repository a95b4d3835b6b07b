//! varnishd's flags as an operator types them, against the real binary: every usage error
//! exits 2 naming the flag and what is accepted, and `-P` holds the pid while edgecache runs.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use support::EXCHANGE_LIMIT;

const EDGECACHE: &str = env!("CARGO_BIN_EXE_edgecache");

/// Runs edgecache with `args` (it must refuse them before listening) and returns its exit code
/// and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(EDGECACHE)
        .args(["-a", "127.0.0.1:0"])
        .args(args)
        .output()
        .expect("runs edgecache");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_bad_varnishd_flag_exits_2_naming_what_is_accepted() {
    for (args, wanted) in [
        (
            &["-b", "127.0.0.1:9", "-s", "file,/var/cache/varnish,1g"][..],
            "malloc,SIZE",
        ),
        (&["-b", "127.0.0.1:9", "-s", "malloc"][..], "has no size"),
        (
            &["-b", "127.0.0.1:9", "-p", "default_tll=120"][..],
            "closest: default_ttl",
        ),
        (
            &["-b", "127.0.0.1:9", "-p", "default_ttl=2min"][..],
            "ms, s, m, h, d, w, y",
        ),
        (
            &["-b", "127.0.0.1:9", "-p", "max_restarts=8"][..],
            "max_restarts=4",
        ),
        (
            &["-b", "127.0.0.1:9", "-p", "feature=+esi_ignore_https"][..],
            "feature=+http2",
        ),
        (&["-b", "127.0.0.1:9", "-p", "default_ttl"][..], "NAME=VALUE"),
        (&["-b", "127.0.0.1:9", "-t", "2min"][..], "ms, s, m, h, d, w, y"),
        (
            &["-b", "127.0.0.1:9", "-j", "unix,user=varnish"][..],
            "accepted: none",
        ),
        (
            &["-b", "127.0.0.1:9", "-T", "localhost"][..],
            ":PORT (every interface)",
        ),
        (&["-b", "127.0.0.1:9", "-T", ":6082"][..], "--admin-token-file"),
        (&["-b", "127.0.0.1:9", "--no-such-flag"][..], "--no-such-flag"),
        (&[][..], "-b HOST:PORT"),
    ] {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(wanted), "{args:?}: wanted {wanted:?} in {stderr}");
    }
}

/// A second instance on a taken admin port is told that it is the admin listener and how to
/// move it.
#[test]
fn a_taken_admin_port_is_named_as_the_admin_listener() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let (code, stderr) = refused(&["-b", "127.0.0.1:9", "-T", &address]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("admin listener (-T) cannot listen on {address}"))
            && stderr.contains("pass -T off, or another address"),
        "{stderr}"
    );
}

/// `-P FILE` holds the pid from start to exit; `-F`, `-j none`, `-n`, `-s malloc,SIZE`, `-p`
/// and `-b http://` are accepted on the way.
#[test]
fn pid_file_is_written_at_start_and_removed_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("edgecache.pid");
    let mut child = Command::new(EDGECACHE)
        .args([
            "-a",
            "127.0.0.1:0",
            "-T",
            "off",
            "-F",
            "-j",
            "none",
            "-n",
            "shop-cache",
        ])
        .args(["-s", "malloc,64m", "-p", "default_ttl=2m", "-p", "feature=+http2"])
        .args(["-b", "http://127.0.0.1:9", "-P"])
        .arg(&pid_file)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs edgecache");
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let listening = loop {
        let line = lines
            .recv_timeout(EXCHANGE_LIMIT)
            .expect("edgecache logs that it listens");
        if line.contains("listening") {
            break line;
        }
    };
    assert!(
        listening.contains("shop-cache"),
        "-n names the instance: {listening}"
    );
    let written = std::fs::read_to_string(&pid_file).expect("the pid file exists while running");
    assert_eq!(written.trim(), child.id().to_string());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(!pid_file.exists(), "the pid file is removed at exit");
}
