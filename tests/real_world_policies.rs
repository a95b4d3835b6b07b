//! The real-world corpus (`tests/policies/real-world/`) run as written against test origins:
//! a table of requests per file, each with what Varnish answers (status, hit or pass as the
//! origin's request count shows it, headers, the origin that served it). The files' backends
//! on port 8080 become one origin, those on 8081-8083 three more answering with their own
//! names.

mod support;

use std::net::SocketAddr;

use edgecache_runtime::Running;
use support::{send, Origin, OriginReply};

/// One request and what must come back.
struct Step {
    method: &'static str,
    target: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    status: u16,
    /// Response headers: `Some(value)` must be there with that value, `None` must be absent.
    expect: &'static [(&'static str, Option<&'static str>)],
    /// The origin that answered (its body): "main", or the name of the 8081-8083 one.
    served_by: Option<&'static str>,
    /// Requests all origins have received after this step (a hit leaves it unchanged).
    origin_requests: Option<usize>,
}

const GET: Step = Step {
    method: "GET",
    target: "/",
    headers: &[],
    body: "",
    status: 200,
    expect: &[],
    served_by: None,
    origin_requests: None,
};

struct Case {
    file: &'static str,
    steps: &'static [Step],
}

const CASES: &[Case] = &[
    Case {
        file: "wordpress.vcl",
        steps: &[
            Step {
                target: "/hello-world/?utm_source=x",
                expect: &[("x-cache", Some("MISS"))],
                origin_requests: Some(1),
                ..GET
            },
            // The tracking parameter is stripped: the same object.
            Step {
                target: "/hello-world/",
                expect: &[("x-cache", Some("HIT")), ("server", None)],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/wp-admin/",
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/wp-admin/",
                origin_requests: Some(3),
                ..GET
            },
            Step {
                target: "/hello-world/",
                headers: &[("cookie", "wordpress_logged_in_abc=1")],
                origin_requests: Some(4),
                ..GET
            },
            Step {
                method: "PURGE",
                target: "/hello-world/",
                status: 200,
                origin_requests: Some(4),
                ..GET
            },
            Step {
                target: "/hello-world/",
                expect: &[("x-cache", Some("MISS"))],
                origin_requests: Some(5),
                ..GET
            },
        ],
    },
    Case {
        file: "drupal.vcl",
        steps: &[
            Step {
                target: "/node/1",
                headers: &[("cookie", "_ga=1; has_js=1")],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/node/1",
                origin_requests: Some(1),
                expect: &[("x-url", None)],
                ..GET
            },
            Step {
                target: "/node/1",
                headers: &[("cookie", "SESSabc=123")],
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/user/login",
                origin_requests: Some(3),
                ..GET
            },
            Step {
                target: "/user/login",
                origin_requests: Some(4),
                ..GET
            },
            Step {
                method: "BAN",
                target: "/node",
                origin_requests: Some(4),
                ..GET
            },
            Step {
                target: "/node/1",
                origin_requests: Some(5),
                ..GET
            },
        ],
    },
    Case {
        file: "magento2.vcl",
        steps: &[
            Step {
                target: "/catalog/p1.html",
                expect: &[("x-magento-cache-debug", Some("MISS"))],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/checkout/cart",
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/checkout/cart",
                origin_requests: Some(3),
                ..GET
            },
            Step {
                method: "PURGE",
                target: "/",
                headers: &[("x-magento-tags-pattern", ".*")],
                status: 200,
                origin_requests: Some(3),
                ..GET
            },
            Step {
                method: "POST",
                target: "/customer/account/loginPost",
                origin_requests: Some(4),
                ..GET
            },
        ],
    },
    Case {
        file: "fos-httpcache.vcl",
        steps: &[
            Step {
                target: "/articles/1",
                expect: &[("x-url", None), ("x-host", None)],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/articles/1",
                origin_requests: Some(1),
                ..GET
            },
            // REFRESH: a forced miss from an invalidator.
            Step {
                target: "/articles/1",
                headers: &[("cache-control", "no-cache")],
                origin_requests: Some(2),
                ..GET
            },
            Step {
                method: "BAN",
                target: "/",
                headers: &[("x-host", "."), ("x-url", "^/articles"), ("x-content-type", ".")],
                status: 200,
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/articles/1",
                origin_requests: Some(3),
                ..GET
            },
        ],
    },
    Case {
        file: "api-platform.vcl",
        steps: &[
            Step {
                target: "/books/1",
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/books/1",
                origin_requests: Some(1),
                ..GET
            },
            Step {
                method: "BAN",
                target: "/",
                status: 400,
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/books/1",
                headers: &[("authorization", "Bearer x")],
                origin_requests: Some(2),
                ..GET
            },
        ],
    },
    Case {
        file: "image-cache.vcl",
        steps: &[
            Step {
                target: "/img/cat.jpg?w=5000",
                status: 400,
                origin_requests: Some(0),
                ..GET
            },
            Step {
                target: "/img/cat.jpg?w=100&utm_source=mail&h=50",
                expect: &[("vary", Some("Accept"))],
                origin_requests: Some(1),
                ..GET
            },
            // Another order, no tracking parameter: the same image.
            Step {
                target: "/img/cat.jpg?h=50&w=100",
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/img/cat.jpg?h=50&w=100",
                headers: &[("accept", "image/webp,*/*")],
                origin_requests: Some(2),
                ..GET
            },
        ],
    },
    Case {
        file: "kubernetes-gateway.vcl",
        steps: &[
            // Answered by the gateway (synth: no vcl_deliver); probes reach the pods, so no
            // request count here.
            Step {
                target: "/healthz",
                status: 200,
                expect: &[("x-service", None)],
                ..GET
            },
            Step {
                target: "/login",
                headers: &[("x-forwarded-proto", "http"), ("host", "shop.example.com")],
                status: 301,
                expect: &[("location", Some("https://shop.example.com/login"))],
                ..GET
            },
            Step {
                target: "/v1/items",
                headers: &[("host", "api.example.com")],
                served_by: Some("api"),
                expect: &[("x-service", Some("api"))],
                ..GET
            },
            Step {
                target: "/",
                headers: &[("host", "www.example.com")],
                served_by: Some("web"),
                expect: &[("x-service", Some("web"))],
                ..GET
            },
        ],
    },
    Case {
        file: "shard-cluster.vcl",
        steps: &[
            // The node named in X-Shard is the one that answers.
            Step {
                target: "/a",
                served_by: Some("shard"),
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/b",
                served_by: Some("shard"),
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/c",
                served_by: Some("shard"),
                origin_requests: Some(3),
                ..GET
            },
            Step {
                target: "/a",
                served_by: Some("shard"),
                origin_requests: Some(3),
                ..GET
            },
        ],
    },
    Case {
        file: "bodyaccess-graphql.vcl",
        steps: &[
            Step {
                method: "POST",
                target: "/graphql",
                body: r#"{"query":"{ a }"}"#,
                origin_requests: Some(1),
                expect: &[("x-body-len", None)],
                ..GET
            },
            Step {
                method: "POST",
                target: "/graphql",
                body: r#"{"query":"{ a }"}"#,
                origin_requests: Some(1),
                ..GET
            },
            Step {
                method: "POST",
                target: "/graphql",
                body: r#"{"query":"{ b }"}"#,
                origin_requests: Some(2),
                ..GET
            },
            Step {
                method: "POST",
                target: "/graphql",
                body: r#"{"query": "mutation { c }"}"#,
                origin_requests: Some(3),
                ..GET
            },
            Step {
                method: "POST",
                target: "/graphql",
                body: r#"{"query": "mutation { c }"}"#,
                origin_requests: Some(4),
                ..GET
            },
        ],
    },
    Case {
        file: "pcre-bot-block.vcl",
        steps: &[
            Step {
                headers: &[("user-agent", "EvilBot/1.0")],
                status: 403,
                origin_requests: Some(0),
                ..GET
            },
            Step {
                target: "/index.html",
                headers: &[("user-agent", "Mozilla/5.0 (compatible; Googlebot/2.1)")],
                expect: &[("x-robots-seen", Some("search"))],
                origin_requests: Some(1),
                ..GET
            },
            // `/index.html` became `/`: the same object.
            Step {
                target: "/",
                headers: &[("user-agent", "curl/8")],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "/xmlrpc.php",
                status: 404,
                origin_requests: Some(1),
                ..GET
            },
            Step {
                target: "//a//b",
                origin_requests: Some(2),
                ..GET
            },
            Step {
                target: "/a/b",
                origin_requests: Some(2),
                ..GET
            },
        ],
    },
    Case {
        file: "redirects-cors.vcl",
        steps: &[
            Step {
                target: "/x?y=1",
                headers: &[("host", "www.example.com")],
                status: 301,
                expect: &[("location", Some("https://example.com/x?y=1"))],
                ..GET
            },
            Step {
                target: "/blog/2019/05/hello",
                headers: &[("host", "example.com")],
                status: 301,
                expect: &[("location", Some("https://example.com/articles/hello"))],
                ..GET
            },
            Step {
                method: "OPTIONS",
                target: "/api",
                headers: &[
                    ("origin", "https://app.example.com"),
                    ("access-control-request-method", "POST"),
                ],
                status: 204,
                expect: &[
                    ("access-control-allow-origin", Some("https://app.example.com")),
                    ("access-control-max-age", Some("86400")),
                ],
                origin_requests: Some(0),
                ..GET
            },
            Step {
                target: "/api",
                headers: &[("origin", "https://evil.test")],
                expect: &[("access-control-allow-origin", None)],
                origin_requests: Some(1),
                ..GET
            },
        ],
    },
    Case {
        file: "device-detection.vcl",
        steps: &[
            Step {
                headers: &[("user-agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0)")],
                expect: &[("x-ua-device", Some("mobile")), ("vary", Some("User-Agent"))],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                headers: &[("user-agent", "Mozilla/5.0 (iPad; CPU OS 17_0)")],
                expect: &[("x-ua-device", Some("tablet"))],
                origin_requests: Some(2),
                ..GET
            },
            Step {
                headers: &[("user-agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 16_0)")],
                origin_requests: Some(2),
                ..GET
            },
        ],
    },
    Case {
        file: "ab-testing-cookie.vcl",
        steps: &[
            Step {
                headers: &[("cookie", "ab_group=a; _ga=1")],
                expect: &[("x-ab", Some("a")), ("set-cookie", None)],
                origin_requests: Some(1),
                ..GET
            },
            Step {
                headers: &[("cookie", "ab_group=b")],
                expect: &[("x-ab", Some("b"))],
                origin_requests: Some(2),
                ..GET
            },
            Step {
                headers: &[("cookie", "_ga=2; ab_group=a")],
                expect: &[("x-ab", Some("a"))],
                origin_requests: Some(2),
                ..GET
            },
        ],
    },
];

/// Origins for one file: "main" on 8080's place, and 8081-8083's (the shard nodes answer
/// with their backend names, the gateway's with their service names).
struct Origins {
    main: Origin,
    named: Vec<(&'static str, Origin)>,
}

impl Origins {
    async fn start(file: &str) -> Origins {
        let names: &[&'static str] = match file {
            "shard-cluster.vcl" => &["node1", "node2", "node3"],
            "kubernetes-gateway.vcl" => &["web", "api"],
            _ => &[],
        };
        let mut named = Vec::new();
        for name in names {
            named.push((
                *name,
                Origin::start(move |_| OriginReply::ok(*name).cache_control("max-age=60")).await,
            ));
        }
        Origins {
            main: Origin::start(|_| {
                OriginReply::ok("main")
                    .cache_control("max-age=60")
                    .header("content-type", "text/html")
            })
            .await,
            named,
        }
    }

    fn requests(&self) -> usize {
        self.main.requests() + self.named.iter().map(|(_, o)| o.requests()).sum::<usize>()
    }

    /// The file with its backends pointed at these origins.
    fn policy(&self, text: &str) -> String {
        let mut text = text.replace("\"8080\"", &format!("\"{}\"", self.main.addr.port()));
        for (i, (_, origin)) in self.named.iter().enumerate() {
            text = text.replace(
                &format!("\"808{}\"", i + 1),
                &format!("\"{}\"", origin.addr.port()),
            );
        }
        text
    }
}

async fn start(policy: &str) -> (Running, SocketAddr) {
    let config = edgecache_runtime::Config {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)).into()],
        policy: Some(support::write_policy("real-world", policy)),
        watch_policy: false,
        ..Default::default()
    };
    let running = edgecache_runtime::start(config).await.expect("edgecache starts");
    let addr = running.listen_addrs()[0];
    (running, addr)
}

#[tokio::test]
async fn real_world_policies_answer_as_varnish_does() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policies/real-world");
    assert!(CASES.len() >= 10);
    for case in CASES {
        let text = std::fs::read_to_string(dir.join(case.file)).expect("corpus file");
        let origins = Origins::start(case.file).await;
        let (_proxy, addr) = start(&origins.policy(&text)).await;
        for (i, step) in case.steps.iter().enumerate() {
            let at = format!("{} step {i} ({} {})", case.file, step.method, step.target);
            let reply = send(step.method, addr, step.target, step.headers, step.body).await;
            assert_eq!(reply.status.as_u16(), step.status, "{at}: {}", reply.text());
            for (name, want) in step.expect {
                assert_eq!(reply.header(name), *want, "{at}: header {name}");
            }
            match step.served_by {
                // The shard node that answered is the one the policy named.
                Some("shard") => assert_eq!(Some(reply.text().as_str()), reply.header("x-shard"), "{at}"),
                Some(name) => assert_eq!(reply.text(), name, "{at}"),
                None => {}
            }
            if let Some(n) = step.origin_requests {
                assert_eq!(origins.requests(), n, "{at}: origin requests");
            }
        }
    }
}
