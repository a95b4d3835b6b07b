//! Health probes (`.probe`): a background task per probed backend that polls the origin and
//! feeds the results to its [`Health`].
//!
//! Every `.interval`, starting at once, the task opens a fresh connection (over TLS, and with a
//! PROXY header in its local form, as the backend's own connections), writes the probe request
//! and reads the status line, all within `.timeout`. The result is good when the status
//! is `.expected_response`. The request is Varnish's: the `.request` lines each followed by CRLF
//! plus a final CRLF, else `GET {.url} HTTP/1.1`, `Host`, `Connection: close`. Transitions are
//! logged (warn on going sick, info on going healthy). The task lives as long as the backend:
//! the backend holds the [`Prober`], which aborts it when dropped.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use policy_lang::ProbeDecl;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::connector::OriginConnector;
use super::health::{Health, Transition};
use crate::telemetry::BackendStats;

/// Longest status line read; a longer first line is an invalid response.
const MAX_STATUS_LINE: usize = 1024;

/// The running probe task of one backend; dropping it stops the task.
#[derive(Debug)]
pub(super) struct Prober {
    task: JoinHandle<()>,
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where and how to probe.
pub(super) struct Target {
    pub backend: String,
    /// `host:port` as written (for the log); the connection goes to the backend's current
    /// addresses.
    pub address: String,
    /// `Host` header of the default request (the host part of the address, as Varnish uses
    /// `.host` when there is no `.host_header`).
    pub host: String,
    pub probe: ProbeDecl,
    /// Opens the connection as the backend's requests do.
    pub connector: OriginConnector,
}

/// Starts probing `target` on `runtime`; results go to `health` and the probe counters.
pub(super) fn spawn(
    runtime: &Handle,
    target: Target,
    health: Arc<Health>,
    stats: Arc<BackendStats>,
) -> Prober {
    Prober {
        task: runtime.spawn(run(target, health, stats)),
    }
}

async fn run(target: Target, health: Arc<Health>, stats: Arc<BackendStats>) {
    use std::sync::atomic::Ordering::Relaxed;
    let request = request(&target.probe, &target.host);
    let mut ticker = tokio::time::interval(target.probe.interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let probe = &target.probe;
        let result = match tokio::time::timeout(
            probe.timeout,
            poke(&target.connector, &request, probe.expected_response),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err("timeout".to_string()),
        };
        let counter = if result.is_ok() {
            &stats.probes_good
        } else {
            &stats.probes_bad
        };
        counter.fetch_add(1, Relaxed);
        if let Err(reason) = &result {
            tracing::debug!(backend = %target.backend, address = %target.address, reason, "probe failed");
        }
        let reason = result.as_ref().err().cloned();
        match health.record(result, SystemTime::now()) {
            None => {}
            Some(Transition::WentSick) => {
                let report = health.report();
                tracing::warn!(
                    backend = %target.backend,
                    address = %target.address,
                    url = %probe_target(probe),
                    reason = reason.as_deref().unwrap_or("-"),
                    good = report.good,
                    threshold = report.threshold,
                    window = report.window,
                    "backend went sick"
                );
            }
            Some(Transition::WentHealthy) => {
                let report = health.report();
                tracing::info!(
                    backend = %target.backend,
                    address = %target.address,
                    last_failure = report.last_failure.as_deref().unwrap_or("-"),
                    good = report.good,
                    threshold = report.threshold,
                    window = report.window,
                    "backend is healthy"
                );
            }
        }
    }
}

/// What the probe asks for, as a log line names it: its `.url`, or the first line of its
/// `.request`.
fn probe_target(probe: &ProbeDecl) -> &str {
    match &probe.request {
        Some(lines) => lines.first().map_or("", String::as_str),
        None => &probe.url,
    }
}

/// The bytes of one probe request.
pub(super) fn request(probe: &ProbeDecl, host: &str) -> Vec<u8> {
    match &probe.request {
        Some(lines) => {
            let mut text: String = lines.iter().map(|line| format!("{line}\r\n")).collect();
            text.push_str("\r\n");
            text.into_bytes()
        }
        None => format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
            probe.url
        )
        .into_bytes(),
    }
}

/// One probe exchange: `Ok` when the status is `expected`, else why not.
async fn poke(connector: &OriginConnector, request: &[u8], expected: u16) -> Result<(), String> {
    let tcp = connector.connect_tcp().await.map_err(describe)?;
    let mut stream = connector
        .open(tcp)
        .await
        .map_err(|error| match error.downcast::<std::io::Error>() {
            Ok(io) => describe(*io),
            Err(other) => other.to_string(),
        })?;
    stream.write_all(request).await.map_err(describe)?;
    let mut line = Vec::with_capacity(128);
    let mut chunk = [0u8; 256];
    while !line.contains(&b'\n') {
        if line.len() > MAX_STATUS_LINE {
            return Err("invalid response: status line too long".into());
        }
        let read = stream.read(&mut chunk).await.map_err(describe)?;
        if read == 0 {
            return Err(if line.is_empty() {
                "connection closed without a response".into()
            } else {
                "invalid response: connection closed in the status line".into()
            });
        }
        line.extend_from_slice(&chunk[..read]);
    }
    match status(&line) {
        Some(status) if status == expected => Ok(()),
        Some(status) => Err(format!("status {status}")),
        None => Err("invalid response: no HTTP status line".into()),
    }
}

/// The status code of a response starting `HTTP/x.y NNN`.
pub(super) fn status(response: &[u8]) -> Option<u16> {
    let end = response.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&response[..end]).ok()?.trim_end_matches('\r');
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    let code = parts.next()?;
    if !version.starts_with("HTTP/") || code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

fn describe(error: std::io::Error) -> String {
    match error.kind() {
        ErrorKind::ConnectionRefused => "connection refused".into(),
        ErrorKind::ConnectionReset => "connection reset".into(),
        ErrorKind::TimedOut => "timeout".into(),
        _ => error.to_string(),
    }
}
