//! `edgecache stat` against a running edgecache: `-1` dumps the counters the traffic moved,
//! the live view refreshes in place with rates.

mod support;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use support::{get, Origin, OriginReply};

const EDGECACHE: &str = env!("CARGO_BIN_EXE_edgecache");

/// edgecache as a process, with its admin API on `admin`; killed when dropped.
struct Server {
    child: Child,
    listen: std::net::SocketAddr,
    admin: std::net::SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(origin: &Origin) -> Server {
    let listen = support::unused_port().await;
    let admin = support::unused_port().await;
    let child = Command::new(EDGECACHE)
        .args(["--no-watch", "-a", &listen.to_string(), "-T", &admin.to_string()])
        .args(["-b", &origin.addr.to_string()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, listen, admin };
    support::until("edgecache answers", async || {
        support::try_get(listen, "/", &[]).await.is_ok()
    })
    .await;
    server
}

fn stat(admin: std::net::SocketAddr, args: &[&str]) -> String {
    let output = Command::new(EDGECACHE)
        .args(["stat", "-T", &admin.to_string()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "stat {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn counter(dump: &str, name: &str) -> f64 {
    dump.lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next() == Some(name)).then(|| fields.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("{name} in {dump}"))
}

#[tokio::test]
async fn stat_once_dumps_the_counters_traffic_moved() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let server = serve(&origin).await;
    let before = stat(server.admin, &["-1"]);
    for _ in 0..3 {
        get(server.listen, "/counted", &[]).await;
    }
    let after = stat(server.admin, &["-1"]);
    assert_eq!(
        counter(&after, "requests") - counter(&before, "requests"),
        3.0,
        "{after}"
    );
    assert_eq!(counter(&after, "hits") - counter(&before, "hits"), 2.0, "{after}");
    assert!(counter(&after, "cache.objects") >= 1.0, "{after}");
    assert_eq!(counter(&after, "backend.default.healthy"), 1.0, "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_screens_replace_each_other_and_show_rates() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let server = serve(&origin).await;
    // Requests flow while the two screens are taken, so the second shows a rate above zero.
    let flowing = Arc::new(AtomicBool::new(true));
    let traffic = tokio::spawn({
        let (flowing, listen) = (flowing.clone(), server.listen);
        async move {
            let mut sent = 0u32;
            while flowing.load(Ordering::Relaxed) && sent < 100_000 {
                get(listen, "/rated", &[]).await;
                sent += 1;
            }
            sent
        }
    });
    let admin = server.admin;
    let output = tokio::task::spawn_blocking(move || stat(admin, &["-c", "2", "-w", "200ms"]))
        .await
        .unwrap();
    flowing.store(false, Ordering::Relaxed);
    assert!(traffic.await.unwrap() > 0, "requests were sent meanwhile");
    let screens: Vec<&str> = output
        .split("\x1b[H\x1b[2J")
        .filter(|screen| !screen.is_empty())
        .collect();
    assert_eq!(screens.len(), 2, "{output:?}");
    let requests = |screen: &str| {
        screen
            .lines()
            .find(|line| line.starts_with("requests"))
            .unwrap()
            .to_string()
    };
    assert!(
        requests(screens[0]).ends_with('-'),
        "no rate on the first screen: {}",
        screens[0]
    );
    let rate = requests(screens[1]);
    let rate: f64 = rate
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{rate}"));
    assert!(
        rate > 0.0,
        "the second screen's rate counts the requests sent meanwhile: {}",
        screens[1]
    );
    assert!(
        screens[1].contains("default") && screens[1].contains("healthy"),
        "{}",
        screens[1]
    );
    assert!(screens[1].contains("hit ratio"), "{}", screens[1]);
}

#[test]
fn stat_refuses_a_zero_interval() {
    let output = Command::new(EDGECACHE)
        .args(["stat", "-w", "0s", "-T", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("-w 0s") && stderr.contains("-w 1s"), "{stderr}");
}

#[test]
fn stat_names_the_admin_address_it_cannot_reach() {
    let output = Command::new(EDGECACHE)
        .args(["stat", "-1", "-T", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot connect to the admin API at 127.0.0.1:1"),
        "{stderr}"
    );
}
