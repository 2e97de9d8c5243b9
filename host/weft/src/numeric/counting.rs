//! Counting into bins, adding and assigning at positions (NumPy's `bincount`, `histogram`,
//! `np.add.at` and `a[i, j] = v` with integer index arrays), on the host: the positions (and
//! weights) are read once, summed or stored there in element order as NumPy does, and the
//! result is written back as a new array (or into the array, for `add_at` and
//! `assign_at`). *Chosen over* tasks for now: the kernel IR has no store at a
//! computed position (a scatter), which a sum into bins needs, and the host's pass runs at
//! memory speed on the CPU (a GPU pays a round trip).

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

/// `data` with each of `values` added at its position, in order.
fn added<T: Copy + std::ops::Add<Output = T>>(
    mut data: Vec<T>,
    at: &[usize],
    values: Vec<T>,
) -> Vec<T> {
    for (&p, x) in at.iter().zip(values) {
        data[p] = data[p] + x;
    }
    data
}

/// `data` with each of `values` added at its position, wrapping as NumPy's integers do.
fn wrapping<T: Copy + num_wrapping::Wrapping>(
    mut data: Vec<T>,
    at: &[usize],
    values: &[T],
) -> Vec<T> {
    for (&p, &x) in at.iter().zip(values) {
        data[p] = data[p].wrapping_add_(x);
    }
    data
}

/// Wrapping addition of the integer element types.
mod num_wrapping {
    /// `wrapping_add` of `i64` and `i32`.
    pub trait Wrapping {
        /// `self + other`, wrapping.
        fn wrapping_add_(self, other: Self) -> Self;
    }
    impl Wrapping for i64 {
        fn wrapping_add_(self, other: i64) -> i64 {
            self.wrapping_add(other)
        }
    }
    impl Wrapping for i32 {
        fn wrapping_add_(self, other: i32) -> i32 {
            self.wrapping_add(other)
        }
    }
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
        let positions = self.astype(DType::I64).to_vec_of::<i64>()?;
        if let Some(&bad) = positions.iter().find(|&&p| p < 0) {
            return Err(Error::Usage(format!(
                "numeric.bincount: 'list' argument must have no negative elements (found \
                 {bad})"
            )));
        }
        let bins = positions
            .iter()
            .map(|&p| p as u64 + 1)
            .max()
            .unwrap_or(0)
            .max(minlength) as usize;
        match weights {
            None => {
                let mut counts = vec![0i64; bins];
                for &p in &positions {
                    counts[p as usize] += 1;
                }
                Ok(self.np.from_slice(&[bins as u64], &counts))
            }
            Some(w) => {
                if w.shape()? != shape {
                    return Err(Error::Usage(
                        "numeric.bincount: The weights and list don't have the same length.".into(),
                    ));
                }
                let w = w.astype(DType::F64).to_vec_of::<f64>()?;
                let mut sums = vec![0.0f64; bins];
                for (&p, &x) in positions.iter().zip(&w) {
                    sums[p as usize] += x;
                }
                Ok(self.np.from_slice(&[bins as u64], &sums))
            }
        }
    }

    /// The histogram of the flattened array in `bins` bins of equal width over `range`
    /// (`None`: the smallest to the largest element), and the bins' `bins + 1` edges: NumPy's
    /// `histogram(a, bins, range, weights=weights)`. Counts are `int64`; with `weights`, the
    /// weights' sums (`float64`). NumPy's binning and its order of sums (blocks of 65,536
    /// elements), so the same bits.
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
                    (lo.min(x), hi.max(x))
                }),
        };
        if !first.is_finite() || !last.is_finite() {
            return Err(Error::Usage(format!(
                "numeric.histogram: autodetected range of [{first}, {last}] is not finite"
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
        let shape = self.shape()?;
        let len = shape.iter().product::<u64>() as i64;
        if !matches!(indices.dtype()?, DType::I64 | DType::I32) {
            return Err(Error::Usage(
                "numeric.add_at: arrays used as indices must be of integer type".into(),
            ));
        }
        let idx = indices
            .astype(DType::I64)
            .reshape(&[-1])
            .to_vec_of::<i64>()?;
        let mut positions = Vec::with_capacity(idx.len());
        for &i in &idx {
            let at = if i < 0 { i + len } else { i };
            if at < 0 || at >= len {
                return Err(Error::Usage(format!(
                    "numeric.add_at: index {i} is out of bounds for axis 0 with size {len}"
                )));
            }
            positions.push(at as usize);
        }
        let dtype = self.dtype()?;
        // The values in this array's dtype, one per index.
        let v = match values.into() {
            Operand::Array(a) => a.broadcast_to(&indices.shape()?).reshape(&[-1]),
            Operand::Scalar(x) => self.np.full(&[idx.len() as u64], x, dtype),
            Operand::Int(x) => self.np.full(&[idx.len() as u64], x as f64, dtype),
        }
        .astype(dtype);
        let flat = self.reshape(&[-1]);
        let np = &self.np;
        let n = [len as u64];
        let sum = match dtype {
            DType::F64 => {
                let sum = added(flat.to_vec_of::<f64>()?, &positions, v.to_vec_of()?);
                np.from_slice(&n, &sum)
            }
            DType::F32 => {
                let sum = added(flat.to_vec_of::<f32>()?, &positions, v.to_vec_of()?);
                np.from_slice(&n, &sum)
            }
            DType::I64 => {
                let w = wrapping(flat.to_vec_of::<i64>()?, &positions, &v.to_vec_of::<i64>()?);
                np.from_slice(&n, &w)
            }
            DType::I32 => {
                let w = wrapping(flat.to_vec_of::<i32>()?, &positions, &v.to_vec_of::<i32>()?);
                np.from_slice(&n, &w)
            }
            DType::Bool => {
                let mut data = flat.to_vec_of::<bool>()?;
                for (&p, x) in positions.iter().zip(v.to_vec_of::<bool>()?) {
                    data[p] |= x;
                }
                np.from_slice(&n, &data)
            }
        };
        let dims: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
        self.assign(&sum.reshape(&dims))
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
        let dtype = self.dtype()?;
        let count = positions.len() as u64;
        let v = match values.into() {
            Operand::Array(a) => a.broadcast_to(&shape).reshape(&[-1]),
            Operand::Scalar(x) => self.np.full(&[count], x, dtype),
            Operand::Int(x) => self.np.full(&[count], x as f64, dtype),
        }
        .astype(dtype);
        let flat = self.reshape(&[-1]);
        let n = [flat.shape()?.first().copied().unwrap_or(0)];
        let np = &self.np;
        let stored = match dtype {
            DType::F64 => np.from_slice(
                &n,
                &stored(flat.to_vec_of::<f64>()?, &positions, v.to_vec_of()?),
            ),
            DType::F32 => np.from_slice(
                &n,
                &stored(flat.to_vec_of::<f32>()?, &positions, v.to_vec_of()?),
            ),
            DType::I64 => np.from_slice(
                &n,
                &stored(flat.to_vec_of::<i64>()?, &positions, v.to_vec_of()?),
            ),
            DType::I32 => np.from_slice(
                &n,
                &stored(flat.to_vec_of::<i32>()?, &positions, v.to_vec_of()?),
            ),
            DType::Bool => np.from_slice(
                &n,
                &stored(flat.to_vec_of::<bool>()?, &positions, v.to_vec_of()?),
            ),
        };
        let dims: Vec<i64> = self.shape()?.iter().map(|&e| e as i64).collect();
        self.assign(&stored.reshape(&dims))
    }

    /// The flat positions that one integer index array per dimension names (broadcast
    /// together, negative ones from the end, each checked), and the indices' shape.
    fn flat_positions(&self, op: &str, indices: &[&Array]) -> Result<(Vec<usize>, Vec<u64>)> {
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
        let count = common.iter().product::<u64>() as usize;
        let mut positions = vec![0usize; count];
        let mut stride = 1usize;
        for (d, ix) in indices.iter().enumerate().rev() {
            let extent = shape[d] as i64;
            let values = ix
                .broadcast_to(&common)
                .astype(DType::I64)
                .reshape(&[-1])
                .to_vec_of::<i64>()?;
            for (p, &i) in positions.iter_mut().zip(&values) {
                let at = if i < 0 { i + extent } else { i };
                if at < 0 || at >= extent {
                    return Err(Error::Usage(format!(
                        "{op}: index {i} is out of bounds for axis {d} with size {extent}"
                    )));
                }
                *p += at as usize * stride;
            }
            stride *= shape[d] as usize;
        }
        Ok((positions, common))
    }
}

/// `data` with each of `values` stored at its position, in order (the last one stays).
fn stored<T: Copy>(mut data: Vec<T>, at: &[usize], values: Vec<T>) -> Vec<T> {
    for (&p, x) in at.iter().zip(values) {
        data[p] = x;
    }
    data
}
