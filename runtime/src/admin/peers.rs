//! Invalidation fan-out: a purge, soft purge, key purge or ban this node's admin API accepts
//! is applied here and forwarded to the admin API of every peer (`--peers`), so that in a tier
//! where each URL lives on one node (HAProxy's `balance uri`, the shard director) an operator
//! purges once, on any node.
//!
//! - Peers are `host:port` admin addresses; a name is looked up again once `--dns-ttl` has
//!   passed (as backend names are), so one name resolving to every node is enough. This node's
//!   own admin address is skipped. A failed lookup keeps the last addresses.
//! - Each forward carries the admin token (`--admin-token-file`, the same on every node) and
//!   [`FORWARDED`], so the receiving node applies it without forwarding again.
//! - A peer that does not answer, or answers 5xx, is tried again with a doubling pause until
//!   `--peer-retry-time` has passed; the answer to the operator lists every peer with its
//!   status, and a peer that stayed down is named with the error, never left out.
//! - A ban carries the time it was created here (`created`, Unix seconds), so a peer that
//!   applies it late still spares what it stored after that time (`cache::bans`).

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::client;
use crate::config::split_host_port;
use crate::dns::Resolver;

/// Marks a request forwarded by a peer: it is applied, never forwarded again. Its value names
/// the forwarding node's admin address, for the log.
pub(crate) const FORWARDED: &str = "x-edgecache-peer";

/// The first pause before a peer is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What `Config` says about the peers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// `host:port` admin addresses, as given (`Config::peers`).
    pub peers: Vec<String>,
    pub retry_time: Duration,
    pub resolver: Resolver,
    pub dns_ttl: Duration,
}

/// The peers of this node and how to reach them.
pub(crate) struct Peers {
    settings: Settings,
    /// The bearer token sent to peers: this node's own admin token.
    token: Option<String>,
    /// This node's admin listener, skipped when a peer name resolves to it.
    own: SocketAddr,
    /// Per entry of `settings.peers`: when it was looked up and what it gave.
    resolved: Mutex<Vec<Option<Lookup>>>,
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
        })
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

    /// Sends `path_and_query` with `body` to every peer at once; one report per peer.
    async fn forward(&self, path_and_query: &str, body: Bytes) -> Vec<Value> {
        let targets = self.targets().await;
        let own = self.own.to_string();
        let sends = targets.iter().map(|target| async {
            let outcome = match &target.address {
                Ok(address) => self.deliver(*address, path_and_query, body.clone(), &own).await,
                Err(error) => Err((0, format!("does not resolve: {error}"))),
            };
            match outcome {
                Ok(reply) => {
                    let answer = serde_json::from_str::<Value>(&reply.body).unwrap_or(Value::String(reply.body));
                    json!({ "peer": target.peer, "status": reply.status, "answer": answer })
                }
                Err((attempts, error)) => {
                    tracing::warn!(peer = %target.peer, %error, "invalidation not delivered to a peer");
                    json!({ "peer": target.peer, "status": "unreachable", "attempts": attempts, "error": error })
                }
            }
        });
        futures_util::future::join_all(sends).await
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

/// Applies `local` (this node's answer to a purge or ban) to the peers: unless there are none,
/// the request came from a peer, or it was refused as malformed, it is forwarded and the
/// answer gains `"peers"`. A purge that found nothing here (404) is still forwarded: the
/// object lives on another node.
pub(super) async fn share(
    peers: Option<&Peers>,
    forwarded: bool,
    path_and_query: &str,
    local: Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    let Some(peers) = peers.filter(|_| !forwarded) else {
        return local;
    };
    let status = local.status();
    if !(status.is_success() || status == StatusCode::NOT_FOUND) {
        return local;
    }
    let (head, body) = local.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(head, Full::new(bytes));
    };
    // A ban (and a purge of every host, which is one) goes with the time it was created here.
    let created = answer.get("created").cloned().unwrap_or(Value::Null);
    let (target, body) = if path_and_query.starts_with("/ban") {
        let body = json!({ "ban": answer["ban"], "created": created });
        ("/ban".to_string(), Bytes::from(body.to_string()))
    } else if let (Some(url), Some(host)) = (answer["url"].as_str(), answer["host"].as_str()) {
        // A URL purge names its host explicitly: here it may have come from the request's
        // Host header, and the forwarded request's Host is the peer's address.
        let soft = if answer["soft"] == true { "&soft=1" } else { "" };
        let target = format!(
            "/purge?url={}&host={}{soft}",
            client::encode_query_value(url),
            client::encode_query_value(host)
        );
        (target, Bytes::new())
    } else if let Some(created) = created.as_f64() {
        (format!("{path_and_query}&created={created}"), Bytes::new())
    } else {
        (path_and_query.to_string(), Bytes::new())
    };
    answer["peers"] = Value::Array(peers.forward(&target, body).await);
    super::json(status, answer)
}

/// Whether `ip` is an address of this machine.
fn is_local(ip: IpAddr) -> bool {
    UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}
