//! What a load balancer's PROXY protocol header told about a request's connection (the
//! `proxy.*` VCL values and `remote.ip` / `local.ip`). The server puts an `Arc<Proxied>` in
//! each request's extensions on a `,PROXY` listener; its absence means the connection's own
//! addresses are the client's and the server's.

use std::net::SocketAddr;

use policy_lang::{ConnectionValue, Value};

/// A connection that came through a load balancer speaking the PROXY protocol.
#[derive(Debug)]
pub(crate) struct Proxied {
    /// The TCP peer: the load balancer (`remote.ip`), not the client the header names.
    pub remote: SocketAddr,
    /// The local address of the TCP connection (`local.ip`), not the one the header names.
    pub local: SocketAddr,
    pub tlvs: ProxyTlvs,
}

/// The version 2 TLVs a policy may want, for `proxy.*` values.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ProxyTlvs {
    /// `PP2_TYPE_ALPN`: the protocol the client negotiated with the load balancer, e.g. `h2`.
    pub alpn: Option<Vec<u8>>,
    /// `PP2_TYPE_AUTHORITY`: the host name the client asked for (TLS SNI).
    pub authority: Option<String>,
    /// `PP2_TYPE_SSL`: present when the load balancer filled it in.
    pub ssl: Option<ProxySsl>,
}

/// The `PP2_TYPE_SSL` TLV: how the client's TLS connection to the load balancer went.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ProxySsl {
    /// `PP2_CLIENT_SSL`: the client spoke TLS.
    pub client_ssl: bool,
    /// `PP2_CLIENT_CERT_CONN`: the client presented a certificate on this connection.
    pub client_cert: bool,
    /// `PP2_CLIENT_CERT_SESS`: the client presented a certificate at least once in the TLS
    /// session this connection belongs to.
    pub client_cert_session: bool,
    /// The `verify` field: 0 (`X509_V_OK`) when the client's certificate (if any) was verified.
    pub verify: u32,
    /// `PP2_SUBTYPE_SSL_VERSION`, e.g. `TLSv1.3`.
    pub version: Option<String>,
    /// `PP2_SUBTYPE_SSL_CIPHER`, e.g. `TLS_AES_256_GCM_SHA384`.
    pub cipher: Option<String>,
    /// `PP2_SUBTYPE_SSL_CN`: the client certificate's Common Name.
    pub client_cn: Option<String>,
    /// `PP2_SUBTYPE_SSL_SIG_ALG` and `PP2_SUBTYPE_SSL_KEY_ALG` of the server certificate.
    pub sig_alg: Option<String>,
    pub key_alg: Option<String>,
}

impl Proxied {
    /// The `proxy.*` value `value` names; `None` when the header did not carry it (or it is a
    /// `tls.*` value), which Varnish answers with an empty string, `false` or 0.
    pub(crate) fn value(&self, value: ConnectionValue) -> Option<Value<'_>> {
        let ssl = self.tlvs.ssl.as_ref();
        match value {
            ConnectionValue::ProxyAlpn => {
                let alpn = self.tlvs.alpn.as_deref()?;
                Some(Value::Str(String::from_utf8_lossy(alpn)))
            }
            ConnectionValue::ProxyAuthority => text(self.tlvs.authority.as_ref()),
            ConnectionValue::ProxyIsSsl => ssl.map(|ssl| Value::Bool(ssl.client_ssl)),
            ConnectionValue::ProxyClientHasCertSess => ssl.map(|ssl| Value::Bool(ssl.client_cert_session)),
            ConnectionValue::ProxyClientHasCertConn => ssl.map(|ssl| Value::Bool(ssl.client_cert)),
            ConnectionValue::ProxySslVerifyResult => ssl.map(|ssl| Value::Int(i64::from(ssl.verify))),
            ConnectionValue::ProxySslVersion => text(ssl?.version.as_ref()),
            ConnectionValue::ProxySslCipher => text(ssl?.cipher.as_ref()),
            ConnectionValue::ProxyCertSign => text(ssl?.sig_alg.as_ref()),
            ConnectionValue::ProxyCertKey => text(ssl?.key_alg.as_ref()),
            ConnectionValue::ProxyClientCertCn => text(ssl?.client_cn.as_ref()),
            _ => None,
        }
    }
}

/// A TLV's text, as VCL reads it.
fn text(field: Option<&String>) -> Option<Value<'_>> {
    field.map(|text| Value::str(text))
}
