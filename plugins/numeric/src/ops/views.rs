//! Views: `slice`, `index`, `permute`, `reshape` and `broadcast-to`.
//!
//! Every one is a view of the argument's storage (the host composes the affine maps), except
//! a `reshape` that the layout does not allow, which copies as NumPy does.

use weft_sdk::{Error, Store};

use super::elementwise::copy;
use super::{Array, fail, host_error};
use crate::shapes;

/// One entry of basic indexing, as the operations take it.
#[derive(Clone, Copy, Debug)]
pub enum Index {
    /// One position; the dimension goes away.
    At(i64),
    /// `start:stop:step`; the dimension stays.
    Range(Option<i64>, Option<i64>, Option<i64>),
    /// A new dimension of extent 1.
    NewAxis,
}

/// The view `a[r0, r1, ...]` of slices; dimensions without a range are taken whole.
pub fn slice(
    a: &Array<'_>,
    ranges: &[(Option<i64>, Option<i64>, Option<i64>)],
) -> Result<Store, Error> {
    let indices: Vec<Index> = ranges
        .iter()
        .map(|&(lo, hi, step)| Index::Range(lo, hi, step))
        .collect();
    index_as("slice", a, &indices)
}

/// The view `a[i0, i1, ...]` of NumPy's basic indexing.
pub fn index(a: &Array<'_>, indices: &[Index]) -> Result<Store, Error> {
    index_as("index", a, indices)
}

fn index_as(op: &str, a: &Array<'_>, indices: &[Index]) -> Result<Store, Error> {
    let consumed = indices
        .iter()
        .filter(|i| !matches!(i, Index::NewAxis))
        .count();
    if consumed > a.shape.len() {
        return Err(fail(
            op,
            format!(
                "too many indices for an array of shape {}: {consumed} given",
                shapes::show(&a.shape),
            ),
        ));
    }
    let rank = a.shape.len();
    let (mut start, mut step, mut extent) = (vec![0u64; rank], vec![1i64; rank], a.shape.clone());
    // The result's shape: kept dimensions and new axes, in order.
    let mut shape = Vec::new();
    let mut d = 0;
    for index in indices {
        match *index {
            Index::NewAxis => shape.push(1),
            Index::At(i) => {
                let n = a.shape[d];
                let at = if i < 0 {
                    i128::from(i) + i128::from(n)
                } else {
                    i128::from(i)
                };
                if at < 0 || at >= i128::from(n) {
                    return Err(fail(
                        op,
                        format!("index {i} is out of bounds for axis {d} with size {n}"),
                    ));
                }
                (start[d], extent[d]) = (at as u64, 1);
                d += 1;
            }
            Index::Range(lo, hi, s) => {
                let (first, s, len) =
                    shapes::slice_indices(lo, hi, s, a.shape[d]).map_err(|m| fail(op, m))?;
                (start[d], step[d], extent[d]) = (first, s, len);
                shape.push(len);
                d += 1;
            }
        }
    }
    shape.extend(&a.shape[d..]);
    let view = a
        .store
        .strided(&start, &step, &extent)
        .map_err(host_error(op))?;
    if shape == extent {
        return Ok(view);
    }
    // Dropping positions and adding new axes only removes and inserts extents of 1, which
    // every layout allows as a view.
    view.reshape(&shape)
        .map_err(host_error(op))?
        .ok_or_else(|| fail(op, "the host could not drop or add an axis of extent 1"))
}

/// The view of `a` with axes permuted (NumPy's `transpose(a, axes)`).
pub fn permute(a: &Array<'_>, axes: &[u32]) -> Result<Store, Error> {
    a.store.permute(axes).map_err(host_error("transpose"))
}

/// `a` with shape `shape` (one extent may be -1): a view where the layout allows, else a copy.
pub fn reshape(a: &Array<'_>, shape: &[i64]) -> Result<Store, Error> {
    let op = "reshape";
    let volume: u64 = a.shape.iter().product();
    let unknown: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] == -1).collect();
    if unknown.len() > 1 {
        return Err(fail(op, "can only specify one unknown dimension"));
    }
    if shape.iter().any(|&e| e < -1) {
        return Err(fail(op, "negative dimensions not allowed"));
    }
    let known: Option<u64> = shape
        .iter()
        .filter(|&&e| e != -1)
        .try_fold(1u64, |acc, &e| acc.checked_mul(e as u64));
    // NumPy's words, the unknown extent shown as `newaxis`: "cannot reshape array of size 12
    // into shape (5,newaxis)".
    let asked: Vec<String> = shape
        .iter()
        .map(|&e| {
            if e == -1 {
                "newaxis".to_string()
            } else {
                e.to_string()
            }
        })
        .collect();
    let asked = if asked.len() == 1 {
        format!("({},)", asked[0])
    } else {
        format!("({})", asked.join(","))
    };
    let bad = || {
        fail(
            op,
            format!("cannot reshape array of size {volume} into shape {asked}"),
        )
    };
    let known = known.ok_or_else(bad)?;
    let mut out: Vec<u64> = shape.iter().map(|&e| e.max(0) as u64).collect();
    if let Some(&u) = unknown.first() {
        if known == 0 || !volume.is_multiple_of(known) {
            return Err(bad());
        }
        out[u] = volume / known;
    } else if known != volume {
        return Err(bad());
    }
    if let Some(view) = a.store.reshape(&out).map_err(host_error(op))? {
        return Ok(view);
    }
    let dense = copy(a)?;
    dense
        .reshape(&out)
        .map_err(host_error(op))?
        .ok_or_else(|| fail(op, "the host could not reshape a dense copy"))
}

/// The read-only view of `a` broadcast to `shape`.
pub fn broadcast_to(a: &Array<'_>, shape: &[u64]) -> Result<Store, Error> {
    a.store
        .broadcast_to(shape)
        .map_err(host_error("broadcast_to"))
}
