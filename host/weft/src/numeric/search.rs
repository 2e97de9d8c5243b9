//! Searching and masks, composed from the plugin's operations: `argmax`/`argmin` (the
//! extreme, then the first position that holds it), `any`/`all`, `nonzero` (NumPy's `where`
//! with one argument), boolean-mask reads and masked assignment.

use weft_ir::DType;

use super::{Array, Operand, Reduction, shape_text};
use crate::{Error, Result};

/// `axis` of an array of rank `rank` as an index (negative counts from the end), or NumPy's
/// error.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let d = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(d)
        .ok()
        .filter(|&d| d < rank)
        .ok_or_else(|| {
            Error::Usage(format!(
                "axis {axis} is out of bounds for array of dimension {rank}"
            ))
        })
}

impl Array {
    /// The elements at the integer positions `indices` along `axis` (`None`: of the flattened
    /// array), as NumPy's `take`: the result's shape is this one with that dimension replaced
    /// by `indices`' shape. Negative positions count from the end; one out of range is an
    /// error (when the gather runs), and nothing is read out of bounds.
    #[track_caller]
    pub fn take(&self, indices: &Array, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.pair("take", indices, |g, s, a, i| g.call_take(s, a, i, axis))
    }

    /// The running sum along `axis` (`None`: of the flattened array), as NumPy's `cumsum`
    /// (bool and `i32` arrays sum as `i64`).
    #[track_caller]
    pub fn cumsum(&self, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.derive("cumsum", |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_cumsum(s, a, axis)
        })
    }

    /// The position of the largest element along `axis` (`None`: of the flattened array), as
    /// `int64`; the first one on ties, and the first NaN where there is one (NumPy's
    /// `argmax`).
    #[track_caller]
    pub fn argmax(&self, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.arg_extreme("argmax", Reduction::Max, axis)
    }

    /// The position of the smallest element along `axis` (NumPy's `argmin`; see
    /// [`Array::argmax`]).
    #[track_caller]
    pub fn argmin(&self, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.arg_extreme("argmin", Reduction::Min, axis)
    }

    fn arg_extreme(&self, what: &str, op: Reduction, axis: Option<i64>) -> Array {
        let result = (|| -> Result<Array> {
            let a = match axis {
                None => self.reshape(&[-1]),
                Some(_) => self.clone(),
            };
            let shape = a.shape()?;
            let d = normalize_axis(axis.unwrap_or(0), shape.len())?;
            let n = shape[d];
            if n == 0 {
                return Err(Error::Usage(format!(
                    "numeric.{what}: attempt to get {what} of an empty sequence"
                )));
            }
            let extreme = a.reduce_axes(op, Some(&[d as i64]), true);
            // Where the extreme is NaN, the NaNs are the hits (a != a only there).
            let hit = a.eq(&extreme).logical_or(&a.ne(&a));
            let mut along = vec![1i64; shape.len()];
            along[d] = n as i64;
            let position = self
                .np
                .arange(0.0, n as f64, 1.0, DType::I64)
                .reshape(&along);
            let first = hit.select(&position, Operand::Int(n as i64));
            Ok(first.reduce_axes(Reduction::Min, Some(&[d as i64]), false))
        })();
        result.unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    /// Whether any element over `axes` (`None`: all) is nonzero (NumPy's `any`), as bool.
    #[track_caller]
    pub fn any(&self, axes: Option<&[i64]>, keepdims: bool) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.truth().reduce_axes(Reduction::Max, axes, keepdims)
    }

    /// Whether every element over `axes` (`None`: all) is nonzero (NumPy's `all`), as bool.
    #[track_caller]
    pub fn all(&self, axes: Option<&[i64]>, keepdims: bool) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.truth().reduce_axes(Reduction::Min, axes, keepdims)
    }

    /// `self != 0` as bool (`self` itself where it is bool already).
    #[track_caller]
    fn truth(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        match self.dtype() {
            Ok(DType::Bool) => self.clone(),
            Ok(_) => self.ne(Operand::Int(0)),
            Err(e) => self.np.wrap(Err(e)),
        }
    }

    /// The positions of the nonzero elements, one `int64` array per dimension, in row-major
    /// order (NumPy's `nonzero`, and `where` with one argument). How many there are depends on
    /// the values, so this reads the array on the host and builds the positions there.
    #[track_caller]
    pub fn nonzero(&self) -> Result<Vec<Array>> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let shape = self.shape()?;
        let values = self.to_vec()?;
        let mut positions: Vec<Vec<f64>> = vec![Vec::new(); shape.len().max(1)];
        for (flat, _) in values.iter().enumerate().filter(|(_, v)| **v != 0.0) {
            let mut rest = flat as u64;
            for d in (0..shape.len()).rev() {
                positions[d].push((rest % shape[d]) as f64);
                rest /= shape[d];
            }
        }
        if shape.is_empty() {
            // NumPy treats a 0-d array as 1-d here: one position (0) if it is nonzero.
            positions[0] = values.iter().filter(|v| **v != 0.0).map(|_| 0.0).collect();
        }
        Ok(positions
            .into_iter()
            .map(|p| self.np.from_f64s(&[p.len() as u64], &p, DType::I64))
            .collect())
    }

    /// The elements where `mask` (a bool array of this shape) is true, in row-major order, as
    /// a 1-d array (NumPy's `a[mask]`). The count depends on the mask, which is read on the
    /// host; the elements are gathered by a task.
    #[track_caller]
    pub fn masked(&self, mask: &Array) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let (shape, mask_shape) = (self.shape()?, mask.shape()?);
        if mask.dtype()? != DType::Bool {
            return Err(Error::Usage(
                "numeric.masked: the mask must be a bool array".into(),
            ));
        }
        if shape != mask_shape {
            return Err(Error::Usage(format!(
                "numeric.masked: boolean index did not match indexed array: the array has \
                 shape {} and the mask {}",
                shape_text(&shape),
                shape_text(&mask_shape)
            )));
        }
        let flat = mask.reshape(&[-1]).nonzero()?;
        let positions = flat
            .into_iter()
            .next()
            .ok_or_else(|| Error::Usage("numeric.masked: a 1-d mask gave no positions".into()))?;
        Ok(self.reshape(&[-1]).take(&positions, Some(0)))
    }

    /// `self[mask] = value` where `value` broadcasts to this shape (NumPy's
    /// `np.copyto(a, value, where=mask)`, and `a[mask] = scalar`): elements where `mask` is
    /// true take `value`'s, the others keep theirs.
    #[track_caller]
    pub fn assign_where<'a>(&self, mask: &Array, value: impl Into<Operand<'a>>) -> Result<()> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let merged = mask.select(value, self);
        self.assign(&merged)
    }
}
