//! Searching and masks, composed from the plugin's operations: `argmax`/`argmin` (the
//! extreme, then the first position that holds it), `any`/`all`, `nonzero` (NumPy's `where`
//! with one argument), boolean-mask reads and masked assignment.

use weft_ir::DType;

use super::{Array, Operand, Reduction, Slot, shape_text};
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

/// The positions of the true elements of the last mask that an array was compressed through
/// (`Array::masked`), with what identifies that mask's elements: its store (a view never
/// changes what it maps, and store ids are never reused) and its write stamp
/// (`Runtime::write_stamp`: the storage's write generation, which every submitted task that
/// writes it and every host write moves on, and the count of trace replays begun). Kept by
/// the facade, one at a time, as a store handle (not an `Array`, which would hold the facade
/// itself); the positions are an internal store that no caller gets to write.
pub(crate) struct MaskPositions {
    key: (weft_runtime::StoreId, (u64, u64)),
    positions: weft_runtime::StoreHandle,
}

impl Array {
    /// The elements at the integer positions `indices` along `axis` (`None`: of the flattened
    /// array), as NumPy's `take`: the result's shape is this one with that dimension replaced
    /// by `indices`' shape. Negative positions count from the end; one out of range is an
    /// error (when the gather runs), and nothing is read out of bounds.
    #[track_caller]
    pub fn take(&self, indices: &Array, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let key = super::replayed::CallKey::new("take").option(axis);
        self.pair("take", key, indices, |g, s, a, i| {
            g.call_take(s, a, i, axis)
        })
    }

    /// The running sum along `axis` (`None`: of the flattened array), as NumPy's `cumsum`
    /// (bool and `i32` arrays sum as `i64`, unsigned ones as `uint64`).
    #[track_caller]
    pub fn cumsum(&self, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if let Some(r) = self.through_i64(super::unsigned::Kept::Total, |a| a.cumsum(axis)) {
            return r;
        }
        let key = super::replayed::CallKey::new("cumsum").option(axis);
        self.derive_replayed("cumsum", key, &[], |g, s, id| {
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

    fn arg_extreme(&self, what: &'static str, op: Reduction, axis: Option<i64>) -> Array {
        if let Some(r) = self.through_i64(super::unsigned::Kept::Position, |a| {
            a.arg_extreme(what, op, axis)
        }) {
            return r;
        }
        let key = super::replayed::CallKey::new(what)
            .word(op as u64)
            .option(axis);
        self.derive_replayed(what, key, &[], |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_arg_reduce(s, op, a, axis)
        })
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

    /// The positions of the nonzero elements of the flattened array, as `int64`, in order
    /// (NumPy's `flatnonzero`). They are found on the back end: a sum counts `self != 0`, and
    /// one task walks the mask writing each position at the running count. The one value
    /// read on the host is the count (the result's shape needs it), so this runs the tasks it
    /// depends on.
    #[track_caller]
    pub fn flatnonzero(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.derive("flatnonzero", |g, s, id| {
            let a = s.data_mut().lend(id)?;
            g.call_flatnonzero(s, a)
        })
    }

    /// The positions of the nonzero elements, one `int64` array per dimension, in row-major
    /// order (NumPy's `nonzero`, and `where` with one argument): [`Array::flatnonzero`]'s
    /// positions, unravelled by tasks (`(p % (stride * extent)) / stride` per dimension).
    /// A 0-d array counts as 1-d, as in NumPy.
    #[track_caller]
    pub fn nonzero(&self) -> Result<Vec<Array>> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let shape = self.shape()?;
        let flat = self.flatnonzero();
        flat.shape()?;
        if shape.len() <= 1 {
            return Ok(vec![flat]);
        }
        let mut stride = 1i64;
        let mut coords = Vec::with_capacity(shape.len());
        for &extent in shape.iter().rev() {
            let extent = i64::try_from(extent)
                .map_err(|_| Error::Usage(format!("nonzero: an extent of {extent}")))?;
            let within = flat.binary(
                super::BinaryOp::Remainder,
                Operand::Int(stride.saturating_mul(extent)),
            );
            let coord = within
                .binary(super::BinaryOp::Div, Operand::Int(stride))
                .floor()
                .astype(DType::I64);
            coords.push(coord);
            stride = stride.saturating_mul(extent);
        }
        coords.reverse();
        Ok(coords)
    }

    /// `self[mask] = values` where `values` holds one element for each true element of `mask`
    /// (a bool array of this shape), in row-major order: NumPy's assignment through a boolean
    /// index of compressed values, as in `a[m] = f(a[m])`. Each element where `mask` is true
    /// takes `values[k]`, `k` the number of true elements before it (a running sum of the
    /// mask, gathered from: tasks, with the count read to check `values`' length).
    #[track_caller]
    pub fn assign_masked(&self, mask: &Array, values: &Array) -> Result<()> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.check_mask("numeric.assign_masked", mask)?;
        if self.assign_deferred(mask, values)?.is_some() {
            return Ok(());
        }
        match self.masked_slots("numeric.assign_masked", mask, &values.shape()?)? {
            Some(slots) => self.assign_from_slots(mask, values, &slots),
            None => Ok(()),
        }
    }

    /// The flat positions where `mask` is true, after checking it against this array for
    /// operation `op` (shared by a complex array's two parts). The last mask's positions are
    /// kept (see [`MaskPositions`]): compressing several arrays through one mask, as NumPy
    /// programs do (`z[m]`, `c[m]`, `x[m]`), counts and walks it once.
    pub(crate) fn mask_positions(&self, op: &str, mask: &Array) -> Result<Array> {
        self.check_mask(op, mask)?;
        let handle = mask.handle()?;
        let stamp = self.np.inner.rt.borrow_mut().write_stamp(handle)?;
        let key = (handle.id(), stamp);
        if let Some(kept) = self.np.inner.mask_positions.borrow().as_ref()
            && kept.key == key
        {
            return Ok(Array {
                np: self.np.clone(),
                slot: Slot::Ready(Ok(kept.positions.clone())),
            });
        }
        let positions = mask.reshape(&[-1]).flatnonzero();
        *self.np.inner.mask_positions.borrow_mut() = Some(MaskPositions {
            key,
            positions: positions.handle()?.clone(),
        });
        Ok(positions)
    }

    /// The flattened array's elements at `positions`.
    pub(crate) fn gather_flat(&self, positions: &Array) -> Array {
        self.reshape(&[-1]).take(positions, Some(0))
    }

    /// For `self[mask] = values` of shape `given` (operation `op`): per element, the index
    /// of the value it takes where `mask` is true (the running count of the mask, less one);
    /// `None` where the mask has no true element. Reads the count, to check `given`.
    pub(crate) fn masked_slots(
        &self,
        op: &str,
        mask: &Array,
        given: &[u64],
    ) -> Result<Option<Array>> {
        let shape = self.check_mask(op, mask)?;
        let sums = mask.reshape(&[-1]).cumsum(None);
        let elements: u64 = shape.iter().product();
        let count = match elements {
            0 => 0,
            n => sums.index(&[super::Ix::At(n as i64 - 1)]).item()? as u64,
        };
        if given != [count] && !(count == 1 && given.iter().product::<u64>() == 1) {
            return Err(Error::Usage(format!(
                "{op}: NumPy boolean array indexing assignment cannot assign {} input values to \
                 the {count} output values where the mask is true",
                given.iter().product::<u64>()
            )));
        }
        if count == 0 {
            return Ok(None);
        }
        Ok(Some((&sums - 1i64).maximum(Operand::Int(0))))
    }

    /// `self[mask] = values[slots]`, `slots` from [`Array::masked_slots`].
    pub(crate) fn assign_from_slots(
        &self,
        mask: &Array,
        values: &Array,
        slots: &Array,
    ) -> Result<()> {
        let dims: Vec<i64> = self.shape()?.iter().map(|&e| e as i64).collect();
        let gathered = values.reshape(&[-1]).take(slots, Some(0));
        self.assign_where(mask, &gathered.reshape(&dims))
    }

    /// Checks that `mask` is a bool array of this array's shape, for operation `op`; this
    /// array's shape.
    pub(super) fn check_mask(&self, op: &str, mask: &Array) -> Result<Vec<u64>> {
        let (shape, mask_shape) = (self.shape()?, mask.shape()?);
        if mask.dtype()? != DType::Bool {
            return Err(Error::Usage(format!("{op}: the mask must be a bool array")));
        }
        if shape != mask_shape {
            return Err(Error::Usage(format!(
                "{op}: boolean index did not match indexed array: the array has shape {} and \
                 the mask {}",
                shape_text(&shape),
                shape_text(&mask_shape)
            )));
        }
        Ok(shape)
    }

    /// `self[mask] = value` where `value` broadcasts to this shape (NumPy's
    /// `np.copyto(a, value, where=mask)`, and `a[mask] = scalar`): elements where `mask` is
    /// true take `value`'s, the others keep theirs.
    #[track_caller]
    pub fn assign_where<'a>(&self, mask: &Array, value: impl Into<Operand<'a>>) -> Result<()> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        // The value is cast to this array's dtype first, as NumPy's assignment casts it: a
        // `select` in the promoted dtype would send the elements the mask leaves out through
        // it and back (an `int64` past 2^53 through `float64` loses its low bits).
        let dtype = self.dtype()?;
        let merged = match value.into() {
            Operand::Array(v) if v.dtype()? != dtype => mask.select(&v.astype(dtype), self),
            // A float into signed integers: truncated toward zero, as NumPy's cast; into
            // bools: whether it is nonzero.
            Operand::Scalar(v) if matches!(dtype, DType::I32 | DType::I64) && v.is_finite() => {
                mask.select(Operand::Int(v.trunc() as i64), self)
            }
            Operand::Scalar(v) if dtype == DType::Bool => {
                mask.select(Operand::Int(i64::from(v != 0.0)), self)
            }
            value => mask.select(value, self),
        };
        self.assign(&merged)
    }
}
