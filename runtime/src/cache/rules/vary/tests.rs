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
    let al = fields(&["accept-language"]);
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
        // §4.1 + RFC 9110 §12.4.2: a weighted list's order carries no meaning
        (&ae, &[("accept-encoding", "gzip, br")], &[("accept-encoding", "br, gzip")], true),
        // §4.1 + RFC 9110 §12.4.2: q=1, q=1.000 and no weight are the same weight
        (&ae, &[("accept-encoding", "gzip;q=1, br;q=1.000")], &[("accept-encoding", "br, gzip")], true),
        // §4.1 + RFC 9110 §12.4.2: trailing zeros of a weight do not count
        (&ae, &[("accept-encoding", "gzip;q=0.50")], &[("accept-encoding", "gzip; Q=0.5")], true),
        // §4.1 + RFC 9110 §12.4.2: q=0 (not acceptable) in any spelling
        (&ae, &[("accept-encoding", "gzip, br;q=0")], &[("accept-encoding", "br;q=0.000,gzip")], true),
        // §4.1 + RFC 9110 §12.4.2: another weight is another variant
        (&ae, &[("accept-encoding", "gzip, br;q=0.5")], &[("accept-encoding", "gzip, br;q=0.4")], false),
        // §4.1 + RFC 9110 §12.4.2: an item more or less is another variant
        (&ae, &[("accept-encoding", "gzip, br")], &[("accept-encoding", "gzip")], false),
        // §4.1: not a weighted list (another parameter): compared as written, lowercased
        (&ae, &[("accept-encoding", "gzip;level=1, br")], &[("accept-encoding", "GZIP;level=1,br")], true),
        (&ae, &[("accept-encoding", "gzip;level=1, br")], &[("accept-encoding", "br, gzip;level=1")], false),
        // §4.1: an invalid weight is compared as written, never equal to a valid one
        (&ae, &[("accept-encoding", "gzip;q=2")], &[("accept-encoding", "gzip")], false),
        (&ae, &[("accept-encoding", "gzip;q=0.5")], &[("accept-encoding", "gzip;q=0.5000")], false),
        // RFC 9110 §12.5.4 + RFC 4647: language tags in any case and order, with weights
        (&al, &[("accept-language", "en-US, fr;q=0.8, de;q=0.5")], &[("accept-language", "de;q=0.50,FR;q=0.8 , en-us")], true),
        // RFC 9110 §12.5.4: the same tags with other weights differ
        (&al, &[("accept-language", "en, fr;q=0.8")], &[("accept-language", "fr, en;q=0.8")], false),
        // RFC 9110 §12.5.4: a range is not its prefix
        (&al, &[("accept-language", "en")], &[("accept-language", "en-us")], false),
        // RFC 9110 §12.5.4: "*" is an item like any other
        (&al, &[("accept-language", "*;q=0.1, en")], &[("accept-language", "en,*;q=0.1")], true),
        // §4.1: more items than are put in order: compared as written
        (&al, &[("accept-language", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q")], &[("accept-language", "a, b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q")], true),
        (&al, &[("accept-language", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q")], &[("accept-language", "b,a,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q")], false),
        // §4.1: the canonical form of one value never equals the verbatim form of another
        (&al, &[("accept-language", "en")], &[("accept-language", "en;x")], false),
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

#[test]
fn requests_accepting_gzip() {
    #[rustfmt::skip]
    let table: &[(Pairs, bool)] = &[
        // RFC 9110 §12.5.3: gzip named, no weight (1)
        (&[("accept-encoding", "gzip")], true),
        // RFC 9110 §12.5.3: among others, any case, any line
        (&[("accept-encoding", "br"), ("accept-encoding", "deflate, GZip")], true),
        // RFC 9110 §12.5.3: a weight above 0
        (&[("accept-encoding", "br, gzip;q=0.001")], true),
        // RFC 9110 §12.5.3: q=0 is "not acceptable"
        (&[("accept-encoding", "gzip;q=0, br")], false),
        (&[("accept-encoding", "gzip ; Q = 0.000")], false),
        // RFC 9110 §8.4.1.3: x-gzip is gzip, with no weights
        (&[("accept-encoding", "x-gzip;q=0")], true),
        // RFC 9110 §12.5.3: other parameters do not matter
        (&[("accept-encoding", "gzip;level=9")], true),
        // an invalid weight is not acceptance
        (&[("accept-encoding", "gzip;q=high")], false),
        // RFC 9110 §12.5.3: "*" is not gzip by name (Varnish's rule)
        (&[("accept-encoding", "*")], false),
        // RFC 9110 §12.5.3: a coding that only starts with gzip
        (&[("accept-encoding", "gzipped")], false),
        // RFC 9110 §12.5.3: none, empty, or identity only
        (&[], false),
        (&[("accept-encoding", "")], false),
        (&[("accept-encoding", "identity")], false),
    ];
    for (pairs, want) in table {
        assert_eq!(accepts_gzip(&headers(pairs)), *want, "{pairs:?}");
    }
}
