//! Repeating arrays (NumPy's `repeat` and `tile`): a broadcast view with the copies along a
//! new axis, copied and reshaped, so each is one copy task.

use super::{Array, Error, Result};

impl Array {
    /// Each element repeated `repeats` times (NumPy's `repeat(a, repeats, axis)`): along
    /// `axis`, or over the flattened array with `None`.
    #[track_caller]
    pub fn repeat(&self, repeats: u64, axis: Option<i64>) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.repeated(repeats, axis)
            .unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    fn repeated(&self, repeats: u64, axis: Option<i64>) -> Result<Array> {
        let (a, axis) = match axis {
            None => (self.reshape(&[-1]), 0),
            Some(axis) => (self.clone(), axis),
        };
        let shape = a.shape()?;
        let d = super::search::normalize_axis(axis, shape.len())?;
        // (..., n, 1, ...) broadcast to (..., n, repeats, ...), then merged.
        let mut wide = shape.clone();
        wide.insert(d + 1, repeats);
        let mut merged: Vec<i64> = shape.iter().map(|&e| e as i64).collect();
        merged[d] = shape[d]
            .checked_mul(repeats)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "numeric.repeat: {repeats} copies of shape {} overflow",
                    super::shape_text(&shape)
                ))
            })?;
        Ok(a.expand_dims(d as i64 + 1)
            .broadcast_to(&wide)
            .copy()
            .reshape(&merged))
    }

    /// The array repeated `reps[i]` times along each axis (NumPy's `tile(a, reps)`): with
    /// fewer `reps` than dimensions the leading axes are repeated once; with more, the
    /// array gains leading axes of extent 1.
    #[track_caller]
    pub fn tile(&self, reps: &[u64]) -> Array {
        let _site = self.np.site_guard(std::panic::Location::caller());
        self.tiled(reps).unwrap_or_else(|e| self.np.wrap(Err(e)))
    }

    fn tiled(&self, reps: &[u64]) -> Result<Array> {
        let shape = self.shape()?;
        let d = shape.len().max(reps.len());
        let mut s = vec![1u64; d - shape.len()];
        s.extend(&shape);
        let mut r = vec![1u64; d - reps.len()];
        r.extend(reps);
        let fits = |e: u64, k: u64| e.checked_mul(k).is_some_and(|n| i64::try_from(n).is_ok());
        if s.iter().zip(&r).any(|(&e, &k)| !fits(e, k)) {
            return Err(Error::Usage(format!(
                "numeric.tile: {reps:?} copies of shape {} overflow",
                super::shape_text(&shape)
            )));
        }
        // (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then (r0·s0, r1·s1, ...).
        let interleaved: Vec<i64> = s.iter().flat_map(|&e| [1, e as i64]).collect();
        let wide: Vec<u64> = s.iter().zip(&r).flat_map(|(&e, &k)| [k, e]).collect();
        let merged: Vec<i64> = s.iter().zip(&r).map(|(&e, &k)| (e * k) as i64).collect();
        Ok(self
            .reshape(&interleaved)
            .broadcast_to(&wide)
            .copy()
            .reshape(&merged))
    }
}
