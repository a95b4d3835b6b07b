//! Host names: what backend `.host` names and ACL entries resolve to.
//!
//! As Varnish, names are resolved when a policy loads, and one that does not resolve refuses
//! the policy. Backends declared by name are looked up again every `--dns-ttl` (see
//! `backend::addresses`). A `--hosts-file` (`/etc/hosts` format) is read first on every lookup,
//! so an operator (or a test) can point a name somewhere without DNS; names it does not list go
//! to the system resolver (`getaddrinfo`, which reads `/etc/hosts` itself).

use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// Why a name has no address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("`{name}` does not resolve: {cause}")]
    NotFound { name: String, cause: String },
    #[error("`{name}`: cannot read the hosts file {}: {source}", path.display())]
    HostsFile {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Looks names up: in the hosts file when one is given, then with the system resolver.
/// Blocking: call it off the request path (at load, or on a blocking thread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolver {
    hosts_file: Option<PathBuf>,
}

impl Resolver {
    /// A resolver reading `hosts_file` (if any) before asking the system.
    pub fn new(hosts_file: Option<PathBuf>) -> Resolver {
        Resolver { hosts_file }
    }

    /// Every address `name` resolves to, IPv4 first, without duplicates. An IP address is
    /// itself.
    pub fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        if let Some(path) = &self.hosts_file {
            let listed = hosts_file_entries(path, name).map_err(|source| ResolveError::HostsFile {
                name: name.to_string(),
                path: path.clone(),
                source,
            })?;
            if !listed.is_empty() {
                return Ok(ordered(listed));
            }
        }
        let found = (name, 0)
            .to_socket_addrs()
            .map_err(|error| ResolveError::NotFound {
                name: name.to_string(),
                cause: error.to_string(),
            })?
            .map(|addr| addr.ip())
            .collect::<Vec<_>>();
        if found.is_empty() {
            return Err(ResolveError::NotFound {
                name: name.to_string(),
                cause: "no address".to_string(),
            });
        }
        Ok(ordered(found))
    }
}

/// IPv4 before IPv6 (Varnish's default, `prefer_ipv6` off), each once, in the order found.
fn ordered(addresses: Vec<IpAddr>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::with_capacity(addresses.len());
    for ip in addresses
        .iter()
        .filter(|ip| ip.is_ipv4())
        .chain(addresses.iter().filter(|ip| ip.is_ipv6()))
    {
        if !out.contains(ip) {
            out.push(*ip);
        }
    }
    out
}

/// The addresses `path` lists for `name` (`ADDRESS NAME [ALIAS...]` lines, `#` comments;
/// names compared without regard to case).
fn hosts_file_entries(path: &Path, name: &str) -> std::io::Result<Vec<IpAddr>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or_default();
            let mut fields = line.split_whitespace();
            let ip = fields.next()?.parse::<IpAddr>().ok()?;
            fields
                .any(|listed| listed.eq_ignore_ascii_case(name))
                .then_some(ip)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_names_come_first_and_ipv4_leads() {
        let dir = std::env::temp_dir().join(format!("edgecache-dns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hosts = dir.join("hosts");
        std::fs::write(
            &hosts,
            "# test\n::1 app.internal\n127.0.0.2 App.Internal other # c\n127.0.0.2 app.internal\n",
        )
        .unwrap();
        let resolver = Resolver::new(Some(hosts));
        let found = resolver.lookup("app.internal").unwrap();
        assert_eq!(
            found,
            vec!["127.0.0.2".parse::<IpAddr>().unwrap(), "::1".parse().unwrap()]
        );
        assert_eq!(
            resolver.lookup("10.1.2.3").unwrap(),
            vec!["10.1.2.3".parse::<IpAddr>().unwrap()]
        );
        let error = resolver.lookup("no-such-name.invalid").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("`no-such-name.invalid` does not resolve"),
            "{error}"
        );
    }
}
