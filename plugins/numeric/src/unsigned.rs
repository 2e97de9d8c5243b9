//! The arithmetic of the unsigned dtypes (`u8`, `u16`, `u32`, `u64`) in the kernel IR's `i64`
//! operations.
//!
//! The IR's unsigned types are storage types: a load gives an element's value as an `i64`
//! (zero-extended; a `u64` element's 64 bits as they are, so that values from 2^63 up read as
//! negative), and a store keeps the low bits of the width. Wrapping arithmetic (`+`, `-`, `*`,
//! the bitwise operators, negation and `~`) is therefore the `i64` operation: the store drops
//! what passes the width, as NumPy's unsigned arithmetic wraps. What the high bits change is
//! written here: comparisons, `minimum`/`maximum`, division and remainder, shifts by the
//! width or more, and conversions to and from floats.
//!
//! A loaded `u8` .. `u32` value is a non-negative `i64` below 2^32, so there the signed
//! operations are the unsigned ones. A `u64` value is ordered by flipping its top bit first
//! (`x ^ 2^63` orders as a signed number exactly as `x` does as an unsigned one), divided
//! through a halving (Hacker's Delight's unsigned division from a signed one), and converted
//! to a float through a halving that keeps the lost bit (so the rounding is the same).

use weft_sdk::ir::builder::{BodyBuilder, Value};
use weft_sdk::ir::{BinaryOp, CmpOp, DType};

use crate::catalog::{BinOp, UnOp};

/// The bits of an unsigned dtype.
pub fn width(dtype: DType) -> i64 {
    dtype.size() as i64 * 8
}

/// `x` with its top bit flipped: a signed order of `u64` values.
fn flip(b: &BodyBuilder, x: Value) -> Value {
    let top = b.const_i64(i64::MIN);
    b.binary(BinaryOp::Xor, x, top)
}

/// `x op y`, the operands ordered as values of the unsigned `dtype`.
pub fn cmp(b: &BodyBuilder, dtype: DType, op: CmpOp, x: Value, y: Value) -> Value {
    if dtype == DType::U64 && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        let (x, y) = (flip(b, x), flip(b, y));
        b.cmp(op, x, y)
    } else {
        b.cmp(op, x, y)
    }
}

/// The smaller (`max` false) or larger operand as values of the unsigned `dtype`.
fn min_max(b: &BodyBuilder, dtype: DType, max: bool, x: Value, y: Value) -> Value {
    if dtype != DType::U64 {
        let op = if max { BinaryOp::Max } else { BinaryOp::Min };
        return b.binary(op, x, y);
    }
    let op = if max { CmpOp::Gt } else { CmpOp::Lt };
    let take_x = cmp(b, dtype, op, x, y);
    b.select(take_x, x, y)
}

/// `x / y` truncated, as values of the unsigned `dtype`; 0 where `y` is 0 (NumPy's result).
pub fn div(b: &BodyBuilder, dtype: DType, x: Value, y: Value) -> Value {
    if dtype != DType::U64 {
        // The IR's integer division gives 0 for a zero divisor.
        return b.binary(BinaryOp::Div, x, y);
    }
    let zero = b.const_i64(0);
    let one = b.const_i64(1);
    // A divisor below 2^63: `q = ((x >> 1) / y) << 1` is the quotient or one less (the
    // halved dividend is non-negative, so the signed division is the unsigned one).
    let half = b.binary(BinaryOp::Shr, x, one);
    let q0 = b.binary(BinaryOp::Div, half, y);
    let q1 = b.binary(BinaryOp::Shl, q0, one);
    let q1y = b.mul(q1, y);
    let r = b.sub(x, q1y);
    let more = cmp(b, dtype, CmpOp::Ge, r, y);
    let q1_plus = b.add(q1, one);
    let small = b.select(more, q1_plus, q1);
    // A divisor from 2^63 up (negative as an `i64`): the quotient is 1 where `x >= y`.
    let huge_divisor = b.cmp(CmpOp::Lt, y, zero);
    let fits = cmp(b, dtype, CmpOp::Ge, x, y);
    let big = b.cast(DType::I64, fits);
    let q = b.select(huge_divisor, big, small);
    let by_zero = b.cmp(CmpOp::Eq, y, zero);
    b.select(by_zero, zero, q)
}

/// `x % y` as values of the unsigned `dtype`; 0 where `y` is 0 (NumPy's result).
fn rem(b: &BodyBuilder, dtype: DType, x: Value, y: Value) -> Value {
    if dtype != DType::U64 {
        return b.binary(BinaryOp::Rem, x, y);
    }
    let q = div(b, dtype, x, y);
    let qy = b.mul(q, y);
    let r = b.sub(x, qy);
    let zero = b.const_i64(0);
    let by_zero = b.cmp(CmpOp::Eq, y, zero);
    b.select(by_zero, zero, r)
}

/// NumPy's `x << y` and `x >> y` (logical: the values are unsigned) on the unsigned `dtype`:
/// 0 once the amount reaches the width (the IR takes amounts modulo 64).
fn shift(b: &BodyBuilder, dtype: DType, left: bool, x: Value, y: Value) -> Value {
    let w = b.const_i64(width(dtype));
    let past = cmp(b, dtype, CmpOp::Ge, y, w);
    let op = if left { BinaryOp::Shl } else { BinaryOp::Shr };
    let shifted = b.binary(op, x, y);
    let zero = b.const_i64(0);
    b.select(past, zero, shifted)
}

/// `x op y` on values of the unsigned `dtype` (its `i64` values), or `None` for an operator
/// that does not take unsigned operands (the catalog's rules keep those away).
pub fn binary(b: &BodyBuilder, op: BinOp, dtype: DType, x: Value, y: Value) -> Option<Value> {
    Some(match op {
        BinOp::Add => b.add(x, y),
        BinOp::Sub => b.sub(x, y),
        BinOp::Mul => b.mul(x, y),
        BinOp::BitwiseAnd => b.binary(BinaryOp::And, x, y),
        BinOp::BitwiseOr => b.binary(BinaryOp::Or, x, y),
        BinOp::BitwiseXor => b.binary(BinaryOp::Xor, x, y),
        BinOp::Div => div(b, dtype, x, y),
        BinOp::Remainder => rem(b, dtype, x, y),
        BinOp::Minimum => min_max(b, dtype, false, x, y),
        BinOp::Maximum => min_max(b, dtype, true, x, y),
        BinOp::LeftShift => shift(b, dtype, true, x, y),
        BinOp::RightShift => shift(b, dtype, false, x, y),
        BinOp::Equal => cmp(b, dtype, CmpOp::Eq, x, y),
        BinOp::NotEqual => cmp(b, dtype, CmpOp::Ne, x, y),
        BinOp::Less => cmp(b, dtype, CmpOp::Lt, x, y),
        BinOp::LessEqual => cmp(b, dtype, CmpOp::Le, x, y),
        BinOp::Greater => cmp(b, dtype, CmpOp::Gt, x, y),
        BinOp::GreaterEqual => cmp(b, dtype, CmpOp::Ge, x, y),
        BinOp::Pow | BinOp::Arctan2 | BinOp::LogicalAnd | BinOp::LogicalOr => return None,
    })
}

/// `op x` on a value of an unsigned dtype, or `None` for an operator that does not take one.
/// `abs` is the value itself; `-x` and `~x` wrap (the store keeps the width's bits).
pub fn unary(b: &BodyBuilder, op: UnOp, x: Value) -> Option<Value> {
    match op {
        UnOp::Abs => Some(x),
        UnOp::Neg => Some(b.unary(weft_sdk::ir::UnaryOp::Neg, x)),
        UnOp::Invert => Some(b.unary(weft_sdk::ir::UnaryOp::Not, x)),
        _ => None,
    }
}

/// `x`, a value of the unsigned `dtype`, as the float type `to`, correctly rounded.
pub fn to_float(b: &BodyBuilder, dtype: DType, x: Value, to: DType) -> Value {
    let direct = b.cast(to, x);
    if dtype != DType::U64 {
        return direct;
    }
    // From 2^63 up: halve, keeping the lost bit as a sticky low bit (63 significant bits
    // remain, more than either float keeps, so the rounding is the same), then double.
    let one = b.const_i64(1);
    let half = b.binary(BinaryOp::Shr, x, one);
    let low = b.binary(BinaryOp::And, x, one);
    let sticky = b.binary(BinaryOp::Or, half, low);
    let f = b.cast(to, sticky);
    let doubled = b.add(f, f);
    let zero = b.const_i64(0);
    let big = b.cmp(CmpOp::Lt, x, zero);
    b.select(big, doubled, direct)
}

/// The float `x` as the `i64` value of an element of the unsigned `dtype`: truncated toward
/// zero, as NumPy's `astype` does for values in range (out of range, C leaves it undefined:
/// here a negative value wraps from its `i64` conversion and a `u64` saturates at 2^64 - 1).
pub fn from_float(b: &BodyBuilder, dtype: DType, x: Value) -> Value {
    let direct = b.cast(DType::I64, x);
    if dtype != DType::U64 {
        return direct;
    }
    // From 2^63 up: convert `x - 2^63` and set the top bit back.
    let two_63 = b.const_like(x, 9_223_372_036_854_775_808.0);
    let big = b.cmp(CmpOp::Ge, x, two_63);
    let less = b.sub(x, two_63);
    let low = b.cast(DType::I64, less);
    let high = flip(b, low);
    b.select(big, high, direct)
}

/// `v`, an element of `from`, converted to an element of `to` (either may be unsigned), as
/// NumPy's `astype` converts: between integers the low bits (sign-extended from signed
/// types), floats truncated, anything to `bool` by being nonzero.
pub fn convert(b: &BodyBuilder, from: DType, to: DType, v: Value) -> Value {
    if from.is_unsigned() && to.is_float() {
        return to_float(b, from, v, to);
    }
    if to.is_unsigned() && from.is_float() {
        return from_float(b, to, v);
    }
    let to = to.value_type();
    if v.dtype() == to { v } else { b.cast(to, v) }
}
