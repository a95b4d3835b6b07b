//! Subs ([`Sub`]), the actions they return ([`Action`]), and which sub may return which.
//!
//! As in Varnish 7.x, `vcl_step.rst`.

use std::sync::Arc;
use std::time::Duration;

use super::PluginId;

/// A built-in subroutine (`vcl_*`) the runtime calls at a step of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sub {
    Recv,
    Hash,
    Hit,
    Miss,
    Pass,
    Purge,
    Deliver,
    Synth,
    BackendFetch,
    BackendResponse,
    BackendError,
    Init,
    Fini,
    /// `vcl_pipe`: the request is about to be tunnelled to the backend (`bereq` editable).
    Pipe,
}

impl Sub {
    pub const ALL: [Sub; 14] = [
        Sub::Recv,
        Sub::Hash,
        Sub::Hit,
        Sub::Miss,
        Sub::Pass,
        Sub::Purge,
        Sub::Deliver,
        Sub::Synth,
        Sub::BackendFetch,
        Sub::BackendResponse,
        Sub::BackendError,
        Sub::Init,
        Sub::Fini,
        Sub::Pipe,
    ];

    /// The VCL name, e.g. `"vcl_recv"`.
    pub fn name(self) -> &'static str {
        match self {
            Sub::Recv => "vcl_recv",
            Sub::Hash => "vcl_hash",
            Sub::Hit => "vcl_hit",
            Sub::Miss => "vcl_miss",
            Sub::Pass => "vcl_pass",
            Sub::Purge => "vcl_purge",
            Sub::Deliver => "vcl_deliver",
            Sub::Synth => "vcl_synth",
            Sub::BackendFetch => "vcl_backend_fetch",
            Sub::BackendResponse => "vcl_backend_response",
            Sub::BackendError => "vcl_backend_error",
            Sub::Init => "vcl_init",
            Sub::Fini => "vcl_fini",
            Sub::Pipe => "vcl_pipe",
        }
    }

    pub fn from_name(name: &str) -> Option<Sub> {
        Sub::ALL.iter().copied().find(|s| s.name() == name)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// The action a sub ends with when neither the user's code nor the
    /// builtin returns (never reached with the shipped builtin).
    pub(crate) fn default_action(self) -> Action {
        match self {
            Sub::Recv | Sub::Hash => Action::Lookup,
            Sub::Hit | Sub::Deliver | Sub::Synth | Sub::BackendResponse | Sub::BackendError => {
                Action::Deliver
            }
            Sub::Miss | Sub::Pass | Sub::BackendFetch => Action::Fetch,
            Sub::Purge => Action::Synth {
                status: 200,
                reason: Arc::from("Purged"),
            },
            Sub::Init | Sub::Fini => Action::Ok,
            Sub::Pipe => Action::Pipe,
        }
    }
}

/// Sub masks (bit per [`Sub`]) used by the variable and action tables.
pub(crate) mod mask {
    use super::Sub;
    pub const RECV: u16 = 1 << Sub::Recv as u16;
    pub const HASH: u16 = 1 << Sub::Hash as u16;
    pub const HIT: u16 = 1 << Sub::Hit as u16;
    pub const MISS: u16 = 1 << Sub::Miss as u16;
    pub const PASS: u16 = 1 << Sub::Pass as u16;
    pub const PURGE: u16 = 1 << Sub::Purge as u16;
    pub const DELIVER: u16 = 1 << Sub::Deliver as u16;
    pub const SYNTH: u16 = 1 << Sub::Synth as u16;
    pub const BE_FETCH: u16 = 1 << Sub::BackendFetch as u16;
    pub const BE_RESPONSE: u16 = 1 << Sub::BackendResponse as u16;
    pub const BE_ERROR: u16 = 1 << Sub::BackendError as u16;
    pub const INIT: u16 = 1 << Sub::Init as u16;
    pub const FINI: u16 = 1 << Sub::Fini as u16;
    pub const PIPE: u16 = 1 << Sub::Pipe as u16;
    pub const CLIENT: u16 = RECV | HASH | HIT | MISS | PASS | PURGE | DELIVER | SYNTH | PIPE;
    pub const BACKEND: u16 = BE_FETCH | BE_RESPONSE | BE_ERROR;
    pub const ALL: u16 = CLIENT | BACKEND | INIT | FINI;
    pub const NONE: u16 = 0;

    /// Sub names in a mask, for messages.
    pub fn names(m: u16) -> Vec<&'static str> {
        Sub::ALL
            .iter()
            .filter(|s| m & s.bit() != 0)
            .map(|s| s.name())
            .collect()
    }
}

/// What a sub decided: the runtime's next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `return (hash)` in `vcl_recv`, `return (lookup)` in `vcl_hash`: look the object up.
    Lookup,
    /// Bypass the cache for this request. From `vcl_backend_response`: deliver this response
    /// unstored and make the key hit-for-pass for `beresp.ttl` (Varnish 7).
    Pass,
    /// `return (pass(DURATION))` in `vcl_backend_response`: deliver this response unstored and
    /// pass every request for the key for `ttl` (Varnish's hit-for-pass object, grace and keep 0).
    HitForPass { ttl: Duration },
    /// Remove the object (all variants), then run `vcl_purge`.
    Purge,
    /// Go to `vcl_synth` with `resp.status` / `resp.reason` preset.
    Synth { status: u16, reason: Arc<str> },
    /// Deliver (client side) or finish the fetch and store (backend side).
    Deliver,
    /// Go to the backend.
    Fetch,
    /// Start over at `vcl_recv` with `req.restarts` + 1 (bounded by `max_restarts`).
    Restart,
    /// New backend attempt, `bereq.retries` + 1 (bounded by `max_retries`).
    Retry,
    /// Drop the backend request; the client gets a 503.
    Abandon,
    /// Backend side: go to `vcl_backend_error` with `beresp.status` / `beresp.reason` preset.
    Error { status: u16, reason: Arc<str> },
    /// `vcl_init` / `vcl_fini` succeeded.
    Ok,
    /// `return (fail)`: 503 "VCL failed" (client side) or abandon (backend side);
    /// in `vcl_init`, the policy fails to load.
    Fail { reason: Option<Arc<str>> },
    /// A plugin answered the request itself (`proxy_send_local_response`
    /// during `plugin.request(...)` / `plugin.response(...)`): the runtime
    /// holds the local response and sends it as is. Only the evaluator
    /// produces this action; it cannot be written in `return (...)`.
    PluginResponse { plugin: PluginId },
    /// A plugin paused the request (`Pause` from `plugin.request(...)`, waiting
    /// for an outbound call or a timer): the runtime waits until the plugin
    /// resumes it, then runs the sub again from the start on the request as it
    /// was when the sub started, and `run_plugin` answers that plugin's call
    /// with how its pause ended. Only the evaluator produces this action.
    PluginPaused { plugin: PluginId },
    /// `return (pipe)` in `vcl_recv` / `vcl_pipe`: tunnel the request's connection to the
    /// backend, bytes both ways, nothing cached.
    Pipe,
    /// `return (vcl(LABEL))` in `vcl_recv`: the request starts over, as received, in the
    /// policy `LABEL` names (Varnish's label router); only on its first pass through
    /// `vcl_recv`.
    Vcl { label: Arc<str> },
}

impl Action {
    pub fn name(&self) -> &'static str {
        match self {
            Action::Lookup => "lookup",
            Action::Pass | Action::HitForPass { .. } => "pass",
            Action::Purge => "purge",
            Action::Synth { .. } => "synth",
            Action::Deliver => "deliver",
            Action::Fetch => "fetch",
            Action::Restart => "restart",
            Action::Retry => "retry",
            Action::Abandon => "abandon",
            Action::Error { .. } => "error",
            Action::Ok => "ok",
            Action::Fail { .. } => "fail",
            Action::PluginResponse { .. } => "plugin_response",
            Action::PluginPaused { .. } => "plugin_paused",
            Action::Pipe => "pipe",
            Action::Vcl { .. } => "vcl",
        }
    }
}

/// Action names in `return (...)` and the subs that may use them.
///
/// `plugin_response` ([`Action::PluginResponse`]) is deliberately absent: it
/// is not user-writable, and the evaluator returns it from any sub that may
/// run a plugin (`vcl_recv`, `vcl_backend_response`, `vcl_deliver`).
pub(crate) fn action_mask(name: &str) -> Option<u16> {
    use mask::*;
    Some(match name {
        "hash" => RECV,
        "lookup" => HASH,
        "pass" => RECV | HIT | MISS | BE_RESPONSE,
        "purge" => RECV,
        "synth" => RECV | PASS | PURGE | HIT | MISS | DELIVER | PIPE,
        "restart" => RECV | PASS | PURGE | HIT | MISS | DELIVER | SYNTH,
        "deliver" => HIT | DELIVER | SYNTH | BE_RESPONSE | BE_ERROR,
        "fetch" => PASS | MISS | BE_FETCH,
        "retry" => BE_RESPONSE | BE_ERROR,
        "abandon" => BACKEND,
        "error" => BE_FETCH | BE_RESPONSE,
        "ok" => INIT | FINI,
        "fail" => ALL & !FINI,
        "pipe" => RECV | PIPE,
        "vcl" => RECV,
        _ => return None,
    })
}

/// Legal action names per sub, for hints.
pub(crate) fn legal_actions(sub: Sub) -> Vec<&'static str> {
    const NAMES: [&str; 15] = [
        "hash", "lookup", "pass", "purge", "synth", "restart", "deliver", "fetch", "retry", "abandon",
        "error", "ok", "fail", "pipe", "vcl",
    ];
    NAMES
        .iter()
        .copied()
        .filter(|n| action_mask(n).is_some_and(|m| m & sub.bit() != 0))
        .collect()
}

/// Reason phrase for `synth(status)` / `error(status)` without one.
pub(crate) fn default_reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown Error")
}
