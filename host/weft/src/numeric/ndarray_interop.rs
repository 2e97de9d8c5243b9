//! Arrays to and from `ndarray` (the cargo feature `ndarray`), where Rust's scientific code
//! holds its data: [`Numeric::from_ndarray`] and [`Array::to_ndarray`], in every dtype that
//! [`Element`] names.
//!
//! A store lives in the runtime's memory (on the CPU back end, buffers the runtime owns and
//! may hand to a fused task as scratch; on the GPU, device memory), so neither direction can
//! lend its elements to the other side: each copies them once. An `ndarray` array in standard
//! (row-major, contiguous) layout is read in place, with no intermediate copy; any other
//! layout (a transpose, a strided slice) is gathered in its logical row-major order first.
//! The array that [`Array::to_ndarray`] returns owns the vector the store was read into.

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use super::{Array, Element, Numeric, shape_text};
use crate::{Error, Result};

impl Numeric {
    /// An array of `T`'s dtype holding a copy of `a`, with `a`'s shape and its elements in
    /// their logical row-major order, whatever `a`'s memory layout.
    #[track_caller]
    pub fn from_ndarray<T, S, D>(&self, a: &ArrayBase<S, D>) -> Array
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape: Vec<u64> = a.shape().iter().map(|&e| e as u64).collect();
        match a.as_slice() {
            Some(values) => self.from_slice(&shape, values),
            None => {
                let values: Vec<T> = a.iter().copied().collect();
                self.from_slice(&shape, &values)
            }
        }
    }
}

impl Array {
    /// The array as an `ndarray` array of `T`, which must be the array's dtype (convert with
    /// [`Array::astype`] first otherwise), with its shape, in standard layout. This runs the
    /// pending tasks.
    #[track_caller]
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let shape: Vec<usize> = self
            .shape()?
            .iter()
            .map(|&e| usize::try_from(e))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Usage(format!("to_ndarray: {e}")))?;
        let values = self.to_vec_of::<T>()?;
        ArrayD::from_shape_vec(IxDyn(&shape), values).map_err(|e| {
            Error::Usage(format!(
                "to_ndarray: an array of shape {}: {e}",
                shape_text(&self.shape().unwrap_or_default())
            ))
        })
    }
}
