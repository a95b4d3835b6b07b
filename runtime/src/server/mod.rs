//! Listeners and client connections: HTTP/1.1 (keep-alive; HTTP/1.0 clients get keep-alive only
//! when they ask) and HTTP/2 with prior knowledge on the same port, and graceful draining.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::proxy::{self, Shared};

/// Accepts connections on `listeners` until `stop` flips, then waits up to `grace` for the
/// requests in flight to finish.
pub(crate) async fn serve(
    listeners: Vec<TcpListener>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let graceful = Arc::new(GracefulShutdown::new());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A client may shut down its sending side once the request is out (`nc -N`, some load
    // balancers' health checks): it still gets the response.
    builder.http1().keep_alive(true).half_close(true);
    let builder = Arc::new(builder);
    let mut accepting = tokio::task::JoinSet::new();
    for listener in listeners {
        accepting.spawn(accept_loop(
            listener,
            shared.clone(),
            builder.clone(),
            graceful.clone(),
            stop.clone(),
        ));
    }
    let _ = stop.wait_for(|stopped| *stopped).await;
    while accepting.join_next().await.is_some() {}
    let Ok(graceful) = Arc::try_unwrap(graceful) else {
        unreachable!("the accept loops that shared the shutdown handle have ended")
    };
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(
            ?grace,
            "shutdown grace period over; closing the remaining connections"
        );
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(proxy::handle(shared, peer, request).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%peer, error = %error, "client connection ended with an error");
            }
        });
    }
}

/// Binds every address, so a taken port fails at start, not later.
pub(crate) async fn bind(addresses: &[SocketAddr]) -> Result<Vec<TcpListener>, (SocketAddr, std::io::Error)> {
    let mut listeners = Vec::with_capacity(addresses.len());
    for address in addresses {
        listeners.push(
            TcpListener::bind(address)
                .await
                .map_err(|error| (*address, error))?,
        );
    }
    Ok(listeners)
}
