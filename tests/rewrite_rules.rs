//! LiteSpeed / Apache `.htaccess` rewrite rules as the policy, end to end: a per-URL TTL aged
//! on the test clock, cookie variants, passes, redirects, internal rewrites, hot reload of an
//! edited rules file, and the same answers from the rules and from their `--explain` VCL.

mod reload_support;
mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use edgecache_runtime::Running;
use http::Request;
use reload_support::{path_in, start_with_policy, temp_dir, wait_for_generation, write_in_place};
use support::{eventually_stored, get, send, shared_clock, start_proxy, Headers, Origin, OriginReply};

/// An origin whose body names the target and the cookies it was asked with, fresh for 300 s
/// (longer than any rule below gives).
async fn echoing_origin() -> Origin {
    Origin::start(|request: &Request<_>| {
        let cookies = request
            .headers()
            .get("cookie")
            .map_or("", |value| value.to_str().unwrap_or(""));
        let target = request
            .uri()
            .path_and_query()
            .map_or("", |target| target.as_str());
        OriginReply::ok(format!("{target} [{cookies}]")).cache_control("max-age=300")
    })
    .await
}

/// `rules` written to `site.htaccess` in a temp dir that lives with the returned guard.
fn rules_file(rules: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let path = path_in(&dir, "site.htaccess");
    write_in_place(&path, rules);
    (dir, path)
}

async fn start_with_rules(origin: &Origin, rules: &str) -> (tempfile::TempDir, Running, SocketAddr) {
    let (dir, path) = rules_file(rules);
    let (running, addr) = start_proxy(origin.addr, |config| config.policy = Some(path)).await;
    (dir, running, addr)
}

#[tokio::test]
async fn the_two_line_rule_gives_test_php_a_45_second_ttl() {
    let origin = echoing_origin().await;
    let (_dir, running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\nRewriteRule test.php - [E=Cache-Control:max-age=45]\n",
    )
    .await;
    let clock = shared_clock(&running, &origin);

    assert_eq!(get(addr, "/test.php", &[]).await.cache(), "MISS");
    assert_eq!(get(addr, "/other.php", &[]).await.cache(), "MISS");
    clock.advance(Duration::from_secs(40));
    assert_eq!(
        get(addr, "/test.php", &[]).await.cache(),
        "HIT",
        "within the rule's 45 s"
    );
    clock.advance(Duration::from_secs(6));
    let after = get(addr, "/test.php", &[]).await;
    assert_eq!(after.cache(), "MISS", "46 s after the fetch: past the rule's TTL");
    assert_eq!(origin.requests_for("/test.php"), 2);
    assert_eq!(
        get(addr, "/other.php", &[]).await.cache(),
        "HIT",
        "a URL no rule names keeps the origin's 300 s"
    );
}

#[tokio::test]
async fn cache_vary_on_a_cookie_makes_one_variant_per_value() {
    let origin = echoing_origin().await;
    let (_dir, _running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\nRewriteRule ^shop - [E=Cache-Control:max-age=60,E=Cache-Vary:currency]\n",
    )
    .await;
    let eur: Headers = &[("cookie", "currency=eur; session=1")];
    let eur_other_session: Headers = &[("cookie", "session=2; currency=eur")];
    let usd: Headers = &[("cookie", "currency=usd; session=1")];

    assert_eq!(get(addr, "/shop", eur).await.cache(), "MISS");
    let again = get(addr, "/shop", eur_other_session).await;
    assert_eq!(
        (again.cache(), again.text().as_str()),
        ("HIT", "/shop [currency=eur; session=1]")
    );
    let dollars = get(addr, "/shop", usd).await;
    assert_eq!(
        (dollars.cache(), dollars.text().as_str()),
        ("MISS", "/shop [currency=usd; session=1]")
    );
    assert_eq!(get(addr, "/shop", usd).await.cache(), "HIT");
    assert_eq!(origin.requests_for("/shop"), 2, "one fetch per currency");
}

#[tokio::test]
async fn a_no_cache_rule_passes_to_the_origin() {
    let origin = echoing_origin().await;
    let (_dir, _running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\nRewriteRule ^account - [E=Cache-Control:no-cache]\n",
    )
    .await;

    for _ in 0..2 {
        assert_ne!(get(addr, "/account", &[]).await.cache(), "HIT");
        get(addr, "/home", &[]).await;
    }
    assert_eq!(
        origin.requests_for("/account"),
        2,
        "every request reaches the origin"
    );
    assert_eq!(
        origin.requests_for("/home"),
        1,
        "the origin's max-age=300 still caches the rest"
    );
}

#[tokio::test]
async fn a_redirect_rule_answers_301_without_the_origin() {
    let origin = echoing_origin().await;
    let (_dir, _running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\nRewriteRule ^old/(.*)$ /new/$1 [R=301,L]\n",
    )
    .await;

    let reply = get(addr, "/old/page?x=1", &[]).await;
    assert_eq!(reply.status, 301);
    assert_eq!(reply.header("location"), Some("/new/page?x=1"));
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn an_internal_rewrite_fetches_and_caches_the_new_url() {
    let origin = echoing_origin().await;
    let (_dir, _running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\nRewriteRule ^blog/([0-9]+)$ /index.php?p=$1 [QSA,L]\n",
    )
    .await;

    assert_eq!(
        get(addr, "/blog/7?lang=fr", &[]).await.text(),
        "/index.php?p=7&lang=fr []"
    );
    assert_eq!(get(addr, "/blog/7?lang=fr", &[]).await.cache(), "HIT");
    assert_eq!(origin.requests_for("/index.php?p=7&lang=fr"), 1);
}

#[tokio::test]
async fn a_cache_purge_rule_removes_what_a_cache_tag_rule_tagged() {
    let origin = echoing_origin().await;
    let (_dir, running, addr) = start_with_rules(
        &origin,
        "RewriteEngine on\n\
         RewriteRule ^product/ - [E=Cache-Control:max-age=600,E=cache-tag:products]\n\
         RewriteCond %{REQUEST_METHOD} ^POST$\n\
         RewriteRule ^admin/save$ - [E=Cache-Purge:tag=products]\n",
    )
    .await;
    get(addr, "/product/1", &[]).await;
    get(addr, "/home", &[]).await;
    eventually_stored(&running, 2).await;
    assert_eq!(get(addr, "/product/1", &[]).await.cache(), "HIT");

    let saved = send("POST", addr, "/admin/save", &[], "").await;
    assert_eq!(saved.status, 200);
    assert_eq!(
        get(addr, "/product/1", &[]).await.cache(),
        "MISS",
        "the tagged page was purged"
    );
    assert_eq!(
        get(addr, "/home", &[]).await.cache(),
        "HIT",
        "an untagged page was not"
    );
}

#[tokio::test]
async fn an_edit_of_the_rules_file_hot_reloads() {
    let origin = echoing_origin().await;
    let (_dir, path) = rules_file("RewriteEngine on\nRewriteRule ^go$ /first [R=302,L]\n");
    let (running, addr) = start_with_policy(origin.addr, &path, |_| {}).await;
    assert_eq!(get(addr, "/go", &[]).await.header("location"), Some("/first"));

    write_in_place(&path, "RewriteEngine on\nRewriteRule ^go$ /second [R=301,L]\n");
    wait_for_generation(&running, 2).await;
    let reply = get(addr, "/go", &[]).await;
    assert_eq!(
        (reply.status.as_u16(), reply.header("location")),
        (301, Some("/second"))
    );

    // A broken edit keeps the rules that loaded, as for VCL.
    write_in_place(&path, "RewriteEngine on\nRewriteMap m txt:/etc/map\n");
    reload_support::wait_for_failures(&running, 1).await;
    assert_eq!(get(addr, "/go", &[]).await.header("location"), Some("/second"));
    let status = format!("{:?}", running.reload_status());
    assert!(
        status.contains("site.htaccess:2:1"),
        "the error points into the rules file: {status}"
    );
}

/// `edgecache ARGS`: exit code, stdout, stderr.
fn edgecache(args: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_edgecache"))
        .args(args)
        .output()
        .expect("run edgecache");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8 output");
    (
        output.status.code().unwrap_or(-1),
        text(output.stdout),
        text(output.stderr),
    )
}

#[test]
fn check_reads_rules_by_file_name_and_explain_prints_loadable_vcl() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/site.htaccess");
    let (code, stdout, _) = edgecache(&["check", example]);
    assert_eq!((code, stdout.trim_end()), (0, format!("{example}: ok").as_str()));

    let (code, vcl, stderr) = edgecache(&["check", "--explain", example]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        vcl.contains("vcl 4.1;") && vcl.contains("set beresp.ttl = 45s;"),
        "{vcl}"
    );
    let dir = temp_dir();
    let explained = path_in(&dir, "site.vcl");
    write_in_place(&explained, &vcl);
    let (code, _, stderr) = edgecache(&["check", explained.to_str().unwrap()]);
    assert_eq!(code, 0, "the explained VCL loads: {stderr}");

    // Another name is read as rules with --policy-format rewrite; the diagnostics point into it.
    let rules = path_in(&dir, "rules.txt");
    write_in_place(
        &rules,
        "RewriteEngine on\nRewriteCond %{REQUEST_FILENAME} !-f\nRewriteRule . /index.php [L]\n",
    );
    let (code, _, stderr) = edgecache(&["check", "--policy-format", "rewrite", rules.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("rules.txt:2:33") && stderr.contains("`-f` tests the file system"),
        "{stderr}"
    );
    let (code, _, stderr) = edgecache(&["check", "--explain", explained.to_str().unwrap()]);
    assert_eq!(code, 1, "--explain of VCL is refused: {stderr}");
}

/// Every request of the table through `addr`: status, `X-Cache`, `Location` and body.
async fn answers(addr: SocketAddr) -> Vec<String> {
    let table: &[(&str, Headers)] = &[
        ("/test.php", &[]),
        ("/test.php", &[]),
        ("/product/1", &[("cookie", "currency=eur")]),
        ("/product/1", &[("cookie", "currency=eur; other=1")]),
        ("/product/1", &[("cookie", "currency=usd")]),
        ("/cart", &[]),
        ("/cart", &[]),
        ("/page", &[("cookie", "wordpress_logged_in_x=1")]),
        ("/blog/12", &[]),
        ("/blog/12?c=1", &[]),
        ("/page?utm_source=mail&a=1", &[]),
        ("/page", &[("host", "example.com")]),
        ("/page", &[]),
        ("/page", &[]),
    ];
    let mut answers = Vec::new();
    for (target, headers) in table {
        let reply = get(addr, target, headers).await;
        // A synthetic page names its transaction id, which differs between two proxies.
        let body: Vec<String> = reply
            .text()
            .lines()
            .filter(|line| !line.contains("XID:"))
            .map(str::to_string)
            .collect();
        answers.push(format!(
            "{target} {headers:?} -> {} {} {:?} {}",
            reply.status,
            reply.cache(),
            reply.header("location"),
            body.join("\n")
        ));
    }
    answers
}

#[tokio::test]
async fn the_rules_and_their_explained_vcl_answer_alike() {
    let rules = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/site.htaccess"))
        .expect("examples/site.htaccess");
    let (dir, rules_path) = rules_file(&rules);
    let (_, vcl) = edgecache_runtime::policy::explain_rewrite(&rules_path, &Default::default())
        .unwrap_or_else(|diagnostics| panic!("{}", diagnostics.render()));
    let vcl_path = path_in(&dir, "site.vcl");
    write_in_place(&vcl_path, &vcl);

    let mut results = Vec::new();
    for path in [rules_path, vcl_path] {
        let origin = echoing_origin().await;
        let (_running, addr) = start_proxy(origin.addr, |config| config.policy = Some(path)).await;
        results.push((answers(addr).await, origin.requests()));
    }
    assert_eq!(results[0], results[1]);
    let (answers, _) = &results[0];
    assert!(answers[1].contains(" HIT "), "{answers:#?}");
    assert!(answers[6].contains(" PASS "), "{answers:#?}");
    assert!(
        answers[11].contains("301") && answers[11].contains("https://www.example.com/page"),
        "{answers:#?}"
    );
}
