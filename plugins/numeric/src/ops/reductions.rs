//! Reductions to 0-d arrays: `reduce`, `dot` and `norm`.
//!
//! Each fills its 0-d output with the operator's identity, then reduces into it from a task
//! over the input's tiling, the output passed whole with privilege `reduce(op)`.

use weft_sdk::ir::{DType, ReduceOp};
use weft_sdk::{Error, Launch, Partition, Privilege, Store, Task};

use super::{Array, fail, host_error, rank, same_dtype};
use crate::catalog;
use crate::keys::Key;
use crate::shapes;

/// The reduction of every element of `a` with `op`, as a 0-d array of `a`'s dtype.
pub fn reduce(op: ReduceOp, a: &Array<'_>) -> Result<Store, Error> {
    let name = op.name();
    catalog::reduce_rule(op)
        .check(name, a.dtype)
        .map_err(weft_sdk::error)?;
    let key = Key::Reduce {
        op,
        dtype: a.dtype,
        rank: rank(name, &a.shape)?,
    };
    let out = zero_d(name, a.dtype, op)?;
    let launch = Launch::preferred(&a.shape);
    Task::new(key.to_string(), &launch)
        .arg(a.store, launch.tiled(), Privilege::Read)
        .arg(&out, Partition::None, reduce_privilege(op))
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// The dot product of two 1-d float arrays of one length and dtype, as a 0-d array.
pub fn dot(a: &Array<'_>, b: &Array<'_>) -> Result<Store, Error> {
    let name = "dot";
    if a.shape.len() != 1 || b.shape.len() != 1 {
        return Err(fail(
            name,
            format!(
                "needs two 1-d arrays, got shapes {} and {}",
                shapes::show(&a.shape),
                shapes::show(&b.shape)
            ),
        ));
    }
    if a.shape != b.shape {
        return Err(fail(
            name,
            format!(
                "shapes {} and {} do not match",
                shapes::show(&a.shape),
                shapes::show(&b.shape)
            ),
        ));
    }
    let dtype = same_dtype(name, a, b)?;
    catalog::LINALG_RULE
        .check(name, dtype)
        .map_err(weft_sdk::error)?;
    let out = zero_d(name, dtype, ReduceOp::Sum)?;
    let launch = Launch::preferred(&a.shape);
    Task::new(Key::Dot { dtype }.to_string(), &launch)
        .arg(a.store, launch.tiled(), Privilege::Read)
        .arg(b.store, launch.tiled(), Privilege::Read)
        .arg(&out, Partition::None, reduce_privilege(ReduceOp::Sum))
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// The 2-norm of all elements of a float array, `sqrt(sum(a * a))`, as a 0-d array.
pub fn norm(a: &Array<'_>) -> Result<Store, Error> {
    let name = "norm";
    catalog::LINALG_RULE
        .check(name, a.dtype)
        .map_err(weft_sdk::error)?;
    let key = Key::SumSquares {
        dtype: a.dtype,
        rank: rank(name, &a.shape)?,
    };
    let out = zero_d(name, a.dtype, ReduceOp::Sum)?;
    let launch = Launch::preferred(&a.shape);
    Task::new(key.to_string(), &launch)
        .arg(a.store, launch.tiled(), Privilege::Read)
        .arg(&out, Partition::None, reduce_privilege(ReduceOp::Sum))
        .submit()
        .map_err(host_error(name))?;
    let single = Launch::preferred(&[]);
    Task::new(Key::SqrtInPlace { dtype: a.dtype }.to_string(), &single)
        .arg(&out, single.tiled(), Privilege::ReadWrite)
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// A new 0-d array of `dtype` holding the identity of `op`.
///
/// The identity is written by the host when it creates the store, not by a fill task: the
/// reduction task is then the store's only writer, and fuses with the tasks before it (a fill
/// and a reduction into one store may not share a fused task).
fn zero_d(name: &str, dtype: DType, op: ReduceOp) -> Result<Store, Error> {
    let bits = op.identity(dtype).to_bits().to_le_bytes();
    let bytes = bits.get(..dtype.size()).unwrap_or(&bits);
    weft_sdk::host::store_from_bytes(&[], weft_sdk::wit_dtype(dtype), bytes)
        .map_err(host_error(name))
}

/// The WIT privilege `reduce(op)`.
fn reduce_privilege(op: ReduceOp) -> Privilege {
    Privilege::Reduce(weft_sdk::wit_reduce_op(op))
}
