//! Settings of TLS termination on the `,tls` listeners: which certificate files, and how long
//! a handshake may take. The files are read by `server::tls`, at start and on every reload.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;

/// One certificate chain and its private key, as files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFiles {
    /// PEM: the leaf certificate first, then its intermediates; may also hold the key.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1); `None` when `cert` holds it.
    pub key: Option<PathBuf>,
    /// The SNI names this pair serves; empty for the default pair, which serves clients that
    /// send no SNI or a name no other pair has.
    pub names: Vec<String>,
}

/// TLS termination settings (`--tls-cert`, `--tls-key`, `--tls-cert-pair`, `--tls-dir`,
/// `--tls-handshake-timeout`; TOML `[[tls]]`, `tls_dir`, `tls_handshake_timeout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// Explicit pairs, in the order given. At most one without names (the default).
    pub certificates: Vec<CertificateFiles>,
    /// A directory of `NAME.pem` files, each holding a chain and its key and serving the SNI
    /// name NAME (`_.example.com.pem` serves `*.example.com`); `default.pem` is the default
    /// pair. Read again on every reload, so added and removed files count too.
    pub dir: Option<PathBuf>,
    /// From accepting a connection to the end of its TLS handshake; a slower client is closed.
    /// Default 10 s (HAProxy's `timeout client` bounds it likewise, nginx uses
    /// `client_header_timeout`, 60 s).
    pub handshake_timeout: Duration,
}

impl Default for TlsSettings {
    fn default() -> Self {
        TlsSettings {
            certificates: Vec::new(),
            dir: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

impl TlsSettings {
    /// Whether any certificate was configured.
    pub fn has_certificates(&self) -> bool {
        !self.certificates.is_empty() || self.dir.is_some()
    }

    /// Rules between the TLS settings and the listeners (`tls_listener`: some `-a` has `,tls`).
    pub(crate) fn validate(&self, tls_listener: bool) -> Result<(), ConfigError> {
        if tls_listener && !self.has_certificates() {
            return Err(ConfigError::new(
                "listen (-a)",
                "a `,tls` listener has no certificate",
                "--tls-cert FILE --tls-key FILE, --tls-cert-pair NAME=CERT[,KEY], --tls-dir DIR, \
                 or [[tls]] entries in the TOML file",
            ));
        }
        if !tls_listener && self.has_certificates() {
            return Err(ConfigError::new(
                "tls (--tls-cert, --tls-cert-pair, --tls-dir)",
                "certificates are given but no listener terminates TLS",
                "a listener such as -a :443,tls",
            ));
        }
        if self
            .certificates
            .iter()
            .filter(|pair| pair.names.is_empty())
            .count()
            > 1
        {
            return Err(ConfigError::new(
                "tls (--tls-cert, [[tls]] without names)",
                "more than one default certificate",
                "one default pair; give the others their SNI names",
            ));
        }
        if self.handshake_timeout.is_zero() {
            return Err(ConfigError::new(
                "tls_handshake_timeout (--tls-handshake-timeout)",
                "0 would close every TLS client at once",
                "a duration above 0, e.g. 10s",
            ));
        }
        Ok(())
    }
}

/// One `[[tls]]` entry of the TOML file: `cert`, optional `key`, optional `names` (none: the
/// default certificate).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsFileEntry {
    cert: PathBuf,
    key: Option<PathBuf>,
    #[serde(default)]
    names: Vec<String>,
}

impl TlsFileEntry {
    /// Relative paths are taken relative to the TOML file's directory.
    pub(super) fn into_files(self, base_dir: &Path) -> CertificateFiles {
        CertificateFiles {
            cert: base_dir.join(self.cert),
            key: self.key.map(|key| base_dir.join(key)),
            names: self.names.iter().map(|name| name.to_ascii_lowercase()).collect(),
        }
    }
}

/// Parses `--tls-cert-pair NAME=CERT[,KEY]`.
pub fn parse_certificate_pair(text: &str) -> Result<CertificateFiles, String> {
    let problem = || format!("`{text}` is not NAME=CERT or NAME=CERT,KEY");
    let (name, files) = text.split_once('=').ok_or_else(problem)?;
    let (cert, key) = match files.split_once(',') {
        Some((cert, key)) => (cert, Some(key)),
        None => (files, None),
    };
    if name.is_empty() || cert.is_empty() || key.is_some_and(str::is_empty) {
        return Err(problem());
    }
    Ok(CertificateFiles {
        cert: cert.into(),
        key: key.map(PathBuf::from),
        names: vec![name.to_ascii_lowercase()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_entries_in_the_toml_file_are_relative_to_it() {
        let file: crate::config::FileConfig = toml::from_str(
            "listen = [\":443,tls\"]\ntls_dir = \"certs\"\ntls_handshake_timeout = \"3s\"\n\
             [[tls]]\ncert = \"site.pem\"\nkey = \"/keys/site.key\"\n\
             [[tls]]\ncert = \"shop.pem\"\nnames = [\"Shop.Example\"]\n",
        )
        .unwrap();
        let mut config = crate::Config::default();
        file.apply(&mut config, Path::new("/etc/edgecache")).unwrap();
        let tls = &config.tls;
        assert_eq!(tls.dir.as_deref(), Some(Path::new("/etc/edgecache/certs")));
        assert_eq!(tls.handshake_timeout, Duration::from_secs(3));
        assert_eq!(tls.certificates[0].cert, Path::new("/etc/edgecache/site.pem"));
        assert_eq!(
            tls.certificates[0].key.as_deref(),
            Some(Path::new("/keys/site.key"))
        );
        assert_eq!(tls.certificates[1].names, ["shop.example"]);
        tls.validate(true).unwrap();
        let refused = tls.validate(false).unwrap_err().to_string();
        assert!(refused.contains("no listener terminates TLS"), "{refused}");
        let refused = TlsSettings::default().validate(true).unwrap_err().to_string();
        assert!(refused.contains("--tls-cert FILE"), "{refused}");
    }

    #[test]
    fn certificate_pairs() {
        let pair = parse_certificate_pair("Www.Example.com=site.pem,site.key").unwrap();
        assert_eq!(pair.names, ["www.example.com"]);
        assert_eq!(pair.key.as_deref(), Some(std::path::Path::new("site.key")));
        assert_eq!(parse_certificate_pair("a.example=both.pem").unwrap().key, None);
        for bad in ["site.pem", "=site.pem", "a.example=", "a.example=cert.pem,"] {
            assert!(
                parse_certificate_pair(bad).unwrap_err().contains("NAME=CERT"),
                "{bad}"
            );
        }
    }
}
