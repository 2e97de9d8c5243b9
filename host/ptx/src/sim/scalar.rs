//! The scalar semantics of PTX instructions, as PTX defines them (not as Rust or the IR
//! does): integer arithmetic of any width, comparisons ordered and unordered, conversions
//! with their rounding and saturation, float `min`/`max`, atomic updates. Registers hold a
//! value of `n` bits zero-extended (see [`super::ops`]).

use super::ops::{AtomOp, BitOp, Cmp, FConv, IntOp, IntUn, Kind, Round, Ty};

/// The mask of the low `bits` bits.
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// `x`'s low `bits` bits, sign-extended.
pub(crate) fn sext(x: u64, bits: u32) -> i64 {
    let s = 64 - bits.clamp(1, 64);
    ((x << s) as i64) >> s
}

/// The value of register bits `x` read as integer type `ty`.
pub(crate) fn int_value(x: u64, ty: Ty) -> i128 {
    if ty.kind == Kind::S {
        i128::from(sext(x, u32::from(ty.bits)))
    } else {
        i128::from(x & ty.mask())
    }
}

/// The range of integer type `ty`.
fn int_range(ty: Ty) -> (i128, i128) {
    let bits = u32::from(ty.bits);
    if ty.kind == Kind::S {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// A generic integer operation on registers of type `ty`.
pub(crate) fn int_op(op: IntOp, ty: Ty, a: u64, b: u64) -> u64 {
    let bits = u32::from(ty.bits);
    let m = ty.mask();
    let (x, y) = (int_value(a, ty), int_value(b, ty));
    let (lo, hi) = int_range(ty);
    let r: i128 = match op {
        IntOp::Add => x.wrapping_add(y),
        IntOp::Sub => x.wrapping_sub(y),
        IntOp::AddSat => (x + y).clamp(lo, hi),
        IntOp::SubSat => (x - y).clamp(lo, hi),
        IntOp::MulLo => x.wrapping_mul(y),
        IntOp::MulHi => x.wrapping_mul(y) >> bits,
        IntOp::MulWide => return (x.wrapping_mul(y) as u64) & mask(2 * bits),
        // Division by zero: all ones (-1); the remainder: the dividend (see the module docs
        // of `sim`). The most negative value over -1 wraps.
        IntOp::Div if y == 0 => return m,
        IntOp::Rem if y == 0 => return a & m,
        IntOp::Div => x / y,
        IntOp::Rem => x % y,
        IntOp::Min => x.min(y),
        IntOp::Max => x.max(y),
    };
    (r as u64) & m
}

/// A generic integer operation of one operand.
pub(crate) fn int_un(op: IntUn, ty: Ty, a: u64) -> u64 {
    let x = int_value(a, ty);
    let r = match op {
        IntUn::Neg => x.wrapping_neg(),
        // The most negative value stays itself (its negation wraps back).
        IntUn::Abs => x.abs(),
    };
    (r as u64) & ty.mask()
}

/// A bit operation on the low `bits` (32 or 64) bits of `a`: the result is a `.u32` for
/// all but `brev`, whose result has `bits` bits.
pub(crate) fn bit_op(op: BitOp, bits: u8, a: u64) -> u64 {
    let x = a & mask(u32::from(bits));
    let wide = bits == 64;
    match op {
        BitOp::Clz if wide => u64::from(x.leading_zeros()),
        BitOp::Clz => u64::from((x as u32).leading_zeros()),
        BitOp::Popc => u64::from(x.count_ones()),
        BitOp::Brev if wide => x.reverse_bits(),
        BitOp::Brev => u64::from((x as u32).reverse_bits()),
        BitOp::Bfind { signed, shift } => {
            // A negative value: the most significant 0 bit.
            let negative = signed && (x >> (bits - 1)) & 1 == 1;
            let y = if negative {
                !x & mask(u32::from(bits))
            } else {
                x
            };
            if y == 0 {
                return u64::from(u32::MAX);
            }
            let top = 63 - y.leading_zeros();
            u64::from(if shift {
                u32::from(bits) - 1 - top
            } else {
                top
            })
        }
    }
}

/// An integer-to-integer `cvt` with `.sat`.
pub(crate) fn cvt_sat(a: u64, from: Ty, to: Ty) -> u64 {
    let (lo, hi) = int_range(to);
    (int_value(a, from).clamp(lo, hi) as u64) & to.mask()
}

/// A comparison of integers already read (as `i128` or as their unsigned bits).
pub(crate) fn cmp_ord<T: PartialOrd>(cc: Cmp, a: T, b: T) -> bool {
    match cc {
        Cmp::Eq | Cmp::Equ => a == b,
        Cmp::Ne | Cmp::Neu => a != b,
        Cmp::Lt | Cmp::Ltu => a < b,
        Cmp::Le | Cmp::Leu => a <= b,
        Cmp::Gt | Cmp::Gtu => a > b,
        Cmp::Ge | Cmp::Geu => a >= b,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

/// A float comparison: ordered ones are false, unordered ones true, when either is NaN.
pub(crate) fn cmp_float(cc: Cmp, a: f64, b: f64) -> bool {
    let un = a.is_nan() || b.is_nan();
    match cc {
        Cmp::Eq => a == b,
        Cmp::Ne => !un && a != b,
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Ge => a >= b,
        Cmp::Equ => un || a == b,
        Cmp::Neu => a != b,
        Cmp::Ltu => un || a < b,
        Cmp::Leu => un || a <= b,
        Cmp::Gtu => un || a > b,
        Cmp::Geu => un || a >= b,
        Cmp::Num => !un,
        Cmp::Nan => un,
    }
}

/// The NaN `min`/`max` return when both operands are NaN (the GPU's canonical one).
pub(crate) const CANONICAL_NAN_F32: u32 = 0x7fff_ffff;
/// The `f64` one.
pub(crate) const CANONICAL_NAN_F64: u64 = 0x7fff_ffff_ffff_ffff;

/// PTX `min`/`max` of floats (`max` when `max`): the other operand when exactly one is NaN,
/// NaN when both are (`None`: the caller gives its canonical NaN), and `-0.0` below `+0.0`.
pub(crate) fn min_max<F: Copy + PartialOrd>(
    a: F,
    b: F,
    max: bool,
    nan: impl Fn(F) -> bool,
    neg: impl Fn(F) -> bool,
) -> Option<F> {
    match (nan(a), nan(b)) {
        (true, true) => None,
        (true, false) => Some(b),
        (false, true) => Some(a),
        _ if a < b => Some(if max { b } else { a }),
        _ if b < a => Some(if max { a } else { b }),
        // Equal: zeros of either sign, or the same value.
        _ => Some(if neg(a) != max { a } else { b }),
    }
}

/// PTX `min.f32`/`max.f32`.
pub(crate) fn min_max_f32(a: f32, b: f32, max: bool) -> u32 {
    min_max(a, b, max, f32::is_nan, f32::is_sign_negative).map_or(CANONICAL_NAN_F32, f32::to_bits)
}

/// PTX `min.f64`/`max.f64`.
pub(crate) fn min_max_f64(a: f64, b: f64, max: bool) -> u64 {
    min_max(a, b, max, f64::is_nan, f64::is_sign_negative).map_or(CANONICAL_NAN_F64, f64::to_bits)
}

/// `x` rounded to an integral value.
pub(crate) fn round_f64(x: f64, r: Round) -> f64 {
    match r {
        Round::Nearest => x.round_ties_even(),
        Round::Zero => x.trunc(),
        Round::Down => x.floor(),
        Round::Up => x.ceil(),
    }
}

/// `x` rounded to an integral value.
pub(crate) fn round_f32(x: f32, r: Round) -> f32 {
    match r {
        Round::Nearest => x.round_ties_even(),
        Round::Zero => x.trunc(),
        Round::Down => x.floor(),
        Round::Up => x.ceil(),
    }
}

/// A float-to-integer `cvt`: rounded to an integral value, saturated to `to`'s range, NaN
/// giving 0. (An `f32` is exact as an `f64`, and rounds there to the same integer.)
pub(crate) fn float_to_int(x: f64, r: Round, to: Ty) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let (lo, hi) = int_range(to);
    // `as` saturates at `i128`'s range, far beyond any target's.
    ((round_f64(x, r) as i128).clamp(lo, hi) as u64) & to.mask()
}

/// An integer-to-`f64` `cvt` with rounding `r`.
pub(crate) fn int_to_f64(v: i128, r: Round) -> f64 {
    let f = v as f64;
    // `f` is within 2^64 of zero, so exact as an `i128`.
    let back = f as i128;
    directed(f, r, back.cmp(&v), v < 0, f64::next_up, f64::next_down)
}

/// An integer-to-`f32` `cvt` with rounding `r`.
pub(crate) fn int_to_f32(v: i128, r: Round) -> f32 {
    let f = v as f32;
    let back = f as i128;
    directed(f, r, back.cmp(&v), v < 0, f32::next_up, f32::next_down)
}

/// An `f64`-to-`f32` `cvt` with rounding `r`.
pub(crate) fn f64_to_f32(x: f64, r: Round) -> f32 {
    let f = x as f32;
    let Some(order) = f64::from(f).partial_cmp(&x) else {
        return f;
    };
    directed(f, r, order, x < 0.0, f32::next_up, f32::next_down)
}

/// The nearest rounding `f` of an exact value adjusted to rounding `r`, from how `f`
/// compares with the exact value (`negative`: the exact value's sign).
fn directed<F>(
    f: F,
    r: Round,
    order: std::cmp::Ordering,
    negative: bool,
    up: fn(F) -> F,
    down: fn(F) -> F,
) -> F {
    use std::cmp::Ordering::{Greater, Less};
    match (r, order) {
        (Round::Down, Greater) => down(f),
        (Round::Up, Less) => up(f),
        (Round::Zero, Greater) if !negative => down(f),
        (Round::Zero, Less) if negative => up(f),
        _ => f,
    }
}

/// A float-to-float `cvt`.
pub(crate) fn f2f(x: u64, conv: FConv) -> u64 {
    let f32_of = |x: u64| f32::from_bits(x as u32);
    match conv {
        FConv::F32ToF64 => f64::from(f32_of(x)).to_bits(),
        FConv::F64ToF32(r) => u64::from(f64_to_f32(f64::from_bits(x), r).to_bits()),
        FConv::F32Int(r) => u64::from(round_f32(f32_of(x), r).to_bits()),
        FConv::F64Int(r) => round_f64(f64::from_bits(x), r).to_bits(),
    }
}

/// The new value of an atomic `op` on type `ty`: from the `old` one and the operands.
pub(crate) fn atom_new(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let m = ty.mask();
    match op {
        AtomOp::Cas => {
            if old == b & m {
                c & m
            } else {
                old
            }
        }
        AtomOp::Exch => b & m,
        AtomOp::Add if ty.kind == Kind::F && ty.bits == 32 => {
            u64::from((f32::from_bits(old as u32) + f32::from_bits(b as u32)).to_bits())
        }
        AtomOp::Add if ty.kind == Kind::F => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
        AtomOp::Add => old.wrapping_add(b) & m,
        AtomOp::Min => int_op(IntOp::Min, ty, old, b),
        AtomOp::Max => int_op(IntOp::Max, ty, old, b),
        AtomOp::And => old & b & m,
        AtomOp::Or => (old | b) & m,
        AtomOp::Xor => (old ^ b) & m,
        AtomOp::Inc => {
            if old >= b & m {
                0
            } else {
                old + 1
            }
        }
        AtomOp::Dec => {
            if old == 0 || old > b & m {
                b & m
            } else {
                old - 1
            }
        }
    }
}
