//! Opening origin connections: TCP (hyper-util's `HttpConnector`, with the connect timeout),
//! then the PROXY header when the backend has `.proxy_header`, then the TLS handshake when it
//! has `.ssl` (the PROXY header goes first, in the clear, as HAProxy's `accept-proxy` and
//! nginx's `proxy_protocol` expect it). The pool calls [`OriginConnector`]; probes
//! and pipes call [`OriginConnector::connect_tcp`] and [`OriginConnector::open`]. Every
//! connection goes to the backend's current [`Addresses`], never to a lookup of its own.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::addresses::Addresses;
use super::tls::{HandshakeError, OriginTls};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Opens connections to one backend's origin.
#[derive(Clone)]
pub(super) struct OriginConnector {
    backend: Arc<str>,
    addresses: Addresses,
    tcp: HttpConnector<Addresses>,
    tls: Option<OriginTls>,
    /// The PROXY header every connection starts with.
    proxy_header: Option<Bytes>,
}

impl OriginConnector {
    pub fn new(
        backend: &str,
        addresses: Addresses,
        connect_timeout: Duration,
        tls: Option<OriginTls>,
    ) -> OriginConnector {
        let mut tcp = HttpConnector::new_with_resolver(addresses.clone());
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.enforce_http(true);
        OriginConnector {
            backend: backend.into(),
            addresses,
            tcp,
            tls,
            proxy_header: None,
        }
    }

    /// This connector, starting each connection with `header`.
    pub fn with_proxy_header(&self, header: Bytes) -> OriginConnector {
        OriginConnector {
            proxy_header: Some(header),
            ..self.clone()
        }
    }

    /// A TCP connection to one of the backend's addresses (tried in [`Addresses::connect_order`]).
    pub async fn connect_tcp(&self) -> io::Result<TcpStream> {
        TcpStream::connect(&self.addresses.connect_order()[..]).await
    }

    /// Makes `tcp` a connection to the origin: the PROXY header, then TLS.
    pub async fn open(&self, mut tcp: TcpStream) -> Result<OriginStream, BoxError> {
        if let Some(header) = &self.proxy_header {
            tcp.write_all(header).await?;
        }
        match &self.tls {
            None => Ok(OriginStream::Plain(tcp)),
            Some(tls) => {
                let stream = tls
                    .connector
                    .connect(tls.server_name.clone(), tcp)
                    .await
                    .map_err(|error| HandshakeError::new(&self.backend, error))?;
                Ok(OriginStream::Tls(Box::new(stream)))
            }
        }
    }
}

impl tower_service::Service<Uri> for OriginConnector {
    type Response = TokioIo<OriginStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.tcp.call(uri);
        let this = self.clone();
        Box::pin(async move {
            // TCP failures keep hyper-util's error (its timeout and refusal are classified).
            let tcp = connecting.await?.into_inner();
            this.open(tcp).await.map(TokioIo::new)
        })
    }
}

/// A connection to an origin, in the clear or over TLS.
pub(super) enum OriginStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for OriginStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OriginStream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            OriginStream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for OriginStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            OriginStream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            OriginStream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            OriginStream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            OriginStream::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            OriginStream::Plain(tcp) => tcp.is_write_vectored(),
            OriginStream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OriginStream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            OriginStream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            OriginStream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            OriginStream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
