//! `GET /log?q=QUERY&count=N`: request traces as requests end, in varnishlog's text grouped by
//! request (`-g request`), one record per line, streamed (chunked) until the client goes away
//! or `count` requests were sent; and [`follow`], the client `edgecache log` prints them with.
//!
//! The query is varnishlog's `-q` subset (`trace::query`); one that does not parse is answered
//! with 400 and the column where it went wrong.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Either, Empty, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{query_param, text, State};
use crate::trace::query::Query;

/// Rendered requests buffered for a slow reader before its subscription lags.
const IN_FLIGHT: usize = 64;

/// The admin API's answers: whole bodies, or the stream of `GET /log`.
pub(super) type AdminBody = Either<Full<Bytes>, LogBody>;

/// `GET /log`: subscribes at once (requests that begin from now on are traced), then sends
/// each finished request the query selects.
pub(super) fn stream(state: &State, query: &str) -> Response<AdminBody> {
    let filter = match query_param(query, "q").filter(|q| !q.trim().is_empty()) {
        None => None,
        Some(q) => match Query::parse(&q) {
            Ok(filter) => Some(filter),
            Err(error) => return text(StatusCode::BAD_REQUEST, &format!("{error}\n")).map(Either::Left),
        },
    };
    let count = match query_param(query, "count").map(|n| n.parse::<u64>()) {
        None => None,
        Some(Ok(n)) if n > 0 => Some(n),
        Some(_) => {
            let refusal = "count must be a whole number of requests, at least 1\n";
            return text(StatusCode::BAD_REQUEST, refusal).map(Either::Left);
        }
    };
    let mut subscription = state.traces.subscribe();
    let (sender, receiver) = mpsc::channel::<Bytes>(IN_FLIGHT);
    tokio::spawn(async move {
        let mut sent = 0;
        loop {
            let next = tokio::select! {
                // The reader went away: drop the subscription (tracing stops with the last one).
                () = sender.closed() => break,
                next = subscription.next() => next,
            };
            let chunk = match next {
                Ok(transaction) if filter.as_ref().is_none_or(|f| f.matches(&transaction)) => {
                    sent += 1;
                    transaction.render()
                }
                Ok(_) => continue,
                Err(dropped) => format!("# {dropped} requests not shown: this reader was too slow\n\n"),
            };
            if sender.send(Bytes::from(chunk)).await.is_err() || count.is_some_and(|n| sent >= n) {
                break;
            }
        }
    });
    let mut response = Response::new(Either::Right(LogBody(receiver)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The chunks of `GET /log`, as the subscription's task renders them.
pub(super) struct LogBody(mpsc::Receiver<Bytes>);

impl http_body::Body for LogBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// What `GET /log` refused, or why it could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("cannot connect to the admin API at {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("admin API: {0}")]
    Protocol(#[from] hyper::Error),
    /// The API's answer: a query that does not parse, a missing token.
    #[error("GET /log answered {status}: {message}")]
    Refused { status: u16, message: String },
}

/// `edgecache log`: asks the admin API at `addr` for the requests `query` selects (all when
/// `None`), at most `count`, and hands each chunk of text to `out` as it arrives. `listening`
/// is called once the server subscribed (requests that begin after it are traced).
pub async fn follow(
    addr: SocketAddr,
    token: Option<&str>,
    query: Option<&str>,
    count: Option<u64>,
    listening: impl FnOnce(),
    mut out: impl FnMut(&str),
) -> Result<(), FollowError> {
    let mut target = "/log?".to_string();
    if let Some(query) = query {
        target.push_str(&format!("q={}&", super::client::encode_query_value(query)));
    }
    if let Some(count) = count {
        target.push_str(&format!("count={count}"));
    }
    let mut request =
        Request::get(target.trim_end_matches(['&', '?'])).header(header::HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {}", token.trim()));
    }
    let request = request.body(Empty::<Bytes>::new()).expect("a valid request");
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|source| FollowError::Connect { addr, source })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await?;
    let status = response.status();
    let mut body = response.into_body();
    if !status.is_success() {
        let message = body.collect().await?.to_bytes();
        return Err(FollowError::Refused {
            status: status.as_u16(),
            message: String::from_utf8_lossy(&message).trim_end().to_string(),
        });
    }
    listening();
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            out(&String::from_utf8_lossy(data));
        }
    }
    Ok(())
}
