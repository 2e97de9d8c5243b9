//! The operations of the `numeric` interface: each checks its arguments, creates its output
//! and submits its tasks.
//!
//! Conventions every operation keeps:
//! - error messages start with the operation's name (`"add: shapes [3, 4] and [4] do not
//!   match"`); the host adds the plugin's;
//! - everything is checked before the first task is submitted;
//! - a task's launch is `Launch::preferred` of its output's shape, and every argument of the
//!   output's shape is partitioned with that launch's tiling, so that element-wise tasks over
//!   arrays of one shape line up and can fuse;
//! - a 0-d array used with an n-d output is passed whole (partition none) and loaded at `[]`;
//! - scalar values travel as task scalars, never in kernel keys.

pub mod creation;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod reductions;
pub mod sorting;
pub mod views;

use std::fmt::Display;

use weft_sdk::ir::{DType, Scalar};
use weft_sdk::{Error, Launch, Partition, Privilege, Store, Task, host};

use crate::keys::{Key, Kind, MAX_RANK};
use crate::scalars;

/// An error of operation `op`: `"{op}: {message}"`.
pub fn fail(op: &str, message: impl Display) -> Error {
    weft_sdk::error(format!("{op}: {message}"))
}

/// Turns an error the host returned during operation `op` into one of `op`.
fn host_error(op: &str) -> impl FnOnce(Error) -> Error + '_ {
    move |e| fail(op, e.message)
}

/// An array argument, with its shape and dtype read once from the host.
pub struct Array<'a> {
    /// The store.
    pub store: &'a Store,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its element type.
    pub dtype: DType,
}

impl<'a> Array<'a> {
    /// Reads `store`'s shape and dtype.
    pub fn new(store: &'a Store) -> Array<'a> {
        Array {
            store,
            shape: store.shape(),
            dtype: weft_sdk::ir_dtype(store.dtype()),
        }
    }
}

/// An operand of an element-wise operation: an array or a scalar.
pub enum Arg<'a> {
    /// An array.
    Array(Array<'a>),
    /// A scalar, converted to the operation's dtype when it is used.
    Scalar(Scalar),
}

impl<'a> Arg<'a> {
    /// The array, if the operand is one.
    pub fn array(&self) -> Option<&Array<'a>> {
        match self {
            Arg::Array(a) => Some(a),
            Arg::Scalar(_) => None,
        }
    }

    /// How the operand reaches an element-wise kernel whose output has shape `out`, with a
    /// scalar converted to `dtype`.
    pub fn input(&self, out: &[u64], dtype: DType) -> Input<'a> {
        match self {
            Arg::Array(a) => Input::Store(a.store, crate::shapes::kind(&a.shape, out)),
            Arg::Scalar(s) => Input::Scalar(scalars::convert(*s, dtype)),
        }
    }
}

/// An input of an element-wise task (see [`submit_map`]).
#[derive(Clone, Copy)]
pub enum Input<'a> {
    /// A store, tiled like the output ([`Kind::Array`]) or whole ([`Kind::Zero`]).
    Store(&'a Store, Kind),
    /// A scalar, already of the kernel's dtype.
    Scalar(Scalar),
}

impl Input<'_> {
    /// The input's kind, as its kernel key records it.
    pub fn kind(&self) -> Kind {
        match self {
            Input::Store(_, kind) => *kind,
            Input::Scalar(_) => Kind::Scalar,
        }
    }
}

/// The rank of an array of `shape`, if a kernel can take it.
pub fn rank(op: &str, shape: &[u64]) -> Result<u32, Error> {
    u32::try_from(shape.len())
        .ok()
        .filter(|&r| r <= MAX_RANK)
        .ok_or_else(|| {
            fail(
                op,
                format!("rank {} is more than the maximum {MAX_RANK}", shape.len()),
            )
        })
}

/// A new store of this shape and dtype, for operation `op`.
pub fn create(op: &str, shape: &[u64], dtype: DType) -> Result<Store, Error> {
    rank(op, shape)?;
    host::create_store(shape, weft_sdk::wit_dtype(dtype)).map_err(host_error(op))
}

/// The partition of an array whose leading dimensions follow `launch`'s tiling and whose
/// trailing ones (of extents `whole`) each point reads in full: a row reduction's or a
/// scan's input.
pub fn whole_trailing(launch: &Launch, whole: impl IntoIterator<Item = u64>) -> Partition {
    let mut tiling = launch.tiling.clone();
    for n in whole {
        tiling.tile.push(n);
        tiling.offset.push(0);
        tiling.projection.push(None);
    }
    Partition::Tiling(tiling)
}

/// The partition of an array argument of this kind under `launch`.
pub fn partition(launch: &Launch, kind: Kind) -> Partition {
    match kind {
        Kind::Array => launch.tiled(),
        Kind::Zero | Kind::Scalar => Partition::None,
    }
}

/// Submits the task of an element-wise kernel (`fill`, `copy`, `cast`, `binary`, `unary`,
/// `select`): the store inputs in order (read), then `out` (write, tiled), then the scalar
/// inputs, launched over `out`'s shape.
pub fn submit_map<'a>(
    op: &str,
    key: &Key,
    out: &'a Store,
    shape: &[u64],
    inputs: &[Input<'a>],
) -> Result<(), Error> {
    let launch = Launch::preferred(shape);
    let mut task = Task::new(key.to_string(), &launch);
    for input in inputs {
        if let Input::Store(store, kind) = *input {
            task = task.arg(store, partition(&launch, kind), Privilege::Read);
        }
    }
    task = task.arg(out, launch.tiled(), Privilege::Write);
    for input in inputs {
        if let Input::Scalar(s) = *input {
            task = task.scalar(weft_sdk::wit_scalar(s));
        }
    }
    task.submit().map_err(host_error(op))
}

/// Fills `out` (of `shape` and `dtype`) with `value` converted to `dtype`.
pub fn fill(
    op: &str,
    out: &Store,
    shape: &[u64],
    dtype: DType,
    value: Scalar,
) -> Result<(), Error> {
    let key = Key::Fill {
        dtype,
        rank: rank(op, shape)?,
    };
    let value = scalars::convert(value, dtype);
    submit_map(op, &key, out, shape, &[Input::Scalar(value)])
}

/// Checks that arrays `a` and `b` of operation `op` have one dtype.
pub fn same_dtype(op: &str, a: &Array<'_>, b: &Array<'_>) -> Result<DType, Error> {
    if a.dtype == b.dtype {
        Ok(a.dtype)
    } else {
        Err(fail(
            op,
            format!("dtype mismatch {} and {}", a.dtype, b.dtype),
        ))
    }
}
