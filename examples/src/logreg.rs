//! Logistic regression by gradient descent, written as a NumPy user writes it:
//!
//! ```python
//! for step in range(steps):
//!     p = 1.0 / (1.0 + np.exp(-(X @ w)))
//!     w = w - lr * (X.T @ (p - y)) / n
//! ```
//!
//! `X` is `(n, d)` with entries uniform in `[-1, 1)`, `y` is `1.0` where `X @ w_true > 0`
//! and `0.0` elsewhere, with `w_true[j] = (-1)^j * (j + 1) / d`, and `w` starts at zeros.
//! `X.T` is a view: it is read in place, never copied. On Weft the whole step (both
//! products, the sigmoid and the residual) fuses into one task over the rows of `X`, whose
//! gradient is reduced into the 8-element `g`; then the update of `w` runs.
//!
//! [`reference_steps`] is the same algorithm as a plain-Rust rayon loop over rows, for the
//! side-by-side timing and the comparison of results. `examples/numpy/logreg.py` is the
//! program in NumPy.

use rayon::prelude::*;
use weft::{Array, Numeric};
use weft_ir::DType;

/// The true weights the labels come from.
pub fn true_weights(d: u64) -> Vec<f64> {
    (0..d)
        .map(|j| {
            let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
            sign * (j + 1) as f64 / d as f64
        })
        .collect()
}

/// The problem: samples `x` (`(n, d)`) and labels `y` (`(n,)`).
pub struct Problem {
    /// The samples.
    pub x: Array,
    /// The labels, 0 or 1.
    pub y: Array,
}

/// Makes the problem from the numeric plugin's seeded uniform generator.
pub fn problem(np: &Numeric, n: u64, d: u64, seed: u64) -> Problem {
    let x = np.random_uniform(&[n, d], -1.0, 1.0, seed, DType::F64);
    let w_true = np.from_vec(&[d], &true_weights(d));
    let y = x.matmul(&w_true).gt(0.0).astype(DType::F64);
    Problem { x, y }
}

/// One gradient step: `w - lr * X.T @ (sigmoid(X @ w) - y) / n`.
pub fn step(p: &Problem, w: &Array, lr: f64, n: u64) -> Array {
    let z = p.x.matmul(w);
    let prob = 1.0 / (1.0 + (-z).exp());
    let g = p.x.t().matmul(&(prob - &p.y));
    w - g * (lr / n as f64)
}

/// `steps` gradient steps from `w` on the host, with `threads` rayon threads: each thread
/// sums the gradient of its rows, the partial gradients are added in order (the same bits
/// on every run), and `w` is updated.
pub fn reference_steps(
    x: &[f64],
    y: &[f64],
    d: usize,
    w: &mut [f64],
    lr: f64,
    steps: usize,
    pool: &rayon::ThreadPool,
) {
    let n = y.len();
    let chunk = n.div_ceil(pool.current_num_threads().max(1) * 4).max(1);
    for _ in 0..steps {
        let g = pool.install(|| {
            x.par_chunks(chunk * d)
                .zip(y.par_chunks(chunk))
                .map(|(rows, labels)| {
                    let mut g = vec![0.0; d];
                    for (row, &label) in rows.chunks_exact(d).zip(labels) {
                        let z: f64 = row.iter().zip(w.iter()).map(|(a, b)| a * b).sum();
                        let r = 1.0 / (1.0 + (-z).exp()) - label;
                        for (gj, &xj) in g.iter_mut().zip(row) {
                            *gj += xj * r;
                        }
                    }
                    g
                })
                // Collected, then added in chunk order: rayon's own `reduce` associates as
                // its splitting falls, so its bits would vary from run to run.
                .collect::<Vec<_>>()
        });
        let g = g.into_iter().fold(vec![0.0; d], |mut a, b| {
            a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
            a
        });
        for (wj, gj) in w.iter_mut().zip(&g) {
            *wj -= lr * gj / n as f64;
        }
    }
}
