//! The ban lurker over real sockets: bans on `obj.*` are applied to stored objects in the
//! background and dropped with no request arriving; bans on `req.*` stay and are applied at
//! lookup; `--ban-lurker-rate` paces the work; `GET /bans` and `edgecache admin ban.list` show
//! the list.
//!
//! The waits poll `GET /bans` (every 10 ms, bounded by `EXCHANGE_LIMIT`): the lurker works on
//! its own thread and the list is what it changes, so there is no other signal to wait on.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use edgecache_runtime::{Config, Running};
use reload_support::{admin, admin_json};
use support::{concurrently, eventually_stored, start_proxy, Client, Origin, OriginReply, EXCHANGE_LIMIT};

/// Objects stored for the 10,000 bans. The issue asks for 100,000; the lurker tests each
/// surviving object against every ban newer than it, so that is 10^9 tests, minutes in a
/// debug build. 2,000 objects (each matching one ban, tested against the bans up to it) and
/// 100 survivors (tested against all 10,000) are 3 million tests: a few seconds.
const MATCHED: usize = 2_000;
const SURVIVORS: usize = 100;
const BANS: usize = 10_000;
/// Connections the objects are fetched and the bans sent on.
const LANES: usize = 8;

/// An origin whose `/obj/ID` answers carry `X-Id: ID`, cacheable for 10 minutes.
async fn tagged_origin() -> Origin {
    Origin::start(|request| {
        let id = request.uri().path().trim_start_matches("/obj/").to_string();
        OriginReply::ok(format!("object {id}"))
            .cache_control("max-age=600")
            .header("x-id", id)
    })
    .await
}

/// edgecache with its admin API on, lurking bans at `rate` once they are `age` old.
async fn lurking_after(origin: &Origin, rate: u64, age: Duration) -> (Running, SocketAddr) {
    start_proxy(origin.addr, |config: &mut Config| {
        config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.ban_lurker_age = age;
        config.ban_lurker_rate = rate;
    })
    .await
}

/// [`lurking_after`] with bans lurked at once (`ban_lurker_age` 0).
async fn lurking(origin: &Origin, rate: u64) -> (Running, SocketAddr) {
    lurking_after(origin, rate, Duration::ZERO).await
}

/// Fetches `/obj/ID` for each id (so each is stored), on `LANES` keep-alive connections.
async fn store(addr: SocketAddr, ids: Vec<String>) {
    concurrently(LANES, |lane| {
        let ids = &ids;
        async move {
            let client = Client::new();
            for id in ids.iter().skip(lane).step_by(LANES) {
                let reply = client.get(addr, &format!("/obj/{id}"), &[]).await;
                assert_eq!(reply.status, 200);
            }
        }
    })
    .await;
}

/// Adds each ban through `POST /ban`, on `LANES` keep-alive connections.
async fn ban_all(running: &Running, exprs: Vec<String>) {
    let admin_addr = running.admin_addr().expect("the admin API is on");
    concurrently(LANES, |lane| {
        let exprs = &exprs;
        async move {
            let client = Client::new();
            let json = [("content-type", "application/json")];
            for expr in exprs.iter().skip(lane).step_by(LANES) {
                let body = serde_json::to_string(expr).unwrap();
                let reply = client.send("POST", admin_addr, "/ban", &json, body).await;
                assert_eq!(reply.status, 200, "{expr}: {}", reply.text());
            }
        }
    })
    .await;
}

async fn ban(running: &Running, expr: &str) {
    ban_all(running, vec![expr.to_string()]).await;
}

/// Polls `GET /bans` until `done` holds for it; returns that answer.
async fn bans_until(
    running: &Running,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    loop {
        let list = admin_json(running, "/bans").await;
        if done(&list) {
            return list;
        }
        assert!(tokio::time::Instant::now() < deadline, "never {what}: {list}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn listed(list: &serde_json::Value) -> usize {
    list["bans"].as_array().expect("a list").len()
}

#[tokio::test]
async fn ten_thousand_obj_bans_are_lurked_to_zero_with_no_request_arriving() {
    let origin = tagged_origin().await;
    // Varnish's ban_lurker_age holds the lurker off until the burst is over: the whole list
    // is there at once, and the test moves the clock past that age instead of waiting.
    let age = Duration::from_secs(300);
    let (running, addr) =
        lurking_after(&origin, edgecache_runtime::config::DEFAULT_BAN_LURKER_RATE, age).await;
    let ids = (0..MATCHED).map(|n| n.to_string());
    store(
        addr,
        ids.chain((0..SURVIVORS).map(|n| format!("keep-{n}"))).collect(),
    )
    .await;
    eventually_stored(&running, (MATCHED + SURVIVORS) as u64).await;
    let fetched = origin.requests();

    // Ban N matches the object with X-Id N: the first MATCHED bans remove one object each, the
    // others match nothing.
    ban_all(
        &running,
        (0..BANS).map(|n| format!(r#"obj.http.x-id == "{n}""#)).collect(),
    )
    .await;
    let list = admin_json(&running, "/bans").await;
    assert_eq!(
        (listed(&list), &list["lurked"]),
        (BANS, &serde_json::json!(0)),
        "young bans wait"
    );
    running.clock().advance(age);
    let list = bans_until(&running, "an empty ban list", |list| listed(list) == 0).await;

    assert_eq!(list["lurked"], BANS, "{list}");
    assert_eq!(list["lurker_removed"], MATCHED, "{list}");
    assert_eq!(list["tested"], 0, "no lookup tested a ban: {list}");
    let stats = admin_json(&running, "/stats").await;
    assert_eq!(
        stats["requests"],
        MATCHED + SURVIVORS,
        "no request arrived meanwhile"
    );
    assert_eq!(stats["bans"], 0);
    assert_eq!(stats["bans_lurked"], BANS);
    assert_eq!(
        running.cache_usage().keys,
        SURVIVORS as u64,
        "only the survivors are stored"
    );

    // The survivors are hits; a banned object is fetched again.
    let client = Client::new();
    assert_eq!(client.get(addr, "/obj/keep-7", &[]).await.cache(), "HIT");
    assert_eq!(client.get(addr, "/obj/7", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests(), fetched + 1);

    let metrics = admin(&running, "GET", "/metrics", "").await.body;
    for line in [
        "edgecache_bans 0".to_string(),
        format!("edgecache_bans_lurked_total {BANS}"),
        format!("edgecache_bans_lurker_removed_total {MATCHED}"),
    ] {
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in {metrics}");
    }
}

#[tokio::test]
async fn a_req_ban_stays_in_the_list_and_is_applied_at_lookup() {
    let origin = tagged_origin().await;
    let (running, addr) = lurking(&origin, edgecache_runtime::config::DEFAULT_BAN_LURKER_RATE).await;
    store(addr, ["a", "b", "c"].map(String::from).to_vec()).await;
    let client = Client::new();
    eventually_stored(&running, 3).await;

    ban(&running, r#"req.url == "/obj/a""#).await;
    ban(&running, r#"obj.http.x-id == "b""#).await;
    let list = bans_until(&running, "the obj.* ban lurked", |list| list["lurked"] == 1).await;

    let bans = list["bans"].as_array().unwrap();
    assert_eq!(bans.len(), 1, "the req.* ban stays: {list}");
    assert_eq!(bans[0]["ban"], r#"req.url == "/obj/a""#);
    assert_eq!(bans[0]["applied_by"], "lookup");
    assert_eq!(bans[0]["removed"], 0, "the lurker leaves it alone");
    assert!(bans[0]["age_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(running.cache_usage().keys, 2, "b is gone, a still stored");

    // A lookup applies it, and the list counts what it removed.
    assert_eq!(client.get(addr, "/obj/a", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/obj/c", &[]).await.cache(), "HIT");
    let list = admin_json(&running, "/bans").await;
    assert_eq!(list["bans"][0]["removed"], 1, "{list}");

    // `edgecache admin ban.list` shows the same list as a table.
    let admin_addr = running.admin_addr().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_edgecache"))
            .args(["admin", "-T", &admin_addr, "ban.list"])
            .output()
            .expect("runs edgecache admin")
    })
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = table.lines();
    assert_eq!(
        lines
            .next()
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<_>>),
        Some(vec!["seq", "age", "removed", "applied", "by", "ban"]),
        "{table}"
    );
    let row: Vec<&str> = lines.next().expect("one ban").split_whitespace().collect();
    assert_eq!((row[0], row[2], row[3]), ("1", "1", "lookup"), "{table}");
    assert_eq!(row[4..].join(" "), r#"req.url == "/obj/a""#, "{table}");
    assert_eq!(lines.next(), None, "{table}");
}

/// At 20 objects a second the lurker pauses after each object, so its progress is seen
/// between two polls: some objects removed while the ban is still listed. What is asserted is
/// that progress, not how long it took.
#[tokio::test]
async fn a_low_lurker_rate_makes_the_lurker_progress_in_steps() {
    const OBJECTS: usize = 30;
    let origin = tagged_origin().await;
    let (running, addr) = lurking(&origin, 20).await;
    store(addr, (0..OBJECTS).map(|n| format!("page-{n}")).collect()).await;
    eventually_stored(&running, OBJECTS as u64).await;

    ban(&running, r#"obj.http.x-id ~ "^page-""#).await;
    let midway = bans_until(&running, "a ban half applied", |list| {
        let removed = list["lurker_removed"].as_u64().unwrap();
        listed(list) == 1 && removed > 0 && removed < OBJECTS as u64
    })
    .await;
    assert_eq!(midway["bans"][0]["applied_by"], "lurker");
    assert_eq!(midway["bans"][0]["removed"], midway["lurker_removed"], "{midway}");

    let done = bans_until(&running, "the ban lurked", |list| listed(list) == 0).await;
    assert_eq!(done["lurker_removed"], OBJECTS, "{done}");
    assert_eq!(running.cache_usage().keys, 0);
}

#[tokio::test]
async fn a_zero_lurker_rate_leaves_obj_bans_to_lookups() {
    let origin = tagged_origin().await;
    let (running, addr) = lurking(&origin, 0).await;
    store(addr, ["a", "b"].map(String::from).to_vec()).await;
    let client = Client::new();
    eventually_stored(&running, 2).await;
    ban(&running, r#"obj.http.x-id == "a""#).await;
    // The same request after the ban is the signal: a lurker would have had the whole
    // exchange to act, and with rate 0 there is none.
    assert_eq!(client.get(addr, "/obj/b", &[]).await.cache(), "HIT");
    let list = admin_json(&running, "/bans").await;
    assert_eq!(
        (listed(&list), &list["lurker_removed"]),
        (1, &serde_json::json!(0)),
        "{list}"
    );
    assert_eq!(
        client.get(addr, "/obj/a", &[]).await.cache(),
        "MISS",
        "applied at lookup"
    );
}
