//! The vector variant of a parallel loop: the loop's innermost dimension runs `L` iterations at
//! a time in 128-bit vectors (`f64x2`/`i64x2` for `L = 2`, `f32x4`/`i32x4` for `L = 4`), `UNROLL`
//! vectors per step, with scalar code for the remainder of each row.
//!
//! [`analyze`] decides whether a loop qualifies and how each body value is computed; the
//! method [`FnLower::build_vector`] emits the function. See the `cpu` module documentation for
//! the rules and the guarantees.
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
//! A rank-1 loop has one "row": its chunk `lo..hi`. A rank-1 loop whose points store into
//! grouped leaf stores runs its row as [`FnLower::grouped_vectors`] says instead: scalar
//! points up to the first aligned group of eight, the whole groups (in the wide body and then
//! eight points a step, each group's leaves combined by the canonical tree), scalar points
//! after.

use std::collections::{BTreeSet, HashMap, HashSet};

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    Block, BlockArg, ConstantData, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Type,
    Value, types,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::Variable;
use cranelift_module::Module;
use weft_ir::validate::Types;
use weft_ir::{
    Access, BinaryOp, CmpOp, DType, Inst, Op, ParallelLoop, Privilege, ReduceOp, Scalar, UnaryOp,
    ValueId,
};

use super::arith::{float_cc, int_cc};
use super::define::WideCall;
use super::inst::operands;
use super::skeleton::ParSetup;
use super::wide::{ArgWord, Isa};
use super::{FnLower, LResult, Layout, Obligation, RedMode, StepKind, data_flags};

/// Whether the vector body is emitted with the vectors of a step interleaved instruction
/// by instruction (more independent work in flight) rather than one after the other.
const INTERLEAVE: bool = true;

/// Vectors per step of the main vector loop.
const UNROLL: usize = 2;

/// The most vectors of one step: a group of eight points (see [`FnLower::grouped_vectors`])
/// is four vectors of `f64x2`.
const MAX_VECTORS: usize = 4;

/// What the vector lowering may use on the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Features {
    /// Vector `floor` and `ceil` are single instructions (on x86_64, SSE4.1's `roundpd`;
    /// without it Cranelift would call `floor` per lane, so loops using them stay scalar).
    pub round: bool,
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
                let sse41 = isa
                    .isa_flags()
                    .iter()
                    .any(|f| f.name == "has_sse41" && f.as_bool() == Some(true));
                Some(Features {
                    round: sse41,
                    wide: Isa::widest_detected(),
                })
            }
            "aarch64" => Some(Features {
                round: true,
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
        DType::Bool => None,
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
    }
}

/// The analysis's state.
struct Analysis<'a> {
    layout: &'a Layout,
    types: &'a Types,
    inner: ValueId,
    loop_dims: HashMap<ValueId, usize>,
    lanes: Option<u8>,
    varying: HashMap<ValueId, DType>,
    splats: Vec<ValueId>,
    splat_set: HashSet<ValueId>,
    uses_iota: bool,
}

impl Analysis<'_> {
    fn ty(&self, v: ValueId) -> Result<DType, String> {
        self.types
            .get(v)
            .ok_or_else(|| format!("no type for value {v}"))
    }

    fn is_varying(&self, v: ValueId) -> bool {
        self.varying.contains_key(&v)
    }

    /// Requires vectors of `t` to have the loop's lane count.
    fn need(&mut self, t: DType) -> Result<(), String> {
        let Some(l) = lanes_of(t) else {
            return Ok(());
        };
        match self.lanes {
            None => {
                self.lanes = Some(l);
                Ok(())
            }
            Some(m) if m == l => Ok(()),
            Some(_) => Err("mixes 32-bit and 64-bit lanes".into()),
        }
    }

    /// Notes that a vector operation reads `v`: a uniform `v` is splat, the innermost index
    /// becomes `j + lane`.
    fn vector_operand(&mut self, v: ValueId) -> Result<(), String> {
        let t = self.ty(v)?;
        self.need(t)?;
        if v == self.inner {
            self.uses_iota = true;
        } else if !self.is_varying(v) && self.splat_set.insert(v) {
            self.splats.push(v);
        }
        Ok(())
    }

    fn access_kind(&self, acc: &Access) -> Result<AccessKind, String> {
        let n = acc.indices.len();
        for (d, iv) in acc.indices.iter().enumerate() {
            if !self.loop_dims.contains_key(iv) {
                return Err(format!(
                    "an index of parameter {} is not a loop index",
                    acc.param
                ));
            }
            if *iv == self.inner && d + 1 != n {
                return Err(format!(
                    "the innermost loop index indexes dimension {d} of parameter {}, not its \
                     last",
                    acc.param
                ));
            }
        }
        Ok(if acc.indices.last() == Some(&self.inner) {
            AccessKind::Contiguous
        } else {
            AccessKind::Uniform
        })
    }
}

/// Whether `op` on floats is one of the arithmetic operations every 128-bit lowering
/// (vector loops, lanes, iterations) takes as a vector operation.
pub(crate) fn float_vector_binary(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Min
            | BinaryOp::Max
    )
}

/// Whether a varying operation has a vector form.
fn vector_op(op: &Op, a: &Analysis<'_>, features: Features) -> Result<(), String> {
    let ty = |v: ValueId| a.ty(v);
    let ok = match op {
        Op::Binary(bop, x, y) => match ty(*x)? {
            DType::F32 | DType::F64 => float_vector_binary(*bop),
            DType::I32 | DType::I64 => match bop {
                BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Min
                | BinaryOp::Max => true,
                // One shift amount for all lanes.
                BinaryOp::Shl | BinaryOp::Shr => !a.is_varying(*y) && *y != a.inner,
                BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow => false,
            },
            DType::Bool => matches!(
                bop,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Min | BinaryOp::Max
            ),
        },
        Op::Unary(uop, x) => match ty(*x)? {
            DType::F32 | DType::F64 => match uop {
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt => true,
                UnaryOp::Floor | UnaryOp::Ceil => features.round,
                _ => false,
            },
            DType::I32 | DType::I64 => {
                matches!(uop, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not)
            }
            DType::Bool => *uop == UnaryOp::Not,
        },
        Op::Cmp(_, x, _) => ty(*x)? != DType::Bool,
        Op::Select(..) | Op::Bitcast(..) => true,
        Op::Cast(to, x) => {
            use DType::*;
            let from = ty(*x)?;
            from == *to
                || from == Bool
                || *to == Bool
                || matches!((from, *to), (I32, F32) | (I64, F64) | (F32, I32))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("an operation with no vector form".into())
    }
}

/// Decides whether the parallel loop `pl` has a vector variant, and how to lower it; the error
/// says why not.
pub(crate) fn analyze(
    pl: &ParallelLoop,
    layout: &Layout,
    types: &Types,
    features: Features,
) -> Result<VecPlan, String> {
    let rank = pl.indices.len();
    let Some(&inner) = pl.indices.last() else {
        return Err("a rank-0 loop".into());
    };
    let mut a = Analysis {
        layout,
        types,
        inner,
        loop_dims: pl
            .indices
            .iter()
            .enumerate()
            .map(|(d, &v)| (v, d))
            .collect(),
        lanes: None,
        varying: HashMap::new(),
        splats: Vec::new(),
        splat_set: HashSet::new(),
        uses_iota: false,
    };
    if rank > 1 && pl.indices[..rank - 1].contains(&inner) {
        return Err("a loop index repeated".into());
    }
    let mut row_level = vec![false; pl.body.len()];
    let mut unit_stride = BTreeSet::new();
    // Per store parameter: the index lists of its loads and stores, and whether it is stored.
    let mut accesses: HashMap<u32, (Vec<&[ValueId]>, bool, bool)> = HashMap::new();
    for (pos, inst) in pl.body.iter().enumerate() {
        let result = inst.results.first().copied();
        match &inst.op {
            Op::For(_) | Op::Parallel(_) => return Err("a loop in the body".into()),
            Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => {
                row_level[pos] = true;
            }
            Op::Load(acc) | Op::Store(acc, _) => {
                let is_store = matches!(inst.op, Op::Store(..));
                let kind = a.access_kind(acc)?;
                let (store, slot) = a.layout.store(acc.param)?;
                let entry = accesses.entry(acc.param).or_default();
                entry.0.push(&acc.indices);
                entry.1 |= is_store;
                entry.2 |= !is_store;
                match (kind, &inst.op) {
                    (AccessKind::Uniform, Op::Store(_, v)) => {
                        if a.is_varying(*v) || *v == inner {
                            return Err("a varying value stored into one element".into());
                        }
                        row_level[pos] = true;
                    }
                    (AccessKind::Uniform, _) => row_level[pos] = true,
                    (AccessKind::Contiguous, op) => {
                        if slot.dtype == DType::Bool {
                            return Err("a vector access to a bool store".into());
                        }
                        a.need(slot.dtype)?;
                        unit_stride.insert(store);
                        if let Op::Store(_, v) = op {
                            a.vector_operand(*v)?;
                        }
                        if let Some(r) = result {
                            a.varying.insert(r, slot.dtype);
                        }
                    }
                }
            }
            Op::Reduce(acc, _, v) => {
                if !acc.indices.is_empty() {
                    return Err("a reduction into a store of rank > 0".into());
                }
                let (_, slot) = a.layout.store(acc.param)?;
                if !matches!(slot.privilege, Privilege::Reduce(_)) {
                    return Err("a reduction into a store without reduce privilege".into());
                }
                a.need(slot.dtype)?;
                a.vector_operand(*v)?;
            }
            op => {
                let ops = operands(op);
                if !ops.iter().any(|v| a.is_varying(*v) || *v == inner) {
                    row_level[pos] = true;
                    continue;
                }
                vector_op(op, &a, features)?;
                for (k, &v) in ops.iter().enumerate() {
                    let shift_amount =
                        k == 1 && matches!(op, Op::Binary(BinaryOp::Shl | BinaryOp::Shr, ..));
                    if !shift_amount {
                        a.vector_operand(v)?;
                    }
                }
                let r = result.ok_or("an operation without a result")?;
                let t = a.ty(r)?;
                a.need(t)?;
                a.varying.insert(r, t);
            }
        }
    }
    // A store that the loop writes: every access to it addresses the same element of the
    // iteration (so no lane reads what another lane writes), and one written once per row is
    // not read in the loop at all.
    for (param, (lists, stored, loaded)) in &accesses {
        if *stored {
            if lists.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!(
                    "parameter {param} is written and accessed at different indices"
                ));
            }
            let per_row = lists.first().is_some_and(|l| l.last() != Some(&inner));
            if per_row && *loaded {
                return Err(format!(
                    "parameter {param} is written once per row and read in the loop"
                ));
            }
        }
    }
    let lanes = a.lanes.ok_or("no vector values")?;
    Ok(VecPlan {
        lanes,
        row_level,
        varying: a.varying,
        splats: a.splats,
        unit_stride: unit_stride.into_iter().collect(),
        uses_iota: a.uses_iota,
    })
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

impl FnLower<'_, '_> {
    /// The vector variant of the parallel step for `pl` at top-level position `pos`, lowered as
    /// `plan` says.
    pub(super) fn build_vector(
        &mut self,
        pl: &ParallelLoop,
        pos: usize,
        plan: &VecPlan,
        wide: Option<&WideCall>,
    ) -> LResult<StepKind> {
        let ParSetup {
            lo,
            hi,
            over,
            rank,
            reds,
            over_ext,
        } = self.parallel_setup(pl, pos)?;
        if rank == 0 {
            return Err("internal: a rank-0 loop has no vector variant".into());
        }
        let lanes = plan.lanes;
        let mut cx = VecCx {
            lanes,
            inner: pl.indices[rank - 1],
            splats: HashMap::new(),
            row_base: HashMap::new(),
            accs: HashMap::new(),
            vals: Default::default(),
            j: [Value::from_u32(0); MAX_VECTORS],
            iota: [None; MAX_VECTORS],
            capture: None,
            const_bits: HashMap::new(),
            table: Box::new([]),
            table_used: 0,
            table_base: None,
        };
        // Constants that vector operations use: their lane bits, and room for one table entry
        // per use (each vector of a step of the main loop).
        for &v in &plan.splats {
            let def = match pl
                .body
                .iter()
                .find(|i| i.results.first() == Some(&v))
                .or_else(|| self.top.defs.get(&v).map(|d| d.1))
            {
                Some(i) => &i.op,
                None => continue,
            };
            if let Op::Const(c) = def {
                let t = c.dtype();
                let vt = vec_type(t, lanes);
                let lane_bits = vt.lane_bits();
                let lane = match c {
                    Scalar::Bool(true) => u64::MAX,
                    _ => c.to_bits(),
                };
                let lane = if lane_bits == 64 {
                    u128::from(lane)
                } else {
                    u128::from(lane) & 0xffff_ffff
                };
                let mut bits = 0u128;
                for l in 0..u32::from(lanes) {
                    bits |= lane << (l * lane_bits);
                }
                cx.const_bits.insert(v, (bits, vt));
            }
        }
        if !cx.const_bits.is_empty() {
            let uses: usize = pl
                .body
                .iter()
                .zip(&plan.row_level)
                .filter(|(_, r)| !**r)
                .map(|(i, _)| operands(&i.op).len())
                .sum();
            cx.table = vec![0u128; uses * MAX_VECTORS].into_boxed_slice();
        }
        // Vector accumulators, initialised to the identity in every lane.
        for r in &reds {
            let slot = &self.layout.stores[r.store];
            if r.mode != RedMode::Register {
                return Err("internal: a vectorized loop reduces into a buffer".into());
            }
            let vt = vec_type(slot.dtype, lanes);
            let id = self.constant(r.op.identity(slot.dtype));
            let v = self.splat(id, slot.dtype, lanes);
            let vars = [(); UNROLL].map(|_| {
                let var = self.b.declare_var(vt);
                self.b.def_var(var, v);
                var
            });
            cx.accs.insert(slot.param, (r.op, slot.dtype, vars));
        }

        // The vector loops read and write their contiguous stores as vectors of adjacent
        // elements: they run only when every such store's innermost stride is one element.
        // Otherwise every row runs the scalar remainder loop alone, which takes any strides.
        let mut unit = self.b.ins().iconst(types::I8, 1);
        for &store in &plan.unit_stride {
            let slot = self
                .layout
                .stores
                .get(store)
                .ok_or("internal: no such store")?;
            let size = i64::try_from(slot.dtype.size()).map_err(|e| e.to_string())?;
            let view = self
                .views
                .get(&slot.param)
                .ok_or_else(|| format!("internal: store parameter {} not loaded", slot.param))?;
            let inner = *view
                .stride
                .last()
                .ok_or("internal: a rank-0 contiguous store")?;
            let ok = self.b.ins().icmp_imm_s(IntCC::Equal, inner, size);
            unit = self.b.ins().band(unit, ok);
        }

        let exit = self.b.create_block();
        let go = self.rows_guard(lo, hi, &over_ext);
        // The outer dimensions, as in the scalar function.
        let outer = rank - 1;
        let heads = self.loop_heads(outer);
        let row = self.b.create_block();
        match heads.first() {
            Some(&h) => self.b.ins().brif(go, h, &[BlockArg::Value(lo)], exit, &[]),
            None => self.b.ins().brif(go, row, &[], exit, &[]),
        };
        let mark = self.env.mark();
        self.enter_loop_heads(pl, &heads, Some(row));

        // The row: uniform values, splats and base addresses.
        self.b.switch_to_block(row);
        for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
            if at_row {
                self.lower_inst(inst)?;
            }
        }
        for &v in &plan.splats {
            let (s, t) = self.val(v)?;
            let vs = self.splat(s, t, lanes);
            cx.splats.insert(v, vs);
        }
        for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
            if let (false, Op::Load(acc) | Op::Store(acc, _)) = (at_row, &inst.op) {
                self.row_base(acc, &mut cx)?;
            }
        }
        if !cx.table.is_empty() {
            let base = self.b.ins().iconst(types::I64, cx.table.as_ptr() as i64);
            cx.table_base = Some(base);
        }
        // A rank-1 loop whose points store reduction leaves runs its points eight at a time
        // where it can, each group's leaves combined in registers (see `grouped_vectors`).
        let targets = if rank == 1 {
            self.group_targets(pl)?
        } else {
            Vec::new()
        };
        if wide.is_some_and(|w| w.grouped == targets.is_empty()) {
            return Err("internal: a wide body grouped otherwise than its loop".into());
        }
        if !targets.is_empty() {
            self.grouped_vectors(
                pl,
                plan,
                &mut cx,
                (lo, hi, unit),
                &over_ext,
                wide,
                &targets,
                exit,
            )?;
        } else {
            let (start, end) = if rank == 1 {
                (lo, hi)
            } else {
                (self.b.ins().iconst(types::I64, 0), over_ext[rank - 1])
            };
            // The bulk of the row in the wide body, where there is one.
            let start = match wide {
                Some(w) => self.call_wide(w, &cx, start, end, unit)?,
                None => start,
            };
            let l = i64::from(lanes);

            let step = l * UNROLL as i64;
            let main = self.b.create_block();
            let tail = self.b.create_block();
            let latch = self.b.create_block();
            for blk in [main, tail] {
                self.b.append_block_param(blk, types::I64);
            }
            let left = self.b.ins().isub(end, start);
            let enough = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, step);
            let go = self.b.ins().band(enough, unit);
            self.b.ins().brif(
                go,
                main,
                &[BlockArg::Value(start)],
                tail,
                &[BlockArg::Value(start)],
            );

            // The main loop: UNROLL vectors per step.
            self.b.switch_to_block(main);
            let j = self.b.block_params(main)[0];
            for (k, jk) in cx.j.iter_mut().enumerate() {
                *jk = self.b.ins().iadd_imm_s(j, l * k as i64);
            }
            self.vector_body(pl, plan, &mut cx, UNROLL)?;
            let next = self.b.ins().iadd_imm_s(j, step);
            let left = self.b.ins().isub(end, next);
            let more = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, step);
            self.b.ins().brif(
                more,
                main,
                &[BlockArg::Value(next)],
                tail,
                &[BlockArg::Value(next)],
            );

            // The remainder, one iteration at a time.
            self.b.switch_to_block(tail);
            let j = self.b.block_params(tail)[0];
            self.scalar_points(pl, plan, (j, end), latch)?;

            // Latches of the outer dimensions, innermost first.
            self.b.switch_to_block(latch);
            if outer == 0 {
                self.b.ins().jump(exit, &[]);
            }
            self.loop_latches(&heads, hi, &over_ext, exit);
        }
        self.env.pop_to(mark);

        // Exit: each rank-0 reduction's result is its vector accumulators combined lane by
        // lane, their lanes folded in order, and then the scalar remainder's accumulator.
        self.b.switch_to_block(exit);
        let mut finals = HashMap::new();
        let mut params: Vec<_> = cx.accs.keys().copied().collect();
        params.sort_unstable();
        for param in params {
            let Some(&(op, dt, vars)) = cx.accs.get(&param) else {
                continue;
            };
            let mut v = self.b.use_var(vars[0]);
            for &var in &vars[1..] {
                let w = self.b.use_var(var);
                v = self.vcombine(op, dt, v, w, lanes);
            }
            let mut r = self.lane(v, 0, dt);
            for lane in 1..lanes {
                let x = self.lane(v, lane, dt);
                r = self.combine(op, dt, r, x);
            }
            let scalar = self
                .views
                .get(&param)
                .and_then(|w| w.acc)
                .ok_or("internal: no scalar accumulator")?;
            let s = self.b.use_var(scalar);
            let total = self.combine(op, dt, r, s);
            finals.insert(param, total);
        }
        self.parallel_exit(&reds, &finals)?;
        if cx.table_used > 0 {
            self.tables.push(ConstTable { entries: cx.table });
        }

        let mut kind = self.parallel_step(over, reds);
        if let StepKind::Parallel { grouped, .. } = &mut kind {
            *grouped = !targets.is_empty();
        }
        Ok(kind)
    }

    /// The row of a rank-1 loop (from the row block; on to `exit`) whose points store their
    /// contributions into the grouped leaf stores `targets` (see [`super::Target::grouped`]),
    /// leaving them grouped as [`weft_ir::reduction::grouped_nodes_with`] reads them: the
    /// points before the first whole aligned group of eight and after the last run the scalar
    /// body; the whole groups run in the wide body, where there is one, and the rest of them
    /// eight points (`8 / lanes` vectors) at a time here, each group's contributions combined
    /// by the canonical pairwise tree into one node, stored into the group's first element.
    /// Rows whose contiguous stores do not all have unit strides run
    /// [`FnLower::grouped_nest`], the scalar loop's grouping, instead.
    #[allow(clippy::too_many_arguments)]
    fn grouped_vectors(
        &mut self,
        pl: &ParallelLoop,
        plan: &VecPlan,
        cx: &mut VecCx,
        (lo, hi, unit): (Value, Value, Value),
        over_ext: &[Value],
        wide: Option<&WideCall>,
        targets: &[(u32, ReduceOp, DType)],
        exit: Block,
    ) -> LResult<()> {
        use weft_ir::reduction::GROUP_LEVEL;
        let [index] = pl.indices[..] else {
            return Err("internal: a grouped vector loop of rank other than 1".into());
        };
        let (vectors, slow) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(unit, vectors, &[], slow, &[]);
        self.b.switch_to_block(slow);
        self.grouped_nest(pl, lo, hi, over_ext, exit, targets)?;

        self.b.switch_to_block(vectors);
        let (a, b) = self.group_bounds(pl, lo, hi)?;
        let groups = self.b.create_block();
        self.scalar_points(pl, plan, (lo, a), groups)?;
        self.b.switch_to_block(groups);
        let start = match wide {
            Some(w) => self.call_wide(w, cx, a, b, unit)?,
            None => a,
        };
        let size = 1i64 << GROUP_LEVEL;
        let l = i64::from(cx.lanes);
        let n = usize::try_from(size / l).map_err(|e| e.to_string())?;
        if n == 0 || n > MAX_VECTORS {
            return Err(format!("internal: a group of {n} vectors"));
        }
        let (group, tail) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(group, types::I64);
        let some = self.b.ins().icmp(IntCC::SignedLessThan, start, b);
        self.b
            .ins()
            .brif(some, group, &[BlockArg::Value(start)], tail, &[]);

        self.b.switch_to_block(group);
        let j = self.b.block_params(group)[0];
        for (k, jk) in cx.j.iter_mut().take(n).enumerate() {
            *jk = self.b.ins().iadd_imm_s(j, l * k as i64);
        }
        cx.capture = Some(targets.iter().map(|t| (t.0, Vec::new())).collect());
        let body = self.vector_body(pl, plan, cx, n);
        let caught = cx.capture.take().unwrap_or_default();
        body?;
        for (&(param, op, dt), (_, vecs)) in targets.iter().zip(caught) {
            if vecs.len() != n {
                return Err(format!(
                    "internal: a group stores {} vectors into grouped leaf store {param}",
                    vecs.len()
                ));
            }
            let mut leaves = Vec::with_capacity(size as usize);
            for v in vecs {
                for lane in 0..cx.lanes {
                    leaves.push(self.lane(v, lane, dt));
                }
            }
            let node = self.pairwise(op, dt, &leaves);
            let (addr, _) = self.vector_address(
                &Access {
                    param,
                    indices: vec![index],
                },
                0,
                cx,
            )?;
            self.b.ins().store(data_flags(), node, addr, 0);
        }
        let next = self.b.ins().iadd_imm_s(j, size);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, b);
        self.b
            .ins()
            .brif(more, group, &[BlockArg::Value(next)], tail, &[]);

        self.b.switch_to_block(tail);
        self.scalar_points(pl, plan, (b, hi), exit)
    }

    /// The canonical pairwise tree of `leaves` (a power of two of them) under `op`: each
    /// combination takes the left subtree's value first.
    fn pairwise(&mut self, op: ReduceOp, dt: DType, leaves: &[Value]) -> Value {
        match leaves {
            [x] => *x,
            _ => {
                let (l, r) = leaves.split_at(leaves.len() / 2);
                let l = self.pairwise(op, dt, l);
                let r = self.pairwise(op, dt, r);
                self.combine(op, dt, l, r)
            }
        }
    }

    /// From the current block: the scalar body (its varying instructions) for the iterations
    /// `from..to` of the row's innermost index, one at a time; on to `after`.
    fn scalar_points(
        &mut self,
        pl: &ParallelLoop,
        plan: &VecPlan,
        (from, to): (Value, Value),
        after: Block,
    ) -> LResult<()> {
        let (head, body) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(head, types::I64);
        self.b.ins().jump(head, &[BlockArg::Value(from)]);
        self.b.switch_to_block(head);
        let j = self.b.block_params(head)[0];
        let more = self.b.ins().icmp(IntCC::SignedLessThan, j, to);
        self.b.ins().brif(more, body, &[], after, &[]);
        self.b.switch_to_block(body);
        let mark = self.env.mark();
        self.env
            .define(pl.indices[pl.indices.len() - 1], j, DType::I64);
        for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
            if !at_row {
                self.lower_inst(inst)?;
            }
        }
        self.env.pop_to(mark);
        let next = self.b.ins().iadd_imm_s(j, 1);
        self.b.ins().jump(head, &[BlockArg::Value(next)]);
        Ok(())
    }

    /// Calls the wide body `w` for the row's iterations `start..start + step * steps` (`steps =
    /// (end - start) / step`, or none when a contiguous store's stride is not one element, as
    /// `unit` says); returns where the rest of the row starts.
    fn call_wide(
        &mut self,
        w: &WideCall,
        cx: &VecCx,
        start: Value,
        end: Value,
        unit: Value,
    ) -> LResult<Value> {
        let words = u32::try_from(w.args.len().max(1) * 8).map_err(|e| e.to_string())?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            words,
            3,
        ));
        let step = w.isa.step();
        if !(step as u64).is_power_of_two() {
            return Err("internal: a wide step that is not a power of two".into());
        }
        let left = self.b.ins().isub(end, start);
        let steps = self
            .b
            .ins()
            .sshr_imm_u(left, i64::from(step.trailing_zeros()));
        let zero = self.b.ins().iconst(types::I64, 0);
        let steps = self.b.ins().smax(steps, zero);
        let steps = self.b.ins().select(unit, steps, zero);
        // Rows too short for one step skip the call.
        let call = self.b.create_block();
        let after = self.b.create_block();
        self.b.append_block_param(after, types::I64);
        let any = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, steps, 0);
        self.b
            .ins()
            .brif(any, call, &[], after, &[BlockArg::Value(start)]);
        self.b.switch_to_block(call);
        for (k, word) in w.args.iter().enumerate() {
            let x = match word {
                ArgWord::RowBase(param, indices) => {
                    let base = *cx
                        .row_base
                        .get(&(*param, indices.clone()))
                        .ok_or("internal: no row base for a wide body")?;
                    let (_, slot) = self.layout.store(*param)?;
                    let shift = slot.dtype.size().trailing_zeros();
                    let off = self.b.ins().ishl_imm_u(start, i64::from(shift));
                    self.b.ins().iadd(base, off)
                }
                ArgWord::Uniform(v) => {
                    let (x, t) = self.val(*v)?;
                    match t {
                        DType::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), x),
                        DType::I64 => x,
                        _ => return Err(format!("internal: a uniform {t} for a wide body")),
                    }
                }
            };
            let offset = i32::try_from(k * 8).map_err(|e| e.to_string())?;
            self.b.ins().stack_store(self.ptr_ty, x, slot, offset);
        }
        let args = self.b.ins().stack_addr(self.ptr_ty, slot, 0);
        let callee = self.module.declare_func_in_func(w.func, self.b.func);
        // The body's bytes may land anywhere in the address space, further than a 32-bit
        // displacement reaches from the caller: call it through its absolute address.
        self.b.func.dfg.ext_funcs[callee].colocated = false;
        self.b.ins().call(callee, &[args, steps]);
        let done = self.b.ins().imul_imm_s(steps, step);
        let rest = self.b.ins().iadd(start, done);
        self.b.ins().jump(after, &[BlockArg::Value(rest)]);
        self.b.switch_to_block(after);
        Ok(self.b.block_params(after)[0])
    }

    /// Lane `lane` of the vector `v` of `dt` as a scalar of `dt` (a mask lane becomes a bool).
    pub(super) fn lane(&mut self, v: Value, lane: u8, dt: DType) -> Value {
        let x = self.b.ins().extractlane(v, lane);
        if dt == DType::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        } else {
            x
        }
    }

    /// The scalar `s` of type `t` in every lane (a bool becomes a mask).
    pub(super) fn splat(&mut self, s: Value, t: DType, lanes: u8) -> Value {
        let vt = vec_type(t, lanes);
        if t == DType::Bool {
            let lane = vt.lane_type();
            let w = self.b.ins().uextend(lane, s);
            let m = self.b.ins().ineg(w);
            self.b.ins().splat(vt, m)
        } else {
            self.b.ins().splat(vt, s)
        }
    }

    /// Computes, in the row block, the row's base address of the contiguous access `acc`.
    fn row_base(&mut self, acc: &Access, cx: &mut VecCx) -> LResult<()> {
        let key = (acc.param, acc.indices.clone());
        if cx.row_base.contains_key(&key) {
            return Ok(());
        }
        let view = self
            .views
            .get(&acc.param)
            .ok_or_else(|| format!("internal: store parameter {} not loaded", acc.param))?;
        let (mut addr, strides) = (view.base, view.stride.clone());
        let outer = acc.indices.len().saturating_sub(1);
        for (d, &iv) in acc.indices[..outer].iter().enumerate() {
            let i = self.typed(iv, DType::I64, "index")?;
            let stride = *strides
                .get(d)
                .ok_or_else(|| format!("internal: no stride {d}"))?;
            let off = self.b.ins().imul(i, stride);
            addr = self.b.ins().iadd(addr, off);
        }
        cx.row_base.insert(key, addr);
        Ok(())
    }

    /// The address of the first element of the vector `k` of the contiguous access `acc`.
    fn vector_address(&mut self, acc: &Access, k: usize, cx: &VecCx) -> LResult<(Value, DType)> {
        let (store, slot) = self.layout.store(acc.param)?;
        let dt = slot.dtype;
        if let Some(p) = &mut self.par {
            for (d, iv) in acc.indices.iter().enumerate() {
                if let Some(&loop_dim) = p.loop_dims.get(iv) {
                    p.obligations.insert(Obligation {
                        loop_dim,
                        store,
                        dim: d,
                        index: None,
                    });
                }
            }
        }
        let base = *cx
            .row_base
            .get(&(acc.param, acc.indices.clone()))
            .ok_or("internal: no row base")?;
        let shift = dt.size().trailing_zeros();
        let off = self.b.ins().ishl_imm_u(cx.j[k], i64::from(shift));
        Ok((self.b.ins().iadd(base, off), dt))
    }

    /// The vector of `v` for vector `k` of the step.
    fn vval(&mut self, v: ValueId, k: usize, cx: &mut VecCx) -> LResult<Value> {
        if let Some(&x) = cx.vals[k].get(&v) {
            return Ok(x);
        }
        if let (Some(&(bits, vt)), Some(entry)) =
            (cx.const_bits.get(&v), cx.table.get_mut(cx.table_used))
        {
            *entry = bits;
            let offset = i32::try_from(cx.table_used * 16).map_err(|e| e.to_string())?;
            cx.table_used += 1;
            // The table's heap storage never moves, and the kernel keeps it alive.
            let base = cx.table_base.ok_or("internal: no constant table address")?;
            let flags = MemFlagsData::trusted().with_readonly().with_can_move();
            return Ok(self.b.ins().load(vt, flags, base, offset));
        }
        if let Some(&x) = cx.splats.get(&v) {
            return Ok(x);
        }
        cx.iota[k]
            .filter(|_| v == cx.inner)
            .ok_or_else(|| format!("internal: no vector for value {v}"))
    }

    /// Emits the vector body for the first `n` vectors of a step (their first iterations in
    /// `cx.j`).
    fn vector_body(
        &mut self,
        pl: &ParallelLoop,
        plan: &VecPlan,
        cx: &mut VecCx,
        n: usize,
    ) -> LResult<()> {
        for k in 0..n {
            cx.vals[k].clear();
            cx.iota[k] = None;
            if plan.uses_iota {
                let s = self.b.ins().splat(types::I64X2, cx.j[k]);
                let mut bytes = Vec::with_capacity(16);
                for lane in 0..2i64 {
                    bytes.extend_from_slice(&lane.to_le_bytes());
                }
                let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
                let c = self.b.ins().vconst(types::I64X2, c);
                cx.iota[k] = Some(self.b.ins().iadd(s, c));
            }
        }
        let insts: Vec<&Inst> = pl
            .body
            .iter()
            .zip(&plan.row_level)
            .filter(|(_, r)| !**r)
            .map(|(i, _)| i)
            .collect();
        if INTERLEAVE {
            for inst in &insts {
                for k in 0..n {
                    self.vector_inst(inst, k, plan, cx)?;
                }
            }
        } else {
            for k in 0..n {
                for inst in &insts {
                    self.vector_inst(inst, k, plan, cx)?;
                }
            }
        }
        Ok(())
    }

    /// Emits instruction `inst` of the body for vector `k` of the step.
    fn vector_inst(
        &mut self,
        inst: &Inst,
        k: usize,
        plan: &VecPlan,
        cx: &mut VecCx,
    ) -> LResult<()> {
        let lanes = cx.lanes;
        let vty = |v: ValueId| {
            plan.varying
                .get(&v)
                .copied()
                .ok_or_else(|| format!("internal: no vector type for {v}"))
        };
        let result = |inst: &Inst| {
            inst.results
                .first()
                .copied()
                .ok_or_else(|| "internal: an instruction without a result".to_string())
        };
        let val = match &inst.op {
            Op::Load(acc) => {
                let (addr, dt) = self.vector_address(acc, k, cx)?;
                self.b
                    .ins()
                    .load(vec_type(dt, lanes), data_flags(), addr, 0)
            }
            Op::Store(acc, v) => {
                let x = self.vval(*v, k, cx)?;
                if let Some(caught) = cx
                    .capture
                    .as_mut()
                    .and_then(|c| c.iter_mut().find(|t| t.0 == acc.param))
                {
                    caught.1.push(x);
                    return Ok(());
                }
                let (addr, _) = self.vector_address(acc, k, cx)?;
                self.b.ins().store(data_flags(), x, addr, 0);
                return Ok(());
            }
            Op::Reduce(acc, _, v) => {
                let x = self.vval(*v, k, cx)?;
                let &(op, dt, vars) = cx
                    .accs
                    .get(&acc.param)
                    .ok_or("internal: no vector accumulator")?;
                // A step of more vectors than accumulators (a group) shares them: the
                // operators in registers are exact, so the order does not show.
                let var = vars[k % UNROLL];
                let old = self.b.use_var(var);
                let new = self.vcombine(op, dt, old, x, lanes);
                self.b.def_var(var, new);
                return Ok(());
            }
            Op::Binary(op, a, b) => {
                let t = self.types_of(*a, plan, cx)?;
                let x = self.vval(*a, k, cx)?;
                let y = if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
                    self.val(*b)?.0
                } else {
                    self.vval(*b, k, cx)?
                };
                self.vbinary(*op, t, x, y, lanes)?
            }
            Op::Unary(op, a) => {
                let t = self.types_of(*a, plan, cx)?;
                let x = self.vval(*a, k, cx)?;
                self.vunary(*op, t, x)?
            }
            Op::Cmp(op, a, b) => {
                let t = self.types_of(*a, plan, cx)?;
                let x = self.vval(*a, k, cx)?;
                let y = self.vval(*b, k, cx)?;
                self.vcmp(*op, t, x, y)?
            }
            Op::Select(c, a, b) => {
                let t = vty(result(inst)?)?;
                let m = self.vval(*c, k, cx)?;
                let x = self.vval(*a, k, cx)?;
                let y = self.vval(*b, k, cx)?;
                let m = self.as_type(m, vec_type(t, lanes));
                self.b.ins().bitselect(m, x, y)
            }
            Op::Cast(to, a) => {
                let from = self.types_of(*a, plan, cx)?;
                let x = self.vval(*a, k, cx)?;
                self.vcast(x, from, *to, lanes)?
            }
            Op::Bitcast(to, a) => {
                let x = self.vval(*a, k, cx)?;
                self.as_type(x, vec_type(*to, lanes))
            }
            _ => return Err(format!("internal: no vector form of {:?}", inst.op)),
        };
        let r = result(inst)?;
        cx.vals[k].insert(r, val);
        Ok(())
    }

    /// The type of an operand of a vector operation (varying or uniform).
    fn types_of(&self, v: ValueId, plan: &VecPlan, cx: &VecCx) -> LResult<DType> {
        if let Some(&t) = plan.varying.get(&v) {
            Ok(t)
        } else if v == cx.inner {
            Ok(DType::I64)
        } else {
            Ok(self.val(v)?.1)
        }
    }

    /// `x` reinterpreted as `ty` (a vector type with the same lane count).
    fn as_type(&mut self, x: Value, ty: Type) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().bitcast(ty, MemFlagsData::new(), x)
        }
    }

    /// `op` of the vector `x` of `t`, lane by lane.
    pub(super) fn vunary(&mut self, op: UnaryOp, t: DType, x: Value) -> LResult<Value> {
        let ins = self.b.ins();
        Ok(match (t, op) {
            (DType::F32 | DType::F64, UnaryOp::Neg) => ins.fneg(x),
            (DType::F32 | DType::F64, UnaryOp::Abs) => ins.fabs(x),
            (DType::F32 | DType::F64, UnaryOp::Sqrt) => ins.sqrt(x),
            (DType::F32 | DType::F64, UnaryOp::Floor) => ins.floor(x),
            (DType::F32 | DType::F64, UnaryOp::Ceil) => ins.ceil(x),
            (DType::I32 | DType::I64, UnaryOp::Neg) => ins.ineg(x),
            (DType::I32 | DType::I64, UnaryOp::Abs) => ins.iabs(x),
            (DType::I32 | DType::I64 | DType::Bool, UnaryOp::Not) => ins.bnot(x),
            _ => return Err(format!("internal: no vector {} on {t}", op.name())),
        })
    }

    pub(super) fn vbinary(
        &mut self,
        op: BinaryOp,
        t: DType,
        x: Value,
        y: Value,
        lanes: u8,
    ) -> LResult<Value> {
        let ins = self.b.ins();
        Ok(match (t, op) {
            (DType::F32 | DType::F64, BinaryOp::Add) => ins.fadd(x, y),
            (DType::F32 | DType::F64, BinaryOp::Sub) => ins.fsub(x, y),
            (DType::F32 | DType::F64, BinaryOp::Mul) => ins.fmul(x, y),
            (DType::F32 | DType::F64, BinaryOp::Div) => ins.fdiv(x, y),
            (DType::F32 | DType::F64, BinaryOp::Min) => self.vfminmax(true, x, y, t, lanes),
            (DType::F32 | DType::F64, BinaryOp::Max) => self.vfminmax(false, x, y, t, lanes),
            (DType::I32 | DType::I64, BinaryOp::Add) => ins.iadd(x, y),
            (DType::I32 | DType::I64, BinaryOp::Sub) => ins.isub(x, y),
            (DType::I32 | DType::I64, BinaryOp::Mul) => ins.imul(x, y),
            (DType::I32 | DType::I64, BinaryOp::Min) => ins.smin(x, y),
            (DType::I32 | DType::I64, BinaryOp::Max) => ins.smax(x, y),
            // Cranelift takes a vector shift's (scalar) amount modulo the lane width, as the
            // IR does.
            (DType::I32 | DType::I64, BinaryOp::Shl) => ins.ishl(x, y),
            (DType::I32 | DType::I64, BinaryOp::Shr) => ins.ushr(x, y),
            (_, BinaryOp::And) => ins.band(x, y),
            (_, BinaryOp::Or) => ins.bor(x, y),
            (_, BinaryOp::Xor) => ins.bxor(x, y),
            (DType::Bool, BinaryOp::Min) => ins.band(x, y),
            (DType::Bool, BinaryOp::Max) => ins.bor(x, y),
            _ => return Err(format!("internal: no vector {} on {t}", op.name())),
        })
    }

    /// Float `min` (or `max`) of vectors, lane by lane, with the scalar code's results, bit for
    /// bit: the smaller (larger) of ordered unequal operands; `x | y` (`x & y`) of equal ones
    /// (so `-0` is below `+0`); `y + x` when either is NaN (so the NaN is the one the scalar
    /// sequence propagates, quieted).
    pub(super) fn vfminmax(&mut self, min: bool, x: Value, y: Value, t: DType, lanes: u8) -> Value {
        let vt = vec_type(t, lanes);
        // `x < y ? x : y` (minpd) or `y < x ? x : y` (maxpd).
        let pick = if min {
            self.b.ins().fcmp(FloatCC::LessThan, x, y)
        } else {
            self.b.ins().fcmp(FloatCC::LessThan, y, x)
        };
        let pick = self.as_type(pick, vt);
        let r = self.b.ins().bitselect(pick, x, y);
        let eq = self.b.ins().fcmp(FloatCC::Equal, x, y);
        let eq = self.as_type(eq, vt);
        let both = if min {
            self.b.ins().bor(x, y)
        } else {
            self.b.ins().band(x, y)
        };
        let r = self.b.ins().bitselect(eq, both, r);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, y);
        let nan = self.as_type(nan, vt);
        let sum = self.b.ins().fadd(y, x);
        self.b.ins().bitselect(nan, sum, r)
    }

    fn vcmp(&mut self, op: CmpOp, t: DType, x: Value, y: Value) -> LResult<Value> {
        Ok(match t {
            DType::F32 | DType::F64 => self.b.ins().fcmp(float_cc(op), x, y),
            DType::I32 | DType::I64 => self.b.ins().icmp(int_cc(op, true), x, y),
            DType::Bool => return Err("internal: no vector comparison of bools".into()),
        })
    }

    pub(super) fn vcast(&mut self, x: Value, from: DType, to: DType, lanes: u8) -> LResult<Value> {
        use DType::*;
        let vt = vec_type(to, lanes);
        Ok(match (from, to) {
            _ if from == to => x,
            (Bool, F32 | F64) => {
                let one = if to == F32 {
                    self.b.ins().f32const(1.0)
                } else {
                    self.b.ins().f64const(1.0)
                };
                let one = self.b.ins().splat(vt, one);
                let m = self.as_type(x, vt);
                self.b.ins().band(m, one)
            }
            (Bool, I32 | I64) => {
                let one = self.b.ins().iconst(vt.lane_type(), 1);
                let one = self.b.ins().splat(vt, one);
                self.b.ins().band(x, one)
            }
            (F32 | F64, Bool) => {
                let zero = if from == F32 {
                    self.b.ins().f32const(0.0)
                } else {
                    self.b.ins().f64const(0.0)
                };
                let zero = self.b.ins().splat(vec_type(from, lanes), zero);
                // Unordered or not equal: NaN is true, as in the scalar code.
                self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            (I32 | I64, Bool) => {
                let ft = vec_type(from, lanes);
                let zero = self.b.ins().iconst(ft.lane_type(), 0);
                let zero = self.b.ins().splat(ft, zero);
                self.b.ins().icmp(IntCC::NotEqual, x, zero)
            }
            (I32, F32) | (I64, F64) => self.b.ins().fcvt_from_sint(vt, x),
            (F32, I32) => self.b.ins().fcvt_to_sint_sat(vt, x),
            _ => return Err(format!("internal: no vector cast from {from} to {to}")),
        })
    }

    /// `a op b` lane by lane, for a reduction's accumulator.
    fn vcombine(&mut self, op: ReduceOp, dt: DType, a: Value, b: Value, lanes: u8) -> Value {
        let ins = self.b.ins();
        match (dt, op) {
            (DType::F32 | DType::F64, ReduceOp::Sum) => ins.fadd(a, b),
            (DType::F32 | DType::F64, ReduceOp::Prod) => ins.fmul(a, b),
            (DType::F32 | DType::F64, ReduceOp::Min) => self.vfminmax(true, a, b, dt, lanes),
            (DType::F32 | DType::F64, ReduceOp::Max) => self.vfminmax(false, a, b, dt, lanes),
            (DType::I32 | DType::I64, ReduceOp::Sum) => ins.iadd(a, b),
            (DType::I32 | DType::I64, ReduceOp::Prod) => ins.imul(a, b),
            (DType::I32 | DType::I64, ReduceOp::Min) => ins.smin(a, b),
            (DType::I32 | DType::I64, ReduceOp::Max) => ins.smax(a, b),
            (DType::Bool, ReduceOp::Sum | ReduceOp::Max) => ins.bor(a, b),
            (DType::Bool, ReduceOp::Prod | ReduceOp::Min) => ins.band(a, b),
        }
    }
}
