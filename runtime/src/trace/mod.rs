//! varnishlog-style traces: the records of one request (varnishlog's tags: `ReqURL`,
//! `VCL_call`, `VCL_return`, `Hit`, `BackendOpen`, `BerespStatus`, `Timestamp`, ...), built
//! only while someone listens (`GET /log` on the admin API), and handed to the listeners as one
//! group when the request ends, as varnishlog groups by request (`-g request`).
//!
//! Nobody listening costs one relaxed atomic load per request ([`Hub::begin`] returns `None`);
//! the request path then builds no record at all.

pub mod query;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::sync::broadcast;

/// Finished requests waiting for a slow listener; older ones are dropped for it (and it is
/// told how many).
const BACKLOG: usize = 1024;

/// Where the listeners subscribe and finished traces go.
pub(crate) struct Hub {
    listeners: AtomicUsize,
    finished: broadcast::Sender<Arc<Transaction>>,
}

impl Default for Hub {
    fn default() -> Hub {
        Hub {
            listeners: AtomicUsize::new(0),
            finished: broadcast::channel(BACKLOG).0,
        }
    }
}

impl Hub {
    /// A trace for request `xid`, when someone listens.
    pub fn begin(&self, xid: i64) -> Option<Trace> {
        if self.listeners.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let now = Instant::now();
        Some(Trace(Arc::new(Inner {
            xid,
            finished: self.finished.clone(),
            wall_start: SystemTime::now(),
            start: now,
            state: Mutex::new(State {
                records: Vec::new(),
                last: [now, now],
            }),
        })))
    }

    /// Starts listening: every request from now on is traced until the subscription drops.
    pub fn subscribe(self: &Arc<Hub>) -> Subscription {
        let receiver = self.finished.subscribe();
        self.listeners.fetch_add(1, Ordering::Relaxed);
        Subscription {
            hub: self.clone(),
            receiver,
        }
    }
}

/// One listener: finished requests, in the order they ended.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    receiver: broadcast::Receiver<Arc<Transaction>>,
}

impl Subscription {
    /// The next finished request; `Err(n)`: `n` requests were dropped, the listener being slow.
    pub async fn next(&mut self) -> Result<Arc<Transaction>, u64> {
        loop {
            match self.receiver.recv().await {
                Ok(transaction) => return Ok(transaction),
                Err(broadcast::error::RecvError::Lagged(dropped)) => return Err(dropped),
                // The hub keeps a sender for as long as the subscription holds it.
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.listeners.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Which transaction of the request a record belongs to: the client's (`Request`) or the
/// fetches made for it (`BeReq`), as varnishlog shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Backend,
}

/// One line of a trace: a varnishlog tag and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub side: Side,
    pub tag: &'static str,
    pub value: String,
    /// Printed after the value, not part of it for queries: where a `VCL_return` was decided
    /// (`FILE:LINE`, `builtin.vcl:LINE`, or `builtin` when no `return` ran).
    pub note: Option<String>,
}

/// A finished request: its id and records, client side then backend side.
#[derive(Debug)]
pub struct Transaction {
    pub xid: i64,
    pub records: Vec<Record>,
}

impl Transaction {
    /// varnishlog's text for a request group: `*   << Request  >> XID`, its records, then
    /// `**  << BeReq    >> XID` and the fetches' records when there were fetches.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let sides = [
            (Side::Client, "*   << Request  >>", "-  "),
            (Side::Backend, "**  << BeReq    >>", "-- "),
        ];
        for (side, header, prefix) in sides {
            let mut records = self
                .records
                .iter()
                .filter(|record| record.side == side)
                .peekable();
            if records.peek().is_none() {
                continue;
            }
            out.push_str(&format!("{header} {}\n", self.xid));
            for record in records {
                let line = match &record.note {
                    Some(note) => format!("{prefix} {:<14} {} ({note})", record.tag, record.value),
                    None => format!("{prefix} {:<14} {}", record.tag, record.value),
                };
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
        out.push('\n');
        out
    }
}

/// The records of one request being served; cheap to clone (one `Arc`), carried in the
/// request's extensions so the fetches made for it add theirs.
#[derive(Clone)]
pub(crate) struct Trace(Arc<Inner>);

struct Inner {
    xid: i64,
    finished: broadcast::Sender<Arc<Transaction>>,
    wall_start: SystemTime,
    start: Instant,
    state: Mutex<State>,
}

struct State {
    records: Vec<Record>,
    /// The last `Timestamp` of each side (`Side as usize`).
    last: [Instant; 2],
}

impl Trace {
    /// Adds a record.
    pub fn log(&self, side: Side, tag: &'static str, value: impl Into<String>) {
        self.push(Record {
            side,
            tag,
            value: value.into(),
            note: None,
        });
    }

    /// Adds `VCL_return ACTION (WHERE)`.
    pub fn vcl_return(&self, side: Side, action: &str, decided: String) {
        self.push(Record {
            side,
            tag: "VCL_return",
            value: action.to_string(),
            note: Some(decided),
        });
    }

    /// varnishlog's `Timestamp EVENT: ABSOLUTE SINCE_START SINCE_LAST` (seconds), the last
    /// being this side's previous timestamp.
    pub fn timestamp(&self, side: Side, event: &str) {
        let now = Instant::now();
        let mut state = self.0.state.lock();
        let since_start = now.duration_since(self.0.start);
        let since_last = now.duration_since(std::mem::replace(&mut state.last[side as usize], now));
        let absolute = (self.0.wall_start + since_start)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        state.records.push(Record {
            side,
            tag: "Timestamp",
            value: format!(
                "{event}: {:.6} {:.6} {:.6}",
                absolute.as_secs_f64(),
                since_start.as_secs_f64(),
                since_last.as_secs_f64()
            ),
            note: None,
        });
    }

    fn push(&self, record: Record) {
        self.0.state.lock().records.push(record);
    }

    /// The request ended: its records go to the listeners (those that subscribed since it
    /// began too). Fetches still running for it (a background refresh) add nothing more.
    pub fn end(&self) {
        let records = std::mem::take(&mut self.0.state.lock().records);
        let transaction = Transaction {
            xid: self.0.xid,
            records,
        };
        // No receiver left: the last listener went away meanwhile.
        let _ = self.0.finished.send(Arc::new(transaction));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_listening_builds_no_trace() {
        let hub = Arc::new(Hub::default());
        assert!(hub.begin(1).is_none());
        let subscription = hub.subscribe();
        assert!(hub.begin(2).is_some());
        drop(subscription);
        assert!(hub.begin(3).is_none());
    }

    #[tokio::test]
    async fn a_finished_request_reaches_the_listener_grouped_by_side() {
        let hub = Arc::new(Hub::default());
        let mut listening = hub.subscribe();
        let trace = hub.begin(7).expect("listening");
        trace.log(Side::Client, "ReqURL", "/a");
        trace.log(Side::Backend, "BerespStatus", "200");
        trace.vcl_return(Side::Client, "pass", "p.vcl:3".to_string());
        trace.end();
        let text = listening.next().await.expect("not lagging").render();
        assert_eq!(
            text,
            "*   << Request  >> 7\n-   ReqURL         /a\n-   VCL_return     pass (p.vcl:3)\n\
             **  << BeReq    >> 7\n--  BerespStatus   200\n\n"
        );
    }
}
