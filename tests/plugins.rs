//! WebAssembly plugins in the request path, over real sockets: a policy declares the example
//! plugins (built from `examples/plugins/` by its `build.sh`) or the WAT sandbox plugins, and
//! runs them from `vcl_recv`, `vcl_backend_response` and `vcl_deliver`.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use edgecache_runtime::Running;
use http::StatusCode;
use support::{get, Origin, OriginReply};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins")
}

/// Builds the example plugins once per test run and returns `dist/` with what `build.sh`
/// printed. The test command installs the wasm32-wasip1 target (`.ci/run`), so a failed build
/// fails the tests.
fn built() -> &'static (PathBuf, String) {
    static BUILT: OnceLock<(PathBuf, String)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = Command::new("bash")
            .arg(examples().join("build.sh"))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .expect("run examples/plugins/build.sh");
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "examples/plugins/build.sh failed:\n{log}");
        (examples().join("dist"), log)
    })
}

fn dist() -> PathBuf {
    built().0.clone()
}

fn wat(name: &str) -> String {
    examples().join("wat").join(name).display().to_string()
}

fn wasm(name: &str) -> String {
    dist().join(name).display().to_string()
}

async fn start_with_policy(policy: &str, origin: &Origin) -> (Running, SocketAddr) {
    let path = support::write_policy("plugins", policy);
    support::start_proxy(origin.addr, |config| config.policy = Some(path)).await
}

fn cacheable(_: &http::Request<bytes::Bytes>) -> OriginReply {
    OriginReply::ok("from the origin").cache_control("max-age=600")
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
    let (_proxy, addr) = start_with_policy(&policy, &origin).await;
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
    let (_proxy, addr) = start_with_policy(&policy, &origin).await;
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
    let (_proxy, addr) = start_with_policy(&policy, &origin).await;

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
    let (_proxy, addr) = start_with_policy(&policy, &origin).await;
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
    let (_proxy, addr) = start_with_policy(&sandbox_policy("trap.wat", "deny"), &origin).await;
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
    let (_proxy, addr) = start_with_policy(&sandbox_policy("trap.wat", "continue"), &origin).await;
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
plugin as_header {{ .path = "{}"; .config = "x-sdk: assemblyscript"; }}
sub vcl_deliver {{ plugin.response(as_header); }}
"#,
        built.display()
    );
    let (_proxy, addr) = start_with_policy(&policy, &origin).await;
    for expected in ["MISS", "HIT"] {
        let reply = get(addr, "/as", &[]).await;
        assert_eq!(reply.cache(), expected);
        assert_eq!(reply.header("x-sdk"), Some("assemblyscript"));
    }
}
