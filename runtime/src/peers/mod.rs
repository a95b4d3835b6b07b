//! What a node knows of its peers (`--peers`), and the fan-out of invalidations to them: a
//! purge, soft purge, key purge or ban made on this node, by its admin API or by its policy on
//! the request path, is forwarded to the admin API of every peer, so that in a tier where each
//! URL lives on one node (HAProxy's `balance uri`, the shard director) an operator purges once,
//! on any node. Below both the admin API and the proxy, which each hold the same [`Peers`].
//!
//! - Peers are `host:port` admin addresses; a name is looked up again once `--dns-ttl` has
//!   passed (as backend names are), so one name resolving to every node is enough. This node's
//!   own admin address is skipped. A failed lookup keeps the last addresses.
//! - Each forward carries the admin token (`--admin-token-file`, the same on every node) and
//!   [`FORWARDED`], so the receiving node applies it without forwarding again.
//! - A peer that does not answer, or answers 5xx, is tried again with a doubling pause until
//!   `--peer-retry-time` has passed. The admin API's answer lists every peer with its status;
//!   what the policy invalidates is forwarded in the background ([`Peers::share`]), each peer's
//!   outcome logged. Both are counted per peer ([`Peers::outcomes`], `/metrics`), and a peer
//!   that stayed down is named with the error, never left out.
//! - A ban carries the time it was created here (`created`, Unix seconds), so a peer that
//!   applies it late still spares what it stored after that time (`cache::bans`).

pub mod client;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::config::split_host_port;
use crate::dns::Resolver;

/// Marks a request forwarded by a peer: it is applied, never forwarded again. Its value names
/// the forwarding node's admin address, for the log.
pub const FORWARDED: &str = "x-edgecache-peer";

/// The first pause before a peer is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What `Config` says about the peers.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `host:port` admin addresses, as given (`Config::peers`).
    pub peers: Vec<String>,
    pub retry_time: Duration,
    pub resolver: Resolver,
    pub dns_ttl: Duration,
}

/// The peers of this node and how to reach them.
#[derive(Debug)]
pub struct Peers {
    settings: Settings,
    /// The bearer token sent to peers: this node's own admin token.
    token: Option<String>,
    /// This node's admin listener, skipped when a peer name resolves to it.
    own: SocketAddr,
    /// Per entry of `settings.peers`: when it was looked up and what it gave.
    resolved: Mutex<Vec<Option<Lookup>>>,
    /// Per peer as reports name it: how its forwards ended.
    outcomes: Mutex<BTreeMap<String, Outcomes>>,
}

/// How the forwards to one peer ended, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Answered 2xx, or 404 (a purge that found nothing there).
    pub applied: u64,
    /// Answered another 4xx: the peer would not apply it (a wrong token, a malformed request).
    pub refused: u64,
    /// Never answered below 500 within `--peer-retry-time`, or its name does not resolve.
    pub unreachable: u64,
}

/// An invalidation this node's policy made on the request path, to be made on every peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalidation {
    /// Every variant of one cache key, the bytes `vcl_hash` built (`return (purge)`,
    /// `purge.hard()` / `purge.soft()`, a `PURGE` without a policy): each node runs the same
    /// policy, so the key names the same object everywhere, whatever `vcl_hash` hashes.
    Hash { key: Vec<u8>, soft: bool },
    /// Objects tagged with any of the surrogate keys (`xkey.purge`, `xkey.softpurge`).
    Keys { list: String, soft: bool },
    /// A ban (`ban(...)`) and when it was created here.
    Ban { expr: String, created: SystemTime },
}

impl Invalidation {
    /// The admin API request that makes it on a peer: path and query, and the body.
    fn request(&self) -> (String, Bytes) {
        let soft = |soft: bool| if soft { "&soft=1" } else { "" };
        match self {
            Invalidation::Hash { key, soft: is_soft } => (
                format!("/purge?hash={}{}", encode_key(key), soft(*is_soft)),
                Bytes::new(),
            ),
            Invalidation::Keys { list, soft: is_soft } => (
                format!(
                    "/purge?key={}{}",
                    client::encode_query_value(list),
                    soft(*is_soft)
                ),
                Bytes::new(),
            ),
            Invalidation::Ban { expr, created } => {
                let body = json!({ "ban": expr, "created": unix_seconds(*created) });
                ("/ban".to_string(), Bytes::from(body.to_string()))
            }
        }
    }
}

/// A cache key as `POST /purge?hash=` takes it: URL-safe base64 of its bytes, without padding.
pub fn encode_key(key: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

/// The bytes of a key [`encode_key`] wrote; `None` when `text` is not such base64.
pub fn decode_key(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()
}

/// `time` as Unix seconds, as bans carry their creation time.
pub fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// When a peer entry was looked up, and the addresses it gave.
type Lookup = (Instant, Vec<SocketAddr>);

/// One peer address to forward to, or a name that has none.
struct Target {
    /// As the report names it: the address, with the name it came from when that differs.
    peer: String,
    address: Result<SocketAddr, String>,
}

impl Peers {
    /// `None` when there are no peers.
    pub fn new(settings: Settings, token: Option<String>, own: SocketAddr) -> Option<Peers> {
        if settings.peers.is_empty() {
            return None;
        }
        let resolved = Mutex::new(vec![None; settings.peers.len()]);
        Some(Peers {
            settings,
            token,
            own,
            resolved,
            outcomes: Mutex::new(BTreeMap::new()),
        })
    }

    /// How the forwards to each peer ended so far, by the peer's name in reports.
    pub fn outcomes(&self) -> BTreeMap<String, Outcomes> {
        self.outcomes.lock().clone()
    }

    /// Forwards `what` to every peer in the background: the client whose request made it is
    /// answered without waiting for the peers (a peer that is down would hold it for
    /// `--peer-retry-time`). Each peer's outcome is logged and counted.
    pub fn share(self: &Arc<Self>, what: Invalidation) {
        let peers = self.clone();
        tokio::spawn(async move {
            let (target, body) = what.request();
            for report in peers.forward(&target, body).await {
                if report["status"].is_number() {
                    tracing::info!(peer = %report["peer"], status = %report["status"], target, "invalidation forwarded to a peer");
                }
            }
        });
    }

    /// The addresses to forward to now, looking names up again once `dns_ttl` has passed.
    async fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        for (index, entry) in self.settings.peers.iter().enumerate() {
            let cached = self.resolved.lock()[index].clone();
            let fresh = cached
                .as_ref()
                .filter(|(at, _)| at.elapsed() < self.settings.dns_ttl)
                .map(|(_, addresses)| addresses.clone());
            let addresses = match fresh {
                Some(addresses) => Ok(addresses),
                None => match self.lookup(entry).await {
                    Ok(addresses) => {
                        self.resolved.lock()[index] = Some((Instant::now(), addresses.clone()));
                        Ok(addresses)
                    }
                    // The last addresses stay in use, as for backends.
                    Err(error) => cached.map(|(_, addresses)| addresses).ok_or(error),
                },
            };
            match addresses {
                Ok(addresses) => targets.extend(
                    addresses
                        .into_iter()
                        .filter(|address| !self.is_own(*address))
                        .map(|address| Target {
                            peer: if entry.parse::<SocketAddr>().is_ok() {
                                address.to_string()
                            } else {
                                format!("{address} ({entry})")
                            },
                            address: Ok(address),
                        }),
                ),
                Err(error) => targets.push(Target {
                    peer: entry.clone(),
                    address: Err(error),
                }),
            }
        }
        targets
    }

    async fn lookup(&self, entry: &str) -> Result<Vec<SocketAddr>, String> {
        let (host, port) = split_host_port(entry)?;
        let resolver = self.settings.resolver.clone();
        let host = host.to_string();
        let found = tokio::task::spawn_blocking(move || resolver.lookup(&host))
            .await
            .map_err(|error| format!("lookup task failed: {error}"))?
            .map_err(|error| error.to_string())?;
        Ok(found.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
    }

    /// Whether `address` is this node's admin listener. A listener on `0.0.0.0` is every local
    /// address at its port; an address is local when a socket can be bound to it.
    fn is_own(&self, address: SocketAddr) -> bool {
        if address == self.own {
            return true;
        }
        address.port() == self.own.port()
            && self.own.ip().is_unspecified()
            && (address.ip().is_loopback() || is_local(address.ip()))
    }

    /// Sends `path_and_query` with `body` to every peer at once; one report per peer
    /// (`{"peer", "status", "answer"}`, or `"status": "unreachable"` with the error), counted.
    pub async fn forward(&self, path_and_query: &str, body: Bytes) -> Vec<Value> {
        let targets = self.targets().await;
        let own = self.own.to_string();
        let sends = targets.iter().map(|target| async {
            let outcome = match &target.address {
                Ok(address) => self.deliver(*address, path_and_query, body.clone(), &own).await,
                Err(error) => Err((0, format!("does not resolve: {error}"))),
            };
            match outcome {
                Ok(reply) => {
                    let applied = reply.is_success() || reply.status == 404;
                    if !applied {
                        tracing::warn!(peer = %target.peer, status = reply.status, answer = reply.body.trim(), path_and_query, "a peer refused an invalidation");
                    }
                    self.count(&target.peer, |outcomes| match applied {
                        true => &mut outcomes.applied,
                        false => &mut outcomes.refused,
                    });
                    let answer = serde_json::from_str::<Value>(&reply.body).unwrap_or(Value::String(reply.body));
                    json!({ "peer": target.peer, "status": reply.status, "answer": answer })
                }
                Err((attempts, error)) => {
                    tracing::warn!(peer = %target.peer, %error, path_and_query, "invalidation not delivered to a peer");
                    self.count(&target.peer, |outcomes| &mut outcomes.unreachable);
                    json!({ "peer": target.peer, "status": "unreachable", "attempts": attempts, "error": error })
                }
            }
        });
        futures_util::future::join_all(sends).await
    }

    fn count(&self, peer: &str, which: impl FnOnce(&mut Outcomes) -> &mut u64) {
        let mut outcomes = self.outcomes.lock();
        *which(outcomes.entry(peer.to_string()).or_default()) += 1;
    }

    /// One peer: tried until it answers below 500 or `retry_time` has passed. The error side
    /// counts the attempts and says what the last one met.
    async fn deliver(
        &self,
        address: SocketAddr,
        path_and_query: &str,
        body: Bytes,
        own: &str,
    ) -> Result<client::Reply, (u32, String)> {
        let deadline = tokio::time::Instant::now() + self.settings.retry_time;
        let mut backoff = FIRST_BACKOFF;
        let mut attempts = 0;
        let mark = [(FORWARDED, own)];
        loop {
            attempts += 1;
            let send = client::send(
                address,
                self.token.as_deref(),
                "POST",
                path_and_query,
                &mark,
                body.clone(),
            );
            let error = match tokio::time::timeout_at(deadline, send).await {
                Ok(Ok(reply)) if reply.status < 500 => return Ok(reply),
                Ok(Ok(reply)) => format!("answered {}: {}", reply.status, reply.body.trim()),
                Ok(Err(error)) => error,
                Err(_) => format!(
                    "no answer within --peer-retry-time {:?}",
                    self.settings.retry_time
                ),
            };
            let now = tokio::time::Instant::now();
            if now + backoff >= deadline {
                return Err((attempts, error));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Whether `ip` is an address of this machine.
fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}
