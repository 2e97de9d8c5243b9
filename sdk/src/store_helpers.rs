//! Conveniences every plugin needs around stores: checking an argument's dtype and rank
//! with an error that names the operation, and making a 0-d store that holds one value
//! (the identity a reduction folds into, or a constant).

use crate::{Dtype, Error, KernelScalar, Scalar, Store, host};

impl Store {
    /// This store's shape, if its dtype is `dtype`; otherwise an error naming `op`:
    /// `scale: needs an array of f64, not i64`.
    pub fn require_dtype(&self, op: &str, dtype: Dtype) -> Result<Vec<u64>, Error> {
        let got = self.dtype();
        if got != dtype {
            return Err(crate::error(format!(
                "{op}: needs an array of {}, not {}",
                crate::ir_dtype(dtype).name(),
                crate::ir_dtype(got).name()
            )));
        }
        Ok(self.shape())
    }

    /// This store's shape, if its dtype is `dtype` and it has `rank` dimensions; otherwise an
    /// error naming `op`: `mean: needs a 1-dimensional f64 array, not i64 of shape [3, 4]`.
    pub fn require(&self, op: &str, dtype: Dtype, rank: usize) -> Result<Vec<u64>, Error> {
        let (got, shape) = (self.dtype(), self.shape());
        if got == dtype && shape.len() == rank {
            return Ok(shape);
        }
        let name = |d: Dtype| crate::ir_dtype(d).name();
        Err(crate::error(format!(
            "{op}: needs a {rank}-dimensional {} array, not {} of shape {}",
            name(dtype),
            name(got),
            weft_ir::shape::tuple(&shape)
        )))
    }
}

/// A new 0-d store holding `value` (its dtype is the value's).
pub fn scalar_store(value: impl KernelScalar) -> Result<Store, Error> {
    let (dtype, bytes) = match value.into_scalar() {
        Scalar::F32(v) => (Dtype::F32, v.to_le_bytes().to_vec()),
        Scalar::F64(v) => (Dtype::F64, v.to_le_bytes().to_vec()),
        Scalar::I32(v) => (Dtype::I32, v.to_le_bytes().to_vec()),
        Scalar::I64(v) => (Dtype::I64, v.to_le_bytes().to_vec()),
        Scalar::Bool(v) => (Dtype::Bool, vec![u8::from(v)]),
    };
    host::store_from_bytes(&[], dtype, &bytes)
}
