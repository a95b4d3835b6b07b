//! What the policy sees of a request's connection (issue 20): `import proxy;` values from a
//! load balancer's PROXY v2 TLVs, `import tls;` values from TLS edgecache terminated, and
//! `server.ip` / `remote.ip` / `local.ip` as Varnish defines them behind a PROXY header and
//! without one. vcl_recv copies each into a header; the origin reports what it got.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use edgecache_runtime::config::{CertificateFiles, ListenSpec};
use edgecache_runtime::Running;
use rustls::pki_types::ServerName;
use support::proxy_protocol::{tlv, v2_header};
use support::tls::TestCa;
use support::{start_proxy, write_policy, Origin, OriginReply, RawConn, Seen, EXCHANGE_LIMIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const POLICY: &str = r#"vcl 4.1;
import proxy;
import tls;

sub vcl_recv {
    set req.http.X-Proxy-Ssl = proxy.is_ssl();
    set req.http.X-Proxy-Version = "[" + proxy.ssl_version() + "]";
    set req.http.X-Proxy-Cipher = "[" + proxy.ssl_cipher() + "]";
    set req.http.X-Proxy-Alpn = "[" + proxy.alpn() + "]";
    set req.http.X-Proxy-Authority = "[" + proxy.authority() + "]";
    set req.http.X-Proxy-Verify = proxy.ssl_verify_result();
    set req.http.X-Proxy-Cert = proxy.client_has_cert_conn();
    set req.http.X-Tls = tls.is_tls();
    set req.http.X-Tls-Version = "[" + tls.version() + "]";
    set req.http.X-Tls-Authority = "[" + tls.authority() + "]";
    set req.http.X-Tls-Alpn = "[" + tls.alpn() + "]";
    set req.http.X-Client-Ip = client.ip;
    set req.http.X-Server-Ip = server.ip;
    set req.http.X-Remote-Ip = remote.ip;
    set req.http.X-Local-Ip = local.ip;
    return (pass);
}

sub vcl_backend_fetch {
    set bereq.http.X-Be-Addresses = client.ip + " " + server.ip + " " + remote.ip + " " + local.ip;
}
"#;

const GET: &str = "GET /page HTTP/1.1\r\nHost: example.com\r\n\r\n";

/// edgecache on 127.0.0.1 with [`POLICY`], its listener made by `listen`.
async fn start(
    origin: &Origin,
    listen: ListenSpec,
    tweak: impl FnOnce(&mut edgecache_runtime::Config),
) -> (Running, SocketAddr) {
    let policy = write_policy("policy_connection_values", POLICY);
    start_proxy(origin.addr, |config| {
        config.listen = vec![listen];
        config.policy = Some(policy);
        config.client_timeouts.header = Duration::from_secs(1);
        tweak(config);
    })
    .await
}

fn listener(proxy_protocol: bool, tls: bool) -> ListenSpec {
    ListenSpec {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        proxy_protocol,
        tls,
    }
}

fn header<'a>(seen: &'a Seen, name: &str) -> &'a str {
    seen.header(name)
        .unwrap_or_else(|| panic!("the origin got no {name}"))
}

#[tokio::test]
async fn proxy_v2_ssl_tlvs_and_addresses_are_visible_to_the_policy() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start(&origin, listener(true, false), |_| {}).await;
    // As HAProxy's `send-proxy-v2-ssl` writes them: ALPN, authority, then the SSL TLV (client
    // flags: TLS; verify 0; version and cipher sub-TLVs).
    let mut ssl = vec![0x01, 0, 0, 0, 0];
    ssl.extend(tlv(0x21, b"TLSv1.3"));
    ssl.extend(tlv(0x23, b"TLS_AES_256_GCM_SHA384"));
    let mut tlvs = tlv(0x01, b"h2");
    tlvs.extend(tlv(0x02, b"www.example.com"));
    tlvs.extend(tlv(0x20, &ssl));
    let client = SocketAddr::new(Ipv4Addr::new(203, 0, 113, 9).into(), 51000);
    let mut bytes = v2_header(client, "192.0.2.1:443".parse().unwrap(), &tlvs);
    bytes.extend(GET.as_bytes());
    let mut conn = RawConn::connect(addr).await;
    conn.send_bytes(&bytes).await;
    assert_eq!(conn.response(false).await.status, 200);

    let seen = origin.last();
    assert_eq!(header(&seen, "x-proxy-ssl"), "true");
    assert_eq!(header(&seen, "x-proxy-version"), "[TLSv1.3]");
    assert_eq!(header(&seen, "x-proxy-cipher"), "[TLS_AES_256_GCM_SHA384]");
    assert_eq!(header(&seen, "x-proxy-alpn"), "[h2]");
    assert_eq!(header(&seen, "x-proxy-authority"), "[www.example.com]");
    assert_eq!(header(&seen, "x-proxy-verify"), "0");
    assert_eq!(header(&seen, "x-proxy-cert"), "false");
    // The client and the address it connected to come from the header; remote.ip and
    // local.ip are the TCP connection's own ends (the load balancer and edgecache).
    assert_eq!(header(&seen, "x-client-ip"), "203.0.113.9");
    assert_eq!(header(&seen, "x-server-ip"), "192.0.2.1");
    assert_eq!(header(&seen, "x-remote-ip"), "127.0.0.1");
    assert_eq!(header(&seen, "x-local-ip"), "127.0.0.1");
    // The backend side reads the same four.
    assert_eq!(
        header(&seen, "x-be-addresses"),
        "203.0.113.9 192.0.2.1 127.0.0.1 127.0.0.1"
    );
    // edgecache terminated no TLS itself.
    assert_eq!(header(&seen, "x-tls"), "false");
    assert_eq!(header(&seen, "x-tls-version"), "[]");
}

#[tokio::test]
async fn proxy_v1_header_names_addresses_but_no_tls() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start(&origin, listener(true, false), |_| {}).await;
    let mut conn = RawConn::connect(addr).await;
    conn.send("PROXY TCP4 203.0.113.7 192.0.2.5 40000 80\r\n").await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);

    let seen = origin.last();
    assert_eq!(header(&seen, "x-proxy-ssl"), "false");
    assert_eq!(header(&seen, "x-proxy-version"), "[]");
    assert_eq!(header(&seen, "x-proxy-alpn"), "[]");
    // X509_V_OK when the load balancer said nothing, as Varnish.
    assert_eq!(header(&seen, "x-proxy-verify"), "0");
    assert_eq!(header(&seen, "x-server-ip"), "192.0.2.5");
    assert_eq!(header(&seen, "x-remote-ip"), "127.0.0.1");
}

#[tokio::test]
async fn plain_connection_has_no_proxy_or_tls_values_and_its_own_addresses() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let (_proxy, addr) = start(&origin, listener(false, false), |_| {}).await;
    // From 127.0.0.2, so the client's address and the one it connected to differ.
    let mut conn = RawConn::connect_from([127, 0, 0, 2].into(), addr).await;
    conn.send(GET).await;
    assert_eq!(conn.response(false).await.status, 200);

    let seen = origin.last();
    for (name, absent) in [
        ("x-proxy-ssl", "false"),
        ("x-proxy-version", "[]"),
        ("x-proxy-cipher", "[]"),
        ("x-proxy-alpn", "[]"),
        ("x-proxy-authority", "[]"),
        ("x-proxy-verify", "0"),
        ("x-proxy-cert", "false"),
        ("x-tls", "false"),
        ("x-tls-version", "[]"),
        ("x-tls-authority", "[]"),
        ("x-tls-alpn", "[]"),
    ] {
        assert_eq!(header(&seen, name), absent, "{name}");
    }
    assert_eq!(header(&seen, "x-client-ip"), "127.0.0.2");
    assert_eq!(header(&seen, "x-remote-ip"), "127.0.0.2");
    assert_eq!(header(&seen, "x-server-ip"), "127.0.0.1");
    assert_eq!(header(&seen, "x-local-ip"), "127.0.0.1");
    assert_eq!(
        header(&seen, "x-be-addresses"),
        "127.0.0.2 127.0.0.1 127.0.0.2 127.0.0.1"
    );
}

#[tokio::test]
async fn tls_listener_shows_tls_version_sni_and_alpn_to_vcl_recv() {
    let origin = Origin::fixed(OriginReply::ok("page")).await;
    let ca = TestCa::new();
    let leaf = ca.issue(&["a.test"]);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cert = dir.path().join("a.test.pem");
    std::fs::write(&cert, leaf.combined_pem()).unwrap();
    let (_proxy, addr) = start(&origin, listener(false, true), |config| {
        config.tls.certificates = vec![CertificateFiles {
            cert,
            key: None,
            names: Vec::new(),
        }];
    })
    .await;

    let client = ca.client_config(&[b"http/1.1"]);
    let exchange = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("a.test").unwrap();
        let mut tls = TlsConnector::from(Arc::new(client))
            .connect(name, tcp)
            .await
            .unwrap();
        tls.write_all(b"GET /page HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = Vec::new();
        // edgecache closes after `Connection: close`; a close_notify-less end is fine here.
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    };
    let response = tokio::time::timeout(EXCHANGE_LIMIT, exchange)
        .await
        .expect("a response in time");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    let seen = origin.last();
    assert_eq!(header(&seen, "x-tls"), "true");
    assert_eq!(header(&seen, "x-tls-version"), "[TLSv1.3]");
    assert_eq!(header(&seen, "x-tls-authority"), "[a.test]");
    assert_eq!(header(&seen, "x-tls-alpn"), "[http/1.1]");
    // No load balancer in front.
    assert_eq!(header(&seen, "x-proxy-ssl"), "false");
    assert_eq!(header(&seen, "x-proxy-alpn"), "[]");
}
