//! Kernel IR to Cranelift IR.
//!
//! A kernel becomes a list of *steps*, each one compiled function with the signature
//!
//! ```text
//! extern "C" fn(frame: *mut u64, red: *const *mut u8, lo: i64, hi: i64) -> i64
//! ```
//!
//! - A **parallel step** is one top-level [`ParallelLoop`]. It runs the rows `lo..hi` of the
//!   loop's outermost dimension (and every index of the inner dimensions); the launcher calls it
//!   once per chunk of rows, on many threads.
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

use std::collections::{BTreeSet, HashMap, HashSet};

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, AbiParam, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, Type, Value, types,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module, ModuleReloc};
use weft_ir::passes::math::MathFn as IrFn;
use weft_ir::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, Privilege,
    ReduceOp, Scalar, UnaryOp, ValueId, validate::Types,
};

use crate::math::MathFn;

mod driver;
mod iterations;
mod jam;
pub(crate) mod lanes;
mod pairs;
mod prefetch;
pub(crate) mod vector;
pub(crate) mod wide;

/// The largest store rank the back end accepts: the IR's.
use weft_ir::semantics::MAX_RANK;
/// The deepest nesting of sequential loops the back end accepts.
const MAX_DEPTH: usize = 200;

/// A compile error message (wrapped into `Error::Compile` by the caller).
pub(crate) type LResult<T> = Result<T, String>;

/// Where a store parameter lives in the frame.
///
/// Words from `off`: the data pointer; `rank` extents; `rank` strides in bytes; `rank` origins;
/// `rank` dense strides in bytes (of the row-major layout of the extents, used by reduction
/// buffers).
#[derive(Clone, Debug)]
pub(crate) struct StoreSlot {
    /// Index of the parameter in `Kernel::params`.
    pub param: u32,
    pub dtype: DType,
    pub rank: usize,
    pub privilege: Privilege,
    pub off: usize,
    /// A hidden store private to each chunk of its loop, dense, that aliases no other store
    /// (a leaf store of [`crate::leaves`]).
    pub private: bool,
}

impl StoreSlot {
    pub(crate) fn ptr(&self) -> usize {
        self.off
    }
    pub(crate) fn extent(&self, d: usize) -> usize {
        self.off + 1 + d
    }
    pub(crate) fn stride(&self, d: usize) -> usize {
        self.off + 1 + self.rank + d
    }
    pub(crate) fn origin(&self, d: usize) -> usize {
        self.off + 1 + 2 * self.rank + d
    }
    pub(crate) fn dense_stride(&self, d: usize) -> usize {
        self.off + 1 + 3 * self.rank + d
    }
    /// Number of frame words.
    fn words(rank: usize) -> usize {
        1 + 4 * rank
    }
}

/// Where a scalar parameter lives in the frame (one word, the value's bits).
#[derive(Clone, Debug)]
pub(crate) struct ScalarSlot {
    /// Index of the parameter in `Kernel::params`.
    pub param: u32,
    pub dtype: DType,
    pub off: usize,
}

/// A kernel parameter's slot.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Slot {
    /// Index into [`Layout::stores`].
    Store(usize),
    /// Index into [`Layout::scalars`].
    Scalar(usize),
}

/// The frame layout of a kernel: stores, then scalars, then spill slots.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    pub stores: Vec<StoreSlot>,
    pub scalars: Vec<ScalarSlot>,
    /// One per kernel parameter.
    pub slots: Vec<Slot>,
    /// Total number of words.
    pub frame_len: usize,
}

impl Layout {
    fn new(kernel: &Kernel) -> LResult<Layout> {
        let mut stores = Vec::new();
        let mut scalars = Vec::new();
        let mut slots = Vec::new();
        let mut off = 0usize;
        for (i, p) in kernel.params.iter().enumerate() {
            let param = u32::try_from(i).map_err(|_| "too many parameters".to_string())?;
            match *p {
                Param::Store {
                    dtype,
                    rank,
                    privilege,
                } => {
                    if rank > MAX_RANK {
                        return Err(format!(
                            "store parameter {i} has rank {rank}; the CPU back end supports at \
                             most {MAX_RANK}"
                        ));
                    }
                    let rank = rank as usize;
                    slots.push(Slot::Store(stores.len()));
                    stores.push(StoreSlot {
                        param,
                        dtype,
                        rank,
                        privilege,
                        off,
                        private: false,
                    });
                    off += StoreSlot::words(rank);
                }
                Param::Scalar { dtype } => {
                    slots.push(Slot::Scalar(scalars.len()));
                    scalars.push(ScalarSlot { param, dtype, off });
                    off += 1;
                }
            }
        }
        Ok(Layout {
            stores,
            scalars,
            slots,
            frame_len: off,
        })
    }

    fn store(&self, param: u32) -> LResult<(usize, &StoreSlot)> {
        match self.slots.get(param as usize) {
            Some(Slot::Store(s)) => Ok((*s, &self.stores[*s])),
            Some(Slot::Scalar(_)) => Err(format!("parameter {param} is a scalar, not a store")),
            None => Err(format!("no parameter {param}")),
        }
    }
}

/// How a parallel step treats a store with `Reduce` privilege that it reduces into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedMode {
    /// Rank 0: the step accumulates in a register and writes the chunk's result once, at the
    /// end, into a one-element buffer.
    Register,
    /// A dense chunk-private buffer with the store's extents.
    Buffer,
}

/// A reduction buffer of a parallel step: `red[i]` of its function.
#[derive(Clone, Debug)]
pub(crate) struct RedBuf {
    /// Index into [`Layout::stores`].
    pub store: usize,
    pub op: ReduceOp,
    pub mode: RedMode,
}

/// A run-time condition that a parallel step's unchecked accesses rely on: the loop's extent on
/// `loop_dim` is at most the extent of `store` on `dim`; or, with `index`, that constant index
/// is below that extent (an access every point makes, checked once per launch of a loop that
/// has points).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Obligation {
    pub loop_dim: usize,
    /// Index into [`Layout::stores`].
    pub store: usize,
    pub dim: usize,
    pub index: Option<i64>,
}

/// A place where compiled code can stop: an index out of bounds in `param` on `dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FaultSite {
    /// Index in `Kernel::params`.
    pub param: u32,
    pub dim: u32,
}

/// What kind of step a function is.
#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Sequential,
    Parallel {
        /// Index into [`Layout::stores`] of the store that gives the iteration space.
        over: usize,
        obligations: Vec<Obligation>,
        reds: Vec<RedBuf>,
        /// Whether the launcher may cut the loop into chunks by the thread count as well as
        /// by its shape: its points run `for` loops (so a point may be much work), and no
        /// float sum or product goes through a chunk buffer (whose result depends on the
        /// chunks).
        spread: bool,
        /// Whether the step leaves its grouped leaf stores ([`Target::grouped`]) grouped:
        /// each whole aligned group of eight points in a call's range as one node, in the
        /// group's first slot (see [`weft_ir::reduction::grouped_nodes_with`]).
        grouped: bool,
    },
}

/// One compiled (not yet finalized) step.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub kind: StepKind,
    pub func: FuncId,
    /// Whether `func` is the vector function of a parallel step (see [`vector`]). It then
    /// also runs, in scalar code, rows whose contiguous stores have other strides.
    pub vectorized: bool,
    /// The instruction set of the wide body in which the vector function runs the bulk of
    /// each row, if it has one.
    pub wide: Option<wide::Isa>,
    /// Why a vectorized loop has no wide body on a path that has them.
    pub wide_refusal: Option<String>,
}

/// The result of lowering a kernel.
#[derive(Debug)]
pub(crate) struct Lowered {
    pub layout: Layout,
    pub steps: Vec<Step>,
    pub faults: Vec<FaultSite>,
    /// Constant tables that the compiled code reads at fixed addresses (see
    /// [`vector::ConstTable`]): they must live as long as the code may run.
    pub tables: Vec<vector::ConstTable>,
    /// How many loops took each of the lowerings that [`LoopCounts`] counts.
    pub loop_counts: LoopCounts,
}

/// How many loops of a kernel took the lowerings beyond plain scalar code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoopCounts {
    /// As 128-bit vectors of lanes (see [`lanes`]), or of iterations (see [`iterations`]).
    pub vector: usize,
    /// Of those, the loops whose bulk runs in a wide body (see [`wide::compile_fold`]).
    pub wide: usize,
    /// Parallel loops that run several points at once (see [`jam`]).
    pub jammed: usize,
    /// Scalar `for` loops whose preheader prefetches the streams they read (see
    /// [`prefetch`]).
    pub prefetched: usize,
    /// Scalar `for` loops that run two iterations per trip (see [`pairs`]).
    pub paired: usize,
    /// Bytes of machine code the kernel defined (every step, copy and wide body).
    pub code_bytes: usize,
}

/// The imported math shims, declared once per module.
pub(crate) struct MathDecls {
    pub ids: HashMap<(MathFn, DType), FuncId>,
}

/// What the back end needs from its owner to lower a kernel.
pub(crate) struct Target<'a> {
    pub module: &'a mut JITModule,
    pub ctx: &'a mut Context,
    pub math: &'a MathDecls,
    /// The types of the kernel's values (from validation).
    pub types: &'a Types,
    /// What the vector lowering may use, or `None` to compile scalar code only.
    pub simd: Option<vector::Features>,
    /// The ISA that compiles vector functions (see [`vector`]).
    pub vector_isa: &'a dyn TargetIsa,
    /// The address of the back end's cancel flag (a `u32`), read on every loop back edge.
    pub cancel_flag: i64,
    /// The loops cut into segments (see [`crate::strips`]): each compiles to one step.
    pub groups: &'a [crate::strips::Group],
    /// The hidden store parameters private to each chunk (see [`StoreSlot::private`]).
    pub private: &'a [u32],
    /// The leaf stores that a scalar point loop may fill *grouped* (see
    /// [`weft_ir::reduction::grouped_nodes_with`]), with their operators: each point stores
    /// its one contribution at the loop's index.
    pub grouped: &'a [(u32, ReduceOp)],
    /// Whether scalar `for` loops prefetch the streams they read (see [`prefetch`]).
    pub prefetch: bool,
}

/// Whether the top-level parallel loop at position `pos` of `kernel` has a vector variant
/// (see [`vector::analyze`]) with `features`.
pub(crate) fn vectorizes(
    kernel: &Kernel,
    pos: usize,
    types: &Types,
    features: vector::Features,
) -> bool {
    let Some(Op::Parallel(pl)) = kernel.body.get(pos).map(|i| &i.op) else {
        return false;
    };
    Layout::new(kernel).is_ok_and(|layout| vector::analyze(pl, &layout, types, features).is_ok())
}

fn cl_type(d: DType) -> Type {
    match d {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I32 => types::I32,
        DType::I64 => types::I64,
        DType::Bool => types::I8,
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

/// Values an operation reads (not counting values read by nested bodies).
fn operands(op: &Op) -> Vec<ValueId> {
    match op {
        Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => vec![],
        Op::Binary(_, a, b) | Op::Cmp(_, a, b) => vec![*a, *b],
        Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => vec![*a],
        Op::Select(c, a, b) => vec![*c, *a, *b],
        Op::Load(acc) => acc.indices.clone(),
        Op::Store(acc, v) | Op::Reduce(acc, _, v) => {
            let mut v2 = acc.indices.clone();
            v2.push(*v);
            v2
        }
        Op::Parallel(_) => vec![],
        Op::For(l) => {
            let mut v = vec![l.lo, l.hi];
            v.extend(&l.init);
            v
        }
    }
}

/// What a body (recursively) uses, defines and accesses.
#[derive(Default)]
struct Scan {
    uses: Vec<ValueId>,
    defs: HashSet<ValueId>,
    /// Store parameters that are loaded, stored or reduced into.
    accessed: BTreeSet<u32>,
    /// Per parameter reduced into: the index values of dimension 0 of every reduction (or
    /// `None` for a rank-0 access).
    reduces: HashMap<u32, Vec<Option<ValueId>>>,
}

impl Scan {
    fn body(&mut self, body: &[Inst], depth: usize) -> LResult<()> {
        if depth > MAX_DEPTH {
            return Err(format!("loops nested deeper than {MAX_DEPTH}"));
        }
        for inst in body {
            self.uses.extend(operands(&inst.op));
            self.defs.extend(inst.results.iter().copied());
            match &inst.op {
                Op::Load(acc) | Op::Store(acc, _) => {
                    self.accessed.insert(acc.param);
                }
                Op::Reduce(acc, _, _) => {
                    self.accessed.insert(acc.param);
                    self.reduces
                        .entry(acc.param)
                        .or_default()
                        .push(acc.indices.first().copied());
                }
                Op::For(l) => {
                    self.defs.insert(l.induction);
                    self.defs.extend(l.carried.iter().copied());
                    self.body(&l.body, depth + 1)?;
                    self.uses.extend(l.yields.iter().copied());
                }
                Op::Parallel(p) => {
                    self.defs.extend(p.indices.iter().copied());
                    self.body(&p.body, depth + 1)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Facts about the top-level instructions.
struct TopLevel<'k> {
    /// Defining instruction (and its position) of each top-level result.
    defs: HashMap<ValueId, (usize, &'k Inst)>,
    /// Top-level values that any function may recompute.
    remat: HashSet<ValueId>,
    /// Frame word of each spilled top-level value.
    spill: HashMap<ValueId, usize>,
}

/// Lowers `kernel` into functions of `target.module` (defined, not finalized).
pub(crate) fn lower_kernel(kernel: &Kernel, target: Target<'_>) -> LResult<Lowered> {
    // Every value is defined once.
    let mut seen = HashSet::new();
    let mut dup = None;
    let mut bound = 0u32;
    check_depth(&kernel.body, 0)?;
    weft_ir::visit_defs(&kernel.body, &mut |v| {
        bound = bound.max(v.0.saturating_add(1));
        if !seen.insert(v) && dup.is_none() {
            dup = Some(v);
        }
    });
    if let Some(v) = dup {
        return Err(format!("value {v} is defined more than once"));
    }

    let mut layout = Layout::new(kernel)?;

    // Top-level analysis: which values are pure functions of the parameters.
    let mut top = TopLevel {
        defs: HashMap::new(),
        remat: HashSet::new(),
        spill: HashMap::new(),
    };
    for (pos, inst) in kernel.body.iter().enumerate() {
        // A value operation is a pure function of the frame's parameter words, so a top-level
        // instance may be recomputed in any function that needs its value.
        let remat = inst.op.is_value()
            && operands(&inst.op)
                .iter()
                .all(|v| top.remat.contains(v) && top.defs.contains_key(v));
        for &r in &inst.results {
            top.defs.insert(r, (pos, inst));
            if remat {
                top.remat.insert(r);
            }
        }
    }

    // Split the body into steps: parallel loops, and runs of other instructions that need to
    // run (anything not recomputable).
    enum Item {
        Seq(std::ops::Range<usize>),
        Par(usize),
    }
    let mut items = Vec::new();
    let mut start = 0;
    let body = &kernel.body;
    for pos in 0..=body.len() {
        let at_par = pos < body.len() && matches!(body[pos].op, Op::Parallel(_));
        if pos == body.len() || at_par {
            let run = &body[start..pos];
            let needed = run.iter().any(|inst| {
                !inst.op.is_value() || inst.results.iter().any(|r| !top.remat.contains(r))
            });
            if needed {
                items.push(Item::Seq(start..pos));
                for inst in run {
                    for &r in &inst.results {
                        if !top.remat.contains(&r) {
                            top.spill.insert(r, layout.frame_len);
                            layout.frame_len += 1;
                        }
                    }
                }
            }
            if at_par {
                items.push(Item::Par(pos));
            }
            start = pos + 1;
        }
    }

    // Frame words are addressed with 32-bit byte offsets.
    if layout.frame_len > (i32::MAX / 8) as usize {
        return Err(format!(
            "the kernel needs {} frame words; the CPU back end supports at most {}",
            layout.frame_len,
            i32::MAX / 8
        ));
    }

    let mut faults = Faults::default();
    let mut steps = Vec::new();
    let Target {
        module,
        ctx,
        math,
        types: value_types,
        simd,
        vector_isa,
        cancel_flag,
        groups,
        private,
        grouped,
        prefetch,
    } = target;
    for slot in &mut layout.stores {
        slot.private = private.contains(&slot.param);
    }
    // Row loops run several points at once where the vector code takes them (see [`jam`]):
    // four rows beside wide bodies, two beside 128-bit vectors (whose sixteen registers
    // hold two rows' lanes).
    let rows: &[usize] = match simd.map(|f| f.wide) {
        Some(Some(_)) => &[4, 2],
        Some(None) => &[2],
        None => &[],
    };
    let mut fresh = jam::Fresh::new(bound);
    let mut jams: HashMap<usize, Vec<jam::Jam>> = HashMap::new();
    for (pos, inst) in body.iter().enumerate() {
        if let Op::Parallel(pl) = &inst.op {
            let found: Vec<jam::Jam> = rows
                .iter()
                .filter_map(|&r| jam::jam(pl, r, value_types, &mut fresh).ok())
                .collect();
            if !found.is_empty() {
                jams.insert(pos, found);
            }
        }
    }
    let jam_types = value_types.with(&fresh.types);
    let fconfig = module.target_config();
    let ptr_ty = fconfig.pointer_type();
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));

    let mut fctx = FunctionBuilderContext::new();
    let mut spill_types = HashMap::new();
    let mut tables = Vec::new();
    let mut loop_counts = LoopCounts::default();
    let mut fcx = StepCx {
        tables: &mut tables,
        module,
        ctx,
        math,
        fctx: &mut fctx,
        sig: &sig,
        layout: &layout,
        top: &top,
        faults: &mut faults,
        spill_types: &mut spill_types,
        ptr_ty,
        types: &jam_types,
        lanes: simd.map(|f| f.wide),
        loop_counts: &mut loop_counts,
        cancel_flag,
        jams: &jams,
        grouped,
        whole: true,
        prefetch,
    };
    for item in items {
        let (pl, pos) = match item {
            Item::Seq(range) => {
                let func = fcx.define(None, &mut |fl| {
                    fl.build_sequential(&body[range.clone()], range.start)
                })?;
                steps.push(Step {
                    kind: StepKind::Sequential,
                    func,
                    vectorized: false,
                    wide: None,
                    wide_refusal: None,
                });
                continue;
            }
            Item::Par(pos) => {
                let Op::Parallel(pl) = &body[pos].op else {
                    return Err("internal: parallel item is not a parallel loop".into());
                };
                if !body[pos].results.is_empty() {
                    return Err("a parallel loop defines no results".into());
                }
                (pl, pos)
            }
        };
        match groups.iter().find(|g| g.first == pos) {
            Some(g) => {
                let mut segs = Vec::with_capacity(g.loops);
                let mut loops = Vec::with_capacity(g.loops);
                for (p, inst) in body.iter().enumerate().skip(g.first).take(g.loops) {
                    let Op::Parallel(seg) = &inst.op else {
                        return Err("internal: a segment is not a parallel loop".into());
                    };
                    // (A segment's leaves stay one per point: its step is the group's.)
                    fcx.whole = false;
                    let seg_step = fcx.lower_loop(seg, p, simd, vector_isa);
                    fcx.whole = true;
                    segs.push(seg_step?);
                    loops.push(seg);
                }
                steps.push(fcx.lower_group(&loops, g, segs)?);
            }
            None => {
                if groups
                    .iter()
                    .any(|g| (g.first + 1..g.first + g.loops).contains(&pos))
                {
                    continue;
                }
                steps.push(fcx.lower_loop(pl, pos, simd, vector_isa)?);
            }
        }
    }
    fcx.module.clear_context(fcx.ctx);
    Ok(Lowered {
        layout,
        steps,
        faults: faults.sites,
        tables,
        loop_counts,
    })
}

/// What defining one step's function needs.
struct StepCx<'a> {
    tables: &'a mut Vec<vector::ConstTable>,
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

/// Defines machine code of our own (a wide body, see [`wide`]) as a function of `module`
/// with the signature `fn(args: *const u64, steps: i64) -> i64`; `what` names it in errors.
fn define_wide_code(
    module: &mut JITModule,
    ptr_ty: Type,
    code: &[u8],
    what: &str,
) -> LResult<FuncId> {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr_ty));
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let func = module
        .declare_anonymous_function(&sig)
        .map_err(|e| format!("declare: {e}"))?;
    module
        .define_function_bytes(func, 64, code, &[])
        .map_err(|e| format!("define {what}: {e:?}"))?;
    Ok(func)
}

/// Whether a store bounds `l`'s trip count (see [`weft_ir::coverage::bounded_by_a_store`]):
/// its back edge needs no cancel check.
pub(crate) fn bounded_by_a_store(l: &ForLoop) -> bool {
    weft_ir::coverage::bounded_by_a_store(l)
}

/// The status a compiled function returns when the cancel flag stopped it (fault sites are
/// numbered from 1).
pub(crate) const CANCELLED: i64 = -1;

/// The most stack one compiled function's frame may take. Worker threads have stacks of
/// [`crate::WORKER_STACK_BYTES`], so a kernel never runs out of stack, and Cranelift's inline
/// probes touch every page of a larger-than-a-page frame on the way down.
pub const MAX_FRAME_BYTES: u32 = 256 << 10;

/// Refuses the function just compiled in `ctx` when its frame is larger than
/// [`MAX_FRAME_BYTES`] (a kernel with very many values live at once).
fn check_frame(ctx: &Context) -> LResult<()> {
    let frame = ctx
        .compiled_code()
        .and_then(|c| c.buffer.frame_layout())
        .map_or(0, |f| f.frame_to_fp_offset);
    if frame > MAX_FRAME_BYTES {
        return Err(format!(
            "its frame needs {frame} bytes of stack, more than the limit of {MAX_FRAME_BYTES} \
             (too many values live at once)"
        ));
    }
    Ok(())
}

/// A wide body defined in the module, and what its caller passes it.
pub(crate) struct WideCall {
    pub isa: wide::Isa,
    pub func: FuncId,
    pub args: Vec<wide::ArgWord>,
    /// Whether it leaves its loop's grouped leaf stores grouped (see [`wide::compile`]).
    pub grouped: bool,
}

/// The stores of the rank-1 loop `pl`'s points into the leaf stores of `grouped` (see
/// [`Target::grouped`]), at the loop's index, with their operators; none for a loop of
/// another rank.
pub(crate) fn grouped_stores(
    pl: &ParallelLoop,
    grouped: &[(u32, ReduceOp)],
) -> Vec<(u32, ReduceOp)> {
    if pl.indices.len() != 1 {
        return Vec::new();
    }
    pl.body
        .iter()
        .filter_map(|inst| match &inst.op {
            Op::Store(acc, _) if acc.indices == pl.indices => {
                grouped.iter().find(|g| g.0 == acc.param).copied()
            }
            _ => None,
        })
        .collect()
}

impl StepCx<'_> {
    /// Compiles the top-level parallel loop `pl` at position `pos` into one step: the vector
    /// function where the loop vectorizes (it runs the scalar body for remainders and for
    /// strides it cannot take as vectors), else a scalar one.
    fn lower_loop(
        &mut self,
        pl: &ParallelLoop,
        pos: usize,
        simd: Option<vector::Features>,
        vector_isa: &dyn TargetIsa,
    ) -> LResult<Step> {
        // A loop that vectorizes gets one function, the vector one (it runs the scalar body
        // for remainders and for strides it cannot take as vectors); any other, a scalar one.
        let plan = simd.and_then(|f| vector::analyze(pl, self.layout, self.types, f).ok());
        // Its bulk in a wide body, where the path has one and the body qualifies.
        let wide = match (&plan, simd.and_then(|f| f.wide)) {
            (Some(p), Some(isa)) => {
                let const_of = |v: ValueId| {
                    let def = pl
                        .body
                        .iter()
                        .find(|i| i.results.first() == Some(&v))
                        .or_else(|| self.top.defs.get(&v).map(|d| d.1))?;
                    match def.op {
                        Op::Const(c) => Some(c),
                        _ => None,
                    }
                };
                let grouped = if self.whole {
                    grouped_stores(pl, self.grouped)
                } else {
                    Vec::new()
                };
                Some(
                    wide::compile(isa, pl, p, self.types, &const_of, &grouped)
                        .map(|w| (w, !grouped.is_empty())),
                )
            }
            _ => None,
        };
        let (wide, wide_refusal) = match wide {
            Some(Ok((w, grouped))) => (Some(self.define_wide(w, grouped)?), None),
            Some(Err(why)) => (None, Some(why)),
            None => (None, None),
        };
        let mut kind = StepKind::Sequential;
        let (func, vectorized) = match plan {
            Some(plan) => {
                let func = self.define(Some(vector_isa), &mut |fl| {
                    kind = fl.build_vector(pl, pos, &plan, wide.as_ref())?;
                    Ok(())
                })?;
                (func, true)
            }
            None => {
                let func = self.define(None, &mut |fl| {
                    kind = fl.build_parallel(pl, pos)?;
                    Ok(())
                })?;
                (func, false)
            }
        };
        if let StepKind::Parallel { reds, spread, .. } = &mut kind {
            let ordered = reds.iter().any(|r| {
                r.mode == RedMode::Buffer
                    && matches!(r.op, ReduceOp::Sum | ReduceOp::Prod)
                    && self.layout.stores[r.store].dtype.is_float()
            });
            *spread = has_for_loop(&pl.body) && !ordered;
        }
        Ok(Step {
            kind,
            func,
            vectorized,
            wide: wide.as_ref().filter(|_| vectorized).map(|w| w.isa),
            wide_refusal,
        })
    }

    /// Defines the machine code of `body` as a function of the module (signature
    /// `fn(args: *const u64, steps: i64)`) and keeps its constant table.
    fn define_wide(&mut self, body: wide::WideBody, grouped: bool) -> LResult<WideCall> {
        let what = format!("the {} body", body.isa.name());
        let func = define_wide_code(self.module, self.ptr_ty, &body.code, &what)?;
        self.loop_counts.code_bytes += body.code.len();
        self.tables.push(body.table);
        Ok(WideCall {
            isa: body.isa,
            func,
            args: body.args,
            grouped,
        })
    }

    /// Declares a function, builds its body with `build` and defines it in the module,
    /// compiled by the module's ISA or by `isa`.
    fn define(
        &mut self,
        isa: Option<&dyn TargetIsa>,
        build: &mut dyn FnMut(&mut FnLower<'_, '_>) -> LResult<()>,
    ) -> LResult<FuncId> {
        self.module.clear_context(self.ctx);
        self.ctx.func.signature = self.sig.clone();
        let func = self
            .module
            .declare_anonymous_function(self.sig)
            .map_err(|e| format!("declare: {e}"))?;
        self.ctx.func.name = ir::UserFuncName::user(0, func.as_u32());
        let fconfig = self.module.target_config();
        let markers;
        {
            let b = FunctionBuilder::new(&mut self.ctx.func, self.fctx);
            let mut fl = FnLower {
                b,
                module: self.module,
                math: self.math,
                math_refs: HashMap::new(),
                layout: self.layout,
                top: self.top,
                env: Env::default(),
                views: HashMap::new(),
                frame: Value::from_u32(0),
                red: Value::from_u32(0),
                ptr_ty: self.ptr_ty,
                pending: Vec::new(),
                faults: self.faults,
                spill_types: self.spill_types,
                par: None,
                tables: self.tables,
                for_proven: HashSet::new(),
                types: self.types,
                lanes: self.lanes,
                consts: HashMap::new(),
                in_for: 0,
                zero_origins: false,
                loop_counts: self.loop_counts,
                widened: HashMap::new(),
                cancel_flag: self.cancel_flag,
                jams: self.jams,
                in_jam: false,
                grouped: if self.whole { self.grouped } else { &[] },
                captured: None,
                prefetch: self.prefetch,
                markers: 0,
            };
            build(&mut fl)?;
            markers = fl.markers;
            // Resets `fctx` for the next function.
            fl.b.finalize(fconfig);
        }
        // As `JITModule::define_function` does, with the markers of prefetches rewritten.
        let isa = isa.unwrap_or_else(|| self.module.isa());
        let mut ctrl = ControlPlane::default();
        self.ctx
            .compile(isa, &mut ctrl)
            .map_err(|e| format!("cranelift: {:?}", e.inner))?;
        let code = self
            .ctx
            .compiled_code()
            .ok_or("internal: no compiled code")?;
        let align = u64::from(code.buffer.alignment);
        let relocs: Vec<ModuleReloc> = code
            .buffer
            .relocs()
            .iter()
            .map(|r| ModuleReloc::from_mach_reloc(r, &self.ctx.func, func))
            .collect();
        let mut bytes = code.buffer.data().to_vec();
        // Cranelift drops the markers of blocks it proves unreachable (a loop whose constant
        // bounds leave it empty), so fewer may be found than were lowered; never more.
        let patched = prefetch::patch(&mut bytes, code.buffer.traps())?;
        if patched > markers {
            return Err(format!(
                "internal: {markers} prefetch markers lowered, {patched} found in the code"
            ));
        }
        check_frame(self.ctx)?;
        self.module
            .define_function_bytes(func, align, &bytes, &relocs)
            .map_err(|e| format!("cranelift: {e:?}"))?;
        self.loop_counts.code_bytes += bytes.len();
        Ok(func)
    }
}

/// The float condition of a comparison (ordered: false if either operand is NaN, except `ne`).
pub(crate) fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The integer condition of a comparison, signed or unsigned (`bool`s compare unsigned).
pub(crate) fn int_cc(op: CmpOp, signed: bool) -> IntCC {
    match (op, signed) {
        (CmpOp::Eq, _) => IntCC::Equal,
        (CmpOp::Ne, _) => IntCC::NotEqual,
        (CmpOp::Lt, true) => IntCC::SignedLessThan,
        (CmpOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CmpOp::Gt, true) => IntCC::SignedGreaterThan,
        (CmpOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CmpOp::Lt, false) => IntCC::UnsignedLessThan,
        (CmpOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CmpOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CmpOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// The `(param, dim)` of every `origin` that `body` reads, nested loops included, each once.
fn origins_read(body: &[Inst]) -> BTreeSet<(u32, usize)> {
    fn walk(body: &[Inst], found: &mut BTreeSet<(u32, usize)>) {
        for inst in body {
            match &inst.op {
                Op::Origin { param, dim } => {
                    found.insert((*param, *dim as usize));
                }
                Op::Parallel(p) => walk(&p.body, found),
                Op::For(l) => walk(&l.body, found),
                _ => {}
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(body, &mut found);
    found
}

/// Whether `body` has a sequential loop, at any depth.
fn has_for_loop(body: &[Inst]) -> bool {
    body.iter().any(|inst| match &inst.op {
        Op::For(_) => true,
        Op::Parallel(p) => has_for_loop(&p.body),
        _ => false,
    })
}

fn check_depth(body: &[Inst], depth: usize) -> LResult<()> {
    if depth > MAX_DEPTH {
        return Err(format!("loops nested deeper than {MAX_DEPTH}"));
    }
    for inst in body {
        match &inst.op {
            Op::For(l) => check_depth(&l.body, depth + 1)?,
            Op::Parallel(p) => check_depth(&p.body, depth + 1)?,
            _ => {}
        }
    }
    Ok(())
}

/// The kernel's fault sites, deduplicated.
#[derive(Default)]
struct Faults {
    sites: Vec<FaultSite>,
    index: HashMap<FaultSite, usize>,
}

impl Faults {
    /// The status code a function returns for `site`.
    fn code(&mut self, site: FaultSite) -> i64 {
        let n = self.sites.len();
        let i = *self.index.entry(site).or_insert(n);
        if i == n {
            self.sites.push(site);
        }
        i as i64 + 1
    }
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

/// A cold block that returns the code of the first out-of-bounds index of one access.
struct PendingFail {
    block: Block,
    /// (index, extent, code) per checked dimension.
    checks: Vec<(Value, Value, i64)>,
}

/// State of a parallel step being lowered.
struct ParCx {
    /// Loop index value -> its dimension.
    loop_dims: HashMap<ValueId, usize>,
    obligations: BTreeSet<Obligation>,
}

/// What [`FnLower::parallel_setup`] leaves for the rest of a parallel step's function.
struct ParSetup {
    lo: Value,
    hi: Value,
    /// Index into [`Layout::stores`] of the store that gives the iteration space.
    over: usize,
    rank: usize,
    reds: Vec<RedBuf>,
    /// The loop's extent on each dimension.
    over_ext: Vec<Value>,
}

struct FnLower<'a, 'f> {
    /// The address of the back end's cancel flag.
    cancel_flag: i64,
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

    // ---- function skeletons ------------------------------------------------------------

    /// Creates the entry block and binds the function's parameters.
    fn entry(&mut self) -> (Value, Value) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let p = self.b.block_params(entry).to_vec();
        self.frame = p[0];
        self.red = p[1];
        (p[2], p[3])
    }

    /// A sequential step: `insts` are the top-level instructions from position `pos`.
    fn build_sequential(&mut self, insts: &[Inst], pos: usize) -> LResult<()> {
        self.entry();
        let mut scan = Scan::default();
        scan.body(insts, 0)?;
        self.materialize(&scan, pos)?;
        for &param in &scan.accessed {
            self.load_view(param, None)?;
        }
        for inst in insts {
            self.lower_inst(inst)?;
        }
        // Spill what later steps need.
        for inst in insts {
            for r in &inst.results {
                if let Some(&word) = self.top.spill.get(r) {
                    let (val, ty) = self.val(*r)?;
                    self.spill_types.insert(*r, ty);
                    self.b
                        .ins()
                        .store(MemFlagsData::trusted(), val, self.frame, (word * 8) as i32);
                }
            }
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.finish();
        Ok(())
    }

    /// The common start of a parallel step's function (scalar or vector) for the top-level loop
    /// `pl` at position `pos`: binds the function's parameters, recomputes or loads the
    /// top-level values the body uses, loads the views of the stores it accesses, decides how
    /// each reduction target is reduced into, and loads the loop's extents.
    fn parallel_setup(&mut self, pl: &ParallelLoop, pos: usize) -> LResult<ParSetup> {
        let (lo, hi) = self.entry();
        let (over, over_slot) = self.layout.store(pl.over)?;
        let rank = over_slot.rank;
        if pl.indices.len() != rank {
            return Err(format!(
                "parallel loop over parameter {} (rank {rank}) has {} indices",
                pl.over,
                pl.indices.len()
            ));
        }
        let mut scan = Scan::default();
        scan.body(&pl.body, 1)?;
        self.materialize(&scan, pos)?;

        // Reduction targets: in place when every reduction's dim-0 index is the loop's
        // dim-0 index (chunks then touch disjoint rows), else a chunk-private buffer.
        let mut reds = Vec::new();
        for (&param, firsts) in &scan.reduces {
            let (store, slot) = self.layout.store(param)?;
            let Privilege::Reduce(op) = slot.privilege else {
                return Err(format!(
                    "reduction into store parameter {param}, which has {:?} privilege",
                    slot.privilege
                ));
            };
            let in_place =
                rank >= 1 && slot.rank >= 1 && firsts.iter().all(|f| *f == Some(pl.indices[0]));
            if !in_place {
                let mode = if slot.rank == 0 {
                    RedMode::Register
                } else {
                    RedMode::Buffer
                };
                reds.push(RedBuf { store, op, mode });
            }
        }
        reds.sort_by_key(|r| r.store);
        let modes: HashMap<u32, (usize, RedMode)> = reds
            .iter()
            .enumerate()
            .map(|(i, r)| (self.layout.stores[r.store].param, (i, r.mode)))
            .collect();
        for &param in &scan.accessed {
            self.load_view(param, modes.get(&param).copied())?;
        }
        let over_ext: Vec<Value> = (0..rank)
            .map(|d| self.frame_word(types::I64, over_slot.extent(d)))
            .collect();

        self.par = Some(ParCx {
            loop_dims: pl
                .indices
                .iter()
                .enumerate()
                .map(|(d, &v)| (v, d))
                .collect(),
            obligations: BTreeSet::new(),
        });
        Ok(ParSetup {
            lo,
            hi,
            over,
            rank,
            reds,
            over_ext,
        })
    }

    /// Writes the register accumulators of rank-0 reduction targets into their one-element
    /// buffers (at the current position, the function's exit), returns 0 and finishes the
    /// function.
    fn parallel_exit(&mut self, reds: &[RedBuf], finals: &HashMap<u32, Value>) -> LResult<()> {
        for (i, r) in reds.iter().enumerate() {
            if r.mode == RedMode::Register {
                let param = self.layout.stores[r.store].param;
                let val = match finals.get(&param) {
                    Some(&v) => v,
                    None => {
                        let Some(acc) = self.views.get(&param).and_then(|v| v.acc) else {
                            continue;
                        };
                        self.b.use_var(acc)
                    }
                };
                let ptr = self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32);
                self.b.ins().store(MemFlagsData::trusted(), val, ptr, 0);
            }
        }
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.finish();
        Ok(())
    }

    /// A parallel step for the top-level loop `pl` at position `pos`.
    fn build_parallel(&mut self, pl: &ParallelLoop, pos: usize) -> LResult<StepKind> {
        let ParSetup {
            lo,
            hi,
            over,
            rank,
            reds,
            over_ext,
        } = self.parallel_setup(pl, pos)?;
        let exit = self.b.create_block();
        let mut grouped = false;
        if rank == 0 {
            self.lower_body(&pl.body)?;
            self.b.ins().jump(exit, &[]);
        } else {
            let go = self.rows_guard(lo, hi, &over_ext);
            let versioned = has_for_loop(&pl.body);
            // Rows with `for` loops inside that reduce into leaf stores: eight points at a time
            // where they can, their contributions combined in registers (unless the loop
            // jams, which keeps one leaf per point).
            let targets = if rank == 1 && versioned && !self.jams.contains_key(&pos) {
                self.group_targets(pl)?
            } else {
                Vec::new()
            };
            grouped = !targets.is_empty();
            let start = self.b.create_block();
            self.b.ins().brif(go, start, &[], exit, &[]);
            self.b.switch_to_block(start);
            if versioned {
                // Loops with sequential loops inside (sparse rows, reductions over a
                // dimension) do not vectorize; they get a second copy of the loop nest for the
                // usual case of unit innermost strides, where every innermost index scales by
                // a constant (a shift, folded into the address) and no stride occupies a
                // register.
                let general = self.views.clone();
                let mut unit = self.b.ins().iconst(types::I8, 1);
                let mut params: Vec<u32> = general.keys().copied().collect();
                params.sort_unstable();
                for param in params {
                    let (_, slot) = self.layout.store(param)?;
                    let size = i64::try_from(slot.dtype.size()).map_err(|e| e.to_string())?;
                    let Some(view) = self.views.get_mut(&param) else {
                        continue;
                    };
                    let Some(inner) = view.stride.last_mut() else {
                        continue;
                    };
                    let ok = self.b.ins().icmp_imm_s(IntCC::Equal, *inner, size);
                    unit = self.b.ins().band(unit, ok);
                    *inner = self.b.ins().iconst(types::I64, size);
                    view.unit_inner = true;
                }
                // A third copy where, besides, every origin the body reads is zero (a
                // launch of one piece: a CSR row's columns and bounds then index `x`,
                // `crd` and `vals` directly, and two registers are free).
                let origins = origins_read(&pl.body);
                if !origins.is_empty() {
                    let mut zero = unit;
                    for (param, dim) in origins {
                        let (_, slot) = self.layout.store(param)?;
                        if dim >= slot.rank {
                            return Err(format!(
                                "dimension {dim} of store parameter {param}, which has rank {}",
                                slot.rank
                            ));
                        }
                        let o = self.frame_word(types::I64, slot.origin(dim));
                        let ok = self.b.ins().icmp_imm_s(IntCC::Equal, o, 0);
                        zero = self.b.ins().band(zero, ok);
                    }
                    let (at_zero, other) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(zero, at_zero, &[], other, &[]);
                    self.b.switch_to_block(at_zero);
                    self.zero_origins = true;
                    let nest = if grouped {
                        self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)
                    } else {
                        self.jammed_nest(pl, pos, lo, hi, &over_ext, exit)
                    };
                    self.zero_origins = false;
                    nest?;
                    self.b.switch_to_block(other);
                }
                let (fast, slow) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(unit, fast, &[], slow, &[]);
                self.b.switch_to_block(fast);
                if grouped {
                    self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)?;
                } else {
                    self.jammed_nest(pl, pos, lo, hi, &over_ext, exit)?;
                }
                self.views = general;
                self.b.switch_to_block(slow);
            }
            if grouped {
                self.grouped_nest(pl, lo, hi, &over_ext, exit, &targets)?;
            } else {
                self.loop_nest(pl, lo, hi, &over_ext, exit)?;
            }
        }
        self.b.switch_to_block(exit);
        self.parallel_exit(&reds, &HashMap::new())?;
        let mut kind = self.parallel_step(over, reds);
        if let StepKind::Parallel { grouped: g, .. } = &mut kind {
            *g = grouped;
        }
        Ok(kind)
    }

    /// The step a parallel loop over top-level loop `over` compiled to, with the bounds
    /// obligations its lowering collected and its reduction buffers.
    pub(crate) fn parallel_step(&mut self, over: usize, reds: Vec<RedBuf>) -> StepKind {
        let obligations = self
            .par
            .take()
            .map(|p| p.obligations.into_iter().collect())
            .unwrap_or_default();
        StepKind::Parallel {
            over,
            obligations,
            reds,
            spread: false,
            grouped: false,
        }
    }

    /// Whether a parallel step over rows `lo..hi` runs at all: some rows, and every inner
    /// extent (`over_ext[1..]`) positive.
    pub(crate) fn rows_guard(&mut self, lo: Value, hi: Value, over_ext: &[Value]) -> Value {
        let mut go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        for &e in over_ext.get(1..).unwrap_or_default() {
            let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, e, 0);
            go = self.b.ins().band(go, pos);
        }
        go
    }

    /// The loop nest of a parallel step with rank at least 1 over rows `lo..hi` (at least one,
    /// every inner extent positive), from the current block, leaving to `exit`.
    fn loop_nest(
        &mut self,
        pl: &ParallelLoop,
        lo: Value,
        hi: Value,
        over_ext: &[Value],
        exit: Block,
    ) -> LResult<()> {
        let heads = self.loop_heads(over_ext.len());
        self.b.ins().jump(heads[0], &[BlockArg::Value(lo)]);
        let mark = self.env.mark();
        self.enter_loop_heads(pl, &heads, None);
        self.lower_body(&pl.body)?;
        self.loop_latches(&heads, hi, over_ext, exit);
        self.env.pop_to(mark);
        Ok(())
    }

    /// The grouped leaf stores that `pl`'s body stores into at the loop's index, with their
    /// operators and element types.
    fn group_targets(&self, pl: &ParallelLoop) -> LResult<Vec<(u32, ReduceOp, DType)>> {
        let mut out = Vec::new();
        for (param, op) in grouped_stores(pl, self.grouped) {
            let (_, slot) = self.layout.store(param)?;
            out.push((param, op, slot.dtype));
        }
        Ok(out)
    }

    /// The points of `lo..hi` that lie in whole aligned groups of
    /// `2^`[`weft_ir::reduction::GROUP_LEVEL`] (aligned in the coordinates of the view the
    /// rank-1 loop `pl` runs over, as the launcher counts them): `a..b`, with `lo <= a <= b
    /// <= hi`.
    pub(crate) fn group_bounds(
        &mut self,
        pl: &ParallelLoop,
        lo: Value,
        hi: Value,
    ) -> LResult<(Value, Value)> {
        use weft_ir::reduction::GROUP_LEVEL;
        let size = 1i64 << GROUP_LEVEL;
        let (_, slot) = self.layout.store(pl.over)?;
        // The view's coordinate of row `lo`, as the launcher counts it.
        let origin = self.frame_word(types::I64, slot.origin(0));
        let first = self.b.ins().iadd(origin, lo);
        let back = self.b.ins().ineg(first);
        let pad = self.b.ins().band_imm_s(back, size - 1);
        let start = self.b.ins().iadd(lo, pad);
        let a = self.b.ins().smin(start, hi);
        let span = self.b.ins().isub(hi, a);
        let whole = self.b.ins().ushr_imm_u(span, i64::from(GROUP_LEVEL));
        let bulk = self.b.ins().ishl_imm_u(whole, i64::from(GROUP_LEVEL));
        let b = self.b.ins().iadd(a, bulk);
        Ok((a, b))
    }

    /// [`Self::loop_nest`] of a rank-1 loop whose points store their contributions into the
    /// grouped leaf stores `targets` (see [`Target::grouped`]): the points of each whole
    /// aligned group of eight in `lo..hi` run one after another, their contributions kept in
    /// registers and combined by the canonical pairwise tree, which goes to the group's
    /// first slot; the points before the first group and after the last store their own.
    fn grouped_nest(
        &mut self,
        pl: &ParallelLoop,
        lo: Value,
        hi: Value,
        over_ext: &[Value],
        exit: Block,
        targets: &[(u32, ReduceOp, DType)],
    ) -> LResult<()> {
        use weft_ir::reduction::GROUP_LEVEL;
        let [index] = pl.indices[..] else {
            return Err("internal: a grouped loop of rank other than 1".into());
        };
        let size = 1i64 << GROUP_LEVEL;
        let (a, b) = self.group_bounds(pl, lo, hi)?;
        let (head, groups) = (self.b.create_block(), self.b.create_block());
        let some_head = self.b.ins().icmp(IntCC::SignedLessThan, lo, a);
        self.b.ins().brif(some_head, head, &[], groups, &[]);

        self.b.switch_to_block(head);
        self.loop_nest(pl, lo, a, over_ext, groups)?;

        self.b.switch_to_block(groups);
        self.stepped_nest(pl, (a, b, hi), size, over_ext, exit, &mut |fl, i| {
            // Per target, the complete nodes of the points so far, as (level, value), their
            // levels strictly decreasing: each point's contribution is combined with its
            // left sibling as soon as that exists, so that at most one value per level is
            // live (the tree's bits, with a quarter of the registers of combining at the end).
            let mut stacks: Vec<Vec<(u32, Value)>> = vec![Vec::new(); targets.len()];
            for k in 0..size {
                fl.captured = Some(targets.iter().map(|t| (t.0, Vec::new())).collect());
                let at = fl.b.ins().iadd_imm_s(i, k);
                let mark = fl.env.mark();
                fl.env.define(index, at, DType::I64);
                let lowered = fl.lower_body(&pl.body);
                fl.env.pop_to(mark);
                let caught = fl.captured.take().unwrap_or_default();
                lowered?;
                for (((param, op, dtype), (_, vals)), stack) in
                    targets.iter().zip(caught).zip(&mut stacks)
                {
                    let [c] = vals[..] else {
                        return Err(format!(
                            "internal: a point stores {} values into grouped leaf store {param}",
                            vals.len()
                        ));
                    };
                    let mut node = (0u32, c);
                    while let Some(&(level, left)) = stack.last()
                        && level == node.0
                    {
                        stack.pop();
                        node = (level + 1, fl.combine(*op, *dtype, left, node.1));
                    }
                    stack.push(node);
                }
            }
            let mark = fl.env.mark();
            fl.env.define(index, i, DType::I64);
            for ((param, _, _), stack) in targets.iter().zip(stacks) {
                let [(level, node)] = stack[..] else {
                    return Err(format!(
                        "internal: grouped leaf store {param} left {} nodes of a group",
                        stack.len()
                    ));
                };
                if level != GROUP_LEVEL {
                    return Err(format!(
                        "internal: grouped leaf store {param} closed a node of level {level}"
                    ));
                }
                let addr = fl.address(&Access {
                    param: *param,
                    indices: vec![index],
                })?;
                fl.b.ins().store(data_flags(), node, addr, 0);
            }
            fl.env.pop_to(mark);
            Ok(())
        })
    }

    /// From the current block: the points `start..end` (a multiple of `step` of them) run
    /// `step` at a time by `body` (given the first point's index), then the points
    /// `end..hi` one at a time by [`Self::loop_nest`]; on to `exit`.
    fn stepped_nest(
        &mut self,
        pl: &ParallelLoop,
        (start, end, hi): (Value, Value, Value),
        step: i64,
        over_ext: &[Value],
        exit: Block,
        body: &mut dyn FnMut(&mut Self, Value) -> LResult<()>,
    ) -> LResult<()> {
        let (head, after, rest) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(head, types::I64);
        let some = self.b.ins().icmp(IntCC::SignedLessThan, start, end);
        self.b
            .ins()
            .brif(some, head, &[BlockArg::Value(start)], after, &[]);

        self.b.switch_to_block(head);
        let i = self.b.block_params(head)[0];
        body(self, i)?;
        let next = self.b.ins().iadd_imm_s(i, step);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, end);
        self.b
            .ins()
            .brif(more, head, &[BlockArg::Value(next)], after, &[]);

        self.b.switch_to_block(after);
        let left = self.b.ins().icmp(IntCC::SignedLessThan, end, hi);
        self.b.ins().brif(left, rest, &[], exit, &[]);
        self.b.switch_to_block(rest);
        self.loop_nest(pl, end, hi, over_ext, exit)
    }

    /// [`Self::loop_nest`], its points taken several at a time by the first jammed body of the
    /// loop at `pos` whose loops the vector code takes as it takes the loop's own (see
    /// [`jam`]), the rest one at a time.
    fn jammed_nest(
        &mut self,
        pl: &ParallelLoop,
        pos: usize,
        lo: Value,
        hi: Value,
        over_ext: &[Value],
        exit: Block,
    ) -> LResult<()> {
        let jams = self.jams;
        let Some(jam) = jams
            .get(&pos)
            .and_then(|js| js.iter().find(|j| self.jam_keeps_vectors(pl, j)))
        else {
            return self.loop_nest(pl, lo, hi, over_ext, exit);
        };
        let rows = i64::try_from(jam.points.len()).map_err(|e| e.to_string())?;
        // `hi - lo` is positive: the rows guard let the step in.
        let count = self.b.ins().isub(hi, lo);
        let whole = self.b.ins().udiv_imm_u(count, rows);
        let bulk = self.b.ins().imul_imm_s(whole, rows);
        let end = self.b.ins().iadd(lo, bulk);
        if !self.zero_origins {
            self.loop_counts.jammed += 1;
        }
        self.stepped_nest(pl, (lo, end, hi), rows, over_ext, exit, &mut |fl, i| {
            let mark = fl.env.mark();
            for (k, &p) in jam.points.iter().enumerate() {
                let at = if k == 0 {
                    i
                } else {
                    fl.b.ins().iadd_imm_s(i, k as i64)
                };
                fl.env.define(p, at, DType::I64);
                // Below `end`, within the rows the launcher proves.
                if let Some(par) = &mut fl.par {
                    par.loop_dims.insert(p, 0);
                }
            }
            fl.in_jam = true;
            let lowered = fl.lower_body(&jam.body);
            fl.in_jam = false;
            fl.env.pop_to(mark);
            lowered
        })
    }

    /// Whether every `for` loop of `jam` runs as vectors (and in wide bodies) where the loop's
    /// own does: a jam that cost a loop its vectors would cost more than it saves.
    fn jam_keeps_vectors(&self, pl: &ParallelLoop, jam: &jam::Jam) -> bool {
        let fors = |body: &[Inst]| -> Vec<ForLoop> {
            body.iter()
                .filter_map(|i| match &i.op {
                    Op::For(l) => Some(l.clone()),
                    _ => None,
                })
                .collect()
        };
        // The constants the loops will see: those lowered so far, and the body's own (the
        // jammed body keeps them).
        let mut consts = self.consts.clone();
        for inst in &pl.body {
            if let (Op::Const(c), [r]) = (&inst.op, &inst.results[..]) {
                consts.insert(*r, *c);
            }
        }
        let (own, jammed) = (fors(&pl.body), fors(&jam.body));
        own.len() == jammed.len()
            && own
                .iter()
                .zip(&jammed)
                .all(|(a, b)| self.lane_shape(a, &consts) <= self.lane_shape(b, &consts))
    }

    /// How the vector code takes `l`, with the constants `consts` defined before it: 0 as
    /// scalar code, 1 as vectors of lanes, 2 with its bulk in a wide body too.
    fn lane_shape(&self, l: &ForLoop, consts: &HashMap<ValueId, Scalar>) -> u8 {
        let Some(wide_isa) = self.lanes else {
            return 0;
        };
        let views = &self.views;
        let unit = |param: u32| views.get(&param).is_some_and(|v| v.unit_inner);
        let konst = |v: ValueId| consts.get(&v).copied();
        if lanes::plan(l, self.layout, self.types, &unit, &konst).is_err() {
            return 0;
        }
        let wide = wide_isa.is_some_and(|isa| {
            lanes::plan_wide(l, self.layout, self.types, &unit, &konst, isa)
                .is_ok_and(|p| wide::compile_fold(isa, l, &p, &konst).is_ok())
        });
        1 + u8::from(wide)
    }

    /// One loop head block per dimension of a loop nest, each with its index as parameter.
    pub(crate) fn loop_heads(&mut self, dims: usize) -> Vec<Block> {
        (0..dims)
            .map(|_| {
                let blk = self.b.create_block();
                self.b.append_block_param(blk, types::I64);
                blk
            })
            .collect()
    }

    /// Fills the loop heads of `pl`'s first `heads.len()` dimensions: each defines its index
    /// and enters the next dimension at 0. The innermost head jumps to `inner` if given, or
    /// stays current for the body.
    pub(crate) fn enter_loop_heads(
        &mut self,
        pl: &ParallelLoop,
        heads: &[Block],
        inner: Option<Block>,
    ) {
        for (d, &head) in heads.iter().enumerate() {
            self.b.switch_to_block(head);
            let i = self.b.block_params(head)[0];
            self.env.define(pl.indices[d], i, DType::I64);
            if let Some(&next) = heads.get(d + 1) {
                let zero = self.b.ins().iconst(types::I64, 0);
                self.b.ins().jump(next, &[BlockArg::Value(zero)]);
            } else if let Some(inner) = inner {
                self.b.ins().jump(inner, &[]);
            }
        }
    }

    /// The latches of a loop nest, innermost first, from the current block: dimension 0 runs
    /// to `hi`, dimension `d > 0` to `over_ext[d]`; the nest leaves to `exit`.
    pub(crate) fn loop_latches(
        &mut self,
        heads: &[Block],
        hi: Value,
        over_ext: &[Value],
        exit: Block,
    ) {
        for (d, &head) in heads.iter().enumerate().rev() {
            let i = self.b.block_params(head)[0];
            let next = self.b.ins().iadd_imm_s(i, 1);
            let limit = if d == 0 { hi } else { over_ext[d] };
            let more = self.b.ins().icmp(IntCC::SignedLessThan, next, limit);
            let out = if d == 0 { exit } else { self.b.create_block() };
            self.b
                .ins()
                .brif(more, head, &[BlockArg::Value(next)], out, &[]);
            if d > 0 {
                self.b.switch_to_block(out);
            }
        }
    }

    /// Ends the current block with the bounds checks `checks` (index, extent, fault code): on
    /// to `cont` with `cont_args` if every index is below its extent, else to a cold block
    /// (emitted by [`Self::finish`]) that returns the first failing check's code.
    fn check_or_fault(
        &mut self,
        checks: Vec<(Value, Value, i64)>,
        cont: Block,
        cont_args: &[BlockArg],
    ) {
        // One comparison per index: against the least of its extents (the fault block finds
        // which one failed). Extents are loop-invariant, so their minimum leaves the loop.
        let mut by_index: Vec<(Value, Value)> = Vec::new();
        for &(idx, e, _) in &checks {
            match by_index.iter_mut().find(|(i, _)| *i == idx) {
                Some((_, m)) => *m = self.b.ins().umin(*m, e),
                None => by_index.push((idx, e)),
            }
        }
        if by_index.is_empty() {
            self.b.ins().jump(cont, cont_args);
            return;
        }
        // A branch per comparison (a compare and a jump each), all to one cold block.
        let fail = self.b.create_block();
        self.b.set_cold_block(fail);
        let last = by_index.len() - 1;
        for (k, (idx, e)) in by_index.into_iter().enumerate() {
            let bad = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, idx, e);
            if k == last {
                self.b.ins().brif(bad, fail, &[], cont, cont_args);
            } else {
                let next = self.b.create_block();
                self.b.ins().brif(bad, fail, &[], next, &[]);
                self.b.switch_to_block(next);
            }
        }
        self.pending.push(PendingFail {
            block: fail,
            checks,
        });
    }

    /// Ends the current block with a test of the cancel flag: on in a new block if it is
    /// clear, else to a cold block that returns [`CANCELLED`]. The back edge of every `for`
    /// loop that no store bounds ([`bounded_by_a_store`]) runs it, so a runaway loop stops
    /// soon after the flag is set; a plain load and a predicted branch per iteration.
    pub(crate) fn check_cancel(&mut self) {
        let at = self.b.ins().iconst(self.ptr_ty, self.cancel_flag);
        let set = self
            .b
            .ins()
            .load(types::I32, MemFlagsData::trusted(), at, 0);
        let stop = self.b.create_block();
        self.b.set_cold_block(stop);
        let on = self.b.create_block();
        self.b.ins().brif(set, stop, &[], on, &[]);
        self.b.switch_to_block(stop);
        let code = self.b.ins().iconst(types::I64, CANCELLED);
        self.b.ins().return_(&[code]);
        self.b.switch_to_block(on);
    }

    /// Emits the pending fault blocks and seals everything.
    fn finish(&mut self) {
        for pf in std::mem::take(&mut self.pending) {
            self.b.switch_to_block(pf.block);
            // The code of the first failing dimension.
            let mut code = self.b.ins().iconst(types::I64, pf.checks[0].2);
            for &(idx, ext, c) in pf.checks.iter().rev() {
                let bad = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThanOrEqual, idx, ext);
                let cv = self.b.ins().iconst(types::I64, c);
                code = self.b.ins().select(bad, cv, code);
            }
            self.b.ins().return_(&[code]);
        }
        self.b.seal_all_blocks();
    }

    /// Makes the top-level values that `scan` uses but does not define available, for a step
    /// at top-level position `pos`: recomputed in the entry block if pure, else loaded from
    /// their spill words.
    fn materialize(&mut self, scan: &Scan, pos: usize) -> LResult<()> {
        let mut need: BTreeSet<(usize, ValueId)> = BTreeSet::new();
        let mut work: Vec<ValueId> = scan
            .uses
            .iter()
            .copied()
            .filter(|v| !scan.defs.contains(v))
            .collect();
        let mut visited = HashSet::new();
        while let Some(v) = work.pop() {
            if !visited.insert(v) {
                continue;
            }
            let Some(&(p, inst)) = self.top.defs.get(&v) else {
                // Not a top-level value: the lowering reports it as undefined when used.
                continue;
            };
            if p >= pos {
                continue;
            }
            need.insert((p, v));
            if self.top.remat.contains(&v) {
                work.extend(operands(&inst.op));
            }
        }
        for (_, v) in need {
            if self.env.map.contains_key(&v) {
                continue;
            }
            let inst = self.top.defs[&v].1;
            if self.top.remat.contains(&v) {
                self.lower_inst(inst)?;
            } else if let Some(&word) = self.top.spill.get(&v) {
                let ty = *self
                    .spill_types
                    .get(&v)
                    .ok_or_else(|| format!("internal: type of spilled value {v} unknown"))?;
                let val = self.b.ins().load(
                    cl_type(ty),
                    MemFlagsData::trusted(),
                    self.frame,
                    (word * 8) as i32,
                );
                self.env.define(v, val, ty);
            }
        }
        Ok(())
    }

    // ---- frame and views -----------------------------------------------------------------

    fn frame_word(&mut self, ty: Type, word: usize) -> Value {
        // A store's words and the scalars never change while a function runs (only spill
        // words do, and those are read elsewhere): Cranelift may move the load out of loops.
        self.b.ins().load(
            ty,
            frame_flags().with_can_move(),
            self.frame,
            (word * 8) as i32,
        )
    }

    /// Loads the registers of store parameter `param` for the accesses of this function.
    fn load_view(&mut self, param: u32, red: Option<(usize, RedMode)>) -> LResult<()> {
        let (_, slot) = self.layout.store(param)?;
        let slot = slot.clone();
        let ext: Vec<Value> = (0..slot.rank)
            .map(|d| self.frame_word(types::I64, slot.extent(d)))
            .collect();
        let view = match red {
            None => View {
                base: self.frame_word(self.ptr_ty, slot.ptr()),
                stride: (0..slot.rank)
                    .map(|d| self.frame_word(types::I64, slot.stride(d)))
                    .collect(),
                ext,
                acc: None,
                unit_inner: false,
                private: slot.private,
            },
            Some((i, RedMode::Buffer)) => View {
                base: self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32),
                stride: (0..slot.rank)
                    .map(|d| self.frame_word(types::I64, slot.dense_stride(d)))
                    .collect(),
                ext,
                acc: None,
                unit_inner: false,
                private: true,
            },
            Some((i, RedMode::Register)) => {
                let Privilege::Reduce(op) = slot.privilege else {
                    return Err(format!("store parameter {param} is not a reduction target"));
                };
                let var = self.b.declare_var(cl_type(slot.dtype));
                // The accumulator starts from the one-element buffer, which the launcher fills
                // with the identity for each chunk: a chunk run in several calls (as with
                // leaf stores) carries it from call to call. Register accumulators are exact
                // operators, so the order of the calls' partials does not change the bits.
                let ptr = self
                    .b
                    .ins()
                    .load(self.ptr_ty, frame_flags(), self.red, (i * 8) as i32);
                let first = self
                    .b
                    .ins()
                    .load(cl_type(slot.dtype), MemFlagsData::trusted(), ptr, 0);
                self.b.def_var(var, first);
                let id = self.constant(op.identity(slot.dtype));
                View {
                    base: id,
                    stride: vec![],
                    ext,
                    acc: Some(var),
                    unit_inner: false,
                    private: true,
                }
            }
        };
        self.views.insert(param, view);
        Ok(())
    }

    // ---- values --------------------------------------------------------------------------

    fn val(&self, v: ValueId) -> LResult<(Value, DType)> {
        self.env
            .map
            .get(&v)
            .copied()
            .ok_or_else(|| format!("value {v} is used where it is not defined"))
    }

    fn typed(&self, v: ValueId, want: DType, what: &str) -> LResult<Value> {
        let (val, ty) = self.val(v)?;
        if ty != want {
            return Err(format!("{what} {v} has type {ty}, expected {want}"));
        }
        Ok(val)
    }

    fn iconst(&mut self, ty: Type, v: i64) -> Value {
        let v = match ty {
            types::I8 => i64::from(v as u8),
            types::I32 => i64::from(v as u32),
            _ => v,
        };
        self.b.ins().iconst(ty, v)
    }

    fn constant(&mut self, s: Scalar) -> Value {
        match s {
            Scalar::F32(x) => self.b.ins().f32const(x),
            Scalar::F64(x) => self.b.ins().f64const(x),
            Scalar::I32(x) => self.iconst(types::I32, i64::from(x)),
            Scalar::I64(x) => self.iconst(types::I64, x),
            Scalar::Bool(x) => self.iconst(types::I8, i64::from(x)),
        }
    }

    fn call_math(&mut self, f: MathFn, ty: DType, args: &[Value]) -> LResult<Value> {
        let fref = match self.math_refs.get(&(f, ty)) {
            Some(r) => *r,
            None => {
                let id = *self
                    .math
                    .ids
                    .get(&(f, ty))
                    .ok_or_else(|| format!("internal: no shim for {f:?} on {ty}"))?;
                let r = self.module.declare_func_in_func(id, self.b.func);
                self.math_refs.insert((f, ty), r);
                r
            }
        };
        let call = self.b.ins().call(fref, args);
        Ok(self.b.inst_results(call)[0])
    }

    // ---- instructions --------------------------------------------------------------------

    fn lower_body(&mut self, body: &[Inst]) -> LResult<()> {
        let mark = self.env.mark();
        for inst in body {
            self.lower_inst(inst)?;
        }
        self.env.pop_to(mark);
        Ok(())
    }

    fn one_result(inst: &Inst) -> LResult<ValueId> {
        match inst.results.as_slice() {
            [r] => Ok(*r),
            _ => Err(format!(
                "{:?} must define exactly one value, defines {}",
                op_name(&inst.op),
                inst.results.len()
            )),
        }
    }

    fn no_result(inst: &Inst) -> LResult<()> {
        if inst.results.is_empty() {
            Ok(())
        } else {
            Err(format!("{} defines no values", op_name(&inst.op)))
        }
    }

    fn lower_inst(&mut self, inst: &Inst) -> LResult<()> {
        let (val, ty) = match &inst.op {
            Op::Const(s) => {
                if let [r] = inst.results[..] {
                    self.consts.insert(r, *s);
                }
                (self.constant(*s), s.dtype())
            }
            Op::Param(p) => match self.layout.slots.get(*p as usize) {
                Some(Slot::Scalar(s)) => {
                    let slot = &self.layout.scalars[*s];
                    let (dt, off) = (slot.dtype, slot.off);
                    (self.frame_word(cl_type(dt), off), dt)
                }
                _ => return Err(format!("parameter {p} is not a scalar")),
            },
            Op::Binary(op, a, b) => self.binary(*op, *a, *b)?,
            Op::Unary(op, a) => self.unary(*op, *a)?,
            Op::Cmp(op, a, b) => (self.cmp(*op, *a, *b)?, DType::Bool),
            Op::Select(c, a, b) => {
                let c = self.typed(*c, DType::Bool, "select condition")?;
                let (a, ta) = self.val(*a)?;
                let (b, tb) = self.val(*b)?;
                if ta != tb {
                    return Err(format!("select of {ta} and {tb}"));
                }
                (self.b.ins().select(c, a, b), ta)
            }
            Op::Cast(to, v) => {
                let (x, from) = self.val(*v)?;
                match self.widened.get(v) {
                    Some(&(narrow, wide)) if narrow == x && *to == DType::I64 => (wide, *to),
                    _ => (self.cast(x, from, *to), *to),
                }
            }
            Op::Bitcast(to, v) => {
                let (x, from) = self.val(*v)?;
                if !weft_ir::validate::bitcast_ok(from, *to) {
                    return Err(format!("bitcast of {from} to {to}"));
                }
                let y = if from == *to {
                    x
                } else {
                    // Same lane count, so the byte order does not matter; little-endian is
                    // the IR's definition anyway.
                    let flags = MemFlagsData::new().with_endianness(ir::Endianness::Little);
                    self.ins().bitcast(cl_type(*to), flags, x)
                };
                (y, *to)
            }
            Op::Extent { param, dim } | Op::Origin { param, dim } => {
                let (_, slot) = self.layout.store(*param)?;
                let d = *dim as usize;
                if d >= slot.rank {
                    return Err(format!(
                        "dimension {dim} of store parameter {param}, which has rank {}",
                        slot.rank
                    ));
                }
                let is_extent = matches!(inst.op, Op::Extent { .. });
                if !is_extent && self.zero_origins {
                    // (Not recorded as a constant: the other copies of the loop nest read
                    // the frame word.)
                    (self.iconst(types::I64, 0), DType::I64)
                } else {
                    let word = if is_extent {
                        slot.extent(d)
                    } else {
                        slot.origin(d)
                    };
                    (self.frame_word(types::I64, word), DType::I64)
                }
            }
            Op::Load(acc) => {
                let (_, slot) = self.layout.store(acc.param)?;
                if !slot.privilege.can_read() {
                    return Err(format!(
                        "load from store parameter {}, which has {:?} privilege",
                        acc.param, slot.privilege
                    ));
                }
                let dt = slot.dtype;
                let addr = self.address(acc)?;
                if dt == DType::I32 {
                    let wide = self.b.ins().sload32(data_flags(), addr, 0);
                    let x = self.b.ins().ireduce(types::I32, wide);
                    if let [r] = inst.results[..] {
                        self.widened.insert(r, (x, wide));
                    }
                    (x, dt)
                } else {
                    let x = self.b.ins().load(cl_type(dt), data_flags(), addr, 0);
                    let x = if dt == DType::Bool {
                        // Any nonzero byte reads as true.
                        self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
                    } else {
                        x
                    };
                    (x, dt)
                }
            }
            Op::Store(acc, v) => {
                Self::no_result(inst)?;
                let (_, slot) = self.layout.store(acc.param)?;
                if !slot.privilege.can_write() {
                    return Err(format!(
                        "store to store parameter {}, which has {:?} privilege",
                        acc.param, slot.privilege
                    ));
                }
                let x = self.typed(*v, slot.dtype, "stored value")?;
                if let Some(caught) = &mut self.captured
                    && let Some((_, vals)) = caught.iter_mut().find(|(p, _)| *p == acc.param)
                {
                    vals.push(x);
                    return Ok(());
                }
                let addr = self.address(acc)?;
                self.b.ins().store(data_flags(), x, addr, 0);
                return Ok(());
            }
            Op::Reduce(acc, op, v) => {
                Self::no_result(inst)?;
                self.reduce(acc, *op, *v)?;
                return Ok(());
            }
            Op::Parallel(_) => {
                return Err("a parallel loop may appear only at the top level".into());
            }
            Op::For(l) => return self.lower_for(inst, l),
        };
        let r = Self::one_result(inst)?;
        self.env.define(r, val, ty);
        Ok(())
    }

    fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> LResult<(Value, DType)> {
        let (x, ta) = self.val(a)?;
        let (y, tb) = self.val(b)?;
        if ta != tb {
            return Err(format!("{} of {ta} and {tb}", op.name()));
        }
        let bad = || Err(format!("{} is not defined on {ta}", op.name()));
        let v = match ta {
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add => self.ins().fadd(x, y),
                BinaryOp::Sub => self.ins().fsub(x, y),
                BinaryOp::Mul => self.ins().fmul(x, y),
                BinaryOp::Div => self.ins().fdiv(x, y),
                BinaryOp::Min => self.ins().fmin(x, y),
                BinaryOp::Max => self.ins().fmax(x, y),
                BinaryOp::Rem => self.call_math(MathFn::Rem, ta, &[x, y])?,
                BinaryOp::Pow => self.call_math(MathFn::Ir(IrFn::Pow), ta, &[x, y])?,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr => {
                    return bad();
                }
            },
            DType::I32 | DType::I64 => {
                let ty = cl_type(ta);
                match op {
                    BinaryOp::Add => self.ins().iadd(x, y),
                    BinaryOp::Sub => self.ins().isub(x, y),
                    BinaryOp::Mul => self.ins().imul(x, y),
                    BinaryOp::Div | BinaryOp::Rem => {
                        // Never trap: a zero divisor gives 0, and -1 is handled apart
                        // (MIN / -1 wraps to MIN; any x % -1 is 0).
                        let zero = self.iconst(ty, 0);
                        let one = self.iconst(ty, 1);
                        let m1 = self.iconst(ty, -1);
                        let is0 = self.ins().icmp(IntCC::Equal, y, zero);
                        let is_m1 = self.ins().icmp(IntCC::Equal, y, m1);
                        let avoid = self.ins().bor(is0, is_m1);
                        let d = self.ins().select(avoid, one, y);
                        if op == BinaryOp::Rem {
                            // x % 1 == 0 covers both special divisors.
                            self.ins().srem(x, d)
                        } else {
                            let q = self.ins().sdiv(x, d);
                            let neg = self.ins().ineg(x);
                            let q = self.ins().select(is_m1, neg, q);
                            self.ins().select(is0, zero, q)
                        }
                    }
                    BinaryOp::Min => self.ins().smin(x, y),
                    BinaryOp::Max => self.ins().smax(x, y),
                    BinaryOp::And => self.ins().band(x, y),
                    BinaryOp::Or => self.ins().bor(x, y),
                    BinaryOp::Xor => self.ins().bxor(x, y),
                    // Cranelift takes the amount modulo the bit width, as the IR does.
                    BinaryOp::Shl => self.ins().ishl(x, y),
                    BinaryOp::Shr => self.ins().ushr(x, y),
                    BinaryOp::Pow => return bad(),
                }
            }
            DType::Bool => match op {
                BinaryOp::And | BinaryOp::Min => self.ins().band(x, y),
                BinaryOp::Or | BinaryOp::Max => self.ins().bor(x, y),
                BinaryOp::Xor => self.ins().bxor(x, y),
                _ => return bad(),
            },
        };
        Ok((v, ta))
    }

    fn unary(&mut self, op: UnaryOp, a: ValueId) -> LResult<(Value, DType)> {
        let (x, t) = self.val(a)?;
        let bad = || Err(format!("{} is not defined on {t}", op.name()));
        let v = match t {
            DType::F32 | DType::F64 => match op {
                UnaryOp::Neg => self.b.ins().fneg(x),
                UnaryOp::Abs => self.b.ins().fabs(x),
                UnaryOp::Sqrt => self.b.ins().sqrt(x),
                UnaryOp::Floor => self.b.ins().floor(x),
                UnaryOp::Ceil => self.b.ins().ceil(x),
                UnaryOp::Not => return bad(),
                _ => match IrFn::of_unary(op) {
                    Some(f) => self.call_math(MathFn::Ir(f), t, &[x])?,
                    None => return bad(),
                },
            },
            DType::I32 | DType::I64 => match op {
                UnaryOp::Neg => self.b.ins().ineg(x),
                UnaryOp::Abs => self.b.ins().iabs(x),
                UnaryOp::Not => self.b.ins().bnot(x),
                _ => return bad(),
            },
            DType::Bool => match op {
                UnaryOp::Not => self.b.ins().bxor_imm_u(x, 1),
                _ => return bad(),
            },
        };
        Ok((v, t))
    }

    fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> LResult<Value> {
        let (x, ta) = self.val(a)?;
        let (y, tb) = self.val(b)?;
        if ta != tb {
            return Err(format!("{} of {ta} and {tb}", op.name()));
        }
        Ok(match ta {
            DType::F32 | DType::F64 => self.b.ins().fcmp(float_cc(op), x, y),
            DType::I32 | DType::I64 => self.b.ins().icmp(int_cc(op, true), x, y),
            DType::Bool => self.b.ins().icmp(int_cc(op, false), x, y),
        })
    }

    fn cast(&mut self, x: Value, from: DType, to: DType) -> Value {
        use DType::*;
        match (from, to) {
            _ if from == to => x,
            (I32, I64) => self.ins().sextend(types::I64, x),
            (I64, I32) => self.ins().ireduce(types::I32, x),
            (Bool, I32 | I64) => self.ins().uextend(cl_type(to), x),
            (I32 | I64, F32 | F64) => self.ins().fcvt_from_sint(cl_type(to), x),
            (Bool, F32 | F64) => {
                let w = self.ins().uextend(types::I32, x);
                self.ins().fcvt_from_sint(cl_type(to), w)
            }
            (F32 | F64, I32 | I64) => self.ins().fcvt_to_sint_sat(cl_type(to), x),
            (F32, F64) => self.ins().fpromote(types::F64, x),
            (F64, F32) => self.ins().fdemote(types::F32, x),
            (I32 | I64, Bool) => self.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
            (F32 | F64, Bool) => {
                let zero = if from == F32 {
                    self.ins().f32const(0.0)
                } else {
                    self.ins().f64const(0.0)
                };
                // Unordered or not equal: NaN is true, as in C.
                self.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            // Covered by the guard above; kept total without panicking.
            _ => x,
        }
    }

    /// The address of the element `acc`, after checking every index that is not proven in
    /// bounds.
    fn address(&mut self, acc: &Access) -> LResult<Value> {
        let (store, slot) = self.layout.store(acc.param)?;
        if acc.indices.len() != slot.rank {
            return Err(format!(
                "access to store parameter {} (rank {}) with {} indices",
                acc.param,
                slot.rank,
                acc.indices.len()
            ));
        }
        let view = self
            .views
            .get(&acc.param)
            .ok_or_else(|| format!("internal: store parameter {} not loaded", acc.param))?;
        let (base, ext, stride) = (view.base, view.ext.clone(), view.stride.clone());
        let mut checks = Vec::new();
        let offset = self.index_offset(
            (acc.param, store),
            &acc.indices,
            (&ext, &stride),
            &mut checks,
        )?;
        if !checks.is_empty() {
            let cont = self.b.create_block();
            self.check_or_fault(checks, cont, &[]);
            self.b.switch_to_block(cont);
        }
        Ok(match offset {
            None => base,
            Some(o) => self.b.ins().iadd(base, o),
        })
    }

    /// The byte offset of the element at `indices` on the first dimensions of store parameter
    /// `param` (layout store `store`), whose view has extents and strides `ext` and `stride`
    /// (`None` for no indices); the bounds checks these indices need are added to `checks`.
    fn index_offset(
        &mut self,
        (param, store): (u32, usize),
        indices: &[ValueId],
        (ext, stride): (&[Value], &[Value]),
        checks: &mut Vec<(Value, Value, i64)>,
    ) -> LResult<Option<Value>> {
        let mut offset: Option<Value> = None;
        for (d, &iv) in indices.iter().enumerate() {
            let idx = self.typed(iv, DType::I64, "index")?;
            if !self.index_proven(iv, store, param, d) {
                let code = self.faults.code(FaultSite {
                    param,
                    dim: d as u32,
                });
                checks.push((idx, ext[d], code));
            }
            let term = self.b.ins().imul(idx, stride[d]);
            offset = Some(match offset {
                None => term,
                Some(o) => self.b.ins().iadd(o, term),
            });
        }
        Ok(offset)
    }

    /// Whether index `iv` on dimension `d` of store parameter `param` (layout store `store`)
    /// needs no check here: an enclosing `for` loop checked its range, or it is a parallel
    /// loop's own index (the launcher checks those ranges, recorded as an obligation).
    fn index_proven(&mut self, iv: ValueId, store: usize, param: u32, d: usize) -> bool {
        if self.for_proven.contains(&(iv, param, d)) {
            return true;
        }
        let konst = match self.consts.get(&iv) {
            Some(Scalar::I64(c)) if *c >= 0 => Some(*c),
            _ => None,
        };
        let top = self.in_for == 0;
        let Some(p) = &mut self.par else {
            return false;
        };
        if let (Some(c), true) = (konst, top) {
            // A constant index of an access at the top of the point's body, which every point
            // makes: the launcher checks it once.
            p.obligations.insert(Obligation {
                loop_dim: 0,
                store,
                dim: d,
                index: Some(c),
            });
            return true;
        }
        let Some(&loop_dim) = p.loop_dims.get(&iv) else {
            return false;
        };
        p.obligations.insert(Obligation {
            loop_dim,
            store,
            dim: d,
            index: None,
        });
        true
    }

    fn combine(&mut self, op: ReduceOp, dt: DType, a: Value, b: Value) -> Value {
        let ins = self.b.ins();
        match (dt, op) {
            (DType::F32 | DType::F64, ReduceOp::Sum) => ins.fadd(a, b),
            (DType::F32 | DType::F64, ReduceOp::Prod) => ins.fmul(a, b),
            (DType::F32 | DType::F64, ReduceOp::Min) => ins.fmin(a, b),
            (DType::F32 | DType::F64, ReduceOp::Max) => ins.fmax(a, b),
            (DType::I32 | DType::I64, ReduceOp::Sum) => ins.iadd(a, b),
            (DType::I32 | DType::I64, ReduceOp::Prod) => ins.imul(a, b),
            (DType::I32 | DType::I64, ReduceOp::Min) => ins.smin(a, b),
            (DType::I32 | DType::I64, ReduceOp::Max) => ins.smax(a, b),
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => ins.bor(a, b),
            (DType::Bool, ReduceOp::Prod | ReduceOp::Min) => ins.band(a, b),
        }
    }

    fn reduce(&mut self, acc: &Access, op: ReduceOp, v: ValueId) -> LResult<()> {
        let (_, slot) = self.layout.store(acc.param)?;
        if slot.privilege != Privilege::Reduce(op) {
            return Err(format!(
                "{} reduction into store parameter {}, which has {:?} privilege",
                op.name(),
                acc.param,
                slot.privilege
            ));
        }
        let dt = slot.dtype;
        let x = self.typed(v, dt, "reduced value")?;
        if let Some(var) = self.views.get(&acc.param).and_then(|w| w.acc) {
            if !acc.indices.is_empty() {
                return Err(format!(
                    "access to store parameter {} (rank 0) with {} indices",
                    acc.param,
                    acc.indices.len()
                ));
            }
            let old = self.b.use_var(var);
            let new = self.combine(op, dt, old, x);
            self.b.def_var(var, new);
            return Ok(());
        }
        let addr = self.address(acc)?;
        let old = self.b.ins().load(cl_type(dt), data_flags(), addr, 0);
        let old = if dt == DType::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, old, 0)
        } else {
            old
        };
        let new = self.combine(op, dt, old, x);
        self.b.ins().store(data_flags(), new, addr, 0);
        Ok(())
    }

    /// The `(param, dim, extent)` of each access directly in the body of `l` (so run by every
    /// iteration) whose index on `dim` is the induction value and is not otherwise proven.
    fn hoistable_checks(&self, l: &ForLoop) -> Vec<(u32, usize, Value)> {
        let mut out: Vec<(u32, usize, Value)> = Vec::new();
        for inst in &l.body {
            let acc = match &inst.op {
                Op::Load(acc) | Op::Store(acc, _) | Op::Reduce(acc, _, _) => acc,
                _ => continue,
            };
            let Some(view) = self.views.get(&acc.param) else {
                continue;
            };
            for (d, &iv) in acc.indices.iter().enumerate() {
                if iv != l.induction || out.iter().any(|&(p, e, _)| (p, e) == (acc.param, d)) {
                    continue;
                }
                if let Some(&ext) = view.ext.get(d) {
                    out.push((acc.param, d, ext));
                }
            }
        }
        out
    }

    /// The checks of `lo` and `hi - 1` against the extents of `hoisted` (from
    /// [`Self::hoistable_checks`] of `l`), which prove those accesses in bounds for every
    /// iteration of `l` from `lo` to `hi` (at least one); records them as proven.
    fn induction_range_checks(
        &mut self,
        l: &ForLoop,
        hoisted: &[(u32, usize, Value)],
        lo: Value,
        hi: Value,
    ) -> Vec<(Value, Value, i64)> {
        let last = self.b.ins().iadd_imm_s(hi, -1);
        let mut checks = Vec::new();
        for &(param, d, ext) in hoisted {
            let code = self.faults.code(FaultSite {
                param,
                dim: d as u32,
            });
            checks.push((lo, ext, code));
            checks.push((last, ext, code));
            self.for_proven.insert((l.induction, param, d));
        }
        checks
    }

    /// Prefetches each rank-1 store of unit stride that the body of `l` loads at its
    /// induction value, [`prefetch::AHEAD`] iterations past `lo` (see [`prefetch`]): where
    /// the loops that follow this one will read.
    fn prefetch_streams(&mut self, l: &ForLoop, lo: Value) {
        if !self.prefetch {
            return;
        }
        let mut streams: Vec<(Value, Value)> = Vec::new();
        let mut params: Vec<u32> = Vec::new();
        for inst in &l.body {
            let Op::Load(acc) = &inst.op else {
                continue;
            };
            if acc.indices != [l.induction] || params.contains(&acc.param) {
                continue;
            }
            if let Some(view) = self.views.get(&acc.param)
                && view.unit_inner
                && view.acc.is_none()
                && let [stride] = view.stride[..]
            {
                params.push(acc.param);
                streams.push((view.base, stride));
            }
        }
        if streams.is_empty() {
            return;
        }
        let ahead = self.b.ins().iadd_imm_s(lo, prefetch::AHEAD);
        for (base, stride) in streams {
            let offset = self.b.ins().imul(ahead, stride);
            let at = self.b.ins().iadd(base, offset);
            // The marker's result is unused: `prefetch::patch` makes it a prefetch.
            self.b
                .ins()
                .load(types::I8, prefetch::marker_flags(), at, 0);
            self.markers += 1;
        }
        self.loop_counts.prefetched += 1;
    }

    /// `for i in lo..hi` as a guarded do-while loop with the carried values as block
    /// parameters.
    fn lower_for(&mut self, inst: &Inst, l: &ForLoop) -> LResult<()> {
        self.in_for += 1;
        let lowered = self.lower_for_any(inst, l);
        // What this loop's range check proved holds only in the code just lowered, where the
        // induction value lives: another copy of the same loop, lowered later in this
        // function (a parallel loop is lowered up to three times, and jammed), may take
        // another lowering that checks nothing before the loop.
        self.for_proven.retain(|&(iv, _, _)| iv != l.induction);
        self.in_for -= 1;
        lowered
    }

    /// [`Self::lower_for`], by the first lowering that takes the loop.
    fn lower_for_any(&mut self, inst: &Inst, l: &ForLoop) -> LResult<()> {
        if let Some(wide_isa) = self.lanes {
            let views = &self.views;
            let unit = |param: u32| views.get(&param).is_some_and(|v| v.unit_inner);
            let consts = &self.consts;
            let konst = |v: ValueId| consts.get(&v).copied();
            if let Ok(plan) = lanes::plan(l, self.layout, self.types, &unit, &konst) {
                // Its bulk in a wide body, where the path has them and the loop qualifies.
                let wide = wide_isa.and_then(|isa| {
                    let p =
                        lanes::plan_wide(l, self.layout, self.types, &unit, &konst, isa).ok()?;
                    Some((wide::compile_fold(isa, l, &p, &konst).ok()?, p))
                });
                let wide = match wide {
                    Some((body, p)) => Some(self.define_fold(body, &p)?),
                    None => None,
                };
                // (Counted once: the zero-origin copy repeats the unit-stride one's loops.)
                if !self.zero_origins && !self.in_jam {
                    self.loop_counts.vector += 1;
                    self.loop_counts.wide += usize::from(wide.is_some());
                }
                return self.lower_for_lanes(inst, l, &plan, wide.as_ref());
            }
            if let Ok(plan) = iterations::plan(l, self.layout, self.types, &self.views) {
                if !self.zero_origins && !self.in_jam {
                    self.loop_counts.vector += 1;
                }
                return self.lower_for_iterations(inst, l, &plan);
            }
        }
        let lo = self.typed(l.lo, DType::I64, "loop bound")?;
        let hi = self.typed(l.hi, DType::I64, "loop bound")?;
        self.lower_for_scalar(inst, l, lo, hi)
    }

    /// One iteration of `l`'s body at induction value `i` from the carried values `carried`;
    /// returns the yielded values.
    fn lower_iteration(
        &mut self,
        l: &ForLoop,
        i: Value,
        carried: &[Value],
        tys: &[DType],
    ) -> LResult<Vec<Value>> {
        let mark = self.env.mark();
        self.env.define(l.induction, i, DType::I64);
        for ((&v, &p), &t) in l.carried.iter().zip(carried).zip(tys) {
            self.env.define(v, p, t);
        }
        for inst in &l.body {
            self.lower_inst(inst)?;
        }
        let mut ys = Vec::with_capacity(tys.len());
        for (&y, &t) in l.yields.iter().zip(tys) {
            ys.push(self.typed(y, t, "yielded value")?);
        }
        self.env.pop_to(mark);
        Ok(ys)
    }

    /// The scalar code of `l` from iteration `lo` to `hi` (excluded).
    fn lower_for_scalar(&mut self, inst: &Inst, l: &ForLoop, lo: Value, hi: Value) -> LResult<()> {
        let n = l.init.len();
        if l.carried.len() != n || l.yields.len() != n || inst.results.len() != n {
            return Err(format!(
                "for loop with {n} initial values, {} carried values, {} yields and {} results",
                l.carried.len(),
                l.yields.len(),
                inst.results.len()
            ));
        }
        let mut init = Vec::with_capacity(n);
        let mut tys = Vec::with_capacity(n);
        for &v in &l.init {
            let (x, t) = self.val(v)?;
            init.push(x);
            tys.push(t);
        }
        let body = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(body, types::I64);
        for &t in &tys {
            self.b.append_block_param(body, cl_type(t));
            self.b.append_block_param(exit, cl_type(t));
        }
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let mut body_args = vec![BlockArg::Value(lo)];
        body_args.extend(init.iter().map(|&v| BlockArg::Value(v)));
        let exit_args: Vec<BlockArg> = init.iter().map(|&v| BlockArg::Value(v)).collect();
        let hoisted = self.hoistable_checks(l);
        if !hoisted.is_empty() && Self::pairs_pay(l) {
            return self.lower_for_pairs(inst, l, (lo, hi), (&init, &tys), &hoisted);
        }
        if hoisted.is_empty() {
            self.b.ins().brif(go, body, &body_args, exit, &exit_args);
        } else {
            // Accesses indexed by the induction value in the body itself run in every
            // iteration: one check of `lo` and `hi - 1` against the extent before the loop
            // covers them all (a failure stops the kernel with the same fault as the first
            // failing iteration's check would, before the loop's effects).
            let checked = self.b.create_block();
            self.b.ins().brif(go, checked, &[], exit, &exit_args);
            self.b.switch_to_block(checked);
            let checks = self.induction_range_checks(l, &hoisted, lo, hi);
            self.prefetch_streams(l, lo);
            self.check_or_fault(checks, body, &body_args);
        }

        self.b.switch_to_block(body);
        let params = self.b.block_params(body).to_vec();
        let ys = self.lower_iteration(l, params[0], &params[1..], &tys)?;
        if !bounded_by_a_store(l) {
            self.check_cancel();
        }
        let next = self.b.ins().iadd_imm_s(params[0], 1);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        let mut back = vec![BlockArg::Value(next)];
        back.extend(ys.iter().map(|&v| BlockArg::Value(v)));
        let out: Vec<BlockArg> = ys.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(more, body, &back, exit, &out);

        self.b.switch_to_block(exit);
        let results = self.b.block_params(exit).to_vec();
        for k in 0..n {
            self.env.define(inst.results[k], results[k], tys[k]);
        }
        Ok(())
    }
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Const(_) => "const",
        Op::Param(_) => "param",
        Op::Binary(..) => "binary",
        Op::Unary(..) => "unary",
        Op::Cmp(..) => "cmp",
        Op::Select(..) => "select",
        Op::Cast(..) => "cast",
        Op::Bitcast(..) => "bitcast",
        Op::Load(_) => "load",
        Op::Store(..) => "store",
        Op::Reduce(..) => "reduce",
        Op::Extent { .. } => "extent",
        Op::Origin { .. } => "origin",
        Op::Parallel(_) => "parallel",
        Op::For(_) => "for",
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;
    use cranelift_codegen::ir::{Function, Signature, StackSlotData, StackSlotKind};
    use cranelift_codegen::isa::CallConv;

    /// Compiles a function whose frame holds a stack slot of `bytes`, and checks its frame.
    fn frame_of(bytes: u32) -> LResult<()> {
        let isa = crate::compile::native_isa("speed").expect("isa");
        let mut sig = Signature::new(CallConv::SystemV);
        sig.returns.push(AbiParam::new(types::I64));
        let mut ctx = Context::for_function(Function::with_name_signature(
            ir::UserFuncName::user(0, 0),
            sig,
        ));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let slot =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 3));
        let entry = b.create_block();
        b.switch_to_block(entry);
        let x = b.ins().iconst(types::I64, 7);
        b.ins().stack_store(types::I64, x, slot, 0);
        let y = b.ins().stack_load(types::I64, types::I64, slot, 0);
        b.ins().return_(&[y]);
        b.seal_all_blocks();
        b.finalize(isa.frontend_config());
        ctx.compile(&*isa, &mut ControlPlane::default())
            .expect("compiles");
        check_frame(&ctx)
    }

    #[test]
    fn a_frame_past_the_bound_is_refused() {
        frame_of(1024).expect("a small frame is fine");
        frame_of(MAX_FRAME_BYTES / 2).expect("half the bound is fine");
        let err = frame_of(MAX_FRAME_BYTES + 4096).expect_err("refused");
        assert!(err.contains("bytes of stack, more than the limit"), "{err}");
    }
}

#[cfg(test)]
mod cancel_tests {
    use super::*;
    use weft_ir::builder::KernelBuilder;
    use weft_ir::{DType, Privilege};

    /// The first `for` loop of `k`'s first parallel loop.
    fn first_for(k: &Kernel) -> ForLoop {
        let Some(Op::Parallel(p)) = k.body.iter().map(|i| &i.op).next_back() else {
            panic!("no parallel loop")
        };
        p.body
            .iter()
            .find_map(|i| match &i.op {
                Op::For(l) => Some(l.clone()),
                _ => None,
            })
            .expect("a for loop")
    }

    #[test]
    fn only_loops_that_no_store_bounds_check_the_cancel_flag() {
        // A CSR-like row: loads at the induction value bound the loop.
        let mut k = KernelBuilder::new("row");
        let vals = k.store(DType::F64, 1, Privilege::Read);
        let out = k.store(DType::F64, 1, Privilege::Write);
        k.body().parallel(out, |b, i| {
            let zero = b.const_i64(0);
            let start = b.const_f64(0.0);
            let sum = b.for_loop(zero, i[0], &[start], |b, k, acc| {
                vec![b.add(acc[0], b.load(vals, &[k]))]
            });
            b.store(out, i, sum[0]);
        });
        assert!(bounded_by_a_store(&first_for(&k.finish())));
        // A loop that only counts: nothing bounds it.
        let mut k = KernelBuilder::new("count");
        let out = k.store(DType::F64, 1, Privilege::Write);
        k.body().parallel(out, |b, i| {
            let zero = b.const_i64(0);
            let start = b.const_f64(0.0);
            let sum = b.for_loop(zero, i[0], &[start], |b, _, acc| {
                vec![b.add(acc[0], b.const_f64(1.0))]
            });
            b.store(out, i, sum[0]);
        });
        assert!(!bounded_by_a_store(&first_for(&k.finish())));
    }
}
