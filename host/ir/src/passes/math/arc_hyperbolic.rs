//! The expansions of the inverse trigonometric functions (`asin`, `acos`, `atan`, `atan2`),
//! the hyperbolic functions (`sinh`, `cosh`) and their inverses (`asinh`, `acosh`, `atanh`);
//! the algorithms are in the [parent module's documentation](super).
//!
//! Every one is computed in `f64`; the `f32` forms cast their operands to `f64`, run the
//! `f64` expansion and round its result once.

use super::{Em, V, exp_f64, log_f64};
use crate::{CmpOp, DType};

/// `tan(3π/8)`: above it, `atan(a) = π/2 - atan(1/a)`.
const TAN_3PI_8: f64 = 2.414_213_562_373_095_048_80;
/// `π/2` and `π/4` rounded, and what `π/4` loses to rounding (Cephes' `MOREBITS` is this
/// for `π/2`; half of it for `π/4`).
const PIO2: f64 = std::f64::consts::FRAC_PI_2;
const PIO4: f64 = std::f64::consts::FRAC_PI_4;
const PIO2_LO: f64 = 6.123_233_995_736_765_886_130e-17;
/// `π` in two parts.
const PI_HI: f64 = std::f64::consts::PI;
const PI_LO: f64 = 1.224_646_799_147_353_177_23e-16;
/// `ln 2` rounded.
const LN2: f64 = std::f64::consts::LN_2;
/// From here on `asinh` and `acosh` are `log(2a)`: `a² + 1` and `a² - 1` round to `a²`.
const TWO_28: f64 = 268_435_456.0;
/// Above this, `e^a` overflows before `sinh a` and `cosh a` do.
const EXP_SAFE: f64 = 709.0;

/// Cephes' `atan` rational on `|x| <= 0.66`: `x + x·z·P(z)/Q(z)`, `z = x²`, `Q` monic.
/// Coefficients from the lowest degree.
const ATAN_P: [f64; 5] = [
    -6.485_021_904_942_025_371_773e1,
    -1.228_866_684_490_136_173_410e2,
    -7.500_855_792_314_704_667_340e1,
    -1.615_753_718_733_365_076_637e1,
    -8.750_608_600_031_904_122_785e-1,
];
const ATAN_Q: [f64; 6] = [
    1.945_506_571_482_613_964_425e2,
    4.853_903_996_359_136_964_868e2,
    4.328_810_604_912_902_668_951e2,
    1.650_270_098_316_988_542_046e2,
    2.485_846_490_142_306_297_962e1,
    1.0,
];

/// `(sinh a - a)/a³` as its Taylor series in `z = a²`: `1/3!, 1/5!, ..., 1/19!`. On
/// `a < 1` the first term left out, `z^9/21!`, is below `2^-68` of the sum.
const SINH_TAYLOR: [f64; 9] = [
    1.0 / 6.0,
    1.0 / 120.0,
    1.0 / 5_040.0,
    1.0 / 362_880.0,
    1.0 / 39_916_800.0,
    1.0 / 6_227_020_800.0,
    1.0 / 1_307_674_368_000.0,
    1.0 / 355_687_428_096_000.0,
    1.0 / 121_645_100_408_832_000.0,
];

/// Runs the `f64` expansion `f` on an operand of either float type.
fn in_f64(e: &mut Em<'_>, x: V, f: impl FnOnce(&mut Em<'_>, V) -> V) -> V {
    if x.t == DType::F64 {
        return f(e, x);
    }
    let wide = e.cast(DType::F64, x);
    let y = f(e, wide);
    e.cast(x.t, y)
}

/// `atan(a)` for `a >= 0` (or NaN); the result has a clear sign bit.
fn atan_nonneg(e: &mut Em<'_>, a: V) -> V {
    let t = DType::F64;
    let big = e.cmpc(CmpOp::Gt, a, TAN_3PI_8);
    let mid = e.cmpc(CmpOp::Gt, a, 0.66);
    // The reduced argument, with one division: -1/a above tan(3π/8), (a - 1)/(a + 1) above
    // 0.66, else a itself (a/1).
    let am1 = e.addc(a, -1.0);
    let ap1 = e.addc(a, 1.0);
    let minus_one = e.f(t, -1.0);
    let one = e.f(t, 1.0);
    let num_mid = e.sel(mid, am1, a);
    let num = e.sel(big, minus_one, num_mid);
    let den_mid = e.sel(mid, ap1, one);
    let den = e.sel(big, a, den_mid);
    let xr = e.div(num, den);
    let base_mid = e.selc(mid, t, PIO4, 0.0);
    let base_hi = e.f(t, PIO2);
    let base = e.sel(big, base_hi, base_mid);
    let more_mid = e.selc(mid, t, 0.5 * PIO2_LO, 0.0);
    let more_hi = e.f(t, PIO2_LO);
    let more = e.sel(big, more_hi, more_mid);
    let z = e.mul(xr, xr);
    let p = e.horner(z, &ATAN_P);
    let q = e.horner(z, &ATAN_Q);
    let zp = e.mul(z, p);
    let r = e.div(zp, q);
    let w = e.fma(xr, r, xr);
    let w = e.add(w, more);
    e.add(base, w)
}

/// `log1p(v)` for `v >= 0`, `+inf` or NaN: `log(u) + c/u` with `u = 1 + v` rounded and `c`
/// its rounding error (see [`log1p_parts`]).
fn log1p_nonneg(e: &mut Em<'_>, v: V) -> V {
    let (u, corr) = log1p_parts(e, v);
    log_plus(e, u, corr)
}

/// `atan(x)`.
pub(super) fn atan(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let a = e.abs(x);
        let y = atan_nonneg(e, a);
        e.copysign_pos(y, x)
    })
}

/// `asin(x) = atan(x/√((1 - x)(1 + x)))`, on `|x|`.
pub(super) fn asin(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let a = e.abs(x);
        let om = e.csub(1.0, a);
        let op = e.addc(a, 1.0);
        let prod = e.mul(om, op);
        let s = e.un(crate::UnaryOp::Sqrt, prod);
        let q = e.div(a, s);
        let y = atan_nonneg(e, q);
        e.copysign_pos(y, x)
    })
}

/// `acos(x) = 2·atan(√((1 - x)/(1 + x)))`.
pub(super) fn acos(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let om = e.csub(1.0, x);
        let op = e.addc(x, 1.0);
        let ratio = e.div(om, op);
        let s = e.un(crate::UnaryOp::Sqrt, ratio);
        let y = atan_nonneg(e, s);
        e.add(y, y)
    })
}

/// `atan2(y, x)`: `atan(y/x)`, plus `π` with `y`'s sign where `x`'s sign bit is set; C99's
/// values where `y/x` is `0/0` or `inf/inf`.
pub(super) fn atan2(e: &mut Em<'_>, y: V, x: V) -> V {
    let out = y.t;
    let (y, x) = if out == DType::F64 {
        (y, x)
    } else {
        (e.cast(DType::F64, y), e.cast(DType::F64, x))
    };
    let t = DType::F64;
    let q = e.div(y, x);
    let aq = e.abs(q);
    let r0 = atan_nonneg(e, aq);
    let r = e.copysign_pos(r0, q);
    // x's sign bit, read as a float comparison (the expansions never compare integers).
    let one = e.f(t, 1.0);
    let xs = e.copysign_pos(one, x);
    let xneg = e.cmpc(CmpOp::Lt, xs, 0.0);
    let pi_hi = e.f(t, PI_HI);
    let pi_y = e.copysign_pos(pi_hi, y);
    let pi_lo = e.f(t, PI_LO);
    let lo_y = e.copysign_pos(pi_lo, y);
    let hi = e.add(pi_y, r);
    let adjusted = e.add(hi, lo_y);
    let general = e.sel(xneg, adjusted, r);
    // Both zero: ±0 or ±π by x's sign bit.
    let yz = e.cmpc(CmpOp::Eq, y, 0.0);
    let xz = e.cmpc(CmpOp::Eq, x, 0.0);
    let zeros = e.and(yz, xz);
    let zero = e.f(t, 0.0);
    let zero_y = e.copysign_pos(zero, y);
    let at_zeros = e.sel(xneg, pi_y, zero_y);
    // Both infinite: ±π/4 or ±3π/4.
    let ay = e.abs(y);
    let ax = e.abs(x);
    let yi = e.cmpc(CmpOp::Eq, ay, f64::INFINITY);
    let xi = e.cmpc(CmpOp::Eq, ax, f64::INFINITY);
    let infs = e.and(yi, xi);
    let corner = e.selc(xneg, t, 3.0 * PIO4, PIO4);
    let at_infs = e.copysign_pos(corner, y);
    let r = e.sel(zeros, at_zeros, general);
    let r = e.sel(infs, at_infs, r);
    if out == DType::F64 { r } else { e.cast(out, r) }
}

/// `sinh(x)`: on `a = |x|`, `a + a·z·S(z)` (`z = a²`, the Taylor series) below 1,
/// `(E - 1/E)/2` with `E = e^a` up to 709, `(e^(a/2)/2)·e^(a/2)` beyond; `x`'s sign.
pub(super) fn sinh(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let a = e.abs(x);
        let z = e.mul(a, a);
        let p = e.horner(z, &SINH_TAYLOR);
        let az = e.mul(a, z);
        let small = e.fma(az, p, a);
        let ac = e.minc(a, EXP_SAFE);
        let big_e = exp_f64(e, ac, None, false);
        let one = e.f(DType::F64, 1.0);
        let inv = e.div(one, big_e);
        let diff = e.sub(big_e, inv);
        let mid = e.mulc(diff, 0.5);
        let huge = half_square_exp(e, a);
        let is_small = e.cmpc(CmpOp::Lt, a, 1.0);
        let is_mid = e.cmpc(CmpOp::Le, a, EXP_SAFE);
        let r = e.sel(is_mid, mid, huge);
        let r = e.sel(is_small, small, r);
        e.copysign_pos(r, x)
    })
}

/// `cosh(x)`: on `a = |x|`, `E/2 + (1/2)/E` with `E = e^a` up to 709, then as `sinh`.
pub(super) fn cosh(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let a = e.abs(x);
        let ac = e.minc(a, EXP_SAFE);
        let big_e = exp_f64(e, ac, None, false);
        let half_e = e.mulc(big_e, 0.5);
        let half = e.f(DType::F64, 0.5);
        let inv = e.div(half, big_e);
        let mid = e.add(half_e, inv);
        let huge = half_square_exp(e, a);
        let is_mid = e.cmpc(CmpOp::Le, a, EXP_SAFE);
        e.sel(is_mid, mid, huge)
    })
}

/// `e^a/2` as `(e^(a/2)/2)·e^(a/2)`, for `a` past where `e^a` overflows (`+inf` from about
/// 710.5 on; NaN for NaN).
fn half_square_exp(e: &mut Em<'_>, a: V) -> V {
    let h = e.mulc(a, 0.5);
    let w = exp_f64(e, h, None, true);
    let hw = e.mulc(w, 0.5);
    e.mul(hw, w)
}

/// `log(arg) + extra`.
fn log_plus(e: &mut Em<'_>, arg: V, extra: V) -> V {
    let l = log_f64(e, arg);
    e.add(l, extra)
}

/// The one logarithm that `asinh` and `acosh` take, its argument selected per range:
/// `log(u) + corr` (`log1p`, see [`log1p_parts`]) where `small`, `log(w)` where `mid`, and
/// `log(a) + ln 2` beyond.
fn ranged_log(e: &mut Em<'_>, [small, mid]: [V; 2], (u, corr): (V, V), w: V, a: V) -> V {
    let arg_mid = e.sel(mid, w, a);
    let arg = e.sel(small, u, arg_mid);
    let zero = e.f(DType::F64, 0.0);
    let ln2 = e.f(DType::F64, LN2);
    let extra_mid = e.sel(mid, zero, ln2);
    let extra = e.sel(small, corr, extra_mid);
    log_plus(e, arg, extra)
}

/// `asinh(x)`: on `a = |x|`, `log1p(a + a²/(1 + √(1 + a²)))` below 2, `log(2a + 1/(√(a² + 1)
/// + a))` below `2^28`, `log(a) + ln 2` beyond; `x`'s sign. One logarithm.
pub(super) fn asinh(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let t = DType::F64;
        let a = e.abs(x);
        let z = e.mul(a, a);
        let z1 = e.addc(z, 1.0);
        let s = e.un(crate::UnaryOp::Sqrt, z1);
        // Small: log1p(v), v = a + z/(1 + s), as log(u) + c/u (see `log1p_nonneg`).
        let s1 = e.addc(s, 1.0);
        let zs = e.div(z, s1);
        let v = e.add(a, zs);
        let (u, corr) = log1p_parts(e, v);
        // Middle: log(2a + 1/(s + a)).
        let sa = e.add(s, a);
        let one = e.f(t, 1.0);
        let inv = e.div(one, sa);
        let a2 = e.add(a, a);
        let w = e.add(a2, inv);
        let small = e.cmpc(CmpOp::Lt, a, 2.0);
        let mid = e.cmpc(CmpOp::Lt, a, TWO_28);
        let y = ranged_log(e, [small, mid], (u, corr), w, a);
        e.copysign_pos(y, x)
    })
}

/// `acosh(x)`: with `t = x - 1`, `log1p(t + √(2t + t²))` up to 2, `log(2x - 1/(x + √(x² -
/// 1)))` below `2^28`, `log(x) + ln 2` beyond; NaN below 1. One logarithm.
pub(super) fn acosh(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let t = DType::F64;
        let tm = e.addc(x, -1.0);
        let t2 = e.add(tm, tm);
        let tt = e.mul(tm, tm);
        let rad = e.add(t2, tt);
        let sr = e.un(crate::UnaryOp::Sqrt, rad);
        let v = e.add(tm, sr);
        let (u, corr) = log1p_parts(e, v);
        let xx = e.mul(x, x);
        let xm = e.addc(xx, -1.0);
        let s = e.un(crate::UnaryOp::Sqrt, xm);
        let xs = e.add(x, s);
        let one = e.f(t, 1.0);
        let inv = e.div(one, xs);
        let x2 = e.add(x, x);
        let w = e.sub(x2, inv);
        let small = e.cmpc(CmpOp::Le, x, 2.0);
        let mid = e.cmpc(CmpOp::Lt, x, TWO_28);
        let y = ranged_log(e, [small, mid], (u, corr), w, x);
        let domain = e.cmpc(CmpOp::Ge, x, 1.0);
        let nan = e.f(t, f64::NAN);
        e.sel(domain, y, nan)
    })
}

/// `u = 1 + v` rounded and the correction `c/u` that makes `log(u) + c/u` the logarithm of
/// `1 + v` (`v >= 0`, or `+inf`: the correction is then 0).
fn log1p_parts(e: &mut Em<'_>, v: V) -> (V, V) {
    let u = e.addc(v, 1.0);
    let um1 = e.addc(u, -1.0);
    let c_small = e.sub(v, um1);
    let umv = e.sub(u, v);
    let c_big = e.csub(1.0, umv);
    let small = e.cmpc(CmpOp::Le, v, 1.0);
    let c = e.sel(small, c_small, c_big);
    let cu = e.div(c, u);
    let inf = e.cmpc(CmpOp::Eq, v, f64::INFINITY);
    let zero = e.f(DType::F64, 0.0);
    (u, e.sel(inf, zero, cu))
}

/// `atanh(x)`: on `a = |x|`, `log1p(2a + 2a·a/(1 - a))/2` below 1/2, `log1p(2a/(1 - a))/2`
/// from there; `x`'s sign.
pub(super) fn atanh(e: &mut Em<'_>, x: V) -> V {
    in_f64(e, x, |e, x| {
        let a = e.abs(x);
        let om = e.csub(1.0, a);
        let a2 = e.add(a, a);
        let q = e.div(a2, om);
        let aq = e.mul(a, q);
        let v_small = e.add(a2, aq);
        let small = e.cmpc(CmpOp::Lt, a, 0.5);
        let v = e.sel(small, v_small, q);
        let l = log1p_nonneg(e, v);
        let y = e.mulc(l, 0.5);
        e.copysign_pos(y, x)
    })
}
