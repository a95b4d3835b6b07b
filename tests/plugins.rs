//! WebAssembly plugins in the request path, over real sockets: a policy declares the example
//! plugins (built from `examples/plugins/` by its `build.sh`) or the WAT sandbox plugins, and
//! runs them from `vcl_recv`, `vcl_backend_response` and `vcl_deliver`.

mod support;

use std::net::SocketAddr;
use std::process::Command;

use std::time::{Duration, Instant};

use http::StatusCode;
use support::plugins::{built, start_with_generous_deadline, wasm, wat};
use support::{get, start_with_policy, Origin, OriginReply};

/// `public`: a shared cache may store it even for a request with `Authorization` (RFC 9111
/// §3.5), as the auth tests send.
fn cacheable(_: &http::Request<bytes::Bytes>) -> OriginReply {
    OriginReply::ok("from the origin").cache_control("public, max-age=600")
}

// === the Rust SDK examples ===

#[tokio::test]
async fn add_header_in_vcl_deliver_applies_to_misses_and_hits() {
    let origin = Origin::start(cacheable).await;
    let policy = format!(
        r#"vcl 4.1;
plugin add_header {{ .path = "{}"; .config = "x-served-by: edgecache"; }}
sub vcl_deliver {{ plugin.response(add_header); }}
"#,
        wasm("add_header.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let miss = get(addr, "/page", &[]).await;
    assert_eq!(miss.status, StatusCode::OK);
    assert_eq!(miss.cache(), "MISS");
    assert_eq!(miss.header("x-served-by"), Some("edgecache"));
    let hit = get(addr, "/page", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(
        hit.header("x-served-by"),
        Some("edgecache"),
        "vcl_deliver runs on hits too"
    );
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn add_header_in_vcl_backend_response_is_stored_with_the_object() {
    let origin = Origin::start(cacheable).await;
    let policy = format!(
        r#"vcl 4.1;
plugin stamp {{ .path = "{}"; .config = "x-stamped: at-fetch"; }}
sub vcl_backend_response {{ plugin.response(stamp); }}
"#,
        wasm("add_header.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    assert_eq!(get(addr, "/a", &[]).await.header("x-stamped"), Some("at-fetch"));
    let hit = get(addr, "/a", &[]).await;
    assert_eq!(hit.cache(), "HIT");
    assert_eq!(hit.header("x-stamped"), Some("at-fetch"));
}

#[tokio::test]
async fn api_key_answers_401_without_a_key_and_forwards_with_one() {
    let origin = Origin::start(|_| OriginReply::ok("secret stuff")).await;
    let policy = format!(
        r#"vcl 4.1;
plugin api_key {{ .path = "{}"; .config = {{"{{"keys": ["k1", "k2"]}}"}}; }}
sub vcl_recv {{ plugin.request(api_key); return (pass); }}
"#,
        wasm("api_key.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;

    let denied = get(addr, "/api", &[]).await;
    assert_eq!(denied.status, StatusCode::UNAUTHORIZED);
    assert_eq!(denied.header("www-authenticate"), Some("ApiKey"));
    assert_eq!(denied.text(), "missing or invalid API key\n");
    let wrong = get(addr, "/api", &[("x-api-key", "nope")]).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(origin.requests(), 0, "denied requests never reach the origin");

    let allowed = get(addr, "/api", &[("x-api-key", "k2")]).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(allowed.text(), "secret stuff");
    assert_eq!(origin.requests(), 1);
    assert_eq!(
        origin.last().header("x-api-key"),
        None,
        "the plugin removes the key it checked"
    );
}

#[tokio::test]
async fn bucket_header_set_by_the_plugin_feeds_hash_data() {
    let origin = Origin::start(|request| {
        let bucket = request
            .headers()
            .get("x-bucket")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_string();
        OriginReply::ok(format!("bucket {bucket}")).cache_control("max-age=600")
    })
    .await;
    let policy = format!(
        r#"vcl 4.1;
plugin bucket {{ .path = "{}"; .config = "header=x-user"; }}
sub vcl_recv {{
    plugin.request(bucket);
    # Statements after the call see what the plugin set.
    if (!req.http.x-bucket) {{ return (synth(500, "the plugin set no bucket")); }}
}}
sub vcl_hash {{ hash_data(req.http.x-bucket); }}
"#,
        wasm("bucket.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let mut buckets = std::collections::BTreeSet::new();
    for user in 0..16 {
        let user = format!("user-{user}");
        let reply = get(addr, "/home", &[("x-user", &user)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        let bucket = reply.text().trim_start_matches("bucket ").to_string();
        assert!(bucket == "a" || bucket == "b", "unexpected bucket {bucket:?}");
        buckets.insert(bucket);
    }
    assert_eq!(buckets.len(), 2, "16 users land in both buckets");
    assert_eq!(
        origin.requests(),
        2,
        "one object per bucket: the key is the bucket, not the user"
    );
}

// === the sandbox: traps, deadlines, memory ===

fn sandbox_policy(file: &str, on_error: &str) -> String {
    format!(
        r#"vcl 4.1;
plugin guard {{ .path = "{}"; .on_error = {on_error}; }}
sub vcl_recv {{ plugin.request(guard); return (pass); }}
sub vcl_deliver {{ plugin.response(guard); }}
"#,
        wat(file)
    )
}

#[tokio::test]
async fn a_trapping_plugin_fails_closed_with_503_and_the_next_request_is_served() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let (_proxy, addr) = start_with_policy("plugins", &sandbox_policy("trap.wat", "deny"), &origin).await;
    let failed = get(addr, "/", &[("x-trap", "1")]).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(failed.text().contains("plugin guard failed"), "{}", failed.text());
    assert_eq!(origin.requests(), 0, "a fail-closed plugin stops the request");
    let next = get(addr, "/", &[]).await;
    assert_eq!(next.status, StatusCode::OK);
    assert_eq!(
        next.header("x-wat"),
        Some("trap"),
        "a fresh instance runs the next request"
    );
}

#[tokio::test]
async fn a_trapping_plugin_with_on_error_continue_fails_open() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let (_proxy, addr) = start_with_policy("plugins", &sandbox_policy("trap.wat", "continue"), &origin).await;
    let reply = get(addr, "/", &[("x-trap", "1")]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), "fine");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn a_looping_plugin_is_stopped_at_its_deadline() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let path = support::write_policy("plugins", &sandbox_policy("loop.wat", "deny"));
    let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(50);
    })
    .await;
    let started = Instant::now();
    let stopped = get(addr, "/", &[("x-loop", "1")]).await;
    let took = started.elapsed();
    assert_eq!(stopped.status, StatusCode::SERVICE_UNAVAILABLE);
    // The deadline plus a wide margin for a loaded CI machine; without the deadline the
    // request would never end.
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    let next = get(addr, "/", &[]).await;
    assert_eq!(next.status, StatusCode::OK);
    assert_eq!(next.header("x-wat"), Some("loop"));
}

#[tokio::test]
async fn a_plugin_allocating_past_its_memory_limit_is_contained() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let path = support::write_policy("plugins", &sandbox_policy("oom.wat", "deny"));
    let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.memory = 2 << 20;
    })
    .await;
    let failed = get(addr, "/", &[("x-oom", "1")]).await;
    assert_eq!(failed.status, StatusCode::SERVICE_UNAVAILABLE);
    let next = get(addr, "/", &[]).await;
    assert_eq!(next.status, StatusCode::OK);
    assert_eq!(next.header("x-wat"), Some("oom"));
}

// === bad plugin input ===

#[tokio::test]
async fn a_missing_plugin_file_refuses_the_policy_at_start() {
    let policy = support::write_policy(
        "plugins",
        r#"vcl 4.1;
plugin ghost { .path = "/nonexistent/ghost.wasm"; }
sub vcl_recv { plugin.request(ghost); }
"#,
    );
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        backend: Some("127.0.0.1:9".into()),
        policy: Some(policy),
        ..Default::default()
    };
    let error = match edgecache_runtime::start(config).await {
        Ok(_) => panic!("a policy whose plugin file is missing must not start"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("plugin `ghost`"), "{error}");
    assert!(error.contains("file not found"), "{error}");
}

#[test]
fn edgecache_check_reports_plugin_load_errors() {
    let not_wasm = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("edgecache-not-wasm-{}.wasm", std::process::id()));
    std::fs::write(&not_wasm, "this is not a module").expect("write");
    let policy = support::write_policy(
        "plugins",
        &format!(
            r#"vcl 4.1;
backend default {{ .host = "127.0.0.1"; .port = "8080"; }}
plugin broken {{ .path = "{}"; }}
sub vcl_recv {{ plugin.request(broken); }}
"#,
            not_wasm.display()
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_edgecache"))
        .arg("check")
        .arg(&policy)
        .output()
        .expect("run edgecache check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("plugin `broken`"), "{stderr}");
    assert!(stderr.contains("not a WebAssembly module"), "{stderr}");
}

#[tokio::test]
async fn admin_status_and_metrics_report_plugins_and_their_failures() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let path = support::write_policy("plugins", &sandbox_policy("trap.wat", "continue"));
    let (proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    get(addr, "/", &[("x-trap", "1")]).await;
    let admin = proxy.admin_addr().expect("admin API");
    let status: serde_json::Value =
        serde_json::from_slice(&get(admin, "/status", &[]).await.body).expect("JSON");
    let plugin = &status["plugins"][0];
    assert_eq!(plugin["name"], "guard");
    assert_eq!(plugin["on_error"], "continue");
    assert_eq!(plugin["failures"]["trap"], 1, "{status}");
    let metrics = get(admin, "/metrics", &[]).await.text();
    assert!(
        metrics.contains(r#"edgecache_plugin_failures_total{plugin="guard",cause="trap"} 1"#),
        "{metrics}"
    );
}

// === the AssemblyScript SDK ===

#[tokio::test]
async fn assemblyscript_sdk_plugin_adds_its_header_through_the_proxy() {
    let (dist, log) = built();
    let built = dist.join("as_add_header.wasm");
    if !built.exists() {
        // build.sh skips it, saying so, only without npm or without the npm registry.
        assert!(
            log.contains("skipping the AssemblyScript plugin"),
            "build.sh did not build {}:\n{log}",
            built.display()
        );
        eprintln!("SKIPPED: the AssemblyScript toolchain cannot be installed:\n{log}");
        return;
    }
    let origin = Origin::start(cacheable).await;
    let policy = format!(
        r#"vcl 4.1;
plugin as_header {{ .path = "{}"; .root_id = "as_add_header"; .config = "x-sdk: assemblyscript"; }}
sub vcl_deliver {{ plugin.response(as_header); }}
"#,
        built.display()
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    for expected in ["MISS", "HIT"] {
        let reply = get(addr, "/as", &[]).await;
        assert_eq!(reply.cache(), expected);
        assert_eq!(reply.header("x-sdk"), Some("assemblyscript"));
    }
}

// === root ids, VM configuration, several root contexts in one module ===

#[tokio::test]
async fn assemblyscript_root_id_and_vm_config_from_the_policy_pick_the_root_context() {
    let (dist, log) = built();
    let built = dist.join("as_add_header.wasm");
    if !built.exists() {
        assert!(log.contains("skipping the AssemblyScript plugin"), "{log}");
        eprintln!("SKIPPED: the AssemblyScript toolchain cannot be installed:\n{log}");
        return;
    }
    let origin = Origin::start(cacheable).await;
    // One module, two declarations, each with its own root context.
    let policy = format!(
        r#"vcl 4.1;
plugin header {{ .path = "{path}"; .root_id = "as_add_header"; .config = "x-root: add-header"; }}
plugin stamp {{ .path = "{path}"; .root_id = "as_stamp"; .vm_config = "stamped-by-vm-config"; }}
sub vcl_deliver {{ plugin.response(header); plugin.response(stamp); }}
"#,
        path = built.display()
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let reply = get(addr, "/roots", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("x-root"), Some("add-header"));
    assert_eq!(reply.header("x-as-stamp"), Some("stamped-by-vm-config"));

    // Without a root id the SDK finds no factory: the policy is refused, with the SDK's words.
    let policy = format!(
        "vcl 4.1;\nplugin header {{ .path = \"{}\"; }}\nsub vcl_deliver {{ plugin.response(header); }}\n",
        built.display()
    );
    let path = support::write_policy("plugins-no-root-id", &policy);
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        backend: Some(origin.addr.to_string()),
        policy: Some(path),
        ..Default::default()
    };
    let refused = edgecache_runtime::start(config).await.err().expect("refused");
    assert!(
        refused.to_string().contains("Missing root context factory"),
        "{refused}"
    );
}

// === outbound calls, pauses, ticks ===

/// An auth service: 200 (with `x-auth-user`) for `authorization: Bearer good`, 403 otherwise;
/// requests for `/slow...` are answered after 2 s.
fn auth_service(request: &http::Request<bytes::Bytes>) -> OriginReply {
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
    let reply = match header("authorization") {
        Some("Bearer good") => OriginReply::ok("").header("x-auth-user", "alice"),
        Some("Bearer broken") => OriginReply::with_status(500, "oops"),
        _ => OriginReply::with_status(403, "no"),
    };
    if header("x-original-path").is_some_and(|p| p.starts_with("/slow")) {
        return reply.delay(Duration::from_secs(2));
    }
    reply
}

fn auth_policy(origin: SocketAddr, auth: SocketAddr, config: &str) -> String {
    format!(
        r#"vcl 4.1;
backend default {{ .host = "127.0.0.1"; .port = "{}"; }}
backend auth_service {{ .host = "127.0.0.1"; .port = "{}"; }}
plugin auth {{ .path = "{}"; .upstreams = "auth=auth_service"; .config = "{config}"; }}
sub vcl_recv {{
    # Appends: run again on the request as it was, this still ends up "recv" once.
    set req.http.x-before = req.http.x-before + "recv";
    plugin.request(auth);
    return (pass);
}}
"#,
        origin.port(),
        auth.port(),
        wasm("http_auth.wasm")
    )
}

#[tokio::test]
async fn auth_plugin_pauses_the_request_until_its_upstream_answers() {
    let origin = Origin::fixed(OriginReply::ok("members only")).await;
    let auth = Origin::start(auth_service).await;
    let (_proxy, addr) =
        start_with_generous_deadline(&auth_policy(origin.addr, auth.addr, "cluster=auth"), &origin).await;

    let allowed = get(addr, "/page?x=1", &[("authorization", "Bearer good")]).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(allowed.text(), "members only");
    let seen = origin.last();
    assert_eq!(
        seen.header("x-auth-user"),
        Some("alice"),
        "set while the request was paused"
    );
    assert_eq!(
        seen.header("x-before"),
        Some("recv"),
        "applied once, though vcl_recv ran again after the pause"
    );
    let asked = auth.last();
    assert_eq!(asked.target, "/check");
    assert_eq!(asked.header("x-original-path"), Some("/page?x=1"));
    assert_eq!(asked.header("authorization"), Some("Bearer good"));

    let denied = get(addr, "/page", &[("authorization", "Bearer bad")]).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(denied.header("x-auth"), Some("denied"));
    assert_eq!(denied.text(), "denied\n");
    // The upstream failing is the plugin's call: this one denies.
    let failing = get(addr, "/page", &[("authorization", "Bearer broken")]).await;
    assert_eq!(failing.status, StatusCode::FORBIDDEN);
    assert_eq!(origin.requests(), 1, "denied requests never reach the origin");
    assert_eq!(auth.requests(), 3);
}

#[tokio::test]
async fn a_slow_auth_upstream_holds_only_its_own_request() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let auth = Origin::start(auth_service).await;
    let policy = auth_policy(origin.addr, auth.addr, "cluster=auth timeout_ms=5000");
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let slow = tokio::spawn(async move { get(addr, "/slow", &[("authorization", "Bearer good")]).await });
    // The slow call is in flight once the auth service has seen it.
    let started = Instant::now();
    while auth.requests() == 0 {
        assert!(
            started.elapsed() < support::EXCHANGE_LIMIT,
            "the slow call never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Many requests go through while it is paused (more than the machine has threads).
    let fast = support::concurrently(16, |_| get(addr, "/fast", &[("authorization", "Bearer good")])).await;
    let statuses: Vec<u16> = fast.iter().map(|r| r.status.as_u16()).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(
        !slow.is_finished(),
        "the slow request is still waiting for its auth answer"
    );
    let slow = slow.await.unwrap();
    assert_eq!(slow.status, StatusCode::OK);
    assert_eq!(origin.requests(), 17);
}

#[tokio::test]
async fn auth_upstream_timeout_down_or_unknown_fails_the_request_not_the_proxy() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let auth = Origin::start(auth_service).await;

    // The plugin's own timeout (300 ms) ends the call: it answers 503.
    let policy = auth_policy(origin.addr, auth.addr, "cluster=auth timeout_ms=300");
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let started = Instant::now();
    let timed_out = get(addr, "/slow", &[("authorization", "Bearer good")]).await;
    assert_eq!(timed_out.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(timed_out.header("x-auth"), Some("unreachable"));
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );

    // Nothing listens: the call fails at connect.
    let down = support::unused_port().await;
    let policy = auth_policy(origin.addr, down, "cluster=auth");
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let refused = get(addr, "/", &[("authorization", "Bearer good")]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.header("x-auth"), Some("unreachable"));

    // A cluster the declaration does not name: proxy_http_call fails, the plugin answers.
    let policy = auth_policy(origin.addr, auth.addr, "cluster=nosuch");
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    for _ in 0..2 {
        let unknown = get(addr, "/", &[("authorization", "Bearer good")]).await;
        assert_eq!(unknown.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(unknown.header("x-auth"), Some("call-failed"));
    }
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn a_policy_whose_upstreams_name_no_backend_is_refused() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let policy = format!(
        "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
         plugin auth {{ .path = \"{}\"; .upstreams = \"auth=missing\"; }}\n\
         sub vcl_recv {{ plugin.request(auth); }}\n",
        origin.addr.port(),
        wasm("http_auth.wasm")
    );
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        policy: Some(support::write_policy("plugins-bad-upstream", &policy)),
        ..Default::default()
    };
    let refused = edgecache_runtime::start(config).await.err().expect("refused");
    assert!(refused.to_string().contains("`missing`"), "{refused}");
}

#[tokio::test]
async fn auth_plugin_in_vcl_deliver_pauses_the_response_until_its_upstream_answers() {
    let origin = Origin::start(cacheable).await;
    let auth = Origin::start(auth_service).await;
    let policy = format!(
        r#"vcl 4.1;
backend default {{ .host = "127.0.0.1"; .port = "{}"; }}
backend auth_service {{ .host = "127.0.0.1"; .port = "{}"; }}
plugin auth {{ .path = "{}"; .upstreams = "auth=auth_service"; .config = "phase=response"; }}
# Cached though it has an Authorization header: the plugin checks every answer.
sub vcl_recv {{ return (hash); }}
sub vcl_deliver {{
    # Appends: run again on the response as it was, this still ends up "deliver" once.
    set resp.http.x-before = resp.http.x-before + "deliver";
    plugin.response(auth);
    set resp.http.x-after = "after";
}}
"#,
        origin.addr.port(),
        auth.addr.port(),
        wasm("http_auth.wasm")
    );
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;

    for expected_state in ["MISS", "HIT"] {
        let allowed = get(addr, "/page", &[("authorization", "Bearer good")]).await;
        assert_eq!(allowed.status, StatusCode::OK);
        assert_eq!(allowed.text(), "from the origin");
        assert_eq!(allowed.header("x-cache"), Some(expected_state));
        assert_eq!(
            allowed.header("x-auth-user"),
            Some("alice"),
            "set while the response was paused"
        );
        assert_eq!(allowed.header("x-before"), Some("deliver"), "applied once");
        assert_eq!(
            allowed.header("x-after"),
            Some("after"),
            "vcl_deliver went on after the pause"
        );
    }
    let denied = get(addr, "/page", &[("authorization", "Bearer bad")]).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(denied.header("x-auth"), Some("denied"));
    assert_eq!(denied.text(), "denied\n");
    assert_eq!(origin.requests(), 1, "the response was cached before the check");
    assert_eq!(auth.requests(), 3, "asked for every response, hits too");
    let asked = auth.last();
    assert_eq!(asked.header("x-original-path"), Some("/page"));
}

fn postpone_policy(config: &str, on_error: &str) -> String {
    format!(
        r#"vcl 4.1;
plugin hold {{ .path = "{}"; .config = "{config}"; .vm_config = "vm-a"; .on_error = {on_error}; }}
sub vcl_recv {{
    # Run again after the pause from the request as it was: the plugin's own stamp, written
    # just before it paused, is not there yet.
    if (req.http.x-postponed) {{ return (synth(500, "saw the plugin's write before its call")); }}
    plugin.request(hold);
    return (pass);
}}
"#,
        wasm("postpone.wasm")
    )
}

#[tokio::test]
async fn postponed_requests_are_resumed_by_the_plugin_tick() {
    let origin = Origin::fixed(OriginReply::ok("later")).await;
    let path = support::write_policy("plugins-postpone", &postpone_policy("tick_ms=50", "deny"));
    let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(100);
    })
    .await;
    let replies =
        support::concurrently(8, |i| async move { get(addr, &format!("/held/{i}"), &[]).await }).await;
    assert!(replies
        .iter()
        .all(|r| r.status == StatusCode::OK && r.text() == "later"));
    for seen in origin.log() {
        let tick: u64 = seen
            .header("x-postponed-tick")
            .expect("resumed from a tick")
            .parse()
            .unwrap();
        assert!(tick >= 1);
        assert_eq!(seen.header("x-postpone-vm"), Some("vm-a"), "from .vm_config");
        assert_eq!(
            seen.header("x-postponed"),
            Some("held"),
            "written before the pause"
        );
    }
    let straight = get(addr, "/now", &[("x-no-postpone", "1")]).await;
    assert_eq!(straight.status, StatusCode::OK);
    assert_eq!(origin.last().header("x-postponed-tick"), None);
    assert_eq!(origin.requests(), 9);
}

#[tokio::test]
async fn a_sub_run_again_after_a_pause_starts_from_the_request_before_every_write() {
    // A plugin writes, then a statement changes the request (which copies the start, with the
    // plugin's write undone), then another plugin pauses: the run again sees neither write
    // before its call, and the statement's append lands once.
    let origin = Origin::fixed(OriginReply::ok("later")).await;
    let policy = format!(
        r#"vcl 4.1;
plugin bucket {{ .path = "{}"; .config = "header=x-user"; }}
plugin hold {{ .path = "{}"; .config = "tick_ms=50"; }}
sub vcl_recv {{
    if (req.http.x-bucket || req.http.x-postponed) {{ return (synth(500, "saw a write before its call")); }}
    plugin.request(bucket);
    set req.http.x-before = req.http.x-before + "recv";
    plugin.request(hold);
    return (pass);
}}
"#,
        wasm("bucket.wasm"),
        wasm("postpone.wasm")
    );
    let path = support::write_policy("plugins-rerun-start", &policy);
    let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(100);
    })
    .await;
    let reply = get(addr, "/held", &[("x-user", "ann")]).await;
    assert_eq!(
        (reply.status, reply.text()),
        (StatusCode::OK, "later".to_string())
    );
    let seen = origin.last();
    assert!(seen.header("x-postponed-tick").is_some(), "resumed from a tick");
    assert_eq!(seen.header("x-postponed"), Some("held"));
    assert!(matches!(seen.header("x-bucket"), Some("a" | "b")));
    assert_eq!(seen.header("x-before"), Some("recv"));
}

#[tokio::test]
async fn a_request_paused_past_the_pause_timeout_fails_as_on_error_says() {
    let origin = Origin::fixed(OriginReply::ok("eventually")).await;
    for (on_error, status) in [
        ("deny", StatusCode::SERVICE_UNAVAILABLE),
        ("continue", StatusCode::OK),
    ] {
        // Ticks every 60 s: nothing resumes the request within the 1 s pause timeout.
        let path = support::write_policy(
            "plugins-pause-timeout",
            &postpone_policy("tick_ms=60000", on_error),
        );
        let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
            config.policy = Some(path);
            config.plugin_pause_timeout = Duration::from_secs(1);
            config.plugin_limits.deadline = Duration::from_millis(100);
        })
        .await;
        let started = Instant::now();
        let reply = get(addr, "/stuck", &[]).await;
        let waited = started.elapsed();
        assert_eq!(reply.status, status, "on_error = {on_error}");
        assert!(waited >= Duration::from_millis(900), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    }
    assert_eq!(
        origin.requests(),
        1,
        "only the fail-open request reached the origin"
    );
}

// === bodies ===

fn body_policy(max_body: &str) -> String {
    format!(
        r#"vcl 4.1;
plugin rewrite {{ .path = "{}"; .config = "origin=edge"; .max_body = {max_body}; }}
sub vcl_recv {{ return (pass); }}
sub vcl_deliver {{ plugin.response(rewrite); }}
"#,
        wasm("body_rewrite.wasm")
    )
}

#[tokio::test]
async fn body_rewriter_rewrites_a_100_kb_response_and_its_content_length_follows() {
    // 100 KB in 16 chunks: the plugin sees it grow (Pause) and rewrites it whole.
    let line = "from the origin server\n"; // 23 bytes, "origin" once
    let lines = 100 * 1024 / line.len();
    let text = line.repeat(lines);
    let chunks: Vec<(Duration, bytes::Bytes)> = text
        .as_bytes()
        .chunks(text.len() / 16 + 1)
        .map(|c| (Duration::ZERO, bytes::Bytes::copy_from_slice(c)))
        .collect();
    let origin = Origin::fixed(
        OriginReply::ok("")
            .header("content-type", "text/plain")
            .chunks(chunks),
    )
    .await;
    let (_proxy, addr) = start_with_generous_deadline(&body_policy("1MB"), &origin).await;
    let reply = get(addr, "/big.txt", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let expected = "from the edge server\n".repeat(lines);
    assert_eq!(reply.text().len(), expected.len());
    assert!(reply.text() == expected, "every `origin` was replaced");
    assert_eq!(reply.header("x-body-rewritten"), Some(lines.to_string().as_str()));
    assert_eq!(
        reply.header("content-length"),
        Some(expected.len().to_string().as_str())
    );
    assert_eq!(reply.header("transfer-encoding"), None);
}

#[tokio::test]
async fn a_10_mb_response_through_a_plugin_with_a_1_mb_max_body_is_refused_with_502() {
    let origin =
        Origin::fixed(OriginReply::ok(vec![b'x'; 10 << 20]).header("content-type", "text/plain")).await;
    let (_proxy, addr) = start_with_generous_deadline(&body_policy("1MB"), &origin).await;
    let reply = get(addr, "/huge.txt", &[]).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert!(reply.text().contains("`.max_body`"), "{}", reply.text());
    // The next request is served: nothing is left behind.
    let origin_small = Origin::fixed(OriginReply::ok("origin").header("content-type", "text/plain")).await;
    let (_proxy, addr) = start_with_generous_deadline(&body_policy("1MB"), &origin_small).await;
    assert_eq!(get(addr, "/", &[]).await.text(), "edge");
}

#[tokio::test]
async fn a_plugin_without_max_body_sees_no_body_and_the_response_streams_as_sent() {
    let origin = Origin::fixed(OriginReply::ok("origin body").header("content-type", "text/plain")).await;
    let policy = format!(
        "vcl 4.1;\nplugin rewrite {{ .path = \"{}\"; }}\nsub vcl_deliver {{ plugin.response(rewrite); }}\n",
        wasm("body_rewrite.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let reply = get(addr, "/", &[]).await;
    assert_eq!(
        reply.text(),
        "origin body",
        "no .max_body: the body callbacks do not run"
    );
    assert_eq!(reply.header("x-body-rewritten"), None);
}

#[tokio::test]
async fn json_validator_refuses_an_invalid_request_body_and_forwards_a_valid_one() {
    let origin =
        Origin::start(|request| OriginReply::ok(format!("got {} bytes", request.body().len()))).await;
    let policy = format!(
        r#"vcl 4.1;
plugin json {{ .path = "{}"; .max_body = 64KB; }}
sub vcl_recv {{ plugin.request(json); return (pass); }}
"#,
        wasm("json_validator.wasm")
    );
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let json = [("content-type", "application/json")];
    let bad = support::send("POST", addr, "/api", &json, r#"{"a": [1, 2"#).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.header("x-json-validator"), Some("refused"));
    assert!(bad.text().starts_with("invalid JSON body"), "{}", bad.text());
    assert_eq!(origin.requests(), 0, "refused bodies never reach the origin");

    let good = support::send("POST", addr, "/api", &json, r#"{"a": [1, 2]}"#).await;
    assert_eq!(good.status, StatusCode::OK);
    assert_eq!(good.text(), "got 13 bytes");
    let seen = origin.last();
    assert_eq!(seen.body.as_ref(), br#"{"a": [1, 2]}"#);
    assert_eq!(
        seen.header("x-json-validated"),
        Some("1"),
        "set by the body callback"
    );
    assert_eq!(seen.header("content-length"), Some("13"));

    let too_big = support::send("POST", addr, "/api", &json, vec![b' '; 100 << 10]).await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn json_validator_pauses_at_the_end_of_the_body_until_its_check_answers() {
    let origin =
        Origin::start(|request| OriginReply::ok(format!("got {} bytes", request.body().len()))).await;
    // Accepts bodies that say "ok", after a moment: the request waits at the end of its body.
    let checker = Origin::start(|request| {
        let reply = if request.body().windows(4).any(|w| w == b"\"ok\"") {
            OriginReply::ok("").header("x-validated-by", "checker")
        } else {
            OriginReply::with_status(422, "no")
        };
        reply.delay(Duration::from_millis(200))
    })
    .await;
    let policy = format!(
        r#"vcl 4.1;
backend default {{ .host = "127.0.0.1"; .port = "{}"; }}
backend checker {{ .host = "127.0.0.1"; .port = "{}"; }}
plugin json {{ .path = "{}"; .max_body = 64KB; .upstreams = "check=checker"; .config = "check=check"; }}
sub vcl_recv {{ plugin.request(json); return (pass); }}
"#,
        origin.addr.port(),
        checker.addr.port(),
        wasm("json_validator.wasm")
    );
    let (_proxy, addr) = start_with_generous_deadline(&policy, &origin).await;
    let json = [("content-type", "application/json")];

    let accepted = support::send("POST", addr, "/api", &json, r#"{"state": "ok"}"#).await;
    assert_eq!(accepted.status, StatusCode::OK);
    assert_eq!(accepted.text(), "got 15 bytes");
    let seen = origin.last();
    assert_eq!(seen.body.as_ref(), br#"{"state": "ok"}"#);
    assert_eq!(
        seen.header("x-validated-by"),
        Some("checker"),
        "set when the check answered"
    );
    let asked = checker.last();
    assert_eq!(asked.method, "POST");
    assert_eq!(asked.target, "/validate");
    assert_eq!(
        asked.body.as_ref(),
        br#"{"state": "ok"}"#,
        "the check sees the whole body"
    );

    let refused = support::send("POST", addr, "/api", &json, r#"{"state": "bad"}"#).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.header("x-json-validator"), Some("refused-by-check"));
    assert_eq!(origin.requests(), 1, "the refused body never reaches the origin");
    assert_eq!(checker.requests(), 2);
}

// === what Go SDK plugins need (a WAT fixture: CI cannot build Go), metrics, queues ===

#[tokio::test]
async fn a_go_style_plugin_starts_with_poll_oneoff_and_its_panic_reaches_the_log_with_its_name() {
    let log = support::CapturedLog::default();
    let _guard = log.install("edgecache::plugin=warn");
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let policy = format!(
        "vcl 4.1;\nplugin gopher {{ .path = \"{}\"; }}\n\
         sub vcl_recv {{ plugin.request(gopher); return (pass); }}\n\
         sub vcl_deliver {{ plugin.response(gopher); }}\n",
        wat("go_like.wat")
    );
    // Loading runs _initialize, which traps unless poll_oneoff answered its clock subscription.
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let fine = get(addr, "/", &[]).await;
    assert_eq!(fine.status, StatusCode::OK);
    assert_eq!(fine.header("x-wat"), Some("go_like"));

    let panicked = get(addr, "/", &[("x-panic", "1")]).await;
    assert_eq!(panicked.status, StatusCode::SERVICE_UNAVAILABLE);
    let text = log.text();
    let line = text
        .lines()
        .find(|l| l.contains("panic: boom in the Go runtime"))
        .unwrap_or_else(|| panic!("the panic is not in the log:\n{text}"));
    assert!(line.contains("gopher"), "the line names the plugin: {line}");
    assert!(
        text.lines()
            .any(|l| l.contains("proc_exit(2)") && l.contains("panic: boom")),
        "the failure quotes the panic:\n{text}"
    );
    assert_eq!(
        get(addr, "/", &[]).await.status,
        StatusCode::OK,
        "a fresh instance serves"
    );
}

#[tokio::test]
async fn plugin_metrics_reach_the_metrics_endpoint_and_a_shared_queue_is_drained_by_ticks() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let policy = format!(
        "vcl 4.1;\nplugin stats {{ .path = \"{}\"; }}\n\
         sub vcl_recv {{ plugin.request(stats); return (pass); }}\n\
         sub vcl_deliver {{ plugin.response(stats); }}\n",
        wasm("stats.wasm")
    );
    let path = support::write_policy("plugins-stats", &policy);
    let (proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(100);
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    for i in 0..10 {
        assert_eq!(get(addr, &format!("/p/{i}"), &[]).await.status, StatusCode::OK);
    }
    let admin = proxy.admin_addr().expect("admin API");
    let metrics = get(admin, "/metrics", &[]).await.text();
    for expected in [
        r#"edgecache_plugin_counter_total{plugin="stats",metric="requests"} 10"#,
        r#"edgecache_plugin_gauge{plugin="stats",metric="last_path_bytes"} 4"#,
        r#"edgecache_plugin_histogram_count_total{plugin="stats",metric="request_headers"} 10"#,
    ] {
        assert!(metrics.contains(expected), "{expected} missing:\n{metrics}");
    }
    // Ticks every 20 ms drain the queue into shared data; each response shows the total so
    // far. Bounded polling: the tick is the plugin's own timer, with no signal to wait on.
    let started = Instant::now();
    loop {
        let seen: u64 = get(addr, "/poll", &[])
            .await
            .header("x-stats-seen")
            .unwrap()
            .parse()
            .unwrap();
        if seen >= 10 {
            break;
        }
        assert!(
            started.elapsed() < support::EXCHANGE_LIMIT,
            "the queue was never drained ({seen})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_plugins_local_response_goes_through_the_response_phase_of_the_requests_plugins() {
    let origin = Origin::fixed(OriginReply::ok("secret")).await;
    let policy = format!(
        r#"vcl 4.1;
plugin stamp {{ .path = "{}"; .config = "x-stamped: yes"; }}
plugin api_key {{ .path = "{}"; .config = "k1"; }}
sub vcl_recv {{ plugin.request(stamp); plugin.request(api_key); return (pass); }}
sub vcl_deliver {{ plugin.response(stamp); }}
"#,
        wasm("add_header.wasm"),
        wasm("api_key.wasm")
    );
    let (_proxy, addr) = start_with_policy("plugins", &policy, &origin).await;
    let denied = get(addr, "/", &[]).await;
    assert_eq!(denied.status, StatusCode::UNAUTHORIZED);
    assert_eq!(denied.header("x-stamped"), Some("yes"), "as on Envoy");
    assert_eq!(
        denied.text(),
        "missing or invalid API key\n",
        "the body is the plugin's"
    );
    assert_eq!(denied.cache(), "SYNTH");
    let allowed = get(addr, "/", &[("x-api-key", "k1")]).await;
    assert_eq!(allowed.status, StatusCode::OK);
    assert_eq!(allowed.header("x-stamped"), Some("yes"));
    assert_eq!(origin.requests(), 1);
}
