//! One request's whole plugin lifecycle through the host: `Plugin::stream()` (no guest code),
//! `on_request_headers` (context create + `proxy_on_request_headers`), `on_response_headers`,
//! `finish` (`proxy_on_done`, `proxy_on_log`, `proxy_on_delete`).
//!
//! Plugins:
//! - `read2_set1`: `benches/plugins/read2_set1.wat`, reads two request headers and sets one
//!   (the shape the target is stated for: < 5 µs median, shared instances);
//! - `add_header` (sets one response header: the one-header plugin of `docs/BENCHMARKS.md`'s
//!   hit-path rows) and `bucket` (reads a cookie, sets one request header): the Rust SDK
//!   examples from `examples/plugins/dist/` (built by `examples/plugins/build.sh`, which this
//!   bench runs when they are missing);
//! - `body_rewrite` (`.max_body = 1MB`): the body plugin, over a 12 KB `text/html` body that
//!   arrives in two chunks: `proxy_on_response_body` on the first 8 KB (the plugin pauses for
//!   more), then on the whole body with `end_of_stream` (it replaces `origin` with `edge`
//!   and sets `x-body-rewritten`), as `proxy/plugins.rs` shows a body.
//!
//! Each with `Isolation::Shared` (a long-lived instance, what the proxy uses by default) and
//! `Isolation::PerRequest` (a fresh pooled instance per request) for reference. The views are
//! built outside the timed part (cloned from a template per iteration). Plugin CPU deadline:
//! 2 s instead of the default 5 ms (see `bench`).
//!
//! ```sh
//! CARGO_TARGET_DIR=target-plugin-rel cargo bench --bench plugin
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use edgecache_runtime::plugin::{
    HostSettings, Isolation, Limits, Plugin, PluginHost, PluginSpec, RequestView, ResponseView, Verdict,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `examples/plugins/dist/NAME`, running `build.sh` once if it is missing. None (with a
/// message) when it cannot be built, e.g. without the wasm32-wasip1 target.
fn example(name: &str) -> Option<PathBuf> {
    let path = root().join("examples/plugins/dist").join(name);
    if !path.exists() {
        let out = std::process::Command::new("bash")
            .arg(root().join("examples/plugins/build.sh"))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output();
        if !path.exists() {
            eprintln!("SKIPPED {name}: examples/plugins/build.sh did not build it: {out:?}");
            return None;
        }
    }
    Some(path)
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    map
}

/// A browser-like GET and a cache hit's response headers.
fn views() -> (RequestView, ResponseView) {
    let mut req = RequestView::new(
        Method::GET,
        Uri::from_static("/blog/2026/11/some-post/?utm_source=x"),
        headers(&[
            ("host", "www.example.com"),
            (
                "user-agent",
                "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
            ),
            (
                "accept",
                "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            ),
            ("accept-encoding", "gzip, deflate, br"),
            ("accept-language", "en-US,en;q=0.5"),
            ("cookie", "uid=alice; theme=dark"),
            ("connection", "keep-alive"),
        ]),
    );
    req.client_addr = Some("192.0.2.7:40000".parse().unwrap());
    let resp = ResponseView::new(
        StatusCode::OK,
        headers(&[
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", "18342"),
            ("cache-control", "public, max-age=600"),
            ("date", "Mon, 30 Nov 2026 17:00:00 GMT"),
            ("etag", "\"5f3a-1b2c\""),
            ("age", "12"),
            ("x-cache", "HIT"),
        ]),
    );
    (req, resp)
}

/// The body the body plugin reads: 12 KB of HTML-like text with `origin` in every line.
fn body() -> Vec<u8> {
    let line = "<p>served from the origin, through the cache</p>\n"; // 50 bytes
    line.repeat(12 * 1024 / line.len()).into_bytes()
}

/// Where the first chunk of [`body`] ends (what a read of the origin's body returns first).
const FIRST_CHUNK: usize = 8 * 1024;

/// The lifecycle the proxy runs for one request through one plugin; with a `body`, the
/// response body callbacks too (the body grows to its end, as the proxy buffers it).
fn lifecycle(plugin: &Plugin, req: &mut RequestView, resp: &mut ResponseView, body: Option<&mut Vec<u8>>) {
    let mut stream = plugin.stream();
    let v = stream.on_request_headers(req).expect("request headers");
    debug_assert_eq!(v, Verdict::Continue);
    let v = stream
        .on_response_headers(Some(req), resp)
        .expect("response headers");
    debug_assert_eq!(v, Verdict::Continue);
    if let Some(body) = body {
        let rest = body.split_off(FIRST_CHUNK);
        let v = stream
            .on_response_body(Some(req), resp, body, false)
            .expect("first chunk");
        debug_assert_eq!(v, Verdict::Paused, "it waits for the whole body");
        body.extend_from_slice(&rest);
        let v = stream
            .on_response_body(Some(req), resp, body, true)
            .expect("whole body");
        debug_assert_eq!(v, Verdict::Continue);
    }
    stream.finish(Some(req), Some(resp));
}

/// A plugin measured: where it is, its `.config`, the header it sets (checked once before it is
/// measured) and its `.max_body` (a body plugin also gets [`body`]).
struct Case {
    name: &'static str,
    path: Option<PathBuf>,
    config: &'static str,
    sets: &'static str,
    max_body: Option<usize>,
}

fn bench(c: &mut Criterion) {
    // The CPU deadline is wall-clock (epoch ticks): with the default 5 ms, a callback that is
    // preempted on a busy 2-core host trips it (seen here with PerRequest). The deadline's value
    // does not change what a callback costs, so the bench uses a generous one, as the host's
    // own tests do.
    let host = PluginHost::new(HostSettings {
        limits: Limits {
            deadline: Duration::from_secs(2),
            ..Limits::default()
        },
        ..HostSettings::default()
    });
    let plugins = [
        Case {
            name: "read2_set1",
            path: Some(root().join("benches/plugins/read2_set1.wat")),
            config: "",
            sets: "x-variant",
            max_body: None,
        },
        Case {
            name: "add_header",
            path: example("add_header.wasm"),
            config: "x-served-by: edgecache",
            sets: "x-served-by",
            max_body: None,
        },
        Case {
            name: "bucket",
            path: example("bucket.wasm"),
            config: "",
            sets: "x-bucket",
            max_body: None,
        },
        Case {
            name: "body_rewrite",
            path: example("body_rewrite.wasm"),
            config: "origin=edge",
            sets: "x-body-rewritten",
            max_body: Some(1 << 20),
        },
    ];
    let mut group = c.benchmark_group("plugin_lifecycle");
    group.measurement_time(Duration::from_secs(5));
    for (isolation, label) in [
        (Isolation::Shared, "shared"),
        (Isolation::PerRequest, "per_request"),
    ] {
        for Case {
            name,
            path,
            config,
            sets,
            max_body,
        } in &plugins
        {
            let Some(path) = path else { continue };
            let plugin = host
                .load(
                    &PluginSpec::new(*name, path)
                        .config(config.to_string())
                        .isolation(isolation)
                        .max_body(*max_body),
                )
                .unwrap_or_else(|e| panic!("load {name}: {e}"));
            let with_body = || max_body.map(|_| body());
            // The plugin does what it is measured for.
            let (mut req, mut resp) = views();
            let mut rewritten = with_body();
            lifecycle(&plugin, &mut req, &mut resp, rewritten.as_mut());
            assert!(
                req.headers.contains_key(*sets) || resp.headers.contains_key(*sets),
                "{name} did not set {sets}"
            );
            if let Some(rewritten) = rewritten {
                let text = String::from_utf8(rewritten).expect("text");
                assert!(
                    text.contains("edge") && !text.contains("origin"),
                    "{name}: {text:.80}"
                );
            }
            let template = (views(), with_body());
            group.bench_function(format!("{label}/{name}"), |b| {
                b.iter_batched(
                    || template.clone(),
                    |((mut req, mut resp), mut body)| {
                        lifecycle(&plugin, &mut req, &mut resp, body.as_mut());
                        (req, resp, body)
                    },
                    BatchSize::SmallInput,
                )
            });
            assert_eq!(plugin.stats().traps + plugin.stats().abi_errors, 0);
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
