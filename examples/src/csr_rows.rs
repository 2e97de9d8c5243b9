//! Plain-Rust CSR products with `i32` indices, the baselines of the sparse benchmarks
//! (`bench_spmv`, `bench_gather`): each row summed in one chain, or in the lane order of
//! `weft_ir::builder::BodyBuilder::fold_lanes`; and the random matrices of long rows both
//! benchmarks run. Nothing here uses Weft.

use rayon::prelude::*;
use weft_ir::builder::FOLD_LANES;

/// A CSR matrix with `i32` row starts and columns, `f64` values.
pub struct Csr32 {
    /// Row `i`'s entries are `ptr[i]..ptr[i + 1]`.
    pub ptr: Vec<i32>,
    /// Each entry's column.
    pub col: Vec<i32>,
    /// Each entry's value.
    pub val: Vec<f64>,
}

impl Csr32 {
    /// `rows` rows of `len` entries at columns drawn from `0..cols` (xorshift from `seed`),
    /// values in `[-1, 1)`.
    ///
    /// # Errors
    ///
    /// If the matrix needs indices wider than `i32`.
    pub fn random(rows: usize, len: usize, cols: usize, seed: u64) -> Result<Csr32, String> {
        let nnz = rows.checked_mul(len).ok_or("too many entries")?;
        if i32::try_from(nnz).is_err() || i32::try_from(cols).is_err() {
            return Err("the matrix needs indices wider than i32".into());
        }
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut col, mut val) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        for _ in 0..nnz {
            let s = next();
            col.push((s % cols.max(1) as u64) as i32);
            val.push((s >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
        }
        let ptr = (0..=rows).map(|i| (i * len) as i32).collect();
        Ok(Csr32 { ptr, col, val })
    }
}

/// The signature of a row of `A x`.
pub type Row = fn(&Csr32, &[f64], usize) -> f64;

/// Row `i` of `A x` in one chain, in order (as SciPy's loop and Weft's `sparse` plugin sum
/// it).
pub fn row_sequential(a: &Csr32, x: &[f64], i: usize) -> f64 {
    let (lo, hi) = (a.ptr[i] as usize, a.ptr[i + 1] as usize);
    let mut s = 0.0;
    for j in lo..hi {
        s += a.val[j] * x[a.col[j] as usize];
    }
    s
}

/// Row `i` of `A x` in the lane order: partial `k` sums entry `k` of each whole block of
/// [`FOLD_LANES`], in order; the partials meet in the tree
/// `((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))`; the tail, summed in order on its own,
/// is added last.
pub fn row_lanes(a: &Csr32, x: &[f64], i: usize) -> f64 {
    let (lo, hi) = (a.ptr[i] as usize, a.ptr[i + 1] as usize);
    let blocks = (hi - lo) / FOLD_LANES;
    let mut p = [0.0f64; FOLD_LANES];
    for q in 0..blocks {
        let base = lo + q * FOLD_LANES;
        for (k, acc) in p.iter_mut().enumerate() {
            *acc += a.val[base + k] * x[a.col[base + k] as usize];
        }
    }
    let mut tail = 0.0;
    for j in lo + blocks * FOLD_LANES..hi {
        tail += a.val[j] * x[a.col[j] as usize];
    }
    (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) + tail
}

/// `y = A x` by `row`, `rows_per_task` rows per task of the current rayon pool.
pub fn product(a: &Csr32, x: &[f64], y: &mut [f64], row: Row, rows_per_task: usize) {
    let per = rows_per_task.max(1);
    y.par_chunks_mut(per).enumerate().for_each(|(c, ys)| {
        for (k, yi) in ys.iter_mut().enumerate() {
            *yi = row(a, x, c * per + k);
        }
    });
}
