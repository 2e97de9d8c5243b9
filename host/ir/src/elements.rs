//! Elements as little-endian bytes and as `f64`s: how the host and application crates turn
//! a store's bytes into values and back (`to_vec`, arrays made from values).

use crate::DType;

/// `N` bytes of `c`, which `chunks_exact(N)` made exactly that long.
fn word<const N: usize>(c: &[u8]) -> [u8; N] {
    let mut w = [0u8; N];
    w.copy_from_slice(c);
    w
}

/// Little-endian elements of `dtype`, as `f64`s (a `u64` or `i64` past 2^53 rounds; a
/// trailing partial element is ignored).
pub fn to_f64s(bytes: &[u8], dtype: DType) -> Vec<f64> {
    // One loop per type, so that the common `f64` case is a plain copy loop.
    match dtype {
        DType::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(word(c)))
            .collect(),
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(word(c))))
            .collect(),
        DType::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(word(c)) as f64)
            .collect(),
        DType::I32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(i32::from_le_bytes(word(c))))
            .collect(),
        DType::U64 => bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(word(c)) as f64)
            .collect(),
        DType::U32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(u32::from_le_bytes(word(c))))
            .collect(),
        DType::U16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(u16::from_le_bytes(word(c))))
            .collect(),
        DType::U8 => bytes.iter().map(|&b| f64::from(b)).collect(),
        DType::Bool => bytes.iter().map(|&b| f64::from(u8::from(b != 0))).collect(),
    }
}

/// The little-endian bytes of `values` as `dtype` (converted as Rust's `as` does: integers
/// truncate toward zero and saturate; `bool` is `value != 0`).
pub fn from_f64s(values: impl Iterator<Item = f64>, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F64 => values.flat_map(f64::to_le_bytes).collect(),
        DType::F32 => values.flat_map(|v| (v as f32).to_le_bytes()).collect(),
        DType::I64 => values.flat_map(|v| (v as i64).to_le_bytes()).collect(),
        DType::I32 => values.flat_map(|v| (v as i32).to_le_bytes()).collect(),
        DType::U64 => values.flat_map(|v| (v as u64).to_le_bytes()).collect(),
        DType::U32 => values.flat_map(|v| (v as u32).to_le_bytes()).collect(),
        DType::U16 => values.flat_map(|v| (v as u16).to_le_bytes()).collect(),
        DType::U8 => values.map(|v| v as u8).collect(),
        DType::Bool => values.map(|v| u8::from(v != 0.0)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_its_values_and_reads_as_scalars_do() {
        let values = [0.0, 1.0, 2.0, 7.0, 100.0, 255.0];
        let all = [
            DType::F64,
            DType::F32,
            DType::I64,
            DType::I32,
            DType::U64,
            DType::U32,
            DType::U16,
            DType::U8,
        ];
        for dtype in all {
            let bytes = from_f64s(values.iter().copied(), dtype);
            assert_eq!(bytes.len(), values.len() * dtype.size(), "{dtype:?}");
            assert_eq!(to_f64s(&bytes, dtype), values, "{dtype:?}");
            // Each element as the IR's scalars read the same bits.
            for (c, v) in bytes.chunks_exact(dtype.size()).zip(values) {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                let s = crate::Scalar::from_bits(dtype, u64::from_le_bytes(w));
                assert_eq!(s.as_f64(), v, "{dtype:?}");
            }
        }
        assert_eq!(
            from_f64s([0.0, 2.5, -1.0].into_iter(), DType::Bool),
            [0, 1, 1]
        );
        assert_eq!(to_f64s(&[0, 1, 0], DType::Bool), [0.0, 1.0, 0.0]);
        assert_eq!(
            from_f64s([-1.5, 3.9].into_iter(), DType::I32),
            [(-1i32).to_le_bytes(), 3i32.to_le_bytes()].concat()
        );
        assert_eq!(to_f64s(&(-3i64).to_le_bytes(), DType::I64), [-3.0]);
        assert_eq!(
            to_f64s(&u64::MAX.to_le_bytes(), DType::U64),
            [u64::MAX as f64]
        );
    }
}
