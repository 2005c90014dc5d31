//! FNV-1a: a small stable hash for seeds and fingerprints (the same input
//! gives the same value on every machine and in every release).

/// The 64-bit FNV-1a hash of `s`.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
