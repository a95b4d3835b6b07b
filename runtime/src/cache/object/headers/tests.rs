use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, ETAG, SET_COOKIE};

use super::{field_text, Requested, StoredHeaders};

/// A map as hyper leaves one: every value a slice of one larger buffer (the connection's).
fn parsed(fields: &[(&str, &str)]) -> HeaderMap {
    let read_buffer =
        Bytes::from(fields.iter().map(|(_, value)| *value).collect::<String>() + &"x".repeat(8192));
    let mut map = HeaderMap::new();
    let mut offset = 0;
    for (name, value) in fields {
        let end = offset + value.len();
        let value = HeaderValue::from_maybe_shared(read_buffer.slice(offset..end)).unwrap();
        map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), value);
        offset = end;
    }
    map
}

fn lines(map: &HeaderMap) -> Vec<(String, String)> {
    map.iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn a_map_comes_back_as_it_went_in_repeated_fields_and_order_included() {
    let map = parsed(&[
        ("cache-control", "max-age=60"),
        ("set-cookie", "a=1"),
        ("x-custom", "one"),
        ("set-cookie", "b=2"),
        ("etag", "\"v1\""),
    ]);
    let stored = StoredHeaders::new(Requested::default(), &map);
    assert_eq!(lines(&stored.to_map(4)), lines(&map));
    assert!(
        stored.to_map(4).capacity() >= map.len() + 4,
        "room for what a hit adds"
    );
    assert_eq!(
        stored.get(&SET_COOKIE).unwrap(),
        b"a=1",
        "the first value, as HeaderMap::get"
    );
    let cookies: Vec<_> = stored.get_all(&SET_COOKIE).collect();
    assert_eq!(cookies, [b"a=1", b"b=2"]);
    assert_eq!(stored.get(&HeaderName::from_static("x-custom")).unwrap(), b"one");
    assert!(stored.get(&HeaderName::from_static("x-absent")).is_none());
}

#[test]
fn stored_values_are_slices_of_one_buffer_of_their_own_size_not_the_read_buffer() {
    let map = parsed(&[("etag", "\"abc\""), ("cache-control", "max-age=60"), ("x-a", "1")]);
    let stored = StoredHeaders::new(Requested::default(), &map);
    let buffer = stored.packed.as_ptr_range();
    let copies = stored.to_map(0);
    for value in copies.values() {
        assert!(
            buffer.contains(&value.as_bytes().as_ptr()),
            "in the packed buffer"
        );
    }
    let values: usize = map.values().map(HeaderValue::len).sum();
    assert_eq!(stored.packed.len(), 16 + 3 * 5 + values, "exactly their size");
}

#[test]
fn what_it_was_requested_for_comes_back_beside_the_fields() {
    let mut secret = HeaderValue::from_static("token");
    secret.set_sensitive(true);
    let mut map = parsed(&[("x-first", "1"), ("etag", "\"e\""), ("x-second", "2")]);
    map.append(HeaderName::from_static("x-secret"), secret);
    for requested in [
        Requested {
            url: "/a?b=c",
            host: Some("example.com"),
            variant: Some(b"gzip\0"),
        },
        Requested {
            url: "/",
            host: None,
            variant: Some(b""),
        },
        Requested {
            url: "",
            host: Some(""),
            variant: None,
        },
    ] {
        let stored = StoredHeaders::new(requested, &map);
        assert_eq!(stored.requested(), requested);
        assert_eq!(stored.variant(), requested.variant);
        assert_eq!(
            lines(&stored.to_map(0)),
            lines(&map),
            "custom names in their places"
        );
        let copy = stored.to_map(0);
        assert!(copy.get("x-secret").unwrap().is_sensitive(), "sensitive kept");
        assert!(!copy.get(ETAG).unwrap().is_sensitive());
    }
}

#[test]
fn an_edit_is_kept_packed() {
    let requested = Requested {
        url: "/kept",
        ..Requested::default()
    };
    let mut stored = StoredHeaders::new(
        requested,
        &parsed(&[("etag", "\"v1\""), ("cache-control", "max-age=60")]),
    );
    let removed = stored.edit(|fields| {
        fields.insert(ETAG, HeaderValue::from_static("W/\"v1\""));
        fields.remove(CACHE_CONTROL)
    });
    assert_eq!(removed.unwrap(), "max-age=60");
    assert_eq!(
        lines(&stored.to_map(0)),
        [("etag".to_owned(), "W/\"v1\"".to_owned())]
    );
    assert_eq!(
        stored.requested().url,
        "/kept",
        "an edit keeps what it was requested for"
    );
}

#[test]
fn a_value_is_text_exactly_when_http_reads_it_as_text() {
    for value in [&b"max-age=60"[..], b"a\tb", b"", b"caf\xc3\xa9", b"obs\x80"] {
        let header = HeaderValue::from_bytes(value).unwrap();
        assert_eq!(field_text(value), header.to_str().ok(), "{value:?}");
    }
}
