//! Invalidations a policy makes reach every node of a tier (`--peers`), as admin API ones do:
//! three nodes on loopback, each listing the other two, run one policy whose `PURGE`
//! (`return (purge)`), `BAN` (`ban(...)`), `XKEY` (`xkey.purge`) and `HARDPURGE` / `SOFTPURGE`
//! (`purge.hard()` / `purge.soft()` in vcl_hit) requests invalidate; one sent to one node
//! removes the object on all three, and the receiving nodes do not forward it again. And the
//! DNS form of `--peers`: a name (from `--hosts-file`) whose addresses change is followed
//! without a restart.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgecache_runtime::{Config, Running};
use serde_json::Value;
use support::{Client, Origin, OriginReply};

const TOKEN: &str = "tier-secret";
/// Part of the cache key (the policy hashes the Host), so the same on every node.
const SITE: (&str, &str) = ("host", "www.example");

/// Invalidations by method. Its `vcl_hash` puts the URL before the host (as
/// examples/default.vcl does), a key the admin API's `url=` purge would not build: what a
/// peer receives must be the key itself.
const POLICY: &str = r#"vcl 4.1;
import purge;
import xkey;

sub vcl_recv {
    if (req.method == "PURGE") {
        return (purge);
    }
    if (req.method == "BAN") {
        ban("req.url ~ ^" + req.url);
        return (synth(200, "Banned"));
    }
    if (req.method == "XKEY") {
        set req.http.n-gone = xkey.purge(req.http.xkey);
        return (synth(200, "Invalidated " + req.http.n-gone));
    }
    if (req.method == "HARDPURGE" || req.method == "SOFTPURGE") {
        return (hash);
    }
}

sub vcl_hash {
    hash_data(req.url);
    hash_data(req.http.host);
    return (lookup);
}

sub vcl_hit {
    if (req.method == "HARDPURGE") {
        set req.http.n-gone = purge.hard();
        return (synth(200, "Purged " + req.http.n-gone));
    }
    if (req.method == "SOFTPURGE") {
        set req.http.n-gone = purge.soft();
        return (synth(200, "Soft purged " + req.http.n-gone));
    }
}

sub vcl_backend_response {
    set beresp.grace = 1m;
}
"#;

/// Every page cacheable for 5 minutes; `/tagged/...` pages carry `xkey: tagged`.
async fn origin() -> Origin {
    Origin::start(|request| {
        let reply = OriginReply::ok(format!("page {}", request.uri())).cache_control("max-age=300");
        if request.uri().path().starts_with("/tagged/") {
            reply.header("xkey", "tagged")
        } else {
            reply
        }
    })
    .await
}

/// Written once per test, before any node starts: a node starting while it is rewritten could
/// read it empty.
fn token_file(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("edgecache-tier-token-{}-{test}", std::process::id()));
    std::fs::write(&path, TOKEN).expect("token file");
    path
}

/// One node: the policy, its admin API on `admin` with the token in `token`, `peers` as
/// `--peers`.
async fn node(
    origin: &Origin,
    token: &Path,
    admin: SocketAddr,
    peers: Vec<String>,
    tweak: impl FnOnce(&mut Config),
) -> (Running, SocketAddr) {
    let policy = support::write_policy("cluster-policy-purge", POLICY);
    support::start_proxy(origin.addr, |config| {
        config.policy = Some(policy);
        config.admin_listen = Some(admin);
        config.admin_token_file = Some(token.to_path_buf());
        config.peers = peers;
        config.peer_retry_time = Duration::from_secs(1);
        tweak(config);
    })
    .await
}

/// Whether `target` is stored on the node serving at `addr` (`only-if-cached`: 504 when not).
async fn holds(client: &Client, addr: SocketAddr, target: &str) -> bool {
    let reply = client
        .get(addr, target, &[SITE, ("cache-control", "only-if-cached")])
        .await;
    match reply.status.as_u16() {
        200 => true,
        504 => false,
        other => panic!("only-if-cached {target} on {addr}: {other}"),
    }
}

/// The node's `/metrics` count of invalidations it forwarded that peers applied.
async fn applied_by_peers(admin: SocketAddr) -> u64 {
    let reply = edgecache_runtime::admin::client::call(admin, Some(TOKEN), "GET", "/metrics", "")
        .await
        .expect("admin API");
    reply
        .body
        .lines()
        .filter(|line| {
            line.starts_with("edgecache_peer_invalidations_total{") && line.contains(r#"outcome="applied""#)
        })
        .map(|line| {
            let value = line.rsplit(' ').next().expect("a value");
            value.parse::<u64>().unwrap_or_else(|_| panic!("a count: {line}"))
        })
        .sum()
}

/// Waits until the peers of the node with admin API `admin` have applied `count` of its
/// forwards: they go in the background, after the client's answer.
async fn wait_applied(admin: SocketAddr, count: u64) {
    support::until(
        &format!("{count} forwards from {admin} are applied"),
        async || applied_by_peers(admin).await >= count,
    )
    .await;
    assert_eq!(applied_by_peers(admin).await, count, "forwarded more than once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_purge_ban_or_key_purge_on_one_node_removes_the_object_on_every_node() {
    let origin = origin().await;
    // Admin APIs on addresses of their own: the nodes' serving listeners (127.0.0.1:0) cannot
    // take their port between the pick and the bind.
    let ips: Vec<IpAddr> = ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        .iter()
        .map(|ip| ip.parse().expect("an IP"))
        .collect();
    let port = port_free_on(&ips).await;
    let admins: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
    let token = token_file("policy");
    let mut nodes = Vec::new();
    for (index, admin) in admins.iter().enumerate() {
        let peers = admins
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .map(|(_, address)| address.to_string())
            .collect();
        nodes.push(node(&origin, &token, *admin, peers, |_| {}).await);
    }
    let serving: Vec<SocketAddr> = nodes.iter().map(|(_, addr)| *addr).collect();
    let client = Client::new();
    let pages = ["/news/1", "/news/2", "/tagged/1", "/hard", "/soft", "/kept"];
    for addr in &serving {
        for page in pages {
            assert_eq!(client.get(*addr, page, &[SITE]).await.status, 200);
        }
    }
    for (running, _) in &nodes {
        support::eventually_stored(running, pages.len() as u64).await;
    }
    let everywhere = async |page: &str| {
        let mut found = Vec::new();
        for addr in &serving {
            found.push(holds(&client, *addr, page).await);
        }
        found
    };

    // PURGE on n0: return (purge) there, the same key purged on n1 and n2.
    let reply = client
        .send("PURGE", serving[0], "/news/1", &[SITE], bytes::Bytes::new())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    wait_applied(admins[0], 2).await;
    assert_eq!(
        everywhere("/news/1").await,
        [false; 3],
        "/news/1 survived the PURGE somewhere"
    );
    assert_eq!(
        everywhere("/news/2").await,
        [true; 3],
        "the PURGE took another URL"
    );

    // BAN on n1: the ban, with its creation time, on n0 and n2.
    let reply = client
        .send("BAN", serving[1], "/news/", &[SITE], bytes::Bytes::new())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    wait_applied(admins[1], 2).await;
    assert_eq!(
        everywhere("/news/2").await,
        [false; 3],
        "/news/2 survived the BAN somewhere"
    );
    assert_eq!(
        everywhere("/kept").await,
        [true; 3],
        "the BAN took a URL it does not match"
    );

    // xkey.purge on n2: the tagged page goes on every node.
    let reply = client
        .send(
            "XKEY",
            serving[2],
            "/",
            &[SITE, ("xkey", "tagged")],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    wait_applied(admins[2], 2).await;
    assert_eq!(
        everywhere("/tagged/1").await,
        [false; 3],
        "/tagged/1 survived xkey.purge somewhere"
    );

    // purge.hard() in vcl_hit on n0: the request's key, on every node.
    let reply = client
        .send("HARDPURGE", serving[0], "/hard", &[SITE], bytes::Bytes::new())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    wait_applied(admins[0], 4).await;
    assert_eq!(
        everywhere("/hard").await,
        [false; 3],
        "/hard survived purge.hard() somewhere"
    );

    // purge.soft() on n0: on n1 the object is stale now, served in grace while n1 refreshes
    // it from the origin.
    let fetched = origin.requests_for("/soft");
    let reply = client
        .send("SOFTPURGE", serving[0], "/soft", &[SITE], bytes::Bytes::new())
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    wait_applied(admins[0], 6).await;
    assert_eq!(client.get(serving[1], "/soft", &[SITE]).await.status, 200);
    support::until("n1 refreshes its soft-purged /soft", async || {
        origin.requests_for("/soft") == fetched + 1
    })
    .await;
    assert_eq!(everywhere("/kept").await, [true; 3], "an invalidation took /kept");

    // What the peers received they applied and did not forward again: n1 and n2 forwarded only
    // what their own clients sent.
    assert_eq!(applied_by_peers(admins[1]).await, 2);
    assert_eq!(applied_by_peers(admins[2]).await, 2);
}

/// A port free on every address of `ips`, for admin APIs that one peer name resolves to (a
/// name gives addresses; the port is written after it).
async fn port_free_on(ips: &[IpAddr]) -> u16 {
    for _ in 0..20 {
        let port = support::unused_port().await.port();
        if ips
            .iter()
            .all(|ip| std::net::TcpListener::bind(SocketAddr::new(*ip, port)).is_ok())
        {
            return port;
        }
    }
    panic!("no port free on every one of {ips:?}");
}

/// What a key purge on the admin API at `admin` was forwarded to: the peers of its answer.
async fn forwarded_to(admin: SocketAddr) -> Vec<String> {
    let reply = edgecache_runtime::admin::client::call(admin, Some(TOKEN), "POST", "/purge?key=nothing", "")
        .await
        .expect("admin API");
    let answer: Value = serde_json::from_str(&reply.body).expect("JSON");
    answer["peers"]
        .as_array()
        .unwrap_or_else(|| panic!("a peers list: {answer}"))
        .iter()
        .map(|report| {
            assert_eq!(report["status"], 200, "{report}");
            report["peer"].as_str().expect("a peer").to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_given_as_a_name_follow_its_addresses_without_a_restart() {
    let origin = origin().await;
    let ips: Vec<IpAddr> = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        .iter()
        .map(|ip| ip.parse().expect("an IP"))
        .collect();
    let port = port_free_on(&ips).await;
    let hosts = support::hosts_file("cluster-peers", "127.0.0.2 tier.test\n127.0.0.3 tier.test\n");
    let token = token_file("dns");
    let admins: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
    // The same command on every node: the name lists this node too, which skips itself.
    let mut nodes = Vec::new();
    for admin in &admins {
        let hosts = hosts.clone();
        nodes.push(
            node(
                &origin,
                &token,
                *admin,
                vec![format!("tier.test:{port}")],
                |config| {
                    config.hosts_file = Some(hosts);
                    config.dns_ttl = Duration::from_millis(50);
                },
            )
            .await,
        );
    }
    let named = |ip: &str| format!("{ip}:{port} (tier.test:{port})");
    assert_eq!(forwarded_to(admins[0]).await, [named("127.0.0.3")]);

    // A node joins the name: once the TTL passed, the next purge reaches it too.
    std::fs::write(
        &hosts,
        "127.0.0.2 tier.test\n127.0.0.3 tier.test\n127.0.0.4 tier.test\n",
    )
    .unwrap();
    support::until("the new address is a peer", async || {
        forwarded_to(admins[0]).await.len() == 2
    })
    .await;
    assert_eq!(
        forwarded_to(admins[0]).await,
        [named("127.0.0.3"), named("127.0.0.4")]
    );

    // A node leaves it: it is not sent purges any more (nor reported as down).
    std::fs::write(&hosts, "127.0.0.2 tier.test\n127.0.0.4 tier.test\n").unwrap();
    support::until("the old address is no peer", async || {
        forwarded_to(admins[0]).await.len() == 1
    })
    .await;
    assert_eq!(forwarded_to(admins[0]).await, [named("127.0.0.4")]);
    drop(nodes);
}
