//! The seeds of a program's random arrays. Also compiled into the application components of
//! `examples/apps` (by path), so that a program gives the same arrays built either way.

/// A seed for the `stream`-th random array of a program run with `seed` (SplitMix64 of the
/// pair, so that nearby seeds give unrelated arrays).
pub fn sub_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed
        .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
