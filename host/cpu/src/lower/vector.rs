//! The vector variant of a parallel loop: the loop's innermost dimension runs `L` iterations at
//! a time in 128-bit vectors (`f64x2`/`i64x2` for `L = 2`, `f32x4`/`i32x4` for `L = 4`), `UNROLL`
//! vectors per step, with scalar code for the remainder of each row.
//!
//! [`analyze`] decides whether a loop qualifies and how each body value is computed; the
//! method [`FnLower::build_vector`] emits the function. See the `cpu` module documentation for
//! the rules and the guarantees.
//!
//! [`FnLower::build_vector`]: crate::lower::FnLower::build_vector
//!
//! # Values
//! Each value of the loop body is either
//! - **uniform**: the same for every iteration of a row of the innermost dimension (constants,
//!   parameters, top-level values, the outer loop indices, loads indexed by outer loop indices
//!   only, and anything computed from uniform values only). It is computed once per row, by the
//!   scalar lowering, and *splat* into a vector where a vector operation needs it;
//! - **varying**: anything that depends on the innermost loop index. It is a vector of `L`
//!   lanes, lane `l` holding the value of iteration `j + l`. A `bool` is a lane mask (all ones
//!   for true) as wide as the lanes.
//!
//! # Layout of the function
//! ```text
//! entry: parameters, views, top-level values
//! for each row (the outer dimensions, as in the scalar function):
//!     uniform values (scalar), their splats, the row's base address of each vector access
//!     while unit strides and end - j >= U*L: the body on U = UNROLL vectors; j += U*L
//!     while j < end:       the scalar body (varying instructions only); j += 1
//! exit: rank-0 reduction results combined and written to their buffers
//! ```
//! With a wide body (see [`super::wide`]), the wide body runs the bulk of each row first; one
//! that runs whole rows leaves nothing of a unit-stride row, so the 128-bit loop is not
//! emitted at all (it would never run, and it was most of the function's compile time: the
//! fused kernel of NPBench's `arc_distance`, about 380 IR instructions of trigonometry,
//! took 3.5 ms a compile with it and 2.0-2.2 ms without, the mean of 20 compiles in one run
//! before and three after) and such a row's iterations go straight to the scalar loop, which
//! then runs only rows of other strides.
//!
//! A rank-1 loop has one "row": its chunk `lo..hi`. A rank-1 loop whose points store into
//! grouped leaf stores runs its row as [`FnLower::grouped_vectors`] says instead: scalar
//! points up to the first aligned group of eight, the whole groups (in the wide body and then
//! eight points a step, each group's leaves combined by the canonical tree), scalar points
//! after.
//!
//! [`FnLower::grouped_vectors`]: crate::lower::FnLower::grouped_vectors
//!
//! # Files
//! This file holds the target's [`Features`], the [`VecPlan`], the [`ConstTable`] and the
//! emission state; [`analysis`] decides ([`analyze`]), [`build`] emits the function and its
//! rows, [`ops`] the vector values and operations of the body.

use std::collections::HashMap;

use cranelift_codegen::ir::{Type, Value, types};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::Variable;
use weft_ir::{DType, ReduceOp, ValueId};

use super::wide::Isa;

mod analysis;
mod build;
mod ops;

pub(crate) use analysis::{analyze, float_vector_binary};

/// Whether the vector body is emitted with the vectors of a step interleaved instruction
/// by instruction (more independent work in flight) rather than one after the other.
const INTERLEAVE: bool = true;

/// Vectors per step of the main vector loop.
const UNROLL: usize = 2;

/// The most vectors of one step: a group of eight points (see
/// [`FnLower::grouped_vectors`](crate::lower::FnLower::grouped_vectors)) is four vectors of
/// `f64x2`.
const MAX_VECTORS: usize = 4;

/// What the vector lowering may use on the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Features {
    /// Vector `floor` and `ceil` are single instructions (on x86_64, SSE4.1's `roundpd`;
    /// without it Cranelift would call `floor` per lane, so loops using them stay scalar).
    pub round: bool,
    /// Vector `fma` is one instruction (x86_64's FMA3; without it Cranelift would call `fma`
    /// per lane, so loops using it stay scalar).
    pub fma: bool,
    /// Loops with 64-bit lanes run their bulk in bodies of this instruction set (see
    /// [`super::wide`]), where it takes them.
    pub wide: Option<Isa>,
}

impl Features {
    /// The features of `isa`, or `None` for a target whose 128-bit vectors this lowering does
    /// not use.
    pub(crate) fn of(isa: &dyn TargetIsa) -> Option<Features> {
        match isa.name() {
            "x64" => {
                let has = |name: &str| {
                    isa.isa_flags()
                        .iter()
                        .any(|f| f.name == name && f.as_bool() == Some(true))
                };
                Some(Features {
                    round: has("has_sse41"),
                    fma: has("has_fma"),
                    wide: Isa::widest_detected(),
                })
            }
            "aarch64" => Some(Features {
                round: true,
                fma: true,
                wide: None,
            }),
            _ => None,
        }
    }
}

/// A table of 16-byte vector constants at a fixed heap address, which a vector function reads.
///
/// Each use of a constant in the vector body gets its own entry, loaded (as a pure load from
/// an address that is an immediate) right where it is used: so Cranelift neither merges the
/// uses nor hoists the loads out of the loop. A `vconst` would instead be hoisted out of the
/// loop and, with the hundred-odd constants of a math-lowered body, spilled and reloaded at
/// every use. (Cranelift would fold such a load into the instruction that uses it as a memory
/// operand only if no value computed from that instruction were used twice, which math-lowered
/// bodies rarely allow: in the disassembly of Black-Scholes' loop every constant is a separate
/// load.)
///
/// The compiled kernel owns its tables: they live as long as its code.
#[derive(Debug)]
pub(crate) struct ConstTable {
    #[allow(dead_code, reason = "read by compiled code through its address")]
    entries: Box<[u128]>,
}

impl ConstTable {
    /// A table of `entries`, whose address compiled code may hold from now on.
    pub(crate) fn new(entries: Box<[u128]>) -> ConstTable {
        ConstTable { entries }
    }
}

/// How a load or store addresses its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AccessKind {
    /// Every index is an outer loop index (or there are none): one element per row.
    Uniform,
    /// The last index is the innermost loop index and the others are outer loop indices:
    /// adjacent elements for adjacent iterations (given a unit innermost stride).
    Contiguous,
}

/// How a vectorizable loop is lowered (the result of [`analyze`]).
#[derive(Clone, Debug)]
pub(crate) struct VecPlan {
    /// Lanes per vector: 2 (64-bit lanes) or 4 (32-bit lanes).
    pub lanes: u8,
    /// Per body instruction: computed once per row by the scalar lowering (uniform values,
    /// loads and stores of one element per row), else in the vector body and the scalar tail.
    pub row_level: Vec<bool>,
    /// The type of every varying value.
    pub varying: HashMap<ValueId, DType>,
    /// Uniform values that vector operations use, splat once per row.
    pub splats: Vec<ValueId>,
    /// Indices into `Layout::stores` of the stores accessed contiguously.
    pub unit_stride: Vec<usize>,
    /// Whether the innermost loop index is used as a value (as a vector `j + l`).
    pub uses_iota: bool,
}

/// Lanes of a 128-bit vector of `t`, or `None` for `bool` (a mask of any lane width).
fn lanes_of(t: DType) -> Option<u8> {
    match t {
        DType::F64 | DType::I64 => Some(2),
        DType::F32 | DType::I32 => Some(4),
        // Bools, and the unsigned storage types (which these vectors do not load or store).
        DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => None,
    }
}

/// The vector type of `t` with `lanes` lanes (`bool`: the integer mask type).
pub(crate) fn vec_type(t: DType, lanes: u8) -> Type {
    match (t, lanes) {
        (DType::F64, _) => types::F64X2,
        (DType::I64, _) => types::I64X2,
        (DType::F32, _) => types::F32X4,
        (DType::I32, _) => types::I32X4,
        (DType::Bool, 2) => types::I64X2,
        (DType::Bool, _) => types::I32X4,
        // Never a vector (see `lanes_of`); their values are `i64`s.
        (DType::U8 | DType::U16 | DType::U32 | DType::U64, _) => types::I64X2,
    }
}

/// The state of the vector body being emitted.
struct VecCx {
    lanes: u8,
    /// The innermost loop index.
    inner: ValueId,
    /// The vector of each uniform value that vector operations use.
    splats: HashMap<ValueId, Value>,
    /// The row's base address of each contiguous access, by parameter and indices.
    row_base: HashMap<(u32, Vec<ValueId>), Value>,
    /// Vector accumulators of rank-0 reductions, one per vector of a step, by parameter.
    accs: HashMap<u32, (ReduceOp, DType, [Variable; UNROLL])>,
    /// Per vector of a step: its values, its first iteration and its `j + lane` vector.
    vals: [HashMap<ValueId, Value>; MAX_VECTORS],
    j: [Value; MAX_VECTORS],
    iota: [Option<Value>; MAX_VECTORS],
    /// While a group of points is emitted: per grouped leaf store, the vectors stored into it
    /// (which the group combines instead of storing).
    capture: Option<Vec<(u32, Vec<Value>)>>,
    /// The lane bits of each uniform value that is a constant.
    const_bits: HashMap<ValueId, (u128, Type)>,
    /// The constant table and how many of its entries are used.
    table: Box<[u128]>,
    table_used: usize,
    /// The table's address as a value of the main loop (elsewhere: an immediate).
    table_base: Option<Value>,
}
