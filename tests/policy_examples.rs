//! The example policies in `examples/`, run for real: each test copies the example,
//! points its `backend default` at a test origin, and starts edgecache with it.
//!
//! * `default.vcl` (the builtin behaviour spelled out) against no policy at all, on a matrix of
//!   cacheability cases: same `X-Cache` sequence, same statuses and bodies, same origin counts.
//! * `wordpress.vcl`: logged-in users and wp-admin passed, tracking parameters stripped, static
//!   assets cached without cookies.
//! * `litespeed.vcl`: `test.php` cached 45 s with `Cache-Control: max-age=45`, other URLs 120 s
//!   when the origin says nothing.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use edgecache_runtime::{Clock, Running};
use support::{
    eventually_stored, http_date_from_now, send, shared_clock, start_proxy, Client, Origin, OriginReply,
};

// === helpers ===

/// `examples/<name>`, with `backend default` pointed at `origin`, in a temp file.
fn example_policy(name: &str, origin: SocketAddr) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    let text = std::fs::read_to_string(&path).expect("read the example policy");
    let host = r#".host = "127.0.0.1";"#;
    let port = r#".port = "8080";"#;
    assert_eq!(
        text.matches(host).count(),
        1,
        "{name}: one backend host to replace"
    );
    assert_eq!(
        text.matches(port).count(),
        1,
        "{name}: one backend port to replace"
    );
    let text = text
        .replace(host, &format!(r#".host = "{}";"#, origin.ip()))
        .replace(port, &format!(r#".port = "{}";"#, origin.port()));
    support::write_policy(name, &without_probe(&text))
}

/// The policy without its backend's inline `.probe = { ... }`: these tests are about caching,
/// and a probe would add requests to the origin's counts and start the backend sick until its
/// first probe (Varnish's `.initial`). Probes have their own tests (tests/directors.rs).
fn without_probe(text: &str) -> String {
    let Some(start) = text.find(".probe = {") else {
        return text.to_string();
    };
    let end = start + text[start..].find('}').expect("the probe block closes") + 1;
    format!("{}{}", &text[..start], &text[end..])
}

/// edgecache running `examples/<name>` in front of `origin`.
async fn start_example(name: &str, origin: &Origin) -> (Running, SocketAddr) {
    let policy = example_policy(name, origin.addr);
    // Config.backend is left pointing at a dead port: the policy's own backend must be used.
    let dead = support::unused_port().await;
    start_proxy(dead, |config| config.policy = Some(policy)).await
}

// === default.vcl behaves as no policy ===

/// One step of a scenario.
#[derive(Clone, Copy)]
enum Step {
    Send {
        method: &'static str,
        headers: &'static [(&'static str, &'static str)],
    },
    /// Let a short freshness lifetime run out: the cache's clock moves forward.
    Advance(Duration),
}

const GET: Step = Step::Send {
    method: "GET",
    headers: &[],
};

const UNKNOWN_METHOD: Step = Step::Send {
    method: "M-SEARCH",
    headers: &[],
};

struct Case {
    path: &'static str,
    steps: Vec<Step>,
    /// The X-Cache values the no-policy proxy is expected to give, as a sanity check that the
    /// matrix tests something; the real assertion is that both proxies agree.
    expect: &'static [&'static str],
}

/// What the matrix origin answers, by path.
fn matrix_reply(request: &http::Request<Bytes>) -> OriginReply {
    let path = request.uri().path();
    let body = format!("{} {}", request.method(), path);
    match path {
        "/cacheable" | "/cookie-request" | "/authorization-request" | "/post" | "/head" => {
            OriginReply::ok(body).cache_control("max-age=600")
        }
        "/no-store" => OriginReply::ok(body).cache_control("no-store"),
        "/no-cache" => OriginReply::ok(body).cache_control("no-cache, max-age=600"),
        "/private" => OriginReply::ok(body).cache_control("private, max-age=600"),
        "/set-cookie" => OriginReply::ok(body)
            .cache_control("max-age=600")
            .header("set-cookie", "session=abc; Path=/"),
        "/no-freshness" => OriginReply::ok(body),
        "/max-age-1" => OriginReply::ok(body).cache_control("max-age=1"),
        "/s-maxage" => OriginReply::ok(body).cache_control("s-maxage=600"),
        "/expires" => OriginReply::ok(body).header("expires", http_date_from_now(600)),
        "/last-modified" => OriginReply::ok(body).header("last-modified", http_date_from_now(-86_400)),
        "/not-found" => OriginReply::with_status(404, body).cache_control("max-age=600"),
        "/server-error" => OriginReply::with_status(500, body),
        "/vary" => {
            let language = request
                .headers()
                .get("accept-language")
                .map_or("none", |v| v.to_str().unwrap());
            OriginReply::ok(format!("{body} {language}"))
                .cache_control("max-age=600")
                .header("vary", "Accept-Language")
        }
        "/vary-star" => OriginReply::ok(body)
            .cache_control("max-age=600")
            .header("vary", "*"),
        other => panic!("unexpected path {other}"),
    }
}

fn matrix() -> Vec<Case> {
    let get3 = vec![GET, GET, GET];
    vec![
        Case {
            path: "/cacheable",
            steps: get3.clone(),
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            path: "/no-store",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        Case {
            path: "/private",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        Case {
            path: "/set-cookie",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        Case {
            // Neither Cache-Control, Expires nor Last-Modified: no freshness, not stored
            // (RFC mode: default TTL 0; VCL: beresp.ttl 0s → hit-for-miss).
            path: "/no-freshness",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        Case {
            path: "/cookie-request",
            steps: vec![
                Step::Send {
                    method: "GET",
                    headers: &[("cookie", "a=1")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("cookie", "a=1")],
                },
                // Without the cookie the URL is cacheable; the passes stored nothing.
                GET,
                GET,
            ],
            expect: &["PASS", "PASS", "MISS", "HIT"],
        },
        Case {
            path: "/authorization-request",
            steps: vec![
                Step::Send {
                    method: "GET",
                    headers: &[("authorization", "Basic YTpi")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("authorization", "Basic YTpi")],
                },
                GET,
                GET,
            ],
            expect: &["PASS", "PASS", "MISS", "HIT"],
        },
        Case {
            path: "/post",
            steps: vec![
                Step::Send {
                    method: "POST",
                    headers: &[],
                },
                Step::Send {
                    method: "POST",
                    headers: &[],
                },
                GET,
                GET,
            ],
            expect: &["PASS", "PASS", "MISS", "HIT"],
        },
        Case {
            path: "/head",
            steps: vec![
                Step::Send {
                    method: "HEAD",
                    headers: &[],
                },
                GET,
                Step::Send {
                    method: "HEAD",
                    headers: &[],
                },
            ],
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            path: "/max-age-1",
            steps: vec![GET, GET, Step::Advance(Duration::from_millis(2100)), GET, GET],
            expect: &["MISS", "HIT", "MISS", "HIT"],
        },
        Case {
            path: "/s-maxage",
            steps: get3.clone(),
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            path: "/expires",
            steps: get3.clone(),
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            // Heuristic freshness (RFC 9111 §4.2.2) from Last-Modified, in both modes.
            path: "/last-modified",
            steps: get3.clone(),
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            path: "/not-found",
            steps: get3.clone(),
            expect: &["MISS", "HIT", "HIT"],
        },
        Case {
            path: "/server-error",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        Case {
            path: "/vary",
            steps: vec![
                Step::Send {
                    method: "GET",
                    headers: &[("accept-language", "en")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("accept-language", "en")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("accept-language", "fr")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("accept-language", "fr")],
                },
                Step::Send {
                    method: "GET",
                    headers: &[("accept-language", "en")],
                },
            ],
            expect: &["MISS", "HIT", "MISS", "HIT", "HIT"],
        },
        Case {
            path: "/vary-star",
            steps: get3.clone(),
            expect: &["PASS", "PASS", "PASS"],
        },
        // Never reused without the origin (RFC 9111 §5.2.2.4; no validators to revalidate
        // with), with or without a policy.
        Case {
            path: "/no-cache",
            steps: get3,
            expect: &["PASS", "PASS", "PASS"],
        },
        // A method outside Varnish's list reaches the origin either way (the builtin's
        // `vcl_req_method` passes it here rather than piping it).
        Case {
            path: "/cacheable",
            steps: vec![UNKNOWN_METHOD, GET, UNKNOWN_METHOD],
            expect: &["PASS", "MISS", "PASS"],
        },
        // Excluded: `PURGE`. Without a policy edgecache purges natively (from the networks
        // --purge-allow names); the builtin VCL knows no PURGE method. Purging with a policy is
        // the policy's job (see policy_phases.rs).
    ]
}

/// What a client saw for each step: status, X-Cache, body.
type Seen = Vec<(u16, String, String)>;

async fn run_case(addr: SocketAddr, clock: &Clock, case: &Case) -> Seen {
    let client = Client::new();
    let mut seen = Vec::new();
    for step in &case.steps {
        match *step {
            Step::Advance(duration) => clock.advance(duration),
            Step::Send { method, headers } => {
                let reply = client.send(method, addr, case.path, headers, Bytes::new()).await;
                seen.push((reply.status.as_u16(), reply.cache().to_string(), reply.text()));
            }
        }
    }
    seen
}

#[tokio::test]
async fn default_vcl_behaves_as_no_policy() {
    let vcl_origin = Origin::start(matrix_reply).await;
    let started = start_example("default.vcl", &vcl_origin).await;
    behaves_as_no_policy("default.vcl", vcl_origin, started).await;
}

#[tokio::test]
async fn varnish_builtin_vcl_included_verbatim_behaves_as_no_policy() {
    // The "verbose builtin" pattern: Varnish 7.7's own builtin.vcl, unchanged, included by a
    // file that only declares the backend.
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/policies/real-world/includes/varnish-7.7-builtin.vcl");
    let vcl_origin = Origin::start(matrix_reply).await;
    let policy = support::write_policy(
        "varnish_builtin",
        &format!(
            "vcl 4.1;\nbackend default {{ .host = \"{}\"; .port = \"{}\"; }}\ninclude \"{}\";\n",
            vcl_origin.addr.ip(),
            vcl_origin.addr.port(),
            builtin.display()
        ),
    );
    let dead = support::unused_port().await;
    let started = start_proxy(dead, |config| config.policy = Some(policy)).await;
    behaves_as_no_policy("the included builtin.vcl", vcl_origin, started).await;
}

/// Runs the matrix through a proxy without a policy and through `vcl` (named `what`, in front
/// of `vcl_origin`), both at once, and asserts they agree case by case.
async fn behaves_as_no_policy(what: &str, vcl_origin: Origin, (vcl, vcl_addr): (Running, SocketAddr)) {
    let plain_origin = Origin::start(matrix_reply).await;
    let (plain, plain_addr) = start_proxy(plain_origin.addr, |_| {}).await;
    let (plain_clock, vcl_clock) = (
        shared_clock(&plain, &plain_origin),
        shared_clock(&vcl, &vcl_origin),
    );

    let cases = matrix();
    // Both proxies run each case at the same time, cases one after another.
    let mut failures = Vec::new();
    for case in &cases {
        let (plain, vcl) = tokio::join!(
            run_case(plain_addr, &plain_clock, case),
            run_case(vcl_addr, &vcl_clock, case)
        );
        let plain_count = plain_origin.requests_for(case.path);
        let vcl_count = vcl_origin.requests_for(case.path);
        let plain_states: Vec<&str> = plain.iter().map(|(_, cache, _)| cache.as_str()).collect();
        if plain != vcl || plain_count != vcl_count {
            failures.push(format!(
                "{}: no policy {plain:?} with {plain_count} origin requests; {what} {vcl:?} \
                 with {vcl_count} origin requests",
                case.path
            ));
        } else if plain_states != case.expect {
            failures.push(format!(
                "{}: both proxies agree on {plain_states:?}, but the matrix expects {:?}",
                case.path, case.expect
            ));
        }
    }
    assert!(failures.is_empty(), "differences:\n{}", failures.join("\n"));
}

// === wordpress.vcl ===

/// A WordPress-like origin: pages without caching headers, static assets that set a cookie.
fn wordpress_origin(request: &http::Request<Bytes>) -> OriginReply {
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let cookie = request
        .headers()
        .get("cookie")
        .map_or("-", |v| v.to_str().unwrap());
    let body = format!("{target} cookie={cookie}");
    let lower = request.uri().path().to_ascii_lowercase();
    if lower.ends_with(".css") || lower.ends_with(".png") {
        OriginReply::ok(body).header("set-cookie", "tracker=1; Path=/")
    } else if request.uri().path().starts_with("/wp-admin") {
        // Even a response that says it may be cached is not, in the admin area.
        OriginReply::ok(body).cache_control("max-age=600")
    } else {
        OriginReply::ok(body)
    }
}

/// The README's command: wordpress.vcl in front of `edgecache demo`'s origin. Its probe must
/// find the backend healthy there, or every request would be answered 503.
#[tokio::test]
async fn wordpress_example_serves_the_demo_origin() {
    let demo = edgecache_runtime::demo::start_origin(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let policy = example_policy("wordpress.vcl", demo);
    let dead = support::unused_port().await;
    let (_proxy, addr) = start_proxy(dead, |config| config.policy = Some(policy)).await;
    // Sick until the first probe answers (Varnish's `.initial` is `.threshold` - 1).
    support::until("the probe finds the demo origin healthy", async || {
        support::get(addr, "/", &[]).await.status == 200
    })
    .await;
    let first = support::get(addr, "/hello", &[]).await;
    let second = support::get(addr, "/hello", &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(
        second.header("age").map(|age| age.parse::<u64>().is_ok()),
        Some(true)
    );
    assert_eq!(first.text(), second.text(), "the second answer is the cached one");
}

#[tokio::test]
async fn wordpress_anonymous_pages_are_cached() {
    let origin = Origin::start(wordpress_origin).await;
    let (_proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();

    let first = client.get(addr, "/hello-world/", &[]).await;
    assert_eq!(first.cache(), "MISS");
    let second = client.get(addr, "/hello-world/", &[]).await;
    assert_eq!(
        second.cache(),
        "HIT",
        "5 minutes for pages without caching headers"
    );
    assert_eq!(origin.requests_for("/hello-world/"), 1);

    // An analytics cookie is dropped, so the visitor gets the shared page.
    let with_ga = client
        .get(addr, "/hello-world/", &[("cookie", "_ga=GA1.2.3")])
        .await;
    assert_eq!(with_ga.cache(), "HIT");
    assert_eq!(origin.requests_for("/hello-world/"), 1);
    assert_eq!(with_ga.text(), "/hello-world/ cookie=-");
}

#[tokio::test]
async fn wordpress_logged_in_cookie_is_passed() {
    let origin = Origin::start(wordpress_origin).await;
    let (_proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();
    let cookie = [("cookie", "wordpress_logged_in_abc=admin%7C123; _ga=1")];

    for _ in 0..2 {
        let reply = client.get(addr, "/hello-world/", &cookie).await;
        assert_eq!(reply.cache(), "PASS");
        assert_eq!(
            reply.text(),
            "/hello-world/ cookie=wordpress_logged_in_abc=admin%7C123; _ga=1",
            "a pass keeps the cookie"
        );
    }
    assert_eq!(origin.requests_for("/hello-world/"), 2);

    // Commenters too.
    let commenter = client
        .get(addr, "/hello-world/", &[("cookie", "comment_author_x=Jo")])
        .await;
    assert_eq!(commenter.cache(), "PASS");
    assert_eq!(origin.requests_for("/hello-world/"), 3);

    // Nothing was stored for the anonymous visitor by the passes.
    assert_eq!(client.get(addr, "/hello-world/", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests_for("/hello-world/"), 4);
}

#[tokio::test]
async fn wordpress_admin_area_is_passed() {
    let origin = Origin::start(wordpress_origin).await;
    let (_proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();
    for _ in 0..2 {
        let reply = client.get(addr, "/wp-admin/options.php", &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.cache(), "PASS");
    }
    assert_eq!(origin.requests_for("/wp-admin/options.php"), 2);
    for _ in 0..2 {
        assert_eq!(client.get(addr, "/wp-login.php", &[]).await.cache(), "PASS");
    }
    assert_eq!(origin.requests_for("/wp-login.php"), 2);
    // Previews are passed as well.
    for _ in 0..2 {
        assert_eq!(client.get(addr, "/?p=12&preview=true", &[]).await.cache(), "PASS");
    }
}

#[tokio::test]
async fn wordpress_strips_tracking_parameters() {
    let origin = Origin::start(wordpress_origin).await;
    let (_proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();

    let first = client
        .get(addr, "/post/?utm_source=newsletter&id=3&utm_medium=email", &[])
        .await;
    assert_eq!(first.cache(), "MISS");
    assert_eq!(
        origin.last().target,
        "/post/?id=3",
        "the origin sees the stripped URL"
    );
    assert_eq!(first.text(), "/post/?id=3 cookie=-");

    let second = client
        .get(addr, "/post/?id=3&fbclid=XYZ&utm_campaign=spring", &[])
        .await;
    assert_eq!(
        second.cache(),
        "HIT",
        "same object once utm_* and fbclid are gone"
    );
    let third = client.get(addr, "/post/?id=3", &[]).await;
    assert_eq!(third.cache(), "HIT");
    assert_eq!(origin.requests_for("/post/?id=3"), 1, "{:?}", origin.log());

    // Only tracking parameters go: another id is another object.
    let other = client.get(addr, "/post/?id=4&gclid=1", &[]).await;
    assert_eq!(other.cache(), "MISS");
    assert_eq!(origin.last().target, "/post/?id=4");

    // A URL whose only parameters are tracking ones loses its `?`.
    client.get(addr, "/post/?utm_source=x", &[]).await;
    assert_eq!(origin.last().target, "/post/");
    assert_eq!(client.get(addr, "/post/", &[]).await.cache(), "HIT");
}

#[tokio::test]
async fn wordpress_static_assets_are_cached_without_cookies() {
    let origin = Origin::start(wordpress_origin).await;
    let (_proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();
    let cookie = [("cookie", "_ga=GA1.2.3; _gid=GA1.2.4")];

    let first = client
        .get(addr, "/wp-content/themes/a/style.css?ver=6.4", &cookie)
        .await;
    assert_eq!(first.status, 200);
    assert_eq!(first.cache(), "MISS");
    assert_eq!(
        origin.last().header("cookie"),
        None,
        "the request cookie is not forwarded for a static asset"
    );
    assert_eq!(
        first.header("set-cookie"),
        None,
        "nor is the response's Set-Cookie relayed"
    );
    assert_eq!(first.header("cache-control"), Some("public, max-age=604800"));

    let second = client
        .get(addr, "/wp-content/themes/a/style.css?ver=6.4", &cookie)
        .await;
    assert_eq!(second.cache(), "HIT", "cached although the origin set a cookie");
    assert_eq!(second.header("set-cookie"), None);
    assert_eq!(second.header("cache-control"), Some("public, max-age=604800"));
    assert_eq!(origin.requests_for("/wp-content/themes/a/style.css?ver=6.4"), 1);

    // Images too, case-insensitively.
    assert_eq!(client.get(addr, "/logo.PNG", &cookie).await.cache(), "MISS");
    let logo = client.get(addr, "/logo.PNG", &[]).await;
    assert_eq!(logo.cache(), "HIT");
    assert_eq!(logo.header("set-cookie"), None);
}

#[tokio::test]
async fn wordpress_purge_from_localhost() {
    let origin = Origin::start(wordpress_origin).await;
    let (proxy, addr) = start_example("wordpress.vcl", &origin).await;
    let client = Client::new();
    client.get(addr, "/page/", &[]).await;
    assert_eq!(client.get(addr, "/page/", &[]).await.cache(), "HIT");
    eventually_stored(&proxy, 1).await;

    let purged = send("PURGE", addr, "/page/", &[], Bytes::new()).await;
    assert_eq!(
        purged.status,
        200,
        "127.0.0.1 is in the purgers ACL: {}",
        purged.text()
    );
    assert_eq!(client.get(addr, "/page/", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests_for("/page/"), 2);
}

// === litespeed.vcl ===

fn litespeed_origin(request: &http::Request<Bytes>) -> OriginReply {
    let path = request.uri().path();
    let body = format!("{path} #{}", rand_marker());
    match path {
        // What a PHP application typically sends: a session cookie, no caching headers.
        "/test.php" => OriginReply::ok(body).header("set-cookie", "PHPSESSID=1; Path=/"),
        "/short.php" => OriginReply::ok(body).cache_control("max-age=1"),
        "/refuse.php" => OriginReply::ok(body).cache_control("max-age=0"),
        _ => OriginReply::ok(body),
    }
}

/// A number that changes with every origin response, so a cached body is recognisable.
fn rand_marker() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[tokio::test]
async fn litespeed_test_php_is_cached_with_max_age_45() {
    let origin = Origin::start(litespeed_origin).await;
    let (_proxy, addr) = start_example("litespeed.vcl", &origin).await;
    let client = Client::new();

    let first = client.get(addr, "/test.php", &[]).await;
    assert_eq!(first.cache(), "MISS");
    assert_eq!(first.header("cache-control"), Some("max-age=45"));
    assert_eq!(first.header("set-cookie"), None);
    let second = client.get(addr, "/test.php", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.header("cache-control"), Some("max-age=45"));
    assert_eq!(second.header("set-cookie"), None);
    assert!(second.age().is_some_and(|age| age < 45), "{:?}", second.age());
    assert_eq!(second.text(), first.text());
    assert_eq!(origin.requests_for("/test.php"), 1);

    // With a query string, too.
    assert_eq!(client.get(addr, "/test.php?a=1", &[]).await.cache(), "MISS");
    let query = client.get(addr, "/test.php?a=1", &[]).await;
    assert_eq!(query.cache(), "HIT");
    assert_eq!(query.header("cache-control"), Some("max-age=45"));
}

#[tokio::test]
async fn litespeed_other_urls_get_a_default_of_120s_unless_the_origin_says_otherwise() {
    let origin = Origin::start(litespeed_origin).await;
    let (proxy, addr) = start_example("litespeed.vcl", &origin).await;
    let clock = shared_clock(&proxy, &origin);
    let client = Client::new();

    // No freshness information: cached anyway (120 s default), Cache-Control not invented.
    let first = client.get(addr, "/index.php", &[]).await;
    assert_eq!(first.cache(), "MISS");
    let second = client.get(addr, "/index.php", &[]).await;
    assert_eq!(second.cache(), "HIT");
    assert_eq!(second.header("cache-control"), None);
    assert!(second.age().is_some(), "a hit carries Age");
    assert_eq!(origin.requests_for("/index.php"), 1);

    // The origin's own max-age wins over the default: max-age=1 expires after a second.
    assert_eq!(client.get(addr, "/short.php", &[]).await.cache(), "MISS");
    assert_eq!(client.get(addr, "/short.php", &[]).await.cache(), "HIT");
    clock.advance(Duration::from_millis(2100));
    assert_eq!(client.get(addr, "/short.php", &[]).await.cache(), "MISS");
    assert_eq!(origin.requests_for("/short.php"), 2);

    // And max-age=0 is not turned into 120 s (only test.php is forced).
    assert_eq!(client.get(addr, "/refuse.php", &[]).await.cache(), "PASS");
    assert_eq!(client.get(addr, "/refuse.php", &[]).await.cache(), "PASS");
    assert_eq!(origin.requests_for("/refuse.php"), 2);
}

/// The TTLs themselves: 46 s later (on the cache's clock) test.php (45 s) has expired while
/// another URL (120 s) is still fresh.
#[tokio::test]
async fn litespeed_test_php_expires_after_45s_while_others_live_120s() {
    let origin = Origin::start(litespeed_origin).await;
    let (proxy, addr) = start_example("litespeed.vcl", &origin).await;
    let clock = shared_clock(&proxy, &origin);
    let client = Client::new();

    let test_php = client.get(addr, "/test.php", &[]).await;
    let other = client.get(addr, "/other.php", &[]).await;
    assert_eq!(test_php.cache(), "MISS");
    assert_eq!(other.cache(), "MISS");
    assert_eq!(client.get(addr, "/test.php", &[]).await.cache(), "HIT");
    assert_eq!(client.get(addr, "/other.php", &[]).await.cache(), "HIT");

    clock.advance(Duration::from_secs(46));

    let test_php_later = client.get(addr, "/test.php", &[]).await;
    assert_eq!(test_php_later.cache(), "MISS", "45 s are over");
    assert_ne!(test_php_later.text(), test_php.text(), "a fresh copy");
    assert_eq!(origin.requests_for("/test.php"), 2);

    let other_later = client.get(addr, "/other.php", &[]).await;
    assert_eq!(other_later.cache(), "HIT", "120 s are not over");
    assert_eq!(other_later.text(), other.text());
    assert!(
        other_later.age().is_some_and(|age| (46..120).contains(&age)),
        "Age {:?}",
        other_later.age()
    );
    assert_eq!(origin.requests_for("/other.php"), 1);
}
