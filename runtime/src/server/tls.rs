//! TLS termination on `-a ...,tls` listeners (rustls with the ring provider).
//!
//! Owns reading the certificate files (explicit pairs and a `--tls-dir`), choosing a
//! certificate by SNI, the rustls server settings (TLS 1.2 and 1.3 with rustls's default
//! suites, ALPN `h2` then `http/1.1`, session tickets and a session cache), the handshake and
//! its timeout, the 400 for plain HTTP sent to a TLS port, and swapping certificates on reload.
//!
//! The rustls `ServerConfig` is built once; a reload swaps only the certificates behind
//! [`Certificates`] (an `ArcSwap`), so open connections keep theirs, new handshakes see the new
//! ones, and session tickets issued before a reload still resume. A pair that does not load
//! (unreadable, not PEM, a key that does not belong to its certificate, a certificate not valid
//! for its name) refuses the whole reload, naming the file: fatal at start, logged on reload
//! while the old certificates keep serving.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::ring as provider;
use rustls::server::{ClientHello, ParsedCertificate, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{InconsistentKeys, ProtocolVersion, ServerConfig};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config::{CertificateFiles, TlsSettings};
use crate::proxy::ClientTls;
use crate::reload::{fingerprint, Watchable};

/// TLS sessions remembered for resumption by session ID (TLS 1.2 clients without ticket
/// support); tickets need no server memory.
const SESSION_CACHE_ENTRIES: usize = 16 * 1024;

/// How long a plain-HTTP client on a TLS port gets to read its 400 before the socket closes.
const PLAIN_HTTP_LINGER: Duration = Duration::from_secs(1);

/// nginx's answer to the same mistake, so operators recognise it.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
    content-type: text/plain\r\n\
    content-length: 48\r\n\
    connection: close\r\n\
    \r\n\
    The plain HTTP request was sent to HTTPS port.\r\n";

/// Why certificates could not be loaded; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: cannot list the TLS certificate directory: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("{}: no certificate in it (expected PEM `BEGIN CERTIFICATE` blocks)", path.display())]
    NoCertificate { path: PathBuf },
    #[error(
        "{}: no private key in it (expected a PEM `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` \
         or `BEGIN EC PRIVATE KEY` block)",
        path.display()
    )]
    NoKey { path: PathBuf },
    #[error("{}: not valid PEM: {problem}", path.display())]
    Pem { path: PathBuf, problem: String },
    #[error("{}: the private key cannot be used: {problem}", path.display())]
    BadKey { path: PathBuf, problem: String },
    #[error("{}: the private key does not belong to the certificate in {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{}: the certificate is not valid for the name `{name}`: {problem}", path.display())]
    WrongName {
        path: PathBuf,
        name: String,
        problem: String,
    },
    #[error(
        "{}: `{name}` is not a DNS name to serve (from the file name or --tls-cert-pair)",
        path.display()
    )]
    BadName { path: PathBuf, name: String },
    #[error("no TLS certificate to serve: {} holds no `NAME.pem` file", dir.display())]
    Empty { dir: PathBuf },
    #[error("cannot set up TLS: {0}")]
    Setup(rustls::Error),
}

/// The TLS side of the `,tls` listeners, shared by all of them.
pub(crate) struct Terminator {
    acceptor: TlsAcceptor,
    certificates: Arc<Certificates>,
    handshake_timeout: Duration,
}

impl Terminator {
    /// Loads the certificates (any failure is fatal) and builds the rustls settings.
    pub(crate) fn new(settings: &TlsSettings) -> Result<Terminator, TlsError> {
        let certificates = Arc::new(Certificates::load(settings.clone())?);
        let provider = Arc::new(provider::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::Setup)?
            .with_no_client_auth()
            .with_cert_resolver(certificates.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES);
        config.ticketer = provider::Ticketer::new().map_err(TlsError::Setup)?;
        Ok(Terminator {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            certificates,
            handshake_timeout: settings.handshake_timeout,
        })
    }

    /// The certificates, for reloads.
    pub(crate) fn certificates(&self) -> &Arc<Certificates> {
        &self.certificates
    }

    /// Runs the TLS handshake on a new connection. `None` when the connection is over: the
    /// handshake failed or timed out (logged at debug: a client's mistake is no operator's
    /// concern, and it touches no other connection), or the client sent plain HTTP and got a 400.
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Option<(Box<TlsStream<TcpStream>>, ClientTls)> {
        match tokio::time::timeout(self.handshake_timeout, self.handshake(stream)).await {
            Ok(Handshake::Done(stream)) => {
                let tls = client_tls(stream.get_ref().1);
                Some((stream, tls))
            }
            Ok(Handshake::PlainHttp(stream)) => {
                tracing::debug!(%peer, "plain HTTP request on a TLS port: 400");
                answer_plain_http(stream).await;
                None
            }
            Ok(Handshake::Failed(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                None
            }
            Err(_elapsed) => {
                tracing::debug!(%peer, timeout = ?self.handshake_timeout, "TLS handshake timed out");
                None
            }
        }
    }

    async fn handshake(&self, stream: TcpStream) -> Handshake {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(0) => return Handshake::Failed(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(error) => return Handshake::Failed(error),
        }
        // A TLS connection opens with a handshake record (type 22); a letter starts a request
        // line.
        if first[0].is_ascii_alphabetic() {
            return Handshake::PlainHttp(stream);
        }
        match self.acceptor.accept(stream).await {
            Ok(stream) => Handshake::Done(Box::new(stream)),
            Err(error) => Handshake::Failed(error),
        }
    }
}

enum Handshake {
    Done(Box<TlsStream<TcpStream>>),
    PlainHttp(TcpStream),
    Failed(std::io::Error),
}

/// What the request path learns of a finished handshake.
fn client_tls(connection: &rustls::ServerConnection) -> ClientTls {
    let version = match connection.protocol_version() {
        Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
        // Only 1.2 and 1.3 are enabled.
        _ => "unknown",
    };
    let cipher = connection
        .negotiated_cipher_suite()
        .and_then(|suite| suite.suite().as_str())
        // rustls writes the TLS 1.3 suites `TLS13_...`; their IANA names start `TLS_`.
        .map(|name| name.strip_prefix("TLS13_").map_or(name, iana_tls13_name))
        .unwrap_or("unknown");
    let alpn = match connection.alpn_protocol() {
        Some(b"h2") => Some("h2"),
        Some(b"http/1.1") => Some("http/1.1"),
        _ => None,
    };
    ClientTls {
        version,
        cipher,
        sni: connection.server_name().map(Box::from),
        alpn,
    }
}

/// The IANA name of a TLS 1.3 suite from the rest of rustls's `TLS13_` name.
fn iana_tls13_name(rest: &str) -> &'static str {
    match rest {
        "AES_128_GCM_SHA256" => "TLS_AES_128_GCM_SHA256",
        "AES_256_GCM_SHA384" => "TLS_AES_256_GCM_SHA384",
        "CHACHA20_POLY1305_SHA256" => "TLS_CHACHA20_POLY1305_SHA256",
        _ => "unknown",
    }
}

/// Answers a plain-HTTP client on a TLS port as nginx does, then closes. What the client sent
/// is read first (a close with unread data would reset the connection and lose the answer).
async fn answer_plain_http(mut stream: TcpStream) {
    let answer = async {
        let mut sent = [0u8; 8192];
        let _ = stream.read(&mut sent).await?;
        stream.write_all(PLAIN_HTTP_ANSWER).await?;
        stream.shutdown().await?;
        while stream.read(&mut sent).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(PLAIN_HTTP_LINGER, answer).await;
}

/// The certificates the listeners serve, swapped whole on reload.
pub(crate) struct Certificates {
    settings: TlsSettings,
    active: ArcSwap<CertificateSet>,
    /// Fingerprint of the files the last attempt read, and whether it failed.
    attempted: parking_lot::Mutex<([u8; 32], bool)>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").finish_non_exhaustive()
    }
}

impl Certificates {
    fn load(settings: TlsSettings) -> Result<Certificates, TlsError> {
        let files = source_files(&settings)?;
        let before = fingerprint(&files);
        let set = CertificateSet::load(&settings)?;
        Ok(Certificates {
            settings,
            active: ArcSwap::from_pointee(set),
            attempted: parking_lot::Mutex::new((before, false)),
        })
    }

    /// Reads every certificate file again and swaps the new set in if all of it loaded;
    /// otherwise logs why (naming the file) and keeps the old set. Reads files: call on a
    /// blocking thread.
    pub(crate) fn reload(&self, trigger: &str) -> Result<(), TlsError> {
        let before = source_files(&self.settings).map(|files| fingerprint(&files));
        let loaded = CertificateSet::load(&self.settings);
        let mut attempted = self.attempted.lock();
        *attempted = (before.unwrap_or([0; 32]), loaded.is_err());
        match loaded {
            Ok(set) => {
                let pairs = set.pairs;
                self.active.store(Arc::new(set));
                tracing::info!(
                    trigger,
                    pairs,
                    "TLS certificates reloaded: new handshakes use them"
                );
                Ok(())
            }
            Err(error) => {
                tracing::error!(
                    trigger,
                    "TLS certificate reload failed; the previous certificates keep serving: {error}"
                );
                Err(error)
            }
        }
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.active.load().pick(hello.server_name())
    }
}

impl Watchable for Certificates {
    fn what(&self) -> &'static str {
        "TLS certificate"
    }

    fn watched_files(&self) -> Vec<PathBuf> {
        source_files(&self.settings).unwrap_or_default()
    }

    fn watched_dirs(&self) -> Vec<PathBuf> {
        self.settings.dir.iter().cloned().collect()
    }

    fn worth_trying(&self) -> bool {
        let now = source_files(&self.settings).map(|files| fingerprint(&files));
        let (attempted, failed) = *self.attempted.lock();
        failed || now.map_or(true, |now| now != attempted)
    }

    async fn changed(self: Arc<Self>) {
        // The outcome is logged; a failure keeps the old certificates.
        let _ = tokio::task::spawn_blocking(move || self.reload("watch")).await;
    }
}

/// Every certificate file the settings name now: the explicit pairs', then the directory's.
fn source_files(settings: &TlsSettings) -> Result<Vec<PathBuf>, TlsError> {
    let mut files = Vec::new();
    for pair in &settings.certificates {
        files.push(pair.cert.clone());
        files.extend(pair.key.clone());
    }
    if let Some(dir) = &settings.dir {
        files.extend(directory_pairs(dir)?.into_iter().map(|pair| pair.cert));
    }
    Ok(files)
}

/// The `NAME.pem` files of a certificate directory, sorted by name.
fn directory_pairs(dir: &Path) -> Result<Vec<CertificateFiles>, TlsError> {
    let listing = std::fs::read_dir(dir).map_err(|source| TlsError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut pairs = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|source| TlsError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let Some(stem) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".pem"))
        else {
            continue;
        };
        // Editors' and ConfigMaps' own entries (`.x.pem.swp`, `..data`) are not certificates.
        if stem.starts_with('.') {
            continue;
        }
        let names = match stem {
            "default" => Vec::new(),
            wildcard if wildcard.starts_with("_.") => vec![format!("*{}", &wildcard[1..])],
            name => vec![name.to_ascii_lowercase()],
        };
        pairs.push(CertificateFiles {
            cert: path,
            key: None,
            names,
        });
    }
    pairs.sort_by(|a, b| a.cert.cmp(&b.cert));
    Ok(pairs)
}

/// One loaded generation of certificates.
#[derive(Default)]
struct CertificateSet {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.com` pairs, by `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    /// For clients without SNI, or with a name no pair has.
    default: Option<Arc<CertifiedKey>>,
    /// How many pairs were loaded, for the log.
    pairs: usize,
}

impl CertificateSet {
    fn load(settings: &TlsSettings) -> Result<CertificateSet, TlsError> {
        let mut pairs = settings.certificates.clone();
        if let Some(dir) = &settings.dir {
            pairs.extend(directory_pairs(dir)?);
        }
        let mut set = CertificateSet::default();
        for pair in &pairs {
            let certified = Arc::new(load_pair(pair)?);
            set.pairs += 1;
            if pair.names.is_empty() {
                // An explicit default (`--tls-cert`) comes before a directory's `default.pem`.
                set.default.get_or_insert(certified);
                continue;
            }
            for name in &pair.names {
                match name.strip_prefix("*.") {
                    Some(parent) => set.wildcard.entry(parent.to_string()),
                    None => set.exact.entry(name.clone()),
                }
                .or_insert_with(|| certified.clone());
            }
        }
        match (&settings.dir, set.pairs) {
            (Some(dir), 0) => Err(TlsError::Empty { dir: dir.clone() }),
            _ => Ok(set),
        }
    }

    fn pick(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = sni {
            // rustls hands over the name lower-cased, without a trailing dot.
            if let Some(found) = self.exact.get(name) {
                return Some(found.clone());
            }
            if let Some(found) = name
                .split_once('.')
                .and_then(|(_, parent)| self.wildcard.get(parent))
            {
                return Some(found.clone());
            }
        }
        self.default.clone()
    }
}

/// Reads one chain and its key, and checks that they belong together and that the
/// certificate is valid for the names it is to serve.
fn load_pair(pair: &CertificateFiles) -> Result<CertifiedKey, TlsError> {
    let cert_pem = read(&pair.cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(&pair.cert, error))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: pair.cert.clone(),
        });
    }
    let key_path = pair.key.as_ref().unwrap_or(&pair.cert);
    let key_pem = match &pair.key {
        Some(path) => read(path)?,
        None => cert_pem,
    };
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| match error {
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: key_path.clone(),
        },
        other => pem_error(key_path, other),
    })?;
    let signing_key = provider::sign::any_supported_type(&key).map_err(|error| TlsError::BadKey {
        path: key_path.clone(),
        problem: error.to_string(),
    })?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        // ring's keys all know their public half; an unknown one cannot be compared.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
            return Err(TlsError::KeyMismatch {
                cert: pair.cert.clone(),
                key: key_path.clone(),
            })
        }
        Err(other) => {
            return Err(TlsError::Pem {
                path: pair.cert.clone(),
                problem: other.to_string(),
            })
        }
    }
    for name in &pair.names {
        check_name(&certified, &pair.cert, name)?;
    }
    Ok(certified)
}

/// Whether the leaf certificate covers `name` (a `*.parent` name: a host under `parent`).
fn check_name(certified: &CertifiedKey, path: &Path, name: &str) -> Result<(), TlsError> {
    let host = match name.strip_prefix("*.") {
        Some(parent) => format!("wildcard-check.{parent}"),
        None => name.to_string(),
    };
    let server_name = ServerName::try_from(host).map_err(|_| TlsError::BadName {
        path: path.to_path_buf(),
        name: name.to_string(),
    })?;
    let wrong_name = |error: rustls::Error| TlsError::WrongName {
        path: path.to_path_buf(),
        name: name.to_string(),
        problem: error.to_string(),
    };
    let leaf = certified.end_entity_cert().map_err(wrong_name)?;
    let parsed = ParsedCertificate::try_from(leaf).map_err(wrong_name)?;
    rustls::client::verify_server_name(&parsed, &server_name).map_err(wrong_name)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(path: &Path, error: pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        problem: error.to_string(),
    }
}
