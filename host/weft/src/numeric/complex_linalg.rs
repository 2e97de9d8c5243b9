//! Linear algebra of complex matrices (NumPy's `linalg.solve` and `inv` of `complex128` and
//! `complex64`): the same LU factorization by panels as the real matrices' (`lu.rs`), its
//! panels factored in complex arithmetic on the host (NumPy's products and quotients, pivots
//! by `|re| + |im|` as LAPACK's `zgetrf` picks them) and the rest updated by complex
//! products, four real products each. The results agree with NumPy's within rounding, not to
//! the bit (LAPACK substitutes where this multiplies by the triangles' inverses, and sums
//! its products in another order).

use super::{ComplexArray, Result};
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
