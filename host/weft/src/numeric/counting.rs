//! Counting into bins, adding and assigning at positions (NumPy's `bincount`, `histogram`,
//! `np.add.at` and `a[i, j] = v` with integer index arrays). `bincount`, `add_at` and
//! `assign_at` are tasks: the numeric plugin's `scatter`, one point that walks the positions
//! in order (NumPy's order: a repeated position keeps the last value, or adds every value in
//! turn), after element-wise tasks that turn index arrays into flat positions; nothing but
//! `bincount`'s largest position (its result's length) is read on the host. `histogram`
//! bins on the back end as NumPy does (its offsets, truncation and corrections at the
//! edges, element-wise tasks) and sums the weights into bins by blocks of 65,536 elements
//! with a scatter each, NumPy's order of sums, so NumPy's bits for `float64` data; it reads
//! the range (the minimum and maximum) and, where a range is given, how many values lie in
//! it.

use weft_ir::DType;

use super::{Array, Ix, Operand, Range};
use crate::{Error, Result};

/// The single `int64` value of a 0-d array (runs the tasks it depends on).
fn int_item(a: &Array) -> Result<i64> {
    a.astype(DType::I64)
        .to_vec_of::<i64>()?
        .first()
        .copied()
        .ok_or_else(|| Error::Usage("internal: an empty reduction".into()))
}

/// NumPy's error for the first index (by dimension, then element) out of its dimension's
/// range, read on the host (an error path: one read per index array).
fn first_outside(op: &str, indices: &[&Array], common: &[u64], shape: &[u64]) -> Error {
    for (d, ix) in indices.iter().enumerate() {
        let extent = shape[d] as i64;
        let values = ix
            .broadcast_to(common)
            .astype(DType::I64)
            .reshape(&[-1])
            .to_vec_of::<i64>();
        let values = match values {
            Ok(v) => v,
            Err(e) => return e,
        };
        if let Some(i) = values.iter().find(|&&i| i < -extent || i >= extent) {
            return Error::Usage(format!(
                "{op}: index {i} is out of bounds for axis {d} with size {extent}"
            ));
        }
    }
    Error::Usage(format!("{op}: an index is out of bounds"))
}

/// `i` (flat `int64` positions into `len` elements) wrapped from the end, or NumPy's error
/// for `op` where one is out of range (one read, of whether any is).
fn checked_flat(op: &str, i: &Array, len: i64) -> Result<Array> {
    let wrapped = i.lt(0i64).select(&(i + len), i);
    let outside = wrapped.lt(0i64) | wrapped.ge(len);
    if i.shape()?.first().is_some_and(|&n| n > 0) && int_item(&outside.any(None, false))? != 0 {
        return Err(Error::Usage(format!(
            "{op}: an index is out of bounds for axis 0 with size {len}"
        )));
    }
    Ok(wrapped)
}

/// NumPy's histogram block: it sums each block of this many elements into bins, then adds
/// the block's sums to the totals.
const HISTOGRAM_BLOCK: usize = 65_536;

impl Array {
    /// The number of occurrences of each value of this 1-d array of non-negative integers
    /// (`int64`), or the sum of `weights` (`float64`) at each, in element order: NumPy's
    /// `bincount`. The result has `max + 1` bins, at least `minlength`.
    #[track_caller]
    pub fn bincount(&self, weights: Option<&Array>, minlength: u64) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let shape = self.shape()?;
        if shape.len() != 1 {
            return Err(Error::Usage(format!(
                "numeric.bincount: object too deep for desired array (an array of {} \
                 dimensions; bincount takes one)",
                shape.len()
            )));
        }
        let dtype = self.dtype()?;
        if !(dtype.is_int() || dtype.is_unsigned() || dtype == DType::Bool) {
            return Err(Error::Usage(
                "numeric.bincount: Cannot cast array data from dtype('float64') to \
                 dtype('int64') according to the rule 'safe'"
                    .into(),
            ));
        }
        let positions = self.astype(DType::I64);
        let n = shape[0];
        let (low, high) = if n == 0 {
            (0, -1)
        } else {
            (int_item(&positions.min())?, int_item(&positions.max())?)
        };
        if low < 0 {
            return Err(Error::Usage(format!(
                "numeric.bincount: 'list' argument must have no negative elements (found \
                 {low})"
            )));
        }
        let bins = ((high + 1) as u64).max(minlength);
        let values = match weights {
            None => self.np.ones(&[n], DType::I64),
            Some(w) => {
                if w.shape()? != shape {
                    return Err(Error::Usage(
                        "numeric.bincount: The weights and list don't have the same length.".into(),
                    ));
                }
                w.astype(DType::F64)
            }
        };
        let dtype = if weights.is_some() {
            DType::F64
        } else {
            DType::I64
        };
        let out = self.np.zeros(&[bins], dtype);
        out.scatter(&positions, &values, true)?;
        Ok(out)
    }

    /// The histogram of the flattened array in `bins` bins of equal width over `range`
    /// (`None`: the smallest to the largest element), and the bins' `bins + 1` edges: NumPy's
    /// `histogram(a, bins, range, weights=weights)`. Counts are `int64`; with `weights`, the
    /// weights' sums (`float64`). NumPy's binning and its order of sums (blocks of 65,536
    /// elements), so the same bits for `float64` data (NumPy bins `float32` data with
    /// `float32` edges; here they are `float64`).
    #[track_caller]
    pub fn histogram(
        &self,
        bins: u64,
        range: Option<(f64, f64)>,
        weights: Option<&Array>,
    ) -> Result<(Array, Array)> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if bins == 0 {
            return Err(Error::Usage(
                "numeric.histogram: `bins` must be positive, when an integer".into(),
            ));
        }
        let x = match self.dtype()? {
            DType::F64 => self.reshape(&[-1]),
            _ => self.reshape(&[-1]).astype(DType::F64),
        };
        let len = x.shape()?.first().copied().unwrap_or(0);
        let (mut first, mut last) = match range {
            Some((lo, hi)) if lo > hi => {
                return Err(Error::Usage(
                    "numeric.histogram: max must be larger than min in range parameter.".into(),
                ));
            }
            Some(r) => r,
            None if len == 0 => (0.0, 1.0),
            // Two reads (NaN propagates through both).
            None => (x.min().item()?, x.max().item()?),
        };
        if !first.is_finite() || !last.is_finite() {
            let source = if range.is_some() {
                "supplied"
            } else {
                "autodetected"
            };
            return Err(Error::Usage(format!(
                "numeric.histogram: {source} range of [{first}, {last}] is not finite"
            )));
        }
        if first == last {
            first -= 0.5;
            last += 0.5;
        }
        let w = match weights {
            None => None,
            Some(w) => {
                if w.shape()?.iter().product::<u64>() != len {
                    return Err(Error::Usage(
                        "numeric.histogram: weights should have the same shape as a.".into(),
                    ));
                }
                Some(w.reshape(&[-1]).astype(DType::F64))
            }
        };
        // Only the values in the range count (NumPy drops the others: a read of their
        // number, where a range was given).
        let (x, w) = match range {
            None => (x, w),
            Some(_) => {
                let keep = x.ge(first) & x.le(last);
                let w = match w {
                    Some(w) => Some(w.masked(&keep)?),
                    None => None,
                };
                (x.masked(&keep)?, w)
            }
        };
        // NumPy's bin of each value: its offset scaled and truncated, then moved by one where
        // rounding put it past an edge (the last bin holds its right edge).
        // The edges are computed where they are compared, with `linspace`'s own arithmetic
        // (`first + i * step`, the last exactly `last`): the same bits as `edges`, and no
        // gather.
        let n = bins as i64;
        let step = (last - first) / bins as f64;
        let edge = |i: &Array| {
            let inside = &(&i.astype(DType::F64) * step) + first;
            i.eq(n).select(Operand::Scalar(last), &inside)
        };
        let scaled = &(&(&x - first) / (last - first)) * bins as f64;
        let i = scaled.clip(0.0, bins as f64).astype(DType::I64);
        let i = i.eq(n).select(&(&i - 1i64), &i);
        let i = x.lt(&edge(&i)).select(&(&i - 1i64), &i);
        let past = x.ge(&edge(&(&i + 1i64))) & i.ne(n - 1);
        let positions = past.select(&(&i + 1i64), &i);
        let count = x.shape()?.first().copied().unwrap_or(0);
        let hist = match w {
            None => {
                let counts = self.np.zeros(&[bins], DType::I64);
                counts.scatter(&positions, &self.np.ones(&[count], DType::I64), true)?;
                counts
            }
            Some(w) => {
                // NumPy's order of sums: each block's values summed in order, then the
                // block's sums added to the totals.
                let totals = self.np.zeros(&[bins], DType::F64);
                let span = |lo: u64, hi: u64| [Ix::Slice(Range::new(lo as i64, hi as i64))];
                for lo in (0..count).step_by(HISTOGRAM_BLOCK) {
                    let hi = (lo + HISTOGRAM_BLOCK as u64).min(count);
                    let block = self.np.zeros(&[bins], DType::F64);
                    block.scatter(
                        &positions.index(&span(lo, hi)),
                        &w.index(&span(lo, hi)),
                        true,
                    )?;
                    totals.assign(&(&totals + &block))?;
                }
                totals
            }
        };
        // The edges NumPy returns beside the histogram (the binning computed its own).
        let edges = self.np.linspace(first, last, bins + 1, DType::F64);
        Ok((hist, edges))
    }

    /// `self[indices] += values`, each index as often as it occurs (NumPy's unbuffered
    /// `np.add.at(a, indices, values)`): `indices` integer positions of the flattened array
    /// (negative ones count from the end), `values` broadcast to their shape. Added in the
    /// order of `indices`, as NumPy adds.
    #[track_caller]
    pub fn add_at<'a>(&self, indices: &Array, values: impl Into<Operand<'a>>) -> Result<()> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        if !matches!(indices.dtype()?, DType::I64 | DType::I32) {
            return Err(Error::Usage(
                "numeric.add_at: arrays used as indices must be of integer type".into(),
            ));
        }
        let len = self.shape()?.iter().product::<u64>() as i64;
        // Negative positions wrapped; one out of range is NumPy's error, before anything is
        // added.
        let flat = checked_flat(
            "numeric.add_at",
            &indices.reshape(&[-1]).astype(DType::I64),
            len,
        )?;
        self.scatter_into(&flat, &indices.shape()?, values, true)
    }

    /// `self[i0, i1, ...] = values` with one integer index array per dimension (NumPy's
    /// assignment through integer arrays, as in `N[Xi[I], Yi[I]] = k`): the index arrays
    /// broadcast together, negative indices count from the end, `values` broadcasts to
    /// their shape, and where an element is named twice the last value stays (NumPy's
    /// behaviour in practice). The positions and values are read and stored on the host.
    #[track_caller]
    pub fn assign_at<'a>(&self, indices: &[&Array], values: impl Into<Operand<'a>>) -> Result<()> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let (positions, shape) = self.flat_positions("numeric.assign_at", indices)?;
        self.scatter_into(&positions, &shape, values, false)
    }

    /// `self.flat[positions] = values` (or `+=`), `values` broadcast to `shape` (the
    /// positions' shape before they were flattened), through a contiguous copy of this array
    /// written back whole.
    fn scatter_into<'a>(
        &self,
        positions: &Array,
        shape: &[u64],
        values: impl Into<Operand<'a>>,
        accumulate: bool,
    ) -> Result<()> {
        let dtype = self.dtype()?;
        let count = shape.iter().product::<u64>();
        let v = match values.into() {
            Operand::Array(a) => a.broadcast_to(shape).reshape(&[-1]),
            Operand::Scalar(x) => self.np.full(&[count], x, dtype),
            Operand::Int(x) => self
                .np
                .from_slice(&[count], &vec![x; count as usize])
                .astype(dtype),
        };
        let dims: Vec<i64> = self.shape()?.iter().map(|&e| e as i64).collect();
        let work = self.reshape(&[-1]).copy();
        work.scatter(positions, &v.astype(dtype), accumulate)?;
        self.assign(&work.reshape(&dims))
    }

    /// The flat positions (an `int64` task result) that one integer index array per
    /// dimension names (broadcast together, negative ones from the end), and the indices'
    /// shape; NumPy's error where an index is out of its dimension's range.
    fn flat_positions(&self, op: &str, indices: &[&Array]) -> Result<(Array, Vec<u64>)> {
        let shape = self.shape()?;
        if indices.len() != shape.len() {
            return Err(Error::Usage(format!(
                "{op}: {} index arrays for an array of {} dimensions (one per dimension)",
                indices.len(),
                shape.len()
            )));
        }
        let mut common: Vec<u64> = Vec::new();
        for ix in indices {
            if !matches!(ix.dtype()?, DType::I64 | DType::I32) {
                return Err(Error::Usage(format!(
                    "{op}: arrays used as indices must be of integer type"
                )));
            }
            common = super::products::broadcast_batch(&common, &ix.shape()?).ok_or_else(|| {
                Error::Usage(format!(
                    "{op}: shape mismatch: indexing arrays could not be broadcast together"
                ))
            })?;
        }
        // Each index wrapped from the end and checked against its dimension on the back end
        // (one read: whether any is out of range, NumPy's error before anything is stored).
        let mut positions: Option<Array> = None;
        let mut bad: Option<Array> = None;
        let mut stride = 1i64;
        for (d, ix) in indices.iter().enumerate().rev() {
            let extent = shape[d] as i64;
            let i = ix.broadcast_to(&common).astype(DType::I64).reshape(&[-1]);
            let wrapped = i.lt(0i64).select(&(&i + extent), &i);
            let outside = wrapped.lt(0i64) | wrapped.ge(extent);
            let term = &wrapped * stride;
            positions = Some(match positions {
                None => term,
                Some(p) => &p + &term,
            });
            bad = Some(match bad {
                None => outside,
                Some(b) => &b | &outside,
            });
            stride = stride.saturating_mul(extent);
        }
        let positions = match (positions, bad) {
            (Some(p), Some(b)) => {
                if common.iter().product::<u64>() > 0 && int_item(&b.any(None, false))? != 0 {
                    return Err(first_outside(op, indices, &common, &shape));
                }
                p
            }
            _ => self.np.zeros(&[0], DType::I64),
        };
        Ok((positions, common))
    }
}

impl Array {
    /// For each `j` in order, `self[positions[j]] = values[j]` (`+=` when `accumulate`): the
    /// numeric plugin's `scatter`, one task. `self` is 1-d (a contiguous array: a view that
    /// is not would be written through a copy), `positions` 1-d `int64` in range, `values`
    /// of their shape.
    pub(crate) fn scatter(
        &self,
        positions: &Array,
        values: &Array,
        accumulate: bool,
    ) -> Result<()> {
        let dst = self.handle()?.id();
        let (p, v) = (positions.handle()?.id(), values.handle()?.id());
        self.np
            .check_same(&positions.np)
            .map_err(|e| super::shared(&e))?;
        self.np
            .check_same(&values.np)
            .map_err(|e| super::shared(&e))?;
        let key = super::replayed::CallKey::new("scatter").word(u64::from(accumulate));
        self.np
            .replayed("scatter", key, &[dst, p, v], |g, s| {
                let d = s.data_mut().lend(dst)?;
                let p = s.data_mut().lend(p)?;
                let v = s.data_mut().lend(v)?;
                Ok(g.call_scatter(s, d, p, v, accumulate)?.map(|()| None))
            })
            .map(|_| ())
    }
}
