//! The bundled demo origin behind `edgecache demo`: a handful of paths that show what the cache
//! stores and what it passes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// The demo paths with what each shows, for the banner `edgecache demo` prints.
pub const PATHS: &[(&str, &str)] = &[
    ("/", "this list; cached 60 s (max-age=60)"),
    (
        "/hello",
        "cached 300 s (s-maxage=300): MISS, then HIT with a growing Age",
    ),
    (
        "/slow",
        "takes 1 s at the origin, cached 30 s: concurrent misses share one fetch",
    ),
    ("/expires", "cached through Expires - Date (10 minutes)"),
    ("/vary", "Vary: Accept-Language: one object per language"),
    ("/private", "Cache-Control: private: never stored (PASS)"),
    ("/no-store", "Cache-Control: no-store: never stored (PASS)"),
    (
        "/cookie",
        "sets a cookie: not stored, as Varnish's builtin VCL does",
    ),
    ("/time", "no freshness information: not reused unless you pass -t"),
];

/// Starts the demo origin on `address` and returns the bound address.
pub async fn start_origin(address: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let served = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let served = served.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let count = served.fetch_add(1, Ordering::Relaxed) + 1;
                    async move { Ok::<_, Infallible>(respond(request, count).await) }
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

async fn respond(request: Request<Incoming>, count: u64) -> Response<Full<Bytes>> {
    let now = std::time::SystemTime::now();
    let stamp = httpdate::fmt_http_date(now);
    let (status, cache_control, body): (StatusCode, Option<&str>, String) = match request.uri().path() {
        "/" => {
            let list: String = PATHS
                .iter()
                .map(|(path, what)| format!("{path:<10} {what}\n"))
                .collect();
            (StatusCode::OK, Some("max-age=60"), list)
        }
        "/hello" => (
            StatusCode::OK,
            Some("public, s-maxage=300"),
            format!("Hello from the origin (origin request #{count} at {stamp})\n"),
        ),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            (
                StatusCode::OK,
                Some("max-age=30"),
                format!("slow answer #{count}\n"),
            )
        }
        "/expires" => (
            StatusCode::OK,
            None,
            format!("expires in 10 minutes (#{count})\n"),
        ),
        "/vary" => {
            let language = request
                .headers()
                .get(header::ACCEPT_LANGUAGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_string();
            (
                StatusCode::OK,
                Some("max-age=60"),
                format!("content for Accept-Language: {language} (#{count})\n"),
            )
        }
        "/private" => (
            StatusCode::OK,
            Some("private, max-age=60"),
            format!("private page #{count}\n"),
        ),
        "/no-store" => (
            StatusCode::OK,
            Some("no-store"),
            format!("never stored #{count}\n"),
        ),
        "/cookie" => (
            StatusCode::OK,
            Some("max-age=60"),
            format!("cookie page #{count}\n"),
        ),
        "/time" => (StatusCode::OK, None, format!("{stamp} (#{count})\n")),
        _ => (
            StatusCode::NOT_FOUND,
            Some("max-age=10"),
            "not found\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some(value) = cache_control {
        headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static(value));
    }
    match request.uri().path() {
        "/expires" => {
            let expires = httpdate::fmt_http_date(now + Duration::from_secs(600));
            headers.insert(
                header::EXPIRES,
                expires.parse().expect("an HTTP date is a valid header value"),
            );
        }
        "/vary" => {
            headers.insert(header::VARY, header::HeaderValue::from_static("Accept-Language"));
        }
        "/cookie" => {
            headers.insert(
                header::SET_COOKIE,
                header::HeaderValue::from_static("session=demo; Path=/"),
            );
        }
        _ => {}
    }
    response
}
