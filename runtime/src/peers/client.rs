//! A thin client of the admin API: what `edgecache admin` uses, so no one writes curl lines.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long one admin call may take (a reload of a large policy included).
const TIMEOUT: Duration = Duration::from_secs(60);

/// An admin API answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Sends one request to the admin API at `addr` and reads the whole answer. `token` is sent as
/// `Authorization: Bearer`. `body` (a ban expression) is sent as a JSON string, and every
/// `POST` as `application/json`: the API refuses other `POST`s that carry no token, so that
/// pages in a browser cannot send them. Errors (connect, protocol, timeout) come back as text.
pub async fn call(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path_and_query: &str,
    body: impl AsRef<str>,
) -> Result<Reply, String> {
    let body = match body.as_ref() {
        "" => Bytes::new(),
        text => Bytes::from(serde_json::to_vec(text).expect("a string serializes")),
    };
    send(addr, token, method, path_and_query, &[], body).await
}

/// [`call`] with `headers` added and `body` sent as it is (a JSON document, for a `POST`).
pub async fn send(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Reply, String> {
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| format!("`{method}` is not a method"))?;
    let mut request = Request::builder()
        .uri(path_and_query)
        .header(header::HOST, addr.to_string());
    if method == Method::POST {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {}", token.trim()));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .method(method)
        .body(Full::new(body))
        .map_err(|error| format!("bad request: {error}"))?;
    let exchange = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|error| format!("cannot connect to the admin API at {addr}: {error}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| format!("admin API handshake: {error}"))?;
        tokio::spawn(connection);
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| format!("admin API request: {error}"))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| format!("admin API response: {error}"))?
            .to_bytes();
        Ok(Reply {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    tokio::time::timeout(TIMEOUT, exchange).await.unwrap_or_else(|_| {
        Err(format!(
            "no answer from the admin API at {addr} within {TIMEOUT:?}"
        ))
    })
}

/// [`call`] on a runtime of its own, for the command line.
pub fn call_blocking(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    path_and_query: &str,
    body: impl AsRef<str>,
) -> Result<Reply, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?
        .block_on(call(addr, token, method, path_and_query, body))
}

/// Percent-encodes a query parameter value (everything but RFC 3986 unreserved characters and `/`).
pub fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}
