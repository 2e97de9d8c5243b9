//! Krylov solvers written the natural way, as the NumPy/SciPy programs of the Diffuse paper:
//! one library call per vector operation, no hand fusion. Weft fuses them.
//!
//! ```python
//! # cg
//! r = b - A @ x; p = r; rr = r @ r
//! while sqrt(rr) > tol * norm(b):
//!     q = A @ p
//!     alpha = rr / (p @ q)
//!     x = x + alpha * p
//!     r = r - alpha * q
//!     rr, rr_old = r @ r, rr
//!     p = r + (rr / rr_old) * p
//! ```
//!
//! [`bicgstab`] is van der Vorst's BiCGSTAB; [`gmg`] is CG preconditioned by a geometric
//! multigrid V-cycle (see [`Multigrid`]). Every solver starts from `x = 0`, reads the residual
//! norm once per iteration (which runs the tasks it needs, as NumPy's `float(...)` would), and
//! stops when it is at most `tol * |b|` or after `max_iter` iterations.

use std::time::Instant;

use weft::{Array, CsrMatrix, Result, Sparse};
use weft_ir::DType;

/// What a solve returns.
#[derive(Clone, Debug)]
pub struct Solve {
    /// The solution.
    pub x: Array,
    /// `|r|` before the first iteration (that is, `|b|`) and after each iteration.
    pub residuals: Vec<f64>,
    /// Seconds each iteration took (the residual read included).
    pub seconds: Vec<f64>,
    /// Whether `|r| <= tol * |b|` was reached.
    pub converged: bool,
}

impl Solve {
    /// The result of a solve that ended with `x` (checked for errors), its residual norms and
    /// iteration times, converged if the last residual is within `tol` of the first.
    fn finish(x: Array, residuals: Vec<f64>, seconds: Vec<f64>, tol: f64) -> Result<Solve> {
        x.check()?;
        Ok(Solve {
            x,
            converged: done(&residuals, tol),
            residuals,
            seconds,
        })
    }

    /// Iterations run.
    pub fn iterations(&self) -> usize {
        self.seconds.len()
    }
}

/// Stops when the last residual is small enough.
fn done(residuals: &[f64], tol: f64) -> bool {
    match (residuals.first(), residuals.last()) {
        (Some(&b), Some(&r)) => r <= tol * b,
        _ => true,
    }
}

/// Conjugate gradients for a symmetric positive definite `a`.
pub fn cg(a: &CsrMatrix, b: &Array, tol: f64, max_iter: usize) -> Result<Solve> {
    let np = b.numeric();
    let n = b.shape()?;
    let mut x = np.zeros(&n, DType::F64);
    let mut r = b.copy();
    let mut p = r.copy();
    let mut rr = r.dot(&r);
    let mut residuals = vec![rr.item()?.sqrt()];
    let mut seconds = Vec::new();
    while !done(&residuals, tol) && seconds.len() < max_iter {
        let start = Instant::now();
        let q = a.matvec(&p);
        let alpha = &rr / p.dot(&q);
        x = &x + &alpha * &p;
        r = &r - &alpha * &q;
        let rr_new = r.dot(&r);
        residuals.push(rr_new.item()?.sqrt());
        let beta = &rr_new / &rr;
        p = &r + &beta * &p;
        rr = rr_new;
        seconds.push(start.elapsed().as_secs_f64());
    }
    Solve::finish(x, residuals, seconds, tol)
}

/// BiCGSTAB (van der Vorst, 1992) for a general nonsingular `a`.
pub fn bicgstab(a: &CsrMatrix, b: &Array, tol: f64, max_iter: usize) -> Result<Solve> {
    let np = b.numeric();
    let n = b.shape()?;
    let mut x = np.zeros(&n, DType::F64);
    let mut r = b.copy();
    let r_hat = r.copy();
    let mut p = np.zeros(&n, DType::F64);
    let mut v = np.zeros(&n, DType::F64);
    let (mut rho, mut alpha, mut omega) = (
        np.ones(&[], DType::F64),
        np.ones(&[], DType::F64),
        np.ones(&[], DType::F64),
    );
    // Each iteration's `rho` is the dot product of `r_hat` with the `r` of the one before,
    // taken before that iteration reads its residual norm: so it runs in the pass that
    // updates `r` (a read runs the pending tasks it needs; a dot taken after it would be a
    // pass of its own).
    let mut rho_new = r_hat.dot(&r);
    let mut residuals = vec![r.norm().item()?];
    let mut seconds = Vec::new();
    while !done(&residuals, tol) && seconds.len() < max_iter {
        let start = Instant::now();
        let beta = (&rho_new / &rho) * (&alpha / &omega);
        p = &r + &beta * (&p - &omega * &v);
        v = a.matvec(&p);
        alpha = &rho_new / r_hat.dot(&v);
        let s = &r - &alpha * &v;
        let t = a.matvec(&s);
        omega = t.dot(&s) / t.dot(&t);
        x = &x + &alpha * &p + &omega * &s;
        r = &s - &omega * &t;
        rho = rho_new;
        rho_new = r_hat.dot(&r);
        residuals.push(r.norm().item()?);
        seconds.push(start.elapsed().as_secs_f64());
    }
    Solve::finish(x, residuals, seconds, tol)
}

/// One level of the multigrid hierarchy.
#[derive(Clone, Debug)]
pub struct Level {
    /// Grid points per side.
    pub g: u64,
    /// The operator.
    pub a: CsrMatrix,
    /// Its diagonal's reciprocal times the Jacobi weight.
    pub weighted_inv_diag: Array,
    /// Injection to the next coarser level (none on the coarsest).
    pub restrict: Option<CsrMatrix>,
    /// Bilinear interpolation from the next coarser level.
    pub prolong: Option<CsrMatrix>,
}

/// A geometric multigrid V-cycle for the 5-point Poisson problem on a `g` x `g` grid:
/// - levels `g, (g - 1) / 2, ...` down to at least 3 points per side; coarse point `(i, j)`
///   is fine point `(2i + 1, 2j + 1)`;
/// - restriction by injection (scaled by 4, the ratio of the grid spacings squared, since the
///   operators are the unscaled stencil), prolongation by bilinear interpolation;
/// - coarse operators rediscretized (the 5-point stencil on the coarse grid);
/// - a weighted Jacobi smoother (weight 2/3), `nu` = 4 sweeps before and after the coarse
///   correction (with injection, fewer sweeps leave the injected residual too rough: with 2,
///   CG on the 127 x 127 problem did not converge in 10000 iterations; with 4 it takes 6), and
///   `coarse_sweeps` sweeps on the coarsest level.
#[derive(Clone, Debug)]
pub struct Multigrid {
    /// Finest first.
    pub levels: Vec<Level>,
    /// Smoothing sweeps before and after the coarse correction.
    pub nu: usize,
    /// Sweeps on the coarsest level.
    pub coarse_sweeps: usize,
}

/// The weighted Jacobi weight.
const OMEGA: f64 = 2.0 / 3.0;

/// Injection from a `g` x `g` grid to its `(g - 1) / 2` coarse grid, as triplets.
fn injection(g: u64) -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let gc = (g - 1) / 2;
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..gc {
        for j in 0..gc {
            r.push(i * gc + j);
            c.push((2 * i + 1) * g + (2 * j + 1));
            v.push(4.0);
        }
    }
    (r, c, v)
}

/// The coarse points next to fine coordinate `a` along one axis, with weights: coarse `i` sits
/// at fine `2i + 1`; coarse points outside `0..gc` are the zero boundary.
fn weights_1d(a: u64, gc: u64) -> Vec<(u64, f64)> {
    if a % 2 == 1 {
        // On an even grid the last odd coordinate lies past the last coarse point.
        let i = (a - 1) / 2;
        return if i < gc { vec![(i, 1.0)] } else { Vec::new() };
    }
    let mut out = Vec::new();
    if a >= 2 {
        out.push((a / 2 - 1, 0.5));
    }
    if a / 2 < gc {
        out.push((a / 2, 0.5));
    }
    out
}

/// Bilinear interpolation from the coarse grid of `g` to `g`, as triplets.
fn interpolation(g: u64) -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let gc = (g - 1) / 2;
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for a in 0..g {
        for b in 0..g {
            for &(i, wi) in &weights_1d(a, gc) {
                for &(j, wj) in &weights_1d(b, gc) {
                    r.push(a * g + b);
                    c.push(i * gc + j);
                    v.push(wi * wj);
                }
            }
        }
    }
    (r, c, v)
}

impl Multigrid {
    /// The hierarchy for `a`, the operator on a `g` x `g` grid (the 5-point Laplacian, or a
    /// matrix close to it); coarse levels use the 5-point Laplacian.
    pub fn new(sp: &Sparse, a: &CsrMatrix, g: u64) -> Result<Multigrid> {
        let mut levels = Vec::new();
        let mut gl = g;
        let mut al = a.clone();
        loop {
            let coarse = (gl - 1) / 2;
            let weighted_inv_diag = OMEGA / al.diagonal();
            weighted_inv_diag.check()?;
            if coarse < 3 {
                levels.push(Level {
                    g: gl,
                    a: al,
                    weighted_inv_diag,
                    restrict: None,
                    prolong: None,
                });
                break;
            }
            let (r, c, v) = injection(gl);
            let restrict = sp.from_triplets(
                (coarse * coarse, gl * gl),
                (&r, &c, &v),
                DType::F64,
                DType::I32,
            )?;
            let (r, c, v) = interpolation(gl);
            let prolong = sp.from_triplets(
                (gl * gl, coarse * coarse),
                (&r, &c, &v),
                DType::F64,
                DType::I32,
            )?;
            levels.push(Level {
                g: gl,
                a: al,
                weighted_inv_diag,
                restrict: Some(restrict),
                prolong: Some(prolong),
            });
            gl = coarse;
            al = sp.poisson2d(gl, DType::F64, DType::I32)?;
        }
        Ok(Multigrid {
            levels,
            nu: 4,
            coarse_sweeps: 30,
        })
    }

    /// `sweeps` weighted Jacobi sweeps on `a x = b` from `x`.
    fn smooth(level: &Level, x: Array, b: &Array, sweeps: usize) -> Array {
        let mut x = x;
        for _ in 0..sweeps {
            x = &x + &level.weighted_inv_diag * (b - level.a.matvec(&x));
        }
        x
    }

    /// One V-cycle from level `l` for the right-hand side `b`, from a zero guess.
    fn cycle(&self, l: usize, b: &Array) -> Array {
        let Some(level) = self.levels.get(l) else {
            return b.copy();
        };
        let np = b.numeric();
        let zero = np.zeros(&[level.g * level.g], DType::F64);
        let (Some(restrict), Some(prolong)) = (&level.restrict, &level.prolong) else {
            return Self::smooth(level, zero, b, self.coarse_sweeps);
        };
        let x = Self::smooth(level, zero, b, self.nu);
        let residual = b - level.a.matvec(&x);
        let coarse = self.cycle(l + 1, &restrict.matvec(&residual));
        let x = &x + prolong.matvec(&coarse);
        Self::smooth(level, x, b, self.nu)
    }

    /// The preconditioner: one V-cycle for `r`.
    pub fn apply(&self, r: &Array) -> Array {
        self.cycle(0, r)
    }
}

/// CG preconditioned by a multigrid V-cycle. The V-cycle (injection against interpolation) is
/// not exactly symmetric, so `beta` is the flexible (Polak-Ribiere) one,
/// `r_new . (z_new - z) / (r . z)`, which equals the usual one for a symmetric preconditioner.
pub fn gmg(a: &CsrMatrix, mg: &Multigrid, b: &Array, tol: f64, max_iter: usize) -> Result<Solve> {
    let np = b.numeric();
    let n = b.shape()?;
    let mut x = np.zeros(&n, DType::F64);
    let mut r = b.copy();
    let mut z = mg.apply(&r);
    let mut p = z.copy();
    let mut rz = r.dot(&z);
    let mut residuals = vec![r.norm().item()?];
    let mut seconds = Vec::new();
    while !done(&residuals, tol) && seconds.len() < max_iter {
        let start = Instant::now();
        let q = a.matvec(&p);
        let alpha = &rz / p.dot(&q);
        x = &x + &alpha * &p;
        r = &r - &alpha * &q;
        residuals.push(r.norm().item()?);
        if done(&residuals, tol) {
            seconds.push(start.elapsed().as_secs_f64());
            break;
        }
        let z_new = mg.apply(&r);
        let rz_new = r.dot(&z_new);
        let beta = (&rz_new - r.dot(&z)) / &rz;
        p = &z_new + &beta * &p;
        z = z_new;
        rz = rz_new;
        seconds.push(start.elapsed().as_secs_f64());
    }
    Solve::finish(x, residuals, seconds, tol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_rows_sum_to_one_inside() {
        let g = 7;
        let (r, _, v) = interpolation(g);
        let mut sums = vec![0.0; (g * g) as usize];
        for (&row, &w) in r.iter().zip(&v) {
            sums[row as usize] += w;
        }
        // A fine point at odd coordinates is a coarse point; interior even ones average 2 or 4.
        assert_eq!(sums[(g + 1) as usize], 1.0);
        assert_eq!(sums[(2 * g + 2) as usize], 1.0);
        // Next to the boundary, missing neighbours are the zero boundary.
        assert_eq!(sums[0], 0.25);
        let (r, c, _) = injection(g);
        assert_eq!(r.len(), 9);
        assert_eq!(c[4], 3 * g + 3, "the center maps to the center");
    }
}
