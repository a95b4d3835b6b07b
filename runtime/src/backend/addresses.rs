//! Where one backend's connections go: its `.host` as written when it is an IP address, or
//! what its name resolves to.
//!
//! A name is resolved when the backend is set up (so a name that does not resolve refuses the
//! policy, as in Varnish) and again every `--dns-ttl` by a background task ([`Refresher`]),
//! without a reload: what Varnish users run vmod `dynamic` for. New connections take the
//! addresses in turn (IPv4 before IPv6 as a fallback), so addresses that appear share the load;
//! when the set changes the backend starts a new connection pool, so kept-alive connections to
//! an address that went away are not used again. A failed lookup keeps the last addresses.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::client::legacy::connect::dns::Name;

use crate::dns::{ResolveError, Resolver};

/// How a backend's name is looked up: with what, and how often again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dns {
    pub resolver: Resolver,
    /// `--dns-ttl`: the time between two lookups of a backend's name.
    pub ttl: Duration,
}

impl Default for Dns {
    fn default() -> Dns {
        Dns {
            resolver: Resolver::default(),
            ttl: Duration::from_secs(30),
        }
    }
}

/// The current addresses of one backend; clones share them. Also the resolver hyper-util's
/// connector asks, so pooled connections follow the current set.
#[derive(Clone, Debug)]
pub(super) struct Addresses {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The name as written in `.host`; `None` for an IP address (nothing to look up).
    name: Option<String>,
    port: u16,
    current: ArcSwap<Vec<SocketAddr>>,
    /// Turns the start of the IPv4 addresses, one step per connection.
    next: AtomicUsize,
}

impl Addresses {
    /// The addresses of `host` (an IP address, or a name looked up now with `dns`) at `port`.
    pub fn resolve(host: &str, port: u16, dns: &Dns) -> Result<Addresses, ResolveError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = bare.parse::<IpAddr>().is_err().then(|| host.to_string());
        let found = dns.resolver.lookup(host)?;
        Ok(Addresses {
            shared: Arc::new(Shared {
                name,
                port,
                current: ArcSwap::from_pointee(socket_addrs(&found, port)),
                next: AtomicUsize::new(0),
            }),
        })
    }

    /// The name to look up again; `None` when `.host` is an IP address.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// The addresses now, in the order a lookup gave them.
    pub fn current(&self) -> Vec<SocketAddr> {
        self.shared.current.load().as_ref().clone()
    }

    /// The order the next connection tries the addresses in: the IPv4 ones starting one
    /// further each time, then the IPv6 ones.
    pub fn connect_order(&self) -> Vec<SocketAddr> {
        let current = self.shared.current.load();
        let (mut v4, v6): (Vec<SocketAddr>, Vec<SocketAddr>) = current.iter().partition(|a| a.is_ipv4());
        if !v4.is_empty() {
            let turn = self.shared.next.fetch_add(1, Ordering::Relaxed) % v4.len();
            v4.rotate_left(turn);
        }
        v4.extend(v6);
        v4
    }

    /// Stores what a new lookup found; true when the set changed.
    fn replace(&self, found: &[IpAddr]) -> bool {
        let mut new = socket_addrs(found, self.shared.port);
        let mut old = self.current();
        new.sort();
        old.sort();
        if new == old {
            return false;
        }
        self.shared
            .current
            .store(Arc::new(socket_addrs(found, self.shared.port)));
        true
    }
}

fn socket_addrs(found: &[IpAddr], port: u16) -> Vec<SocketAddr> {
    found.iter().map(|ip| SocketAddr::new(*ip, port)).collect()
}

/// hyper-util's connector resolves the backend's name here: no lookup on the request path,
/// the current set in connection order.
impl tower_service::Service<Name> for Addresses {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _name: Name) -> Self::Future {
        std::future::ready(Ok(self.connect_order().into_iter()))
    }
}

/// The task looking a backend's name up every `ttl`; dropping it stops the task.
#[derive(Debug)]
pub(super) struct Refresher {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Refresher {
    /// Looks `addresses`' name up every `dns.ttl` on `runtime`; `changed` runs after the set
    /// changed (the backend renews its pool there).
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        backend: &str,
        addresses: Addresses,
        dns: Dns,
        changed: impl Fn() + Send + Sync + 'static,
    ) -> Refresher {
        let backend = backend.to_string();
        let task = runtime.spawn(async move {
            let Some(name) = addresses.name().map(str::to_string) else {
                return;
            };
            let mut ticker = tokio::time::interval(dns.ttl.max(Duration::from_millis(1)));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let resolver = dns.resolver.clone();
                let lookup_name = name.clone();
                let found = tokio::task::spawn_blocking(move || resolver.lookup(&lookup_name)).await;
                match found {
                    Ok(Ok(found)) => {
                        if addresses.replace(&found) {
                            tracing::info!(
                                backend = %backend,
                                name = %name,
                                addresses = ?addresses.current(),
                                "backend name resolves to new addresses; new connections use them"
                            );
                            changed();
                        }
                    }
                    Ok(Err(error)) => tracing::warn!(
                        backend = %backend,
                        %error,
                        "backend name lookup failed; keeping its last addresses"
                    ),
                    Err(error) => {
                        tracing::warn!(backend = %backend, %error, "backend name lookup task failed")
                    }
                }
            }
        });
        Refresher { task }
    }
}
