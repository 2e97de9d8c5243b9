//! Random numbers built on the counter-based uniform generator, so that element `i` depends
//! only on the seed and `i`, never on tiling, threads or ranks: normal numbers (the
//! Box-Muller transform of two uniform arrays), integers and draws from an array.

use weft_ir::DType;

use super::{Array, Error, Numeric};

/// The seeds of the two uniform streams a normal array is made from (SplitMix64 steps of
/// `seed`, so that the streams are unrelated to each other and to `random_uniform(seed)`).
fn stream_seeds(seed: u64) -> (u64, u64) {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let a = mix(seed ^ 0x6E6F_726D_616C_0001);
    (a, mix(a))
}

impl Numeric {
    /// Normal random numbers with mean `loc` and standard deviation `scale` (NumPy's
    /// `normal`), from a counter-based generator keyed by `seed`: `loc + scale * sqrt(-2
    /// ln(1 - u1)) * cos(2 pi u2)` with `u1`, `u2` from [`Numeric::random_uniform`] on two
    /// streams derived from the seed. The same seed gives the same array whatever the
    /// partitioning. `dtype` is `f32` or `f64`.
    #[track_caller]
    pub fn random_normal(
        &self,
        shape: &[u64],
        loc: f64,
        scale: f64,
        seed: u64,
        dtype: DType,
    ) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        let (s1, s2) = stream_seeds(seed);
        let u1 = self.random_uniform(shape, 0.0, 1.0, s1, dtype);
        let u2 = self.random_uniform(shape, 0.0, 1.0, s2, dtype);
        let radius = (-2.0 * (1.0 - u1).log()).sqrt();
        let z = radius * (2.0 * std::f64::consts::PI * u2).cos();
        loc + scale * z
    }

    /// The two uniform arrays [`Numeric::random_normal`] transforms, for checking it.
    #[track_caller]
    pub fn random_normal_sources(&self, shape: &[u64], seed: u64, dtype: DType) -> (Array, Array) {
        let _site = self.site_guard(std::panic::Location::caller());
        let (s1, s2) = stream_seeds(seed);
        (
            self.random_uniform(shape, 0.0, 1.0, s1, dtype),
            self.random_uniform(shape, 0.0, 1.0, s2, dtype),
        )
    }

    /// Random integers in `[low, high)` (NumPy's `Generator.integers(low, high, size)`):
    /// `floor` of [`Numeric::random_uniform`]'s numbers in `[low, high)` keyed by `seed`, so
    /// the same seed gives the same array whatever the partitioning; uniform while `high -
    /// low` is below `2^53`. `dtype` is `i32` or `i64`.
    #[track_caller]
    pub fn random_integers(
        &self,
        shape: &[u64],
        low: i64,
        high: i64,
        seed: u64,
        dtype: DType,
    ) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        if high <= low {
            return self.wrap(Err(Error::Usage(format!(
                "numeric.random_integers: low >= high ({low} >= {high})"
            ))));
        }
        if !matches!(dtype, DType::I32 | DType::I64) {
            return self.wrap(Err(Error::Usage(format!(
                "numeric.random_integers: dtype must be i32 or i64, got {dtype}"
            ))));
        }
        let u = self.random_uniform(shape, low as f64, high as f64, seed, DType::F64);
        // A product that rounds up to `high` is the last integer below it.
        u.floor().minimum((high - 1) as f64).astype(dtype)
    }

    /// Elements drawn uniformly, with replacement, from the flattened `a` (NumPy's
    /// `Generator.choice(a, size)`), in an array of `shape`; keyed by `seed` as
    /// [`Numeric::random_integers`] is.
    #[track_caller]
    pub fn choice(&self, a: &Array, shape: &[u64], seed: u64) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        let n = match a.shape() {
            Ok(s) => s.iter().product::<u64>(),
            Err(e) => return self.wrap(Err(e)),
        };
        let Ok(high) = i64::try_from(n) else {
            return self.wrap(Err(Error::Usage(format!(
                "numeric.choice: {n} elements to choose from is too many"
            ))));
        };
        if high == 0 {
            return self.wrap(Err(Error::Usage(
                "numeric.choice: a cannot be empty".into(),
            )));
        }
        let picks = self.random_integers(shape, 0, high, seed, DType::I64);
        a.take(&picks, None)
    }
}
