//! Views: `slice`.

use weft_sdk::{Error, Store};

use super::{Array, fail, host_error};
use crate::shapes;

/// The view `a[r0, r1, ...]` with NumPy's bounds (see [`shapes::slice_bounds`]); dimensions
/// without a range are taken whole. The view shares `a`'s storage.
pub fn slice(a: &Array<'_>, ranges: &[(Option<i64>, Option<i64>)]) -> Result<Store, Error> {
    let op = "slice";
    if ranges.len() > a.shape.len() {
        return Err(fail(
            op,
            format!(
                "{} ranges for an array of shape {} (rank {})",
                ranges.len(),
                shapes::show(&a.shape),
                a.shape.len()
            ),
        ));
    }
    let whole = std::iter::repeat((None, None));
    let (start, stop): (Vec<u64>, Vec<u64>) = a
        .shape
        .iter()
        .zip(ranges.iter().copied().chain(whole))
        .map(|(&extent, (lo, hi))| shapes::slice_bounds(lo, hi, extent))
        .unzip();
    a.store.slice(&start, &stop).map_err(host_error(op))
}
