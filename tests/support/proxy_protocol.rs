//! PROXY protocol version 2 headers as a load balancer writes them (HAProxy's
//! `send-proxy-v2`), for tests of `,PROXY` listeners.

use std::net::{IpAddr, SocketAddr};

/// A v2 `PROXY` header over TCP for `client` -> `server` (both IPv4 or both IPv6), with `tlvs`.
pub fn v2_header(client: SocketAddr, server: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let mut addresses = Vec::new();
    let family = match (client.ip(), server.ip()) {
        (IpAddr::V4(from), IpAddr::V4(to)) => {
            addresses.extend(from.octets());
            addresses.extend(to.octets());
            0x11
        }
        (IpAddr::V6(from), IpAddr::V6(to)) => {
            addresses.extend(from.octets());
            addresses.extend(to.octets());
            0x21
        }
        _ => panic!("one family for both addresses"),
    };
    addresses.extend(client.port().to_be_bytes());
    addresses.extend(server.port().to_be_bytes());
    addresses.extend(tlvs);
    v2_frame(0x21, family, &addresses)
}

/// The v2 signature, `version_command`, `family`, the length, then `body`.
pub fn v2_frame(version_command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend([version_command, family]);
    header.extend(u16::try_from(body.len()).expect("short").to_be_bytes());
    header.extend(body);
    header
}

/// One TLV: its type, its 16-bit length, its value.
pub fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut bytes = vec![kind];
    bytes.extend(u16::try_from(value.len()).expect("short").to_be_bytes());
    bytes.extend(value);
    bytes
}
