//! `proxy.*` and `tls.*`: what a policy may ask about the client connection.
//!
//! Varnish's `vmod_proxy` (`proxy.*`, the TLS details a load balancer put in its PROXY
//! protocol v2 header) and Varnish Enterprise's `vmod_tls` (`tls.*`, the TLS edgecache
//! terminated itself). Each is a function of no arguments, answered by
//! [`Context::connection`].
//!
//! [`Context::connection`]: crate::Context::connection

use super::{Value, ValueType};

macro_rules! connection_values {
    ($( $(#[$m:meta])* $value:ident = $name:literal : $ty:ident ),* $(,)?) => {
        /// A `proxy.*` or `tls.*` function; its doc gives the VCL name and return type.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ConnectionValue {
            $( $(#[$m])* #[doc = concat!("`", $name, "()` (", stringify!($ty), ")")] $value, )*
        }

        impl ConnectionValue {
            /// Every function, in declaration order.
            pub const ALL: &'static [ConnectionValue] = &[$(ConnectionValue::$value),*];

            /// The VCL spelling without the parentheses, e.g. `"proxy.alpn"`.
            pub fn name(self) -> &'static str {
                match self { $(ConnectionValue::$value => $name,)* }
            }

            /// The type of the value it returns.
            pub fn value_type(self) -> ValueType {
                match self { $(ConnectionValue::$value => ValueType::$ty,)* }
            }
        }
    };
}

connection_values! {
    /// The ALPN protocol the client negotiated with the load balancer (`PP2_TYPE_ALPN`).
    ProxyAlpn = "proxy.alpn": Str,
    /// The host name the client asked the load balancer for (`PP2_TYPE_AUTHORITY`, its SNI).
    ProxyAuthority = "proxy.authority": Str,
    /// The client spoke TLS to the load balancer (`PP2_CLIENT_SSL`).
    ProxyIsSsl = "proxy.is_ssl": Bool,
    /// The client presented a certificate at least once in the TLS session
    /// (`PP2_CLIENT_CERT_SESS`).
    ProxyClientHasCertSess = "proxy.client_has_cert_sess": Bool,
    /// The client presented a certificate on this connection (`PP2_CLIENT_CERT_CONN`).
    ProxyClientHasCertConn = "proxy.client_has_cert_conn": Bool,
    /// The `verify` field of `PP2_TYPE_SSL`: 0 (`X509_V_OK`) when the client's certificate
    /// was verified.
    ProxySslVerifyResult = "proxy.ssl_verify_result": Int,
    /// The TLS version, e.g. `TLSv1.3` (`PP2_SUBTYPE_SSL_VERSION`).
    ProxySslVersion = "proxy.ssl_version": Str,
    /// The cipher suite (`PP2_SUBTYPE_SSL_CIPHER`).
    ProxySslCipher = "proxy.ssl_cipher": Str,
    /// The signature algorithm of the load balancer's certificate (`PP2_SUBTYPE_SSL_SIG_ALG`).
    ProxyCertSign = "proxy.cert_sign": Str,
    /// The key algorithm of the load balancer's certificate (`PP2_SUBTYPE_SSL_KEY_ALG`).
    ProxyCertKey = "proxy.cert_key": Str,
    /// The Common Name of the client's certificate (`PP2_SUBTYPE_SSL_CN`).
    ProxyClientCertCn = "proxy.client_cert_cn": Str,

    /// The request came over TLS that edgecache terminated.
    TlsIsTls = "tls.is_tls": Bool,
    /// `TLSv1.2` or `TLSv1.3`.
    TlsVersion = "tls.version": Str,
    /// The IANA name of the cipher suite.
    TlsCipher = "tls.cipher": Str,
    /// The server name the client sent (SNI).
    TlsAuthority = "tls.authority": Str,
    /// The protocol chosen by ALPN (`h2`, `http/1.1`).
    TlsAlpn = "tls.alpn": Str,
}

impl ConnectionValue {
    /// The vmod that provides it: `proxy` or `tls`.
    pub fn vmod(self) -> &'static str {
        self.name().split_once('.').map_or("", |(vmod, _)| vmod)
    }

    /// What it returns when the connection has nothing to say (no PROXY header, or no TLS):
    /// an empty string, `false` or 0, as Varnish's vmods do.
    pub fn absent(self) -> Value<'static> {
        match self.value_type() {
            ValueType::Bool => Value::Bool(false),
            ValueType::Int => Value::Int(0),
            _ => Value::str(""),
        }
    }
}
