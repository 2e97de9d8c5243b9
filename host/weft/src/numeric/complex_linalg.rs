//! Linear algebra of complex matrices (NumPy's `linalg.solve` and `inv` of `complex128` and
//! `complex64`), through the real matrix of twice the order that acts as the complex one:
//! `A + Bi` acts on `x + yi` as `[[A, -B], [B, A]]` acts on `[x; y]`. Solving that real
//! system with [`Array::solve`] (elimination with partial pivoting) solves the complex one;
//! it is singular exactly where the complex matrix is (its determinant is
//! `|det(A + Bi)|^2`). It costs about twice the arithmetic of a complex elimination, and its
//! pivots are chosen among real parts, not complex magnitudes as LAPACK's `zgesv` does, so
//! the results agree with NumPy's within rounding, not to the bit.

use super::{Array, ComplexArray, Ix, Range, Result};
use crate::Error;

/// `m[lo:hi]` along one dimension.
fn span(lo: i64, hi: i64) -> Ix {
    Ix::Slice(Range::new(lo, hi))
}

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

    /// The real matrix `[[A, -B], [B, A]]` of this complex one `A + Bi`.
    fn real_form(&self) -> Array {
        let np = self.re().numeric();
        let minus_im = -self.im();
        let top = np.concatenate(&[self.re(), &minus_im], 1);
        let bottom = np.concatenate(&[self.im(), self.re()], 1);
        np.concatenate(&[&top, &bottom], 0)
    }

    /// The solution `x` of `self @ x == b` (NumPy's `linalg.solve`): `b` a vector of the
    /// matrix's order or a matrix of that many rows. NumPy's "Singular matrix" for a
    /// singular one.
    #[track_caller]
    pub fn solve(&self, b: &ComplexArray) -> Result<ComplexArray> {
        let n = self.square_order("solve")?;
        let shape = b.shape()?;
        if shape.first().copied() != Some(n as u64) || shape.len() > 2 {
            return Err(Error::Usage(format!(
                "linalg.solve: the right-hand side of shape {} does not fit a matrix of order \
                 {n}",
                super::shape_text(&shape)
            )));
        }
        let np = self.re().numeric();
        let rhs = np.concatenate(&[b.re(), b.im()], 0);
        let x = self.real_form().solve(&rhs)?;
        ComplexArray::from_parts(
            x.index(&[span(0, n)]).copy(),
            x.index(&[span(n, 2 * n)]).copy(),
        )
    }

    /// The inverse (NumPy's `linalg.inv`); NumPy's "Singular matrix" for a singular one.
    #[track_caller]
    pub fn inv(&self) -> Result<ComplexArray> {
        let n = self.square_order("inv")?;
        let m = self.real_form().inv()?;
        ComplexArray::from_parts(
            m.index(&[span(0, n), span(0, n)]).copy(),
            m.index(&[span(n, 2 * n), span(0, n)]).copy(),
        )
    }
}
