//! Views and shapes: NumPy's basic indexing ([`Array::index`], [`Array::slice`], with the
//! `weft` crate's own [`Ix`] and [`Range`]) and the shape operations, each the numeric
//! plugin's export of the same name, as in the `weft` crate.

use crate::bindings::weft::plugin::numeric as np;
use crate::{Array, Result};

pub use weft_ir::index::{Ix, Range};

/// The WIT form of a range.
fn wit_range(r: Range) -> np::Range {
    np::Range {
        start: r.start,
        stop: r.stop,
        step: r.step,
    }
}

/// The WIT form of an index entry.
fn wit_subscript(i: Ix) -> np::Subscript {
    match i {
        Ix::At(at) => np::Subscript::At(at),
        Ix::Slice(r) => np::Subscript::Range(wit_range(r)),
        Ix::NewAxis => np::Subscript::NewAxis,
    }
}

impl Array {
    /// NumPy's basic indexing `self[indices]`: a view sharing this array's storage
    /// (writes through it with [`Array::assign`] change this array).
    pub fn index(&self, indices: &[Ix]) -> Array {
        let indices: Vec<np::Subscript> = indices.iter().map(|&i| wit_subscript(i)).collect();
        self.derive(|s| np::index(s, &indices))
    }

    /// A view `self[ranges]` sharing this array's storage.
    pub fn slice(&self, ranges: &[Range]) -> Array {
        let ranges: Vec<np::Range> = ranges.iter().map(|&r| wit_range(r)).collect();
        self.derive(|s| np::slice(s, &ranges))
    }

    /// The view with axes permuted: dimension `d` of the result is dimension `axes[d]` of
    /// `self` (NumPy's `transpose(a, axes)`).
    pub fn permute(&self, axes: &[u32]) -> Array {
        self.derive(|s| np::permute(s, axes))
    }

    /// `self` with another shape (one extent may be -1): a view where the layout allows it,
    /// a copy otherwise, as NumPy's `reshape`.
    pub fn reshape(&self, shape: &[i64]) -> Array {
        self.derive(|s| np::reshape(s, shape))
    }

    /// The read-only view broadcast to `shape` (NumPy's `broadcast_to`).
    pub fn broadcast_to(&self, shape: &[u64]) -> Array {
        self.derive(|s| np::broadcast_to(s, shape))
    }

    /// An array of this one's shape and dtype filled with `value` (NumPy's `full_like`).
    pub fn full_like(&self, value: f64) -> Array {
        match self.shape_and_dtype() {
            Ok((shape, dtype)) => crate::Numeric.full(&shape, value, dtype),
            Err(e) => Array::failed(std::rc::Rc::new(e)),
        }
    }

    /// Zeros of this array's shape and dtype (NumPy's `zeros_like`).
    pub fn zeros_like(&self) -> Array {
        self.full_like(0.0)
    }

    /// Ones of this array's shape and dtype (NumPy's `ones_like`).
    pub fn ones_like(&self) -> Array {
        self.full_like(1.0)
    }

    fn shape_and_dtype(&self) -> Result<(Vec<u64>, crate::DType)> {
        Ok((self.shape()?, self.dtype()?))
    }
}
