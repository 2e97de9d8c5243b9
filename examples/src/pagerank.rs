//! PageRank by power iteration on a random graph, as a SciPy user writes it:
//!
//! ```python
//! M = sp.coo_matrix((val, (row, col)), shape=(n, n)).tocsr()   # M[dst, src] = 1 / degree
//! r = np.full(n, 1.0 / n)
//! for _ in range(steps):
//!     r_new = d * (M @ r) + (1.0 - d) / n
//!     change = np.abs(r_new - r).sum()
//!     r = r_new
//! ```
//!
//! The graph: `n` nodes, each with `degree` out-edges to nodes drawn by SplitMix64 from the
//! seed ([`graph`]), as COO triplets in edge order (a duplicate edge is summed). Every node
//! has out-edges, so no rank leaks. `examples/numpy/pagerank.py` is the same program on the
//! same triplets.

use weft::{Array, CsrMatrix, Numeric, Sparse};
use weft_ir::DType;

use crate::sub_seed;

/// The damping factor.
pub const DAMPING: f64 = 0.85;

/// The triplets `(dst, src, 1 / degree)` of every node's `degree` out-edges, in edge order:
/// PageRank's transition matrix `M[dst, src]`.
pub fn graph(n: u64, degree: u64, seed: u64) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
    let edges = (n * degree) as usize;
    let (mut r, mut c, mut v) = (
        Vec::with_capacity(edges),
        Vec::with_capacity(edges),
        Vec::with_capacity(edges),
    );
    let weight = 1.0 / degree as f64;
    for src in 0..n {
        for k in 0..degree {
            let dst = sub_seed(seed, src * degree + k) % n;
            r.push(dst as i64);
            c.push(src as i64);
            v.push(weight);
        }
    }
    (r, c, v)
}

/// The transition matrix of `triplets` on `n` nodes, built by the sparse plugin from the
/// triplets in Weft's stores (32-bit indices).
pub fn matrix(
    np: &Numeric,
    sp: &Sparse,
    n: u64,
    triplets: &(Vec<i64>, Vec<i64>, Vec<f64>),
) -> weft::Result<CsrMatrix> {
    let nnz = triplets.0.len() as u64;
    let ints = |v: &[i64]| v.iter().map(|&i| i as f64).collect::<Vec<f64>>();
    let row = np.from_f64s(&[nnz], &ints(&triplets.0), DType::I64);
    let col = np.from_f64s(&[nnz], &ints(&triplets.1), DType::I64);
    let val = np.from_vec(&[nnz], &triplets.2);
    sp.from_coo((n, n), &row, &col, &val, DType::I32)
}

/// The starting ranks: `1 / n` each.
pub fn start(np: &Numeric, n: u64) -> Array {
    np.full(&[n], 1.0 / n as f64, DType::F64)
}

/// One power step: the new ranks and the L1 change from `r` (a 0-d array).
pub fn step(m: &CsrMatrix, r: &Array, n: u64) -> (Array, Array) {
    let r_new = m.matvec(r) * DAMPING + (1.0 - DAMPING) / n as f64;
    let change = (&r_new - r).abs().sum();
    (r_new, change)
}

/// The same steps in plain Rust over CSR arrays (`indptr`, `indices`, `data`), each row summed
/// in order: SciPy's loop, so the ranks have its bits. Returns the ranks after `steps` steps.
pub fn reference(indptr: &[usize], indices: &[usize], data: &[f64], steps: usize) -> Vec<f64> {
    let n = indptr.len().saturating_sub(1);
    let mut r = vec![1.0 / n as f64; n];
    for _ in 0..steps {
        let next: Vec<f64> = (0..n)
            .map(|i| {
                let mut sum = 0.0;
                for j in indptr[i]..indptr[i + 1] {
                    sum += data[j] * r[indices[j]];
                }
                sum * DAMPING + (1.0 - DAMPING) / n as f64
            })
            .collect();
        r = next;
    }
    r
}
