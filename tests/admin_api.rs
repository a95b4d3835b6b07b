//! The admin API over real sockets: status, stats, backends, purge and ban effects, reload,
//! the bearer token, Prometheus metrics, and the `edgecache admin` command.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::process::Command;

use edgecache_runtime::Config;
use reload_support::*;
use support::{eventually_stored, get, start_proxy, Origin, OriginReply};

async fn cacheable_origin() -> Origin {
    Origin::start(|request| {
        let reply = OriginReply::ok(format!("body of {}", request.uri().path())).cache_control("max-age=600");
        if request.uri().path().ends_with(".png") {
            reply.header("content-type", "image/png")
        } else {
            reply.header("content-type", "text/html")
        }
    })
    .await
}

fn loopback_admin(config: &mut Config) {
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
}

#[tokio::test]
async fn status_stats_and_backends() {
    let origin = cacheable_origin().await;
    let (policy, running, addr) = start_watching(origin.addr, &marking("A"), |_| {}).await;
    get(addr, "/s", &[]).await;
    get(addr, "/s", &[]).await;
    eventually_stored(&running, 1).await;

    let status = admin_json(&running, "/status").await;
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert!(status["uptime_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(status["generation"], 1);
    assert_eq!(status["watching"], true);
    assert_eq!(status["policy"]["path"], policy.display().to_string());
    assert_eq!(status["policy"]["files"][0], policy.display().to_string());
    assert!(status["policy"]["loaded_at"].as_str().unwrap().ends_with("GMT"));
    assert_eq!(status["reloads"]["ok"], 0);

    let stats = admin_json(&running, "/stats").await;
    assert_eq!(stats["requests"], 2);
    assert_eq!(stats["misses"], 1);
    assert_eq!(stats["hits"], 1);
    assert_eq!(stats["cache"]["objects"], 1);
    assert!(stats["cache"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(stats["bans"], 0);

    let backends = admin_json(&running, "/backends").await;
    assert_eq!(backends[0]["name"], "default");
    assert_eq!(backends[0]["address"], origin.addr.to_string());
    assert_eq!(backends[0]["fetches"], 1);
    assert_eq!(backends[0]["failures"], 0);
    assert_eq!(backends[0]["in_flight"], 0);

    assert_eq!(admin(&running, "GET", "/nope", "").await.status, 404);
    let wrong = admin(&running, "GET", "/reload", "").await;
    assert_eq!(wrong.status, 405, "{}", wrong.body);
}

#[tokio::test]
async fn purge_removes_the_object() {
    let origin = cacheable_origin().await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    get(addr, "/p?x=1", &[]).await;
    assert_eq!(get(addr, "/p?x=1", &[]).await.cache(), "HIT");
    eventually_stored(&running, 1).await;

    // The key is the one the client used: its Host header (the proxy's address) and the URL.
    let host = addr.to_string();
    let purged = admin(
        &running,
        "POST",
        &format!("/purge?url=%2Fp%3Fx%3D1&host={host}"),
        "",
    )
    .await;
    assert_eq!(purged.status, 200, "{}", purged.body);
    assert_eq!(get(addr, "/p?x=1", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests(), 2);

    // An absolute URL carries its host; a second purge finds nothing.
    eventually_stored(&running, 1).await;
    let url = format!("http://{host}/p?x=1");
    let purged = admin(
        &running,
        "POST",
        &format!(
            "/purge?url={}",
            edgecache_runtime::admin::client::encode_query_value(&url)
        ),
        "",
    )
    .await;
    assert_eq!(purged.status, 200, "{}", purged.body);
    let again = admin(&running, "POST", &format!("/purge?url=/p?x=1&host={host}"), "").await;
    assert_eq!(again.status, 404, "{}", again.body);
    assert_eq!(get(addr, "/p?x=1", &[]).await.cache(), "MISS");

    assert_eq!(admin(&running, "POST", "/purge", "").await.status, 400);
}

#[tokio::test]
async fn bans_drop_matching_objects_at_their_next_lookup() {
    let origin = cacheable_origin().await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    for path in ["/news/1", "/news/2", "/about", "/logo.png"] {
        get(addr, path, &[]).await;
        assert_eq!(get(addr, path, &[]).await.cache(), "HIT", "{path}");
    }
    eventually_stored(&running, 4).await;

    let banned = admin(&running, "POST", "/ban", r#"req.url ~ "^/news/""#).await;
    assert_eq!(banned.status, 200, "{}", banned.body);
    let body: serde_json::Value = serde_json::from_str(&banned.body).unwrap();
    assert_eq!(body["bans"], 1);
    assert_eq!(get(addr, "/news/1", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/news/2", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/about", &[]).await.cache(), "HIT");
    assert_eq!(get(addr, "/logo.png", &[]).await.cache(), "HIT");
    // Objects stored after the ban are not affected by it.
    assert_eq!(get(addr, "/news/1", &[]).await.cache(), "HIT");

    let banned = admin(&running, "POST", "/ban", r#"obj.http.Content-Type ~ "image""#).await;
    assert_eq!(banned.status, 200, "{}", banned.body);
    assert_eq!(get(addr, "/logo.png", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/about", &[]).await.cache(), "HIT");

    let refused = admin(&running, "POST", "/ban", r#"req.url ~ "(unclosed""#).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains("error"),
        "a rendered diagnostic: {}",
        refused.body
    );
    let refused = admin(&running, "POST", "/ban", "resp.status == 200").await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(admin(&running, "POST", "/ban", "  ").await.status, 400);
}

#[tokio::test]
async fn reload_endpoint_reports_the_generation_or_the_diagnostics() {
    let origin = cacheable_origin().await;
    let (policy, running, addr) =
        start_watching(origin.addr, &marking("A"), |config| config.watch_policy = false).await;

    write_in_place(&policy, &marking("B"));
    let reloaded = admin(&running, "POST", "/reload", "").await;
    assert_eq!(reloaded.status, 200, "{}", reloaded.body);
    let body: serde_json::Value = serde_json::from_str(&reloaded.body).unwrap();
    assert_eq!(body["generation"], 2);
    assert_eq!(marker(&get(addr, "/r", &[]).await), "B");

    write_in_place(&policy, &broken("C"));
    let refused = admin(&running, "POST", "/reload", "").await;
    assert_eq!(refused.status, 422);
    assert!(
        refused.body.contains(&format!("{}:4:", policy.display())),
        "{}",
        refused.body
    );
    assert_eq!(marker(&get(addr, "/r", &[]).await), "B");
    let status = admin_json(&running, "/status").await;
    assert_eq!(status["reloads"]["last_error"]["trigger"], "admin");
    assert_eq!(status["generation"], 2);
}

#[tokio::test]
async fn a_token_file_makes_the_token_required() {
    let origin = cacheable_origin().await;
    let dir = temp_dir();
    let token_file = path_in(&dir, "admin.token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token_path = token_file.clone();
    let (running, _addr) = start_proxy(origin.addr, move |config| {
        loopback_admin(config);
        config.admin_token_file = Some(token_path);
    })
    .await;
    let missing = admin(&running, "GET", "/status", "").await;
    assert_eq!(missing.status, 401);
    let wrong = admin_with_token(&running, Some("s3cret-tokem"), "GET", "/status", "").await;
    assert_eq!(wrong.status, 401);
    let right = admin_with_token(&running, Some("s3cret-token"), "GET", "/status", "").await;
    assert_eq!(right.status, 200, "{}", right.body);
    let purge = admin(&running, "POST", "/purge?url=/x&host=h", "").await;
    assert_eq!(purge.status, 401, "every endpoint is guarded");
}

#[tokio::test]
async fn off_loopback_needs_a_token_file() {
    let origin = cacheable_origin().await;
    let mut config = Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        backend: Some(origin.addr.to_string()),
        admin_listen: Some(SocketAddr::from(([0, 0, 0, 0], 0))),
        ..Config::default()
    };
    let error = edgecache_runtime::start(config.clone())
        .await
        .err()
        .expect("refused without a token file");
    let message = error.to_string();
    assert!(
        message.contains("admin_listen") && message.contains("token"),
        "{message}"
    );

    // With a token file it starts, and the token is required.
    let dir = temp_dir();
    let token_file = path_in(&dir, "admin.token");
    std::fs::write(&token_file, "t0ken").unwrap();
    config.admin_token_file = Some(token_file);
    let running = edgecache_runtime::start(config)
        .await
        .expect("starts with a token file");
    let port = running.admin_addr().unwrap().port();
    let loopback = SocketAddr::from(([127, 0, 0, 1], port));
    let call = |token| edgecache_runtime::admin::client::call(loopback, token, "GET", "/stats", "");
    assert_eq!(call(None).await.unwrap().status, 401);
    assert_eq!(call(Some("t0ken")).await.unwrap().status, 200);

    // An empty token file is refused at start.
    let empty = path_in(&dir, "empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let config = Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        backend: Some(origin.addr.to_string()),
        admin_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        admin_token_file: Some(empty),
        ..Config::default()
    };
    let error = edgecache_runtime::start(config)
        .await
        .err()
        .expect("an empty token is refused");
    assert!(error.to_string().contains("empty"), "{error}");
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text() {
    let origin = cacheable_origin().await;
    let (policy, running, addr) =
        start_watching(origin.addr, &marking("A"), |config| config.watch_policy = false).await;
    get(addr, "/m", &[]).await;
    get(addr, "/m", &[]).await;
    eventually_stored(&running, 1).await;
    running.reload().await.unwrap();
    write_in_place(&policy, &broken("B"));
    running.reload().await.unwrap_err();

    let reply = admin(&running, "GET", "/metrics", "").await;
    assert_eq!(reply.status, 200);
    check_exposition_lines(&reply.body);
    let scrape =
        prometheus_parse::Scrape::parse(reply.body.lines().map(|line| Ok(line.to_string()))).expect("parses");
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|sample| {
                sample.metric == name
                    && label.is_none_or(|(key, value)| sample.labels.get(key) == Some(value))
            })
            .unwrap_or_else(|| panic!("no sample {name} {label:?} in\n{}", reply.body));
        match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name}: {other:?}"),
        }
    };
    assert_eq!(value("edgecache_requests_total", Some(("result", "hit"))), 1.0);
    assert_eq!(value("edgecache_requests_total", Some(("result", "miss"))), 1.0);
    assert_eq!(value("edgecache_coalesced_waits_total", None), 0.0);
    assert_eq!(
        value("edgecache_backend_fetches_total", Some(("backend", "default"))),
        1.0
    );
    assert_eq!(
        value("edgecache_backend_failures_total", Some(("backend", "default"))),
        0.0
    );
    assert_eq!(
        value("edgecache_backend_in_flight", Some(("backend", "default"))),
        0.0
    );
    assert_eq!(value("edgecache_cache_objects", None), 1.0);
    assert!(value("edgecache_cache_bytes", None) > 0.0);
    assert_eq!(value("edgecache_cache_evictions_total", None), 0.0);
    assert_eq!(value("edgecache_reloads_total", Some(("outcome", "ok"))), 1.0);
    assert_eq!(value("edgecache_reloads_total", Some(("outcome", "failed"))), 1.0);
    assert_eq!(value("edgecache_policy_generation", None), 2.0);
    assert!(scrape
        .samples
        .iter()
        .any(|sample| sample.metric == "edgecache_request_duration_seconds"
            && matches!(sample.value, prometheus_parse::Value::Histogram(_))));

    // OpenMetrics on request.
    let addr = running.admin_addr().unwrap();
    let open = openmetrics(addr).await;
    assert!(open.trim_end().ends_with("# EOF"), "{open}");

    // promtool, where installed, is the reference checker.
    if let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(reply.body.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "promtool: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A line-level check of the text format 0.0.4, stricter than the parser: every sample belongs
/// to a family declared by a `# TYPE` line before it, names and labels are well formed, and the
/// value is a number.
fn check_exposition_lines(text: &str) {
    let mut declared: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            declared.push((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment line {line:?}");
        let (series, value) = line.rsplit_once(' ').expect("series value");
        assert!(
            value == "+Inf" || value == "-Inf" || value == "NaN" || value.parse::<f64>().is_ok(),
            "{line}"
        );
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "{line}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split(',') {
                    let (key, value) = pair.split_once('=').expect("label=value");
                    assert!(
                        key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(value.starts_with('"') && value.ends_with('"'), "{line}");
                }
            }
        }
        let family = declared.iter().rev().find(|(family, kind)| {
            name == family
                || (kind == "histogram"
                    && [
                        format!("{family}_bucket"),
                        format!("{family}_sum"),
                        format!("{family}_count"),
                    ]
                    .contains(&name.to_string()))
        });
        assert!(family.is_some(), "sample {name} before its # TYPE line");
    }
}

async fn openmetrics(addr: SocketAddr) -> String {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = http::Request::get("/metrics")
        .header("host", addr.to_string())
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

/// `edgecache admin` against a running server: status, purge, ban, reload, and its exit codes.
#[tokio::test]
async fn the_admin_command_is_a_thin_client() {
    let origin = cacheable_origin().await;
    let (policy, running, addr) =
        start_watching(origin.addr, &marking("A"), |config| config.watch_policy = false).await;
    let admin_addr = running.admin_addr().unwrap().to_string();
    let edgecache = |args: &[&str]| {
        let admin_addr = admin_addr.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                Command::new(env!("CARGO_BIN_EXE_edgecache"))
                    .arg("admin")
                    .args(["-T", &admin_addr])
                    .args(&args)
                    .output()
                    .expect("runs edgecache")
            })
            .await
            .unwrap()
        }
    };
    let status = edgecache(&["status"]).await;
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(json["generation"], 1);

    get(addr, "/cli", &[]).await;
    eventually_stored(&running, 1).await;
    let purge = edgecache(&["purge", &format!("http://{addr}/cli")]).await;
    assert!(
        purge.status.success(),
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    let again = edgecache(&["purge", "/cli", "--host", &addr.to_string()]).await;
    assert_eq!(again.status.code(), Some(1), "404 is an error exit");

    let ban = edgecache(&["ban", "req.url", "~", "\"^/cli\""]).await;
    assert!(ban.status.success(), "{}", String::from_utf8_lossy(&ban.stderr));
    let bad = edgecache(&["ban", "nonsense"]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("400"));

    write_in_place(&policy, &broken("B"));
    let reload = edgecache(&["reload"]).await;
    assert_eq!(reload.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&reload.stderr).contains("expected `;`"));
    write_in_place(&policy, &marking("C"));
    let reload = edgecache(&["reload"]).await;
    assert!(reload.status.success());
    assert_eq!(running.active_version().generation, 2);

    for command in ["stats", "metrics", "backends"] {
        let output = edgecache(&[command]).await;
        assert!(
            output.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `edgecache admin purge /path` with no `--host` purges the path under every host (the admin
/// listener's own address, which the request would otherwise carry, has no cached pages).
#[tokio::test]
async fn purge_of_a_path_without_a_host_purges_it_under_every_host() {
    let origin = cacheable_origin().await;
    let (running, addr) = start_proxy(origin.addr, loopback_admin).await;
    for host in ["a.example", "b.example"] {
        for path in ["/shared", "/other"] {
            get(addr, path, &[("host", host)]).await;
            assert_eq!(
                get(addr, path, &[("host", host)]).await.cache(),
                "HIT",
                "{host}{path}"
            );
        }
    }
    eventually_stored(&running, 4).await;
    let admin_addr = running.admin_addr().unwrap().to_string();
    let purge = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_edgecache"))
            .args(["admin", "-T", &admin_addr, "purge", "/shared"])
            .output()
            .expect("runs edgecache")
    })
    .await
    .unwrap();
    assert!(
        purge.status.success(),
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&purge.stdout).unwrap();
    assert_eq!(answer["purged"], "every host");
    for host in ["a.example", "b.example"] {
        assert_eq!(
            get(addr, "/shared", &[("host", host)]).await.cache(),
            "MISS",
            "{host}"
        );
        assert_eq!(
            get(addr, "/other", &[("host", host)]).await.cache(),
            "HIT",
            "{host}"
        );
    }

    let quoted = admin(&running, "POST", "/purge?url=/a%22b&host=*", "").await;
    assert_eq!(quoted.status, 400, "{}", quoted.body);
    assert!(quoted.body.contains("percent-encode"), "{}", quoted.body);
}
