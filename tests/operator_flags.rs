//! varnishd's flags as an operator types them, against the real binary: every usage error
//! exits 2 naming the flag and what is accepted, and `-P` holds the pid while edgecache runs.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use support::{get, Origin, OriginReply, EXCHANGE_LIMIT};

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
        (
            &["-b", "127.0.0.1:9", "--log-format", "%h %Z"][..],
            "`%Z` is not a format code; accepted: %b",
        ),
        (
            &["-b", "127.0.0.1:9", "--log-format", "apache"][..],
            "accepted: compact, json, ncsa",
        ),
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

/// `edgecache` as a child process with `RUST_LOG=info`, once it listens. Killed when dropped.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// The start-up line naming the listener.
    listening: String,
    addr: SocketAddr,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(EDGECACHE)
            .args(["-a", "127.0.0.1:0", "-T", "off"])
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs edgecache");
        let (send, lines) = mpsc::channel();
        for output in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let send = send.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(output).lines().map_while(Result::ok) {
                    let _ = send.send(line);
                }
            });
        }
        let listening = loop {
            let line = lines
                .recv_timeout(EXCHANGE_LIMIT)
                .expect("edgecache logs that it listens");
            if line.contains("listening") {
                break line;
            }
        };
        // `address=127.0.0.1:PORT` in compact lines, `"address":"127.0.0.1:PORT"` in JSON.
        let addr = regex::Regex::new(r"127\.0\.0\.1:\d+")
            .unwrap()
            .find(&listening)
            .and_then(|addr| addr.as_str().parse().ok())
            .unwrap_or_else(|| panic!("no address in {listening}"));
        Running {
            child,
            lines,
            listening,
            addr,
        }
    }

    /// Waits for an output line (stdout or stderr) containing `text`.
    fn line_with(&self, text: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(EXCHANGE_LIMIT)
                .unwrap_or_else(|_| panic!("no line with {text:?}"));
            if line.contains(text) {
                return line;
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `-P FILE` holds the pid from start to exit; `-F`, `-j none`, `-n`, `-s malloc,SIZE`, `-p`
/// and `-b http://` are accepted on the way.
#[test]
fn pid_file_is_written_at_start_and_removed_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("edgecache.pid");
    let pid_path = pid_file.to_str().unwrap();
    let mut running = Running::start(&[
        "-F",
        "-j",
        "none",
        "-n",
        "shop-cache",
        "-s",
        "malloc,64m",
        "-p",
        "default_ttl=2m",
        "-p",
        "feature=+http2",
        "-b",
        "http://127.0.0.1:9",
        "-P",
        pid_path,
    ]);
    assert!(
        running.listening.contains("shop-cache"),
        "-n names the instance: {}",
        running.listening
    );
    let written = std::fs::read_to_string(&pid_file).expect("the pid file exists while running");
    assert_eq!(written.trim(), running.child.id().to_string());

    running.signal("TERM");
    let exit = running.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(!pid_file.exists(), "the pid file is removed at exit");
}

async fn named_origin() -> Origin {
    Origin::start(|_| OriginReply::ok("hello").cache_control("max-age=60")).await
}

/// One request with the fields the access log records.
async fn logged_request(addr: SocketAddr, target: &str) {
    let reply = get(
        addr,
        target,
        &[
            ("host", "shop.example"),
            ("user-agent", "curl/8.5 \"quoted\""),
            ("referer", "http://shop.example/start"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200);
}

/// The combined format parses with the usual regex; `--access-log` is reopened on SIGUSR1 after
/// logrotate moved it, and the next line goes to the new file.
#[tokio::test]
async fn ncsa_lines_parse_as_combined_and_the_file_reopens_on_sigusr1() {
    let origin = named_origin().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let backend = origin.addr.to_string();
    let running = Running::start(&[
        "-b",
        &backend,
        "--log-format",
        "ncsa",
        "--access-log",
        log.to_str().unwrap(),
    ]);
    logged_request(running.addr, "/first?x=1").await;
    let combined = regex::Regex::new(
        r#"^(\S+) (\S+) (\S+) \[([\w:/]+\s[+\-]\d{4})\] "(\S+) (\S+)\s*(\S+)?\s*" (\d{3}) (\S+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$"#,
    )
    .unwrap();
    let first = eventually_line(&log, "/first");
    let fields = combined
        .captures(&first)
        .unwrap_or_else(|| panic!("not combined: {first}"));
    assert_eq!(&fields[1], "127.0.0.1");
    assert_eq!(&fields[5], "GET");
    assert_eq!(&fields[6], "http://shop.example/first?x=1");
    assert_eq!(&fields[7], "HTTP/1.1");
    assert_eq!(&fields[8], "200");
    // The body's length when known as the response starts (a streamed miss may not know it).
    assert!(["5", "-"].contains(&&fields[9]), "{first}");
    assert_eq!(&fields[10], "http://shop.example/start");
    assert_eq!(&fields[11], r#"curl/8.5 \"quoted\""#);

    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    running.signal("USR1");
    running.line_with("access log reopened");
    logged_request(running.addr, "/second").await;
    let second = eventually_line(&log, "/second");
    assert!(combined.is_match(&second), "{second}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("/first") && !old.contains("/second"), "{old}");
}

/// The JSON access line carries the request id, Host, User-Agent and Referer.
#[tokio::test]
async fn json_access_lines_name_the_host_agent_referer_and_request_id() {
    let origin = named_origin().await;
    let backend = origin.addr.to_string();
    let running = Running::start(&["-b", &backend, "--log-format", "json"]);
    logged_request(running.addr, "/json").await;
    let line = running.line_with("\"url\":\"/json\"");
    let record: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["host"], "shop.example", "{line}");
    assert_eq!(record["user_agent"], "curl/8.5 \"quoted\"", "{line}");
    assert_eq!(record["referer"], "http://shop.example/start", "{line}");
    assert!(record["xid"].as_i64().is_some_and(|xid| xid > 0), "{line}");
}

/// The line of `path` in the access log `file`, once written (the write follows the response).
fn eventually_line(file: &std::path::Path, path: &str) -> String {
    let deadline = std::time::Instant::now() + EXCHANGE_LIMIT;
    while std::time::Instant::now() < deadline {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains(path)) {
            return line.to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("no access line for {path} in {}", file.display());
}

/// `--access-log FILE` in the JSON format: access lines go to the file, the rest stays on
/// stderr.
#[tokio::test]
async fn access_log_file_takes_the_access_lines_off_stderr() {
    let origin = named_origin().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.json");
    let backend = origin.addr.to_string();
    let running = Running::start(&[
        "-b",
        &backend,
        "--log-format",
        "json",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    logged_request(running.addr, "/to-file").await;
    let line = eventually_line(&log, "/to-file");
    let record: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(record["host"], "shop.example", "{line}");
    let mut running = running;
    running.child.kill().unwrap();
    running.child.wait().unwrap();
    // The readers end with the pipes, so every line written to stderr or stdout is in `lines`.
    let printed: Vec<String> = running.lines.iter().collect();
    assert!(
        !printed.iter().any(|line| line.contains("/to-file")),
        "{printed:?}"
    );
}

/// A varnishncsa format string: the cache's handling and the request id as codes, on stdout.
#[tokio::test]
async fn a_custom_format_string_logs_the_handling_and_request_id() {
    let origin = named_origin().await;
    let backend = origin.addr.to_string();
    let format = r#"%h "%r" %s %{Varnish:handling}x xid=%{Varnish:vxid}x %{Host}i %U%q"#;
    let running = Running::start(&["-b", &backend, "--log-format", format]);
    logged_request(running.addr, "/custom?a=b").await;
    logged_request(running.addr, "/custom?a=b").await;
    let pattern = regex::Regex::new(
        r#"^127\.0\.0\.1 "GET http://shop\.example/custom\?a=b HTTP/1\.1" 200 (miss|hit) xid=(\d+) shop\.example /custom\?a=b$"#,
    )
    .unwrap();
    let first = running.line_with("/custom");
    let second = running.line_with("/custom");
    let first = pattern.captures(&first).unwrap_or_else(|| panic!("{first}"));
    let second = pattern.captures(&second).unwrap_or_else(|| panic!("{second}"));
    assert_eq!((&first[1], &second[1]), ("miss", "hit"));
    assert_ne!(&first[2], &second[2], "each request has its own id");
}

/// `--threads 1` runs one current-thread runtime: a cacheable page is a MISS then a HIT on
/// HTTP/1.1 and h2c, and SIGHUP reloads the policy (on the blocking pool) while it serves.
#[tokio::test]
async fn one_thread_serves_caches_and_reloads() {
    let origin = named_origin().await;
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("site.vcl");
    let write_policy = |stamp: &str| {
        std::fs::write(
            &policy,
            format!(
                "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
                 sub vcl_deliver {{ set resp.http.x-policy = \"{stamp}\"; }}\n",
                origin.addr.port()
            ),
        )
        .unwrap()
    };
    write_policy("one");
    let running = Running::start(&["--threads", "1", "--no-watch", "-f", policy.to_str().unwrap()]);
    let first = get(running.addr, "/page", &[]).await;
    let second = get(running.addr, "/page", &[]).await;
    assert_eq!(first.header("x-cache"), Some("MISS"));
    assert_eq!(second.header("x-cache"), Some("HIT"));
    assert_eq!(second.header("x-policy"), Some("one"));
    // Ten streams at once on one connection: the current-thread runtime answers them all.
    let h2 = support::H2c::connect(running.addr).await;
    let streams = (0..10).map(|_| {
        let mut stream = h2.clone_stream();
        async move { stream.get("/page", &[]).await }
    });
    for reply in futures_util::future::join_all(streams).await {
        assert_eq!(reply.header("x-cache"), Some("HIT"));
    }
    let over_h2 = h2.clone_stream().get("/page", &[]).await;
    assert_eq!(over_h2.version, http::Version::HTTP_2);
    assert_eq!(over_h2.header("x-cache"), Some("HIT"));

    write_policy("two");
    running.signal("HUP");
    running.line_with("reloaded");
    let after = get(running.addr, "/page", &[]).await;
    assert_eq!(after.header("x-policy"), Some("two"));
    assert_eq!(after.header("x-cache"), Some("HIT"), "the reload keeps the cache");
    assert_eq!(origin.requests(), 1);
}
