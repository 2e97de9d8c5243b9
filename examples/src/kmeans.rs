//! k-means (Lloyd's algorithm) on points in the unit cube, as a NumPy user writes a step:
//!
//! ```python
//! xx = (x * x).sum(axis=1)
//! cc = (c * c).sum(axis=1)
//! dist = xx[:, None] - 2.0 * (x @ c.T) + cc[None, :]      # squared distances, (n, k)
//! labels = dist.argmin(axis=1)
//! onehot = (labels[:, None] == np.arange(k)[None, :]).astype(x.dtype)
//! counts = onehot.sum(axis=0)
//! sums = onehot.T @ x
//! c = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1.0)[:, None], c)
//! inertia = dist.min(axis=1).sum()
//! ```
//!
//! The points are drawn by SplitMix64 from the seed ([`points`]); the first `k` points are
//! the starting centroids. `examples/numpy/kmeans.py` is the same program on the same points.

use weft::{Array, Numeric};
use weft_ir::DType;

use crate::sub_seed;

/// `n` points of `d` coordinates each, row-major, uniform in `[0, 1)` (SplitMix64 streams of
/// `seed`, 53 bits each).
pub fn points(n: u64, d: u64, seed: u64) -> Vec<f64> {
    (0..n * d)
        .map(|i| (sub_seed(seed, i) >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// The first `k` rows of the `(n, d)` points: the starting centroids.
pub fn start(points: &[f64], d: u64, k: u64) -> Vec<f64> {
    points[..(k * d) as usize].to_vec()
}

/// One Lloyd step from centroids `c` (`(k, d)`) over points `x` (`(n, d)`): the new centroids
/// (an empty cluster keeps its centroid) and the inertia of the assignment (a 0-d array: the
/// sum of each point's squared distance to its nearest centroid, by the expanded formula).
pub fn step(np: &Numeric, x: &Array, c: &Array, k: u64) -> (Array, Array) {
    let k = k as i64;
    let xx = (x * x).sum_axis(1).reshape(&[-1, 1]);
    let cc = (c * c).sum_axis(1).reshape(&[1, -1]);
    let dist = &(&xx - &(x.matmul(&c.t()) * 2.0)) + &cc;
    let labels = dist.argmin(Some(1)).reshape(&[-1, 1]);
    let clusters = np.arange(0.0, k as f64, 1.0, DType::I64).reshape(&[1, -1]);
    let onehot = labels.eq(&clusters).astype(DType::F64);
    let counts = onehot.sum_axis(0).reshape(&[-1, 1]);
    let sums = onehot.t().matmul(x);
    let mean = &sums / &counts.maximum(1.0);
    let c_new = counts.gt(0.0).select(&mean, c);
    let inertia = dist.min_axis(1).sum();
    (c_new, inertia)
}

/// `steps` Lloyd steps in plain Rust, one point at a time, by the same expanded formula: the
/// centroids, the last step's labels and its inertia. Ties go to the lower cluster, as
/// `argmin` gives them.
pub fn reference(
    x: &[f64],
    c: &[f64],
    d: usize,
    k: usize,
    steps: usize,
) -> (Vec<f64>, Vec<usize>, f64) {
    let n = x.len() / d;
    let mut c = c.to_vec();
    let (mut labels, mut inertia) = (vec![0; n], 0.0);
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>();
    for _ in 0..steps {
        let cc: Vec<f64> = c.chunks_exact(d).map(norm).collect();
        let (mut sums, mut counts) = (vec![0.0; k * d], vec![0.0; k]);
        inertia = 0.0;
        for (p, row) in x.chunks_exact(d).enumerate() {
            let xx = norm(row);
            let (mut best, mut at) = (f64::INFINITY, 0);
            for (j, centroid) in c.chunks_exact(d).enumerate() {
                let dot: f64 = row.iter().zip(centroid).map(|(a, b)| a * b).sum();
                let dist = xx - 2.0 * dot + cc[j];
                if dist < best {
                    (best, at) = (dist, j);
                }
            }
            labels[p] = at;
            inertia += best;
            counts[at] += 1.0;
            for (s, v) in sums[at * d..(at + 1) * d].iter_mut().zip(row) {
                *s += v;
            }
        }
        for j in 0..k {
            if counts[j] > 0.0 {
                for i in 0..d {
                    c[j * d + i] = sums[j * d + i] / counts[j];
                }
            }
        }
    }
    (c, labels, inertia)
}
