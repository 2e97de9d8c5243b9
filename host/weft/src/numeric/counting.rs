//! Counting into bins, adding and assigning at positions (NumPy's `bincount`, `histogram`,
//! `np.add.at` and `a[i, j] = v` with integer index arrays). `bincount`, `add_at` and
//! `assign_at` are tasks: the numeric plugin's `scatter`, one point that walks the positions
//! in order (NumPy's order: a repeated position keeps the last value, or adds every value in
//! turn), after element-wise tasks that turn index arrays into flat positions; nothing but
//! `bincount`'s largest position (its result's length) is read on the host. `histogram`
//! reads its values and weights and bins them on the host, in NumPy's blocks of 65,536
//! elements, whose order of sums gives NumPy's bits.

use weft_ir::DType;

use super::{Array, Operand};
use crate::{Error, Result};

/// The bins of `histogram` that NumPy computes for equal widths: the bin of `x` from its
/// offset, corrected by one where rounding put it past an edge (`edges` of `n + 1`).
fn bin_of(x: f64, first: f64, denom: f64, edges: &[f64]) -> usize {
    let n = edges.len() - 1;
    let f = ((x - first) / denom) * n as f64;
    let mut i = f as i64;
    if i == n as i64 {
        i -= 1;
    }
    let mut i = i.clamp(0, n as i64 - 1) as usize;
    if x < edges[i] {
        i = i.saturating_sub(1);
    }
    if x >= edges[i + 1] && i != n - 1 {
        i += 1;
    }
    i
}

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

/// The elements of `a`, flattened, as `f64` (converted on the back end if they are not).
fn as_f64s(a: &Array) -> Result<Vec<f64>> {
    match a.dtype()? {
        DType::F64 => a.to_vec_of::<f64>(),
        _ => a.astype(DType::F64).to_vec_of::<f64>(),
    }
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
        if !matches!(self.dtype()?, DType::I64 | DType::I32 | DType::Bool) {
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
        let values = as_f64s(self)?;
        let (mut first, mut last) = match range {
            Some((lo, hi)) if lo > hi => {
                return Err(Error::Usage(
                    "numeric.histogram: max must be larger than min in range parameter.".into(),
                ));
            }
            Some(r) => r,
            None if values.is_empty() => (0.0, 1.0),
            None => values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    if x.is_nan() || lo.is_nan() {
                        (f64::NAN, f64::NAN)
                    } else {
                        (lo.min(x), hi.max(x))
                    }
                }),
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
        if bins > 1 << 31 {
            return Err(Error::Usage(format!(
                "numeric.histogram: {bins} bins is more than this histogram on the host takes \
                 (2^31)"
            )));
        }
        if first == last {
            first -= 0.5;
            last += 0.5;
        }
        let edges = self.np.linspace(first, last, bins + 1, DType::F64);
        let edge_values = edges.to_vec_of::<f64>()?;
        let weights = match weights {
            None => None,
            Some(w) => {
                let w = as_f64s(w)?;
                if w.len() != values.len() {
                    return Err(Error::Usage(
                        "numeric.histogram: weights should have the same shape as a.".into(),
                    ));
                }
                Some(w)
            }
        };
        let denom = last - first;
        let n = bins as usize;
        let (mut counts, mut sums) = (vec![0i64; n], vec![0.0f64; n]);
        let mut block = vec![0.0f64; n];
        for (start, chunk) in values.chunks(HISTOGRAM_BLOCK).enumerate() {
            block.iter_mut().for_each(|b| *b = 0.0);
            for (k, &x) in chunk.iter().enumerate() {
                if !(x >= first && x <= last) {
                    continue;
                }
                let i = bin_of(x, first, denom, &edge_values);
                match &weights {
                    None => counts[i] += 1,
                    Some(w) => block[i] += w[start * HISTOGRAM_BLOCK + k],
                }
            }
            if weights.is_some() {
                for (s, b) in sums.iter_mut().zip(&block) {
                    *s += b;
                }
            }
        }
        let hist = match weights {
            None => self.np.from_slice(&[bins], &counts),
            Some(_) => self.np.from_slice(&[bins], &sums),
        };
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
