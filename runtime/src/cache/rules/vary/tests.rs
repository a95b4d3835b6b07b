use http::header::HeaderName;

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

fn fields(list: &[&'static str]) -> VaryRule {
    VaryRule::Fields(list.iter().map(|n| HeaderName::from_static(n)).collect())
}

#[test]
fn rule_from_response() {
    #[rustfmt::skip]
    let table: &[(&[&str], VaryRule)] = &[
        // §4.1: no Vary
        (&[], VaryRule::None),
        // §4.1: an empty Vary selects nothing
        (&[""], VaryRule::None),
        // §4.1: "*"
        (&["*"], VaryRule::Star),
        // §4.1: "*" first in a list
        (&["*, accept"], VaryRule::Star),
        // §4.1: "*" last in a list
        (&["accept,*"], VaryRule::Star),
        // §4.1: "*" on another field line
        (&["accept", " * "], VaryRule::Star),
        // §4.1: an invalid member can never match either
        (&["accept, a b"], VaryRule::Star),
        // §4.1: names are case-insensitive, sorted, deduplicated across lines
        (&["Accept-Encoding, accept", "ACCEPT-encoding"], fields(&["accept", "accept-encoding"])),
        // RFC 9110 §5.6.1: empty members ignored
        (&[" , Origin ,,"], fields(&["origin"])),
    ];
    for (lines, want) in table {
        let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("vary", *l)).collect();
        assert_eq!(&VaryRule::from_response(&headers(&pairs)), want, "{lines:?}");
    }
}

#[test]
fn matching_requests() {
    let ae = fields(&["accept-encoding"]);
    let ua = fields(&["user-agent"]);
    let two = fields(&["accept", "accept-language"]);
    #[rustfmt::skip]
    let table: &[(&VaryRule, Pairs, Pairs, bool)] = &[
        // §4.1: identical values match
        (&ae, &[("accept-encoding", "gzip")], &[("accept-encoding", "gzip")], true),
        // §4.1: different values do not
        (&ae, &[("accept-encoding", "gzip")], &[("accept-encoding", "br")], false),
        // §4.1: whitespace around commas where the syntax allows it
        (&ae, &[("accept-encoding", "gzip,deflate")], &[("accept-encoding", "gzip ,  deflate")], true),
        // §4.1: combining field lines
        (&ae, &[("accept-encoding", "gzip, deflate")], &[("accept-encoding", "gzip"), ("accept-encoding", "deflate")], true),
        // §4.1: whitespace around ";" and "=" in parameters
        (&ae, &[("accept-encoding", "gzip;q=1.0")], &[("accept-encoding", "gzip ; q = 1.0")], true),
        // §4.1: content-codings are case-insensitive (RFC 9110 §8.4.1)
        (&ae, &[("accept-encoding", "GZIP")], &[("accept-encoding", "gzip")], true),
        // §4.1: order is significant (not reordered)
        (&ae, &[("accept-encoding", "gzip, br")], &[("accept-encoding", "br, gzip")], false),
        // §4.1: absent matches only absent
        (&ae, &[], &[], true),
        // §4.1: absent differs from empty
        (&ae, &[], &[("accept-encoding", "")], false),
        // §4.1: absent differs from present
        (&ae, &[], &[("accept-encoding", "gzip")], false),
        // §4.1: empty list members are not values
        (&ae, &[("accept-encoding", "gzip,,br")], &[("accept-encoding", "gzip, br")], true),
        // §4.1: other fields keep their case
        (&ua, &[("user-agent", "Foo/1")], &[("user-agent", "foo/1")], false),
        // §4.1: internal whitespace runs collapse to one SP, but do not vanish
        (&ua, &[("user-agent", "Foo/1  (X)")], &[("user-agent", "Foo/1 (X)")], true),
        // §4.1: ... so tokens separated by whitespace stay distinct
        (&ua, &[("user-agent", "Foo/1 (X)")], &[("user-agent", "Foo/1(X)")], false),
        // §4.1: quoted strings are compared verbatim
        (&ua, &[("user-agent", "a \"x  y\"")], &[("user-agent", "a \"x y\"")], false),
        // §4.1: a quoted comma is not a list separator
        (&ua, &[("user-agent", "\"a,b\"")], &[("user-agent", "\"a, b\"")], false),
        // §4.1: several fields must all match
        (&two, &[("accept", "text/html"), ("accept-language", "en")], &[("accept", "text/html"), ("accept-language", "EN")], true),
        // §4.1: several fields, one differs
        (&two, &[("accept", "text/html"), ("accept-language", "en")], &[("accept", "text/plain"), ("accept-language", "en")], false),
        // §4.1: a value cannot pose as another field's value
        (&two, &[("accept", "a"), ("accept-language", "")], &[("accept", "")], false),
        // §4.1: no Vary matches every request
        (&VaryRule::None, &[("accept", "a")], &[("accept", "b")], true),
        // §4.1: Vary: * matches nothing, even identical requests
        (&VaryRule::Star, &[], &[], false),
    ];
    for (rule, stored_req, req, want) in table {
        let stored = rule.request_fingerprint(&headers(stored_req));
        let got = match &stored {
            Some(fp) => rule.matches(&headers(req), fp),
            None => false,
        };
        assert_eq!(got, *want, "{rule:?} {stored_req:?} vs {req:?}");
        // The allocating form agrees with `matches`.
        let equal = stored.is_some() && stored == rule.request_fingerprint(&headers(req));
        assert_eq!(equal, *want, "fingerprint equality {stored_req:?} vs {req:?}");
    }
}

#[test]
fn prefix_fingerprint_does_not_match() {
    // §4.1: a longer request value must not match a stored prefix
    let rule = fields(&["accept"]);
    let fp = rule.request_fingerprint(&headers(&[("accept", "a")])).unwrap();
    assert!(!rule.matches(&headers(&[("accept", "ab")]), &fp));
    assert!(!rule.matches(&headers(&[("accept", "a")]), &fp[..fp.len() - 1]));
}
