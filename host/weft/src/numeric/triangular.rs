//! Triangles of matrices (NumPy's `triu` and `tril`): a mask of positions, built from two
//! `arange`s, selects the elements, so the whole is one element-wise task that fuses with what
//! produces and consumes it.

use weft_ir::DType;

use super::{Array, Error, Result};

impl Array {
    /// The upper triangle (NumPy's `triu(m, k)`): the elements on and above diagonal `k`
    /// (`k > 0` above the main diagonal, `k < 0` below), zero elsewhere. An array of more than
    /// two dimensions is a stack of matrices in its last two.
    #[track_caller]
    pub fn triu(&self, k: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.triangle("triu", k, true)
            .unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    /// The lower triangle (NumPy's `tril(m, k)`): the elements on and below diagonal `k`, zero
    /// elsewhere.
    #[track_caller]
    pub fn tril(&self, k: i64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.triangle("tril", k, false)
            .unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    fn triangle(&self, what: &str, k: i64, upper: bool) -> Result<Array> {
        let shape = self.shape()?;
        let [.., rows, cols] = shape[..] else {
            return Err(Error::Usage(format!(
                "numeric.{what}: needs an array of at least 2 dimensions, got shape {}",
                super::shape_text(&shape)
            )));
        };
        let np = &self.np;
        let row = np
            .arange(0.0, rows as f64, 1.0, DType::I64)
            .reshape(&[rows as i64, 1]);
        let col = np.arange(0.0, cols as f64, 1.0, DType::I64);
        // col - row is the diagonal an element lies on.
        let diagonal = &col - &row;
        let keep = if upper {
            diagonal.ge(k)
        } else {
            diagonal.le(k)
        };
        Ok(keep.select(self, 0))
    }
}
