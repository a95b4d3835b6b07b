//! `--worker-model reuseport`, the nginx and HAProxy worker model: each worker is an OS thread
//! running its own single-threaded tokio runtime, with its own `SO_REUSEPORT` socket on every
//! listener (HTTP, TLS, PROXY protocol alike). The kernel spreads new connections over the
//! workers' sockets by a hash of their addresses; a connection, and every task it spawns, stays
//! on the worker that accepted it, with no work stealing between threads.
//!
//! The workers share what one runtime's threads share: the cache, the active version (policy,
//! backends and their pools), the counters, the TLS certificates, the health state and the
//! connection cap. So a reload, a purge or a certificate swap reaches every worker at once, and
//! shutdown drains all of them: `stop` reaches each worker's listeners, and each waits until
//! the last connection of any worker has closed (the cap is shared), within the grace period.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::{Listener, Options};
use crate::config::ListenSpec;
use crate::proxy::Shared;

/// The stack of every runtime thread: policies are checked and compiled by recursive passes,
/// and a reload compiles on a blocking thread, so what loads at start loads on reload too.
pub(crate) const THREAD_STACK_SIZE: usize = 8 << 20;

/// Task polls between two looks at the sockets (tokio's `event_interval`, 61 by default). The
/// [`crate::turn`]s gather the writes of the tasks one look woke; a look taken while they run
/// cuts that burst short. With 200 (HAProxy runs 35 to 280 tasks a poll loop,
/// `tune.runqueue-depth`) the load tool and the origin woke half as often per HTTP/1.1 request
/// (0.055 to 0.028 times on the pass, 0.035 to 0.016 on the hit) and a hit cost 7% less CPU
/// (`benches/cpu_split.sh`, docs/BENCHMARKS.md "Session 16"). Under a backlog that never drains,
/// a socket that became ready waits for at most that many polls.
pub(crate) const TASK_POLLS_PER_EVENT_LOOK: u32 = 200;

/// As tokio's `TcpListener::bind` (mio's), so both models queue the same.
const LISTEN_BACKLOG: i32 = 128;

/// `--threads`' default.
pub(crate) fn one_per_core() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

/// Every worker's sockets: `by_worker[w][i]` is worker `w`'s socket for `Config::listen[i]`.
pub(crate) struct Sockets {
    by_worker: Vec<Vec<(StdListener, ListenSpec)>>,
}

impl Sockets {
    /// Binds `workers` sockets per listener. Another process's socket on the same address
    /// makes this fail as in the shared model, unless that process set `SO_REUSEPORT` too (a
    /// second edgecache with this model, under the same user): then both share the port.
    pub(crate) fn bind(specs: &[ListenSpec], workers: usize) -> Result<Sockets, (SocketAddr, io::Error)> {
        let mut by_worker: Vec<Vec<_>> = (0..workers).map(|_| Vec::with_capacity(specs.len())).collect();
        for spec in specs {
            let first = reuse_port_listener(spec.addr).map_err(|error| (spec.addr, error))?;
            // Port 0 picks a port once: the other workers join the one the first got.
            let address = first.local_addr().map_err(|error| (spec.addr, error))?;
            let mut workers = by_worker.iter_mut();
            workers.next().expect("at least one worker").push((first, *spec));
            for sockets in workers {
                let socket = reuse_port_listener(address).map_err(|error| (address, error))?;
                sockets.push((socket, *spec));
            }
        }
        Ok(Sockets { by_worker })
    }

    /// The bound addresses, in the order of `Config::listen` (every worker's are the same).
    pub(crate) fn local_addrs(&self) -> Vec<SocketAddr> {
        self.by_worker[0]
            .iter()
            .map(|(socket, _)| socket.local_addr().expect("a bound listener has an address"))
            .collect()
    }

    /// Starts a thread per worker and returns once each is accepting; the task returned ends
    /// when every worker has stopped.
    pub(crate) async fn serve(
        self,
        shared: Arc<Shared>,
        stop: watch::Receiver<bool>,
        options: Options,
    ) -> io::Result<JoinHandle<()>> {
        shared.stats.worker_connections.set_workers(self.by_worker.len());
        let mut accepting = Vec::with_capacity(self.by_worker.len());
        let mut stopped = Vec::with_capacity(self.by_worker.len());
        for (worker, sockets) in self.by_worker.into_iter().enumerate() {
            let (ready, is_ready) = oneshot::channel();
            let (finished, is_finished) = oneshot::channel::<()>();
            let (shared, stop, options) = (shared.clone(), stop.clone(), options.clone());
            std::thread::Builder::new()
                .name(format!("worker-{worker}"))
                .stack_size(THREAD_STACK_SIZE)
                .spawn(move || {
                    // Dropped last, however the thread ends: the runtime and its tasks are gone.
                    let _finished = finished;
                    run_worker(worker, sockets, ready, shared, stop, options);
                })?;
            accepting.push(is_ready);
            stopped.push(is_finished);
        }
        for ready in accepting {
            ready
                .await
                .map_err(|_| io::Error::other("a worker thread ended before it accepted"))??;
        }
        Ok(tokio::spawn(async move {
            for finished in stopped {
                let _ = finished.await;
            }
        }))
    }
}

/// One worker's thread: its runtime, its listeners, [`super::serve`] until `stop`.
fn run_worker(
    worker: usize,
    sockets: Vec<(StdListener, ListenSpec)>,
    ready: oneshot::Sender<io::Result<()>>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    options: Options,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .thread_stack_size(THREAD_STACK_SIZE)
        .event_interval(TASK_POLLS_PER_EVENT_LOOK)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    runtime.block_on(async move {
        // Registered with this worker's reactor, so only this thread polls them.
        let listeners: io::Result<Vec<Listener>> = sockets
            .into_iter()
            .map(|(socket, spec)| Ok((TcpListener::from_std(socket)?, spec)))
            .collect();
        match listeners {
            Ok(listeners) => {
                let _ = ready.send(Ok(()));
                super::serve(listeners, shared, stop, options, worker).await;
            }
            Err(error) => {
                let _ = ready.send(Err(error));
            }
        }
    });
}

fn reuse_port_listener(address: SocketAddr) -> io::Result<StdListener> {
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, Some(Protocol::TCP))?;
    // As tokio's bind: a restarted edgecache binds while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}
