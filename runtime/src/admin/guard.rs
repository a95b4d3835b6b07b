//! Which requests the admin API serves: its defences against a browser being used to drive it.
//!
//! A loopback listener is reachable from every page the operator opens in a browser. Such a
//! page can send a "simple" cross-site request (a `POST` with a `text/plain` or form body) to
//! `127.0.0.1:6082` without the browser asking first, and a page whose name it points at
//! 127.0.0.1 (DNS rebinding) may even read the answers. So, each refusal a 403 saying why:
//!
//! - an `Origin`, when present, must be this listener's own (`http://` + one of the names
//!   below): browsers send it on cross-site `POST`s and reads; shells and `edgecache admin` send
//!   none;
//! - a `Host`, when present, must be one of the listener's names: a loopback IP or
//!   `localhost` with the bound port, or the bound address itself;
//! - a `POST` must carry `Content-Type: application/json`, which a page of another site can only
//!   send after a CORS preflight that this API never grants.
//!
//! A request carrying the bearer token (`--admin-token-file`) is no page of another site (a
//! browser adds no token on its own): its `Host` may be any name of the machine, its `POST`
//! any content type, and its `Origin` may also be that of its `Host`.

use std::net::{IpAddr, SocketAddr};

use http::{header, HeaderMap, Method};

/// Why a request was refused; the text says what to do instead.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error(
        "refused: this request comes from a page of {origin} (its Origin header), not from the \
         admin API's own http://{own}. Browsers send Origin for pages of other sites, which must \
         not drive the admin API; call it from a shell instead (`edgecache admin ...`, or curl, \
         send no Origin)"
    )]
    ForeignOrigin { origin: String, own: String },
    #[error(
        "refused: Host {host} is not an address of this admin API (a page can point its own \
         name at this machine: DNS rebinding). Connect to http://{own} or \
         http://localhost:{port}, or require a token with --admin-token-file and send it"
    )]
    ForeignHost { host: String, own: String, port: u16 },
    #[error(
        "refused: a POST needs Content-Type: application/json (pages of other sites cannot send \
         it without the browser asking first), e.g. curl -H 'Content-Type: application/json' \
         --data '{{\"ban\": \"req.url ~ \\\"^/news/\\\"\"}}' http://{own}/ban; `edgecache admin` sends it, \
         and a request with the bearer token (--admin-token-file) needs none"
    )]
    NotJson { own: String },
}

/// The names the admin listener answers to.
pub(super) struct Guard {
    bound: SocketAddr,
}

impl Guard {
    pub fn new(bound: SocketAddr) -> Guard {
        Guard { bound }
    }

    /// Checks a request against the rules of the module doc. `authenticated`: it carried the
    /// bearer token the listener requires.
    pub fn check(&self, method: &Method, headers: &HeaderMap, authenticated: bool) -> Result<(), Refusal> {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            let authority = strip_prefix_ignore_case(&origin, "http://");
            let same = authority.is_some_and(|authority| {
                self.is_own(authority)
                    || (authenticated && host.is_some_and(|host| host.eq_ignore_ascii_case(authority)))
            });
            if !same {
                return Err(Refusal::ForeignOrigin {
                    origin: origin.into_owned(),
                    own: self.own(),
                });
            }
        }
        if authenticated {
            return Ok(());
        }
        if let Some(host) = headers.get(header::HOST) {
            let host = String::from_utf8_lossy(host.as_bytes());
            if !self.is_own(&host) {
                return Err(Refusal::ForeignHost {
                    host: host.into_owned(),
                    own: self.own(),
                    port: self.bound.port(),
                });
            }
        }
        if method == Method::POST && !is_json(headers) {
            return Err(Refusal::NotJson { own: self.own() });
        }
        Ok(())
    }

    /// Whether `authority` (`host:port`) names this listener.
    fn is_own(&self, authority: &str) -> bool {
        let port = self.bound.port();
        if let Ok(address) = authority.parse::<SocketAddr>() {
            let ip = address.ip().to_canonical();
            return address.port() == port && (ip.is_loopback() || ip == self.bound.ip().to_canonical());
        }
        authority
            .rsplit_once(':')
            .is_some_and(|(name, given)| name.eq_ignore_ascii_case("localhost") && given.parse() == Ok(port))
    }

    /// The address to tell people to use.
    fn own(&self) -> String {
        match self.bound.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => format!("127.0.0.1:{}", self.bound.port()),
            IpAddr::V6(ip) if ip.is_unspecified() => format!("[::1]:{}", self.bound.port()),
            _ => self.bound.to_string(),
        }
    }
}

/// Whether the request says its body is JSON (`application/json`, parameters allowed).
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}
