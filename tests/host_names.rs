//! Host names in a policy, as Varnish resolves them: backend `.host` names and ACL entries are
//! looked up when the policy loads (a name that does not resolve refuses it, naming the name),
//! and a backend's name is looked up again every `--dns-ttl`, its new addresses taking new
//! connections without a reload. The test controls resolution with `--hosts-file`, and puts
//! origins on distinct loopback addresses (127.0.0.2, 127.0.0.3) at one port.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use edgecache_runtime::Config;
use support::{hosts_file, trace_init, write_policy, Client, Origin, OriginReply, RawConn, EXCHANGE_LIMIT};

async fn start(policy: PathBuf, hosts: PathBuf) -> Result<edgecache_runtime::Running, String> {
    trace_init();
    let config = Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        admin_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        policy: Some(policy),
        hosts_file: Some(hosts),
        dns_ttl: Duration::from_millis(50),
        ..Config::default()
    };
    edgecache_runtime::start(config)
        .await
        .map_err(|error| error.to_string())
}

/// `GET /backends` of the admin API.
async fn admin_backends(running: &edgecache_runtime::Running) -> serde_json::Value {
    let addr = running.admin_addr().expect("the admin API is on");
    let reply = edgecache_runtime::admin::client::call(addr, None, "GET", "/backends", "")
        .await
        .expect("GET /backends");
    serde_json::from_str(&reply.body).expect("JSON")
}

/// Two origins answering `a` and `b`, on 127.0.0.2 and 127.0.0.3 at the same port (a name
/// resolves to addresses; the port is the backend's own).
async fn origins_on_one_port() -> (Origin, Origin) {
    for _ in 0..20 {
        let a = Origin::start_at(SocketAddr::from(([127, 0, 0, 2], 0)), |_| OriginReply::ok("a")).await;
        let port = a.addr.port();
        let b_addr = SocketAddr::from(([127, 0, 0, 3], port));
        // The port may be taken on 127.0.0.3; then try another.
        if std::net::TcpListener::bind(b_addr).is_ok() {
            let b = Origin::start_at(b_addr, |_| OriginReply::ok("b")).await;
            return (a, b);
        }
    }
    panic!("no port free on both 127.0.0.2 and 127.0.0.3");
}

fn name_policy(port: u16) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"app.internal\"; .port = \"{port}\"; }}\n\
         sub vcl_recv {{ return (pass); }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_name_follows_its_new_addresses_without_reload() {
    let (a, b) = origins_on_one_port().await;
    let hosts = hosts_file("follow", "127.0.0.2 app.internal\n");
    let policy = write_policy("follow", &name_policy(a.addr.port()));
    let running = start(policy, hosts.clone()).await.expect("edgecache starts");
    let addr = running.listen_addrs()[0];
    let client = Client::new();
    assert_eq!(client.get(addr, "/", &[]).await.text(), "a");
    let generation = running.active_version().generation;

    // The name moves: once the next lookup saw it, every request goes to the new address, even
    // over the kept-alive connection's client (the backend's pool was renewed).
    std::fs::write(&hosts, "127.0.0.3 app.internal\n").unwrap();
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    while client.get(addr, "/", &[]).await.text() != "b" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backend never followed its name to 127.0.0.3"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let a_served = a.requests();
    for _ in 0..5 {
        assert_eq!(client.get(addr, "/", &[]).await.text(), "b");
    }
    assert_eq!(a.requests(), a_served, "no request went back to the old address");

    // A second address joins: new connections take the addresses in turn, so both serve.
    std::fs::write(&hosts, "127.0.0.2 app.internal\n127.0.0.3 app.internal\n").unwrap();
    let (a_before, b_before) = (a.requests(), b.requests());
    while a.requests() == a_before || b.requests() == b_before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new address never joined the pool"
        );
        let replies = support::concurrently(4, |_| {
            let client = Client::new();
            async move { client.get(addr, "/", &[]).await }
        })
        .await;
        assert!(replies.iter().all(|reply| reply.status == 200));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        running.active_version().generation,
        generation,
        "followed without a reload"
    );
    let port = a.addr.port();
    let backends = admin_backends(&running).await;
    assert_eq!(
        backends[0]["resolved"],
        serde_json::json!([format!("127.0.0.2:{port}"), format!("127.0.0.3:{port}")])
    );
    running.shutdown().await;
}

#[tokio::test]
async fn unresolvable_backend_name_is_refused_at_load_with_its_name() {
    let hosts = hosts_file("unresolvable", "127.0.0.2 app.internal\n");
    let policy = write_policy(
        "unresolvable",
        "vcl 4.1;\nbackend shop { .host = \"no-such-origin.invalid\"; .port = \"8080\"; }\n",
    );
    let error = start(policy, hosts.clone())
        .await
        .err()
        .expect("the policy is refused");
    assert!(error.contains("shop"), "names the backend: {error}");
    assert!(
        error.contains("no-such-origin.invalid"),
        "names the host: {error}"
    );

    // On reload the same: the old version keeps serving.
    let origin = Origin::fixed(OriginReply::ok("up")).await;
    let policy = write_policy("resolvable", &name_policy(origin.addr.port()));
    std::fs::write(&hosts, format!("{} app.internal\n", origin.addr.ip())).unwrap();
    let running = start(policy.clone(), hosts).await.expect("edgecache starts");
    std::fs::write(
        &policy,
        "vcl 4.1;\nbackend shop { .host = \"no-such-origin.invalid\"; .port = \"8080\"; }\n",
    )
    .unwrap();
    let failure = running.reload().await.expect_err("the reload is refused");
    assert!(
        failure.message.contains("no-such-origin.invalid"),
        "{}",
        failure.message
    );
    let addr = running.listen_addrs()[0];
    assert_eq!(Client::new().get(addr, "/", &[]).await.text(), "up");
    running.shutdown().await;
}

const ACL_POLICY: &str = r#"vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "9"; }
acl editors { "editors.internal"; ("maybe.invalid"); }
sub vcl_recv {
    if (client.ip ~ editors) { return (synth(200, "editor")); }
    return (synth(403, "not an editor"));
}
"#;

#[tokio::test]
async fn acl_host_name_matches_the_address_it_resolves_to() {
    let hosts = hosts_file("acl", "127.0.0.5 editors.internal\n");
    let running = start(write_policy("acl", ACL_POLICY), hosts)
        .await
        .expect("edgecache starts");
    let addr = running.listen_addrs()[0];
    let from = |ip: [u8; 4]| async move {
        let mut conn = RawConn::connect_from(IpAddr::from(ip), addr).await;
        conn.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        conn.response(false).await.status
    };
    assert_eq!(
        from([127, 0, 0, 5]).await,
        200,
        "the name's address is in the ACL"
    );
    assert_eq!(from([127, 0, 0, 1]).await, 403, "other addresses are not");
    running.shutdown().await;
}

#[tokio::test]
async fn unresolvable_acl_name_is_refused_at_its_line_and_column() {
    let hosts = hosts_file("acl-missing", "127.0.0.5 editors.internal\n");
    let policy = write_policy(
        "acl-missing",
        &ACL_POLICY.replace("editors.internal", "nobody.invalid"),
    );
    let error = start(policy.clone(), hosts)
        .await
        .err()
        .expect("the policy is refused");
    let at = format!("{}:3:15", policy.display());
    assert!(
        error.contains("ACL entry `nobody.invalid` does not resolve"),
        "{error}"
    );
    assert!(error.contains(&at), "points at {at}: {error}");
    assert!(
        !error.contains("maybe.invalid` does not"),
        "a parenthesised name is only skipped: {error}"
    );
}
