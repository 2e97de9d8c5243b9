//! Singular values (NumPy's `linalg.svd`, `pinv`, `lstsq`, and the
//! matrix 2-norm and nuclear norm through [`Array::norm_ord`]), on the host: the matrix is
//! read once and factored by one-sided Jacobi rotations (Hestenes' method: pairs of columns
//! rotated until every pair is orthogonal to the working precision), which is accurate to
//! the last bits of the small singular values as well as the large. The factors are written
//! back as new arrays. *Chosen over* tasks for now: each rotation reads two columns and
//! decides on their inner product, a chain of small dependent steps (each sweep is about
//! `m n^2` multiply-adds, and a handful of sweeps converge; not measured against LAPACK).
//! LAPACK's `gesdd` (NumPy's) bidiagonalizes first, which costs fewer sweeps; its signs
//! of the singular vectors may differ from these (each pair `u`, `v` is determined up to a
//! common sign).

use weft_ir::DType;

use super::Array;
use crate::{Error, Result};

/// Sweeps over all pairs of columns before giving up on convergence (Jacobi converges
/// quadratically: a few sweeps suffice in practice).
const MAX_SWEEPS: usize = 60;

/// `a` (`m` x `n`, row-major, `m >= n`) as `U` (`m` x `n`, orthonormal columns), `s`
/// (descending) and `V` (`n` x `n`, orthogonal) with `a = U diag(s) V^T`.
pub(super) fn jacobi_svd(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    // Columns, each contiguous.
    let mut u: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..m).map(|i| a[i * n + j]).collect())
        .collect();
    let mut v: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..n).map(|i| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let alpha = dot(&u[p], &u[p]);
                let beta = dot(&u[q], &u[q]);
                let gamma = dot(&u[p], &u[q]);
                if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (2.0 * gamma);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for cols in [&mut u, &mut v] {
                    let (lo, hi) = cols.split_at_mut(q);
                    for (x, y) in lo[p].iter_mut().zip(hi[0].iter_mut()) {
                        let (xp, yq) = (*x, *y);
                        *x = c * xp - s * yq;
                        *y = s * xp + c * yq;
                    }
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let mut sigma: Vec<f64> = u.iter().map(|c| dot(c, c).sqrt()).collect();
    // Descending order of the singular values.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| sigma[j].total_cmp(&sigma[i]));
    let u: Vec<Vec<f64>> = order.iter().map(|&j| u[j].clone()).collect();
    let v: Vec<Vec<f64>> = order.iter().map(|&j| v[j].clone()).collect();
    sigma = order.iter().map(|&j| sigma[j]).collect();
    // Normalize the left vectors; a zero singular value gets an orthonormal completion.
    let mut left: Vec<Vec<f64>> = Vec::with_capacity(n);
    for (j, col) in u.into_iter().enumerate() {
        let norm = sigma[j];
        let mut c: Vec<f64> = if norm > 0.0 {
            col.iter().map(|x| x / norm).collect()
        } else {
            vec![0.0; m]
        };
        if norm == 0.0 || !norm.is_finite() {
            c = unit_completion(&left, m);
        }
        left.push(c);
    }
    let u_rows: Vec<f64> = (0..m)
        .flat_map(|i| left.iter().map(move |c| c[i]).collect::<Vec<_>>())
        .collect();
    let v_rows: Vec<f64> = (0..n)
        .flat_map(|i| v.iter().map(move |c| c[i]).collect::<Vec<_>>())
        .collect();
    (u_rows, sigma, v_rows)
}

/// A unit vector of `dim` elements orthogonal to every vector of `basis` (orthonormal,
/// fewer than `dim`): the first unit vector along an axis that Gram-Schmidt against the
/// basis leaves at least half its length.
fn unit_completion(basis: &[Vec<f64>], dim: usize) -> Vec<f64> {
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
    for e in 0..dim {
        let mut w = vec![0.0; dim];
        w[e] = 1.0;
        for prev in basis {
            let d = dot(&w, prev);
            w.iter_mut().zip(prev).for_each(|(x, p)| *x -= d * p);
        }
        let len = dot(&w, &w).sqrt();
        if len > 0.5 {
            return w.iter().map(|x| x / len).collect();
        }
    }
    vec![0.0; dim]
}

/// `rows` (`dim` x `k`, row-major, orthonormal columns) completed to an orthogonal `dim` x
/// `dim` matrix by [`unit_completion`]s.
fn completed(rows: &[f64], dim: usize, k: usize) -> Vec<f64> {
    let mut cols: Vec<Vec<f64>> = (0..k)
        .map(|j| (0..dim).map(|i| rows[i * k + j]).collect())
        .collect();
    while cols.len() < dim {
        let next = unit_completion(&cols, dim);
        cols.push(next);
    }
    (0..dim)
        .flat_map(|i| cols.iter().map(move |c| c[i]).collect::<Vec<_>>())
        .collect()
}

/// A matrix's factors on the host: `a = U diag(s) V^T`, `k = min(m, n)`.
struct Factors {
    /// `U`, `m` x `k`, row-major.
    u: Vec<f64>,
    /// The singular values, descending.
    s: Vec<f64>,
    /// `V`, `n` x `k`, row-major.
    v: Vec<f64>,
    /// Rows.
    m: usize,
    /// Columns.
    n: usize,
}

/// The matrix `a` read to the host as `f64`, row-major, with its rows and columns; NumPy's
/// errors for operation `what` where it is not a matrix or holds an infinity or a NaN.
fn read_matrix(a: &Array, what: &str) -> Result<(Vec<f64>, usize, usize)> {
    let shape = a.shape()?;
    let (m, n) = match shape[..] {
        [m, n] => (m as usize, n as usize),
        _ => {
            return Err(Error::Usage(format!(
                "linalg.{what}: {}-dimensional array given. Array must be two-dimensional",
                shape.len()
            )));
        }
    };
    let values = a.astype(DType::F64).to_vec_of::<f64>()?;
    if values.iter().any(|x| !x.is_finite()) {
        return Err(Error::Usage(format!(
            "linalg.{what}: SVD did not converge (the matrix holds an infinity or a NaN)"
        )));
    }
    Ok((values, m, n))
}

/// The singular value decomposition of a matrix read from `a` (operation `what`).
fn decompose(a: &Array, what: &str) -> Result<Factors> {
    let (values, m, n) = read_matrix(a, what)?;
    if m >= n {
        let (u, s, v) = jacobi_svd(&values, m, n);
        Ok(Factors { u, s, v, m, n })
    } else {
        // The transpose's factors, swapped.
        let t: Vec<f64> = (0..n)
            .flat_map(|j| (0..m).map(|i| values[i * n + j]).collect::<Vec<_>>())
            .collect();
        let (u, s, v) = jacobi_svd(&t, n, m);
        Ok(Factors {
            u: v,
            s,
            v: u,
            m,
            n,
        })
    }
}

impl Array {
    /// The singular value decomposition `(U, S, Vh)` with `self == U @ diag(S) @ Vh`, as
    /// NumPy's `linalg.svd(a, full_matrices)`: for an `m` x `n` matrix and `k = min(m, n)`,
    /// `S` holds the `k` singular values in descending order; `U` is `m` x `m` and `Vh`
    /// `n` x `n`, orthogonal, when `full_matrices` (NumPy's default), else `m` x `k` with
    /// orthonormal columns and `k` x `n` with orthonormal rows. `float64` (see the module's
    /// documentation: computed on the host, the singular vectors' signs, and the columns
    /// that complete a basis, may differ from LAPACK's).
    #[track_caller]
    pub fn svd(&self, full_matrices: bool) -> Result<(Array, Array, Array)> {
        let caller = std::panic::Location::caller();
        let Factors { u, s, v, m, n } = decompose(self, "svd").map_err(|e| super::at(caller, e))?;
        let k = m.min(n);
        let np = &self.np;
        let (u, v, ku, kv) = if full_matrices {
            (completed(&u, m, k), completed(&v, n, k), m, n)
        } else {
            (u, v, k, k)
        };
        let u = np.from_slice(&[m as u64, ku as u64], &u);
        let vh = np.from_slice(&[n as u64, kv as u64], &v).t().copy();
        Ok((u, np.from_slice(&[k as u64], &s), vh))
    }

    /// The singular values alone, descending (NumPy's `svd(a, compute_uv=False)`), by
    /// bidiagonalization as LAPACK finds them (see `bidiagonal.rs`: within a small multiple
    /// of `eps ||a||` of the exact values; [`Array::svd`]'s Jacobi rotations are more accurate
    /// in the smallest values of a graded matrix, and much slower).
    #[track_caller]
    pub fn singular_values(&self) -> Result<Array> {
        let caller = std::panic::Location::caller();
        let (values, m, n) = read_matrix(self, "svd").map_err(|e| super::at(caller, e))?;
        let s = super::bidiagonal::singular_values(&values, m, n).ok_or_else(|| {
            super::at(
                caller,
                Error::Usage("linalg.svd: SVD did not converge".into()),
            )
        })?;
        Ok(self.np.from_slice(&[s.len() as u64], &s))
    }

    /// The pseudo-inverse (NumPy's `linalg.pinv`): `V diag(1/s) U^T` over the singular
    /// values larger than `rcond` times the largest (`None`: NumPy's default,
    /// `max(m, n)` times the machine epsilon).
    #[track_caller]
    pub fn pinv(&self, rcond: Option<f64>) -> Result<Array> {
        let caller = std::panic::Location::caller();
        let Factors { u, s, v, m, n } =
            decompose(self, "pinv").map_err(|e| super::at(caller, e))?;
        let k = m.min(n);
        let cut =
            rcond.unwrap_or(m.max(n) as f64 * f64::EPSILON) * s.first().copied().unwrap_or(0.0);
        let mut out = vec![0.0; n * m];
        for (j, &sj) in s.iter().enumerate() {
            if sj <= cut {
                continue;
            }
            for r in 0..n {
                let vr = v[r * k + j] / sj;
                for c in 0..m {
                    out[r * m + c] += vr * u[c * k + j];
                }
            }
        }
        Ok(self.np.from_slice(&[n as u64, m as u64], &out))
    }

    /// The least-squares solution of `self @ x ~= b` (NumPy's `linalg.lstsq(a, b,
    /// rcond=None)`): `(x, residuals, rank, s)`, `x = pinv(a) @ b` over the singular values
    /// above `max(m, n)` epsilon times the largest, `residuals` the squared 2-norms of
    /// `b - a @ x`'s columns when the rank is `n` and `m > n` (empty otherwise, as NumPy's),
    /// `rank` the number of singular values kept, `s` all of them.
    #[track_caller]
    pub fn lstsq(&self, b: &Array) -> Result<(Array, Array, u64, Array)> {
        let caller = std::panic::Location::caller();
        let shape = self.shape().map_err(|e| super::at(caller, e))?;
        let (m, n) = match shape[..] {
            [m, n] => (m, n),
            _ => {
                return Err(super::at(
                    caller,
                    Error::Usage(format!(
                        "linalg.lstsq: {}-dimensional array given. Array must be \
                         two-dimensional",
                        shape.len()
                    )),
                ));
            }
        };
        let b_shape = b.shape()?;
        if b_shape.first() != Some(&m) || b_shape.len() > 2 {
            return Err(super::at(
                caller,
                Error::Usage(format!(
                    "linalg.lstsq: Incompatible dimensions: a has {m} rows, b has shape {}",
                    super::shape_text(&b_shape)
                )),
            ));
        }
        let s = self.singular_values()?;
        let values = s.to_vec()?;
        let cut = m.max(n) as f64 * f64::EPSILON * values.first().copied().unwrap_or(0.0);
        let rank = values.iter().filter(|&&x| x > cut).count() as u64;
        let x = self.pinv(None)?.matmul(&b.astype(DType::F64));
        let residuals = if rank == n && m > n {
            let r = &b.astype(DType::F64) - &self.astype(DType::F64).matmul(&x);
            if b_shape.len() == 1 {
                (&r * &r).sum().reshape(&[1])
            } else {
                (&r * &r).sum_axis(0)
            }
        } else {
            self.np.zeros(&[0], DType::F64)
        };
        Ok((x, residuals, rank, s))
    }
}
