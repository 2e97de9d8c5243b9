//! Shape arithmetic: broadcasting of 0-d arrays, slice bounds, the lengths of ranges.
//!
//! Everything here is a pure function of numbers, so it is tested without a host.

use crate::keys::Kind;

/// Formats a shape as `[3, 4]`.
pub fn show(shape: &[u64]) -> String {
    format!("{shape:?}")
}

/// The number of elements of `shape`, or `None` if it overflows `u64`.
pub fn volume(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// The shape of an element-wise result over operands of these shapes, with NumPy's
/// broadcasting of 0-d arrays: every operand has the result's shape or is 0-d. The error
/// names the first two shapes that disagree (`"shapes [3, 4] and [4] do not match"`).
pub fn broadcast(shapes: &[&[u64]]) -> Result<Vec<u64>, String> {
    let mut result: Option<&[u64]> = None;
    for &s in shapes.iter().filter(|s| !s.is_empty()) {
        match result {
            None => result = Some(s),
            Some(r) if r == s => {}
            Some(r) => {
                return Err(format!("shapes {} and {} do not match", show(r), show(s)));
            }
        }
    }
    Ok(result.unwrap_or_default().to_vec())
}

/// How an array operand of shape `shape` reaches a kernel whose output has shape `out`
/// (after [`broadcast`] accepted them): tiled like the output when it has the output's
/// shape, else (it is 0-d) whole.
pub fn kind(shape: &[u64], out: &[u64]) -> Kind {
    if shape == out {
        Kind::Array
    } else {
        Kind::Zero
    }
}

/// NumPy's bounds of the slice `start:stop` of a dimension of extent `extent`: a missing start
/// is 0 and a missing stop is the extent, negative bounds count from the end, both are
/// clamped to `0..=extent`, and a stop before the start gives an empty range.
pub fn slice_bounds(start: Option<i64>, stop: Option<i64>, extent: u64) -> (u64, u64) {
    let resolve = |b: i64| -> u64 {
        let b = i128::from(b);
        let e = i128::from(extent);
        let b = if b < 0 { b + e } else { b };
        // Clamped to 0..=extent, so the value fits u64.
        b.clamp(0, e) as u64
    };
    let lo = start.map_or(0, resolve);
    let hi = stop.map_or(extent, resolve);
    (lo, hi.max(lo))
}

/// The length of `arange(start, stop, step)`: `ceil((stop - start) / step)`, at least 0.
pub fn arange_len(start: f64, stop: f64, step: f64) -> Result<u64, String> {
    if step == 0.0 {
        return Err("step must not be zero".to_string());
    }
    if !(start.is_finite() && stop.is_finite() && step.is_finite()) {
        return Err(format!(
            "start, stop and step must be finite, got {start}, {stop} and {step}"
        ));
    }
    let n = ((stop - start) / step).ceil();
    if n <= 0.0 {
        return Ok(0);
    }
    // 2^53: past it, consecutive elements are no longer distinct f64 values.
    const LIMIT: f64 = 9_007_199_254_740_992.0;
    if n > LIMIT {
        return Err(format!("{n} elements are too many"));
    }
    Ok(n as u64)
}

/// The row-major strides of `shape` (in elements), as the `i64`s a kernel takes, or `None`
/// if the array has more elements than an `i64` counts.
pub fn strides(shape: &[u64]) -> Option<Vec<i64>> {
    let mut out = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (d, &extent) in shape.iter().enumerate().rev() {
        out[d] = acc;
        acc = acc.checked_mul(i64::try_from(extent).ok()?)?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_accepts_equal_and_0d_shapes() {
        assert_eq!(broadcast(&[&[3, 4], &[3, 4]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[], &[3, 4]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[3, 4], &[]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[], &[]]), Ok(vec![]));
        assert_eq!(broadcast(&[]), Ok(vec![]));
        assert_eq!(
            broadcast(&[&[3, 4], &[4]]),
            Err("shapes [3, 4] and [4] do not match".to_string())
        );
        assert!(broadcast(&[&[2], &[], &[3]]).is_err());
        assert_eq!(kind(&[], &[3]), Kind::Zero);
        assert_eq!(kind(&[3], &[3]), Kind::Array);
        assert_eq!(kind(&[], &[]), Kind::Array);
    }

    #[test]
    fn slice_bounds_follow_numpy() {
        assert_eq!(slice_bounds(None, None, 10), (0, 10));
        assert_eq!(slice_bounds(Some(2), Some(5), 10), (2, 5));
        assert_eq!(slice_bounds(Some(-3), None, 10), (7, 10));
        assert_eq!(slice_bounds(Some(1), Some(-1), 10), (1, 9));
        assert_eq!(slice_bounds(Some(-20), Some(20), 10), (0, 10));
        assert_eq!(slice_bounds(Some(5), Some(2), 10), (5, 5));
        assert_eq!(slice_bounds(Some(12), None, 10), (10, 10));
        assert_eq!(slice_bounds(Some(i64::MIN), Some(i64::MAX), 10), (0, 10));
        assert_eq!(slice_bounds(None, Some(-1), 0), (0, 0));
    }

    #[test]
    fn arange_lengths() {
        assert_eq!(arange_len(0.0, 5.0, 1.0), Ok(5));
        assert_eq!(arange_len(0.0, 5.5, 1.0), Ok(6));
        assert_eq!(arange_len(1.0, 0.0, 0.25), Ok(0));
        assert_eq!(arange_len(5.0, 0.0, -2.0), Ok(3));
        assert_eq!(arange_len(0.0, 1.0, 0.1), Ok(10));
        assert!(arange_len(0.0, 1.0, 0.0).is_err());
        assert!(arange_len(0.0, f64::NAN, 1.0).is_err());
        assert!(arange_len(0.0, 1e300, 1e-300).is_err());
    }

    #[test]
    fn volumes_and_strides() {
        assert_eq!(volume(&[2, 3, 4]), Some(24));
        assert_eq!(volume(&[]), Some(1));
        assert_eq!(volume(&[u64::MAX, 2]), None);
        assert_eq!(strides(&[2, 3, 4]), Some(vec![12, 4, 1]));
        assert_eq!(strides(&[]), Some(vec![]));
        assert_eq!(strides(&[u64::MAX]), None);
    }
}
