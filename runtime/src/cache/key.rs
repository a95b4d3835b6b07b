//! Cache keys: the bytes that identify an object before `Vary` selects a variant, and the
//! request field washed so that variants are few (`Accept-Encoding`).

use std::sync::Arc;

use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING};

use super::rules::vary::accepts_gzip;

/// The hasher of every map keyed by [`CacheKey`] that a request consults (the store, the
/// hit-for-pass and pass-only marks, the slice index). std's SipHash took about 240
/// instructions per lookup for a 30-byte key; foldhash takes a fraction of that. Keys are the
/// clients' URLs: foldhash is only minimally DoS-resistant (its authors' words), against
/// SipHash's stronger claim, but its per-process random seed still keeps a client from aiming
/// keys at one bucket without seeing the seed. The `quality` variant, since moka's admission
/// sketch counts by the same hash.
pub type KeyHasher = foldhash::quality::RandomState;

/// The primary key of a cached object. By default host + path + query, so GET and HEAD share
/// objects; a policy's `vcl_hash` can build it from other parts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(Arc<[u8]>);

impl CacheKey {
    /// The default key: `Host` (lower-cased, as hosts are case-insensitive) and the request target.
    pub fn from_host_and_target(host: &str, path_and_query: &str) -> CacheKey {
        // A separator that cannot occur in a host keeps `a` + `b/c` apart from `ab` + `/c`.
        // Collected from an iterator of known length, the key is written into its `Arc` at
        // once (a `Vec` would be a second allocation, copied).
        let bytes = host
            .bytes()
            .map(|b| b.to_ascii_lowercase())
            .chain(std::iter::once(0))
            .chain(path_and_query.bytes());
        CacheKey(bytes.collect())
    }

    /// Bytes of the key.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Bytes of the key, to derive others from.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A key from what the policy's `vcl_hash` fed to `hash_data`.
    pub fn from_hash_data(data: &[u8]) -> CacheKey {
        CacheKey(data.into())
    }
}

/// Washes `Accept-Encoding` of a request that is looked up, as Varnish's `http_gzip_support`
/// does before `vcl_hash`: `gzip` when the request accepts gzip ([`accepts_gzip`]), else
/// removed. The origin, asked with the washed request, answers gzip or identity, so a
/// `Vary: Accept-Encoding` object has at most two variants, and each is one its clients can
/// decode (a client asking for `br, gzip` gets gzip). Passed and piped requests keep theirs.
pub fn wash_accept_encoding(request: &mut HeaderMap) {
    if accepts_gzip(request) {
        let mut lines = request.get_all(ACCEPT_ENCODING).iter();
        if !(lines.next().is_some_and(|v| v == "gzip") && lines.next().is_none()) {
            request.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        }
    } else {
        request.remove(ACCEPT_ENCODING);
    }
}

#[cfg(test)]
mod tests {
    use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING};

    use super::wash_accept_encoding;

    #[test]
    fn accept_encoding_is_washed_to_gzip_or_nothing() {
        #[rustfmt::skip]
        let table: &[(&[&str], Option<&str>)] = &[
            // Varnish http_gzip_support: gzip accepted -> exactly `gzip`
            (&["gzip"], Some("gzip")),
            (&["br, gzip;q=0.5, deflate"], Some("gzip")),
            (&["br", "GZIP"], Some("gzip")),
            (&["x-gzip"], Some("gzip")),
            // not accepted -> removed
            (&["br"], None),
            (&["gzip;q=0"], None),
            (&["identity"], None),
            (&[""], None),
            (&[], None),
        ];
        for (lines, want) in table {
            let mut headers = HeaderMap::new();
            for line in *lines {
                headers.append(ACCEPT_ENCODING, HeaderValue::from_str(line).unwrap());
            }
            wash_accept_encoding(&mut headers);
            let got: Vec<_> = headers.get_all(ACCEPT_ENCODING).iter().collect();
            let want: Vec<HeaderValue> = want.iter().map(|v| HeaderValue::from_static(v)).collect();
            assert_eq!(got, want.iter().collect::<Vec<_>>(), "{lines:?}");
        }
    }
}
