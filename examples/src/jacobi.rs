//! Dense Jacobi iteration for `A x = b`, as in the Legate task-fusion paper (section III-C)
//! and the Diffuse paper's micro-benchmarks:
//!
//! ```python
//! d = np.diag(A)
//! R = A - np.diag(d)
//! for i in range(iters):
//!     x = (b - np.dot(R, x)) / d
//! ```
//!
//! The system: `A` is `n x n` with entries uniform in [0, 1) from the seed plus `n` on the
//! diagonal, so it is strictly diagonally dominant (each row's off-diagonal sum is below
//! `n - 1`, its diagonal at least `n`) and the iteration converges, by a factor of about 1/2
//! per step; `b` is uniform in [0, 1) (n) and `x0` is zero.

use weft::{Array, Numeric};
use weft_ir::DType;

/// `A` (n x n, diagonally dominant) and `b` (n) from `seed`.
pub fn system(np: &Numeric, n: u64, seed: u64) -> (Array, Array) {
    let noise = np.random_uniform(&[n, n], 0.0, 1.0, crate::sub_seed(seed, 0), DType::F64);
    let a = noise + np.full(&[n], n as f64, DType::F64).diag();
    let b = np.random_uniform(&[n], 0.0, 1.0, crate::sub_seed(seed, 1), DType::F64);
    (a, b)
}

/// The parts of `A` the iteration uses, and `b`.
#[derive(Clone, Debug)]
pub struct Jacobi {
    /// The diagonal of `A` (n).
    pub d: Array,
    /// `A` without its diagonal (n x n).
    pub r: Array,
    /// The right-hand side (n).
    pub b: Array,
}

impl Jacobi {
    /// Splits `A` into its diagonal and the rest.
    pub fn new(a: &Array, b: &Array) -> Jacobi {
        let d = a.diag();
        let r = a - d.diag();
        Jacobi { d, r, b: b.clone() }
    }

    /// One step: `(b - R x) / d`.
    pub fn step(&self, x: &Array) -> Array {
        (&self.b - self.r.matvec(x)) / &self.d
    }
}

/// `iters` steps from `x0`.
pub fn solve(a: &Array, b: &Array, x0: &Array, iters: usize) -> Array {
    let jacobi = Jacobi::new(a, b);
    let mut x = x0.clone();
    for _ in 0..iters {
        x = jacobi.step(&x);
    }
    x
}

/// The relative residual `|A x - b| / |b|` (0-d).
pub fn relative_residual(a: &Array, b: &Array, x: &Array) -> Array {
    (a.matvec(x) - b).norm() / b.norm()
}
