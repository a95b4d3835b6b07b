//! Plugin host tests: the example plugins (built from `examples/plugins/` by its
//! `build.sh`) and the WAT sandbox plugins, run through the whole lifecycle with real
//! header maps.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};

use super::abi::headers::{deserialize, serialize};
use super::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plugins")
}

/// Builds the example plugins once per test run (`examples/plugins/build.sh`) and
/// returns `dist/`. Returns None, with a message, only when the wasm32-wasip1 target cannot
/// be installed; any other build failure fails the test.
fn dist() -> Option<PathBuf> {
    built().map(|(dist, _)| dist)
}

/// `dist/` and the output of `build.sh` (its messages about skipped plugins).
fn built() -> Option<(PathBuf, &'static str)> {
    static BUILT: OnceLock<Result<(PathBuf, String), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .arg(examples().join("build.sh"))
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .map_err(|e| format!("cannot run build.sh: {e}"))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            return Ok((examples().join("dist"), log));
        }
        let installed = std::process::Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("wasm32-wasip1"));
        if installed {
            panic!("examples/plugins/build.sh failed:\n{log}");
        }
        Err(log)
    });
    match built {
        Ok((p, log)) => Some((p.clone(), log.as_str())),
        Err(log) => {
            eprintln!("SKIPPED: the wasm32-wasip1 target cannot be installed, so the Rust example plugins were not built:\n{log}");
            None
        }
    }
}

/// The AssemblyScript example (`examples/plugins/assemblyscript/`, built by `build.sh` into
/// `dist/as_add_header.wasm`). Returns None, with a message, only when `build.sh` said it
/// skipped it because npm is missing or `npm ci` could not install the packages; a missing
/// file without that message fails the test.
fn as_dist() -> Option<PathBuf> {
    let (dist, log) = built()?;
    let path = dist.join("as_add_header.wasm");
    if path.exists() {
        return Some(path);
    }
    if log.contains("skipping the AssemblyScript plugin") {
        eprintln!("SKIPPED: the AssemblyScript toolchain cannot be installed:\n{log}");
        return None;
    }
    panic!("build.sh succeeded but did not build {}:\n{log}", path.display());
}

/// Deadlines are wall-clock (epoch ticks), and tests run in parallel on small CI machines:
/// tests not about the deadline get a generous one so that preemption cannot fail them.
fn host() -> PluginHost {
    PluginHost::new(HostSettings {
        instances_per_plugin: 2,
        limits: Limits {
            deadline: Duration::from_secs(2),
            ..Limits::default()
        },
        ..Default::default()
    })
}

fn load(host: &PluginHost, name: &str, file: &str, config: &str) -> Option<Plugin> {
    let path = dist()?.join(file);
    Some(
        host.load(&PluginSpec::new(name, path).config(config.to_string()))
            .expect("load"),
    )
}

fn wat(host: &PluginHost, name: &str) -> Plugin {
    let path = examples().join("wat").join(format!("{name}.wat"));
    host.load(&PluginSpec::new(name, path)).expect("load wat plugin")
}

fn request(path: &str, headers: &[(&str, &str)]) -> RequestView {
    let mut map = HeaderMap::new();
    map.insert("host", HeaderValue::from_static("example.com"));
    for (k, v) in headers {
        map.append(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let mut req = RequestView::new(Method::GET, path.parse::<Uri>().unwrap(), map);
    req.client_addr = Some("192.0.2.7:40000".parse().unwrap());
    req
}

fn response() -> ResponseView {
    let mut map = HeaderMap::new();
    map.insert("content-type", HeaderValue::from_static("text/plain"));
    ResponseView::new(StatusCode::OK, map)
}

/// The whole lifecycle; returns the request verdict and, if it continued, the response one.
fn lifecycle(
    plugin: &Plugin,
    req: &mut RequestView,
    resp: &mut ResponseView,
) -> Result<(Verdict, Option<Verdict>), PluginError> {
    let mut stream = plugin.stream();
    let v = stream.on_request_headers(req)?;
    if v != Verdict::Continue {
        stream.finish(Some(req), None);
        return Ok((v, None));
    }
    let r = stream.on_response_headers(Some(req), resp)?;
    stream.finish(Some(req), Some(resp));
    Ok((v, Some(r)))
}

// === serialization ===

#[test]
fn pairs_serialization_matches_the_sdk_format() {
    let bytes = serialize([(&b"a"[..], &b"1"[..]), (&b"b"[..], &b"22"[..])].into_iter());
    let expected: Vec<u8> = [
        &[2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0][..],
        b"a\x001\x00b\x0022\x00",
    ]
    .concat();
    // 29 bytes: the research note says 41, but its own hex dump is these 29.
    assert_eq!(bytes.len(), 29);
    assert_eq!(bytes, expected);
    assert_eq!(
        deserialize(&bytes).unwrap(),
        vec![(&b"a"[..], &b"1"[..]), (&b"b"[..], &b"22"[..])]
    );
    assert_eq!(deserialize(&[]).unwrap(), vec![]);
    assert_eq!(deserialize(&[0]).unwrap(), vec![]);
    assert!(
        deserialize(&[5, 0, 0, 0, 1]).is_none(),
        "truncated input is refused"
    );
}

// === the Rust SDK example plugins ===

#[test]
fn add_header_adds_the_configured_response_header() {
    let host = host();
    let Some(plugin) = load(&host, "add-header", "add_header.wasm", "x-served-by: edgecache") else {
        return;
    };
    let mut created = 0;
    for i in 0..3 {
        let (mut req, mut resp) = (request("/index.html", &[]), response());
        let (v, r) = lifecycle(&plugin, &mut req, &mut resp).unwrap();
        assert_eq!((v, r), (Verdict::Continue, Some(Verdict::Continue)));
        assert_eq!(resp.headers["x-served-by"], "edgecache");
        assert_eq!(
            resp.headers["content-type"], "text/plain",
            "other headers are kept"
        );
        if i == 0 {
            created = plugin.stats().instances_created;
        }
    }
    assert_eq!(
        plugin.stats().instances_created,
        created,
        "this thread's instance is reused"
    );
}

#[test]
fn add_header_default_configuration() {
    let host = host();
    let Some(plugin) = load(&host, "add-header", "add_header.wasm", "") else {
        return;
    };
    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
    assert_eq!(resp.headers["x-edge-plugin"], "add-header");
}

#[test]
fn api_key_denies_without_a_valid_key_and_continues_with_it() {
    let host = host();
    for config in [
        r#"{"header": "x-api-key", "keys": ["s3cret", "other"]}"#,
        "s3cret, other",
    ] {
        let Some(plugin) = load(&host, "api-key", "api_key.wasm", config) else {
            return;
        };
        for headers in [&[][..], &[("x-api-key", "wrong")][..]] {
            let (mut req, mut resp) = (request("/private", headers), response());
            let (v, _) = lifecycle(&plugin, &mut req, &mut resp).unwrap();
            let Verdict::LocalResponse(local) = v else {
                panic!("expected a local response, got {v:?}");
            };
            assert_eq!(local.status, StatusCode::UNAUTHORIZED);
            assert_eq!(local.body, "missing or invalid API key\n");
            assert_eq!(local.headers["www-authenticate"], "ApiKey");
            assert_eq!(local.headers["content-type"], "text/plain");
        }
        let (mut req, mut resp) = (request("/private", &[("x-api-key", "s3cret")]), response());
        let (v, r) = lifecycle(&plugin, &mut req, &mut resp).unwrap();
        assert_eq!((v, r), (Verdict::Continue, Some(Verdict::Continue)));
        assert!(req.headers.get("x-api-key").is_none(), "the key is not forwarded");
        assert_eq!(req.headers["host"], "example.com");
        assert_eq!(
            plugin.stats(),
            PluginStats {
                instances_created: 2,
                ..Default::default()
            },
            "one instance per slot, all started at load"
        );
    }
}

#[test]
fn api_key_with_a_bad_configuration_is_refused_at_load() {
    let host = host();
    let Some(dist) = dist() else {
        return;
    };
    let err = host
        .load(&PluginSpec::new("api-key", dist.join("api_key.wasm")).config("{not json"))
        .unwrap_err();
    assert!(
        matches!(err.kind, LoadErrorKind::Rejected("proxy_on_configure")),
        "{err}"
    );
    assert!(err.to_string().contains("api-key"), "{err}");
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[test]
fn bucket_sets_a_stable_bucket_header() {
    let host = host();
    let Some(plugin) = load(&host, "bucket", "bucket.wasm", "") else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for uid in ["alice", "bob", "carol", "dave", "erin", "frank"] {
        let expected = if fnv1a(uid.as_bytes()).is_multiple_of(2) {
            "a"
        } else {
            "b"
        };
        for _ in 0..2 {
            let cookie = format!("theme=dark; uid={uid}");
            let (mut req, mut resp) = (request("/", &[("cookie", &cookie)]), response());
            lifecycle(&plugin, &mut req, &mut resp).unwrap();
            assert_eq!(req.headers["x-bucket"], expected, "uid={uid}");
        }
        seen.insert(expected);
    }
    assert_eq!(seen.len(), 2, "both buckets are used");
    // Without the cookie: hashed on source.address.
    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
    let expected = if fnv1a(b"192.0.2.7:40000").is_multiple_of(2) {
        "a"
    } else {
        "b"
    };
    assert_eq!(req.headers["x-bucket"], expected);

    let by_header = load(&host, "bucket-h", "bucket.wasm", "header=x-user").unwrap();
    let (mut req, mut resp) = (request("/", &[("x-user", "alice")]), response());
    lifecycle(&by_header, &mut req, &mut resp).unwrap();
    let expected = if fnv1a(b"alice").is_multiple_of(2) {
        "a"
    } else {
        "b"
    };
    assert_eq!(req.headers["x-bucket"], expected);
}

#[test]
fn per_request_isolation_uses_a_fresh_instance_each_time() {
    let host = host();
    let Some(dist) = dist() else {
        return;
    };
    let plugin = host
        .load(
            &PluginSpec::new("api-key", dist.join("api_key.wasm"))
                .config("k")
                .isolation(Isolation::PerRequest),
        )
        .unwrap();
    for i in 0..3 {
        let (mut req, mut resp) = (request("/", &[("x-api-key", "k")]), response());
        let (v, _) = lifecycle(&plugin, &mut req, &mut resp).unwrap();
        assert_eq!(v, Verdict::Continue);
        assert_eq!(plugin.stats().instances_created, 2 + i);
    }
}

#[test]
fn streams_run_concurrently_from_many_threads() {
    let host = host();
    let Some(plugin) = load(&host, "add-header", "add_header.wasm", "x-a: 1") else {
        return;
    };
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..300 {
                    let (mut req, mut resp) = (request("/", &[]), response());
                    lifecycle(&plugin, &mut req, &mut resp).unwrap();
                    assert_eq!(resp.headers["x-a"], "1");
                }
            });
        }
    });
    // Interleaved streams on one instance: create both contexts, then finish in reverse.
    let (mut r1, mut r2) = (request("/1", &[]), request("/2", &[]));
    let (mut s1, mut s2) = (plugin.stream(), plugin.stream());
    s1.on_request_headers(&mut r1).unwrap();
    s2.on_request_headers(&mut r2).unwrap();
    let mut resp = response();
    s2.on_response_headers(None, &mut resp).unwrap();
    drop(s2);
    drop(s1); // finished on drop
    assert_eq!(plugin.stats().instances_created, 2, "one per slot");
    assert!(
        plugin.memory_sizes().iter().all(|m| *m < 4 << 20),
        "{:?}",
        plugin.memory_sizes()
    );
}

// === the AssemblyScript SDK example plugin (@solo-io/proxy-runtime) ===

fn load_as(host: &PluginHost, config: &str) -> Option<Plugin> {
    let path = as_dist()?;
    Some(
        host.load(
            &PluginSpec::new("as-add-header", path)
                .config(config.to_string())
                .root_id("as_add_header"),
        )
        .expect("load the AssemblyScript plugin"),
    )
}

#[test]
fn as_add_header_adds_the_configured_response_header() {
    let host = host();
    let Some(plugin) = load_as(&host, "X-Served-By: edgecache") else {
        return;
    };
    let mut created = 0;
    for i in 0..3 {
        let (mut req, mut resp) = (request("/index.html", &[]), response());
        let mut stream = plugin.stream();
        assert_eq!(stream.on_request_headers(&mut req).unwrap(), Verdict::Continue);
        assert_eq!(
            stream.on_response_headers(Some(&mut req), &mut resp).unwrap(),
            Verdict::Continue
        );
        stream.finish(Some(&mut req), Some(&mut resp));
        assert_eq!(resp.headers["x-served-by"], "edgecache", "name lower-cased");
        assert_eq!(resp.headers.get_all("x-served-by").iter().count(), 1);
        assert_eq!(
            resp.headers["content-type"], "text/plain",
            "other headers are kept"
        );
        assert!(req.headers.get("x-served-by").is_none(), "request untouched");
        if i == 0 {
            created = plugin.stats().instances_created;
        }
    }
    assert_eq!(
        plugin.stats(),
        PluginStats {
            instances_created: created,
            ..Default::default()
        },
        "no failures, and this thread's instance is reused"
    );
}

#[test]
fn as_add_header_default_and_value_only_configuration() {
    let host = host();
    // An empty configuration is where the SDK's default onConfigure traps; the plugin's
    // override must read it as "use the defaults".
    for (config, name, value) in [
        ("", "x-edge-plugin", "as-add-header"),
        ("  \n", "x-edge-plugin", "as-add-header"),
        ("hello", "x-edge-plugin", "hello"),
        ("x-a: b: c", "x-a", "b: c"),
    ] {
        let Some(plugin) = load_as(&host, config) else {
            return;
        };
        let (mut req, mut resp) = (request("/", &[]), response());
        let (v, r) = lifecycle(&plugin, &mut req, &mut resp).unwrap();
        assert_eq!((v, r), (Verdict::Continue, Some(Verdict::Continue)));
        assert_eq!(resp.headers[name], value, "config {config:?}");
    }
}

#[test]
fn as_add_header_reads_a_long_configuration_intact() {
    // The SDK bug passes the configuration length as the return-size pointer: a host that
    // followed it would write to guest address = length. Read a long one back byte for byte.
    let host = host();
    let value: String = (0..3000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let Some(plugin) = load_as(&host, &format!("x-long: {value}")) else {
        return;
    };
    for _ in 0..2 {
        let (mut req, mut resp) = (request("/", &[]), response());
        lifecycle(&plugin, &mut req, &mut resp).unwrap();
        assert_eq!(resp.headers["x-long"], value.as_str());
    }
}

#[test]
fn as_module_runs_the_root_context_its_root_id_names_with_its_vm_config() {
    let host = host();
    let Some(path) = as_dist() else {
        return;
    };
    // One module, two root contexts: the root id picks the SDK's factory.
    let stamp = host
        .load(
            &PluginSpec::new("stamp", &path)
                .root_id("as_stamp")
                .vm_config("from-vm-config"),
        )
        .unwrap();
    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&stamp, &mut req, &mut resp).unwrap();
    assert_eq!(resp.headers["x-as-stamp"], "from-vm-config");
    assert!(
        resp.headers.get("x-edge-plugin").is_none(),
        "the other root context did not run"
    );
    // No root id, or one it did not register: the SDK throws while creating the root context,
    // and its message reaches the load error.
    for root_id in ["", "other"] {
        let err = host
            .load(&PluginSpec::new("as-add-header", &path).root_id(root_id))
            .unwrap_err();
        assert!(
            matches!(&err.kind, LoadErrorKind::Startup(Cause::Trap(m)) if m.contains("Missing root context factory")),
            "{err}"
        );
    }
}

#[test]
fn as_add_header_rejects_an_empty_header_name() {
    let host = host();
    let Some(path) = as_dist() else {
        return;
    };
    let err = host
        .load(
            &PluginSpec::new("as-add-header", path)
                .config(": v")
                .root_id("as_add_header"),
        )
        .unwrap_err();
    assert!(
        matches!(err.kind, LoadErrorKind::Rejected("proxy_on_configure")),
        "{err}"
    );
}

#[test]
fn as_add_header_per_request_isolation_and_threads() {
    let host = host();
    let Some(path) = as_dist() else {
        return;
    };
    let per_request = host
        .load(
            &PluginSpec::new("as-add-header", &path)
                .config("x-b: 2")
                .root_id("as_add_header")
                .isolation(Isolation::PerRequest),
        )
        .unwrap();
    for i in 0..3 {
        let (mut req, mut resp) = (request("/", &[]), response());
        lifecycle(&per_request, &mut req, &mut resp).unwrap();
        assert_eq!(resp.headers["x-b"], "2");
        assert_eq!(per_request.stats().instances_created, 2 + i);
    }
    let shared = load_as(&host, "x-c: 3").unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    let (mut req, mut resp) = (request("/", &[]), response());
                    lifecycle(&shared, &mut req, &mut resp).unwrap();
                    assert_eq!(resp.headers["x-c"], "3");
                }
            });
        }
    });
    assert_eq!(shared.stats().instances_created, 2, "one per slot");
    assert!(
        shared.memory_sizes().iter().all(|m| *m < 4 << 20),
        "{:?}",
        shared.memory_sizes()
    );
}

// === the WAT sandbox plugins ===

#[test]
fn trap_is_contained_and_the_next_request_gets_a_fresh_instance() {
    let host = PluginHost::new(HostSettings {
        instances_per_plugin: 1,
        ..Default::default()
    });
    let plugin = wat(&host, "trap");
    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
    assert_eq!(resp.headers["x-wat"], "trap");

    let mut req = request("/", &[("x-trap", "1")]);
    let err = plugin.stream().on_request_headers(&mut req).unwrap_err();
    assert!(err.is_trap(), "{err}");
    assert_eq!(&*err.plugin, "trap");
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert_eq!(req.headers["x-trap"], "1", "the view is given back after a trap");

    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
    assert_eq!(resp.headers["x-wat"], "trap");
    let stats = plugin.stats();
    assert_eq!((stats.traps, stats.instances_created), (1, 2), "{stats:?}");
}

#[test]
fn an_infinite_loop_hits_the_deadline() {
    let host = PluginHost::new(HostSettings::default());
    let plugin = wat(&host, "loop");
    let deadline = plugin.limits().deadline;
    assert_eq!(deadline, Duration::from_millis(5), "the default");
    let mut req = request("/", &[("x-loop", "1")]);
    let started = Instant::now();
    let err = plugin.stream().on_request_headers(&mut req).unwrap_err();
    let took = started.elapsed();
    assert!(err.is_deadline(), "{err}");
    assert!(took >= deadline, "stopped after {took:?}");
    assert!(
        took < deadline + Duration::from_millis(100),
        "stopped after {took:?}"
    );
    assert_eq!(plugin.stats().deadlines, 1);

    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
    assert_eq!(resp.headers["x-wat"], "loop");
}

#[test]
fn growing_memory_past_the_limit_is_out_of_memory() {
    let host = host();
    let plugin = wat(&host, "oom");
    let mut req = request("/", &[("x-oom", "1")]);
    let err = plugin.stream().on_request_headers(&mut req).unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
    assert_eq!(plugin.stats().out_of_memory, 1);
    let (mut req, mut resp) = (request("/", &[]), response());
    lifecycle(&plugin, &mut req, &mut resp).unwrap();
}

#[test]
fn a_smaller_memory_limit_applies() {
    let host = host();
    let path = examples().join("wat/oom.wat");
    let plugin = host
        .load(&PluginSpec::new("oom", path).limits(Limits {
            memory: 1 << 20,
            deadline: Duration::from_secs(2),
        }))
        .unwrap();
    let mut stream = plugin.stream();
    let err = stream
        .on_request_headers(&mut request("/", &[("x-oom", "1")]))
        .unwrap_err();
    assert!(err.is_out_of_memory(), "{err}");
}

// === load-time validation ===

/// A temporary file ending in `name` (its extension matters to the loader); removed when the
/// returned path is dropped.
fn write_temp(name: &str, bytes: &[u8]) -> tempfile::TempPath {
    let mut file = tempfile::Builder::new()
        .prefix("edgecache-plugin-test-")
        .suffix(&format!("-{name}"))
        .tempfile()
        .unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    file.into_temp_path()
}

fn load_err(host: &PluginHost, path: PathBuf) -> LoadError {
    host.load(&PluginSpec::new("bad", path)).unwrap_err()
}

const MINIMAL: &str = r#"(module
  IMPORTS
  (memory (export "memory") 1)
  (func (export "ABI"))
  (func (export "proxy_on_memory_allocate") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_on_context_create") (param i32 i32))
)"#;

fn minimal(abi: &str, imports: &str) -> Vec<u8> {
    MINIMAL
        .replace("ABI", abi)
        .replace("IMPORTS", imports)
        .into_bytes()
}

#[test]
fn bad_files_give_clear_load_errors() {
    let host = host();
    let err = load_err(&host, PathBuf::from("/nonexistent/plugin.wasm"));
    assert!(matches!(err.kind, LoadErrorKind::NotFound), "{err}");
    assert!(err.to_string().contains("/nonexistent/plugin.wasm"), "{err}");

    let err = load_err(
        &host,
        write_temp("text.wasm", b"hello, I am not wasm").to_path_buf(),
    );
    assert!(matches!(err.kind, LoadErrorKind::NotWasm(_)), "{err}");

    let err = load_err(
        &host,
        write_temp("garbage.wasm", b"\0asm\x01\0\0\0\xff\xff").to_path_buf(),
    );
    assert!(matches!(err.kind, LoadErrorKind::Compile(_)), "{err}");

    let err = load_err(
        &host,
        write_temp("plain.wat", &minimal("something_else", "")).to_path_buf(),
    );
    assert!(matches!(err.kind, LoadErrorKind::NoAbiVersion), "{err}");
    assert!(err.to_string().contains("proxy_abi_version_0_2_1"), "{err}");

    let err = load_err(
        &host,
        write_temp("old.wat", &minimal("proxy_abi_version_0_1_0", "")).to_path_buf(),
    );
    assert!(
        matches!(&err.kind, LoadErrorKind::UnsupportedAbi { found } if found == "proxy_abi_version_0_1_0"),
        "{err}"
    );

    let imports = r#"(import "env" "emscripten_memcpy_big" (func)) (import "sockets" "connect" (func))"#;
    let err = load_err(
        &host,
        write_temp("imports.wat", &minimal("proxy_abi_version_0_2_1", imports)).to_path_buf(),
    );
    let LoadErrorKind::MissingImports(names) = &err.kind else {
        panic!("{err}");
    };
    assert_eq!(names, &["env.emscripten_memcpy_big", "sockets.connect"]);

    let imports = r#"(import "env" "proxy_log" (func (param i64)))"#;
    let err = load_err(
        &host,
        write_temp("sig.wat", &minimal("proxy_abi_version_0_2_1", imports)).to_path_buf(),
    );
    assert!(matches!(err.kind, LoadErrorKind::Instantiate(_)), "{err}");
    assert!(err.to_string().contains("proxy_log"), "{err}");
}

#[test]
fn a_plugin_importing_a_host_function_edgecache_lacks_is_refused_at_load_naming_it() {
    let host = host();
    let imports = r#"(import "env" "proxy_future_call" (func (result i32))) (import "env" "proxy_log" (func (param i32 i32 i32) (result i32)))"#;
    let err = load_err(
        &host,
        write_temp("future.wat", &minimal("proxy_abi_version_0_2_1", imports)).to_path_buf(),
    );
    let LoadErrorKind::MissingImports(names) = &err.kind else {
        panic!("{err}");
    };
    assert_eq!(
        names,
        &["env.proxy_future_call"],
        "only what edgecache lacks is named"
    );
}

#[test]
fn unknown_wasi_imports_load_and_answer_enosys() {
    let host = host();
    let module = r#"(module
  (import "wasi_snapshot_preview1" "path_open" (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "proxy_abi_version_0_2_0"))
  (func (export "proxy_on_memory_allocate") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    ;; path_open must answer ENOSYS (52).
    (if (i32.ne (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 0)) (i32.const 52))
      (then unreachable))
    (i32.const 0))
)"#;
    let plugin = host
        .load(&PluginSpec::new(
            "wasi",
            write_temp("wasi.wat", module.as_bytes()).to_path_buf(),
        ))
        .unwrap();
    let verdict = plugin.stream().on_request_headers(&mut request("/", &[]));
    assert_eq!(verdict.unwrap(), Verdict::Continue);
}

// === host functions through a WAT plugin ===

/// A plugin that reads the property named in request header `x-prop` and the header named
/// in `x-get`, and writes them to response headers `x-prop-value` / `x-get-value`; it also
/// sets `:path` from `x-new-path` and `:status` from nothing (always 203) in the response.
const PROBE: &str = r#"(module
  (import "env" "proxy_get_header_map_value" (func $get (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_replace_header_map_value" (func $replace (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_property" (func $prop (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_get_shared_data" (func $sget (param i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_shared_data" (func $sset (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "x-prop")
  (data (i32.const 32) "x-prop-value")
  (data (i32.const 48) ":path")
  (data (i32.const 64) "x-new-path")
  (data (i32.const 80) ":status")
  (data (i32.const 96) "203")
  (data (i32.const 112) "x-cas")
  (data (i32.const 128) "probe-key")
  (global $heap (mut i32) (i32.const 4096))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (if (i32.gt_u (i32.add (global.get $heap) (local.get $n)) (i32.const 131072)) (then (global.set $heap (i32.const 4096))))
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $n)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    ;; x-prop names a property (dots replaced by NULs by the sender)
    (if (i32.eqz (call $get (i32.const 0) (i32.const 16) (i32.const 6) (i32.const 200) (i32.const 204)))
      (then
        (if (i32.eqz (call $prop (i32.load (i32.const 200)) (i32.load (i32.const 204)) (i32.const 208) (i32.const 212)))
          (then (drop (call $replace (i32.const 0) (i32.const 32) (i32.const 12)
                                     (i32.load (i32.const 208)) (i32.load (i32.const 212))))))))
    ;; x-new-path replaces :path
    (if (i32.eqz (call $get (i32.const 0) (i32.const 64) (i32.const 10) (i32.const 200) (i32.const 204)))
      (then (drop (call $replace (i32.const 0) (i32.const 48) (i32.const 5)
                                 (i32.load (i32.const 200)) (i32.load (i32.const 204))))))
    ;; shared data: set probe-key = "v" with the CAS from x-cas semantics: first set (cas 0)
    ;; works, a set with a stale cas (u32::MAX) must fail with CAS_MISMATCH (8)
    (drop (call $sset (i32.const 128) (i32.const 9) (i32.const 96) (i32.const 3) (i32.const 0)))
    (if (i32.ne (call $sset (i32.const 128) (i32.const 9) (i32.const 96) (i32.const 3) (i32.const -1)) (i32.const 8))
      (then unreachable))
    (if (i32.ne (call $sget (i32.const 128) (i32.const 9) (i32.const 220) (i32.const 224) (i32.const 228)) (i32.const 0))
      (then unreachable))
    ;; a set with the current cas works
    (if (i32.ne (call $sset (i32.const 128) (i32.const 9) (i32.const 96) (i32.const 3) (i32.load (i32.const 228))) (i32.const 0))
      (then unreachable))
    (i32.const 0))
  (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
    (drop (call $replace (i32.const 2) (i32.const 80) (i32.const 7) (i32.const 96) (i32.const 3)))
    (i32.const 0))
)"#;

#[test]
fn properties_pseudo_headers_and_shared_data() {
    let host = host();
    let plugin = host
        .load(
            &PluginSpec::new("probe", write_temp("probe.wat", PROBE.as_bytes()).to_path_buf())
                .root_id("root-7"),
        )
        .unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("request.path", "/a/b?x=1", "/a/b?x=1"),
        ("request.url_path", "/a/b?x=1", "/a/b"),
        ("request.query", "/a/b?x=1", "x=1"),
        ("request.method", "/", "GET"),
        ("request.host", "/", "example.com"),
        ("request.scheme", "/", "http"),
        ("request.protocol", "/", "HTTP/1.1"),
        ("source.address", "/", "192.0.2.7:40000"),
        ("plugin_name", "/", "probe"),
        ("plugin_root_id", "/", "root-7"),
    ];
    for (prop, path, expected) in cases {
        // Header values cannot carry NUL; the WAT passes the raw header as the path, and
        // the host also accepts dotted paths (segments joined with dots either way).
        let mut req = request(path, &[("x-prop", prop)]);
        let v = plugin.stream().on_request_headers(&mut req).unwrap();
        assert_eq!(v, Verdict::Continue);
        assert_eq!(req.headers["x-prop-value"], *expected, "{prop}");
    }
    let mut req = request("/old?q", &[("x-new-path", "/new/path?y=2")]);
    let mut resp = response();
    let mut stream = plugin.stream();
    stream.on_request_headers(&mut req).unwrap();
    assert_eq!(req.uri, "/new/path?y=2");
    stream.on_response_headers(Some(&mut req), &mut resp).unwrap();
    assert_eq!(resp.status, StatusCode::NON_AUTHORITATIVE_INFORMATION);
}

/// A rough number for the whole lifecycle on a reused instance (the criterion bench is
/// separate). Run: `cargo test --release -p edgecache-runtime --lib lifecycle_cost -- --ignored --nocapture`.
#[test]
#[ignore = "timing; run in release mode"]
fn lifecycle_cost() {
    let host = PluginHost::new(HostSettings::default());
    for (name, file, config, headers) in [
        ("add-header", "add_header.wasm", "x-a: 1", &[][..]),
        ("api-key", "api_key.wasm", "k", &[("x-api-key", "k")][..]),
        ("bucket", "bucket.wasm", "", &[("cookie", "uid=alice")][..]),
    ] {
        let Some(plugin) = load(&host, name, file, config) else {
            return;
        };
        let n = 50_000;
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            for _ in 0..n {
                let (mut req, mut resp) = (request("/index.html", headers), response());
                lifecycle(&plugin, &mut req, &mut resp).unwrap();
            }
            best = best.min(started.elapsed() / n);
        }
        println!("{name}: whole lifecycle {best:?} per request (incl. building the views)");
    }
}

#[test]
fn compress_and_uncompress_are_offered_as_envoy_foreign_functions() {
    let host = host();
    // Compresses "hello world!", writes the compressed length as two digits to `x-z-len`, then
    // uncompresses the result into `x-round-trip`; an unknown function's status goes to
    // `x-unknown` as a digit.
    let module = r#"(module
  (import "env" "proxy_call_foreign_function" (func $ff (param i32 i32 i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "compress")
  (data (i32.const 32) "uncompress")
  (data (i32.const 48) "hello world!")
  (data (i32.const 64) "x-z-len")
  (data (i32.const 80) "x-round-trip")
  (data (i32.const 96) "x-unknown")
  (data (i32.const 112) "nope")
  (global $heap (mut i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get $size)))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (local $len i32)
    (if (call $ff (i32.const 16) (i32.const 8) (i32.const 48) (i32.const 12) (i32.const 200) (i32.const 204))
      (then unreachable))
    (local.set $len (i32.load (i32.const 204)))
    (i32.store8 (i32.const 300) (i32.add (i32.const 48) (i32.div_u (local.get $len) (i32.const 10))))
    (i32.store8 (i32.const 301) (i32.add (i32.const 48) (i32.rem_u (local.get $len) (i32.const 10))))
    (drop (call $add (i32.const 0) (i32.const 64) (i32.const 7) (i32.const 300) (i32.const 2)))
    (if (call $ff (i32.const 32) (i32.const 10) (i32.load (i32.const 200)) (local.get $len) (i32.const 208) (i32.const 212))
      (then unreachable))
    (drop (call $add (i32.const 0) (i32.const 80) (i32.const 12) (i32.load (i32.const 208)) (i32.load (i32.const 212))))
    (i32.store8 (i32.const 302) (i32.add (i32.const 48)
      (call $ff (i32.const 112) (i32.const 4) (i32.const 48) (i32.const 12) (i32.const 216) (i32.const 220))))
    (drop (call $add (i32.const 0) (i32.const 96) (i32.const 9) (i32.const 302) (i32.const 1)))
    (i32.const 0))
)"#;
    let plugin = host
        .load(&PluginSpec::new(
            "foreign",
            write_temp("foreign.wat", module.as_bytes()).to_path_buf(),
        ))
        .unwrap();
    let mut req = request("/", &[]);
    assert_eq!(
        plugin.stream().on_request_headers(&mut req).unwrap(),
        Verdict::Continue
    );
    // zlib at the default level, as Envoy's `compress` (the Go SDK example's expected output:
    // 789ccb48cdc9c95728cf2fca495104001e89047e, 20 bytes).
    assert_eq!(req.headers["x-z-len"], "20");
    assert_eq!(req.headers["x-round-trip"], "hello world!");
    assert_eq!(
        req.headers["x-unknown"], "1",
        "NOT_FOUND for a function not offered"
    );
}
