//! TLS to origins (`.ssl = 1;`, `-b https://`): which roots an origin's certificate must chain
//! to (the system's, or `.ssl_ca` / `--backend-ca`), whether its name is checked
//! (`.ssl_verify_peer`, `.ssl_verify_host`), the server name sent (`.ssl_sni`), and the rustls
//! client configuration made of them. ALPN offers `http/1.1` only: origins are spoken to in
//! HTTP/1.1.

use std::fmt;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::TlsConnector;

/// How a backend talks TLS. Part of [`BackendOptions`](super::BackendOptions): a reload that
/// changes any of it (a CA file's certificates included) makes a new backend.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsOptions {
    /// Send the server name (SNI).
    pub sni: bool,
    /// The certificate must chain to one of `roots`.
    pub verify_peer: bool,
    /// The certificate must be valid for the server name.
    pub verify_host: bool,
    pub roots: Roots,
}

impl TlsOptions {
    /// Verify everything against `roots`, send SNI: the defaults of `.ssl = 1;` and of
    /// `-b https://`.
    pub fn verified(roots: Roots) -> TlsOptions {
        TlsOptions {
            sni: true,
            verify_peer: true,
            verify_host: true,
            roots,
        }
    }
}

/// The certificates an origin's certificate may chain to.
#[derive(Clone, Debug, PartialEq)]
pub enum Roots {
    /// The system's trusted roots (`SSL_CERT_FILE` / `SSL_CERT_DIR`, else the platform store,
    /// `/etc/ssl/certs` on Debian).
    System,
    /// The certificates of a PEM file (`.ssl_ca`, `--backend-ca`), read when the policy or the
    /// configuration loads.
    File {
        path: String,
        certificates: Vec<CertificateDer<'static>>,
    },
}

/// A CA file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    #[error("CA file {path}: cannot read it: {source}")]
    Unreadable { path: String, source: std::io::Error },
    #[error("CA file {path}: not PEM certificates: {reason}")]
    Invalid { path: String, reason: String },
    #[error("CA file {path}: no certificate in it (expected PEM `-----BEGIN CERTIFICATE-----` blocks)")]
    Empty { path: String },
}

impl Roots {
    /// Reads the PEM certificates of `path`; each must be a usable trust anchor.
    pub fn from_file(path: &str) -> Result<Roots, CaFileError> {
        let text = std::fs::read(path).map_err(|source| CaFileError::Unreadable {
            path: path.to_string(),
            source,
        })?;
        let invalid = |reason: String| CaFileError::Invalid {
            path: path.to_string(),
            reason,
        };
        let certificates = CertificateDer::pem_slice_iter(&text)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| invalid(error.to_string()))?;
        if certificates.is_empty() {
            return Err(CaFileError::Empty {
                path: path.to_string(),
            });
        }
        let mut store = RootCertStore::empty();
        for certificate in &certificates {
            store
                .add(certificate.clone())
                .map_err(|error| invalid(error.to_string()))?;
        }
        Ok(Roots::File {
            path: path.to_string(),
            certificates,
        })
    }

    fn store(&self) -> Result<Arc<RootCertStore>, String> {
        match self {
            Roots::System => system_roots(),
            Roots::File { certificates, .. } => {
                let mut store = RootCertStore::empty();
                store.add_parsable_certificates(certificates.iter().cloned());
                Ok(Arc::new(store))
            }
        }
    }
}

/// The system's roots, read once per process (the store holds a few hundred certificates).
fn system_roots() -> Result<Arc<RootCertStore>, String> {
    static SYSTEM: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), |error| error.to_string());
                return Err(format!(
                    "no trusted root certificates in the system store ({why}); install \
                     ca-certificates, set SSL_CERT_FILE, or give the CA with `.ssl_ca` / --backend-ca"
                ));
            }
            Ok(Arc::new(store))
        })
        .clone()
}

/// What a backend's connections need for TLS: the shared rustls configuration and the server
/// name to send and verify.
#[derive(Clone)]
pub(super) struct OriginTls {
    pub connector: TlsConnector,
    pub server_name: ServerName<'static>,
}

impl OriginTls {
    /// TLS for `options` to a server called `host` (`.host_header`, else `.host`; a port is
    /// dropped).
    pub fn new(options: &TlsOptions, host: &str) -> Result<OriginTls, String> {
        let name = host_without_port(host);
        let server_name = ServerName::try_from(name.to_string())
            .map_err(|_| format!("`{name}` is not a server name TLS can verify"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?;
        let webpki = || -> Result<Arc<WebPkiServerVerifier>, String> {
            WebPkiServerVerifier::builder_with_provider(options.roots.store()?, provider.clone())
                .build()
                .map_err(|error| error.to_string())
        };
        let mut config = match (options.verify_peer, options.verify_host) {
            (true, true) => builder.with_webpki_verifier(webpki()?).with_no_client_auth(),
            (verify_peer, _) => {
                let verifier = Lenient {
                    chain: verify_peer.then(webpki).transpose()?,
                    algorithms: provider.signature_verification_algorithms,
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(verifier))
                    .with_no_client_auth()
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.enable_sni = options.sni;
        Ok(OriginTls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

/// `example.com:8443` -> `example.com`, `[::1]:443` -> `::1`.
fn host_without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.parse::<u16>().is_ok() => name,
        _ => host,
    }
}

/// The verifier of `.ssl_verify_host = 0` (the chain is checked, the name is not) and of
/// `.ssl_verify_peer = 0` (`chain: None`: any certificate). The handshake signatures are always
/// checked: the origin must hold the key of the certificate it shows.
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for Lenient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lenient")
            .field("verify_peer", &self.chain.is_some())
            .finish()
    }
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why a TLS handshake with an origin failed, as the log and the 503 page say it.
#[derive(Debug, thiserror::Error)]
pub(super) enum HandshakeError {
    #[error("origin certificate for {backend} not trusted: {reason}")]
    Untrusted { backend: String, reason: String },
    #[error("TLS handshake with origin {backend} failed: {reason}")]
    Failed { backend: String, reason: String },
}

impl HandshakeError {
    /// Classifies what tokio-rustls returned (an I/O error carrying rustls's).
    pub fn new(backend: &str, error: std::io::Error) -> HandshakeError {
        let backend = backend.to_string();
        match error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(rustls::Error::InvalidCertificate(reason)) => HandshakeError::Untrusted {
                backend,
                reason: describe(reason),
            },
            Some(tls) => HandshakeError::Failed {
                backend,
                reason: tls.to_string(),
            },
            None => HandshakeError::Failed {
                backend,
                reason: error.to_string(),
            },
        }
    }
}

/// A certificate problem in words an operator acts on.
fn describe(error: &CertificateError) -> String {
    match error {
        CertificateError::UnknownIssuer => {
            "it is not signed by a trusted CA (UnknownIssuer); give the origin's CA with `.ssl_ca`".into()
        }
        CertificateError::BadSignature => {
            "its signature does not verify against the trusted CA of its issuer's name (BadSignature)".into()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "it is not valid for the server name ({error:?}); set `.host_header` to a name it carries"
            )
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_not_part_of_the_server_name() {
        assert_eq!(host_without_port("origin.test:8443"), "origin.test");
        assert_eq!(host_without_port("origin.test"), "origin.test");
        assert_eq!(host_without_port("[::1]:443"), "::1");
        assert_eq!(host_without_port("::1"), "::1");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let path = path.to_str().unwrap();
        let error = Roots::from_file(path).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("CA file {path}: no certificate")),
            "{error}"
        );
        let missing = Roots::from_file("/nonexistent/ca.pem").unwrap_err().to_string();
        assert!(
            missing.starts_with("CA file /nonexistent/ca.pem: cannot read it"),
            "{missing}"
        );
    }
}
