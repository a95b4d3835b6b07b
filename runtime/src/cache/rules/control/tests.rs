use http::header::HeaderName;

use super::*;
use crate::cache::rules::tests::{headers, Pairs};

fn names(list: &[&str]) -> FieldScope {
    FieldScope::Fields(Box::new(
        list.iter()
            .map(|n| HeaderName::from_bytes(n.as_bytes()).unwrap())
            .collect(),
    ))
}

fn cc(lines: &[&str]) -> ResponseDirectives {
    let pairs: Vec<(&str, &str)> = lines.iter().map(|l| ("cache-control", *l)).collect();
    ResponseDirectives::from_headers(&headers(&pairs), None)
}

#[test]
fn response_max_age_and_s_maxage() {
    #[rustfmt::skip]
    let table: &[(&[&str], Option<u32>, Option<u32>)] = &[
        // §5.2.2.1: plain token form
        (&["max-age=60"], Some(60), None),
        // §5.2: recipients accept the quoted-string form too
        (&["max-age=\"60\""], Some(60), None),
        // §5.2: directive names are case-insensitive
        (&["MAX-AGE=60, S-MaxAge=10"], Some(60), Some(10)),
        // §4.2.1: duplicates, the first occurrence counts (same line)
        (&["max-age=60, max-age=10"], Some(60), None),
        // §4.2.1: duplicates across field lines, first line counts
        (&["max-age=10", "max-age=60"], Some(10), None),
        // §4.2.1: invalid (non-integer) value means stale
        (&["max-age=abc"], Some(0), None),
        // §4.2.1: a float is invalid, stale
        (&["max-age=1.5"], Some(0), None),
        // §4.2.1: negative is invalid, stale
        (&["max-age=-1"], Some(0), None),
        // §4.2.1: a suffix is invalid, stale
        (&["max-age=60s"], Some(0), None),
        // §4.2.1: missing argument is invalid, stale
        (&["max-age"], Some(0), None),
        // §4.2.1: empty argument is invalid, stale
        (&["max-age=, public"], Some(0), None),
        // §4.2.1: garbage after the argument makes it invalid
        (&["max-age=60 60"], Some(0), None),
        // §1.2.2: huge values saturate at 2^31
        (&["max-age=99999999999999999999999"], Some(1 << 31), None),
        // §1.2.2: exactly 2^31 - 1 is kept
        (&["max-age=2147483647"], Some(2_147_483_647), None),
        // §5.2.2.10: invalid s-maxage also means stale
        (&["s-maxage=x, max-age=60"], Some(60), Some(0)),
        // §5.2: whitespace around "=" tolerated
        (&["max-age = 60"], Some(60), None),
        // §5.2.3: unknown directives ignored, including their quoted commas
        (&["foo=\"a, max-age=5\", max-age=7"], Some(7), None),
        // §5.2: a leading non-token member is skipped
        (&["\"junk\", max-age=7"], Some(7), None),
        // §5.2: empty list members tolerated (RFC 9110 §5.6.1)
        (&[" , ,max-age=7,,"], Some(7), None),
        // §5.2: absent
        (&["public"], None, None),
    ];
    for (lines, max_age, s_maxage) in table {
        let d = cc(lines);
        assert_eq!(d.max_age, *max_age, "max-age for {lines:?}");
        assert_eq!(d.s_maxage, *s_maxage, "s-maxage for {lines:?}");
        assert!(!d.from_targeted);
    }
}

#[test]
fn response_field_scoped_directives() {
    #[rustfmt::skip]
    let table: &[(&[&str], FieldScope, FieldScope)] = &[
        // §5.2.2.4: unqualified no-cache
        (&["no-cache"], FieldScope::All, FieldScope::None),
        // §5.2.2.4: qualified no-cache, names lowercased
        (&["no-cache=\"Set-Cookie, X-Foo\""], names(&["set-cookie", "x-foo"]), FieldScope::None),
        // §5.2.2.4: token form accepted by recipients
        (&["no-cache=set-cookie"], names(&["set-cookie"]), FieldScope::None),
        // §5.2.2.4: unqualified wins over qualified, whichever comes first
        (&["no-cache=\"a\", no-cache"], FieldScope::All, FieldScope::None),
        // §5.2.2.4: unqualified wins over qualified (other order)
        (&["no-cache", "no-cache=\"a\""], FieldScope::All, FieldScope::None),
        // §5.2.2.4: qualified lists are merged and deduplicated
        (&["no-cache=\"a\"", "no-cache=\"b, A\""], names(&["a", "b"]), FieldScope::None),
        // §5.2.2.4: an empty list is treated as unqualified (conservative)
        (&["no-cache=\"\""], FieldScope::All, FieldScope::None),
        // §5.2.2.4: an invalid field name is treated as unqualified
        (&["no-cache=\"a b\""], FieldScope::All, FieldScope::None),
        // §5.2.2.4: unterminated quoted-string is treated as unqualified
        (&["no-cache=\"a, max-age=5"], FieldScope::All, FieldScope::None),
        // §5.2.2.7: unqualified private
        (&["private"], FieldScope::None, FieldScope::All),
        // §5.2.2.7: qualified private, with quoted-pair escapes
        (&["Private=\"x-us\\er\""], FieldScope::None, names(&["x-user"])),
        // §5.2: names case-insensitive
        (&["NO-CACHE, PRIVATE"], FieldScope::All, FieldScope::All),
    ];
    for (lines, no_cache, private) in table {
        let d = cc(lines);
        assert_eq!(&d.no_cache, no_cache, "no-cache for {lines:?}");
        assert_eq!(&d.private, private, "private for {lines:?}");
    }
}

#[test]
fn response_flags_and_extensions() {
    let d = cc(&[
        "No-Store, Public, Must-Revalidate, proxy-revalidate, must-understand, immutable",
        "stale-while-revalidate=30, stale-if-error=\"600\"",
    ]);
    // §5.2.2.5, §5.2.2.9, §5.2.2.2, §5.2.2.8, §5.2.2.3, RFC 8246, RFC 5861
    assert!(d.no_store && d.public && d.must_revalidate && d.proxy_revalidate);
    assert!(d.must_understand && d.immutable);
    assert_eq!(d.stale_while_revalidate, Some(30));
    assert_eq!(d.stale_if_error, Some(600));

    #[rustfmt::skip]
    let table: &[(&[&str], Option<u32>, Option<u32>)] = &[
        // RFC 5861: an invalid window is ignored, not treated as zero
        (&["stale-while-revalidate=abc, stale-if-error=-5"], None, None),
        // RFC 5861 + §4.2.1: first occurrence counts even when invalid
        (&["stale-if-error=x, stale-if-error=60"], None, None),
        // RFC 5861 + §1.2.2: saturates
        (&["stale-while-revalidate=4294967296"], Some(1 << 31), None),
    ];
    for (lines, swr, sie) in table {
        let d = cc(lines);
        assert_eq!(d.stale_while_revalidate, *swr, "{lines:?}");
        assert_eq!(d.stale_if_error, *sie, "{lines:?}");
    }
    // §5.2.2.9: `public` with an argument is not the public directive
    assert!(!cc(&["public=1"]).public);
    // §5.2.2.5: `no-store` with an argument still forbids storing (most restrictive)
    assert!(cc(&["no-store=1"]).no_store);
}

#[test]
fn allows_authorized_reuse_and_forbids_stale() {
    #[rustfmt::skip]
    let table: &[(&str, bool, bool)] = &[
        // §3.5: public allows sharing an authorized response
        ("public", true, false),
        // §3.5: s-maxage allows it; §4.2.4 + §5.2.2.10: s-maxage forbids stale
        ("s-maxage=10", true, true),
        // §3.5: must-revalidate allows it; §5.2.2.2 forbids stale
        ("must-revalidate", true, true),
        // §3.5: max-age alone does not
        ("max-age=10", false, false),
        // §5.2.2.8: proxy-revalidate forbids stale in shared caches
        ("proxy-revalidate", false, true),
        // §5.2.2.4: no-cache forbids stale (any form)
        ("no-cache=\"x\"", false, true),
    ];
    for (line, auth, no_stale) in table {
        let d = cc(&[line]);
        assert_eq!(d.allows_authorized_reuse(), *auth, "{line}");
        assert_eq!(d.forbids_stale(), *no_stale, "{line}");
    }
}

#[test]
fn targeted_field() {
    let cdn = HeaderName::from_static("cdn-cache-control");
    #[rustfmt::skip]
    let table: &[(Pairs, bool, Option<u32>, bool)] = &[
        // RFC 9213 §2.2: the targeted field replaces Cache-Control
        (&[("cache-control", "private"), ("cdn-cache-control", "max-age=60")], true, Some(60), false),
        // RFC 9213 §2.2: absent → Cache-Control
        (&[("cache-control", "private, max-age=5")], false, Some(5), true),
        // RFC 9213 §2.2: empty → ignored, Cache-Control used
        (&[("cache-control", "max-age=5"), ("cdn-cache-control", "")], false, Some(5), false),
        // RFC 9213 §2.1: invalid SF (uppercase key) → ignored
        (&[("cache-control", "max-age=5"), ("cdn-cache-control", "Max-Age=60")], false, Some(5), false),
        // RFC 9213 §2.1: invalid SF (trailing comma) → ignored
        (&[("cache-control", "max-age=5"), ("cdn-cache-control", "max-age=60,")], false, Some(5), false),
        // RFC 9213 §2.1: invalid SF (unterminated string) → ignored
        (&[("cache-control", "max-age=5"), ("cdn-cache-control", "private=\"a")], false, Some(5), false),
        // RFC 9213 §2.1: a non-Integer max-age is not consumed → stale (0)
        (&[("cdn-cache-control", "max-age=1.5")], true, Some(0), false),
        // RFC 9213 §2.1: a String max-age is not consumed → stale (0)
        (&[("cdn-cache-control", "max-age=\"60\"")], true, Some(0), false),
        // RFC 8941 §4.2.2: duplicate keys, the last one counts
        (&[("cdn-cache-control", "max-age=5, max-age=60")], true, Some(60), false),
        // RFC 8941 §4.2: several field lines are one dictionary
        (&[("cdn-cache-control", "max-age=60"), ("cdn-cache-control", "private")], true, Some(60), true),
        // RFC 9213 §2.1: parameters are ignored
        (&[("cdn-cache-control", "max-age=60;foo=bar, private=?0")], true, Some(60), false),
        // RFC 9213 §2.1: a directive that is not a registered one still makes the field valid
        (&[("cache-control", "no-store"), ("cdn-cache-control", "none")], true, None, false),
    ];
    for (pairs, targeted, max_age, private) in table {
        let d = ResponseDirectives::from_headers(&headers(pairs), Some(&cdn));
        assert_eq!(d.from_targeted, *targeted, "{pairs:?}");
        assert_eq!(d.max_age, *max_age, "{pairs:?}");
        assert_eq!(d.private.is_present(), *private, "{pairs:?}");
        if *targeted {
            assert!(!d.no_store, "{pairs:?}");
        }
    }
    // RFC 9213 §2.1: field lists as String or inner list; booleans
    let d = ResponseDirectives::from_headers(
        &headers(&[(
            "cdn-cache-control",
            "no-cache=\"Set-Cookie\", private=(x-a \"x-b\"), public, immutable=?0, stale-if-error=30, stale-while-revalidate=-1",
        )]),
        Some(&cdn),
    );
    assert_eq!(d.no_cache, names(&["set-cookie"]));
    assert_eq!(d.private, names(&["x-a", "x-b"]));
    assert!(d.public && !d.immutable);
    assert_eq!(d.stale_if_error, Some(30));
    assert_eq!(d.stale_while_revalidate, None);
    // The targeted field name is configurable.
    let own = HeaderName::from_static("edgecache-cache-control");
    let d = ResponseDirectives::from_headers(
        &headers(&[
            ("edgecache-cache-control", "s-maxage=9"),
            ("cdn-cache-control", "max-age=1"),
        ]),
        Some(&own),
    );
    assert_eq!((d.s_maxage, d.max_age), (Some(9), None));
}

#[test]
fn request_directives() {
    #[rustfmt::skip]
    let table: &[(Pairs, RequestDirectives)] = &[
        // §5.2.1.4
        (&[("cache-control", "No-Cache")], RequestDirectives { no_cache: true, ..Default::default() }),
        // §5.4: Pragma: no-cache counts without Cache-Control
        (&[("pragma", "no-cache")], RequestDirectives { no_cache: true, ..Default::default() }),
        // §5.4: Pragma is ignored when Cache-Control is present
        (&[("pragma", "no-cache"), ("cache-control", "max-age=5")], RequestDirectives { max_age: Some(5), ..Default::default() }),
        // §5.4: other pragmas do nothing
        (&[("pragma", "foo, bar=1")], RequestDirectives::default()),
        // §5.2.1.5
        (&[("cache-control", "no-store")], RequestDirectives { no_store: true, ..Default::default() }),
        // §5.2.1.1: invalid max-age counts as 0
        (&[("cache-control", "max-age=x")], RequestDirectives { max_age: Some(0), ..Default::default() }),
        // §5.2.1.2: max-stale without value
        (&[("cache-control", "max-stale")], RequestDirectives { max_stale: Some(MaxStale::Any), ..Default::default() }),
        // §5.2.1.2: max-stale with value (quoted accepted)
        (&[("cache-control", "max-stale=\"30\"")], RequestDirectives { max_stale: Some(MaxStale::Secs(30)), ..Default::default() }),
        // §5.2.1.2: invalid max-stale is ignored
        (&[("cache-control", "max-stale=-3")], RequestDirectives::default()),
        // §5.2.1.3: min-fresh; invalid ignored
        (&[("cache-control", "min-fresh=10, min-fresh=20")], RequestDirectives { min_fresh: Some(10), ..Default::default() }),
        // §5.2.1.3
        (&[("cache-control", "min-fresh=1e3")], RequestDirectives::default()),
        // §5.2.1.7
        (&[("cache-control", "ONLY-IF-CACHED")], RequestDirectives { only_if_cached: true, ..Default::default() }),
    ];
    for (pairs, want) in table {
        assert_eq!(
            RequestDirectives::from_headers(&headers(pairs)),
            *want,
            "{pairs:?}"
        );
    }
}

#[test]
fn tokenizer_members() {
    // RFC 9110 §5.6.1 / §5.6.4: members, quoted commas, escapes
    let got: Vec<_> = Directives::new(b"a, b=1 ,c=\"x,\\\"y\", d=\"open").collect();
    assert_eq!(
        got,
        vec![
            Directive {
                name: b"a",
                arg: Arg::None
            },
            Directive {
                name: b"b",
                arg: Arg::Token(b"1")
            },
            Directive {
                name: b"c",
                arg: Arg::Quoted(b"x,\\\"y")
            },
            Directive {
                name: b"d",
                arg: Arg::Invalid
            },
        ]
    );
}
