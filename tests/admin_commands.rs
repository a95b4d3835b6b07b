//! varnishadm's `backend.set_health` through the admin API and `edgecache admin`, over real
//! sockets: `sick` takes a backend out whatever its probe says, `healthy` puts a probed-sick one
//! back, `auto` returns it to its probe; and the exact messages of the admin client's refusals.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::process::Output;

use http::StatusCode;
use reload_support::{admin, admin_json};
use support::{get, start_proxy, until, write_policy, Origin, OriginReply};

/// `edgecache admin ARGS`, run off the async runtime.
async fn edgecache_admin_with(args: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_edgecache"));
    command.arg("admin").args(args);
    tokio::task::spawn_blocking(move || command.output().expect("runs edgecache admin"))
        .await
        .unwrap()
}

/// `edgecache admin -T ADMIN ARGS`.
async fn edgecache_admin(admin: SocketAddr, args: &[&str]) -> Output {
    let admin = admin.to_string();
    edgecache_admin_with(&[&["-T", admin.as_str()][..], args].concat()).await
}

fn with_admin(config: &mut edgecache_runtime::Config) {
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
}

#[tokio::test]
async fn set_health_sick_takes_an_unprobed_backend_out_and_auto_brings_it_back() {
    let origin = Origin::fixed(OriginReply::ok("up")).await;
    let (running, addr) = start_proxy(origin.addr, with_admin).await;
    let admin_addr = running.admin_addr().unwrap();
    assert_eq!(get(addr, "/", &[]).await.status, StatusCode::OK);

    let sick = edgecache_admin(admin_addr, &["backend.set_health", "default", "sick"]).await;
    assert!(sick.status.success(), "{}", String::from_utf8_lossy(&sick.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&sick.stdout).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({ "backends": ["default"], "health": "sick" })
    );
    let backends = admin_json(&running, "/backends").await;
    assert_eq!(
        (&backends[0]["admin_health"], &backends[0]["healthy"]),
        (&"sick".into(), &false.into())
    );
    let requests = origin.requests();
    assert_eq!(get(addr, "/", &[]).await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(origin.requests(), requests, "a sick backend is not contacted");

    let auto = admin(&running, "POST", "/backend/set_health?name=*&health=auto", "").await;
    assert_eq!(auto.status, 200, "{}", auto.body);
    assert_eq!(
        get(addr, "/", &[]).await.status,
        StatusCode::OK,
        "no probe: healthy again"
    );
    assert_eq!(admin_json(&running, "/backends").await[0]["admin_health"], "auto");
}

#[tokio::test]
async fn set_health_healthy_overrides_a_failing_probe_until_auto() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/health" => OriginReply::with_status(500, "down"),
        _ => OriginReply::ok("up"),
    })
    .await;
    let policy = write_policy(
        "set_health",
        &format!(
            "vcl 4.1;\n\
             probe health {{ .url = \"/health\"; .interval = 50ms; .timeout = 500ms; .window = 2; .threshold = 1; .initial = 1; }}\n\
             backend origin {{ .host = \"{}\"; .port = \"{}\"; .probe = health; }}\n\
             sub vcl_recv {{ return (pass); }}\n",
            origin.addr.ip(),
            origin.addr.port()
        ),
    );
    let (running, addr) = start_proxy(origin.addr, |config| {
        with_admin(config);
        config.policy = Some(policy);
    })
    .await;
    until("the probe marks the origin sick", async || {
        get(addr, "/", &[]).await.status == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;

    let healthy = admin(
        &running,
        "POST",
        "/backend/set_health?name=origin&health=healthy",
        "",
    )
    .await;
    assert_eq!(healthy.status, 200, "{}", healthy.body);
    assert_eq!(
        get(addr, "/", &[]).await.text(),
        "up",
        "healthy wins over the probe"
    );
    let backends = admin_json(&running, "/backends").await;
    assert_eq!(
        backends[0]["probe"]["good"], 0,
        "the probe still fails meanwhile: {backends}"
    );

    let auto = admin(
        &running,
        "POST",
        "/backend/set_health?name=origin&health=auto",
        "",
    )
    .await;
    assert_eq!(auto.status, 200, "{}", auto.body);
    assert_eq!(
        get(addr, "/", &[]).await.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "the probe again"
    );
}

/// Each refusal: exit code and the exact message on stderr.
#[tokio::test]
async fn the_admin_client_refusals_say_what_is_accepted() {
    let origin = Origin::fixed(OriginReply::ok("up")).await;
    let (running, _addr) = start_proxy(origin.addr, with_admin).await;
    let admin_addr = running.admin_addr().unwrap();
    let (full, port) = (admin_addr.to_string(), format!(":{}", admin_addr.port()));
    for (args, code, message) in [
        (
            &["-T", &full, "backend.set_health", "nope", "sick"][..],
            1,
            "edgecache admin: POST /backend/set_health?name=nope&health=sick: 404\n\
             no backend named `nope`; backends: default (or * for all)\n",
        ),
        (
            &["-T", &full, "backend.set_health", "default", "maybe"][..],
            2,
            "invalid value 'maybe' for '<HEALTH>'\n  [possible values: healthy, sick, auto]",
        ),
        (
            &["-T", "nonsense", "ban.list"][..],
            2,
            "`nonsense` is not IP:PORT or :PORT (this machine)",
        ),
        // `:PORT` is this machine's loopback, where `-T :PORT` listens too.
        (&["-T", &port, "ban.list"][..], 0, ""),
    ] {
        let out = edgecache_admin_with(args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            stderr.contains(message),
            "{args:?}: wanted {message:?} in {stderr}"
        );
    }
}
