//! Invalidation after unsafe requests (RFC 9111 §4.4).

use http::header::{HeaderMap, CONTENT_LOCATION, LOCATION};
use http::{Method, StatusCode, Uri};

#[cfg(test)]
mod tests;

/// `true` for methods that are not known to be safe: anything but GET, HEAD, OPTIONS and
/// TRACE, including methods this cache does not know (RFC 9111 §4.4; RFC 9110 §9.2.1).
pub(crate) fn is_unsafe(method: &Method) -> bool {
    !matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The URIs whose stored responses must be invalidated after a response to `method`
/// (RFC 9111 §4.4). Empty unless the method is unsafe ([`is_unsafe`]) and the status is a
/// non-error one (2xx or 3xx); error responses invalidate nothing.
///
/// `target` is the effective request URI (RFC 9110 §7.1), absolute
/// (`scheme://authority/path?query`). It comes first in the result, followed by the
/// `Location` and `Content-Location` URIs (first field line each), resolved against it as URI
/// references (RFC 3986 §5.2, dot segments removed), when they have the same origin (scheme,
/// host, port; §4.4: "MUST NOT ... if the origin ... differs"). Results are normalised —
/// scheme and host lowercase, default port dropped, empty path as `/`, fragment removed —
/// and deduplicated.
///
/// With a `target` in origin-form (`/path?query`), only relative references (no scheme, no
/// authority) can be resolved, and the results are origin-form too.
pub(crate) fn invalidation_targets(
    method: &Method,
    status: StatusCode,
    target: &Uri,
    resp: &HeaderMap,
) -> Vec<Uri> {
    if !is_unsafe(method) || !(status.is_success() || status.is_redirection()) {
        return Vec::new();
    }
    let base = Parts::from_uri(target);
    let mut out: Vec<Uri> = Vec::new();
    if let Some(uri) = base.to_uri() {
        out.push(uri);
    }
    for name in [LOCATION, CONTENT_LOCATION] {
        let Some(reference) = resp.get(&name).and_then(|v| v.to_str().ok()) else {
            continue;
        };
        let Some(resolved) = resolve(&base, reference.trim()) else {
            continue;
        };
        if !base.same_origin(&resolved) {
            continue;
        }
        if let Some(uri) = resolved.to_uri() {
            if !out.contains(&uri) {
                out.push(uri);
            }
        }
    }
    out
}

/// `true` when the URI reference (a `Content-Location` value) resolved against `target`
/// (RFC 3986 §5.2, dot segments removed) is `target` itself, compared as
/// [`invalidation_targets`] normalises URIs: scheme and host in any case, the default port
/// written or not, a fragment ignored.
pub(crate) fn refers_to(target: &Uri, reference: &str) -> bool {
    let base = Parts::from_uri(target);
    resolve(&base, reference.trim()).is_some_and(|resolved| {
        base.same_origin(&resolved) && resolved.to_uri().is_some() && resolved.to_uri() == base.to_uri()
    })
}

/// URI components (RFC 3986 §3), lowercase scheme and host, port made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parts {
    scheme: Option<String>,
    /// host (lowercase) and port (explicit or the scheme's default).
    authority: Option<(String, Option<u16>)>,
    path: String,
    query: Option<String>,
}

impl Parts {
    fn from_uri(uri: &Uri) -> Parts {
        Parts {
            scheme: uri.scheme_str().map(str::to_ascii_lowercase),
            authority: uri
                .authority()
                .map(|a| (a.host().to_ascii_lowercase(), a.port_u16())),
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
        }
    }

    /// Scheme and port with defaults applied (RFC 9110 §4.3.1, §4.2).
    fn origin(&self) -> Option<(&str, &str, u16)> {
        let scheme = self.scheme.as_deref()?;
        let default = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let (host, port) = self.authority.as_ref()?;
        Some((scheme, host, port.unwrap_or(default)))
    }

    fn same_origin(&self, other: &Parts) -> bool {
        match (self.origin(), other.origin()) {
            (Some(a), Some(b)) => a == b,
            // Origin-form target: only purely relative references stay on it.
            (None, None) => self.scheme.is_none() && other.scheme.is_none() && other.authority.is_none(),
            _ => false,
        }
    }

    fn to_uri(&self) -> Option<Uri> {
        let path = if self.path.is_empty() { "/" } else { &self.path };
        let mut s = String::new();
        if let Some((scheme, host, port)) = self.origin() {
            s.push_str(scheme);
            s.push_str("://");
            s.push_str(host);
            let default = if scheme == "https" { 443 } else { 80 };
            if port != default {
                s.push(':');
                s.push_str(&port.to_string());
            }
        } else if self.scheme.is_some() || self.authority.is_some() {
            return None;
        }
        s.push_str(path);
        if let Some(q) = &self.query {
            s.push('?');
            s.push_str(q);
        }
        Uri::try_from(s).ok()
    }
}

/// A URI reference split per RFC 3986 Appendix B (fragment dropped).
struct Reference<'a> {
    scheme: Option<&'a str>,
    authority: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
}

fn split_reference(s: &str) -> Reference<'_> {
    let s = s.split('#').next().unwrap_or("");
    let mut rest = s;
    let mut scheme = None;
    if let Some(colon) = s.find(':') {
        let candidate = &s[..colon];
        let valid = candidate
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_alphabetic() || (i > 0 && (b.is_ascii_digit() || b"+-.".contains(&b))));
        if !candidate.is_empty() && valid {
            scheme = Some(candidate);
            rest = &s[colon + 1..];
        }
    }
    let mut authority = None;
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?']).unwrap_or(after.len());
        authority = Some(&after[..end]);
        rest = &after[end..];
    }
    let (path, query) = match rest.find('?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    Reference {
        scheme,
        authority,
        path,
        query,
    }
}

/// Splits `host[:port]` (after any userinfo) into lowercase host and port.
fn parse_authority(a: &str) -> Option<(String, Option<u16>)> {
    let a = a.rsplit('@').next().unwrap_or(a);
    let (host, port) = if let Some(end) = a.strip_prefix('[').and_then(|_| a.find(']')) {
        let host = &a[..=end];
        match &a[end + 1..] {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some((host.to_ascii_lowercase(), port))
}

/// Reference resolution (RFC 3986 §5.2.2).
fn resolve(base: &Parts, reference: &str) -> Option<Parts> {
    let r = split_reference(reference);
    let owned = |q: Option<&str>| q.map(str::to_owned);
    if let Some(scheme) = r.scheme {
        return Some(Parts {
            scheme: Some(scheme.to_ascii_lowercase()),
            authority: match r.authority {
                Some(a) => Some(parse_authority(a)?),
                None => None,
            },
            path: remove_dot_segments(r.path),
            query: owned(r.query),
        });
    }
    if let Some(a) = r.authority {
        return Some(Parts {
            scheme: base.scheme.clone(),
            authority: Some(parse_authority(a)?),
            path: remove_dot_segments(r.path),
            query: owned(r.query),
        });
    }
    let (path, query) = if r.path.is_empty() {
        (base.path.clone(), owned(r.query).or_else(|| base.query.clone()))
    } else if r.path.starts_with('/') {
        (remove_dot_segments(r.path), owned(r.query))
    } else {
        (remove_dot_segments(&merge(base, r.path)), owned(r.query))
    };
    Some(Parts {
        scheme: base.scheme.clone(),
        authority: base.authority.clone(),
        path,
        query,
    })
}

/// RFC 3986 §5.2.3.
fn merge(base: &Parts, path: &str) -> String {
    if base.authority.is_some() && base.path.is_empty() {
        return format!("/{path}");
    }
    match base.path.rfind('/') {
        Some(i) => format!("{}{}", &base.path[..=i], path),
        None => path.to_owned(),
    }
}

/// RFC 3986 §5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut output = String::with_capacity(path.len());
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") || input == "/.." {
            input = if input == "/.." { "/" } else { &input[3..] };
            match output.rfind('/') {
                Some(i) => output.truncate(i),
                None => output.clear(),
            }
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            output.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    output
}
