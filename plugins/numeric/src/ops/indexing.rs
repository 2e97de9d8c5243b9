//! Integer-array indexing: `take`, the running sum `cumsum` (both read along one axis at
//! positions that are not the launch's own point), and `flatnonzero`, the positions of the
//! nonzero elements (which `a[mask]` and `nonzero` build on).

use weft_sdk::ir::{DType, ReduceOp, Scalar};
use weft_sdk::{Error, Launch, Partition, Privilege, Scalar as WitScalar, Store, Task, host};

use super::elementwise::{astype, binary};
use super::reductions::reduce;
use super::views::reshape;
use super::{Arg, Array, create, fail, host_error, rank, whole_trailing};
use crate::catalog::BinOp;
use crate::keys::Key;

/// The elements of the chunks that `flatnonzero` counts apart, so that its walk skips the
/// chunks with no true element: a ring of 4,000 points in a mask of 4M (NPBench's
/// `azimint_naive`) lies in a few thousand chunks of 64.
const NONZERO_CHUNK: u64 = 64;

/// The positions (`i64`) of the nonzero elements of the flattened `a`, in order (NumPy's
/// `flatnonzero`). All on the back end but one number: a task counts `a != 0` (a sum, in
/// parallel), the count is read (the result's shape needs it), a task counts each chunk of
/// [`NONZERO_CHUNK`] elements (in parallel), and a one-point task walks the chunks that hold
/// any, writing each nonzero element's position at the running count. Nothing of
/// the size of `a` crosses to the plugin or the application.
///
/// The walk writes every element: a position where the mask is false goes to one slot past
/// the result, so its store holds `count + 1` elements and the result is a view of the
/// first `count`. (A binary search in a running sum, launched over the result, kept every
/// point independent but took 12 ms for 200,000 positions of 400,000: its probes form a
/// chain of dependent loads.)
pub fn flatnonzero(a: &Array<'_>) -> Result<Store, Error> {
    let op = "flatnonzero";
    let flat = reshape(a, &[-1])?;
    let flat = Array::new(&flat);
    let truth;
    let mask: &Store = if flat.dtype == DType::Bool {
        flat.store
    } else {
        let arg = Arg::Array(Array::new(flat.store));
        truth = binary(BinOp::NotEqual, arg, Arg::Scalar(Scalar::I64(0)))?;
        &truth
    };
    let counted = astype(&Array::new(mask), DType::I64)?;
    let total = reduce(ReduceOp::Sum, &Array::new(&counted))?;
    let bytes = host::read_bytes(&total).map_err(host_error(op))?;
    let n = flat.shape.first().copied().unwrap_or(0);
    let count = bytes
        .as_chunks::<8>()
        .0
        .first()
        .map(|&w| i64::from_le_bytes(w))
        .and_then(|c| u64::try_from(c).ok())
        .filter(|&c| c <= n)
        .ok_or_else(|| fail(op, "the sum of the mask is not a count"))?;
    let full = create(op, &[count + 1], DType::I64)?;
    if count > 0 {
        // Each chunk's count, on every thread; then one point walks the chunks that hold any.
        let chunks = n.div_ceil(NONZERO_CHUNK);
        let counts = create(op, &[chunks], DType::I64)?;
        let chunk = WitScalar::I64(NONZERO_CHUNK as i64);
        let launch = Launch::preferred(&[chunks]);
        Task::new(Key::ChunkCounts.to_string(), &launch)
            .arg(mask, Partition::None, Privilege::Read)
            .arg(&counts, launch.tiled(), Privilege::Write)
            .scalar(chunk)
            .submit()
            .map_err(host_error(op))?;
        Task::new(Key::FlatNonzero.to_string(), &Launch::single())
            .arg(&total, Partition::None, Privilege::Read)
            .arg(mask, Partition::None, Privilege::Read)
            .arg(&counts, Partition::None, Privilege::Read)
            .arg(&full, Partition::None, Privilege::Write)
            .scalar(chunk)
            .submit()
            .map_err(host_error(op))?;
    }
    full.slice(&[0], &[count]).map_err(host_error(op))
}

/// For each `j` in order, `target[positions[j]] = values[j]` (or `+=` when `accumulate`):
/// one point walks the positions (see `kernels::scatter`), so a repeated position keeps the
/// last value or adds every value in order, as NumPy does. `positions` are made `i64` and
/// `values` the target's dtype where they are not.
pub fn scatter(
    target: &Array<'_>,
    positions: &Array<'_>,
    values: &Array<'_>,
    accumulate: bool,
) -> Result<(), Error> {
    let op = if accumulate { "add-at" } else { "scatter" };
    if target.shape.len() != 1 || positions.shape.len() != 1 {
        return Err(fail(
            op,
            format!(
                "the target and the positions are 1-d (flattened), not of shapes {} and {}",
                crate::shapes::tuple(&target.shape),
                crate::shapes::tuple(&positions.shape)
            ),
        ));
    }
    if values.shape != positions.shape {
        return Err(fail(
            op,
            format!(
                "{} values for {} positions",
                crate::shapes::tuple(&values.shape),
                crate::shapes::tuple(&positions.shape)
            ),
        ));
    }
    if !matches!(positions.dtype, DType::I64 | DType::I32) {
        return Err(fail(op, "arrays used as indices must be of integer type"));
    }
    if accumulate && target.dtype == DType::Bool {
        return Err(fail(
            op,
            "adding at positions of a bool array is not supported",
        ));
    }
    if positions.shape[0] == 0 {
        return Ok(());
    }
    let cast_positions;
    let positions = if positions.dtype == DType::I64 {
        positions.store
    } else {
        cast_positions = astype(positions, DType::I64)?;
        &cast_positions
    };
    let cast_values;
    let values = if values.dtype == target.dtype {
        values.store
    } else {
        cast_values = astype(values, target.dtype)?;
        &cast_values
    };
    // The launch's one point: a 0-d view of the first position.
    let first = positions.slice(&[0], &[1]).map_err(host_error(op))?;
    let domain = reshape(&Array::new(&first), &[])?;
    let key = Key::Scatter {
        dtype: target.dtype,
        accumulate,
    };
    Task::new(key.to_string(), &Launch::single())
        .arg(&domain, Partition::None, Privilege::Read)
        .arg(positions, Partition::None, Privilege::Read)
        .arg(values, Partition::None, Privilege::Read)
        .arg(target.store, Partition::None, Privilege::ReadWrite)
        .submit()
        .map_err(host_error(op))
}

/// `axis` of a rank-`rank` array as an index (negative counts from the end), or NumPy's error.
fn axis_index(op: &str, axis: i64, rank: usize) -> Result<usize, Error> {
    let d = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(d)
        .ok()
        .filter(|&d| d < rank)
        .ok_or_else(|| {
            fail(
                op,
                format!("axis {axis} is out of bounds for array of dimension {rank}"),
            )
        })
}

/// `a` flattened when `axis` is `None` (a view where the layout allows, else a copy), with
/// the axis to work along.
fn along(op: &str, a: &Array<'_>, axis: Option<i64>) -> Result<(Store, usize), Error> {
    match axis {
        None => Ok((reshape(a, &[-1])?, 0)),
        Some(axis) => {
            let d = axis_index(op, axis, a.shape.len())?;
            let view = a
                .store
                .permute(&(0..a.shape.len() as u32).collect::<Vec<_>>());
            Ok((view.map_err(host_error(op))?, d))
        }
    }
}

/// The elements of `a` at the positions `indices` along `axis` (`None`: of the flattened
/// array), as NumPy's `take`: the result's shape is `a`'s with that dimension replaced by
/// `indices`' shape. Negative positions count from the end; a position out of range is an
/// error when the task runs (every load is checked), and nothing is read out of bounds.
pub fn take(a: &Array<'_>, indices: &Array<'_>, axis: Option<i64>) -> Result<Store, Error> {
    let op = "take";
    if !matches!(indices.dtype, DType::I32 | DType::I64) {
        return Err(fail(
            op,
            format!(
                "arrays used as indices must be of integer type, not {}",
                indices.dtype
            ),
        ));
    }
    let (source, d) = along(op, a, axis)?;
    let source = Array::new(&source);
    if source.shape.is_empty() {
        return Err(fail(op, "cannot take from a 0-d array"));
    }
    let flat_idx = reshape(indices, &[-1])?;
    let count: u64 = indices.shape.iter().product();
    if source.shape[d] == 0 && count > 0 {
        return Err(fail(op, "cannot do a non-empty take from an empty axes."));
    }
    let mut gathered_shape = source.shape.clone();
    gathered_shape[d] = count;
    let out = create(op, &gathered_shape, a.dtype)?;
    if count > 0 && gathered_shape.iter().all(|&e| e > 0) {
        let launch = Launch::preferred(&gathered_shape);
        let key = Key::Take {
            dtype: a.dtype,
            index: indices.dtype,
            rank: rank(op, &gathered_shape)?,
            axis: d as u32,
        };
        Task::new(key.to_string(), &launch)
            .arg(source.store, Partition::None, Privilege::Read)
            .arg(&flat_idx, Partition::None, Privilege::Read)
            .arg(&out, launch.tiled(), Privilege::Write)
            .submit()
            .map_err(host_error(op))?;
    }
    // The positions' dimensions stand where `axis` was.
    let mut shape: Vec<i64> = source.shape[..d].iter().map(|&e| e as i64).collect();
    shape.extend(indices.shape.iter().map(|&e| e as i64));
    shape.extend(source.shape[d + 1..].iter().map(|&e| e as i64));
    reshape(&Array::new(&out), &shape)
}

/// The first position of the least (`Min`) or greatest (`Max`) element along `axis` (`None`:
/// of the flattened array), as `i64`, as NumPy's `argmin` and `argmax`: the first one on
/// ties, and the first NaN where there is one. One task over the other dimensions; each point
/// scans its line once, in order (a vector is one line, scanned by one thread).
pub fn arg_reduce(op: ReduceOp, a: &Array<'_>, axis: Option<i64>) -> Result<Store, Error> {
    let name = match op {
        ReduceOp::Min => "argmin",
        ReduceOp::Max => "argmax",
        other => {
            return Err(fail(
                "arg-reduce",
                format!("a position is of a min or a max, not of a {}", other.name()),
            ));
        }
    };
    let (source, d) = along(name, a, axis)?;
    let source = Array::new(&source);
    let shape = source.shape.clone();
    let n = shape.get(d).copied().unwrap_or(1);
    if n == 0 {
        return Err(fail(
            name,
            format!("attempt to get {name} of an empty sequence"),
        ));
    }
    let kept: Vec<u64> = (0..shape.len())
        .filter(|&k| k != d)
        .map(|k| shape[k])
        .collect();
    let out = create(name, &kept, DType::I64)?;
    if kept.contains(&0) {
        return Ok(out);
    }
    // The scanned dimension last; a vector becomes a single line.
    let order: Vec<u32> = (0..shape.len())
        .filter(|&k| k != d)
        .chain([d])
        .map(|k| k as u32)
        .collect();
    let moved = source.store.permute(&order).map_err(host_error(name))?;
    let one_line = |s: &Store, to: &[u64]| -> Result<Store, Error> {
        s.reshape(to)
            .map_err(host_error(name))?
            .ok_or_else(|| fail(name, "the host could not add an axis of extent 1"))
    };
    let (src, dst) = if kept.is_empty() {
        (one_line(&moved, &[1, n])?, one_line(&out, &[1])?)
    } else {
        (moved, one_line(&out, &kept)?)
    };
    let lines = dst.shape();
    let launch = Launch::preferred(&lines);
    let key = Key::ArgRows {
        op,
        dtype: a.dtype,
        kept: rank(name, &lines)?,
    };
    Task::new(key.to_string(), &launch)
        .arg(&src, whole_trailing(&launch, [n]), Privilege::Read)
        .arg(&dst, launch.tiled(), Privilege::Write)
        .submit()
        .map_err(host_error(name))?;
    Ok(out)
}

/// The running sum along `axis` (`None`: of the flattened array), as NumPy's `cumsum`: bool
/// and `i32` arrays sum as `i64`, as NumPy's default integer. One task over the other
/// dimensions; each point sums its line in order.
pub fn cumsum(a: &Array<'_>, axis: Option<i64>) -> Result<Store, Error> {
    let op = "cumsum";
    let dtype = match a.dtype {
        DType::Bool | DType::I32 => DType::I64,
        d => d,
    };
    let widened;
    let a = if dtype == a.dtype {
        a
    } else {
        widened = astype(a, dtype)?;
        &Array::new(&widened)
    };
    let (source, d) = along(op, a, axis)?;
    let source = Array::new(&source);
    let shape = source.shape.clone();
    let out = create(op, &shape, dtype)?;
    if shape.is_empty() || shape.contains(&0) {
        return Ok(out);
    }
    // The summed dimension last; a vector becomes a single row.
    let r = shape.len();
    let order: Vec<u32> = (0..r)
        .filter(|&k| k != d)
        .chain([d])
        .map(|k| k as u32)
        .collect();
    let line = |s: &Store| -> Result<Store, Error> {
        let moved = s.permute(&order).map_err(host_error(op))?;
        if r > 1 {
            return Ok(moved);
        }
        moved
            .reshape(&[1, shape[0]])
            .map_err(host_error(op))?
            .ok_or_else(|| fail(op, "the host could not add an axis of extent 1"))
    };
    let (src, dst) = (line(source.store)?, line(&out)?);
    let lines = src.shape();
    let kept = &lines[..lines.len() - 1];
    let n = lines[lines.len() - 1];
    // The launch's domain: `src[..., 0]`, a view tiled like the launch.
    let first = src
        .strided(
            &vec![0; lines.len()],
            &vec![1; lines.len()],
            &[kept, &[1]].concat(),
        )
        .map_err(host_error(op))?
        .reshape(kept)
        .map_err(host_error(op))?
        .ok_or_else(|| fail(op, "the host could not drop an axis of extent 1"))?;
    let launch = Launch::preferred(kept);
    let key = Key::Cumsum {
        dtype,
        kept: rank(op, kept)?,
    };
    Task::new(key.to_string(), &launch)
        .arg(&first, launch.tiled(), Privilege::Read)
        .arg(&src, whole_trailing(&launch, [n]), Privilege::Read)
        .arg(&dst, whole_trailing(&launch, [n]), Privilege::Write)
        .submit()
        .map_err(host_error(op))?;
    Ok(out)
}
