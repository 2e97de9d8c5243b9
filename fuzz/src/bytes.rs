//! A fuzz input read as a stream of small choices.

/// The special `f64` values the targets draw now and then: zeros, infinities, NaN, extremes
/// and a subnormal.
pub const SPECIAL_F64: [f64; 10] = [
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MAX,
    f64::MIN_POSITIVE,
    1e-310,
    -1e300,
    0.1,
];

/// The input's bytes, read one at a time (zeros past the end).
pub struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, at: 0 }
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// Whether every byte was read.
    pub fn done(&self) -> bool {
        self.at >= self.data.len()
    }

    /// A small number below `n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }

    /// A tile, offset, shift or integer constant: mostly small, now and then at the integer
    /// limits.
    pub fn word(&mut self) -> i64 {
        match self.byte() {
            250 => i64::MAX,
            251 => i64::MIN,
            252 => 1 << 40,
            253 => -(1 << 40),
            b => i64::from(b % 16) - 4,
        }
    }

    /// An `f64`: small values, and the special ones (zeros, infinities, NaN, extremes).
    pub fn float(&mut self) -> f64 {
        match self.byte() {
            b @ 240..=249 => SPECIAL_F64[usize::from(b - 240)],
            b => f64::from(b) * 0.125 - 8.0,
        }
    }
}
