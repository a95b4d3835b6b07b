//! A cache tier on one machine with separate hosts: network namespaces made by the test, HAProxy
//! (the Debian package) in one with `balance uri` and `hash-type consistent`, three edgecache
//! nodes (the real binary) in three others, the origin in a fifth. The namespaces are joined by
//! veth pairs to a bridge in HAProxy's namespace; their addresses (10.213.0.0/24) exist only
//! inside them. The test's own client runs in HAProxy's namespace (`setns` on its thread).
//!
//! Skips, saying so, only where namespaces cannot be made (not root).

mod support;

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::{Client, Daemon, Origin, OriginReply, EXCHANGE_LIMIT};

const SUBNET: &str = "10.213.0";
const LB: &str = "10.213.0.1";
const ORIGIN: &str = "10.213.0.20:8000";
const NODES: usize = 3;
const URLS: usize = 60;
const TOKEN: &str = "tier-secret";
/// The site's name: part of the cache key, so the same on requests through HAProxy and to a
/// node directly.
const SITE: (&str, &str) = ("host", "www.example");

fn node_ip(index: usize) -> String {
    format!("{SUBNET}.{}", 11 + index)
}

/// The namespaces of one run, named uniquely, deleted (with the veths inside) when dropped,
/// also when the test panics.
struct Namespaces {
    prefix: String,
}

impl Namespaces {
    fn name(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }

    /// The bridge in `lb`, and one veth pair from it to each other namespace.
    fn create(roles: &[&str]) -> Result<Namespaces, String> {
        static RUN: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!("ec{}{}", std::process::id(), RUN.fetch_add(1, Ordering::Relaxed));
        let namespaces = Namespaces { prefix };
        let lb = namespaces.name("lb");
        ip(&["netns", "add", &lb])?;
        ip(&["-n", &lb, "link", "set", "lo", "up"])?;
        ip(&["-n", &lb, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &lb, "addr", "add", &format!("{LB}/24"), "dev", "br0"])?;
        ip(&["-n", &lb, "link", "set", "br0", "up"])?;
        for (index, (role, address)) in roles.iter().map(|role| (role, address_of(role))).enumerate() {
            let ns = namespaces.name(role);
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let (outer, inner) = (format!("v{index}a"), format!("v{index}b"));
            ip(&[
                "link", "add", &outer, "netns", &lb, "type", "veth", "peer", "name", &inner, "netns", &ns,
            ])?;
            ip(&["-n", &lb, "link", "set", &outer, "master", "br0", "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{address}/24"), "dev", &inner])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
        }
        Ok(namespaces)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for role in ["lb", "n0", "n1", "n2", "origin"] {
            let _ = ip(&["netns", "del", &self.name(role)]);
        }
    }
}

/// Prints the logs of the tier's processes when the test fails, before their directory goes.
struct LogsOnPanic(std::path::PathBuf);

impl Drop for LogsOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for name in ["n0.log", "n1.log", "n2.log", "haproxy.log"] {
            let text = std::fs::read_to_string(self.0.join(name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            eprintln!("--- {name} (last lines) ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

fn address_of(role: &str) -> String {
    match role {
        "origin" => ORIGIN.split(':').next().expect("ip").to_string(),
        node => node_ip(node[1..].parse().expect("nN")),
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|error| format!("cannot run ip: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Moves the calling thread into namespace `name`: sockets it (and threads it starts) opens
/// from then on are there.
fn enter(name: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open the namespace");
    rustix::thread::move_into_link_name_space(file.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))
        .unwrap_or_else(|error| panic!("setns {name}: {error}"));
}

/// Runs `scenario` on a thread of its own in namespace `name`, on a runtime of that thread.
fn in_namespace<T: Send + 'static>(name: String, scenario: impl AsyncFnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        enter(&name);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(scenario())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The origin, in its namespace: every URL cacheable for 5 minutes and tagged `xkey: tier`.
/// Its runtime runs on its own thread until `stop` is dropped.
fn start_origin(ns: String) -> (Arc<Origin>, tokio::sync::oneshot::Sender<()>) {
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        enter(&ns);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async move {
                let origin = Origin::start_at(ORIGIN.parse().expect("address"), |request| {
                    OriginReply::ok(format!("page {}", request.uri()))
                        .cache_control("max-age=300")
                        .header("xkey", "tier")
                })
                .await;
                ready_tx.send(Arc::new(origin)).expect("the test waits");
                let _ = stopped.await;
            });
    });
    (ready.recv().expect("the origin starts"), stop)
}

/// How to start node `index` (again, for a restart).
struct NodeCommand {
    index: usize,
    ns: String,
    dir: std::path::PathBuf,
}

impl NodeCommand {
    async fn start(&self) -> Daemon {
        let ip = node_ip(self.index);
        let peers: Vec<String> = (0..NODES)
            .filter(|other| *other != self.index)
            .map(|other| format!("{}:6082", node_ip(other)))
            .collect();
        // Written once by the test: a node starting while another rewrites it could read it empty.
        let token = self.dir.join("admin.token");
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("n{}.log", self.index)))
            .expect("log file");
        let dir = tempfile::Builder::new()
            .prefix("edgecache-node-")
            .tempdir_in(&self.dir)
            .expect("temp dir");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_edgecache")])
            .args(["-a", &format!("{ip}:8080,PROXY"), "-a", &format!("{ip}:8081")])
            .args(["-b", ORIGIN, "-T", &format!("{ip}:6082")])
            .arg("--admin-token-file")
            .arg(&token)
            .args(["--peers", &peers.join(","), "--peer-retry-time", "1s"])
            .args(["--drain-time", "2s", "--no-watch"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start edgecache");
        let direct: SocketAddr = format!("{ip}:8081").parse().expect("address");
        Daemon::listening("edgecache", child, direct, dir, None).await
    }
}

/// HAProxy in `ns`: the tier as the docs configure it (docs/cluster.md), with a CSV stats page.
async fn start_haproxy(ns: &str, dir: &std::path::Path) -> Daemon {
    let servers: String = (0..NODES)
        .map(|index| {
            format!(
                "  server n{index} {}:8080 send-proxy-v2 check inter 100ms fall 2 rise 1\n",
                node_ip(index)
            )
        })
        .collect();
    let config = format!(
        "global\n  maxconn 256\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 20s\n  timeout server 20s\n  timeout check 2s\n\
         frontend front\n  bind {LB}:8080\n  default_backend tier\n\
         backend tier\n  balance uri\n  hash-type consistent\n  option httpchk GET /healthz\n\
         {servers}\
         listen stats\n  bind {LB}:8404\n  stats enable\n  stats uri /stats\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).expect("haproxy.cfg");
    let child = Command::new("ip")
        .args(["netns", "exec", ns, "haproxy", "-db", "-f"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("haproxy.log")).expect("log file"))
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "this test needs HAProxy (`apt-get install -y --no-install-recommends haproxy`; \
                 .ci/run does this): {error}"
            )
        });
    let addr = format!("{LB}:8080").parse().expect("address");
    let haproxy_dir = tempfile::Builder::new()
        .prefix("edgecache-haproxy-")
        .tempdir_in(dir)
        .expect("temp dir");
    Daemon::listening("haproxy", child, addr, haproxy_dir, None).await
}

/// The state HAProxy's checks give server `name` now (`UP`, `DOWN`, ...).
async fn server_status(client: &Client, name: &str) -> String {
    let stats: SocketAddr = format!("{LB}:8404").parse().expect("address");
    let csv = client.get(stats, "/stats;csv", &[]).await.text();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let column = header
        .iter()
        .position(|c| *c == "status")
        .expect("a status column");
    lines
        .map(|line| line.split(',').collect::<Vec<_>>())
        .find(|row| row.first() == Some(&"tier") && row.get(1) == Some(&name))
        .and_then(|row| row.get(column).map(|status| status.to_string()))
        .unwrap_or_default()
}

async fn wait_status(client: &Client, name: &str, wanted: &str) {
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    loop {
        let status = server_status(client, name).await;
        if status.starts_with(wanted) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "HAProxy never saw {name} {wanted} (it is {status})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn url(n: usize) -> String {
    format!("/item/{n}")
}

/// The nodes holding `target`: a `GET` with `only-if-cached` (and `marks`) to each one's
/// listener on `port` is 200 where it is stored, 504 elsewhere.
async fn holders(client: &Client, target: &str, nodes: &[usize], port: u16, marks: Marks<'_>) -> Vec<usize> {
    let mut found = Vec::new();
    for &index in nodes {
        let direct: SocketAddr = format!("{}:{port}", node_ip(index)).parse().expect("address");
        let mut headers = vec![SITE, ("cache-control", "only-if-cached")];
        headers.extend_from_slice(marks);
        let reply = client.get(direct, target, &headers).await;
        match reply.status.as_u16() {
            200 => found.push(index),
            504 => {}
            other => panic!("only-if-cached {target} on n{index}: {other}"),
        }
    }
    found
}

type Marks<'a> = &'a [(&'a str, &'a str)];

/// The only node holding each URL, in URL order.
async fn owners(client: &Client, nodes: &[usize], port: u16, marks: Marks<'_>) -> Vec<usize> {
    let mut owners = Vec::new();
    for n in 0..URLS {
        let found = holders(client, &url(n), nodes, port, marks).await;
        assert_eq!(
            found.len(),
            1,
            "{} is stored on nodes {found:?}, not on exactly one",
            url(n)
        );
        owners.push(found[0]);
    }
    owners
}

/// The URLs whose owner changed from `before` to `after`, checked to be exactly those `lost`
/// owned, and no more than one node's share (with slack for an uneven ring).
fn assert_only_share_moved(before: &[usize], after: &[usize], lost: usize) {
    let moved: Vec<usize> = (0..URLS).filter(|n| before[*n] != after[*n]).collect();
    let owned_by_lost: Vec<usize> = (0..URLS).filter(|n| before[*n] == lost).collect();
    assert_eq!(moved, owned_by_lost, "only the lost node's URLs may change owner");
    assert!(
        moved.len() <= URLS / NODES + URLS / 6,
        "{} of {URLS} URLs moved: more than one node's share",
        moved.len()
    );
}

async fn fetch_all(client: &Client, front: SocketAddr) {
    for n in 0..URLS {
        let reply = client.get(front, &url(n), &[SITE]).await;
        assert_eq!(reply.status, 200, "{} through HAProxy: {}", url(n), reply.text());
    }
}

/// The tier's namespaces (three nodes and the origin), or `None`, with the reason on stderr,
/// where they cannot be made (not root, no `ip netns`).
fn tier_namespaces() -> Option<Namespaces> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: tests/cluster.rs makes network namespaces (ip netns add), which needs root");
        return None;
    }
    Namespaces::create(&["n0", "n1", "n2", "origin"])
        .map_err(|error| eprintln!("SKIPPED: network namespaces cannot be made here: {error}"))
        .ok()
}

#[test]
fn tier_behind_haproxy_stores_each_url_once_and_purges_everywhere() {
    let Some(namespaces) = tier_namespaces() else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("edgecache-cluster-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let _logs = LogsOnPanic(dir.path().to_path_buf());
    std::fs::write(dir.path().join("admin.token"), TOKEN).expect("token file");
    let (origin, _stop_origin) = start_origin(namespaces.name("origin"));
    let nodes: Vec<NodeCommand> = (0..NODES)
        .map(|index| NodeCommand {
            index,
            ns: namespaces.name(&format!("n{index}")),
            dir: dir.path().to_path_buf(),
        })
        .collect();
    let lb = namespaces.name("lb");
    let dir_path = dir.path().to_path_buf();
    in_namespace(lb.clone(), async move || {
        let mut running = Vec::new();
        for node in &nodes {
            running.push(Some(node.start().await));
        }
        let haproxy = start_haproxy(&lb, &dir_path).await;
        let front = haproxy.addr;
        let client = Client::new();
        for index in 0..NODES {
            wait_status(&client, &format!("n{index}"), "UP").await;
        }
        let all: Vec<usize> = (0..NODES).collect();

        // Each URL is fetched once across the tier and stored on one node.
        fetch_all(&client, front).await;
        fetch_all(&client, front).await;
        for n in 0..URLS {
            assert_eq!(
                origin.requests_for(&url(n)),
                1,
                "{} reached the origin more than once",
                url(n)
            );
        }
        let first = owners(&client, &all, 8081, &[]).await;
        for index in 0..NODES {
            let share = first.iter().filter(|owner| **owner == index).count();
            assert!(share > 0, "n{index} owns no URL: {first:?}");
        }

        // A key purge sent to one node removes the objects on all three.
        let admin: SocketAddr = format!("{}:6082", node_ip(0)).parse().expect("address");
        let reply = edgecache_runtime::admin::client::call(admin, Some(TOKEN), "POST", "/purge?key=tier", "")
            .await
            .expect("admin API");
        assert_eq!(reply.status, 200, "{}", reply.body);
        let answer: Value = serde_json::from_str(&reply.body).expect("JSON");
        let peers = answer["peers"].as_array().expect("a peers list");
        assert_eq!(peers.len(), NODES - 1, "{answer}");
        let mut purged = answer["purged"].as_u64().expect("count");
        for peer in peers {
            assert_eq!(peer["status"], 200, "{peer}");
            purged += peer["answer"]["purged"].as_u64().expect("count");
        }
        assert_eq!(purged as usize, URLS, "{answer}");
        for n in 0..URLS {
            assert!(
                holders(&client, &url(n), &all, 8081, &[]).await.is_empty(),
                "{} survived the purge",
                url(n)
            );
        }

        // Killing one node moves only its share.
        fetch_all(&client, front).await;
        let before = owners(&client, &all, 8081, &[]).await;
        let killed = 1;
        running[killed] = None;
        wait_status(&client, &format!("n{killed}"), "DOWN").await;
        fetch_all(&client, front).await;
        let survivors: Vec<usize> = all.iter().copied().filter(|index| *index != killed).collect();
        let after = owners(&client, &survivors, 8081, &[]).await;
        assert_only_share_moved(&before, &after, killed);
        running[killed] = Some(nodes[killed].start().await);
        wait_status(&client, &format!("n{killed}"), "UP").await;

        // A rolling restart under a bounded load: HAProxy takes each draining node out before
        // it stops accepting, so no request fails.
        let stop = Arc::new(AtomicBool::new(false));
        let load: Vec<_> = (0..4)
            .map(|worker| {
                let (client, stop) = (client.clone(), stop.clone());
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0usize, Vec::new());
                    let mut n = worker;
                    while !stop.load(Ordering::Relaxed) {
                        match client
                            .try_send("GET", front, &url(n % URLS), &[SITE], bytes::Bytes::new())
                            .await
                        {
                            Ok(reply) if reply.status == 200 => ok += 1,
                            Ok(reply) => failed.push(format!("{}: {}", url(n % URLS), reply.status)),
                            Err(error) => failed.push(format!("{}: {error}", url(n % URLS))),
                        }
                        n += 7;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    (ok, failed)
                })
            })
            .collect();
        for index in 0..NODES {
            let mut node = running[index].take().expect("running");
            let pid = rustix::process::Pid::from_raw(node.pid() as i32).expect("a child's pid");
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
            wait_status(&client, &format!("n{index}"), "DOWN").await;
            assert!(!node.exited(), "n{index} stopped before HAProxy took it out");
            let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
            while !node.exited() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "n{index} did not stop after SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            running[index] = Some(nodes[index].start().await);
            wait_status(&client, &format!("n{index}"), "UP").await;
        }
        stop.store(true, Ordering::Relaxed);
        let (mut ok, mut failed) = (0, Vec::new());
        for worker in load {
            let (served, errors) = worker.await.expect("load worker");
            ok += served;
            failed.extend(errors);
        }
        assert!(
            failed.is_empty(),
            "{} of {} requests failed during the rolling restart: {:?}",
            failed.len(),
            ok + failed.len(),
            &failed[..failed.len().min(5)]
        );
        assert!(ok > 100, "only {ok} requests ran during the rolling restart");
        drop(haproxy);
    });
}

/// Two nodes on loopback and a peer address where nothing listens: a key purge and a ban sent
/// to one reach the other once (its answer has no `peers`: a forwarded request goes no
/// further), the ban keeps its creation time, and the dead peer is named, not skipped.
#[tokio::test]
async fn a_purge_reaches_every_peer_once_and_names_the_one_that_is_down() {
    let origin = Origin::start(|request| {
        OriginReply::ok(format!("page {}", request.uri()))
            .cache_control("max-age=300")
            .header("xkey", "tier")
    })
    .await;
    let dead = support::unused_port().await;
    let dir = tempfile::Builder::new()
        .prefix("edgecache-peers-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let token = dir.path().join("admin.token");
    std::fs::write(&token, TOKEN).expect("token file");
    let loopback_admin = |config: &mut edgecache_runtime::Config| {
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.admin_token_file = Some(token.clone());
        config.peer_retry_time = Duration::from_millis(300);
    };
    let (peer, peer_addr) = support::start_proxy(origin.addr, |config| {
        loopback_admin(config);
        config.peers = vec![dead.to_string()];
    })
    .await;
    let peer_admin = peer.admin_addr().expect("admin API");
    let (node, _) = support::start_proxy(origin.addr, |config| {
        loopback_admin(config);
        config.peers = vec![peer_admin.to_string(), dead.to_string()];
    })
    .await;
    let admin = node.admin_addr().expect("admin API");
    assert_eq!(support::get(peer_addr, "/page", &[]).await.status, 200);

    let reply = edgecache_runtime::admin::client::call(admin, Some(TOKEN), "POST", "/purge?key=tier", "")
        .await
        .expect("admin API");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: Value = serde_json::from_str(&reply.body).expect("JSON");
    assert_eq!(answer["purged"], 0, "nothing was stored on this node: {answer}");
    let reports = answer["peers"].as_array().expect("a peers list");
    assert_eq!(reports.len(), 2, "{answer}");
    let delivered = &reports[0];
    assert_eq!(delivered["peer"], peer_admin.to_string());
    assert_eq!(delivered["status"], 200, "{delivered}");
    assert_eq!(
        delivered["answer"]["purged"], 1,
        "the peer held the page: {delivered}"
    );
    assert!(
        delivered["answer"].get("peers").is_none(),
        "the peer forwarded it again: {delivered}"
    );
    let down = &reports[1];
    assert_eq!(down["peer"], dead.to_string());
    assert_eq!(down["status"], "unreachable", "{down}");
    assert!(
        down["attempts"].as_u64().expect("attempts") >= 2,
        "not retried: {down}"
    );

    // A URL purge whose host is the request's Host header reaches the peer with that host,
    // not with the Host of the forwarded request (the peer's address).
    let site = [SITE];
    assert_eq!(support::get(peer_addr, "/page", &site).await.status, 200);
    let bearer = format!("Bearer {TOKEN}");
    let headers = [SITE, ("authorization", bearer.as_str())];
    let reply = support::send("POST", admin, "/purge?url=/page", &headers, "").await;
    let answer: Value = serde_json::from_str(&reply.text()).expect("JSON");
    assert_eq!(answer["host"], SITE.1, "{answer}");
    assert_eq!(answer["peers"][0]["answer"]["purged"], true, "{answer}");
    assert_eq!(answer["peers"][0]["answer"]["host"], SITE.1, "{answer}");

    let reply =
        edgecache_runtime::admin::client::call(admin, Some(TOKEN), "POST", "/ban", r#"req.url ~ "^/news/""#)
            .await
            .expect("admin API");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: Value = serde_json::from_str(&reply.body).expect("JSON");
    let created = answer["created"].as_f64().expect("created");
    let forwarded = &answer["peers"][0]["answer"];
    let peer_created = forwarded["created"].as_f64().expect("the peer's created");
    assert!(
        (peer_created - created).abs() < 1e-3,
        "the peer dated the ban {peer_created}, not {created}"
    );
}

/// examples/cluster.vcl on three nodes with no balancer, in the namespaces of the tier test:
/// each request goes to a node in turn, yet each URL is fetched from the origin once and stored
/// on one node only, the shard director's owner (the others pass it to the owner); once the
/// others' probes see a killed node sick, only its URLs move.
#[test]
fn self_routing_stores_each_url_on_one_node() {
    let Some(namespaces) = tier_namespaces() else {
        return;
    };
    let mut policy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/cluster.vcl"))
        .expect("examples/cluster.vcl");
    let mut place = |written: &str, address: &str| {
        let (ip, port) = address.split_once(':').expect("IP:PORT");
        assert_eq!(
            policy.matches(written).count(),
            1,
            "{written} in examples/cluster.vcl"
        );
        policy = policy.replace(written, &format!(r#".host = "{ip}"; .port = "{port}";"#));
    };
    place(r#".host = "10.0.0.20"; .port = "8080";"#, ORIGIN);
    for index in 0..NODES {
        let written = format!(r#".host = "10.0.0.{}"; .port = "6081";"#, 11 + index);
        place(&written, &format!("{}:6081", node_ip(index)));
    }
    let policy_path = support::write_policy("cluster", &policy);
    let dir = tempfile::Builder::new()
        .prefix("edgecache-self-routing-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let _logs = LogsOnPanic(dir.path().to_path_buf());
    let token = dir.path().join("admin.token");
    std::fs::write(&token, TOKEN).expect("token file");
    let (origin, _stop_origin) = start_origin(namespaces.name("origin"));
    let node_namespaces: Vec<String> = (0..NODES)
        .map(|index| namespaces.name(&format!("n{index}")))
        .collect();
    let dir_path = dir.path().to_path_buf();
    in_namespace(namespaces.name("lb"), async move || {
        let mut nodes = Vec::new();
        let entries: Vec<SocketAddr> = (0..NODES)
            .map(|index| format!("{}:6081", node_ip(index)).parse().expect("address"))
            .collect();
        for (index, ns) in node_namespaces.iter().enumerate() {
            let log = std::fs::File::create(dir_path.join(format!("n{index}.log"))).expect("log file");
            let child = Command::new("ip")
                .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_edgecache")])
                .env("EDGECACHE_NODE", format!("n{index}"))
                .args([
                    "-a",
                    ":6081",
                    "-T",
                    &format!("{}:6082", node_ip(index)),
                    "--no-watch",
                    "-f",
                ])
                .arg(&policy_path)
                .arg("--admin-token-file")
                .arg(&token)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start edgecache");
            let node_dir = tempfile::Builder::new()
                .prefix("node-")
                .tempdir_in(&dir_path)
                .expect("temp dir");
            nodes.push(Some(
                Daemon::listening("edgecache", child, entries[index], node_dir, None).await,
            ));
        }
        let client = Client::new();
        for round in 0..2 {
            for n in 0..URLS {
                let entry = entries[(n + round) % NODES];
                let reply = client.get(entry, &url(n), &[SITE]).await;
                assert_eq!(reply.status, 200, "{} on {entry}: {}", url(n), reply.text());
            }
        }
        for n in 0..URLS {
            assert_eq!(
                origin.requests_for(&url(n)),
                1,
                "{} reached the origin more than once",
                url(n)
            );
        }
        // Marked as a hop, a request is answered from the node's own cache only.
        let hop: Marks = &[("x-cluster-hop", "test")];
        let all: Vec<usize> = (0..NODES).collect();
        let before = owners(&client, &all, 6081, hop).await;

        let killed = 1;
        nodes[killed] = None;
        let survivors: Vec<usize> = all.iter().copied().filter(|index| *index != killed).collect();
        for &index in &survivors {
            let admin: SocketAddr = format!("{}:6082", node_ip(index)).parse().expect("address");
            support::until("the node's probe to see the killed node sick", async || {
                let reply =
                    edgecache_runtime::admin::client::call(admin, Some(TOKEN), "GET", "/backends", "")
                        .await
                        .expect("admin API");
                let backends: Value = serde_json::from_str(&reply.body).expect("JSON");
                backends
                    .as_array()
                    .expect("a list")
                    .iter()
                    .any(|backend| backend["name"] == format!("n{killed}") && backend["healthy"] == false)
            })
            .await;
        }
        for n in 0..URLS {
            let entry = entries[survivors[n % survivors.len()]];
            let reply = client.get(entry, &url(n), &[SITE]).await;
            assert_eq!(reply.status, 200, "{} on {entry}: {}", url(n), reply.text());
        }
        let after = owners(&client, &survivors, 6081, hop).await;
        assert_only_share_moved(&before, &after, killed);
        drop(nodes);
    });
}
