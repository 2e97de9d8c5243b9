//! Sorting along the last axis of a 2-d array, as tasks: a stable bottom-up merge sort
//! (`kernels::merge_pass`), one task per doubling of the sorted runs' width, `ceil(log2 n)`
//! tasks for rows of `n`. Each task merges every pair of runs of every row; its points each
//! write one chunk of the output, so the last passes (a few long runs) split across threads
//! as the first ones (many short runs) do.

use weft_sdk::ir::DType;
use weft_sdk::{Error, Launch, Partition, Privilege, Scalar as WitScalar, Store, Task};

use super::creation::arange;
use super::elementwise::copy;
use super::views::broadcast_to;
use super::{Array, create, fail, host_error};
use crate::keys::Key;

/// The most outputs a point of a pass merges: a chunk of a pair of runs longer than this
/// starts at a point that it finds by halving the merge path.
const CHUNK: u64 = 4096;

/// Each row of the 2-d `a` sorted in NumPy's order (NaN last), or, when `indices`, the
/// positions (`i64`) that sort it, stably (NumPy's `argsort(kind="stable")`).
pub fn sort_rows(a: &Array<'_>, indices: bool) -> Result<Store, Error> {
    let op = if indices { "argsort" } else { "sort" };
    let &[rows, n] = a.shape.as_slice() else {
        return Err(fail(
            op,
            format!(
                "sorts the rows of a 2-d array, not of shape {}",
                crate::shapes::tuple(&a.shape)
            ),
        ));
    };
    let shape = [rows, n];
    let positions = if indices {
        let line = arange(0.0, n as f64, 1.0, DType::I64)?;
        Some(broadcast_to(&Array::new(&line), &shape)?)
    } else {
        None
    };
    if rows == 0 || n <= 1 {
        return match &positions {
            Some(p) => copy(&Array::new(p)),
            None => copy(a),
        };
    }
    let keys = [create(op, &shape, a.dtype)?, create(op, &shape, a.dtype)?];
    let moved = if indices {
        Some([
            create(op, &shape, DType::I64)?,
            create(op, &shape, DType::I64)?,
        ])
    } else {
        None
    };
    // A launch domain of one element (not the empty domain of `Launch::single`, whose tasks
    // fuse with any other one-point task): the fuser then applies its dependence rules, and a
    // pass, which reads through a strided view what the pass before wrote whole, runs as a
    // task of its own. Fused, the passes of a million elements made one kernel of 20 loops,
    // compiled for 45 ms on the first sort of each size (94.6 ms for a sort and an argsort,
    // against 7.2 ms unfused), and ran no faster.
    let one_point = Launch {
        domain: vec![1],
        tiling: Launch::single().tiling,
    };
    let mut from: (&Store, Option<&Store>) = (a.store, positions.as_ref());
    let mut width = 1u64;
    let mut pass = 0usize;
    while width < n {
        let to = (&keys[pass % 2], moved.as_ref().map(|m| &m[pass % 2]));
        let pair = width.saturating_mul(2);
        let chunk = pair.min(CHUNK);
        let chunks = n.div_ceil(chunk);
        // Halvings of the merge path: enough for a run of `width` (none when a chunk is a
        // whole pair, which starts at the pair's start).
        let steps = if chunk == pair {
            0
        } else {
            i64::from(u64::BITS - width.leading_zeros()) + 1
        };
        let view = from
            .0
            .strided(&[0, 0], &[1, chunk as i64], &[rows, chunks])
            .map_err(host_error(op))?;
        let swap = chunks >= rows;
        let domain = if swap {
            view.permute(&[1, 0]).map_err(host_error(op))?
        } else {
            view
        };
        let key = Key::MergePass {
            dtype: a.dtype,
            indices,
        };
        let mut task = Task::new(key.to_string(), &one_point)
            .arg(&domain, Partition::None, Privilege::Read)
            .arg(from.0, Partition::None, Privilege::Read)
            .arg(to.0, Partition::None, Privilege::Write);
        if let (Some(f), Some(t)) = (from.1, to.1) {
            task = task.arg(f, Partition::None, Privilege::Read).arg(
                t,
                Partition::None,
                Privilege::Write,
            );
        }
        task.scalar(WitScalar::I64(width as i64))
            .scalar(WitScalar::I64(chunk as i64))
            .scalar(WitScalar::I64(steps))
            .scalar(WitScalar::I64(i64::from(swap)))
            .submit()
            .map_err(host_error(op))?;
        from = to;
        width = pair;
        pass += 1;
    }
    let last = (pass + 1) % 2;
    let [k0, k1] = keys;
    let sorted = if last == 0 { k0 } else { k1 };
    Ok(match moved {
        Some([m0, m1]) => {
            if last == 0 {
                m0
            } else {
                m1
            }
        }
        None => sorted,
    })
}
