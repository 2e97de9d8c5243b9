//! What the math-function tests of several crates share: the functions, their one-loop
//! kernels, ulp distances and a deterministic random stream. Included by path (`#[path]`) from
//! `weft-ir`'s and `weft-cpu`'s tests.

use weft_ir::builder::KernelBuilder;
use weft_ir::{DType, Kernel, Privilege};

/// A math function of the IR (the lowering's own enum).
pub use weft_ir::passes::math::MathFn as F;

/// Every function.
pub const ALL: [F; 16] = F::ALL;

/// `out[i] = f(x[i])` (or `pow(x[i], y[i])`, `atan2(x[i], y[i])`) for element type `t`: stores `x`, `y`, `out`.
pub fn kernel(f: F, t: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("math.{f:?}.{t}").to_lowercase());
    let x = k.store(t, 1, Privilege::Read);
    let y = k.store(t, 1, Privilege::Read);
    let out = k.store(t, 1, Privilege::Write);
    k.parallel(out, |b, i| {
        let a = b.load(x, i);
        let r = match f {
            F::Exp => b.exp(a),
            F::Log => b.log(a),
            F::Sin => b.sin(a),
            F::Cos => b.cos(a),
            F::Tanh => b.tanh(a),
            F::Erf => b.erf(a),
            F::Pow => {
                let c = b.load(y, i);
                b.pow(a, c)
            }
            F::Atan2 => {
                let c = b.load(y, i);
                b.atan2(a, c)
            }
            F::Asin => b.asin(a),
            F::Acos => b.acos(a),
            F::Atan => b.atan(a),
            F::Sinh => b.sinh(a),
            F::Cosh => b.cosh(a),
            F::Asinh => b.asinh(a),
            F::Acosh => b.acosh(a),
            F::Atanh => b.atanh(a),
        };
        b.store(out, i, r);
    });
    k.finish_validated().expect("a valid kernel")
}

/// The reference value of `f` at `(x, y)` in `f64`: Rust's function, the `libm` crate's for
/// the inverse hyperbolic ones (Rust's lose their digits near `acosh(1)` and `atanh(±1)`),
/// and `erf` (each crate's tests pass their own reference) for `erf`.
pub fn reference64(f: F, x: f64, y: f64, erf: fn(f64) -> f64) -> f64 {
    match f {
        F::Exp => x.exp(),
        F::Log => x.ln(),
        F::Sin => x.sin(),
        F::Cos => x.cos(),
        F::Tanh => x.tanh(),
        F::Erf => erf(x),
        F::Pow => x.powf(y),
        F::Asin => x.asin(),
        F::Acos => x.acos(),
        F::Atan => x.atan(),
        F::Atan2 => x.atan2(y),
        F::Sinh => x.sinh(),
        F::Cosh => x.cosh(),
        F::Asinh => libm::asinh(x),
        F::Acosh => weft_ir::interp::acosh(x),
        F::Atanh => libm::atanh(x),
    }
}

/// The reference for `f32`: Rust's `f32` functions, or the `f64` reference rounded where
/// Rust's own are not accurate (`erf`, the inverse hyperbolic functions).
pub fn reference32(f: F, x: f32, y: f32, erf: fn(f64) -> f64) -> f32 {
    match f {
        F::Exp => x.exp(),
        F::Log => x.ln(),
        F::Sin => x.sin(),
        F::Cos => x.cos(),
        F::Tanh => x.tanh(),
        F::Pow => x.powf(y),
        F::Asin => x.asin(),
        F::Acos => x.acos(),
        F::Atan => x.atan(),
        F::Atan2 => x.atan2(y),
        F::Sinh => x.sinh(),
        F::Cosh => x.cosh(),
        F::Erf | F::Asinh | F::Acosh | F::Atanh => {
            reference64(f, f64::from(x), f64::from(y), erf) as f32
        }
    }
}

/// Distance in ulps between two floats (0 for two NaNs or for ±0; infinite if only one is NaN).
pub fn ulps64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let key = |x: f64| {
        let b = x.to_bits() as i64;
        if b < 0 { i64::MIN - b } else { b }
    };
    (i128::from(key(a)) - i128::from(key(b))).unsigned_abs() as f64
}

/// [`ulps64`] for `f32`.
pub fn ulps32(a: f32, b: f32) -> f64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let key = |x: f32| {
        let b = x.to_bits() as i32;
        if b < 0 { i32::MIN - b } else { b }
    };
    (i64::from(key(a)) - i64::from(key(b))).unsigned_abs() as f64
}

/// A deterministic pseudo-random stream (xorshift).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}
