//! The PROXY protocol header sent at the start of each new origin connection of a backend
//! with `.proxy_header = 1|2;` (HAProxy's PROXY protocol, versions 1 and 2, as Varnish's
//! `VPX_Send_Proxy` writes them): the client's address and the address it connected to, so an
//! origin behind edgecache sees who the client is.

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};

/// The addresses of the client connection a request came on: a request extension the server
/// adds and the proxy copies onto the backend request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionAddresses {
    /// The client's address (what `client.ip` says).
    pub client: SocketAddr,
    /// The local address the client connected to (`server.ip`).
    pub server: SocketAddr,
}

/// The v2 signature (PROXY protocol spec, section 2.2).
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The header of PROXY protocol `version` (1 or 2) for a connection made for `addresses`.
/// Without them (a health probe) it is the form that names no client: `PROXY UNKNOWN` in v1,
/// the `LOCAL` command in v2, which receivers accept for the sender's own checks.
pub(super) fn encode(version: u8, addresses: Option<&ConnectionAddresses>) -> Bytes {
    let pair = addresses.map(|a| same_family(a.client, a.server));
    if version == 1 {
        let line = match pair {
            Some((client, server)) => {
                let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
                format!(
                    "PROXY {family} {} {} {} {}\r\n",
                    client.ip(),
                    server.ip(),
                    client.port(),
                    server.port()
                )
            }
            None => "PROXY UNKNOWN\r\n".to_string(),
        };
        return Bytes::from(line);
    }
    let mut header = BytesMut::with_capacity(16 + 36);
    header.put_slice(V2_SIGNATURE);
    match pair {
        Some((client, server)) => {
            // Version 2, command PROXY; then the family and STREAM transport.
            header.put_u8(0x21);
            match (client, server) {
                (SocketAddr::V4(client), SocketAddr::V4(server)) => {
                    header.put_u8(0x11);
                    header.put_u16(12);
                    header.put_slice(&client.ip().octets());
                    header.put_slice(&server.ip().octets());
                }
                (client, server) => {
                    header.put_u8(0x21);
                    header.put_u16(36);
                    header.put_slice(&v6_octets(client));
                    header.put_slice(&v6_octets(server));
                }
            }
            header.put_u16(client.port());
            header.put_u16(server.port());
        }
        None => {
            // Version 2, command LOCAL, family UNSPEC, no addresses.
            header.put_u8(0x20);
            header.put_u8(0x00);
            header.put_u16(0);
        }
    }
    header.freeze()
}

/// Both addresses in one family: an IPv4 address beside an IPv6 one (a dual-stack listener)
/// is written as its IPv4-mapped IPv6 form.
fn same_family(client: SocketAddr, server: SocketAddr) -> (SocketAddr, SocketAddr) {
    let mapped = |address: SocketAddr| match address {
        SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        v6 => v6,
    };
    if client.is_ipv4() == server.is_ipv4() {
        (client, server)
    } else {
        (mapped(client), mapped(server))
    }
}

fn v6_octets(address: SocketAddr) -> [u8; 16] {
    match address {
        SocketAddr::V6(v6) => v6.ip().octets(),
        SocketAddr::V4(v4) => v4.ip().to_ipv6_mapped().octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(client: &str, server: &str) -> ConnectionAddresses {
        ConnectionAddresses {
            client: client.parse().unwrap(),
            server: server.parse().unwrap(),
        }
    }

    #[test]
    fn v1_names_both_addresses_and_ports() {
        let a = addresses("192.0.2.7:51000", "198.51.100.1:443");
        assert_eq!(
            &encode(1, Some(&a))[..],
            b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443\r\n"
        );
        let a = addresses("[2001:db8::7]:51000", "[2001:db8::1]:80");
        assert_eq!(
            &encode(1, Some(&a))[..],
            b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 80\r\n"
        );
        assert_eq!(&encode(1, None)[..], b"PROXY UNKNOWN\r\n");
    }

    #[test]
    fn v2_is_the_binary_form() {
        let a = addresses("192.0.2.7:51000", "198.51.100.1:443");
        let header = encode(2, Some(&a));
        assert_eq!(&header[..12], V2_SIGNATURE);
        assert_eq!(&header[12..16], &[0x21, 0x11, 0, 12]);
        assert_eq!(&header[16..24], &[192, 0, 2, 7, 198, 51, 100, 1]);
        assert_eq!(
            &header[24..],
            &51000u16
                .to_be_bytes()
                .into_iter()
                .chain(443u16.to_be_bytes())
                .collect::<Vec<_>>()[..]
        );
        let local = encode(2, None);
        assert_eq!(&local[12..], &[0x20, 0x00, 0, 0]);
    }

    #[test]
    fn mixed_families_are_written_as_ipv6() {
        let a = addresses("192.0.2.7:51000", "[::]:80");
        let header = encode(2, Some(&a));
        assert_eq!(&header[12..16], &[0x21, 0x21, 0, 36]);
        assert_eq!(
            &header[16..32],
            &"::ffff:192.0.2.7".parse::<std::net::Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(
            &encode(1, Some(&a))[..],
            b"PROXY TCP6 ::ffff:192.0.2.7 :: 51000 80\r\n"
        );
    }
}
