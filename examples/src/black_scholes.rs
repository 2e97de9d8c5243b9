//! Black-Scholes option pricing, as in Listing 1 of the Legate task-fusion paper
//! (PAW-ATM'22), itself the NumPy port of the CUDA SDK sample:
//!
//! ```python
//! def black_scholes(S, X, T, R, V):
//!     sqrt_t = np.sqrt(T)
//!     d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrt_t)
//!     d2 = d1 - V * sqrt_t
//!     cnd_d1 = cnd(d1)
//!     cnd_d2 = cnd(d2)
//!     T3 = np.exp(-R * T)
//!     call_result = S * cnd_d1 - X * T3 * cnd_d2
//!     put_result = X * T3 * (1.0 - cnd_d2) - S * (1.0 - cnd_d1)
//!     return call_result, put_result
//! ```
//!
//! (The paper's text of line 20 lost the parentheses around the numerator of `d1`; the
//! original has them, and so does this port.)
//!
//! `cnd`, the standard normal CDF, comes in two forms ([`Cnd`]): the exact one through `erf`,
//! `0.5 + 0.5 * erf(d / sqrt(2))` (the default), and the listing's own 5-term polynomial
//! approximation (Abramowitz and Stegun 26.2.17, absolute error below 7.5e-8) with
//! `np.where(d > 0, 1.0 - cnd, cnd)`.
//!
//! Inputs, as in the CUDA sample and cuNumeric's `black_scholes.py` benchmark: `S` (stock
//! price) uniform in [5, 30), `X` (strike) uniform in [1, 100), `T` (years to expiry) uniform
//! in [0.25, 10), all f64 of `n` elements from the seed; `R` (risk-free rate) 0.02 and `V`
//! (volatility) 0.30 as 0-d arrays that broadcast.
//!
//! This file is also the model of the application component `black_scholes_app`
//! (`examples/apps`), which compiles it by path against `weft-app` under the name `weft`: the
//! same source, built natively and as a component.

use weft::{Array, Numeric};
use weft_ir::DType;

/// The range of stock prices `S`.
pub const S_RANGE: (f64, f64) = (5.0, 30.0);
/// The range of strike prices `X`.
pub const X_RANGE: (f64, f64) = (1.0, 100.0);
/// The range of times to expiry `T`, in years.
pub const T_RANGE: (f64, f64) = (0.25, 10.0);
/// The risk-free interest rate `R`.
pub const RISK_FREE: f64 = 0.02;
/// The volatility `V`.
pub const VOLATILITY: f64 = 0.30;

/// How the cumulative normal distribution is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cnd {
    /// `0.5 + 0.5 * erf(d / sqrt(2))`: exact to rounding.
    Erf,
    /// Listing 1's polynomial approximation, with `np.where`.
    Polynomial,
}

impl Cnd {
    /// The flag words for the two forms.
    pub const NAMES: &'static [&'static str] = &["erf", "poly"];

    /// The form named by a flag word.
    pub fn from_name(name: &str) -> Option<Cnd> {
        match name {
            "erf" => Some(Cnd::Erf),
            "poly" => Some(Cnd::Polynomial),
            _ => None,
        }
    }
}

/// The inputs of one pricing run.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Stock prices (n).
    pub s: Array,
    /// Strike prices (n).
    pub x: Array,
    /// Years to expiry (n).
    pub t: Array,
    /// Risk-free rate (0-d).
    pub r: Array,
    /// Volatility (0-d).
    pub v: Array,
}

/// Random inputs of `n` options from `seed` (see the module docs for the ranges).
pub fn inputs(np: &Numeric, n: u64, seed: u64) -> Inputs {
    let uniform = |(low, high): (f64, f64), stream| {
        np.random_uniform(&[n], low, high, crate::sub_seed(seed, stream), DType::F64)
    };
    Inputs {
        s: uniform(S_RANGE, 0),
        x: uniform(X_RANGE, 1),
        t: uniform(T_RANGE, 2),
        r: np.full(&[], RISK_FREE, DType::F64),
        v: np.full(&[], VOLATILITY, DType::F64),
    }
}

/// The cumulative distribution function of the standard normal distribution, element-wise.
pub fn cnd(d: &Array, form: Cnd) -> Array {
    match form {
        Cnd::Erf => 0.5 + 0.5 * (d * std::f64::consts::FRAC_1_SQRT_2).erf(),
        Cnd::Polynomial => {
            const A1: f64 = 0.31938153;
            const A2: f64 = -0.356563782;
            const A3: f64 = 1.781477937;
            const A4: f64 = -1.821255978;
            const A5: f64 = 1.330274429;
            const RSQRT2PI: f64 = 0.398_942_280_401_432_7;
            let k = 1.0 / (1.0 + 0.2316419 * d.abs());
            let cnd = RSQRT2PI
                * (-0.5 * d * d).exp()
                * (&k * (A1 + &k * (A2 + &k * (A3 + &k * (A4 + &k * A5)))));
            d.gt(0.0).select(&(1.0 - &cnd), &cnd)
        }
    }
}

/// Prices European call and put options: returns `(call, put)`.
pub fn black_scholes(
    s: &Array,
    x: &Array,
    t: &Array,
    r: &Array,
    v: &Array,
    form: Cnd,
) -> (Array, Array) {
    let sqrt_t = t.sqrt();
    let d1 = ((s / x).log() + (r + 0.5 * v * v) * t) / (v * &sqrt_t);
    let d2 = &d1 - v * &sqrt_t;
    let cnd_d1 = cnd(&d1, form);
    let cnd_d2 = cnd(&d2, form);
    let t3 = (-r * t).exp();
    let call = s * &cnd_d1 - x * &t3 * &cnd_d2;
    let put = x * &t3 * (1.0 - &cnd_d2) - s * (1.0 - &cnd_d1);
    (call, put)
}

impl Inputs {
    /// [`black_scholes`] on these inputs.
    pub fn price(&self, form: Cnd) -> (Array, Array) {
        black_scholes(&self.s, &self.x, &self.t, &self.r, &self.v, form)
    }
}
