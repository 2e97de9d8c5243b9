//! Dense linear algebra (NumPy's `linalg.solve`, `inv`, `det`, `cholesky`, `qr` and `norm`),
//! written with the facade's own operations: Gaussian elimination with partial pivoting,
//! Cholesky's factorization by blocks of columns (the rest of the matrix updated by
//! products), Householder reflections, and the norms' sums and maxima.
//!
//! Elimination factors panels of columns on the host and updates the rest by products (see
//! `lu.rs`); Cholesky's factorization factors each 64 x 64 diagonal block on the host, and
//! products do the rest. The Householder reflections read nothing on the host, and run as
//! replayed traces ([`Numeric::repeat`]) whose views move by a row and grow by one element
//! a step. An exact
//! zero pivot makes `solve` and `inv` fail with
//! NumPy's "Singular matrix" (and `det` return zero); a matrix whose factorization meets a
//! pivot that is not positive makes `cholesky` fail with "Matrix is not positive definite".
//! The results are not LAPACK's bits: the order of each update's operations differs from its
//! blocked code. The tests compare them with plain-Rust eliminations, factorizations and
//! reflections written out and with the definitions (`a @ solve(a, b) == b`, `L @ L.T == a`,
//! `Q @ R == a`) within rounding.

use weft_ir::DType;

use super::{Array, Error, Ix, Range, Result};

/// `m[lo:hi]` along one dimension.
pub(super) fn span(lo: i64, hi: i64) -> Ix {
    Ix::Slice(Range::new(lo, hi))
}

/// A square matrix's order, or NumPy's error for an operand that is not one.
fn order(a: &Array, what: &str) -> Result<i64> {
    let shape = a.shape()?;
    match shape[..] {
        [n, m] if n == m => Ok(n as i64),
        _ => Err(Error::Usage(format!(
            "linalg.{what}: Last 2 dimensions of the array must be square, got shape {} (this \
             takes one matrix, not a stack)",
            super::shape_text(&shape)
        ))),
    }
}

/// A matrix's rows and columns, or the error of `linalg.{what}` for an array of another rank.
pub(super) fn matrix_dims(shape: &[u64], what: &str) -> Result<(i64, i64)> {
    match shape[..] {
        [m, n] => Ok((m as i64, n as i64)),
        _ => Err(Error::Usage(format!(
            "linalg.{what}: expected a matrix, got shape {} (this takes one matrix, not a \
             stack)",
            super::shape_text(shape)
        ))),
    }
}

/// Whether each element's sign bit is clear (`-0.0` is negative, as Fortran's `SIGN` and so
/// LAPACK's reflectors take it): `x > 0`, or `x == 0` with `1 / x > 0`.
pub(super) fn sign_bit_clear(x: &Array) -> Array {
    x.gt(0.0) | (x.eq(0.0) & (1.0 / x).gt(0.0))
}

/// The float dtype a factorization computes in: `a`'s if it is a float, else `f64` (NumPy
/// computes integer matrices in `float64`).
fn float_type(a: &Array) -> Result<DType> {
    Ok(match a.dtype()? {
        DType::F32 => DType::F32,
        _ => DType::F64,
    })
}

impl Array {
    /// The solution `x` of `self @ x = b` (NumPy's `linalg.solve`): `self` a square matrix,
    /// `b` a vector or a matrix of as many rows; a float result (`f64` for integer operands).
    /// Gaussian elimination with partial pivoting, then back substitution (see the module's
    /// documentation). A singular matrix (an exact zero pivot) is NumPy's error.
    #[track_caller]
    pub fn solve(&self, b: &Array) -> Result<Array> {
        let caller = std::panic::Location::caller();
        self.solve_inner(b, "solve")
            .map_err(|e| super::at(caller, e))
    }

    fn solve_inner(&self, b: &Array, what: &str) -> Result<Array> {
        let n = order(self, what)?;
        let b_shape = b.shape()?;
        let vector = b_shape.len() == 1;
        let columns = match b_shape[..] {
            [r] | [r, _] if r as i64 == n => b_shape.get(1).copied().unwrap_or(1),
            _ => {
                return Err(Error::Usage(format!(
                    "linalg.{what}: the right-hand side has shape {} where {n} rows are \
                     needed (a matrix {} and b of shape ({n},) or ({n}, k))",
                    super::shape_text(&b_shape),
                    super::shape_text(&[n as u64, n as u64]),
                )));
            }
        };
        let b2 = b.reshape(&[n, columns as i64]);
        let np = &self.np;
        if n == 0 {
            return Ok(b.astype(float_type(self)?).copy());
        }
        let dtype = float_type(self)?;
        let e = np.eliminate(&self.astype(dtype), Some(&b2.astype(dtype)), n, dtype)?;
        if e.singular {
            return Err(Error::Usage(format!("linalg.{what}: Singular matrix")));
        }
        let x = e.back_substitute(np, n)?;
        Ok(if vector { x.reshape(&[n]) } else { x })
    }

    /// The inverse (NumPy's `linalg.inv`): [`Array::solve`] of the identity. A singular matrix
    /// is NumPy's error.
    #[track_caller]
    pub fn inv(&self) -> Result<Array> {
        let caller = std::panic::Location::caller();
        let n = order(self, "inv").map_err(|e| super::at(caller, e))?;
        let dtype = float_type(self).map_err(|e| super::at(caller, e))?;
        self.solve_inner(&self.np.eye(n as u64, dtype), "inv")
            .map_err(|e| super::at(caller, e))
    }

    /// The determinant (NumPy's `linalg.det`), 0-d: the product of the pivots of Gaussian
    /// elimination with partial pivoting, negated for an odd number of row swaps; zero for a
    /// singular matrix.
    #[track_caller]
    pub fn det(&self) -> Result<Array> {
        let caller = std::panic::Location::caller();
        let e = order(self, "det")
            .and_then(|n| {
                let dtype = float_type(self)?;
                self.np.eliminate(&self.astype(dtype), None, n, dtype)
            })
            .map_err(|e| super::at(caller, e))?;
        let dtype = e.lu.dtype()?;
        if e.lu.shape()?.first() == Some(&0) {
            // The empty product, as NumPy's `det` of a 0 x 0 matrix.
            return Ok(self.np.full(&[], 1.0, dtype));
        }
        if e.singular {
            return Ok(self.np.full(&[], 0.0, dtype));
        }
        let product = e.lu.diag().reduce(super::Reduction::Prod);
        Ok(if e.even { product } else { product * -1.0 })
    }

    /// The lower-triangular `L` with `L @ L.T == self` (NumPy's `linalg.cholesky`) of a
    /// symmetric positive-definite matrix, of which only the lower triangle is read. Blocked,
    /// as LAPACK's `potrf`, by blocks of 64 columns: each diagonal block (updated by the
    /// blocks before it) is read to the host and factored there (`L11`, the column algorithm
    /// in `f64`), the block below it becomes `L21 = A21 L11^-T` (one product with the
    /// inverse's transpose, computed on the host), and the lower triangle of the rest loses
    /// `L21 @ L21.T` (products of strips of 256 rows, at BLAS speed). A pivot that is not
    /// positive is NumPy's error.
    #[track_caller]
    pub fn cholesky(&self) -> Result<Array> {
        let caller = std::panic::Location::caller();
        self.cholesky_inner().map_err(|e| super::at(caller, e))
    }

    fn cholesky_inner(&self) -> Result<Array> {
        let n = order(self, "cholesky")?;
        let np = &self.np;
        let dtype = float_type(self)?;
        // The work matrix: the lower triangle of `a` (a new array, cast where it must be),
        // updated block by block into `L`.
        let w = if self.dtype()? == dtype {
            self.tril(0)
        } else {
            self.astype(dtype).tril(0)
        };
        for kb in (0..n).step_by(CHOLESKY_BLOCK as usize) {
            let e = (kb + CHOLESKY_BLOCK).min(n);
            let b = (e - kb) as usize;
            let shape = [b as u64, b as u64];
            let diagonal = w.index(&[span(kb, e), span(kb, e)]);
            let l11 = factor_block(&diagonal.to_vec()?, b).ok_or_else(|| {
                Error::Usage("linalg.cholesky: Matrix is not positive definite".into())
            })?;
            diagonal.assign(&np.from_vec(&shape, &l11).astype(dtype))?;
            if e == n {
                break;
            }
            // `L21 = A21 L11^-T`: `L11^-T` is the inverse of `L11`'s transpose.
            let transposed: Vec<f64> = (0..b * b).map(|ij| l11[(ij % b) * b + ij / b]).collect();
            let inverse = super::lu::upper_inverse(&transposed, b);
            let below = w.index(&[span(e, n), span(kb, e)]);
            below.assign(&below.matmul(&np.from_vec(&shape, &inverse).astype(dtype)))?;
            // The lower triangle of the rest, less `L21 @ L21.T`, a strip of rows at a time:
            // each strip's product stops at its last row's column (as LAPACK's `syrk` does,
            // about half the multiply-adds and the bytes of the whole square).
            for r0 in (e..n).step_by(TRAILING_STRIP as usize) {
                let r1 = (r0 + TRAILING_STRIP).min(n);
                let rows = w.index(&[span(r0, r1), span(kb, e)]);
                let cols = w.index(&[span(e, r1), span(kb, e)]);
                let mut strip = w.index(&[span(r0, r1), span(e, r1)]);
                strip -= &rows.matmul(&cols.t());
                strip.check()?;
            }
        }
        // The updates wrote above the diagonal too: keep the lower triangle, in place.
        w.assign(&w.tril(0))?;
        Ok(w)
    }
}

/// The lower-triangular factor of the `b` x `b` block `a` (row-major; its lower triangle
/// read), by the column algorithm in `f64`: `L[j, j] = sqrt(a[j, j] - L[j, :j] . L[j, :j])`,
/// `L[i, j] = (a[i, j] - L[i, :j] . L[j, :j]) / L[j, j]`; `None` at a pivot that is not
/// positive (or not a number).
fn factor_block(a: &[f64], b: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; b * b];
    for j in 0..b {
        let d = (0..j).fold(a[j * b + j], |s, k| s - l[j * b + k] * l[j * b + k]);
        if !(d > 0.0 && d.is_finite()) {
            return None;
        }
        let pivot = d.sqrt();
        l[j * b + j] = pivot;
        for i in j + 1..b {
            let s = (0..j).fold(a[i * b + j], |s, k| s - l[i * b + k] * l[j * b + k]);
            l[i * b + j] = s / pivot;
        }
    }
    Some(l)
}

/// Columns per block of [`Array::cholesky`]: each diagonal block is factored on the host,
/// and products do the rest.
const CHOLESKY_BLOCK: i64 = 64;

/// Rows per product of [`Array::cholesky`]'s update of the rest of the matrix: each strip's
/// product covers its columns up to the strip's last row, so the strips cover the lower
/// triangle and a few blocks above it.
const TRAILING_STRIP: i64 = 256;

impl Array {
    /// The reduced QR factorization (NumPy's `linalg.qr(a)`, mode `'reduced'`): `(Q, R)` with
    /// `Q` `(m, k)` of orthonormal columns, `R` `(k, n)` upper triangular and `Q @ R == a`, `k
    /// = min(m, n)`. Householder reflections as LAPACK's `geqrf` chooses them (each
    /// `R[j, j]` is `-sign(a[j, j]) * norm`, and a column with only zeros below its diagonal,
    /// the last row's included, is not reflected: so the signs are NumPy's), each applied to the
    /// rest of `R` and accumulated into `Q` by element-wise updates of rank one, one step of a
    /// replayed trace per column; no value is read on the host.
    #[track_caller]
    pub fn qr(&self) -> Result<(Array, Array)> {
        let caller = std::panic::Location::caller();
        self.qr_inner().map_err(|e| super::at(caller, e))
    }

    fn qr_inner(&self) -> Result<(Array, Array)> {
        let (m, n) = matrix_dims(&self.shape()?, "qr")?;
        let k = m.min(n);
        let np = &self.np;
        let dtype = float_type(self)?;
        let r = self.astype(dtype).copy();
        let q = np.eye(m as u64, dtype);
        let all = Ix::Slice(Range::all());
        // As LAPACK's `dlarfg`, a column with nothing below its diagonal (the last row's,
        // or all zeros there) is not reflected: its diagonal keeps its sign.
        let reflected = usize::try_from(k.min(m - 1)).unwrap_or(0);
        np.repeat(reflected, |j| {
            let j = j as i64;
            let x = r.index(&[span(j, m), span(j, j + 1)]);
            let norm = x.norm();
            let below = r.index(&[span(j + 1, m), span(j, j + 1)]).norm();
            let alpha = sign_bit_clear(&r.index(&[span(j, j + 1), span(j, j + 1)]))
                .select(&(&norm * -1.0), &norm);
            // `v = x - alpha e1`, and the reflection's factor `2 / v.v` (0 where nothing lies
            // below the diagonal).
            let v = x.copy();
            let mut head = v.index(&[span(0, 1)]);
            head -= &alpha;
            head.check()?;
            let vv = (&v * &v).sum();
            let factor = below.eq(0.0).select(0.0, &(2.0 / &vv));
            let rest = r.index(&[span(j, m), span(j, n)]);
            let w = v.t().matmul(&rest);
            let mut rest = rest;
            rest -= &(&(&v * &w) * &factor);
            rest.check()?;
            let columns = q.index(&[all, span(j, m)]);
            let u = columns.matmul(&v);
            let mut columns = columns;
            columns -= &(&(&u * &v.t()) * &factor);
            columns.check()
        })?;
        let q = q.index(&[all, span(0, k)]).copy();
        let r = r.index(&[span(0, k), all]).triu(0);
        Ok((q, r))
    }
}

/// Which norm [`Array::norm_ord`] computes (NumPy's `ord` argument of `linalg.norm`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOrd {
    /// `None`: the 2-norm of the flattened array (a matrix's Frobenius norm).
    Default,
    /// `'fro'`: a matrix's Frobenius norm.
    Fro,
    /// `inf`: a vector's largest magnitude; a matrix's largest row sum of magnitudes.
    Inf,
    /// `-inf`: a vector's smallest magnitude; a matrix's smallest row sum of magnitudes.
    NegInf,
    /// A number: a vector's `sum(|x|**p)**(1/p)` (`0`: the count of non-zero elements);
    /// a matrix's largest (`1`) or smallest (`-1`) column sum of magnitudes, or its largest
    /// (`2`) or smallest (`-2`) singular value.
    P(f64),
    /// `'nuc'`: a matrix's nuclear norm, the sum of its singular values.
    Nuc,
}

impl Array {
    /// NumPy's `linalg.norm(x, ord)` of a vector or a matrix, 0-d. A matrix's 2-norm and
    /// nuclear norm come from its singular values ([`Array::singular_values`], on the
    /// host); `'fro'` or `'nuc'` of a vector is an error, as are arrays of other ranks with an
    /// `ord`.
    #[track_caller]
    pub fn norm_ord(&self, ord: NormOrd) -> Result<Array> {
        let caller = std::panic::Location::caller();
        self.norm_inner(ord).map_err(|e| super::at(caller, e))
    }

    fn norm_inner(&self, ord: NormOrd) -> Result<Array> {
        let shape = self.shape()?;
        let x = match self.dtype()? {
            DType::F32 | DType::F64 => self.clone(),
            _ => self.astype(DType::F64),
        };
        let magnitude = x.abs();
        let sum = |a: &Array, axis: Option<i64>| match axis {
            None => a.sum(),
            Some(axis) => a.sum_axis(axis),
        };
        match (shape.len(), ord) {
            (_, NormOrd::Default) => Ok(x.norm()),
            (2, NormOrd::Fro) => Ok(x.norm()),
            (1, NormOrd::Inf) => Ok(magnitude.max()),
            (1, NormOrd::NegInf) => Ok(magnitude.min()),
            (1, NormOrd::P(0.0)) => Ok(x.ne(0.0).astype(x.dtype()?).sum()),
            (1, NormOrd::P(1.0)) => Ok(sum(&magnitude, None)),
            (1, NormOrd::P(2.0)) => Ok(x.norm()),
            (1, NormOrd::P(p)) if p.is_finite() => Ok(sum(&magnitude.pow(p), None).pow(1.0 / p)),
            (2, NormOrd::Inf) => Ok(sum(&magnitude, Some(1)).max()),
            (2, NormOrd::NegInf) => Ok(sum(&magnitude, Some(1)).min()),
            (2, NormOrd::P(1.0)) => Ok(sum(&magnitude, Some(0)).max()),
            (2, NormOrd::P(-1.0)) => Ok(sum(&magnitude, Some(0)).min()),
            (2, NormOrd::P(p)) if p.abs() == 2.0 => {
                let s = x.singular_values()?;
                let r = if p > 0.0 { s.max() } else { s.min() };
                Ok(r.astype(x.dtype()?))
            }
            (2, NormOrd::Nuc) => Ok(x.singular_values()?.sum().astype(x.dtype()?)),
            (rank, ord) => Err(Error::Usage(format!(
                "linalg.norm: Invalid norm order {ord:?} for an array of {rank} dimensions"
            ))),
        }
    }
}
