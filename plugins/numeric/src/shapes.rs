//! Shape arithmetic: broadcasting of 0-d arrays, slice bounds, the lengths of ranges.
//!
//! Everything here is a pure function of numbers, so it is tested without a host.

use crate::keys::Kind;

/// A shape as NumPy prints it in most messages: `(3, 4)`, `(5,)`, `()`.
pub fn show(shape: &[u64]) -> String {
    weft_sdk::ir::shape::tuple(shape)
}

/// The number of elements of `shape`, or `None` if it overflows `u64`.
pub fn volume(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// A shape as NumPy's error messages print it: `(10,1)`, `(8,)`, `()`.
pub fn tuple(shape: &[u64]) -> String {
    weft_sdk::ir::shape::tuple_compact(shape)
}

/// The shape of an element-wise result over operands of these shapes, by NumPy's
/// broadcasting rules: shapes align at their last dimension, missing leading dimensions count
/// as 1, and in each dimension every extent is 1 or the result's. The error is NumPy's
/// (`"operands could not be broadcast together with shapes (10,1) (8,)"`).
pub fn broadcast(shapes: &[&[u64]]) -> Result<Vec<u64>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1u64; rank];
    for s in shapes {
        let lead = rank - s.len();
        for (d, &e) in s.iter().enumerate() {
            let r = &mut out[lead + d];
            if *r == 1 {
                *r = e;
            } else if e != 1 && e != *r {
                let all: Vec<String> = shapes.iter().map(|s| tuple(s)).collect();
                return Err(format!(
                    "operands could not be broadcast together with shapes {}",
                    all.join(" ")
                ));
            }
        }
    }
    Ok(out)
}

/// The start, step and length of NumPy's slice `start:stop:step` of a dimension of
/// `extent` (missing bounds as NumPy takes them, negative ones counted from the end, out of
/// range ones clipped). A step of 0 is an error.
pub fn slice_indices(
    start: Option<i64>,
    stop: Option<i64>,
    step: Option<i64>,
    extent: u64,
) -> Result<(u64, i64, u64), String> {
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err("slice step cannot be zero".to_string());
    }
    let n = i128::from(extent);
    let (step_w, neg) = (i128::from(step), step < 0);
    let adjust = |b: i64, lo: i128, hi: i128| {
        let b = i128::from(b);
        let b = if b < 0 { b + n } else { b };
        b.clamp(lo, hi)
    };
    let (lo, hi) = if neg { (-1, n - 1) } else { (0, n) };
    let first = start.map_or(if neg { n - 1 } else { 0 }, |b| adjust(b, lo, hi));
    let last = stop.map_or(if neg { -1 } else { n }, |b| adjust(b, lo, hi));
    let len = if neg {
        if first > last {
            (first - last - 1) / -step_w + 1
        } else {
            0
        }
    } else if last > first {
        (last - first - 1) / step_w + 1
    } else {
        0
    };
    let first = if len == 0 { 0 } else { first };
    Ok((first as u64, step, len as u64))
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
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[&[3, 4], &[3, 4]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[], &[3, 4]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[3, 4], &[]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[], &[]]), Ok(vec![]));
        assert_eq!(broadcast(&[]), Ok(vec![]));
        assert_eq!(broadcast(&[&[3, 4], &[4]]), Ok(vec![3, 4]));
        assert_eq!(broadcast(&[&[3, 1], &[1, 5]]), Ok(vec![3, 5]));
        assert_eq!(broadcast(&[&[2, 1, 4], &[3, 1]]), Ok(vec![2, 3, 4]));
        assert_eq!(broadcast(&[&[0, 1], &[1, 5]]), Ok(vec![0, 5]));
        assert_eq!(
            broadcast(&[&[10, 1], &[8]]),
            Ok(vec![10, 8]),
            "a column and a row make a matrix"
        );
        assert_eq!(
            broadcast(&[&[10, 2], &[8]]),
            Err("operands could not be broadcast together with shapes (10,2) (8,)".to_string())
        );
        assert!(broadcast(&[&[2], &[], &[3]]).is_err());
        assert_eq!(kind(&[], &[3]), Kind::Zero);
        assert_eq!(kind(&[3], &[3]), Kind::Array);
        assert_eq!(kind(&[], &[]), Kind::Array);
    }

    #[test]
    fn slices_with_steps_follow_numpy() {
        // Checked against Python's slice(start, stop, step).indices(n) and len(range(...)).
        let s = |a, b, c, n| slice_indices(a, b, c, n).unwrap();
        assert_eq!(s(None, None, Some(-1), 5), (4, -1, 5));
        assert_eq!(s(None, None, Some(2), 5), (0, 2, 3));
        assert_eq!(s(Some(-1), None, Some(-2), 6), (5, -2, 3));
        assert_eq!(s(Some(3), Some(0), Some(-1), 6), (3, -1, 3));
        assert_eq!(s(Some(10), None, Some(-3), 6), (5, -3, 2));
        assert_eq!(s(Some(1), Some(1), Some(1), 6), (0, 1, 0));
        assert_eq!(s(None, None, Some(-1), 0), (0, -1, 0));
        assert_eq!(s(Some(-20), Some(-10), Some(-1), 6), (0, -1, 0));
        assert!(slice_indices(None, None, Some(0), 3).is_err());
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
