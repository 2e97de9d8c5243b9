//! Kernel IR to Cranelift IR.
//!
//! A kernel becomes a list of *steps*, each one compiled function with the signature
//!
//! ```text
//! extern "C" fn(frame: *mut u64, red: *const *mut u8, lo: i64, hi: i64) -> i64
//! ```
//!
//! - A **parallel step** is one top-level [`ParallelLoop`](weft_ir::ParallelLoop). It runs the
//!   rows `lo..hi` of the loop's outermost dimension (and every index of the inner dimensions);
//!   the launcher calls it once per chunk of rows, on many threads.
//! - A **sequential step** is a run of top-level instructions between parallel loops that has a
//!   side effect or computes a value that cannot be recomputed cheaply (a load, a `for` loop).
//!   It runs once, on the calling thread, with `lo = 0, hi = 1`. Runs of pure top-level
//!   instructions (constants, scalar parameters, extents, arithmetic on them) compile to no step
//!   at all: every function that uses such a value recomputes it in its entry block.
//!
//! The **frame** is an array of 64-bit words built by the launcher for each run; see [`Layout`].
//! Top-level values computed by a sequential step and used later are *spilled* into frame words.
//! Parallel steps only read the frame.
//!
//! `red` points to one pointer per *reduction buffer* of a parallel step (see [`RedBuf`]): a
//! chunk-private, dense buffer for a store with `Reduce` privilege, initialised by the launcher
//! to the operator's identity and folded into the store in chunk order after the loop.
//!
//! The return value is 0, or `1 + i` where `i` indexes the kernel's [`FaultSite`]s: the function
//! stopped at an out-of-bounds index.
//!
//! # Files
//!
//! This file holds what every part of the lowering shares: [`StepCx`], what defining one
//! step's function needs; [`FnLower`], the state of one function being lowered, with its
//! values in scope ([`Env`]) and the registers of each store it accesses ([`View`]); and the
//! Cranelift types and memory flags of the kernel's values and accesses. The rest, by what it
//! lowers:
//!
//! - [`kernel`]: [`lower_kernel`], which splits a kernel into steps, with what it takes
//!   ([`Target`]) and what it returns ([`Lowered`](kernel::Lowered), [`StepKind`],
//!   [`LoopCounts`]).
//! - [`toplevel`]: the top-level values a step uses: recomputed in its function or loaded
//!   from the frame words where earlier steps spilled them.
//! - [`layout`]: the frame ([`Layout`]: where each parameter lives) and the registers a
//!   function loads from it (frame words, views of stores).
//! - [`define`]: one step's function defined in the module: the scalar or vector function of
//!   a parallel loop, its wide body, the compiled code's stack limit ([`MAX_FRAME_BYTES`]).
//! - [`skeleton`]: function skeletons: the entry block, sequential steps, and parallel steps
//!   with their loop nests (the general copy, the copy for unit innermost strides, the copy
//!   for zero origins).
//! - [`points`]: loop nests that run a parallel loop's points several at a time (groups of
//!   points into grouped leaf stores, jammed rows).
//! - [`inst`]: instructions one at a time: the dispatch on the operation, values in scope,
//!   constants.
//! - [`arith`]: arithmetic, comparisons, casts and calls of math shims.
//! - [`access`]: loads and stores: addresses, bounds checks (proven or checked) and the fault
//!   blocks they leave to.
//! - [`reduce`]: reductions into stores, register accumulators and chunk buffers.
//! - [`loops`]: scalar `for` loops: the range check of the induction value before the loop,
//!   prefetches, the cancel check on the back edge.
//!
//! Beside them, the lowerings beyond scalar code: [`vector`] (parallel loops as vectors),
//! [`wide`] (AVX2 and AVX-512 bodies of our own), [`lanes`] and [`iterations`] (`for` loops as
//! vectors), [`jam`] (rows several at a time), [`pairs`] (two iterations per trip),
//! [`prefetch`] and [`driver`] (loops cut into segments). What [`vector`] and [`lanes`] hold,
//! file by file:
//!
//! - [`vector`]: the target's features ([`Features`](vector::Features)), the plan
//!   ([`VecPlan`](vector::VecPlan)), the constant table and the emission state; in it,
//!   `vector/analysis.rs` (which values are uniform or varying: [`vector::analyze`]),
//!   `vector/build.rs` (the vector function: rows, main loop, scalar tail, groups of points,
//!   calls of the wide body) and `vector/ops.rs` (vector values and operations: lanes, splats,
//!   addresses, the body's instructions, arithmetic, comparisons, casts).
//! - [`lanes`]: the plan of a lane loop ([`LanePlan`](lanes::LanePlan): its nodes and sites)
//!   and its wide body ([`FoldCall`](lanes::FoldCall)); in it, `lanes/analysis.rs` (whether
//!   the carried values form lanes: [`lanes::plan`], [`lanes::plan_wide`]), `lanes/emit.rs`
//!   (the loop as vectors of lanes, its bounds checks, gathers and wide-body call) and
//!   `lanes/tests.rs`.

use std::collections::{HashMap, HashSet};

use cranelift_codegen::Context;
use cranelift_codegen::ir::{self, FuncRef, MemFlagsData, Type, Value, types};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use weft_ir::{DType, ReduceOp, Scalar, ValueId, validate::Types};

use crate::math::MathFn;

mod access;
mod addresses;
mod arith;
mod define;
mod driver;
mod inst;
mod iterations;
mod jam;
mod kernel;
pub(crate) mod lanes;
mod layout;
mod loops;
mod pairs;
mod points;
mod prefetch;
mod reduce;
mod skeleton;
mod toplevel;
pub(crate) mod vector;
pub(crate) mod wide;

pub use define::MAX_FRAME_BYTES;

pub(crate) use access::{FaultSite, Obligation};
pub(crate) use addresses::address_symbol;
pub(crate) use kernel::{LoopCounts, MathDecls, StepKind, Target, lower_kernel, vectorizes};
pub(crate) use layout::{Layout, Slot, StoreSlot};
pub(crate) use loops::CANCELLED;
pub(crate) use reduce::{RedBuf, RedMode};

use access::{Faults, PendingFail};
use skeleton::ParCx;
use toplevel::TopLevel;

/// A compile error message (wrapped into `Error::Compile` by the caller).
pub(crate) type LResult<T> = Result<T, String>;

/// The deepest nesting of sequential loops the back end accepts.
const MAX_DEPTH: usize = 200;

fn cl_type(d: DType) -> Type {
    match d {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I32 => types::I32,
        DType::I64 => types::I64,
        DType::Bool | DType::U8 => types::I8,
        DType::U16 => types::I16,
        DType::U32 => types::I32,
        DType::U64 => types::I64,
    }
}

/// Flags for loads of frame words and reduction-buffer pointers: aligned, never trapping, and
/// never written while a function runs.
fn frame_flags() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly()
}

/// Flags for accesses to store data. Every such access is in bounds (checked or proven), so it
/// cannot trap; alignment is not assumed.
fn data_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// What defining one step's function needs.
struct StepCx<'a> {
    tables: &'a mut Vec<vector::ConstTable>,
    /// Compiled functions from earlier compiles and processes (see [`crate::function_cache`]).
    function_cache: &'a mut crate::function_cache::FunctionCache,
    module: &'a mut JITModule,
    ctx: &'a mut Context,
    math: &'a MathDecls,
    fctx: &'a mut FunctionBuilderContext,
    sig: &'a ir::Signature,
    layout: &'a Layout,
    top: &'a TopLevel<'a>,
    faults: &'a mut Faults,
    spill_types: &'a mut HashMap<ValueId, DType>,
    ptr_ty: Type,
    types: &'a Types,
    /// Whether `for` loops whose carried values form lanes run as vectors (`Some`), and the
    /// instruction set of the wide bodies that run their bulk, if any.
    lanes: Option<Option<wide::Isa>>,
    loop_counts: &'a mut LoopCounts,
    cancel_flag: i64,
    /// The jammed bodies of the top-level parallel loops that have them, by position, the
    /// most points first.
    jams: &'a HashMap<usize, Vec<jam::Jam>>,
    /// See [`Target::grouped`].
    grouped: &'a [(u32, ReduceOp)],
    /// Whether the loop being lowered is a step of its own (not a segment of a group).
    whole: bool,
    /// See [`Target::prefetch`].
    prefetch: bool,
}

/// Values in scope: a map with an undo log for nested blocks. A value defined again inside a
/// nested block (a loop body lowered a second time, say, beside the row that defined it
/// once) has its outer definition back when the block's scope is popped.
#[derive(Default)]
struct Env {
    map: HashMap<ValueId, (Value, DType)>,
    undo: Vec<(ValueId, Option<(Value, DType)>)>,
}

impl Env {
    fn define(&mut self, v: ValueId, val: Value, ty: DType) {
        let old = self.map.insert(v, (val, ty));
        self.undo.push((v, old));
    }
    fn mark(&self) -> usize {
        self.undo.len()
    }
    fn pop_to(&mut self, mark: usize) {
        for (v, old) in self.undo.drain(mark..).rev() {
            match old {
                Some(d) => self.map.insert(v, d),
                None => self.map.remove(&v),
            };
        }
    }
}

/// Registers of one accessed store in one function.
#[derive(Clone)]
struct View {
    base: Value,
    ext: Vec<Value>,
    /// Strides in bytes.
    stride: Vec<Value>,
    /// For a rank-0 reduction in a register: the accumulator.
    acc: Option<Variable>,
    /// Whether the last stride is known to be one element (it is then a constant).
    unit_inner: bool,
    /// Whether the view is a chunk-private reduction buffer (which aliases no other view).
    private: bool,
}

/// The state of one function being lowered: its builder, the values in scope, the views of
/// the stores it accesses, and what its lowering has proven and counted so far.
struct FnLower<'a, 'f> {
    /// The address of the back end's cancel flag.
    cancel_flag: i64,
    /// The address symbols this function reads, by address (see [`addresses`]).
    addresses: HashMap<u64, ir::GlobalValue>,
    b: FunctionBuilder<'f>,
    module: &'a mut JITModule,
    math: &'a MathDecls,
    math_refs: HashMap<(MathFn, DType), FuncRef>,
    layout: &'a Layout,
    top: &'a TopLevel<'a>,
    env: Env,
    views: HashMap<u32, View>,
    frame: Value,
    red: Value,
    ptr_ty: Type,
    pending: Vec<PendingFail>,
    faults: &'a mut Faults,
    /// Types of the values spilled by earlier sequential steps.
    spill_types: &'a mut HashMap<ValueId, DType>,
    par: Option<ParCx>,
    /// Where vector functions keep their constant tables.
    tables: &'a mut Vec<vector::ConstTable>,
    /// `(induction, param, dim)`: dimension `dim` of store parameter `param`, indexed by the
    /// induction value of an enclosing `for` loop, was checked for the loop's whole range
    /// before the loop (see `lower_for`).
    for_proven: HashSet<(ValueId, u32, usize)>,
    /// The types of the kernel's values.
    types: &'a Types,
    /// Whether `for` loops whose carried values form lanes run as vectors (see [`lanes`]),
    /// and the instruction set of the wide bodies that run their bulk, if any.
    lanes: Option<Option<wide::Isa>>,
    /// The constants lowered so far (value ids are unique in a kernel).
    consts: HashMap<ValueId, Scalar>,
    /// How many `for` loops the code being lowered is inside (0: the top of a point's body,
    /// which every point runs).
    in_for: u32,
    /// How many loops of the kernel took each lowering that [`LoopCounts`] counts.
    loop_counts: &'a mut LoopCounts,
    /// `i32` values loaded from memory: the value, and the same load sign-extended to `i64`
    /// (`sload32`), which a cast to `i64` takes instead of extending the value again (x86-64
    /// loads and extends in one instruction).
    widened: HashMap<ValueId, (Value, Value)>,
    /// Whether the code being lowered runs only where every origin the loop body reads is
    /// zero (a copy of a loop nest for that case, see `build_parallel`): `origin` is then the
    /// constant 0, and address arithmetic with it folds away.
    zero_origins: bool,
    /// The jammed bodies of the kernel's parallel loops (see [`jam`]).
    jams: &'a HashMap<usize, Vec<jam::Jam>>,
    /// Whether the code being lowered is a jammed body (its loops are counted as the
    /// loop's own, not again).
    in_jam: bool,
    /// See [`Target::grouped`] (none for a segment of a group).
    grouped: &'a [(u32, ReduceOp)],
    /// While a group of points is lowered (see [`FnLower::grouped_nest`]): the values each
    /// point stores into each grouped leaf store, which the group combines instead.
    captured: Option<Vec<(u32, Vec<Value>)>>,
    /// Whether scalar `for` loops prefetch the streams they read (see [`prefetch`]).
    prefetch: bool,
    /// How many prefetch markers the function has (see [`prefetch`]).
    markers: usize,
}

impl<'f> FnLower<'_, 'f> {
    fn ins(&mut self) -> cranelift_frontend::FuncInstBuilder<'_, 'f> {
        self.b.ins()
    }
}
