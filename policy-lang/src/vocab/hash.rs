//! The stable 64-bit hashes of the `hash` director: of a key, of a member, and their mixing.

/// The hash of a `hash` director key.
pub(crate) fn key_hash(key: &str) -> u64 {
    fmix64(fnv1a(key.as_bytes()))
}

/// A `hash` director member's seed: from the backend's name, so it does not
/// depend on the member's position; `dup` tells apart repeated additions of
/// one backend.
pub(crate) fn member_seed(name: &str, dup: u64) -> u64 {
    fmix64(fnv1a(name.as_bytes()) ^ dup.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995_7f4a_7c15)
}

fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
pub(crate) fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}
