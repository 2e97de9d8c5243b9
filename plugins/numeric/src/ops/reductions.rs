//! Reductions: to 0-d arrays (`reduce`, `dot` and `norm`) and over axes (`reduce_axes`).
//!
//! Each reduction to a 0-d array fills its output with the operator's identity, then
//! reduces into it from a task over the input's tiling, the output passed whole with
//! privilege `reduce(op)`; [`reduce_axes`] says how reductions over axes are planned.

use weft_sdk::ir::{DType, ReduceOp};
use weft_sdk::{Error, Launch, Partition, Privilege, Store, Task};

use super::{Array, fail, host_error, rank, same_dtype, whole_trailing};
use crate::catalog;
use crate::keys::Key;
use crate::shapes;

/// The reduction of every element of `a` with `op`, as a 0-d array of `a`'s dtype. A vector
/// of at most [`SMALL_DOT`] elements reduced exactly in any order (not a float sum or
/// product) is folded on one point, written into the result, so that the scalar steps that
/// use it fuse with it (NPBench's `nussinov`: `max(table[i, i+1:j] + table[i+2:j+1, j])`);
/// the result is the same in any order.
pub fn reduce(op: ReduceOp, a: &Array<'_>) -> Result<Store, Error> {
    let name = op.name();
    catalog::reduce_rule(op)
        .check(name, a.dtype)
        .map_err(weft_sdk::error)?;
    let order_free = !(matches!(op, ReduceOp::Sum | ReduceOp::Prod) && a.dtype.is_float());
    if let [len] = a.shape[..]
        && len <= SMALL_DOT
        && order_free
    {
        let out = super::create(name, &[], a.dtype)?;
        let single = Launch::single();
        let key = Key::ReduceRows {
            op,
            dtype: a.dtype,
            kept: 0,
            reduced: 1,
        };
        Task::new(key.to_string(), &single)
            .arg(a.store, Partition::None, Privilege::Read)
            .arg(&out, Partition::None, Privilege::Write)
            .submit()
            .map_err(host_error(name))?;
        return Ok(out);
    }
    let key = Key::Reduce {
        op,
        dtype: a.dtype,
        rank: rank(name, &a.shape)?,
    };
    let out = zero_d(name, a.dtype, op)?;
    submit_into(name, &key, a, &out, op)?;
    Ok(out)
}

/// Submits the task of `key`, over `a`'s tiling, that reduces with `op` into the whole of
/// `out`.
fn submit_into(
    name: &str,
    key: &Key,
    a: &Array<'_>,
    out: &Store,
    op: ReduceOp,
) -> Result<(), Error> {
    let launch = Launch::preferred(&a.shape);
    Task::new(key.to_string(), &launch)
        .arg(a.store, launch.tiled(), Privilege::Read)
        .arg(out, Partition::None, reduce_privilege(op))
        .submit()
        .map_err(host_error(name))
}

/// The longest vectors whose dot product one point folds in the lane order (a cached
/// 2,500-element dot product and its store took 0.9 us a replayed step so, 2.1 us as the
/// canonical tree, on the CPU back end); longer ones reduce by the canonical tree, on every
/// thread.
pub const SMALL_DOT: u64 = 16 * 1024;

/// The dot product of two 1-d float arrays of one length and dtype, as a 0-d array: for at
/// most [`SMALL_DOT`] elements folded on one point in the lane order, else reduced in the
/// canonical order.
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
    if a.shape[0] <= SMALL_DOT {
        // One point folds the products in the lane order: no reduction, so the tasks that
        // use the result (`a[i, j] -= dot`) fuse with it.
        let out = super::create(name, &[], dtype)?;
        let single = Launch::single();
        Task::new(Key::DotFold { dtype }.to_string(), &single)
            .arg(a.store, Partition::None, Privilege::Read)
            .arg(b.store, Partition::None, Privilege::Read)
            .arg(&out, Partition::None, Privilege::Write)
            .submit()
            .map_err(host_error(name))?;
        return Ok(out);
    }
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
    submit_into(name, &key, a, &out, ReduceOp::Sum)?;
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
    identity_store(name, &[], dtype, op)
}

/// A new array of `shape` and `dtype` holding `op`'s identity in every element, written by
/// the host when it creates the store (so a reduction task is its only writer: see
/// [`zero_d`]). For small results only: the elements cross from the plugin to the host.
pub fn identity_store(
    name: &str,
    shape: &[u64],
    dtype: DType,
    op: ReduceOp,
) -> Result<Store, Error> {
    let bits = op.identity(dtype).to_bits().to_le_bytes();
    let one = bits.get(..dtype.size()).unwrap_or(&bits);
    let count = shapes::volume(shape).ok_or_else(|| fail(name, "the result is too large"))?;
    let bytes: Vec<u8> = (0..count).flat_map(|_| one.iter().copied()).collect();
    weft_sdk::host::store_from_bytes(shape, weft_sdk::wit_dtype(dtype), &bytes)
        .map_err(host_error(name))
}

/// The WIT privilege `reduce(op)`.
fn reduce_privilege(op: ReduceOp) -> Privilege {
    Privilege::Reduce(weft_sdk::wit_reduce_op(op))
}

/// The result elements from which an exact reduction runs one element per point (see
/// [`reduce_axes`]).
const ROWS_ENOUGH: u64 = 64;

/// The most elements of an input that any axis reduction reduces in one task over its result:
/// a few chunks of the CPU back end's parallel loops, whose points (the result's elements)
/// the threads share.
const SMALL_INPUT: u64 = 64 * 1024;

/// The reduction of `a` with `op` over `axes` (negative ones count from the end; `None`: all
/// of them), keeping the reduced dimensions with extent 1 when `keepdims`, as NumPy's
/// `a.sum(axis=..., keepdims=...)`.
///
/// Plans, chosen by shape and operator: when the result has at least as many elements as
/// each of them reduces, or the input at most `SMALL_INPUT` (or, for a reduction exact in
/// any order over trailing dimensions, at least `ROWS_ENOUGH` elements), one task over the
/// result computes each element with a
/// loop over the reduced dimensions (a transposed view puts them last; one dimension in the
/// lane order).
/// Otherwise, a float sum or product is computed as the canonical tree, level by level
/// ([`tree_axes`]), and any other reduction (exact in any order) by one task over `a` that
/// reduces every point's part into the whole (small) result, and fuses with the tasks over
/// `a`.
pub fn reduce_axes(
    op: ReduceOp,
    a: &Array<'_>,
    axes: Option<&[i64]>,
    keepdims: bool,
) -> Result<Store, Error> {
    let name = op.name();
    catalog::reduce_rule(op)
        .check(name, a.dtype)
        .map_err(weft_sdk::error)?;
    let rank_a = a.shape.len();
    let mut reduced = vec![false; rank_a];
    match axes {
        None => reduced.iter_mut().for_each(|r| *r = true),
        Some(axes) => {
            for &axis in axes {
                let d = if axis < 0 { axis + rank_a as i64 } else { axis };
                if d < 0 || d >= rank_a as i64 {
                    return Err(fail(
                        name,
                        format!("axis {axis} is out of bounds for array of dimension {rank_a}"),
                    ));
                }
                if std::mem::replace(&mut reduced[d as usize], true) {
                    return Err(fail(name, format!("duplicate value {axis} in axis")));
                }
            }
        }
    }
    let kept: Vec<usize> = (0..rank_a).filter(|&d| !reduced[d]).collect();
    let gone: Vec<usize> = (0..rank_a).filter(|&d| reduced[d]).collect();
    let kept_shape: Vec<u64> = kept.iter().map(|&d| a.shape[d]).collect();
    let keep_shape: Vec<u64> = (0..rank_a)
        .map(|d| if reduced[d] { 1 } else { a.shape[d] })
        .collect();
    let final_shape = if keepdims { &keep_shape } else { &kept_shape };
    let as_final = |out: Store, shape: &[u64]| -> Result<Store, Error> {
        if shape == final_shape.as_slice() {
            return Ok(out);
        }
        out.reshape(final_shape)
            .map_err(host_error(name))?
            .ok_or_else(|| fail(name, "the host could not add or drop axes of extent 1"))
    };
    if gone.is_empty() {
        return as_final(super::elementwise::copy(a)?, &a.shape);
    }
    if kept.is_empty() {
        return as_final(reduce(op, a)?, &[]);
    }
    let out_volume: u64 = kept_shape.iter().product();
    let reduced_volume: u64 = gone.iter().map(|&d| a.shape[d]).product();
    // Exact reductions (`min`, `max`, integer and `bool` ones) over trailing dimensions give
    // the same bits in any order, so they take the per-element loops whenever there are
    // elements enough to spread over the threads: each point then folds a contiguous run in
    // vectors, where reducing every point into the whole result is scalar code (`max(axis=-1)`
    // of a 1000 x 4000 array: 7.3 ms that way).
    let exact = !(matches!(op, ReduceOp::Sum | ReduceOp::Prod) && a.dtype.is_float());
    let trailing = gone.iter().enumerate().all(|(k, &d)| d == kept.len() + k);
    // A small input takes one task however small its result: every plan gives the same bits
    // on every back end, thread count and piece count, and a few chunks' worth of elements
    // gain nothing from the tree's parallel levels (NPBench's `conv2d` sums `(8, 5, 5, 3, 8)`
    // products over three axes 3,600 times: the tree's levels were four tasks more each).
    let small = out_volume.saturating_mul(reduced_volume) <= SMALL_INPUT;
    if out_volume >= reduced_volume || small || (exact && trailing && out_volume >= ROWS_ENOUGH) {
        // One element per point of the result, the reduced dimensions last.
        let order: Vec<u32> = kept.iter().chain(&gone).map(|&d| d as u32).collect();
        let view = a.store.permute(&order).map_err(host_error(name))?;
        let out = super::create(name, &kept_shape, a.dtype)?;
        let launch = Launch::preferred(&kept_shape);
        let key = Key::ReduceRows {
            op,
            dtype: a.dtype,
            kept: rank(name, &kept_shape)?,
            reduced: gone.len() as u32,
        };
        Task::new(key.to_string(), &launch)
            .arg(
                &view,
                whole_trailing(&launch, gone.iter().map(|&d| a.shape[d])),
                Privilege::Read,
            )
            .arg(&out, launch.tiled(), Privilege::Write)
            .submit()
            .map_err(host_error(name))?;
        return as_final(out, &kept_shape);
    }
    if matches!(op, ReduceOp::Sum | ReduceOp::Prod) && a.dtype.is_float() {
        // Float sums and products follow the canonical order: see `tree_axes`.
        let tree = tree_axes(name, op, a, &gone)?;
        return as_final(tree, &keep_shape);
    }
    // A small result, exact in any order: every point reduces into all of it.
    let out = identity_store(name, &keep_shape, a.dtype, op)?;
    let mask = gone.iter().fold(0u32, |m, &d| m | 1 << d);
    let key = Key::ReduceAxes {
        op,
        dtype: a.dtype,
        rank: rank(name, &a.shape)?,
        mask,
    };
    submit_into(name, &key, a, &out, op)?;
    as_final(out, &keep_shape)
}

/// The float sum or product of `a` over the dimensions `gone` (ascending), in the canonical
/// order of `weft_ir::reduction` (the aligned pairwise tree of each dimension, the innermost
/// first), as an array of `a`'s rank with extent 1 on `gone`, folded into the operator's
/// identity as a reduction into a fresh store is (`identity op tree`).
///
/// Each reduced dimension, innermost first, is brought to the front of a view and reduced by
/// tasks that each compute one level of 16-leaf subtrees (`treeblocks`), until its extent
/// is 1. Every back end computes the same additions in the same order, so the bits depend on
/// no thread count, piece count, SIMD path or rank count. The result's elements are few
/// (this is the plan for results smaller than what each element reduces); the first task
/// reads the input once, each later one a sixteenth of what the one before read.
fn tree_axes(name: &str, op: ReduceOp, a: &Array<'_>, gone: &[usize]) -> Result<Store, Error> {
    let rank_a = a.shape.len();
    let rank_key = rank(name, &a.shape)?;
    let mut cur: Store = super::views::permute(a, &(0..rank_a as u32).collect::<Vec<_>>())?;
    let mut shape = a.shape.clone();
    for &d in gone.iter().rev() {
        // Dimension `d` first, the others in order.
        let order: Vec<u32> = std::iter::once(d as u32)
            .chain((0..rank_a as u32).filter(|&e| e != d as u32))
            .collect();
        let mut front = cur.permute(&order).map_err(host_error(name))?;
        let mut fshape: Vec<u64> = order.iter().map(|&e| shape[e as usize]).collect();
        while fshape[0] > 1 {
            let mut next = fshape.clone();
            next[0] = fshape[0].div_ceil(crate::kernels::TREE_BLOCK);
            let out = super::create(name, &next, a.dtype)?;
            let launch = Launch::preferred(&next);
            // The last level of a short dimension: its 16-leaf tree with the leaves past the
            // end (exact identities) left out, which gives the same bits.
            let leaves = fshape[0]
                .min(crate::kernels::TREE_BLOCK)
                .next_power_of_two();
            let key = Key::TreeBlocks {
                op,
                dtype: a.dtype,
                rank: rank_key,
                leaves: u32::try_from(leaves).unwrap_or(16),
            };
            Task::new(key.to_string(), &launch)
                .arg(&front, Partition::None, Privilege::Read)
                .arg(&out, launch.tiled(), Privilege::Write)
                .submit()
                .map_err(host_error(name))?;
            front = out;
            fshape = next;
        }
        // Back to `a`'s order of dimensions.
        let mut inverse = vec![0u32; rank_a];
        for (pos, &e) in order.iter().enumerate() {
            inverse[e as usize] = pos as u32;
        }
        cur = front.permute(&inverse).map_err(host_error(name))?;
        shape[d] = 1;
    }
    // `identity op tree`, as the reduction into a fresh identity-filled store folds.
    let identity = match op {
        ReduceOp::Prod => weft_sdk::ir::Scalar::F64(1.0),
        _ => weft_sdk::ir::Scalar::F64(0.0),
    };
    let bin = match op {
        ReduceOp::Prod => crate::catalog::BinOp::Mul,
        _ => crate::catalog::BinOp::Add,
    };
    super::elementwise::binary(
        bin,
        super::Arg::Scalar(identity),
        super::Arg::Array(Array::new(&cur)),
    )
}
