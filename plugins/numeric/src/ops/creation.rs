//! Creating arrays: `full`, `zeros`, `ones`, `arange`, `linspace`, `random-uniform` and
//! `from-f64s`.

use weft_sdk::ir::{DType, Scalar};
use weft_sdk::{Error, Launch, Privilege, Scalar as WitScalar, Store, Task, host};

use super::{create, fail, fill, host_error, rank};
use crate::catalog;
use crate::keys::Key;
use crate::{scalars, shapes};

/// An array of `shape` and `dtype` filled with `value` (converted to `dtype`), for operation
/// `op` (`full`, `zeros` or `ones`).
pub fn full(op: &str, shape: &[u64], value: Scalar, dtype: DType) -> Result<Store, Error> {
    let out = create(op, shape, dtype)?;
    fill(op, &out, shape, dtype, value)?;
    Ok(out)
}

/// `start, start + step, ...` below `stop` (above it for a negative step): NumPy's `arange`,
/// of length `ceil((stop - start) / step)`.
pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Store, Error> {
    let op = "arange";
    catalog::ARANGE_RULE
        .check(op, dtype)
        .map_err(weft_sdk::error)?;
    let n = shapes::arange_len(start, stop, step).map_err(|m| fail(op, m))?;
    let out = create(op, &[n], dtype)?;
    let launch = Launch::preferred(&[n]);
    Task::new(Key::Arange { dtype }.to_string(), &launch)
        .arg(&out, launch.tiled(), Privilege::Write)
        .scalar(WitScalar::F64(start))
        .scalar(WitScalar::F64(step))
        .submit()
        .map_err(host_error(op))?;
    Ok(out)
}

/// `num` evenly spaced values from `start` to `stop` inclusive (NumPy's `linspace`: element
/// `i` is `start + i * step`, the last is exactly `stop`, and one element is `[start]`).
pub fn linspace(start: f64, stop: f64, num: u64, dtype: DType) -> Result<Store, Error> {
    let op = "linspace";
    let last = i64::try_from(num.saturating_sub(1))
        .map_err(|_| fail(op, format!("{num} elements are too many")))?;
    let (step, end) = if num > 1 {
        ((stop - start) / last as f64, stop)
    } else {
        (0.0, start)
    };
    let out = create(op, &[num], dtype)?;
    let launch = Launch::preferred(&[num]);
    Task::new(Key::Linspace { dtype }.to_string(), &launch)
        .arg(&out, launch.tiled(), Privilege::Write)
        .scalar(WitScalar::F64(start))
        .scalar(WitScalar::F64(step))
        .scalar(WitScalar::F64(end))
        .scalar(WitScalar::I64(last))
        .submit()
        .map_err(host_error(op))?;
    Ok(out)
}

/// Uniform random numbers in `[low, high)` from the counter-based generator of
/// [`crate::rng`], keyed by `seed` and each element's global linear index.
pub fn random_uniform(
    shape: &[u64],
    low: f64,
    high: f64,
    seed: u64,
    dtype: DType,
) -> Result<Store, Error> {
    let op = "random-uniform";
    catalog::RANDOM_RULE
        .check(op, dtype)
        .map_err(weft_sdk::error)?;
    let strides = shapes::strides(shape).ok_or_else(|| {
        fail(
            op,
            format!("shape {} has too many elements", shapes::show(shape)),
        )
    })?;
    let key = Key::Random {
        dtype,
        rank: rank(op, shape)?,
    };
    let out = create(op, shape, dtype)?;
    let launch = Launch::preferred(shape);
    let mut task = Task::new(key.to_string(), &launch)
        .arg(&out, launch.tiled(), Privilege::Write)
        .scalar(WitScalar::I64(seed as i64))
        .scalar(WitScalar::F64(low))
        .scalar(WitScalar::F64(high));
    for stride in strides {
        task = task.scalar(WitScalar::I64(stride));
    }
    task.submit().map_err(host_error(op))?;
    Ok(out)
}

/// An array of `shape` holding `values` (row-major) converted to `dtype`.
pub fn from_f64s(shape: &[u64], values: &[f64], dtype: DType) -> Result<Store, Error> {
    let op = "from-f64s";
    rank(op, shape)?;
    if shapes::volume(shape) != Some(values.len() as u64) {
        return Err(fail(
            op,
            format!(
                "{} values for shape {} ({} elements)",
                values.len(),
                shapes::show(shape),
                shapes::volume(shape).map_or("too many".to_string(), |n| n.to_string())
            ),
        ));
    }
    let bytes = scalars::to_le_bytes(values, dtype);
    host::store_from_bytes(shape, weft_sdk::wit_dtype(dtype), &bytes).map_err(host_error(op))
}
