//! A test CA made with rcgen: leaf certificates for test servers, and the CA's PEM for what
//! must trust them.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A leaf certificate issued by a [`TestCa`], as PEM and as DER.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Leaf {
    /// Chain and key in one PEM file.
    pub fn combined_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.key_pem)
    }

    /// The key as rustls takes it.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key_der.clone()).into()
    }
}

impl TestCa {
    pub fn new() -> TestCa {
        TestCa::named("edgecache test CA")
    }

    /// A CA whose subject's common name is `name` (two CAs of one name are told apart only by
    /// their signatures).
    pub fn named(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    /// A certificate for `names` (DNS names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> Leaf {
        let params =
            CertificateParams::new(names.iter().map(|name| name.to_string()).collect::<Vec<_>>()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    pub fn der(&self) -> &CertificateDer<'static> {
        self.cert.der()
    }

    /// A root store holding only this CA, for clients built with other settings.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der().clone()).unwrap();
        roots
    }

    /// Client settings trusting only this CA, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        let roots = self.roots();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        config
    }
}
