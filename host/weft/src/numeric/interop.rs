//! Arrays from and to other plugins: any store in the runtime (one another plugin returned,
//! say) becomes a numeric [`Array`] with a checked dtype and shape, and an array goes back as
//! a store handle or a dynamic [`Value`].

use weft_ir::DType;
use weft_runtime::StoreHandle;

use super::{Array, Numeric, shape_text};
use crate::{Error, Result, Value};

impl Numeric {
    /// `store` as an array of this plugin's runtime, after checking that it has `dtype` and
    /// `shape` (the store stays shared: writes through either are seen by both).
    pub fn from_store(&self, store: StoreHandle, dtype: DType, shape: &[u64]) -> Result<Array> {
        let a = self.wrap(Ok(store));
        let (got_dtype, got_shape) = (a.dtype()?, a.shape()?);
        if got_dtype != dtype || got_shape != shape {
            return Err(Error::Usage(format!(
                "numeric.from_store: expected a {dtype} array of shape {}, the store is a \
                 {got_dtype} array of shape {}",
                shape_text(shape),
                shape_text(&got_shape)
            )));
        }
        Ok(a)
    }

    /// `value` (a [`Value::Store`], as a plugin call returns it) as an array with the checked
    /// `dtype` and `shape`.
    pub fn from_value(&self, value: Value, dtype: DType, shape: &[u64]) -> Result<Array> {
        let store = StoreHandle::try_from(value).map_err(|other| {
            Error::Usage(format!(
                "numeric.from_value: expected a store, got {other:?}"
            ))
        })?;
        self.from_store(store, dtype, shape)
    }
}

impl Array {
    /// The store behind this array (shared, not copied), or the error that poisoned it.
    pub fn store(&self) -> Result<StoreHandle> {
        self.handle().cloned()
    }
}

impl TryFrom<&Array> for Value {
    type Error = Error;

    /// The array as a [`Value::Store`] for a plugin call, or the error that poisoned it.
    fn try_from(a: &Array) -> Result<Value> {
        Ok(Value::Store(a.store()?))
    }
}
