//! Products beyond the plugin's 1-d/2-d `matmul`: stacked `matmul` (NumPy's rules for
//! operands of more than two dimensions, batch dimensions broadcast) and `tensordot` over one
//! pair of axes, both composed from 2-d products on views.

use super::search::normalize_axis;
use super::{Array, Ix, Range, shape_text};
use crate::{Error, Result};

/// NumPy's broadcast of two shapes (batch shapes here; complex parts and index arrays
/// too), or `None` where they do not broadcast.
pub(super) fn broadcast_batch(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let rank = a.len().max(b.len());
    let at = |s: &[u64], d: usize| {
        let off = rank - s.len();
        if d < off { 1 } else { s[d - off] }
    };
    (0..rank)
        .map(|d| match (at(a, d), at(b, d)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl Array {
    /// `self @ b` where an operand has more than two dimensions: the last two are matrices
    /// and the others a stack of them, broadcast against each other; a 1-d operand is a row
    /// on the left or a column on the right, and that dimension is dropped. One 2-d product
    /// per matrix of the result.
    #[track_caller]
    pub(crate) fn stacked_matmul(&self, b: &Array) -> Result<Array> {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let (sa, sb) = (self.shape()?, b.shape()?);
        let (a, a_vec) = if sa.len() == 1 {
            (self.index(&[Ix::NewAxis]), true)
        } else {
            (self.clone(), false)
        };
        let (b, b_vec) = if sb.len() == 1 {
            (b.index(&[Ix::Slice(Range::all()), Ix::NewAxis]), true)
        } else {
            (b.clone(), false)
        };
        let (sa, sb) = (a.shape()?, b.shape()?);
        let (ra, rb) = (sa.len(), sb.len());
        let (n, k, k2, m) = (sa[ra - 2], sa[ra - 1], sb[rb - 2], sb[rb - 1]);
        let mismatch = || {
            Error::Usage(format!(
                "numeric.matmul: Input operand 1 has a mismatch in its core dimension 0, with \
                 gufunc signature (n?,k),(k,m?)->(n?,m?) (size {k2} is different from {k}); \
                 shapes {} and {}",
                shape_text(&self.shape().unwrap_or_default()),
                shape_text(&sb)
            ))
        };
        if k != k2 {
            return Err(mismatch());
        }
        if rb == 2 {
            // `b` is one matrix: the stack of `a`'s matrices is one tall matrix, and one
            // product gives every row of the result (the same row products, so the same
            // bits) instead of one product per matrix of the stack (NPBench's doitgen:
            // 13,750 of them).
            let flat = a.reshape(&[-1, k as i64]).matmul(&b);
            let mut shape: Vec<i64> = sa[..ra - 2].iter().map(|&e| e as i64).collect();
            shape.push(n as i64);
            if !b_vec {
                shape.push(m as i64);
            }
            return Ok(flat.reshape(&shape));
        }
        let batch = broadcast_batch(&sa[..ra - 2], &sb[..rb - 2]).ok_or_else(|| {
            Error::Usage(format!(
                "numeric.matmul: operands could not be broadcast together with batch shapes {} \
                 and {}",
                shape_text(&sa[..ra - 2]),
                shape_text(&sb[..rb - 2])
            ))
        })?;
        let full = |mut s: Vec<u64>, x: u64, y: u64| {
            s.extend([x, y]);
            s
        };
        let a = a.broadcast_to(&full(batch.clone(), n, k));
        let b = b.broadcast_to(&full(batch.clone(), k, m));
        let dtype = super::joining::result_type(a.dtype()?, b.dtype()?);
        let out = self.np.zeros(&full(batch.clone(), n, m), dtype);
        let count: u64 = batch.iter().product();
        for flat in 0..count {
            let mut rest = flat;
            let mut at = vec![Ix::At(0); batch.len()];
            for d in (0..batch.len()).rev() {
                at[d] = Ix::At((rest % batch[d]) as i64);
                rest /= batch[d];
            }
            out.index(&at).assign(&a.index(&at).matmul(&b.index(&at)))?;
        }
        let mut shape: Vec<i64> = batch.iter().map(|&e| e as i64).collect();
        if !a_vec {
            shape.push(n as i64);
        }
        if !b_vec {
            shape.push(m as i64);
        }
        Ok(out.reshape(&shape))
    }

    /// The sum over `self`'s axis `axes.0` and `b`'s axis `axes.1` of their products (NumPy's
    /// `tensordot(a, b, axes=([i], [j]))`): the result's dimensions are `self`'s others, then
    /// `b`'s others. Computed as one 2-d product of `self` with that axis moved last and `b`
    /// with it moved first (each a view, reshaped as NumPy reshapes: a copy where the layout
    /// needs one).
    #[track_caller]
    pub fn tensordot(&self, b: &Array, axes: (i64, i64)) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        let result = (|| -> Result<Array> {
            let (sa, sb) = (self.shape()?, b.shape()?);
            let i = normalize_axis(axes.0, sa.len())?;
            let j = normalize_axis(axes.1, sb.len())?;
            if sa[i] != sb[j] {
                return Err(Error::Usage(format!(
                    "numeric.tensordot: shape-mismatch for sum: axis {i} of {} has {} \
                     elements and axis {j} of {} has {}",
                    shape_text(&sa),
                    sa[i],
                    shape_text(&sb),
                    sb[j]
                )));
            }
            let k = sa[i] as i64;
            let a_rest: Vec<usize> = (0..sa.len()).filter(|&d| d != i).collect();
            let b_rest: Vec<usize> = (0..sb.len()).filter(|&d| d != j).collect();
            let a_order: Vec<u32> = a_rest.iter().chain([&i]).map(|&d| d as u32).collect();
            let b_order: Vec<u32> = [&j].into_iter().chain(&b_rest).map(|&d| d as u32).collect();
            let rows: u64 = a_rest.iter().map(|&d| sa[d]).product();
            let cols: u64 = b_rest.iter().map(|&d| sb[d]).product();
            let a2 = self.permute(&a_order).reshape(&[rows as i64, k]);
            let b2 = b.permute(&b_order).reshape(&[k, cols as i64]);
            let shape: Vec<i64> = a_rest
                .iter()
                .map(|&d| sa[d] as i64)
                .chain(b_rest.iter().map(|&d| sb[d] as i64))
                .collect();
            Ok(a2.matmul(&b2).reshape(&shape))
        })();
        result.unwrap_or_else(|e| self.np.wrap(Err(e)))
    }
}
