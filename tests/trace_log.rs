//! `edgecache log` over real traffic: varnishlog-style traces of requests, selected by a
//! varnishlog query, naming the file and line of the `return` that decided each sub.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use edgecache_runtime::Running;
use support::{get, Origin, OriginReply, EXCHANGE_LIMIT};

const EDGECACHE: &str = env!("CARGO_BIN_EXE_edgecache");

/// A policy passing `/api/` on a line the test knows.
fn api_pass_policy(origin: &Origin) -> String {
    format!(
        "vcl 4.1;\n\
         backend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n\
         sub vcl_recv {{\n\
         \x20   if (req.url ~ \"^/api/\") {{\n\
         \x20       return (pass);\n\
         \x20   }}\n\
         }}\n",
        origin.addr.port()
    )
}

/// The 1-based line of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| line.contains(needle))
        .expect("in the policy")
        + 1
}

/// edgecache in front of `origin` running `policy`, its admin API on an ephemeral port.
async fn start(origin: &Origin, name: &str, policy: &str) -> (Running, SocketAddr, SocketAddr, String) {
    let path = support::write_policy(name, policy);
    let (running, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path.clone());
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    })
    .await;
    let admin = running.admin_addr().expect("an admin listener");
    (running, addr, admin, path.display().to_string())
}

/// `edgecache log ARGS` against `admin`, once it says it listens (requests from then on are
/// traced).
async fn follow(admin: SocketAddr, args: &[&str]) -> Child {
    let mut child = Command::new(EDGECACHE)
        .args(["log", "-T", &admin.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("edgecache log starts");
    let stderr = child.stderr.take().expect("piped");
    let listening = tokio::task::spawn_blocking(move || {
        let mut said = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("tracing requests") {
                return Ok(());
            }
            said.push_str(&line);
        }
        Err(said)
    });
    match tokio::time::timeout(EXCHANGE_LIMIT, listening).await {
        Ok(Ok(Ok(()))) => child,
        Ok(Ok(Err(said))) => panic!("edgecache log ended before listening: {said}"),
        other => panic!("edgecache log did not listen in time: {other:?}"),
    }
}

/// What `edgecache log` printed once it ended by itself (`--count`).
async fn printed(child: Child) -> String {
    let output = tokio::time::timeout(
        EXCHANGE_LIMIT,
        tokio::task::spawn_blocking(|| child.wait_with_output()),
    )
    .await
    .expect("edgecache log ends after --count requests")
    .expect("joined")
    .expect("waited");
    assert!(output.status.success(), "edgecache log failed: {output:?}");
    String::from_utf8(output.stdout).expect("text")
}

#[tokio::test]
async fn a_passed_request_names_the_return_that_passed_it() {
    let origin = Origin::fixed(OriginReply::ok("origin body").cache_control("max-age=60")).await;
    let policy = api_pass_policy(&origin);
    let (_running, addr, admin, path) = start(&origin, "trace-pass", &policy).await;
    let log = follow(admin, &["-q", r#"ReqURL ~ "^/api""#, "--count", "1"]).await;
    assert_eq!(get(addr, "/static/app.css", &[]).await.status, 200);
    assert_eq!(get(addr, "/api/users", &[]).await.status, 200);
    let trace = printed(log).await;

    let pass_line = line_of(&policy, "return (pass)");
    let expected = [
        "*   << Request  >>",
        "-   ReqMethod      GET",
        "-   ReqURL         /api/users",
        "-   VCL_call       RECV",
        &format!("-   VCL_return     pass ({path}:{pass_line})"),
        "-   VCL_call       PASS",
        "-   Link           bereq",
        "**  << BeReq    >>",
        "--  BereqURL       /api/users",
        &format!("--  BackendOpen    default 127.0.0.1:{}", origin.addr.port()),
        "--  Timestamp      Bereq: ",
        "--  BerespStatus   200",
        "--  Timestamp      Beresp: ",
        "-   RespStatus     200",
        "-   Timestamp      Resp: ",
    ];
    for line in expected {
        assert!(trace.contains(line), "{line:?} missing from:\n{trace}");
    }
    assert!(
        !trace.contains("/static/app.css"),
        "a request the query does not select is shown:\n{trace}"
    );
    assert_eq!(trace.matches("<< Request  >>").count(), 1, "--count 1:\n{trace}");
}

#[tokio::test]
async fn a_hit_shows_the_hit_record_and_the_builtin_that_delivered_it() {
    let origin = Origin::fixed(OriginReply::ok("stored").cache_control("max-age=60")).await;
    let policy = api_pass_policy(&origin);
    let (running, addr, admin, _) = start(&origin, "trace-hit", &policy).await;
    assert_eq!(get(addr, "/page", &[]).await.status, 200);
    support::eventually_stored(&running, 1).await;
    let log = follow(admin, &["-q", "Hit and RespStatus == 200", "--count", "1"]).await;
    assert_eq!(get(addr, "/page", &[]).await.status, 200);
    let trace = printed(log).await;

    for line in [
        "-   ReqURL         /page",
        "-   VCL_call       RECV",
        "-   VCL_call       HASH",
        "-   Hit            fresh age=",
        "-   VCL_call       HIT",
        "-   VCL_call       DELIVER",
    ] {
        assert!(trace.contains(line), "{line:?} missing from:\n{trace}");
    }
    // The user's vcl_recv fell through: builtin.vcl's own `return (hash)` decided.
    assert!(
        trace.contains("-   VCL_return     hash (builtin"),
        "the builtin's decision is not named:\n{trace}"
    );
    assert!(!trace.contains("<< BeReq"), "a hit fetches nothing:\n{trace}");
    assert_eq!(origin.requests(), 1);
}

#[tokio::test]
async fn a_query_that_does_not_parse_is_refused_with_its_column() {
    let origin = Origin::fixed(OriginReply::ok("x")).await;
    let policy = api_pass_policy(&origin);
    let (_running, _addr, admin, _) = start(&origin, "trace-bad-query", &policy).await;
    let mut log = Command::new(EDGECACHE);
    log.args(["log", "-T", &admin.to_string(), "-q", "RespStatus >= high"]);
    // Off the test's thread, which serves the admin API.
    let output = tokio::time::timeout(EXCHANGE_LIMIT, tokio::task::spawn_blocking(move || log.output()))
        .await
        .expect("edgecache log ends")
        .expect("joined")
        .expect("edgecache log runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GET /log answered 400: cannot parse the query at column 15: `>=` compares numbers"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_admin_endpoint_refuses_an_unknown_tag_naming_it() {
    let origin = Origin::fixed(OriginReply::ok("x")).await;
    let policy = api_pass_policy(&origin);
    let (_running, _addr, admin, _) = start(&origin, "trace-unknown-tag", &policy).await;
    let reply = edgecache_runtime::admin::client::call(admin, None, "GET", "/log?q=ReqURI%20~%20x", "")
        .await
        .expect("the admin API answers");
    assert_eq!(reply.status, 400);
    assert!(
        reply
            .body
            .starts_with("cannot parse the query at column 1: `ReqURI` is not a tag edgecache records"),
        "{}",
        reply.body
    );
}
