//! The request path's side of tracing (`crate::trace`): the VCL subs run with their
//! `VCL_call` / `VCL_return` records (the `return` that decided, by file and line), and the
//! records of the request's start and end. A request nobody traces has no `Trace` in its
//! extensions and its sessions none: each function here then does nothing more than look.

use http::request::Parts;
use http::Response;
use policy_lang::{Action, Program, Span, Sub};

pub(crate) use crate::trace::{Side, Trace};

/// A session a VCL sub runs in: which side it traces, its trace, where its `return` stood.
pub(super) trait Traced: policy_lang::Context {
    const SIDE: Side;
    fn trace(&self) -> Option<&Trace>;
    fn deciding_return(&mut self) -> &mut Option<Span>;
}

/// Runs `sub` of `program` (as `Program::run`), traced as varnishlog's `VCL_call SUB` and
/// `VCL_return ACTION (FILE:LINE)`: the `return` that decided, or `builtin` when the sub ended
/// without one (the builtin behaviour's action).
pub(super) fn call<S: Traced>(program: &Program, sub: Sub, session: &mut S) -> Action {
    let Some(trace) = session.trace().cloned() else {
        return program.run(sub, session);
    };
    trace.log(S::SIDE, "VCL_call", call_name(sub));
    *session.deciding_return() = None;
    let action = program.run(sub, session);
    let decided = session
        .deciding_return()
        .take()
        .map_or_else(|| "builtin".to_string(), |at| program.return_site(at));
    trace.vcl_return(S::SIDE, return_name(sub, &action), decided);
    action
}

/// A sub the policy does not define, whose builtin behaviour runs natively: traced as if
/// `builtin.vcl`'s sub ran.
pub(super) fn builtin(trace: Option<&Trace>, side: Side, sub: Sub, action: &Action) {
    if let Some(trace) = trace {
        trace.log(side, "VCL_call", call_name(sub));
        trace.vcl_return(side, return_name(sub, action), "builtin".to_string());
    }
}

/// The action as the policy wrote it: `vcl_recv`'s `hash` is the lookup `vcl_hash` returns too.
fn return_name(sub: Sub, action: &Action) -> &'static str {
    match (sub, action) {
        (Sub::Recv, Action::Lookup) => "hash",
        _ => action.name(),
    }
}

/// varnishlog's name of a sub in `VCL_call`: `vcl_backend_fetch` is `BACKEND_FETCH`.
fn call_name(sub: Sub) -> String {
    sub.name().trim_start_matches("vcl_").to_ascii_uppercase()
}

/// The trace a request (or a backend request built from it) carries.
pub(super) fn of(parts: &Parts) -> Option<&Trace> {
    parts.extensions.get::<Trace>()
}

/// The request's start: `Begin`, `Timestamp Start`, `ReqStart`, `ReqMethod`, `ReqURL`,
/// `ReqProtocol`, a `ReqHeader` per field.
pub(super) fn request_started<B>(
    trace: &Trace,
    xid: i64,
    client: std::net::SocketAddr,
    request: &http::Request<B>,
) {
    let side = Side::Client;
    trace.log(side, "Begin", format!("req {xid} rxreq"));
    trace.timestamp(side, "Start");
    trace.log(
        side,
        "ReqStart",
        format!("{} {}", client.ip().to_canonical(), client.port()),
    );
    trace.log(side, "ReqMethod", request.method().as_str());
    trace.log(
        side,
        "ReqURL",
        request.uri().path_and_query().map_or("/", |pq| pq.as_str()),
    );
    trace.log(side, "ReqProtocol", format!("{:?}", request.version()));
    for (name, value) in request.headers() {
        trace.log(
            side,
            "ReqHeader",
            format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())),
        );
    }
}

/// The response's head is ready: `RespProtocol`, `RespStatus`, `RespReason`, a `RespHeader`
/// per field, `Timestamp Resp`, `End`; then the request goes to the listeners.
pub(super) fn request_ended<B>(trace: &Trace, response: &Response<B>) {
    let side = Side::Client;
    let status = response.status();
    trace.log(side, "RespStatus", status.as_str());
    trace.log(side, "RespReason", status.canonical_reason().unwrap_or(""));
    for (name, value) in response.headers() {
        trace.log(
            side,
            "RespHeader",
            format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())),
        );
    }
    trace.timestamp(side, "Resp");
    trace.log(side, "End", "");
    trace.end();
}
