//! Linear algebra of complex matrices (NumPy's `linalg.solve`, `inv`, `det`, `cholesky`, `qr`
//! and `norm` of `complex128` and `complex64`). `solve`, `inv` and `det` share the real
//! matrices' LU factorization by panels (`lu.rs`), its
//! panels factored in complex arithmetic on the host (NumPy's products and quotients, pivots
//! by `|re| + |im|` as LAPACK's `zgetrf` picks them) and the rest updated by complex
//! products, four real products each. The results agree with NumPy's within rounding, not to
//! the bit (LAPACK substitutes where this multiplies by the triangles' inverses, and sums
//! its products in another order). `cholesky` is blocked as the real one; `qr` reflects a
//! column at a time with LAPACK's complex reflectors (so NumPy's signs and a real diagonal).

use super::linalg::{NormOrd, matrix_dims, sign_bit_clear, span};
use super::{Array, Complex, ComplexArray, Ix, Range, Result};
use crate::Error;

impl ComplexArray {
    /// The order of this square matrix, or NumPy's error for `what`.
    fn square_order(&self, what: &str) -> Result<i64> {
        let shape = self.shape()?;
        match shape[..] {
            [n, m] if n == m => Ok(n as i64),
            _ => Err(Error::Usage(format!(
                "linalg.{what}: Last 2 dimensions of the array must be square, got shape {} \
                 (this takes one matrix, not a stack)",
                super::shape_text(&shape)
            ))),
        }
    }

    /// The solution `x` of `self @ x == b` (NumPy's `linalg.solve`): `b` a vector of the
    /// matrix's order or a matrix of that many rows. NumPy's "Singular matrix" for a
    /// singular one.
    #[track_caller]
    pub fn solve(&self, b: &ComplexArray) -> Result<ComplexArray> {
        self.solve_inner(b, "solve")
    }

    fn solve_inner(&self, b: &ComplexArray, what: &str) -> Result<ComplexArray> {
        let n = self.square_order(what)?;
        let shape = b.shape()?;
        let columns = match shape[..] {
            [r] | [r, _] if r as i64 == n => shape.get(1).copied().unwrap_or(1) as i64,
            _ => {
                return Err(Error::Usage(format!(
                    "linalg.{what}: the right-hand side of shape {} does not fit a matrix of \
                     order {n}",
                    super::shape_text(&shape)
                )));
            }
        };
        let np = self.re().numeric();
        let dtype = self.dtype()?;
        let rhs = b.reshape(&[n, columns]).astype(dtype);
        let e = np.eliminate(&self.astype(dtype), Some(&rhs), n, dtype)?;
        if e.singular {
            return Err(Error::Usage(format!("linalg.{what}: Singular matrix")));
        }
        let x = e.back_substitute(np, n)?;
        Ok(if shape.len() == 1 { x.reshape(&[n]) } else { x })
    }

    /// The inverse (NumPy's `linalg.inv`); NumPy's "Singular matrix" for a singular one.
    #[track_caller]
    pub fn inv(&self) -> Result<ComplexArray> {
        let n = self.square_order("inv")?;
        let np = self.re().numeric();
        let eye = ComplexArray::from_real(&np.eye(n as u64, self.dtype()?));
        self.solve_inner(&eye, "inv")
    }
}

/// Columns per block of [`ComplexArray::cholesky`] (as the real matrices' `cholesky`).
const CHOLESKY_BLOCK: i64 = 64;

/// Rows per product of [`ComplexArray::cholesky`]'s update of the rest of the matrix.
const TRAILING_STRIP: i64 = 256;

impl ComplexArray {
    /// The determinant (NumPy's `linalg.det`), 0-d: the product of the pivots of the LU
    /// factorization (by panels, as `solve`'s), multiplied in order on the host (the
    /// diagonal is read, `n` numbers), negated for an odd number of row swaps; zero for a
    /// singular matrix, one for an empty one. NumPy takes `exp` of the sum of the pivots'
    /// logarithms: the same number within rounding, except where a partial product
    /// overflows or underflows and the sum of logarithms does not (pivots of `1e200`,
    /// `1e200`, `1e-200`, `1e-200`: NumPy's 1, here infinity times zero).
    #[track_caller]
    pub fn det(&self) -> Result<ComplexArray> {
        let n = self.square_order("det")?;
        let np = self.re().numeric();
        let dtype = self.dtype()?;
        let value = if n == 0 {
            Complex::new(1.0, 0.0)
        } else {
            let e = np.eliminate(&self.astype(dtype), None, n, dtype)?;
            if e.singular {
                Complex::new(0.0, 0.0)
            } else {
                let (re, im) = (e.lu.re().diag().to_vec()?, e.lu.im().diag().to_vec()?);
                let product = re
                    .into_iter()
                    .zip(im)
                    .fold(Complex::new(1.0, 0.0), |p, (r, i)| p * Complex::new(r, i));
                if e.even {
                    product
                } else {
                    Complex::new(-product.re, -product.im)
                }
            }
        };
        Ok(np.complex(
            &np.full(&[], value.re, dtype),
            &np.full(&[], value.im, dtype),
        ))
    }

    /// The lower-triangular `L` with `L @ L^H == self` (NumPy's `linalg.cholesky`) of a
    /// Hermitian positive-definite matrix, of which only the lower triangle is read (and of
    /// the diagonal only its real part). Blocked as the real matrices' (`zpotrf`'s order), by
    /// blocks of 64 columns: each diagonal block (updated by the blocks before it) is read
    /// to the host and factored there (real pivots `sqrt(re(a[j, j]) - |L[j, :j]|^2)`, the
    /// column below `(a[j+1:, j] - L[j+1:, :j] @ conj(L[j, :j])) / pivot`), the block below
    /// it becomes `L21 = A21 L11^-H` by one product with that inverse (computed on the host),
    /// and the lower triangle of the rest loses `L21 @ L21^H` (complex products of strips of
    /// 256 rows). A pivot that is not positive is NumPy's error as soon as its block is
    /// factored.
    #[track_caller]
    pub fn cholesky(&self) -> Result<ComplexArray> {
        let n = self.square_order("cholesky")?;
        let np = self.re().numeric();
        let dtype = self.dtype()?;
        let w = ComplexArray::from_parts(self.re().tril(0), self.im().tril(0))?;
        let upload = |shape: &[u64], values: &[Complex]| {
            let re: Vec<f64> = values.iter().map(|c| c.re).collect();
            let im: Vec<f64> = values.iter().map(|c| c.im).collect();
            np.complex(
                &np.from_vec(shape, &re).astype(dtype),
                &np.from_vec(shape, &im).astype(dtype),
            )
        };
        for kb in (0..n).step_by(CHOLESKY_BLOCK as usize) {
            let e = (kb + CHOLESKY_BLOCK).min(n);
            let b = (e - kb) as usize;
            let shape = [b as u64, b as u64];
            let diagonal = w.index(&[span(kb, e), span(kb, e)]);
            let l11 = factor_block(&diagonal.to_vec()?, b).ok_or_else(|| {
                Error::Usage("linalg.cholesky: Matrix is not positive definite".into())
            })?;
            diagonal.assign(&upload(&shape, &l11))?;
            if e == n {
                break;
            }
            // `L21 = A21 L11^-H`: `L11^-H` is the inverse of `L11`'s conjugate transpose.
            let adjoint: Vec<Complex> = (0..b * b)
                .map(|ij| {
                    let c = l11[(ij % b) * b + ij / b];
                    Complex::new(c.re, -c.im)
                })
                .collect();
            let inverse = super::lu::upper_inverse(&adjoint, b);
            let below = w.index(&[span(e, n), span(kb, e)]);
            below.assign(&below.matmul(&upload(&shape, &inverse)))?;
            // The lower triangle of the rest less `L21 @ L21^H`, a strip of rows at a time,
            // each strip's product stopping at its last row's column (as the real one's).
            for r0 in (e..n).step_by(TRAILING_STRIP as usize) {
                let r1 = (r0 + TRAILING_STRIP).min(n);
                let rows = w.index(&[span(r0, r1), span(kb, e)]);
                let cols = w.index(&[span(e, r1), span(kb, e)]);
                let strip = w.index(&[span(r0, r1), span(e, r1)]);
                strip.assign(&(&strip - &rows.matmul(&cols.conj().t())))?;
            }
        }
        // The trailing updates wrote above the diagonal too: keep the lower triangle.
        w.re().assign(&w.re().tril(0))?;
        w.im().assign(&w.im().tril(0))?;
        Ok(w)
    }

    /// The reduced QR factorization (NumPy's `linalg.qr(a)`, mode `'reduced'`): `(Q, R)`
    /// with `Q` `(m, k)` of orthonormal columns, `R` `(k, n)` upper triangular with a real
    /// diagonal, and `Q @ R == a`, `k = min(m, n)`. Householder reflections as LAPACK's
    /// `zlarfg` chooses them, so NumPy's signs: for column `j`, `alpha = R[j, j]` and
    /// `beta = -sign(re(alpha)) * |(alpha, R[j+1:, j])|`, `tau = ((beta - re(alpha)) /
    /// beta, -im(alpha) / beta)` and `v = (1, R[j+1:, j] / (alpha - beta))`; `R[j, j]`
    /// becomes `beta`, the columns right of it are multiplied by `H^H = I - conj(tau) v v^H`
    /// and `Q` by `H`. A column with nothing below its diagonal and a real diagonal is not
    /// reflected (`tau = 0`); `-0.0` counts as negative, as Fortran's `SIGN` takes it. The
    /// norm is scaled by the column's largest part, so tiny and huge entries neither underflow
    /// nor overflow; `zlarfg`'s further rescaling of a `beta` below the smallest normal number
    /// is not done.
    #[track_caller]
    pub fn qr(&self) -> Result<(ComplexArray, ComplexArray)> {
        let (m, n) = matrix_dims(&self.shape()?, "qr")?;
        let k = m.min(n);
        let np = self.re().numeric();
        let dtype = self.dtype()?;
        let r = self.astype(dtype).copy();
        let q = ComplexArray::from_real(&np.eye(m as u64, dtype));
        let all = Ix::Slice(Range::all());
        for j in 0..k {
            let x = r.index(&[span(j, m), span(j, j + 1)]);
            let alpha = r.index(&[span(j, j + 1), span(j, j + 1)]);
            let (ar, ai) = (alpha.re().copy(), alpha.im().copy());
            // The column's largest part scales its norm (as `dznrm2` and `dlapy3` do: tiny or
            // huge entries neither underflow nor overflow); a column with no nonzero part
            // below the diagonal and a real diagonal is not reflected.
            let tail = (j + 1 < m).then(|| r.index(&[span(j + 1, m), span(j, j + 1)]));
            let tail_max = match &tail {
                Some(t) => t
                    .re()
                    .abs()
                    .max()
                    .maximum(&t.im().abs().max())
                    .reshape(&[1, 1]),
                None => np.zeros(&[1, 1], dtype),
            };
            let scale = ar.abs().maximum(&ai.abs()).maximum(&tail_max);
            let squares = |x: &Array| {
                let unit = x / &scale;
                (&unit * &unit).sum().reshape(&[1, 1])
            };
            let mut sum = &squares(&ar) + &squares(&ai);
            if let Some(t) = &tail {
                sum = &(&sum + &squares(t.re())) + &squares(t.im());
            }
            let size = &scale * &sum.sqrt();
            let beta = sign_bit_clear(&ar).select(&(&size * -1.0), &size);
            let skip = tail_max.eq(0.0) & ai.eq(0.0);
            let tau = ComplexArray::from_parts(
                skip.select(0.0, &(&(&beta - &ar) / &beta)),
                skip.select(0.0, &(&(&ai * -1.0) / &beta)),
            )?;
            // `v`: 1 on the diagonal, the rest of the column divided by `alpha - beta`
            // (zero where the column is not reflected).
            let v = x.copy();
            let head = v.index(&[span(0, 1)]);
            head.assign(1.0)?;
            if let Some(tail) = &tail {
                let scaled = tail.div(&alpha.sub(&beta));
                let rest = v.index(&[span(1, m - j)]);
                rest.re().assign(&skip.select(0.0, scaled.re()))?;
                rest.im().assign(&skip.select(0.0, scaled.im()))?;
            }
            if j + 1 < n {
                let right = r.index(&[span(j, m), span(j + 1, n)]);
                let w = v.conj().t().matmul(&right);
                right.assign(&(&right - &(&v.matmul(&w) * &tau.conj())))?;
            }
            alpha.re().assign(&skip.select(&ar, &beta))?;
            alpha.im().assign(&skip.select(&ai, 0.0))?;
            let columns = q.index(&[all, span(j, m)]);
            let u = columns.matmul(&v);
            columns.assign(&(&columns - &(&u * &tau).matmul(&v.conj().t())))?;
        }
        let q = q.index(&[all, span(0, k)]).copy();
        let r = r.index(&[span(0, k), all]);
        let r = ComplexArray::from_parts(r.re().triu(0), r.im().triu(0))?;
        Ok((q, r))
    }

    /// The 2-norm of the flattened array (NumPy's `linalg.norm` without `ord`, a matrix's
    /// Frobenius norm), 0-d real: `sqrt(re . re + im . im)`, as NumPy computes it.
    #[track_caller]
    pub fn norm(&self) -> Array {
        let (re, im) = (self.re().reshape(&[-1]), self.im().reshape(&[-1]));
        (&re.dot(&re) + &im.dot(&im)).sqrt()
    }

    /// NumPy's `linalg.norm(x, ord)` of a complex vector or matrix, 0-d real: the norms of
    /// the magnitudes (`|x|`'s sums, maxima and powers, as [`Array::norm_ord`] computes
    /// them), [`ComplexArray::norm`] for the 2-norm and Frobenius norm, and for a matrix's
    /// 2-norm, `-2` norm and nuclear norm the largest, the smallest and the sum of its
    /// [`ComplexArray::singular_values`].
    #[track_caller]
    pub fn norm_ord(&self, ord: NormOrd) -> Result<Array> {
        let rank = self.shape()?.len();
        match (rank, ord) {
            (_, NormOrd::Default) | (2, NormOrd::Fro) => Ok(self.norm()),
            (1, NormOrd::P(2.0)) => Ok(self.norm()),
            (2, NormOrd::P(p)) if p == 2.0 || p == -2.0 => {
                let s = self.singular_values()?;
                Ok(if p > 0.0 { s.max() } else { s.min() })
            }
            (2, NormOrd::Nuc) => Ok(self.singular_values()?.sum()),
            _ => self.abs().norm_ord(ord),
        }
    }

    /// The singular values of a complex matrix, descending, real of the parts' dtype
    /// (NumPy's `linalg.svd(a, compute_uv=False)`). They are those of the real matrix
    /// `[[re, -im], [im, re]]` of twice each extent, which has each of them twice (it is
    /// `a` acting on `C^n` as `R^2n`): that matrix is assembled by tasks and factored as
    /// [`Array::singular_values`] factors a real one (on the host, by one-sided Jacobi
    /// rotations), and every other value kept. Four times the real matrix's elements, and
    /// about eight times its work; the singular vectors are not computed for complex
    /// matrices.
    #[track_caller]
    pub fn singular_values(&self) -> Result<Array> {
        let caller = std::panic::Location::caller();
        let shape = self.shape()?;
        if shape.len() != 2 {
            return Err(super::at(
                caller,
                Error::Usage(format!(
                    "linalg.svd: {}-dimensional array given. Array must be two-dimensional",
                    shape.len()
                )),
            ));
        }
        let np = self.re().numeric();
        let (re, im) = (self.re(), self.im());
        let minus_im = -im;
        let top = np.concatenate(&[re, &minus_im], 1);
        let bottom = np.concatenate(&[im, re], 1);
        let real = np.concatenate(&[&top, &bottom], 0);
        let twice = real.singular_values().map_err(|e| super::at(caller, e))?;
        Ok(twice.slice(&[Range::all().step(2)]).astype(self.dtype()?))
    }
}

/// The lower-triangular factor of the `b` x `b` Hermitian block `a` (row-major; its lower
/// triangle and the real part of its diagonal read), by the column algorithm: real pivots
/// `sqrt(re(a[j, j]) - |L[j, :j]|^2)`, `L[i, j] = (a[i, j] - L[i, :j] . conj(L[j, :j])) /
/// pivot`; `None` at a pivot that is not positive (or not a number).
fn factor_block(a: &[Complex], b: usize) -> Option<Vec<Complex>> {
    let mut l = vec![Complex::new(0.0, 0.0); b * b];
    for j in 0..b {
        let d = (0..j).fold(a[j * b + j].re, |s, k| {
            let x = l[j * b + k];
            s - (x.re * x.re + x.im * x.im)
        });
        if !(d > 0.0 && d.is_finite()) {
            return None;
        }
        let pivot = d.sqrt();
        l[j * b + j] = Complex::new(pivot, 0.0);
        for i in j + 1..b {
            let s = (0..j).fold(a[i * b + j], |s, k| {
                let y = l[j * b + k];
                s - l[i * b + k] * Complex::new(y.re, -y.im)
            });
            l[i * b + j] = Complex::new(s.re / pivot, s.im / pivot);
        }
    }
    Some(l)
}
