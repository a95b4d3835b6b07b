//! One access-log event per request, on the `edgecache::access` tracing target, or one NCSA
//! (varnishncsa / Apache combined) line when that is the format.

use std::time::{Duration, SystemTime};

use http::{header, HeaderValue, Method, Request, StatusCode, Uri, Version};

use crate::cache::state::CacheState;
use crate::config::{LogField, NcsaFormat};

/// What the access log records about a finished request.
pub struct AccessRecord<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
    pub status: StatusCode,
    pub cache: CacheState,
    pub bytes: Option<u64>,
    pub duration: Duration,
    pub backend: Option<&'a str>,
    pub client: std::net::IpAddr,
    /// The TLS version of the client connection (`TLSv1.3`); `None` for plain HTTP.
    pub tls: Option<&'static str>,
    /// The request's id: `req.xid` in a policy, the `XID` of the builtin error pages.
    pub xid: i64,
    pub request: &'a RequestFields,
}

/// What the log keeps of the client's request head, taken before the request is consumed.
pub struct RequestFields {
    host: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    referer: Option<HeaderValue>,
    version: Version,
}

impl RequestFields {
    /// The request's host and path with query (`example.com/news?page=2`), as the dashboard's
    /// table of missed URLs shows it.
    pub fn host_and_path(&self, uri: &http::Uri) -> String {
        let host = self
            .host
            .as_ref()
            .and_then(|host| host.to_str().ok())
            .unwrap_or("");
        let path = uri.path_and_query().map_or("/", |path| path.as_str());
        format!("{host}{path}")
    }

    pub fn of<B>(request: &Request<B>) -> RequestFields {
        let field = |name| request.headers().get(name).cloned();
        RequestFields {
            // HTTP/2 carries the host as :authority, which hyper puts in the URI.
            host: field(header::HOST).or_else(|| {
                let authority = request.uri().authority()?;
                HeaderValue::from_str(authority.as_str()).ok()
            }),
            user_agent: field(header::USER_AGENT),
            referer: field(header::REFERER),
            version: request.version(),
        }
    }
}

/// A field's value for the log; `-` when absent or not visible ASCII.
fn shown(value: Option<&HeaderValue>) -> &str {
    value.and_then(|value| value.to_str().ok()).unwrap_or("-")
}

pub fn record(entry: AccessRecord<'_>) {
    if crate::logging::write_ncsa(|format| ncsa_line(&entry, SystemTime::now(), format)) {
        return;
    }
    tracing::info!(
        target: crate::logging::ACCESS_TARGET,
        client = %entry.client,
        method = %entry.method,
        url = %entry.uri,
        status = entry.status.as_u16(),
        cache = entry.cache.as_str(),
        bytes = entry.bytes,
        duration_us = entry.duration.as_micros() as u64,
        backend = entry.backend.unwrap_or("-"),
        tls = entry.tls.unwrap_or("-"),
        xid = entry.xid,
        host = shown(entry.request.host.as_ref()),
        user_agent = shown(entry.request.user_agent.as_ref()),
        referer = shown(entry.request.referer.as_ref()),
    );
}

/// One line in an NCSA `format` (varnishncsa's default: `%h %l %u %t "%r" %s %b
/// "%{Referer}i" "%{User-agent}i"`), with `%r` as varnishncsa writes it
/// (`GET http://HOST/path HTTP/1.1`).
fn ncsa_line(entry: &AccessRecord<'_>, now: SystemTime, format: &NcsaFormat) -> String {
    use std::fmt::Write;
    let request = entry.request;
    let mut line = String::new();
    for field in &format.fields {
        let _ = match field {
            LogField::Text(text) => write!(line, "{text}"),
            LogField::Client => write!(line, "{}", entry.client),
            LogField::Dash => write!(line, "-"),
            LogField::Time => write!(line, "{}", ncsa_time(now)),
            LogField::RequestLine => write!(
                line,
                "{} http://{}{} {:?}",
                entry.method,
                shown(request.host.as_ref()),
                entry.uri.path_and_query().map_or("/", |target| target.as_str()),
                request.version
            ),
            LogField::Status => write!(line, "{}", entry.status.as_u16()),
            LogField::Bytes => match entry.bytes {
                Some(bytes) => write!(line, "{bytes}"),
                None => write!(line, "-"),
            },
            LogField::Method => write!(line, "{}", entry.method),
            LogField::Path => write!(line, "{}", entry.uri.path()),
            LogField::Query => match entry.uri.query() {
                Some(query) => write!(line, "?{query}"),
                None => Ok(()),
            },
            LogField::Protocol => write!(line, "{:?}", request.version),
            LogField::Micros => write!(line, "{}", entry.duration.as_micros()),
            LogField::Seconds => write!(line, "{}", entry.duration.as_secs()),
            LogField::RequestField(name) => {
                let value = match name.as_str() {
                    "host" => &request.host,
                    "user-agent" => &request.user_agent,
                    _ => &request.referer,
                };
                write!(line, "{}", quoted(shown(value.as_ref())))
            }
            LogField::Handling => write!(line, "{}", entry.cache.as_str().to_ascii_lowercase()),
            LogField::Xid => write!(line, "{}", entry.xid),
            LogField::Backend => write!(line, "{}", entry.backend.unwrap_or("-")),
            LogField::Tls => write!(line, "{}", entry.tls.unwrap_or("-")),
        };
    }
    line
}

/// `[01/Dec/2026:11:20:00 +0000]`, from the HTTP date `Tue, 01 Dec 2026 11:20:00 GMT`.
fn ncsa_time(now: SystemTime) -> String {
    let date = httpdate::fmt_http_date(now);
    let parts: Vec<&str> = date.split(' ').collect();
    match parts[..] {
        [_, day, month, year, time, _] => format!("[{day}/{month}/{year}:{time} +0000]"),
        _ => format!("[{date}]"),
    }
}

/// A field inside NCSA's double quotes: a `"` or `\\` in it escaped, as Apache does.
fn quoted(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains(['"', '\\']) {
        value.replace('\\', "\\\\").replace('"', "\\\"").into()
    } else {
        value.into()
    }
}
