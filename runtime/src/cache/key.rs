//! Cache keys: the bytes that identify an object before `Vary` selects a variant.

use std::sync::Arc;

/// The primary key of a cached object. By default host + path + query, so GET and HEAD share
/// objects; a policy's `vcl_hash` can build it from other parts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(Arc<[u8]>);

impl CacheKey {
    /// The default key: `Host` (lower-cased, as hosts are case-insensitive) and the request target.
    pub fn from_host_and_target(host: &str, path_and_query: &str) -> CacheKey {
        let mut bytes = Vec::with_capacity(host.len() + 1 + path_and_query.len());
        bytes.extend(host.bytes().map(|b| b.to_ascii_lowercase()));
        // A separator that cannot occur in a host keeps `a` + `b/c` apart from `ab` + `/c`.
        bytes.push(0);
        bytes.extend_from_slice(path_and_query.as_bytes());
        CacheKey(bytes.into())
    }

    /// Bytes of the key.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// A key from what the policy's `vcl_hash` fed to `hash_data`.
    pub fn from_hash_data(data: &[u8]) -> CacheKey {
        CacheKey(data.into())
    }
}
