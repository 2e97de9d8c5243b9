//! Deterministic test values for this crate's unit tests.

/// `n` values in `[-1, 1)` from an xorshift generator seeded by `seed`: not round, so that
/// the order of additions shows in their sums' bits.
pub(crate) fn uniform(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}
