//! Declarations: `backend`, `probe`, `acl` and `plugin` -> `BackendDecl`, `ProbeDecl`, `Acl`, `PluginDecl`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::ast::{AclDef, Attr, AttrValue, BackendDef, ExprKind, PluginDef, ProbeDef};
use crate::diagnostics::{did_you_mean, Code, Diagnostic, Sink, Span};
use crate::tree::{
    Acl, AclName, AclRule, BackendDecl, BackendTls, CaFile, OnError, PluginDecl, PluginIsolation, ProbeDecl,
};

const BACKEND_ATTRS: &[&str] = &[
    "host",
    "port",
    "host_header",
    "connect_timeout",
    "first_byte_timeout",
    "between_bytes_timeout",
    "max_connections",
    "probe",
    "ssl",
    "ssl_sni",
    "ssl_verify_peer",
    "ssl_verify_host",
    "ssl_ca",
    "proxy_header",
];
const BACKEND_LATER: &[&str] = &[
    "path",
    "preamble",
    "via",
    "authority",
    "wait_limit",
    "wait_timeout",
];
const PROBE_ATTRS: &[&str] = &[
    "url",
    "request",
    "expected_response",
    "timeout",
    "interval",
    "window",
    "threshold",
    "initial",
];
const PLUGIN_ATTRS: &[&str] = &[
    "path",
    "config",
    "on_error",
    "isolation",
    "root_id",
    "vm_id",
    "vm_config",
    "upstreams",
    "max_body",
];

fn unknown_attr(sink: &mut Sink, kind: &str, a: &Attr, known: &[&str]) {
    let d = Diagnostic::new(
        Code::BadDeclaration,
        a.name.span,
        format!("unknown {kind} attribute `.{}`", a.name.name),
    )
    .label("not a known attribute");
    let hint = did_you_mean(&a.name.name, known.iter().copied())
        .map(|s| format!("did you mean `.{s}`?"))
        .unwrap_or_else(|| {
            format!(
                "known attributes: {}",
                known
                    .iter()
                    .map(|k| format!(".{k}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        });
    sink.push(d.hint(hint));
}

fn expect_string(sink: &mut Sink, a: &Attr) -> Option<String> {
    match &a.value {
        AttrValue::Expr(e) => match &e.kind {
            ExprKind::Str(s) => Some(s.clone()),
            ExprKind::Int(i) => Some(i.to_string()),
            _ => {
                sink.push(mismatch(a.value.span(), &a.name.name, "a string"));
                None
            }
        },
        _ => {
            sink.push(mismatch(a.value.span(), &a.name.name, "a string"));
            None
        }
    }
}

fn expect_duration(sink: &mut Sink, a: &Attr) -> Option<Duration> {
    match &a.value {
        AttrValue::Expr(e) => match e.kind {
            ExprKind::Duration(d) if d >= 0.0 && d.is_finite() => Some(Duration::from_secs_f64(d)),
            _ => {
                sink.push(
                    mismatch(a.value.span(), &a.name.name, "a duration")
                        .hint("write a unit, e.g. `5s` or `500ms`"),
                );
                None
            }
        },
        _ => {
            sink.push(mismatch(a.value.span(), &a.name.name, "a duration"));
            None
        }
    }
}

fn expect_int(sink: &mut Sink, a: &Attr) -> Option<u32> {
    match &a.value {
        AttrValue::Expr(e) => match e.kind {
            ExprKind::Int(i) if (0..=u32::MAX as i64).contains(&i) => Some(i as u32),
            _ => {
                sink.push(mismatch(a.value.span(), &a.name.name, "a non-negative integer"));
                None
            }
        },
        _ => {
            sink.push(mismatch(a.value.span(), &a.name.name, "an integer"));
            None
        }
    }
}

/// A VCL boolean attribute: `1` / `0` (Varnish Enterprise's `.ssl = 1;`) or `true` / `false`.
fn expect_flag(sink: &mut Sink, a: &Attr) -> Option<bool> {
    match &a.value {
        AttrValue::Expr(e) => match e.kind {
            ExprKind::Int(i @ (0 | 1)) => Some(i == 1),
            ExprKind::Bool(b) => Some(b),
            _ => {
                sink.push(mismatch(a.value.span(), &a.name.name, "`1` or `0`"));
                None
            }
        },
        _ => {
            sink.push(mismatch(a.value.span(), &a.name.name, "`1` or `0`"));
            None
        }
    }
}

fn mismatch(span: Span, attr: &str, want: &str) -> Diagnostic {
    Diagnostic::new(Code::TypeMismatch, span, format!("`.{attr}` expects {want}"))
        .label(format!("expected {want}"))
}

pub(crate) fn probe(sink: &mut Sink, name: Option<String>, attrs: &[Attr]) -> ProbeDecl {
    let mut p = ProbeDecl::new(name);
    let mut initial = None;
    for a in attrs {
        match a.name.name.as_str() {
            "url" => {
                if let Some(s) = expect_string(sink, a) {
                    p.url = s;
                }
            }
            "request" => match &a.value {
                AttrValue::Strings(v) => p.request = Some(v.iter().map(|(s, _)| s.clone()).collect()),
                _ => p.request = expect_string(sink, a).map(|s| vec![s]),
            },
            "expected_response" => {
                if let Some(i) = expect_int(sink, a) {
                    p.expected_response = i.min(999) as u16;
                }
            }
            "timeout" => p.timeout = expect_duration(sink, a).unwrap_or(p.timeout),
            "interval" => p.interval = expect_duration(sink, a).unwrap_or(p.interval),
            "window" => p.window = expect_int(sink, a).unwrap_or(p.window),
            "threshold" => p.threshold = expect_int(sink, a).unwrap_or(p.threshold),
            "initial" => initial = expect_int(sink, a),
            _ => unknown_attr(sink, "probe", a, PROBE_ATTRS),
        }
    }
    if p.window > 64 || p.threshold > p.window {
        if let Some(a) = attrs
            .iter()
            .find(|a| a.name.name == "window" || a.name.name == "threshold")
        {
            sink.push(
                Diagnostic::new(Code::BadDeclaration, a.span, "invalid probe window/threshold")
                    .label("here")
                    .hint("`.window` must be at most 64 and `.threshold` at most `.window`"),
            );
        }
    }
    p.initial = initial.unwrap_or(p.threshold.saturating_sub(1));
    p
}

pub(crate) fn probe_decl(sink: &mut Sink, d: &ProbeDef) -> ProbeDecl {
    probe(sink, Some(d.name.name.clone()), &d.attrs)
}

/// Resolves `.probe = name` through `lookup`.
pub(crate) fn backend(
    sink: &mut Sink,
    d: &BackendDef,
    lookup: &dyn Fn(&str) -> Option<ProbeDecl>,
    probe_names: &[&str],
) -> BackendDecl {
    let mut b = BackendDecl {
        name: d.name.name.clone(),
        host: String::new(),
        port: 80,
        host_header: None,
        connect_timeout: None,
        first_byte_timeout: None,
        between_bytes_timeout: None,
        max_connections: None,
        probe: None,
        tls: None,
        proxy_header: None,
        none: d.none,
    };
    let mut port_set = false;
    let mut ssl = false;
    let mut tls = BackendTls {
        sni: true,
        verify_peer: true,
        verify_host: true,
        ca: None,
    };
    for a in &d.attrs {
        match a.name.name.as_str() {
            "host" => {
                if let Some(h) = expect_string(sink, a) {
                    // "host:port" and "[v6]:port" forms.
                    let (host, port) = split_host_port(&h);
                    b.host = host.to_string();
                    if let Some(p) = port {
                        match p.parse() {
                            Ok(p) => {
                                b.port = p;
                                port_set = true;
                            }
                            Err(_) => sink.push(bad_port(a.value.span())),
                        }
                    }
                    if b.host.is_empty() {
                        sink.push(
                            Diagnostic::new(Code::BadDeclaration, a.value.span(), "empty `.host`")
                                .label("expected a host name or IP address"),
                        );
                    }
                }
            }
            "port" => {
                if let Some(p) = expect_string(sink, a) {
                    match p.parse::<u16>() {
                        Ok(p) => {
                            b.port = p;
                            port_set = true;
                        }
                        Err(_) => sink.push(bad_port(a.value.span())),
                    }
                }
            }
            "host_header" => b.host_header = expect_string(sink, a),
            "connect_timeout" => b.connect_timeout = expect_duration(sink, a),
            "first_byte_timeout" => b.first_byte_timeout = expect_duration(sink, a),
            "between_bytes_timeout" => b.between_bytes_timeout = expect_duration(sink, a),
            "max_connections" => b.max_connections = expect_int(sink, a),
            "ssl" => ssl = expect_flag(sink, a).unwrap_or(ssl),
            "ssl_sni" => tls.sni = expect_flag(sink, a).unwrap_or(tls.sni),
            "ssl_verify_peer" => tls.verify_peer = expect_flag(sink, a).unwrap_or(tls.verify_peer),
            "ssl_verify_host" => tls.verify_host = expect_flag(sink, a).unwrap_or(tls.verify_host),
            "ssl_ca" => match expect_string(sink, a) {
                Some(path) if path.trim().is_empty() => sink.push(
                    Diagnostic::new(Code::BadDeclaration, a.value.span(), "empty `.ssl_ca`")
                        .label("expected the path of a PEM file of CA certificates"),
                ),
                Some(path) => {
                    tls.ca = Some(CaFile {
                        path,
                        declared_at: String::new(),
                        span: a.span,
                    })
                }
                None => {}
            },
            "proxy_header" => match expect_int(sink, a) {
                Some(version @ (1 | 2)) => b.proxy_header = Some(version as u8),
                Some(_) => sink.push(
                    mismatch(a.value.span(), "proxy_header", "`1` or `2`")
                        .hint("the PROXY protocol version: 1 (text) or 2 (binary)"),
                ),
                None => {}
            },
            "probe" => match &a.value {
                AttrValue::Block(attrs, _) => b.probe = Some(probe(sink, None, attrs)),
                AttrValue::Expr(e) => match &e.kind {
                    ExprKind::Name(n) => match lookup(n) {
                        Some(p) => b.probe = Some(p),
                        None => sink.push(
                            Diagnostic::new(Code::UndefinedProbe, e.span, format!("undefined probe `{n}`"))
                                .undeclared()
                                .label("no probe with this name")
                                .maybe_hint(
                                    did_you_mean(n, probe_names.iter().copied())
                                        .map(|s| format!("did you mean `{s}`?")),
                                ),
                        ),
                    },
                    _ => sink.push(mismatch(e.span, "probe", "a probe name or `{ ... }`")),
                },
                AttrValue::Strings(_) => {
                    sink.push(mismatch(a.value.span(), "probe", "a probe name or `{ ... }`"))
                }
            },
            n if BACKEND_LATER.contains(&n) => sink.push(
                Diagnostic::new(
                    Code::Unsupported,
                    a.name.span,
                    format!("backend attribute `.{n}` is not supported by edgecache"),
                )
                .label("not supported"),
            ),
            _ => unknown_attr(sink, "backend", a, BACKEND_ATTRS),
        }
    }
    if ssl {
        // Varnish Enterprise: a TLS backend's port defaults to 443.
        if !port_set {
            b.port = 443;
        }
        b.tls = Some(tls);
    } else if let Some(a) = d.attrs.iter().find(|a| a.name.name.starts_with("ssl_")) {
        sink.push(
            Diagnostic::new(
                Code::NoEffect,
                a.name.span,
                format!("`.{}` has no effect without `.ssl = 1;`", a.name.name),
            )
            .label("ignored")
            .hint("add `.ssl = 1;` to talk TLS to this backend"),
        );
    }
    if !d.none && b.host.is_empty() && !d.attrs.iter().any(|a| a.name.name == "host") {
        sink.push(
            Diagnostic::new(
                Code::BadDeclaration,
                d.name.span,
                format!("backend `{}` has no `.host`", d.name.name),
            )
            .label("declared here")
            .hint("add `.host = \"127.0.0.1\";` (and `.port = \"8080\";`)"),
        );
    }
    b
}

fn bad_port(span: Span) -> Diagnostic {
    Diagnostic::new(Code::BadDeclaration, span, "invalid port").label("expected a number 0-65535")
}

fn split_host_port(h: &str) -> (&str, Option<&str>) {
    if let Some(rest) = h.strip_prefix('[') {
        if let Some((host, after)) = rest.split_once(']') {
            return (host, after.strip_prefix(':'));
        }
    }
    match h.rsplit_once(':') {
        // More than one colon: a bare IPv6 address.
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (h, None),
    }
}

pub(crate) fn acl(sink: &mut Sink, d: &AclDef) -> Acl {
    let mut rules = Vec::new();
    let mut names = Vec::new();
    for e in &d.entries {
        // Varnish also takes the mask inside the quotes: "10.0.0.0/8".
        let (addr, mask) = match e.addr.split_once('/').map(|(a, m)| (a, m.parse::<u32>())) {
            Some((addr, Ok(mask))) => (addr, Some((mask, e.addr_span))),
            _ => (e.addr.as_str(), e.mask),
        };
        let addrs: Vec<IpAddr> = if addr.eq_ignore_ascii_case("localhost") {
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]
        } else {
            match addr.parse::<IpAddr>() {
                Ok(ip) => vec![ip],
                // A host name: resolved when the policy loads (`load` asks its loader).
                Err(_) if !addr.contains(':') && !addr.is_empty() => {
                    names.push(AclName {
                        negated: e.negated,
                        optional: e.optional,
                        name: addr.to_string(),
                        span: e.addr_span,
                        mask: mask.map(|(m, _)| m),
                    });
                    continue;
                }
                Err(_) => {
                    let d = if addr.contains(':') {
                        Diagnostic::new(
                            Code::BadDeclaration,
                            e.addr_span,
                            format!("ACL entry `{}` is not a valid IPv6 address", e.addr),
                        )
                        .label("expected e.g. \"2001:db8::\"/32 or \"::1\"")
                        .hint("check the groups: at most eight, each of at most four hex digits, `::` once")
                    } else {
                        Diagnostic::new(Code::BadDeclaration, e.addr_span, "empty ACL entry")
                            .label("expected an IP address such as \"10.0.0.0\"/8 or a host name")
                    };
                    sink.push(d);
                    continue;
                }
            }
        };
        for ip in addrs {
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match mask {
                Some((m, span)) if m > max => {
                    sink.push(
                        Diagnostic::new(Code::BadDeclaration, span, format!("mask /{m} is too long"))
                            .label(format!("at most /{max} for this address")),
                    );
                    max
                }
                Some((m, _)) if ip.is_ipv4() || addr.eq_ignore_ascii_case("localhost") => m.min(max),
                Some((m, _)) => m,
                None => max,
            };
            rules.push(AclRule {
                negated: e.negated,
                addr: ip,
                prefix: prefix as u8,
            });
        }
    }
    Acl {
        name: d.name.name.clone(),
        rules,
        names,
    }
}

/// `plugin NAME { .path = "..."; .config = "..."; .on_error = deny; .isolation = shared; }`.
/// `.path` is returned as written; `load` resolves it against the declaring file.
pub(crate) fn plugin(sink: &mut Sink, d: &PluginDef) -> PluginDecl {
    let mut p = PluginDecl {
        name: d.name.name.clone(),
        path: String::new(),
        config: String::new(),
        on_error: OnError::default(),
        isolation: PluginIsolation::default(),
        root_id: String::new(),
        vm_id: String::new(),
        vm_config: String::new(),
        upstreams: Vec::new(),
        max_body: None,
    };
    let mut has_path = false;
    let mut seen: Vec<(&str, Span)> = Vec::new();
    for a in &d.attrs {
        let name = a.name.name.as_str();
        if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
            sink.push(
                Diagnostic::new(
                    Code::BadDeclaration,
                    a.name.span,
                    format!("plugin attribute `.{name}` is set more than once"),
                )
                .label("set again here")
                .secondary(*first, "first set here"),
            );
            continue;
        }
        seen.push((name, a.name.span));
        match name {
            "path" => {
                has_path = true;
                if let Some(path) = expect_string(sink, a) {
                    if path.trim().is_empty() {
                        sink.push(
                            Diagnostic::new(Code::BadDeclaration, a.value.span(), "empty `.path`")
                                .label("expected the path of a `.wasm` file")
                                .hint("e.g. `.path = \"plugins/auth.wasm\";` (relative to this policy file)"),
                        );
                    }
                    p.path = path;
                }
            }
            "config" => match &a.value {
                // `.config = "a" "b";` concatenates, like a string list elsewhere.
                AttrValue::Strings(v) => p.config = v.iter().map(|(s, _)| s.as_str()).collect(),
                _ => p.config = expect_string(sink, a).unwrap_or_default(),
            },
            "on_error" => {
                if let Some(v) = keyword(
                    sink,
                    a,
                    &["deny", "continue"],
                    "`deny` (fail closed, 503) or `continue` (fail open)",
                ) {
                    p.on_error = if v == "deny" {
                        OnError::Deny
                    } else {
                        OnError::Continue
                    };
                }
            }
            "isolation" => {
                if let Some(v) = keyword(sink, a, &["shared", "per_request"], "`shared` or `per_request`") {
                    p.isolation = if v == "shared" {
                        PluginIsolation::Shared
                    } else {
                        PluginIsolation::PerRequest
                    };
                }
            }
            "root_id" => p.root_id = expect_string(sink, a).unwrap_or_default(),
            "vm_id" => p.vm_id = expect_string(sink, a).unwrap_or_default(),
            "vm_config" => match &a.value {
                AttrValue::Strings(v) => p.vm_config = v.iter().map(|(s, _)| s.as_str()).collect(),
                _ => p.vm_config = expect_string(sink, a).unwrap_or_default(),
            },
            "upstreams" => {
                if let Some(text) = expect_string(sink, a) {
                    p.upstreams = plugin_upstreams(sink, a, &text);
                }
            }
            "max_body" => match &a.value {
                AttrValue::Expr(e) => match e.kind {
                    ExprKind::Bytes(b) => p.max_body = Some(b),
                    _ => sink
                        .push(mismatch(a.value.span(), "max_body", "a size").hint("e.g. `.max_body = 1MB;`")),
                },
                _ => {
                    sink.push(mismatch(a.value.span(), "max_body", "a size").hint("e.g. `.max_body = 1MB;`"))
                }
            },
            _ => unknown_attr(sink, "plugin", a, PLUGIN_ATTRS),
        }
    }
    if !has_path {
        sink.push(
            Diagnostic::new(
                Code::BadDeclaration,
                d.name.span,
                format!("plugin `{}` has no `.path`", d.name.name),
            )
            .label("declared here")
            .hint("add `.path = \"plugins/NAME.wasm\";` (relative to this policy file)"),
        );
    }
    p
}

/// `.upstreams = "httpbin=origin auth=auth_director";`: space-separated `CLUSTER=BACKEND`
/// pairs. Whether each backend exists is checked by the runtime when it loads the plugin.
fn plugin_upstreams(sink: &mut Sink, a: &Attr, text: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for item in text.split_whitespace() {
        match item.split_once('=') {
            Some((cluster, backend)) if !cluster.is_empty() && !backend.is_empty() => {
                if pairs.iter().any(|(c, _)| c == cluster) {
                    sink.push(
                        Diagnostic::new(
                            Code::BadDeclaration,
                            a.value.span(),
                            format!("upstream `{cluster}` is named twice in `.upstreams`"),
                        )
                        .label("here"),
                    );
                    continue;
                }
                pairs.push((cluster.to_string(), backend.to_string()));
            }
            _ => sink.push(
                Diagnostic::new(
                    Code::BadDeclaration,
                    a.value.span(),
                    format!("`{item}` in `.upstreams` is not `CLUSTER=BACKEND`"),
                )
                .label("expected space-separated CLUSTER=BACKEND pairs")
                .hint("e.g. `.upstreams = \"auth=auth_backend httpbin=origin\";`"),
            ),
        }
    }
    pairs
}

/// A bare-word attribute value (`.on_error = deny;`) that must be one of `allowed`.
fn keyword(sink: &mut Sink, a: &Attr, allowed: &[&'static str], want: &str) -> Option<&'static str> {
    let attr = &a.name.name;
    let (word, quoted) = match &a.value {
        AttrValue::Expr(e) => match &e.kind {
            ExprKind::Name(n) => (n.as_str(), false),
            ExprKind::Str(s) => (s.as_str(), true),
            _ => ("", false),
        },
        _ => ("", false),
    };
    if let Some(v) = allowed.iter().copied().find(|v| *v == word) {
        if !quoted {
            return Some(v);
        }
        sink.push(
            Diagnostic::new(
                Code::TypeMismatch,
                a.value.span(),
                format!("`.{attr}` expects a bare word, not a string"),
            )
            .label(format!("expected {want}"))
            .hint(format!("write `.{attr} = {v};` without quotes")),
        );
        return None;
    }
    // Words people reach for when they mean fail open / fail closed.
    let synonym = match word {
        "allow" | "open" | "fail_open" | "pass" | "ignore" | "skip" => Some("continue"),
        "closed" | "close" | "fail_closed" | "block" | "reject" | "fail" | "error" => Some("deny"),
        _ => None,
    }
    .filter(|s| allowed.contains(s));
    let hint = synonym
        .or_else(|| did_you_mean(word, allowed.iter().copied()))
        .map(|s| format!("did you mean `{s}`?"))
        .unwrap_or_else(|| {
            format!(
                "`.{attr}` is one of: {}",
                allowed
                    .iter()
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    let shown = if word.is_empty() {
        "this value".to_string()
    } else {
        format!("`{word}`")
    };
    sink.push(
        Diagnostic::new(
            Code::BadDeclaration,
            a.value.span(),
            format!("invalid `.{attr}` value {shown}"),
        )
        .label(format!("expected {want}"))
        .hint(hint),
    );
    None
}
