//! Why an origin exchange failed, and where.

use std::fmt;

use super::request_body::{ClientBodyBroken, ClientBodyTimeout};
use super::Backend;

/// The stage of an origin exchange that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Connect,
    FirstByte,
}

/// How an origin failed; the proxy maps each to one status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// Nothing listening, unreachable: the origin is down (503).
    Down,
    /// It did not answer in time (504).
    Timeout,
    /// It answered with something that is not valid HTTP or closed mid-response (502).
    Broken,
    /// Not the origin: the client's request body stalled past `--body-timeout` (408).
    ClientBodyTimeout,
    /// Not the origin: the client's request body is malformed (bad chunked framing) or was cut
    /// short (400).
    ClientBodyBroken,
}

/// A failed exchange with a named backend.
#[derive(Debug, thiserror::Error)]
pub struct BackendError {
    pub backend: String,
    pub address: String,
    pub stage: Stage,
    pub kind: FailureKind,
    pub detail: String,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match self.stage {
            Stage::Connect => "connect",
            Stage::FirstByte => "waiting for response",
        };
        write!(
            f,
            "backend {} ({}): {stage}: {}",
            self.backend, self.address, self.detail
        )
    }
}

impl BackendError {
    pub(crate) fn new(
        backend: &Backend,
        stage: Stage,
        kind: FailureKind,
        detail: impl Into<String>,
    ) -> BackendError {
        BackendError {
            backend: backend.name().to_string(),
            address: backend.address().to_string(),
            stage,
            kind,
            detail: detail.into(),
        }
    }

    /// Classifies an error of the pool: opening a connection, or the exchange on one.
    pub(super) fn from_send(backend: &Backend, error: super::pool::SendError) -> BackendError {
        match error {
            super::pool::SendError::Connect(error) => BackendError::classify(backend, &*error, true),
            super::pool::SendError::Exchange(error) => BackendError::classify(backend, &error, false),
        }
    }

    /// Classifies an error of an exchange on a connection already open (a pipe's).
    pub(super) fn from_exchange(backend: &Backend, error: &super::h1::Error) -> BackendError {
        BackendError::classify(backend, error, false)
    }

    fn classify(
        backend: &Backend,
        error: &(dyn std::error::Error + 'static),
        connecting: bool,
    ) -> BackendError {
        let timed_out = source_chain(error).any(|cause| {
            cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        });
        let detail = source_chain(error)
            .last()
            .map(|cause| cause.to_string())
            .unwrap_or_else(|| error.to_string());
        if source_chain(error).any(|cause| cause.is::<ClientBodyTimeout>()) {
            BackendError::new(backend, Stage::FirstByte, FailureKind::ClientBodyTimeout, detail)
        } else if source_chain(error).any(|cause| cause.is::<ClientBodyBroken>()) {
            BackendError::new(backend, Stage::FirstByte, FailureKind::ClientBodyBroken, detail)
        } else if connecting {
            let kind = if timed_out {
                FailureKind::Timeout
            } else {
                FailureKind::Down
            };
            BackendError::new(backend, Stage::Connect, kind, detail)
        } else {
            BackendError::new(backend, Stage::FirstByte, FailureKind::Broken, detail)
        }
    }
}

/// The causes of `error`, outermost first, `error` itself excluded.
fn source_chain<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    let mut next = error.source();
    std::iter::from_fn(move || {
        let current = next?;
        next = current.source();
        Some(current)
    })
}
