//! Plugins that use the parts of the proxy-wasm ABI the public SDKs' own examples rely on
//! (shared-queue notifications, gRPC calls), over real sockets. A test binary of its own:
//! shared data and shared queues are process-wide, so these tests do not share them with
//! `tests/plugins.rs`.

mod support;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::plugins::wasm;
use support::{get, start_with_policy, Origin, OriginReply};
use tokio::net::TcpListener;

#[tokio::test]
async fn an_enqueued_item_wakes_the_plugin_that_registered_the_queue() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    // `drain=ready`: no tick; only proxy_on_queue_ready drains the queue into `stats.seen`.
    let policy = format!(
        "vcl 4.1;\nplugin stats {{ .path = \"{}\"; .config = \"drain=ready\"; }}\n\
         sub vcl_recv {{ plugin.request(stats); return (pass); }}\n\
         sub vcl_deliver {{ plugin.response(stats); }}\n",
        wasm("stats.wasm")
    );
    let path = support::write_policy("plugins-queue-ready", &policy);
    let (_proxy, addr) = support::start_proxy(origin.addr, |config| {
        config.policy = Some(path);
        config.plugin_limits.deadline = Duration::from_millis(100);
    })
    .await;
    for i in 0..5 {
        assert_eq!(get(addr, &format!("/q/{i}"), &[]).await.status, StatusCode::OK);
    }
    // Each request's response phase reads the total drained so far; the notifications run on
    // tasks of their own, so poll (bounded) until all five were delivered.
    support::until("the queue drained by proxy_on_queue_ready", async || {
        let seen = get(addr, "/poll", &[]).await;
        seen.header("x-stats-seen")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n >= 5)
    })
    .await;
}

// === gRPC calls and streams ===

/// A gRPC-shaped origin over HTTP/2 cleartext (hyper's server; the messages are opaque bytes,
/// so no protobuf): `/edge.Auth/Check` answers `ok:` + the request's message with status OK,
/// or no message and status 7 (`PERMISSION_DENIED`, message `denied`) when the message holds
/// `deny`; `/edge.Auth/Watch` answers each message upper-cased, with `x-served-by:
/// grpc-origin` as initial metadata. It records the `x-user` metadata of each call.
struct GrpcOrigin {
    addr: SocketAddr,
    users: Arc<Mutex<Vec<String>>>,
}

impl GrpcOrigin {
    async fn start() -> GrpcOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let users = Arc::new(Mutex::new(Vec::new()));
        let seen = users.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| answer(request, seen.clone()));
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        GrpcOrigin { addr, users }
    }
}

async fn answer(
    request: Request<Incoming>,
    users: Arc<Mutex<Vec<String>>>,
) -> Result<Response<Frames>, Infallible> {
    let path = request.uri().path().to_string();
    if let Some(user) = request.headers().get("x-user") {
        users.lock().unwrap().push(user.to_str().unwrap().to_string());
    }
    let mut body = request.into_body().collect().await.unwrap().to_bytes();
    let mut messages = Vec::new();
    while body.len() >= 5 {
        let length = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        body.advance(5);
        messages.push(body.split_to(length));
    }
    let (replies, status, metadata): (Vec<Bytes>, &str, Option<&str>) = match path.as_str() {
        "/edge.Auth/Check" if messages[0].windows(4).any(|w| w == b"deny") => (vec![], "7", None),
        "/edge.Auth/Check" => (vec![[&b"ok:"[..], &messages[0]].concat().into()], "0", None),
        "/edge.Auth/Watch" => (
            messages.iter().map(|m| m.to_ascii_uppercase().into()).collect(),
            "0",
            Some("grpc-origin"),
        ),
        _ => (vec![], "12", None),
    };
    let mut frames: VecDeque<Frame<Bytes>> = replies
        .iter()
        .map(|m| {
            let mut framed = vec![0];
            framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
            framed.extend_from_slice(m);
            Frame::data(Bytes::from(framed))
        })
        .collect();
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", status.parse().unwrap());
    if status == "7" {
        trailers.insert("grpc-message", "denied".parse().unwrap());
    }
    frames.push_back(Frame::trailers(trailers));
    let mut response = Response::builder().header("content-type", "application/grpc");
    if let Some(served_by) = metadata {
        response = response.header("x-served-by", served_by);
    }
    Ok(response.body(Frames(frames)).unwrap())
}

/// A response body of fixed frames (data, then trailers).
struct Frames(VecDeque<Frame<Bytes>>);

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

fn grpc_policy(origin: &Origin, auth: SocketAddr, config: &str) -> String {
    format!(
        r#"vcl 4.1;
backend default {{ .host = "127.0.0.1"; .port = "{}"; }}
backend grpc_auth {{ .host = "127.0.0.1"; .port = "{}"; }}
plugin auth {{ .path = "{}"; .upstreams = "auth=grpc_auth"; .config = "{config}"; }}
sub vcl_recv {{ plugin.request(auth); return (pass); }}
"#,
        origin.addr.port(),
        auth.port(),
        wasm("grpc_auth.wasm")
    )
}

#[tokio::test]
async fn a_grpc_call_answer_lets_the_request_on_and_an_error_status_refuses_it() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let grpc = GrpcOrigin::start().await;
    let (_proxy, addr) =
        start_with_policy("plugins-grpc", &grpc_policy(&origin, grpc.addr, ""), &origin).await;

    let allowed = get(addr, "/page", &[("x-user", "alice")]).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.text());
    assert_eq!(
        origin.last().header("x-auth-reply"),
        Some("ok:/page"),
        "the answer message, unframed, reached the plugin"
    );
    assert_eq!(
        *grpc.users.lock().unwrap(),
        ["alice"],
        "the call's metadata reached the service"
    );

    let denied = get(addr, "/deny", &[("x-user", "bob")]).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);
    assert_eq!(
        denied.text(),
        "grpc status 7: denied\n",
        "grpc-status and grpc-message from the trailers"
    );
    assert_eq!(
        origin.requests(),
        1,
        "the refused request never reached the origin"
    );
}

#[tokio::test]
async fn a_grpc_call_to_a_service_that_is_down_closes_unavailable() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let down = support::unused_port().await;
    let (_proxy, addr) =
        start_with_policy("plugins-grpc-down", &grpc_policy(&origin, down, ""), &origin).await;
    let refused = get(addr, "/page", &[]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        refused.text().starts_with("grpc status 14: "),
        "{}",
        refused.text()
    );
    assert_eq!(origin.requests(), 0);
}

#[tokio::test]
async fn a_grpc_stream_delivers_metadata_each_message_and_the_close_in_order() {
    let origin = Origin::fixed(OriginReply::ok("fine")).await;
    let grpc = GrpcOrigin::start().await;
    let policy = grpc_policy(&origin, grpc.addr, "mode=stream");
    let (_proxy, addr) = start_with_policy("plugins-grpc-stream", &policy, &origin).await;
    let reply = get(addr, "/page", &[("x-user", "carol")]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let seen = origin.last();
    assert_eq!(seen.header("x-stream-replies"), Some("/PAGE,CAROL"));
    assert_eq!(seen.header("x-stream-metadata"), Some("grpc-origin"));
}
