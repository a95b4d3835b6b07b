//! What a request's connection negotiated in its TLS handshake. The server puts an
//! `Arc<ClientTls>` in each request's extensions on a `,tls` listener; its absence means the
//! request came in plain.

use policy_lang::{ConnectionValue, Value};

/// The TLS parameters of the client connection a request came on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClientTls {
    /// `TLSv1.2` or `TLSv1.3`, as OpenSSL (and so Varnish Enterprise's `tls.version`) names them.
    pub version: &'static str,
    /// The IANA name of the cipher suite, e.g. `TLS_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// The server name the client asked for, lower-cased; `None` without SNI.
    pub sni: Option<Box<str>>,
    /// The protocol chosen by ALPN (`h2`, `http/1.1`); `None` when the client offered none.
    pub alpn: Option<&'static str>,
}

impl ClientTls {
    /// The `tls.*` value `value` names; `None` when the handshake had none (no SNI, no ALPN)
    /// or it is a `proxy.*` value.
    pub(crate) fn value(&self, value: ConnectionValue) -> Option<Value<'_>> {
        match value {
            ConnectionValue::TlsIsTls => Some(Value::Bool(true)),
            ConnectionValue::TlsVersion => Some(Value::str(self.version)),
            ConnectionValue::TlsCipher => Some(Value::str(self.cipher)),
            ConnectionValue::TlsAuthority => self.sni.as_deref().map(Value::str),
            ConnectionValue::TlsAlpn => self.alpn.map(Value::str),
            _ => None,
        }
    }
}
