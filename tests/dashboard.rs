//! The dashboard (`GET /` of the admin API) in a real browser: headless Chromium (Debian's
//! `chromium` package; `.ci/run` installs it) loads the page from a running edgecache while
//! traffic flows, runs its script for five seconds of virtual time, and the test reads back
//! the DOM: the charts drew samples and updated, the backend and missed-URL tables filled. A
//! screenshot is kept as `dashboard.png` in cargo's test scratch directory.

mod support;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use support::{get, start_proxy, Origin, OriginReply};

fn chromium(args: &[&str]) -> Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,1000",
        ])
        .args(["--virtual-time-budget=5000"])
        .args(args)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "this test drives the dashboard in a real browser, and `chromium` could not be \
                 started ({error}); install Debian's chromium package (.ci/run does)"
            )
        })
}

/// `name="value"` of the element whose opening tag contains `marker`.
fn attribute(dom: &str, marker: &str, name: &str) -> f64 {
    let tag_start = dom.find(marker).unwrap_or_else(|| panic!("{marker} in the page"));
    let tag = &dom[dom[..=tag_start].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    let value = tag
        .split(&format!("{name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("{name} on {tag}"));
    value
        .parse()
        .unwrap_or_else(|_| panic!("{name}={value} on {tag}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_draws_live_charts_in_a_browser() {
    let origin = Origin::fixed(OriginReply::ok("page").cache_control("max-age=60")).await;
    let (proxy, addr) = start_proxy(origin.addr, |config| {
        config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let admin = proxy.admin_addr().expect("the admin API listens");
    get(addr, "/missed-once", &[]).await;

    // Traffic while the page runs: hits on one URL, until the browser is done.
    let browsing = Arc::new(AtomicBool::new(true));
    let traffic = tokio::spawn({
        let browsing = browsing.clone();
        async move {
            let mut sent = 0u64;
            while browsing.load(Ordering::Relaxed) && sent < 100_000 {
                get(addr, "/hot", &[]).await;
                sent += 1;
            }
        }
    });
    let page = format!("http://{admin}/");
    let dom = tokio::task::spawn_blocking({
        let page = page.clone();
        move || chromium(&["--dump-dom", &page])
    })
    .await
    .unwrap();
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let screenshot = tokio::task::spawn_blocking({
        let shot = format!("--screenshot={}", shot.display());
        move || chromium(&[&shot, &page])
    })
    .await
    .unwrap();
    browsing.store(false, Ordering::Relaxed);
    traffic.await.unwrap();

    assert!(
        dom.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).unwrap();
    assert!(
        attribute(&dom, "<body", "data-polls") >= 3.0,
        "the page polled /stats repeatedly"
    );
    assert!(
        attribute(&dom, r#"id="rates""#, "data-samples") >= 2.0,
        "the rates chart updated"
    );
    assert!(
        attribute(&dom, r#"id="rates""#, "data-points") >= 2.0,
        "the rates chart drew lines"
    );
    assert!(
        attribute(&dom, r#"id="rates""#, "data-max") > 1.0,
        "it drew the traffic, not zeros"
    );
    assert!(
        attribute(&dom, r#"id="ratio""#, "data-points") >= 1.0,
        "the hit ratio chart drew"
    );
    assert!(
        dom.contains("<td>default</td>") && dom.contains("<td>healthy</td>"),
        "backends table"
    );
    assert!(dom.contains("/missed-once</td>"), "the missed URL is listed");
    assert!(
        dom.contains("<td>boot</td>"),
        "the loaded policy versions are listed"
    );
    assert!(
        dom.contains(r#"id="connection">live<"#),
        "the page says it is connected"
    );

    assert!(
        screenshot.status.success(),
        "{}",
        String::from_utf8_lossy(&screenshot.stderr)
    );
    let size = std::fs::metadata(&shot).expect("the screenshot is written").len();
    assert!(
        size > 10_000,
        "a screenshot of a drawn page, not a blank one: {size} bytes"
    );
    eprintln!("dashboard screenshot: {}", shot.display());
}

/// The page is served with a policy that keeps it to its own listener and out of frames.
#[tokio::test]
async fn dashboard_is_one_page_that_only_talks_to_its_listener() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (proxy, _addr) = start_proxy(origin.addr, |config| {
        config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let admin = proxy.admin_addr().unwrap();
    let page = get(admin, "/", &[]).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    let html = page.text();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external assets"
    );
}
