//! What the end-to-end benches share: a tiny origin and a keep-alive client connection, both on
//! loopback. Included by each bench with `#[path = "support/loopback.rs"] mod loopback;`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// An origin on `127.0.0.1:<ephemeral>` answering every request with `body` and
/// `Cache-Control: cache_control`.
pub async fn origin(body: Bytes, cache_control: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
    let address = listener.local_addr().expect("origin address");
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            let body = body.clone();
            tokio::spawn(async move {
                let service = service_fn(move |_request| {
                    let body = body.clone();
                    async move {
                        let mut response = Response::new(Full::new(body));
                        response
                            .headers_mut()
                            .insert("cache-control", cache_control.parse().expect("valid"));
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

/// One HTTP/1.1 keep-alive connection to `proxy` (Nagle off).
pub async fn connect(proxy: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(proxy).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(connection);
    sender
}
