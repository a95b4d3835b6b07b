//! The PROXY protocol (HAProxy's, versions 1 and 2) on listeners that ask for it
//! (`-a :6086,PROXY`): the header a load balancer writes before the client's first byte, naming
//! the client it accepted (HAProxy's `send-proxy` / `send-proxy-v2`, AWS NLB, ...).
//!
//! Owns reading exactly the header and not one byte more, so hyper gets the stream at the
//! client's first byte, and decoding it: the addresses, and the TLVs a `proxy.*` VCL value
//! will need (ALPN, authority, the TLS facts of the `SSL` TLV). A listener without `,PROXY`
//! never calls this: a PROXY line there is a malformed request, as in Varnish.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::limits::Occasional;
use crate::proxy::{Proxied, ProxySsl, ProxyTlvs};

/// The 12 bytes every version 2 header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The signature, the version and command, the family, the length.
const V2_FIXED_LEN: usize = 16;
/// A version 1 line, `PROXY` to CRLF, is at most this long (the spec's bound).
const V1_MAX_LEN: usize = 107;
const V1_PREFIX: &[u8] = b"PROXY ";

/// Version 2 TLV types (the spec's `PP2_TYPE_*`).
const PP2_TYPE_ALPN: u8 = 0x01;
const PP2_TYPE_AUTHORITY: u8 = 0x02;
const PP2_TYPE_SSL: u8 = 0x20;
const PP2_SUBTYPE_SSL_VERSION: u8 = 0x21;
const PP2_SUBTYPE_SSL_CN: u8 = 0x22;
const PP2_SUBTYPE_SSL_CIPHER: u8 = 0x23;
const PP2_SUBTYPE_SSL_SIG_ALG: u8 = 0x24;
const PP2_SUBTYPE_SSL_KEY_ALG: u8 = 0x25;
/// `PP2_CLIENT_SSL`: the client connected over TLS.
const PP2_CLIENT_SSL: u8 = 0x01;
/// `PP2_CLIENT_CERT_CONN`: the client sent a certificate on this connection.
const PP2_CLIENT_CERT_CONN: u8 = 0x02;
/// `PP2_CLIENT_CERT_SESS`: the client sent a certificate at least once in the TLS session.
const PP2_CLIENT_CERT_SESS: u8 = 0x04;

/// A `,PROXY` listener's side of its connections: how long the header may take, and the
/// warning about connections closed for want of one.
pub(crate) struct ProxyListener {
    address: SocketAddr,
    /// `--header-timeout`: the PROXY header is part of what comes before the request.
    timeout: Duration,
    refusals: Mutex<Occasional>,
}

impl ProxyListener {
    pub(crate) fn new(address: SocketAddr, timeout: Duration) -> ProxyListener {
        ProxyListener {
            address,
            timeout,
            refusals: Mutex::new(Occasional::default()),
        }
    }

    /// Reads the connection's PROXY header: the client and server addresses it names (`peer`
    /// and `server`, the connection's own, where it names none), and the connection as the
    /// policy sees it behind the load balancer; `None` when the connection is to be closed,
    /// which is logged.
    pub(crate) async fn accept(
        &self,
        stream: &mut TcpStream,
        peer: SocketAddr,
        server: SocketAddr,
    ) -> Option<(SocketAddr, SocketAddr, Proxied)> {
        let read = tokio::time::timeout(self.timeout, read_header(stream));
        let header = match read.await.unwrap_or(Err(ProxyHeaderError::Timeout(self.timeout))) {
            Ok(header) => header,
            Err(error) => {
                self.refused(peer, &error);
                return None;
            }
        };
        let local = server;
        let (client, server) = header.addresses.unwrap_or((peer, server));
        let ProxyTlvs { alpn, authority, ssl } = &header.tlvs;
        tracing::debug!(
            %peer,
            %client,
            %server,
            alpn = alpn.as_deref().map(String::from_utf8_lossy).as_deref(),
            authority = authority.as_deref(),
            tls = ssl.as_ref().map(ProxySsl::summary).as_deref(),
            "PROXY protocol header"
        );
        let proxied = Proxied {
            remote: peer,
            local,
            tlvs: header.tlvs,
        };
        Some((client, server, proxied))
    }

    /// One line per refused connection: a warning, at most once a minute with the count since,
    /// else at debug level. A connection closed before sending anything (a TCP health check)
    /// is only ever debug.
    fn refused(&self, peer: SocketAddr, error: &ProxyHeaderError) {
        let listener = self.address;
        let quiet = matches!(error, ProxyHeaderError::Closed);
        match (!quiet)
            .then(|| self.refusals.lock().due(Instant::now()))
            .flatten()
        {
            Some(again) => tracing::warn!(
                %listener,
                %peer,
                refused_again_since_last_warning = again,
                "closing a connection on a PROXY listener: {error}; whatever connects here must \
                 send a PROXY protocol header (HAProxy: `send-proxy-v2` on the server line)"
            ),
            None => tracing::debug!(%listener, %peer, "closing a connection on a PROXY listener: {error}"),
        }
    }
}

/// Why a connection on a PROXY listener is closed before any HTTP.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyHeaderError {
    #[error("the connection closed before a PROXY protocol header")]
    Closed,
    #[error("no PROXY protocol header: the first bytes are neither `PROXY ` (v1) nor the v2 signature")]
    Missing,
    #[error("no PROXY protocol header within {0:?} (--header-timeout)")]
    Timeout(Duration),
    #[error("malformed PROXY protocol v1 line: {0}")]
    V1(&'static str),
    #[error("malformed PROXY protocol v2 header: {0}")]
    V2(&'static str),
    #[error("reading the PROXY protocol header: {0}")]
    Io(#[from] std::io::Error),
}

/// What a PROXY header says about the connection.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ProxyHeader {
    /// The client the load balancer accepted, and the address it accepted on; `None` when the
    /// header names no internet addresses (v1 `UNKNOWN`, a v2 `LOCAL` health check, `UNSPEC`
    /// or Unix sockets): the connection's own addresses stand.
    pub addresses: Option<(SocketAddr, SocketAddr)>,
    pub tlvs: ProxyTlvs,
}

/// Reads the PROXY header at the start of `stream`, leaving the stream at the first byte after
/// it. The caller bounds the time it may take.
pub(crate) async fn read_header(stream: &mut TcpStream) -> Result<ProxyHeader, ProxyHeaderError> {
    // A peek sees what has arrived without taking it: the whole header in the usual case,
    // where the load balancer writes it in one segment.
    let mut peeked = [0u8; V1_MAX_LEN];
    let seen = stream.peek(&mut peeked).await?;
    if seen == 0 {
        return Err(ProxyHeaderError::Closed);
    }
    let seen = &peeked[..seen];
    if seen.len() <= V2_SIGNATURE.len() && V2_SIGNATURE.starts_with(seen) || seen.starts_with(V2_SIGNATURE) {
        let mut fixed = [0u8; V2_FIXED_LEN];
        read_exact(stream, &mut fixed).await?;
        let length = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
        let mut rest = vec![0u8; length];
        read_exact(stream, &mut rest).await?;
        return parse_v2(&fixed, &rest);
    }
    let prefix = seen.len().min(V1_PREFIX.len());
    if seen[..prefix] != V1_PREFIX[..prefix] {
        return Err(ProxyHeaderError::Missing);
    }
    let line = match seen.windows(2).position(|pair| pair == b"\r\n") {
        Some(end) => {
            let mut line = vec![0u8; end + 2];
            read_exact(stream, &mut line).await?;
            line
        }
        // Not all here yet: a byte at a time, so nothing past the line is taken.
        None => {
            let mut line = Vec::with_capacity(V1_MAX_LEN);
            while !line.ends_with(b"\n") {
                if line.len() == V1_MAX_LEN {
                    return Err(ProxyHeaderError::V1("longer than 107 bytes"));
                }
                let mut byte = [0u8; 1];
                read_exact(stream, &mut byte).await?;
                line.push(byte[0]);
            }
            line
        }
    };
    parse_v1(&line)
}

async fn read_exact(stream: &mut TcpStream, buf: &mut [u8]) -> Result<(), ProxyHeaderError> {
    match stream.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Err(ProxyHeaderError::Closed),
        Err(error) => Err(error.into()),
    }
}

/// Decodes a version 1 line, CRLF included:
/// `PROXY TCP4|TCP6 SOURCE DESTINATION SPORT DPORT` or `PROXY UNKNOWN ...`.
fn parse_v1(line: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
    if line.len() > V1_MAX_LEN {
        return Err(ProxyHeaderError::V1("longer than 107 bytes"));
    }
    let line = line
        .strip_suffix(b"\r\n")
        .ok_or(ProxyHeaderError::V1("does not end in CRLF"))?;
    let line = std::str::from_utf8(line).map_err(|_| ProxyHeaderError::V1("not ASCII"))?;
    let rest = line
        .strip_prefix("PROXY ")
        .ok_or(ProxyHeaderError::V1("does not start with `PROXY `"))?;
    let mut fields = rest.split(' ');
    let family = fields.next().unwrap_or_default();
    if family == "UNKNOWN" {
        // The spec: whatever follows is ignored and the connection's own addresses used.
        return Ok(ProxyHeader::default());
    }
    let v6 = match family {
        "TCP4" => false,
        "TCP6" => true,
        _ => return Err(ProxyHeaderError::V1("the protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    let mut next = || {
        fields
            .next()
            .ok_or(ProxyHeaderError::V1("fewer than four addresses and ports"))
    };
    let (source, destination) = (next()?, next()?);
    let (source_port, destination_port) = (port(next()?)?, port(next()?)?);
    if fields.next().is_some() {
        return Err(ProxyHeaderError::V1("more than four addresses and ports"));
    }
    let ip = |text: &str| -> Result<IpAddr, ProxyHeaderError> {
        let parsed = if v6 {
            text.parse::<Ipv6Addr>().map(IpAddr::V6)
        } else {
            text.parse::<Ipv4Addr>().map(IpAddr::V4)
        };
        parsed.map_err(|_| ProxyHeaderError::V1("an address is not of the protocol's family"))
    };
    Ok(ProxyHeader {
        addresses: Some((
            SocketAddr::new(ip(source)?, source_port),
            SocketAddr::new(ip(destination)?, destination_port),
        )),
        tlvs: ProxyTlvs::default(),
    })
}

/// A decimal port: digits only (`u16::from_str` would take a sign), no leading zero.
fn port(text: &str) -> Result<u16, ProxyHeaderError> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    match text.parse() {
        Ok(port) if digits && !leading_zero => Ok(port),
        _ => Err(ProxyHeaderError::V1("a port is not a number from 0 to 65535")),
    }
}

/// Decodes a version 2 header: the 16 fixed bytes and the `rest` their length announces.
fn parse_v2(fixed: &[u8; V2_FIXED_LEN], rest: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
    if &fixed[..12] != V2_SIGNATURE {
        return Err(ProxyHeaderError::V2("bad signature"));
    }
    if fixed[12] >> 4 != 2 {
        return Err(ProxyHeaderError::V2("the version is not 2"));
    }
    let proxied = match fixed[12] & 0x0f {
        0 => false, // LOCAL: the load balancer's own connection (a health check)
        1 => true,
        _ => return Err(ProxyHeaderError::V2("the command is neither LOCAL nor PROXY")),
    };
    // The address family's block comes first; TLVs fill the rest.
    let address_len = match fixed[13] >> 4 {
        0 => 0,   // AF_UNSPEC
        1 => 12,  // AF_INET: two addresses, two ports
        2 => 36,  // AF_INET6
        3 => 216, // AF_UNIX: two 108-byte paths
        _ => return Err(ProxyHeaderError::V2("unknown address family")),
    };
    if fixed[13] & 0x0f > 2 {
        return Err(ProxyHeaderError::V2("unknown transport protocol"));
    }
    if rest.len() < address_len {
        return Err(ProxyHeaderError::V2(
            "shorter than its address family's addresses",
        ));
    }
    let (block, tlvs) = rest.split_at(address_len);
    let addresses = match (proxied, address_len) {
        (true, 12) => {
            let ip = |at: usize| IpAddr::from(<[u8; 4]>::try_from(&block[at..at + 4]).expect("4 bytes"));
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            Some((SocketAddr::new(ip(0), port(8)), SocketAddr::new(ip(4), port(10))))
        }
        (true, 36) => {
            let ip = |at: usize| IpAddr::from(<[u8; 16]>::try_from(&block[at..at + 16]).expect("16 bytes"));
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            Some((
                SocketAddr::new(ip(0), port(32)),
                SocketAddr::new(ip(16), port(34)),
            ))
        }
        _ => None,
    };
    Ok(ProxyHeader {
        addresses,
        tlvs: parse_tlvs(tlvs)?,
    })
}

/// Walks the TLVs, keeping the ones [`ProxyTlvs`] holds; the others (`NOOP`, `UNIQUE_ID`,
/// `CRC32C`, `NETNS`, vendors') are skipped, as the spec allows.
fn parse_tlvs(mut bytes: &[u8]) -> Result<ProxyTlvs, ProxyHeaderError> {
    let mut tlvs = ProxyTlvs::default();
    while let Some((kind, value, rest)) = next_tlv(bytes)? {
        bytes = rest;
        match kind {
            PP2_TYPE_ALPN => tlvs.alpn = Some(value.to_vec()),
            PP2_TYPE_AUTHORITY => tlvs.authority = Some(text(value)?),
            PP2_TYPE_SSL => tlvs.ssl = Some(parse_ssl(value)?),
            _ => {}
        }
    }
    Ok(tlvs)
}

/// `PP2_TYPE_SSL`: the client flags, the 32-bit verify result, then sub-TLVs.
fn parse_ssl(value: &[u8]) -> Result<ProxySsl, ProxyHeaderError> {
    if value.len() < 5 {
        return Err(ProxyHeaderError::V2(
            "SSL TLV shorter than its client and verify fields",
        ));
    }
    let mut ssl = ProxySsl {
        client_ssl: value[0] & PP2_CLIENT_SSL != 0,
        client_cert: value[0] & PP2_CLIENT_CERT_CONN != 0,
        client_cert_session: value[0] & PP2_CLIENT_CERT_SESS != 0,
        verify: u32::from_be_bytes([value[1], value[2], value[3], value[4]]),
        ..ProxySsl::default()
    };
    let mut bytes = &value[5..];
    while let Some((kind, value, rest)) = next_tlv(bytes)? {
        bytes = rest;
        let slot = match kind {
            PP2_SUBTYPE_SSL_VERSION => &mut ssl.version,
            PP2_SUBTYPE_SSL_CN => &mut ssl.client_cn,
            PP2_SUBTYPE_SSL_CIPHER => &mut ssl.cipher,
            PP2_SUBTYPE_SSL_SIG_ALG => &mut ssl.sig_alg,
            PP2_SUBTYPE_SSL_KEY_ALG => &mut ssl.key_alg,
            _ => continue,
        };
        *slot = Some(text(value)?);
    }
    Ok(ssl)
}

impl ProxySsl {
    /// For the log: what the load balancer says about the client's TLS.
    fn summary(&self) -> String {
        let ProxySsl {
            client_ssl,
            client_cert,
            client_cert_session,
            verify,
            version,
            cipher,
            client_cn,
            sig_alg,
            key_alg,
        } = self;
        let field = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
        format!(
            "ssl={client_ssl} version={} cipher={} client_cert={client_cert} \
             client_cert_session={client_cert_session} verify={verify} \
             cn={} sig_alg={} key_alg={}",
            field(version),
            field(cipher),
            field(client_cn),
            field(sig_alg),
            field(key_alg),
        )
    }
}

type Tlv<'a> = (u8, &'a [u8], &'a [u8]);

/// The first TLV of `bytes` and what follows it; `None` at the end.
fn next_tlv(bytes: &[u8]) -> Result<Option<Tlv<'_>>, ProxyHeaderError> {
    match bytes {
        [] => Ok(None),
        [kind, high, low, rest @ ..] => {
            let length = usize::from(u16::from_be_bytes([*high, *low]));
            if rest.len() < length {
                return Err(ProxyHeaderError::V2("a TLV runs past the header"));
            }
            let (value, rest) = rest.split_at(length);
            Ok(Some((*kind, value, rest)))
        }
        _ => Err(ProxyHeaderError::V2("a TLV is cut short")),
    }
}

fn text(value: &[u8]) -> Result<String, ProxyHeaderError> {
    String::from_utf8(value.to_vec()).map_err(|_| ProxyHeaderError::V2("a text TLV is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(line: &str) -> Result<ProxyHeader, ProxyHeaderError> {
        parse_v1(line.as_bytes())
    }

    fn v2(bytes: &[u8]) -> Result<ProxyHeader, ProxyHeaderError> {
        let fixed: [u8; 16] = bytes[..16].try_into().unwrap();
        parse_v2(&fixed, &bytes[16..])
    }

    fn addresses(header: ProxyHeader) -> (String, String) {
        let (client, server) = header.addresses.expect("addresses");
        (client.to_string(), server.to_string())
    }

    #[test]
    fn v1_lines_from_the_spec() {
        assert_eq!(
            addresses(v1("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n").unwrap()),
            ("192.168.0.1:56324".into(), "192.168.0.11:443".into())
        );
        let tcp6 = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
                    ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(
            addresses(v1(tcp6).unwrap()).0,
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
        );
        assert_eq!(v1("PROXY UNKNOWN\r\n").unwrap(), ProxyHeader::default());
        // The longest line the spec allows: 107 bytes.
        let longest = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
                       ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(longest.len(), V1_MAX_LEN);
        assert_eq!(v1(longest).unwrap(), ProxyHeader::default());
        let too_long = longest.replacen("65535", "655350", 1);
        assert!(matches!(v1(&too_long), Err(ProxyHeaderError::V1(_))));
    }

    #[test]
    fn malformed_v1_lines_are_refused() {
        for line in [
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n",
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324\r\n",
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443 1\r\n",
            "PROXY TCP4 ::1 192.168.0.11 56324 443\r\n",
            "PROXY TCP6 192.168.0.1 ::1 56324 443\r\n",
            "PROXY TCP4 192.168.0.1 192.168.0.11 +5632 443\r\n",
            "PROXY TCP4 192.168.0.1 192.168.0.11 05632 443\r\n",
            "PROXY TCP4 192.168.0.1 192.168.0.11 65536 443\r\n",
            "PROXY TCP4  192.168.0.1 192.168.0.11 56324 443\r\n",
            "PROXY UDP4 192.168.0.1 192.168.0.11 56324 443\r\n",
            "PROXY tcp4 192.168.0.1 192.168.0.11 56324 443\r\n",
        ] {
            assert!(matches!(v1(line), Err(ProxyHeaderError::V1(_))), "{line:?}");
        }
    }

    /// The fixed part of a v2 header: signature, version 2 and `command`, `family`, `len`.
    fn v2_header(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = V2_SIGNATURE.to_vec();
        bytes.extend([0x20 | command, family]);
        bytes.extend(u16::try_from(body.len()).unwrap().to_be_bytes());
        bytes.extend(body);
        bytes
    }

    #[test]
    fn v2_proxy_ipv4_and_ipv6() {
        let ipv4 = [192, 0, 2, 7, 198, 51, 100, 1, 0xdb, 0xf0, 0x01, 0xbb];
        assert_eq!(
            addresses(v2(&v2_header(1, 0x11, &ipv4)).unwrap()),
            ("192.0.2.7:56304".into(), "198.51.100.1:443".into())
        );
        let mut ipv6 = Vec::new();
        ipv6.extend("2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        ipv6.extend("2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        ipv6.extend([0x30, 0x39, 0x00, 0x50]);
        assert_eq!(
            addresses(v2(&v2_header(1, 0x21, &ipv6)).unwrap()),
            ("[2001:db8::7]:12345".into(), "[2001:db8::1]:80".into())
        );
    }

    #[test]
    fn v2_local_unspec_and_unix_keep_the_connection_addresses() {
        assert_eq!(v2(&v2_header(0, 0x00, &[])).unwrap(), ProxyHeader::default());
        // A LOCAL health check may still carry addresses: they are not the client's.
        let ipv4 = [10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2];
        assert_eq!(v2(&v2_header(0, 0x11, &ipv4)).unwrap().addresses, None);
        assert_eq!(v2(&v2_header(1, 0x31, &[0; 216])).unwrap().addresses, None);
    }

    #[test]
    fn v2_tlvs_alpn_authority_and_ssl_are_kept() {
        let mut body = vec![127, 0, 0, 1, 127, 0, 0, 1, 0, 1, 0, 2];
        body.extend([PP2_TYPE_ALPN, 0, 2]);
        body.extend(b"h2");
        body.extend([0x04, 0, 3, 0, 0, 0]); // NOOP, skipped
        body.extend([PP2_TYPE_AUTHORITY, 0, 11]);
        body.extend(b"example.com");
        let mut ssl = vec![PP2_CLIENT_SSL, 0, 0, 0, 0];
        ssl.extend([PP2_SUBTYPE_SSL_VERSION, 0, 7]);
        ssl.extend(b"TLSv1.3");
        ssl.extend([PP2_SUBTYPE_SSL_CIPHER, 0, 22]);
        ssl.extend(b"TLS_AES_256_GCM_SHA384");
        body.extend([PP2_TYPE_SSL, 0, u8::try_from(ssl.len()).unwrap()]);
        body.extend(ssl);
        let tlvs = v2(&v2_header(1, 0x11, &body)).unwrap().tlvs;
        assert_eq!(tlvs.alpn.as_deref(), Some(&b"h2"[..]));
        assert_eq!(tlvs.authority.as_deref(), Some("example.com"));
        let ssl = tlvs.ssl.expect("the SSL TLV");
        assert!(ssl.client_ssl && ssl.verify == 0 && !ssl.client_cert && !ssl.client_cert_session);
        assert_eq!(ssl.version.as_deref(), Some("TLSv1.3"));
        assert_eq!(ssl.cipher.as_deref(), Some("TLS_AES_256_GCM_SHA384"));
    }

    #[test]
    fn malformed_v2_headers_are_refused() {
        let ipv4 = [127, 0, 0, 1, 127, 0, 0, 1, 0, 1, 0, 2];
        let mut version_1 = v2_header(1, 0x11, &ipv4);
        version_1[12] = 0x11;
        let mut cut_tlv = ipv4.to_vec();
        cut_tlv.extend([PP2_TYPE_ALPN, 0, 9, b'h']);
        for (what, bytes) in [
            ("version 1", version_1),
            ("command 2", v2_header(2, 0x11, &ipv4)),
            ("family 4", v2_header(1, 0x41, &ipv4)),
            ("short addresses", v2_header(1, 0x11, &ipv4[..8])),
            ("TLV past the end", v2_header(1, 0x11, &cut_tlv)),
            ("TLV head cut", v2_header(1, 0x11, &[&ipv4[..], &[1, 0]].concat())),
        ] {
            assert!(matches!(v2(&bytes), Err(ProxyHeaderError::V2(_))), "{what}");
        }
    }
}
