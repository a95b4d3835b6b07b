//! Varnish's builtin `vcl_backend_response`, natively, with edgecache's own storage rules (those
//! without a policy) in place of Varnish's header tests, so that a policy that changes nothing
//! stores what no policy stores. The VCL session runs it where `builtin.vcl`'s
//! `vcl_builtin_backend_response` is called and no user sub extends it
//! (`Context::builtin_backend_response`).

use http::header::{HeaderMap, HeaderName};
use http::{response, Method};

use crate::cache::rules::control::ResponseDirectives;
use crate::cache::rules::storable::{self, StoreOptions};

/// `beresp.ttl` of a hit-for-miss object, as `builtin.vcl`'s `vcl_beresp_hitmiss` sets it.
pub(super) const HIT_FOR_MISS_TTL: f64 = 120.0;

/// What the builtin `vcl_backend_response` judges a response by: the options of the storage
/// rules and the targeted cache-control field (RFC 9213), as without a policy.
#[derive(Clone, Debug)]
pub(super) struct StoreRules {
    pub storing: StoreOptions,
    pub targeted: Option<HeaderName>,
}

/// How the builtin `vcl_backend_response` ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It falls through: the response is stored for `beresp.ttl`, grace and keep.
    FallThrough,
    /// `return (deliver)` for an uncacheable fetch (a pass).
    Deliver,
    /// `vcl_beresp_hitmiss`: hit-for-miss for [`HIT_FOR_MISS_TTL`], then `return (deliver)`.
    HitForMiss,
}

/// Varnish's builtin `vcl_backend_response` with edgecache's storage rules in place of
/// Varnish's header tests (`vcl_beresp_stale`, `_cookie`, `_control`, `_vary`): a response
/// becomes hit-for-miss when the rules without a policy would not store it (RFC 9111 §3:
/// `no-store` unless `must-understand` allows it, unqualified `private`, `Vary: *`,
/// `Set-Cookie` unless `--store-set-cookie`, unqualified `no-cache` without a validator, the
/// targeted field in place of `Cache-Control`), or when it has no use left: `ttl` (what
/// `beresp.ttl` is now) not above 0, no validator to revalidate with and no stale window. So
/// `max-age=0` with an `ETag` is stored and revalidated, and `no-cache="Set-Cookie"` stored
/// without the field, as without a policy. A pass (`uncacheable`) is delivered as is.
/// `Content-Range` is kept whatever the status, as without a policy: RFC 9111 §3.1 has a cache
/// store every field it receives but the hop-by-hop ones, where Varnish's `vcl_beresp_range`
/// removes it from responses other than 206 and 416 (a policy that calls or extends that sub
/// gets Varnish's text).
/// A response without freshness information is stored when `beresp.ttl` is above 0 (the
/// policy set it), as Varnish does.
/// Decides on the response as the user's `vcl_backend_response` left it.
pub(super) fn vcl_backend_response(
    beresp: &response::Parts,
    bereq: &HeaderMap,
    uncacheable: bool,
    ttl: f64,
    rules: &StoreRules,
) -> Verdict {
    if uncacheable {
        return Verdict::Deliver;
    }
    let fields = &beresp.headers;
    let directives = ResponseDirectives::from_headers(fields, rules.targeted.as_ref());
    // A `beresp.ttl` the policy set is a lifetime as explicit as `max-age` (Varnish stores by it).
    let storable = match storable::check_storable(
        &Method::GET,
        bereq,
        beresp.status,
        fields,
        &directives,
        &rules.storing,
    ) {
        Ok(()) => true,
        Err(storable::NotStorable::NoFreshness) => ttl > 0.0,
        Err(_) => false,
    };
    let stale_window = !directives.forbids_stale()
        && (directives.stale_while_revalidate.unwrap_or(0) > 0 || directives.stale_if_error.unwrap_or(0) > 0);
    let some_use = ttl > 0.0 || storable::has_validator(fields) || stale_window;
    // Varnish's own test of its targeted field, kept for the origins that send it.
    let surrogate_no_store = fields.get_all("surrogate-control").iter().any(|value| {
        value
            .as_bytes()
            .to_ascii_lowercase()
            .windows(8)
            .any(|w| w == b"no-store")
    });
    if storable && some_use && !surrogate_no_store {
        Verdict::FallThrough
    } else {
        Verdict::HitForMiss
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};

    use super::{vcl_backend_response, StoreRules, Verdict};
    use crate::cache::rules::storable::StoreOptions;

    /// (status, response fields, `beresp.ttl`, `bereq.uncacheable`, verdict)
    type Row = (u16, &'static [(&'static str, &'static str)], f64, bool, Verdict);

    #[test]
    fn builtin_backend_response_judges_by_the_rules_without_a_policy() {
        use Verdict::{Deliver, FallThrough as Store, HitForMiss as Miss};
        #[rustfmt::skip]
        let table: &[Row] = &[
            // RFC 9111 §3: fresh and storable
            (200, &[("cache-control", "max-age=60")], 60.0, false, Store),
            // a pass is delivered as it is
            (200, &[("cache-control", "no-store")], 0.0, true, Deliver),
            // RFC 9111 §5.2.2.5, §5.2.2.7, §4.1: no-store, private, Vary: *
            (200, &[("cache-control", "no-store, max-age=60")], 60.0, false, Miss),
            (200, &[("cache-control", "private, max-age=60")], 60.0, false, Miss),
            (200, &[("cache-control", "max-age=60"), ("vary", "*")], 60.0, false, Miss),
            // RFC 9111 §5.2.2.3: must-understand lets a known status be stored despite no-store
            (200, &[("cache-control", "must-understand, no-store, max-age=60")], 60.0, false, Store),
            // RFC 9111 §5.2.2.7, §5.2.2.4: qualified forms only strip their fields
            (200, &[("cache-control", "private=\"x-user\", max-age=60")], 60.0, false, Store),
            (200, &[("cache-control", "no-cache=\"set-cookie\", max-age=60"), ("set-cookie", "a=1")], 60.0, false, Store),
            // Varnish's choice: Set-Cookie is not stored
            (200, &[("cache-control", "max-age=60"), ("set-cookie", "a=1")], 60.0, false, Miss),
            // RFC 9111 §5.2.2.4: no-cache is stored to be revalidated when there is a validator
            (200, &[("cache-control", "no-cache"), ("etag", "\"v\"")], 0.0, false, Store),
            (200, &[("cache-control", "no-cache")], 0.0, false, Miss),
            // RFC 9111 §4.3: no freshness left, but a validator to revalidate with
            (200, &[("cache-control", "max-age=0"), ("etag", "\"v\"")], 0.0, false, Store),
            (200, &[("cache-control", "max-age=0")], 0.0, false, Miss),
            // RFC 5861: a stale window the response grants itself
            (200, &[("cache-control", "max-age=0, stale-while-revalidate=30")], 0.0, false, Store),
            // a beresp.ttl the policy set is freshness, as in Varnish
            (200, &[], 3600.0, false, Store),
            (200, &[], 0.0, false, Miss),
            // RFC 9213: the targeted field replaces Cache-Control
            (200, &[("cache-control", "no-store"), ("cdn-cache-control", "max-age=60")], 60.0, false, Store),
            (200, &[("cache-control", "max-age=60"), ("cdn-cache-control", "no-store")], 60.0, false, Miss),
            // Varnish's Surrogate-Control: no-store
            (200, &[("cache-control", "max-age=60"), ("surrogate-control", "No-Store")], 60.0, false, Miss),
        ];
        let rules = StoreRules {
            storing: StoreOptions::default(),
            targeted: Some(HeaderName::from_static("cdn-cache-control")),
        };
        for (status, fields, ttl, uncacheable, want) in table {
            let mut beresp = Response::new(()).into_parts().0;
            beresp.status = StatusCode::from_u16(*status).unwrap();
            for (name, value) in *fields {
                beresp
                    .headers
                    .append(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
            let got = vcl_backend_response(&beresp, &HeaderMap::new(), *uncacheable, *ttl, &rules);
            assert_eq!(got, *want, "{status} {fields:?} ttl={ttl}");
        }
    }

    #[test]
    fn content_range_is_stored_whatever_the_status() {
        // RFC 9111 §3.1: every received field but the hop-by-hop ones is stored.
        let rules = StoreRules {
            storing: StoreOptions::default(),
            targeted: None,
        };
        for status in [200, 206, 416] {
            let mut beresp = Response::new(()).into_parts().0;
            beresp.status = StatusCode::from_u16(status).unwrap();
            beresp
                .headers
                .insert("content-range", HeaderValue::from_static("bytes 0-1/2"));
            vcl_backend_response(&beresp, &HeaderMap::new(), false, 60.0, &rules);
            assert!(beresp.headers.contains_key("content-range"), "{status}");
        }
    }
}
