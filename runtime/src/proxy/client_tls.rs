//! What a request's connection negotiated in its TLS handshake. The server puts an
//! `Arc<ClientTls>` in each request's extensions on a `,tls` listener; its absence means the
//! request came in plain.

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
