use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, ETAG, SET_COOKIE};

use super::StoredHeaders;

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
    let stored = StoredHeaders::from_map(&map);
    assert_eq!(lines(&stored.to_map(4)), lines(&map));
    assert!(
        stored.to_map(4).capacity() >= map.len() + 4,
        "room for what a hit adds"
    );
    assert_eq!(
        stored.get(&SET_COOKIE).unwrap(),
        "a=1",
        "the first value, as HeaderMap::get"
    );
    let cookies: Vec<_> = stored.get_all(&SET_COOKIE).collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(stored.get(&HeaderName::from_static("x-custom")).unwrap(), "one");
    assert!(stored.get(&HeaderName::from_static("x-absent")).is_none());
}

#[test]
fn stored_values_share_one_buffer_of_their_own_size_not_the_read_buffer() {
    let map = parsed(&[("etag", "\"abc\""), ("cache-control", "max-age=60"), ("x-a", "1")]);
    let stored = StoredHeaders::from_map(&map);
    let values: Vec<&HeaderValue> = stored.fields.iter().map(|(_, value)| value).collect();
    for pair in values.windows(2) {
        // Consecutive slices of one buffer: each starts where the one before ends.
        let end = pair[0].as_bytes().as_ptr_range().end;
        assert_eq!(end, pair[1].as_bytes().as_ptr(), "one buffer");
    }
    let originals: Vec<_> = map.values().map(|value| value.as_bytes().as_ptr()).collect();
    assert!(
        values
            .iter()
            .all(|value| !originals.contains(&value.as_bytes().as_ptr())),
        "copied"
    );
}

#[test]
fn an_edit_is_kept_packed() {
    let mut stored = StoredHeaders::from_map(&parsed(&[("etag", "\"v1\""), ("cache-control", "max-age=60")]));
    let removed = stored.edit(|fields| {
        fields.insert(ETAG, HeaderValue::from_static("W/\"v1\""));
        fields.remove(CACHE_CONTROL)
    });
    assert_eq!(removed.unwrap(), "max-age=60");
    assert_eq!(
        lines(&stored.to_map(0)),
        [("etag".to_owned(), "W/\"v1\"".to_owned())]
    );
}
