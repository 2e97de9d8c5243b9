//! Covariance (NumPy's `cov`): centered rows and one product.

use super::{Array, Error, Ix, Result};

impl Array {
    /// The covariance matrix of the rows (NumPy's `cov(m)`): each row a variable, each
    /// column an observation, normalized by `observations - 1`. A vector is one variable,
    /// whose covariance is a 0-d array.
    #[track_caller]
    pub fn cov(&self) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.cov_with(true, 1)
    }

    /// [`Array::cov`] with NumPy's `rowvar` (`false`: each column a variable) and `ddof`
    /// (the normalization is `observations - ddof`).
    #[track_caller]
    pub fn cov_with(&self, rowvar: bool, ddof: u64) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.covariance(rowvar, ddof)
            .unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    fn covariance(&self, rowvar: bool, ddof: u64) -> Result<Array> {
        let shape = self.shape()?;
        let x = match shape.len() {
            1 => self.reshape(&[1, -1]),
            2 if rowvar => self.clone(),
            2 => self.t(),
            _ => {
                return Err(Error::Usage(format!(
                    "numeric.cov: m has more than 2 dimensions (shape {})",
                    super::shape_text(&shape)
                )));
            }
        };
        let observations = x.shape()?.get(1).copied().unwrap_or(0);
        let centered = &x - &x.mean_axes(Some(&[1]), true);
        // NumPy multiplies by the reciprocal of the normalization (`c *= 1 / fact`).
        let c = centered.matmul(&centered.t()) * (1.0 / (observations as f64 - ddof as f64));
        Ok(if shape.len() == 1 {
            c.index(&[Ix::At(0), Ix::At(0)])
        } else {
            c
        })
    }
}
