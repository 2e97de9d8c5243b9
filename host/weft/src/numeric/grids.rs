//! Coordinate grids (NumPy's `meshgrid` and `mgrid`): each output is a vector broadcast over
//! the grid's shape and copied, as NumPy's are.

use weft_ir::DType;

use super::{Array, Error, Numeric, Result};

/// How [`Numeric::meshgrid`] orders its outputs' axes (NumPy's `indexing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Cartesian (NumPy's default, `"xy"`): the first two axes swapped, so that with two
    /// vectors of lengths `nx` and `ny` the grids have shape `(ny, nx)`.
    Xy,
    /// Matrix (`"ij"`): the grids have shape `(n0, n1, ...)`.
    Ij,
}

impl Numeric {
    /// Coordinate matrices from coordinate vectors (NumPy's `meshgrid`): one grid per input
    /// (each flattened first), each a fresh array.
    #[track_caller]
    pub fn meshgrid(&self, vectors: &[&Array], indexing: Indexing) -> Vec<Array> {
        let _site = self.site_guard(std::panic::Location::caller());
        match self.grids(vectors, indexing) {
            Ok(grids) => grids,
            Err(e) => {
                let e = std::rc::Rc::new(e);
                vectors
                    .iter()
                    .map(|_| self.wrap(Err(Error::Usage(e.to_string()))))
                    .collect()
            }
        }
    }

    fn grids(&self, vectors: &[&Array], indexing: Indexing) -> Result<Vec<Array>> {
        let flat: Vec<Array> = vectors.iter().map(|v| v.reshape(&[-1])).collect();
        let mut lengths = Vec::with_capacity(flat.len());
        for v in &flat {
            lengths.push(v.shape()?.first().copied().unwrap_or(1));
        }
        let n = flat.len();
        // The axis of the grid along which input `i` varies.
        let axis_of = |i: usize| match (indexing, i) {
            (Indexing::Xy, 0) if n > 1 => 1,
            (Indexing::Xy, 1) => 0,
            _ => i,
        };
        let mut shape = vec![0u64; n];
        for (i, &len) in lengths.iter().enumerate() {
            shape[axis_of(i)] = len;
        }
        Ok(flat
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut along = vec![1i64; n];
                along[axis_of(i)] = shape[axis_of(i)] as i64;
                v.reshape(&along).broadcast_to(&shape).copy()
            })
            .collect())
    }

    /// A dense multi-dimensional grid of integers (NumPy's `mgrid[a0:b0:s0, a1:b1:s1, ...]`):
    /// shape `(d, n0, n1, ...)` for `d` ranges `(start, stop, step)`, entry `[k, i0, i1, ...]`
    /// being `start_k + i_k * step_k`; `i64`.
    #[track_caller]
    pub fn mgrid(&self, ranges: &[(i64, i64, i64)]) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        if let Some(&(_, _, 0)) = ranges.iter().find(|r| r.2 == 0) {
            return self.wrap(Err(Error::Usage(
                "numeric.mgrid: a range's step must not be zero".into(),
            )));
        }
        let vectors: Vec<Array> = ranges
            .iter()
            .map(|&(start, stop, step)| {
                self.arange(start as f64, stop as f64, step as f64, DType::I64)
            })
            .collect();
        let refs: Vec<&Array> = vectors.iter().collect();
        let grids = self.meshgrid(&refs, Indexing::Ij);
        let refs: Vec<&Array> = grids.iter().collect();
        self.stack(&refs, 0)
    }
}
