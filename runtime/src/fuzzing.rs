//! The entry point of the request fuzz target in `fuzz/` (cargo feature `fuzzing`, built only by
//! that crate; not part of the API).
//!
//! [`serve_bytes`] sends arbitrary bytes as one client connection to a real edgecache, started
//! once per process on loopback in front of the demo origin, and reads the reply until the proxy
//! closes. Real sockets rather than an in-memory pipe: the bytes go through the same accept loop
//! and connection settings as in production, so whatever limits the server gains apply here
//! unchanged. The cache is shared by all inputs, as a proxy's is by all clients.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Config, Running};

/// How long the proxy may take to close the connection after the client has sent everything
/// and shut down its side. The slowest demo path answers in 1 s; a longer wait is a hang.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// The proxy kept a finished client's connection open.
#[derive(Debug, thiserror::Error)]
#[error("the proxy did not close the connection within {CLOSE_WITHIN:?} of the client's end of input")]
pub struct Stalled;

struct Target {
    runtime: tokio::runtime::Runtime,
    proxy: SocketAddr,
    _running: Running,
}

fn target() -> &'static Target {
    static TARGET: OnceLock<Target> = OnceLock::new();
    TARGET.get_or_init(|| {
        // One thread: tasks run only inside `serve_bytes`, so a panic belongs to its input.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for the fuzz target");
        let running = runtime.block_on(async {
            let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
            let origin = crate::demo::start_origin(loopback)
                .await
                .expect("the demo origin starts");
            crate::start(Config {
                listen: vec![loopback.into()],
                backend: Some(origin.to_string()),
                ..Config::default()
            })
            .await
            .expect("edgecache starts")
        });
        let proxy = running.listen_addrs()[0];
        Target {
            runtime,
            proxy,
            _running: running,
        }
    })
}

/// Sends `input` as a whole client connection (then shuts down the sending side) and reads
/// whatever the proxy answers until it closes, returning the reply's size.
pub fn serve_bytes(input: &[u8]) -> Result<usize, Stalled> {
    let target = target();
    target.runtime.block_on(async {
        let stream = TcpStream::connect(target.proxy)
            .await
            .expect("the proxy accepts on loopback");
        // Reset instead of FIN on close: no TIME_WAIT socket left per input.
        let _ = stream.set_zero_linger();
        let (mut reading, mut writing) = stream.into_split();
        // Written and read at once: the proxy may answer (and stop reading) before the end.
        let send = async {
            // The proxy may close early (a refused request); the reply still counts.
            let _ = writing.write_all(input).await;
            let _ = writing.shutdown().await;
        };
        let receive = async {
            let mut reply = Vec::new();
            // A reset after a refused request is a close too.
            let _ = reading.read_to_end(&mut reply).await;
            reply.len()
        };
        tokio::time::timeout(CLOSE_WITHIN, async { tokio::join!(send, receive).1 })
            .await
            .map_err(|_| Stalled)
    })
}
