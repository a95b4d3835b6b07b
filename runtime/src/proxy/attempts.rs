//! One fetch's attempts at the origin: the backend request as `vcl_backend_fetch` leaves it,
//! the backend the policy's choice picks, the retries (a refused connection sent to another
//! director member; `return (retry)` from `vcl_backend_error` or `vcl_backend_response`, up to
//! Varnish's `max_retries`), and the failure page `vcl_backend_error` makes when the fetch fails
//! for good.

use std::future::Future;

use http::request::Parts;
use http::{Request, Response, StatusCode};
use policy_lang::{Action, BackendId, Program, Sub, Task};

use super::bereq::empty_body;
use super::client_side::ClientSide;
use super::synth;
use super::trace::{self, Side, Trace};
use super::vcl::{BackendSession, BereqAsBuilt};
use crate::backend::{Backend, BackendError, FailureKind, OutgoingBody, Stage, TimedBody};
use crate::cache::body::ProxyBody;
use crate::version::Version;

/// A fetch that failed for good.
pub(super) struct FetchFailure {
    error: BackendError,
    /// The client request's id, for the page without a policy.
    xid: Option<i64>,
    /// What `vcl_backend_error` made of it, with a policy.
    page: Option<Box<Response<ProxyBody>>>,
}

/// The answer to a failed fetch: `vcl_backend_error`'s page with a policy, else 502/503/504
/// with a short body naming the request id and a generic cause ([`synth::backend_failure`]);
/// the log line names the backend, its address and the error in both cases.
pub(super) fn failure(failed: FetchFailure, show_detail: bool) -> Response<ProxyBody> {
    let FetchFailure { error, xid, page } = failed;
    tracing::warn!(backend = %error.backend, address = %error.address, xid, "{error}");
    match page {
        Some(page) => *page,
        None => synth::backend_failure(&error, xid, show_detail),
    }
}

/// `max_retries` of Varnish: how often `return (retry)` in `vcl_backend_error` or
/// `vcl_backend_response` may send a fetch again.
const MAX_RETRIES: i64 = 4;

/// The attempts of one fetch: the backend request, the backend choice, and how often the
/// request was sent again (`bereq.retries`).
pub(super) struct Attempts<'v> {
    version: &'v Version,
    /// The policy's backend choice (`bereq.backend`), asked again on a retry (a director may
    /// pick another).
    hint: Option<BackendId>,
    /// The backend request's head: `bereq` for `vcl_backend_fetch` and `vcl_backend_error`,
    /// and what a retry sends again. Without a policy its fields are left empty.
    head: Parts,
    /// Whether the request may be sent again: a policy, and an idempotent request without a
    /// body (so the origin cannot have acted on it twice).
    repeatable: bool,
    /// A pass (`bereq.uncacheable`).
    uncacheable: bool,
    /// `bereq.retries`: how often the request was sent again.
    pub(super) retries: i64,
    /// Whether a refused connection was already sent to another member of the director.
    rerouted: bool,
    /// The backend task's vmod state (`cookie.*`, `var.*`), from `vcl_backend_fetch` to
    /// `vcl_backend_response` or `vcl_backend_error`, retries included.
    pub(super) task: Task,
    /// The client request's id (`bereq.xid`), when the fetch is made for one.
    xid: Option<i64>,
    /// The client request's trace, when someone listens (`GET /log`).
    trace: Option<Trace>,
}

impl<'v> Attempts<'v> {
    /// Starts the fetch of `bereq`, meant for `backend`: `vcl_backend_fetch` runs over it
    /// (it may edit the request and set `bereq.backend`). Returns the backend to send it to.
    pub(super) fn start(
        version: &'v Version,
        hint: Option<BackendId>,
        backend: &Backend,
        bereq: &mut Request<OutgoingBody>,
        uncacheable: bool,
    ) -> (Attempts<'v>, Backend) {
        let mut attempts = Attempts {
            version,
            hint,
            head: Request::new(()).into_parts().0,
            repeatable: version.policy.is_some() && repeatable(bereq),
            uncacheable,
            retries: 0,
            rerouted: false,
            task: Task::default(),
            xid: ClientSide::xid_of(bereq.extensions()),
            trace: bereq.extensions().get::<Trace>().cloned(),
        };
        if let Some(trace) = &attempts.trace {
            let how = if uncacheable { "pass" } else { "fetch" };
            let link = format!("bereq {} {how}", attempts.xid.unwrap_or(0));
            trace.log(Side::Client, "Link", link.clone());
            trace.log(Side::Backend, "Begin", link);
            trace.timestamp(Side::Backend, "Start");
            trace.log(Side::Backend, "BereqMethod", bereq.method().as_str());
            let url = bereq.uri().path_and_query().map_or("/", |pq| pq.as_str());
            trace.log(Side::Backend, "BereqURL", url);
        }
        if version.policy.is_none() {
            return (attempts, backend.clone());
        }
        let head = &mut attempts.head;
        head.method = bereq.method().clone();
        head.uri = bereq.uri().clone();
        head.version = bereq.version();
        head.headers = std::mem::take(bereq.headers_mut());
        // A retry is sent from `head`: it keeps what the backend reads from the extensions.
        head.extensions = bereq.extensions().clone();
        if version.policy.as_ref().is_some_and(Program::rolls_back_bereq) {
            BereqAsBuilt::keep(head);
        }
        let chose_another = attempts.vcl_backend_fetch(backend.name());
        *bereq.method_mut() = attempts.head.method.clone();
        *bereq.uri_mut() = attempts.head.uri.clone();
        *bereq.headers_mut() = attempts.head.headers.clone();
        // A shard parameter set `vcl_backend_fetch` changed may move a lazy shard pick.
        let params = version.policy.as_ref().is_some_and(Program::has_shard_params);
        let backend = if chose_another || params {
            version.pick_for_task(attempts.hint, Some(&attempts.task)).clone()
        } else {
            backend.clone()
        };
        (attempts, backend)
    }

    /// Runs `vcl_backend_fetch` over the request, when the policy defines that sub. Returns
    /// whether it set `bereq.backend` to another choice (now in `hint`).
    fn vcl_backend_fetch(&mut self, backend_name: &str) -> bool {
        let Some(program) = self.version.policy_defining(Sub::BackendFetch) else {
            trace::builtin(
                self.trace.as_ref(),
                Side::Backend,
                Sub::BackendFetch,
                &Action::Fetch,
            );
            return false;
        };
        let mut session = BackendSession::new(&mut self.head, backend_name, self.uncacheable, &mut self.task);
        session.backend = self.hint;
        session.version = Some(self.version);
        session.retries = self.retries;
        trace::call(program, Sub::BackendFetch, &mut session);
        let chosen = session.backend;
        let changed = chosen != self.hint;
        self.hint = chosen;
        changed
    }

    /// Sends `bereq` to `backend`, and again where a failed fetch may be repeated:
    /// - once, to another healthy member, when the backend came from a director and could not
    ///   be connected to (the origin saw nothing), as Varnish retries a fetch;
    /// - when the policy's `vcl_backend_error` returns `retry` (see [`Attempts::again`]).
    ///
    /// Both count towards [`MAX_RETRIES`]. A sick backend is not contacted. `backend` ends as
    /// the one that answered (or failed last).
    ///
    /// Not an `async fn`, which would hold `bereq` twice (its argument and its local) in a
    /// future that is inside every fetch's (see `Backend::send`).
    pub(super) fn send<'s>(
        &'s mut self,
        backend: &'s mut Backend,
        mut bereq: Request<OutgoingBody>,
    ) -> impl Future<Output = Result<Response<TimedBody>, FetchFailure>> + Send + use<'s, 'v> {
        let version = self.version;
        let from_director = self
            .hint
            .is_some_and(|hint| version.policy.as_ref().is_some_and(|p| p.is_director(hint)));
        let on_error = version.policy_defining(Sub::BackendError);
        async move {
            loop {
                let error = if backend.healthy() {
                    if let Some(trace) = &self.trace {
                        trace.log(
                            Side::Backend,
                            "BackendOpen",
                            format!("{} {}", backend.name(), backend.address()),
                        );
                        trace.timestamp(Side::Backend, "Bereq");
                    }
                    match backend.send(bereq).await {
                        Ok(response) => {
                            if let Some(trace) = &self.trace {
                                let status = response.status();
                                trace.log(Side::Backend, "BerespStatus", status.as_str());
                                trace.log(
                                    Side::Backend,
                                    "BerespReason",
                                    status.canonical_reason().unwrap_or(""),
                                );
                                trace.timestamp(Side::Backend, "Beresp");
                            }
                            return Ok(response);
                        }
                        Err(error) => error,
                    }
                } else {
                    // As Varnish: a backend its probe calls sick is not contacted; the fetch fails
                    // at once (503, or the stale object in grace).
                    let last_failure = backend.health().and_then(|report| report.last_failure);
                    let why = match backend.admin_health() {
                        crate::backend::AdminHealth::Sick => {
                            "sick: set so by backend.set_health (auto returns it to its probe)".to_string()
                        }
                        _ => format!(
                            "sick: its health probe is failing (last probe: {})",
                            last_failure.as_deref().unwrap_or("none failed yet")
                        ),
                    };
                    BackendError::new(backend, Stage::Connect, FailureKind::Down, why)
                };
                if let Some(trace) = &self.trace {
                    trace.log(
                        Side::Backend,
                        "FetchError",
                        format!("{}: {error}", backend.name()),
                    );
                    trace.timestamp(Side::Backend, "Error");
                }
                if !self.repeatable || self.retries >= MAX_RETRIES {
                    return Err(self.fail(error));
                }
                let unreached = from_director && !self.rerouted && error.stage == Stage::Connect;
                let other = unreached
                    .then(|| version.pick_other(self.hint, version.backend_id(backend)))
                    .flatten();
                bereq = match (other, on_error) {
                    (Some(other), _) => {
                        tracing::warn!(retry_on = other.name(), "{error}; retrying on another member");
                        self.rerouted = true;
                        self.retries += 1;
                        *backend = other.clone();
                        Request::from_parts(self.head.clone(), empty_body())
                    }
                    (None, Some(program)) => {
                        let (action, page) = self.vcl_backend_error(program, &error);
                        if action != Action::Retry {
                            return Err(FetchFailure {
                                error,
                                xid: self.xid,
                                page: Some(Box::new(page)),
                            });
                        }
                        tracing::warn!(retries = self.retries, "{error}; vcl_backend_error: retry");
                        self.again(backend)
                    }
                    (None, None) => return Err(self.fail(error)),
                };
            }
        }
    }

    /// `return (retry)` from `vcl_backend_response`: the request to send next (see
    /// [`Attempts::again`]). The fetch fails (`vcl_backend_error`, 503, or the stale object in
    /// grace), as in Varnish, when `max_retries` is spent or the request may not be sent
    /// twice.
    pub(super) fn retry(&mut self, backend: &mut Backend) -> Result<Request<OutgoingBody>, FetchFailure> {
        let refusal = if !self.repeatable {
            "vcl_backend_response returned retry, but this request may not be sent twice"
        } else if self.retries >= MAX_RETRIES {
            "vcl_backend_response returned retry: too many retries (max_retries is 4)"
        } else {
            tracing::debug!(retries = self.retries, "vcl_backend_response: retry");
            return Ok(self.again(backend));
        };
        Err(self.fail(BackendError::new(
            backend,
            Stage::FirstByte,
            FailureKind::Down,
            refusal,
        )))
    }

    /// The request of a policy's `retry`: `vcl_backend_fetch` runs again over the backend
    /// request (its edits stay, as in Varnish; `bereq.retries` tells which attempt this is,
    /// and it may set `bereq.backend`), then `backend` becomes the one the choice picks now.
    fn again(&mut self, backend: &mut Backend) -> Request<OutgoingBody> {
        self.retries += 1;
        self.vcl_backend_fetch(backend.name());
        *backend = self.version.pick_for_task(self.hint, Some(&self.task)).clone();
        Request::from_parts(self.head.clone(), empty_body())
    }

    /// Lends `vcl_backend_response`'s `bereq` what `std.rollback(bereq)` goes back to.
    pub(super) fn lend_as_built(&self, bereq: &mut Parts) {
        if let Some(as_built) = self.head.extensions.get::<BereqAsBuilt>() {
            bereq.extensions.insert(as_built.clone());
        }
    }

    /// `std.rollback(bereq)` ran in `vcl_backend_response`: the backend request goes back as it
    /// was built and, as in Varnish (which closes the response's connection: "No backend
    /// connection (rollback?)"), the response is let go. Unless the sub returned `retry`, the
    /// fetch fails: `vcl_backend_error` runs, and its `retry` is honoured too. `Ok` when the
    /// caller is to retry (see [`Attempts::retry`]).
    pub(super) fn after_rollback(&mut self, backend: &Backend, retry: bool) -> Result<(), FetchFailure> {
        BereqAsBuilt::restore(&mut self.head);
        if retry {
            return Ok(());
        }
        let error = BackendError::new(
            backend,
            Stage::FirstByte,
            FailureKind::Down,
            "no backend connection: std.rollback(bereq) in vcl_backend_response let the response go",
        );
        let Some(program) = self.version.policy.as_ref() else {
            return Err(self.fail(error));
        };
        let (action, page) = self.vcl_backend_error(program, &error);
        if action == Action::Retry && self.repeatable && self.retries < MAX_RETRIES {
            return Ok(());
        }
        Err(FetchFailure {
            error,
            xid: self.xid,
            page: Some(Box::new(page)),
        })
    }

    /// The fetch failed for good: with a policy, `vcl_backend_error` makes the page (the
    /// builtin's HTML page unless the policy's own sub returns first), as in Varnish.
    pub(super) fn fail(&mut self, error: BackendError) -> FetchFailure {
        let page = self
            .version
            .policy
            .as_ref()
            .map(|program| Box::new(self.vcl_backend_error(program, &error).1));
        FetchFailure {
            error,
            xid: self.xid,
            page,
        }
    }

    /// Runs `vcl_backend_error` for `error`: its action, and what the client gets unless that
    /// action is a retry that is still allowed.
    fn vcl_backend_error(
        &mut self,
        program: &Program,
        error: &BackendError,
    ) -> (Action, Response<ProxyBody>) {
        let mut beresp = Response::new(()).into_parts().0;
        beresp.status = synth::failure_status(error.kind);
        let mut bereq = self.head.clone();
        let mut session = BackendSession::new(&mut bereq, &error.backend, true, &mut self.task);
        session.version = Some(self.version);
        session.backend = self.hint;
        session.retries = self.retries;
        session.beresp = Some(&mut beresp);
        let action = trace::call(program, Sub::BackendError, &mut session);
        if session.rolled_back {
            // What a retry sends.
            BereqAsBuilt::restore(&mut self.head);
        }
        let body = session.synthetic.take().unwrap_or_default();
        let page = match action {
            // As Varnish: a retry past `max_retries`, `abandon` or `fail` fail the fetch.
            Action::Retry => synth::plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "vcl_backend_error returned retry, but the fetch may not be sent again (max_retries \
                 is 4; a request with a body is sent once)",
            ),
            Action::Abandon | Action::Fail { .. } => synth::plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the policy abandoned the fetch in vcl_backend_error",
            ),
            _ => Response::from_parts(beresp, ProxyBody::full(body)),
        };
        (action, page)
    }
}

/// An idempotent request without a body (RFC 9110 §9.2.2): sending it twice is harmless.
fn repeatable(bereq: &Request<OutgoingBody>) -> bool {
    bereq.method().is_idempotent() && http_body::Body::size_hint(bereq.body()).exact() == Some(0)
}
