//! Several policies loaded at once, as Varnish's `vcl.load` / `vcl.use` / `vcl.label` /
//! `vcl.list` / `vcl.discard`: the label router (`return (vcl(LABEL))` by `Host`), each
//! labelled policy hot-reloaded from its own files, `vcl.use` back to an older policy under
//! load without a failed request, and a discarded policy dropped when its last request ends.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use edgecache_runtime::Running;
use reload_support::*;
use support::{Client, Origin, OriginReply, EXCHANGE_LIMIT};

/// A policy passing everything to `origin` and marking responses `X-Policy: marker`.
fn site(origin: SocketAddr, marker: &str) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\n\
         sub vcl_recv {{ return (pass); }}\n\
         sub vcl_deliver {{ set resp.http.X-Policy = \"{marker}\"; }}\n",
        origin.ip(),
        origin.port()
    )
}

/// The multi-site label router: `a.example` to label `site_a`, `b.example` to `site_b`.
fn router(origin: SocketAddr) -> String {
    format!(
        "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\n\
         sub vcl_recv {{\n\
         \x20   if (req.http.host == \"a.example\") {{ return (vcl(site_a)); }}\n\
         \x20   if (req.http.host == \"b.example\") {{ return (vcl(site_b)); }}\n\
         \x20   return (synth(404));\n\
         }}\n",
        origin.ip(),
        origin.port()
    )
}

async fn vcl(running: &Running, target: &str) {
    let reply = admin(running, "POST", target, "").await;
    assert_eq!(reply.status, 200, "POST {target}: {}", reply.body);
}

fn load_target(name: &str, path: &Path) -> String {
    format!("/vcl/load?name={name}&path={}", path.display())
}

/// `vcl.list` as JSON rows, by name.
async fn listed(running: &Running, name: &str) -> Option<serde_json::Value> {
    let list = admin_json(running, "/vcl").await;
    list["vcl"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|row| row["name"] == name)
        .cloned()
}

async fn marker_for(client: &Client, addr: SocketAddr, host: &str) -> String {
    let reply = client.get(addr, "/", &[("host", host)]).await;
    assert_eq!(reply.status, 200, "{host}: {}", reply.text());
    marker(&reply)
}

/// Polls until `host` is served with `wanted` (the watcher's reload; see reload_support).
async fn until_marker(client: &Client, addr: SocketAddr, host: &str, wanted: &str) {
    let deadline = tokio::time::Instant::now() + RELOAD_LIMIT;
    while marker_for(client, addr, host).await != wanted {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{host} never served {wanted}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_router_sends_each_host_to_its_policy_and_each_reloads_alone() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let dir = temp_dir();
    let (boot, a, b) = (
        path_in(&dir, "router.vcl"),
        path_in(&dir, "a.vcl"),
        path_in(&dir, "b.vcl"),
    );
    write_in_place(&boot, &router(origin.addr));
    write_in_place(&a, &site(origin.addr, "a1"));
    write_in_place(&b, &site(origin.addr, "b1"));
    let (running, addr) = start_with_policy(origin.addr, &boot, |_| {}).await;
    let client = Client::new();

    // Before the labels exist the router's switch has nowhere to go.
    let reply = client.get(addr, "/", &[("host", "a.example")]).await;
    assert_eq!(reply.status, 503, "{}", reply.text());

    vcl(&running, &load_target("a", &a)).await;
    vcl(&running, &load_target("b", &b)).await;
    vcl(&running, "/vcl/label?label=site_a&name=a").await;
    vcl(&running, "/vcl/label?label=site_b&name=b").await;
    assert_eq!(marker_for(&client, addr, "a.example").await, "a1");
    assert_eq!(marker_for(&client, addr, "b.example").await, "b1");
    assert_eq!(client.get(addr, "/", &[("host", "c.example")]).await.status, 404);

    // An edit of a.vcl reloads policy `a` only.
    rename_over(&a, &site(origin.addr, "a2"));
    until_marker(&client, addr, "a.example", "a2").await;
    assert_eq!(marker_for(&client, addr, "b.example").await, "b1");
    assert_eq!(listed(&running, "a").await.unwrap()["generation"], 2);
    assert_eq!(listed(&running, "b").await.unwrap()["generation"], 1);
    // And one of b.vcl, policy `b` only.
    rename_over(&b, &site(origin.addr, "b2"));
    until_marker(&client, addr, "b.example", "b2").await;
    assert_eq!(marker_for(&client, addr, "a.example").await, "a2");
    assert_eq!(
        running.active_version().generation,
        1,
        "the router itself was not reloaded"
    );

    // As Varnish: the active policy, a labelled one, and a label in use are not discarded.
    let boot_row = listed(&running, "boot").await.unwrap();
    assert_eq!(
        (boot_row["status"].as_str(), boot_row["temperature"].as_str()),
        (Some("active"), Some("warm"))
    );
    assert_eq!(listed(&running, "site_a").await.unwrap()["label_of"], "a");
    for name in ["boot", "a", "site_a"] {
        let refused = admin(&running, "POST", &format!("/vcl/discard?name={name}"), "").await;
        assert_eq!(refused.status, 422, "{name}: {}", refused.body);
    }
    // Labels do not nest: not to the router, which switches itself, nor to another label.
    for (target, why) in [
        ("/vcl/label?label=l1&name=boot", "labels do not nest"),
        ("/vcl/label?label=l2&name=site_a", "is a label"),
        ("/vcl/load?name=a&path=/nowhere.vcl", "already loaded"),
    ] {
        let refused = admin(&running, "POST", target, "").await;
        assert_eq!(refused.status, 422, "{target}: {}", refused.body);
        assert!(refused.body.contains(why), "{target}: {}", refused.body);
    }
    // A policy that does not compile is not loaded; the diagnostics say why.
    let broken_file = path_in(&dir, "broken.vcl");
    write_in_place(&broken_file, &broken("x"));
    let refused = admin(&running, "POST", &load_target("c", &broken_file), "").await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("broken.vcl:4"), "{}", refused.body);
    assert!(listed(&running, "c").await.is_none());
    let text = admin(&running, "GET", "/vcl?format=text", "").await.body;
    assert!(text.contains("site_a -> a"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.starts_with("active") && line.ends_with("boot")),
        "{text}"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcl_use_of_an_older_policy_under_load_fails_no_request() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let dir = temp_dir();
    let (v1, v2) = (path_in(&dir, "v1.vcl"), path_in(&dir, "v2.vcl"));
    write_in_place(&v1, &site(origin.addr, "v1"));
    write_in_place(&v2, &site(origin.addr, "v2"));
    let (running, addr) = start_with_policy(origin.addr, &v1, |_| {}).await;
    vcl(&running, &load_target("v2", &v2)).await;
    vcl(&running, "/vcl/use?name=v2").await;
    assert_eq!(marker_for(&Client::new(), addr, "x.example").await, "v2");

    // 4 clients x 125 requests; the rollback comes after the first 100.
    let done = Arc::new(AtomicUsize::new(0));
    let load = support::concurrently(4, |_| {
        let done = done.clone();
        async move {
            let client = Client::new();
            let mut seen = Vec::new();
            for _ in 0..125 {
                let reply = client
                    .try_send("GET", addr, "/", &[("host", "x.example")], "")
                    .await;
                seen.push(reply.map(|reply| (reply.status.as_u16(), marker(&reply))));
                done.fetch_add(1, Ordering::Relaxed);
            }
            seen
        }
    });
    let rollback = async {
        let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
        while done.load(Ordering::Relaxed) < 100 {
            assert!(tokio::time::Instant::now() < deadline, "the load never got going");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        vcl(&running, "/vcl/use?name=boot").await;
    };
    let (replies, ()) = tokio::join!(load, rollback);
    let replies: Vec<_> = replies.into_iter().flatten().collect();
    assert_eq!(replies.len(), 500);
    let failed: Vec<_> = replies.iter().filter(|r| !matches!(r, Ok((200, _)))).collect();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(replies.iter().any(|r| matches!(r, Ok((_, m)) if m == "v2")));
    assert!(replies.iter().any(|r| matches!(r, Ok((_, m)) if m == "v1")));
    assert_eq!(
        marker_for(&Client::new(), addr, "x.example").await,
        "v1",
        "rolled back"
    );
    assert_eq!(listed(&running, "boot").await.unwrap()["status"], "active");
    assert_eq!(listed(&running, "v2").await.unwrap()["temperature"], "cold");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discarded_policy_is_dropped_when_its_last_request_ends() {
    let origin = Origin::start(|request| match request.uri().path() {
        "/slow" => OriginReply::ok("slow").delay(Duration::from_millis(600)),
        _ => OriginReply::ok("page"),
    })
    .await;
    let dir = temp_dir();
    let (v1, old) = (path_in(&dir, "v1.vcl"), path_in(&dir, "old.vcl"));
    write_in_place(&v1, &site(origin.addr, "v1"));
    write_in_place(&old, &site(origin.addr, "old"));
    let (running, addr) = start_with_policy(origin.addr, &v1, |_| {}).await;
    vcl(&running, &load_target("old", &old)).await;
    vcl(&running, "/vcl/use?name=old").await;

    let slow = tokio::spawn(async move { Client::new().get(addr, "/slow", &[("host", "x.example")]).await });
    let deadline = tokio::time::Instant::now() + EXCHANGE_LIMIT;
    while origin.requests_for("/slow") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slow request never reached the origin"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    vcl(&running, "/vcl/use?name=boot").await;
    vcl(&running, "/vcl/discard?name=old").await;
    // Busy counts references, as Varnish's: the client request and its backend fetch.
    let row = listed(&running, "old").await.expect("still listed while busy");
    assert_eq!(row["status"], "discarded");
    assert!(row["busy"].as_u64() >= Some(1), "{row}");

    let reply = slow.await.unwrap();
    assert_eq!(
        (reply.status.as_u16(), marker(&reply)),
        (200, "old".to_string()),
        "finished on its policy"
    );
    assert!(
        listed(&running, "old").await.is_none(),
        "dropped with its last request"
    );
    assert_eq!(marker_for(&Client::new(), addr, "x.example").await, "v1");
    running.shutdown().await;
}

/// `edgecache admin vcl ...` drives the same commands; a relative FILE is the caller's.
#[tokio::test]
async fn the_admin_vcl_commands_load_use_list_and_discard() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let dir = temp_dir();
    let (v1, v2) = (path_in(&dir, "v1.vcl"), path_in(&dir, "v2.vcl"));
    write_in_place(&v1, &site(origin.addr, "v1"));
    write_in_place(&v2, &site(origin.addr, "v2"));
    let (running, addr) = start_with_policy(origin.addr, &v1, |config| config.watch_policy = false).await;
    let admin_addr = running.admin_addr().unwrap().to_string();
    let cwd = dir.path().to_path_buf();
    let edgecache = |args: &[&str]| {
        let (admin_addr, cwd) = (admin_addr.clone(), cwd.clone());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_edgecache"))
                    .current_dir(cwd)
                    .args(["admin", "-T", &admin_addr, "vcl"])
                    .args(&args)
                    .output()
                    .expect("runs edgecache")
            })
            .await
            .unwrap()
        }
    };
    for args in [&["load", "v2", "v2.vcl"][..], &["use", "v2"]] {
        let out = edgecache(args).await;
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(marker_for(&Client::new(), addr, "x.example").await, "v2");
    let list = edgecache(&["list"]).await;
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(
        list.lines()
            .any(|l| l.starts_with("active") && l.ends_with(" v2")),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("available") && l.ends_with(" boot")),
        "{list}"
    );

    let refused = edgecache(&["discard", "v2"]).await;
    assert_eq!(refused.status.code(), Some(1), "the active policy stays");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("`v2` is the active policy"));
    assert!(edgecache(&["use", "boot"]).await.status.success());
    assert!(edgecache(&["discard", "v2"]).await.status.success());
    assert_eq!(marker_for(&Client::new(), addr, "x.example").await, "v1");
    running.shutdown().await;
}
