//! Joining arrays: `concatenate` and `stack`, each a fresh array filled by one copy task per
//! input (into a slice of the result), with NumPy's type promotion and error messages.

use weft_ir::DType;

use super::search::normalize_axis;
use super::{Array, Numeric, Range, shape_text};
use crate::{Error, Result};

/// The type NumPy gives a result of `a` and `b` together (`np.result_type` of two arrays).
pub(crate) fn result_type(a: DType, b: DType) -> DType {
    use DType::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Bool, x) | (x, Bool) => x,
        (I32, I64) | (I64, I32) => I64,
        (F32, F64) | (F64, F32) => F64,
        // An integer with f32: f32 holds i8/i16 exactly, not i32 or i64.
        (I32 | I64, F32) | (F32, I32 | I64) => F64,
        (I32 | I64, F64) | (F64, I32 | I64) => F64,
        (x, _) => x,
    }
}

impl Numeric {
    /// The arrays joined along an existing `axis` (NumPy's `concatenate`): every other
    /// extent must match; the type is their common type.
    #[track_caller]
    pub fn concatenate(&self, arrays: &[&Array], axis: i64) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        self.join("concatenate", arrays, axis)
            .unwrap_or_else(|e| self.wrap(Err(e)))
    }

    /// The arrays, all of one shape, joined along a new `axis` (NumPy's `stack`).
    #[track_caller]
    pub fn stack(&self, arrays: &[&Array], axis: i64) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        let result = (|| -> Result<Array> {
            let first = arrays
                .first()
                .ok_or_else(|| {
                    Error::Usage("numeric.stack: need at least one array to stack".into())
                })?
                .shape()?;
            for a in arrays {
                if a.shape()? != first {
                    return Err(Error::Usage(
                        "numeric.stack: all input arrays must have the same shape".into(),
                    ));
                }
            }
            let d = normalize_axis(axis, first.len() + 1)?;
            let expanded: Vec<Array> = arrays.iter().map(|a| a.expand_dims(d as i64)).collect();
            let refs: Vec<&Array> = expanded.iter().collect();
            self.join("stack", &refs, d as i64)
        })();
        result.unwrap_or_else(|e| self.wrap(Err(e)))
    }

    fn join(&self, what: &str, arrays: &[&Array], axis: i64) -> Result<Array> {
        let first = arrays.first().ok_or_else(|| {
            Error::Usage(format!(
                "numeric.{what}: need at least one array to concatenate"
            ))
        })?;
        let base = first.shape()?;
        if base.is_empty() {
            return Err(Error::Usage(format!(
                "numeric.{what}: zero-dimensional arrays cannot be concatenated"
            )));
        }
        let d = normalize_axis(axis, base.len())?;
        let mut shape = base.clone();
        shape[d] = 0;
        let mut dtype = first.dtype()?;
        for (i, a) in arrays.iter().enumerate() {
            let s = a.shape()?;
            if s.len() != base.len() {
                return Err(Error::Usage(format!(
                    "numeric.{what}: all the input arrays must have same number of \
                     dimensions, but the array at index 0 has {} dimension(s) and the array \
                     at index {i} has {} dimension(s)",
                    base.len(),
                    s.len()
                )));
            }
            for k in (0..s.len()).filter(|&k| k != d) {
                if s[k] != base[k] {
                    return Err(Error::Usage(format!(
                        "numeric.{what}: all the input array dimensions except for the \
                         concatenation axis must match exactly, but along dimension {k}, the \
                         array at index 0 has size {} and the array at index {i} has size {} \
                         (shapes {} and {})",
                        base[k],
                        s[k],
                        shape_text(&base),
                        shape_text(&s)
                    )));
                }
            }
            shape[d] += s[d];
            dtype = result_type(dtype, a.dtype()?);
        }
        let out = self.zeros(&shape, dtype);
        let mut at = 0i64;
        for a in arrays {
            let extent = a.shape()?[d] as i64;
            let mut ranges = vec![Range::all(); shape.len()];
            ranges[d] = Range::new(at, at + extent);
            out.slice(&ranges).assign(*a)?;
            at += extent;
        }
        Ok(out)
    }
}
