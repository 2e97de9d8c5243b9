//! The counter-based random number generator behind `random-uniform`.
//!
//! Element `g` (its global row-major linear index) of an array drawn with seed `s` gets the
//! 64 bits `mix(g * INDEX_MUL + s * SEED_MUL)`, where `mix` is splitmix64's finalizer. The low
//! 53 bits, times 2^-53, give a float in `[0, 1)`. The value depends only on `g` and `s`, never
//! on how the array is partitioned, so every launch, fused or not, on any number of ranks,
//! draws the same array.
//!
//! The IR has no shift operations, so [`emit_bits`] builds the logical right shift from the
//! integer operations it has (see [`emit_shr`]); [`bits`] is the same function in plain Rust,
//! the reference the emitted code is tested against.

use weft_sdk::ir::DType;
use weft_sdk::ir::builder::{BodyBuilder, Value};

/// Multiplier of the element's index (the golden-ratio increment of splitmix64).
pub const INDEX_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
/// Multiplier of the seed (an odd constant unrelated to [`INDEX_MUL`]).
pub const SEED_MUL: u64 = 0xD1B5_4A32_D192_ED03;
/// splitmix64's first finalizer multiplier.
const MIX1: u64 = 0xBF58_476D_1CE4_E5B9;
/// splitmix64's second finalizer multiplier.
const MIX2: u64 = 0x94D0_49BB_1331_11EB;
/// The low 53 bits: as many as an `f64` holds exactly.
const MANTISSA_MASK: u64 = (1 << 53) - 1;
/// 2^-53.
const SCALE: f64 = 1.0 / (1u64 << 53) as f64;

/// The 64 random bits of element `index` under `seed` (the reference for [`emit_bits`]).
pub fn bits(index: u64, seed: u64) -> u64 {
    let z = index
        .wrapping_mul(INDEX_MUL)
        .wrapping_add(seed.wrapping_mul(SEED_MUL));
    let z = (z ^ (z >> 30)).wrapping_mul(MIX1);
    let z = (z ^ (z >> 27)).wrapping_mul(MIX2);
    z ^ (z >> 31)
}

/// The uniform number in `[0, 1)` of element `index` under `seed` (the reference for
/// [`emit_uniform`]).
pub fn uniform(index: u64, seed: u64) -> f64 {
    (bits(index, seed) & MANTISSA_MASK) as f64 * SCALE
}

/// Emits [`uniform`]: an `f64` in `[0, 1)` from an `i64` index and an `i64` seed (the seed's
/// bits are those of the caller's `u64`).
pub fn emit_uniform(b: &mut BodyBuilder, index: Value, seed: Value) -> Value {
    let z = emit_bits(b, index, seed);
    let mask = b.const_i64(MANTISSA_MASK as i64);
    let low = b.and(z, mask);
    let f = b.cast(DType::F64, low);
    let scale = b.const_f64(SCALE);
    b.mul(f, scale)
}

/// Emits [`bits`] on `i64` values (integer arithmetic wraps in the IR, as it does here).
pub fn emit_bits(b: &mut BodyBuilder, index: Value, seed: Value) -> Value {
    let c1 = b.const_i64(INDEX_MUL as i64);
    let c2 = b.const_i64(SEED_MUL as i64);
    let x = b.mul(index, c1);
    let y = b.mul(seed, c2);
    let z = b.add(x, y);
    let z = emit_xorshift(b, z, 30);
    let m1 = b.const_i64(MIX1 as i64);
    let z = b.mul(z, m1);
    let z = emit_xorshift(b, z, 27);
    let m2 = b.const_i64(MIX2 as i64);
    let z = b.mul(z, m2);
    emit_xorshift(b, z, 31)
}

/// Emits `z ^ (z >>> k)`.
fn emit_xorshift(b: &mut BodyBuilder, z: Value, k: u32) -> Value {
    let s = emit_shr(b, z, k);
    b.xor(z, s)
}

/// Emits the logical right shift `x >>> k` of the 64 bits of `x`, for `1 <= k <= 62`:
/// `(x & i64::MAX) / 2^k` shifts the low 63 bits (the dividend is non-negative, so the
/// truncating division is a shift), and the sign bit, if set, lands at bit `63 - k`.
pub fn emit_shr(b: &mut BodyBuilder, x: Value, k: u32) -> Value {
    let max = b.const_i64(i64::MAX);
    let low = b.and(x, max);
    let pow = b.const_i64(1i64 << k);
    let shifted = b.div(low, pow);
    let zero = b.const_i64(0);
    let negative = b.lt(x, zero);
    let top = b.const_i64(1i64 << (63 - k));
    let sign = b.select(negative, top, zero);
    b.or(shifted, sign)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use weft_sdk::ir::builder::KernelBuilder;
    use weft_sdk::ir::{BinaryOp, CmpOp, Op, Scalar, ValueId};

    use super::*;

    /// Evaluates the straight-line top-level code of a kernel whose scalar parameters have
    /// the given values, returning every value's bits as `i64` or `f64`.
    fn eval(k: &weft_sdk::ir::Kernel, params: &[Scalar]) -> HashMap<ValueId, Scalar> {
        let mut env: HashMap<ValueId, Scalar> = HashMap::new();
        for inst in &k.body {
            let get = |v: &ValueId| env.get(v).copied().unwrap_or(Scalar::I64(0));
            let r = match &inst.op {
                Op::Const(c) => *c,
                Op::Param(p) => params[*p as usize],
                Op::Binary(op, a, b) => match (get(a), get(b)) {
                    (Scalar::I64(x), Scalar::I64(y)) => Scalar::I64(match op {
                        BinaryOp::Add => x.wrapping_add(y),
                        BinaryOp::Mul => x.wrapping_mul(y),
                        BinaryOp::Div => x.wrapping_div(y),
                        BinaryOp::And => x & y,
                        BinaryOp::Or => x | y,
                        BinaryOp::Xor => x ^ y,
                        other => panic!("unexpected {other:?}"),
                    }),
                    (Scalar::F64(x), Scalar::F64(y)) => match op {
                        BinaryOp::Mul => Scalar::F64(x * y),
                        other => panic!("unexpected {other:?}"),
                    },
                    other => panic!("unexpected operands {other:?}"),
                },
                Op::Cmp(CmpOp::Lt, a, b) => Scalar::Bool(get(a).as_f64() < get(b).as_f64()),
                Op::Select(c, a, b) => match get(c) {
                    Scalar::Bool(true) => get(a),
                    _ => get(b),
                },
                Op::Cast(DType::F64, a) => Scalar::F64(get(a).as_f64()),
                other => panic!("unexpected {other:?}"),
            };
            env.insert(inst.results[0], r);
        }
        env
    }

    fn emitted(index: u64, seed: u64) -> (u64, f64) {
        let mut k = KernelBuilder::new("rng");
        let i = k.scalar(DType::I64);
        let s = k.scalar(DType::I64);
        let z = emit_bits(&mut k, i, s);
        let u = emit_uniform(&mut k, i, s);
        let kernel = k.finish();
        let env = eval(
            &kernel,
            &[Scalar::I64(index as i64), Scalar::I64(seed as i64)],
        );
        let (Some(&Scalar::I64(z)), Some(&Scalar::F64(u))) = (env.get(&z.id()), env.get(&u.id()))
        else {
            panic!("no result");
        };
        (z as u64, u)
    }

    #[test]
    fn emitted_code_matches_the_reference() {
        let cases = [
            0u64,
            1,
            2,
            3,
            1000,
            u64::MAX,
            1 << 63,
            0x1234_5678_9ABC_DEF0,
        ];
        for &index in &cases {
            for &seed in &cases {
                let (z, u) = emitted(index, seed);
                assert_eq!(z, bits(index, seed), "bits of ({index}, {seed})");
                assert_eq!(u.to_bits(), uniform(index, seed).to_bits());
            }
        }
    }

    #[test]
    fn shr_is_a_logical_shift() {
        for x in [
            0u64,
            1,
            u64::MAX,
            1 << 63,
            0x8000_0000_0000_0001,
            0xDEAD_BEEF_0000_0000,
        ] {
            for k in 1..=62 {
                let mut kb = KernelBuilder::new("shr");
                let v = kb.scalar(DType::I64);
                let r = emit_shr(&mut kb, v, k);
                let env = eval(&kb.finish(), &[Scalar::I64(x as i64)]);
                assert_eq!(env.get(&r.id()), Some(&Scalar::I64((x >> k) as i64)));
            }
        }
    }

    #[test]
    fn uniform_is_in_range_and_spread() {
        let n = 10_000;
        let mean: f64 = (0..n).map(|i| uniform(i, 42)).sum::<f64>() / n as f64;
        assert!((0..n).all(|i| (0.0..1.0).contains(&uniform(i, 42))));
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert_ne!(uniform(0, 1), uniform(0, 2));
    }
}
