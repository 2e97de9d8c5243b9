//! Scalar values on the plugin's side: converting them between dtypes and encoding them as
//! store bytes.
//!
//! Conversions follow the IR's cast semantics (and Rust's `as`), so that a scalar converted
//! here equals the same value cast in a kernel: floats to integers truncate toward zero and
//! saturate (NaN becomes 0), integers narrow by wrapping, bools become 0 or 1, and anything
//! becomes `true` when it is not zero.

use weft_sdk::ir::{DType, Scalar};

/// `s` converted to `to`.
pub fn convert(s: Scalar, to: DType) -> Scalar {
    match s {
        Scalar::F32(v) => from_f64(f64::from(v), to),
        Scalar::F64(v) => from_f64(v, to),
        Scalar::I32(v) => from_i64(i64::from(v), to),
        Scalar::I64(v) => from_i64(v, to),
        Scalar::Bool(v) => from_i64(i64::from(v), to),
    }
}

/// `v` converted to `to` (an `f32` source is exact in `f64`, so this serves both floats).
fn from_f64(v: f64, to: DType) -> Scalar {
    match to {
        DType::F32 => Scalar::F32(v as f32),
        DType::F64 => Scalar::F64(v),
        DType::I32 => Scalar::I32(v as i32),
        DType::I64 => Scalar::I64(v as i64),
        DType::Bool => Scalar::Bool(v != 0.0),
        // As a kernel converts (`unsigned::from_float`): truncated; from 2^63 up, `u64` sets
        // the top bit back.
        DType::U64 if v >= 9_223_372_036_854_775_808.0 => {
            Scalar::I64(((v - 9_223_372_036_854_775_808.0) as i64) ^ i64::MIN)
        }
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => from_i64(v as i64, to),
    }
}

/// `v` converted to `to` (integer and bool sources).
fn from_i64(v: i64, to: DType) -> Scalar {
    match to {
        DType::F32 => Scalar::F32(v as f32),
        DType::F64 => Scalar::F64(v as f64),
        DType::I32 => Scalar::I32(v as i32),
        DType::I64 => Scalar::I64(v),
        DType::Bool => Scalar::Bool(v != 0),
        // An unsigned dtype's value: the low bits of its width, as an `i64`.
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::from_bits(to, v as u64),
    }
}

/// The little-endian bytes of `values` converted to `dtype`, as `store-from-bytes` takes them.
pub fn to_le_bytes(values: &[f64], dtype: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size());
    for &v in values {
        match from_f64(v, dtype) {
            Scalar::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
            Scalar::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
            Scalar::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
            Scalar::I64(x) => out.extend_from_slice(&x.to_le_bytes()[..dtype.size()]),
            Scalar::Bool(x) => out.push(u8::from(x)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_cast_semantics() {
        assert_eq!(convert(Scalar::F64(2.7), DType::I64), Scalar::I64(2));
        assert_eq!(convert(Scalar::F64(-2.7), DType::I32), Scalar::I32(-2));
        assert_eq!(
            convert(Scalar::F64(1e300), DType::I32),
            Scalar::I32(i32::MAX)
        );
        assert_eq!(convert(Scalar::F64(f64::NAN), DType::I64), Scalar::I64(0));
        assert_eq!(convert(Scalar::F64(0.0), DType::Bool), Scalar::Bool(false));
        assert_eq!(convert(Scalar::F32(0.5), DType::Bool), Scalar::Bool(true));
        assert_eq!(convert(Scalar::Bool(true), DType::F32), Scalar::F32(1.0));
        assert_eq!(convert(Scalar::I64(1 << 40), DType::I32), Scalar::I32(0));
        assert_eq!(
            convert(Scalar::I64(i64::MAX), DType::I64),
            Scalar::I64(i64::MAX)
        );
        assert_eq!(convert(Scalar::I32(-3), DType::F64), Scalar::F64(-3.0));
        assert_eq!(convert(Scalar::I32(7), DType::Bool), Scalar::Bool(true));
        assert_eq!(convert(Scalar::I64(-1), DType::U8), Scalar::I64(255));
        assert_eq!(convert(Scalar::I64(65_537), DType::U16), Scalar::I64(1));
        assert_eq!(
            convert(Scalar::F64(-1.5), DType::U32),
            Scalar::I64(0xFFFF_FFFF)
        );
        assert_eq!(
            convert(Scalar::F64(1.8e19), DType::U64),
            Scalar::I64(18_000_000_000_000_000_000u64 as i64)
        );
        assert_eq!(convert(Scalar::I64(-1), DType::U64), Scalar::I64(-1));
    }

    #[test]
    fn bytes_are_little_endian_elements() {
        assert_eq!(to_le_bytes(&[1.0, 0.0], DType::Bool), vec![1, 0]);
        assert_eq!(to_le_bytes(&[258.9], DType::I32), vec![2, 1, 0, 0]);
        assert_eq!(
            to_le_bytes(&[1.5], DType::F64),
            1.5f64.to_le_bytes().to_vec()
        );
        assert_eq!(to_le_bytes(&[-1.0], DType::I64), vec![0xFF; 8]);
        assert_eq!(to_le_bytes(&[0.25], DType::F32).len(), 4);
        assert_eq!(to_le_bytes(&[258.0, 3.0], DType::U8), vec![2, 3]);
        assert_eq!(to_le_bytes(&[65_535.0], DType::U16), vec![0xFF, 0xFF]);
    }
}
