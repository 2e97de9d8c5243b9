//! Vector code for `for` loops whose iterations touch distinct elements: the inner loop of
//! `vecmat_rows` (`for r: y[r] += B[i, r] * x[i]`), which adds a row's share into every element
//! of a chunk's reduction buffer, runs [`UNROLL`] vectors of `L` iterations per step (`L` the
//! lanes of a 128-bit vector of its type), then one vector if `L` iterations remain, then
//! scalar code for the rest.
//!
//! A loop qualifies when
//! - it carries no values;
//! - it writes only to chunk-private stores (reduction buffers, and the leaf stores of element
//!   trees, [`crate::leaves`]: they alias nothing else the loop reads), by reductions or
//!   stores, each at an index whose last component is the loop's induction value and whose
//!   others do not depend on it, every access to such a store at that one index;
//! - every load that depends on the induction value is indexed by it on the last dimension
//!   only (others independent of it), of a store whose last stride is one element in the
//!   function being lowered;
//! - every operation on values that depend on the induction value has a vector form (float
//!   `+ - * /`, `min`, `max`, `neg`, `abs`, `sqrt`; integer `+ -` and bitwise operations), all
//!   on lanes of one width.
//!
//! Iteration `j + l` is then lane `l` of every vector, and each element of a reduction buffer
//! gets the same operations in the same order as in the scalar code (one iteration touches
//! one element, and no two iterations the same), so the results are the same bits. Operations
//! that do not depend on the induction value run as scalar code once per vector step and are
//! splat.
//!
//! Bounds are checked as the scalar code does: the induction value's range once before the
//! loop, other indices where they are used.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Value, types};
use weft_ir::validate::Types;
use weft_ir::{Access, BinaryOp, DType, ForLoop, Inst, Op, UnaryOp, ValueId};

use super::inst::operands;
use super::vector::{float_vector_binary, vec_type};
use super::{FnLower, LResult, Layout, View, data_flags};

/// The addresses [`FnLower::row_addresses`] found, at iteration `lo`.
struct Rows<'a> {
    lo: Value,
    rows: &'a HashMap<(u32, Vec<ValueId>), Value>,
}

/// Vectors per step of the main vector loop.
const UNROLL: usize = 2;

/// How a qualifying loop is lowered (the result of [`plan`]).
#[derive(Clone, Debug)]
pub(crate) struct IterPlan {
    lanes: u8,
    /// The values that depend on the induction value, and their types.
    varying: HashMap<ValueId, DType>,
}

/// Lanes of a 128-bit vector of `t` (`None` for `bool`).
fn lanes_of(t: DType) -> Option<u8> {
    match t {
        DType::F64 | DType::I64 => Some(2),
        DType::F32 | DType::I32 => Some(4),
        // Bools, and the unsigned storage types (which these vectors do not load or store).
        DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => None,
    }
}

/// Whether `op` on lanes of `t` has a vector form here.
fn vector_form(op: &Op, t: DType) -> bool {
    match op {
        Op::Binary(b, ..) if t.is_float() => float_vector_binary(*b),
        Op::Binary(b, ..) if t.is_int() => matches!(
            b,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::And | BinaryOp::Or | BinaryOp::Xor
        ),
        Op::Unary(u, _) if t.is_float() => {
            matches!(u, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt)
        }
        _ => false,
    }
}

/// Decides whether `l` runs as vectors over consecutive iterations, and how; the error says
/// why not. `views` are the store views of the function being lowered.
pub(crate) fn plan(
    l: &ForLoop,
    layout: &Layout,
    types: &Types,
    views: &HashMap<u32, View>,
) -> Result<IterPlan, String> {
    if !l.init.is_empty() || !l.carried.is_empty() {
        return Err("carries values".into());
    }
    let j = l.induction;
    let mut varying: HashMap<ValueId, DType> = HashMap::new();
    let mut lanes: Option<u8> = None;
    let mut need = |t: DType| -> Result<(), String> {
        let n = lanes_of(t).ok_or("a bool or unsigned lane")?;
        match lanes {
            None => lanes = Some(n),
            Some(m) if m != n => return Err("lanes of two widths".into()),
            Some(_) => {}
        }
        Ok(())
    };
    // Per store parameter: the index lists of its accesses, and whether it is written.
    let mut accesses: HashMap<u32, (Vec<&[ValueId]>, bool)> = HashMap::new();
    for inst in &l.body {
        let depends =
            |v: &ValueId, varying: &HashMap<ValueId, DType>| *v == j || varying.contains_key(v);
        match &inst.op {
            Op::For(_) | Op::Parallel(_) => {
                return Err("a loop in the body".into());
            }
            Op::Load(acc) | Op::Reduce(acc, ..) | Op::Store(acc, _) => {
                let (_, slot) = layout.store(acc.param)?;
                if acc.indices.iter().any(|v| varying.contains_key(v)) {
                    return Err("an index computed from the induction value".into());
                }
                let at_j = acc.indices.last() == Some(&j)
                    && acc.indices.iter().filter(|&&v| v == j).count() == 1;
                let writes = matches!(inst.op, Op::Reduce(..) | Op::Store(..));
                let e = accesses.entry(acc.param).or_default();
                e.0.push(&acc.indices);
                e.1 |= writes;
                if writes {
                    let private = views.get(&acc.param).is_some_and(|v| v.private);
                    if !private || !at_j {
                        return Err(
                            "a write outside a chunk-private store or not at the induction value"
                                .into(),
                        );
                    }
                    need(slot.dtype)?;
                    continue;
                }
                if !acc.indices.contains(&j) {
                    continue;
                }
                let unit = views.get(&acc.param).is_some_and(|v| v.unit_inner);
                if !at_j || !unit {
                    return Err("a load not of consecutive elements".into());
                }
                need(slot.dtype)?;
                let r = *inst.results.first().ok_or("a load without a result")?;
                varying.insert(r, slot.dtype);
            }
            op => {
                if !operands(op).iter().any(|v| depends(v, &varying)) {
                    continue;
                }
                if operands(op).contains(&j) {
                    return Err("the induction value used as a value".into());
                }
                let r = *inst
                    .results
                    .first()
                    .ok_or("an operation without a result")?;
                let t = types.get(r).ok_or("an untyped value")?;
                if !vector_form(op, t) {
                    return Err("an operation with no vector form".into());
                }
                need(t)?;
                varying.insert(r, t);
            }
        }
    }
    for (lists, written) in accesses.values() {
        if *written && lists.windows(2).any(|w| w[0] != w[1]) {
            return Err("a chunk-private store accessed at two indices".into());
        }
    }
    if !accesses.values().any(|(_, w)| *w) {
        return Err("no write".into());
    }
    Ok(IterPlan {
        lanes: lanes.ok_or("no vector value")?,
        varying,
    })
}

impl FnLower<'_, '_> {
    /// Lowers the qualifying loop `l` (see [`plan`]): steps of [`UNROLL`] vectors while they
    /// fit, one step of a vector if it fits, then the scalar loop for the rest.
    pub(super) fn lower_for_iterations(
        &mut self,
        inst: &Inst,
        l: &ForLoop,
        plan: &IterPlan,
    ) -> LResult<()> {
        let lanes = plan.lanes;
        let lo = self.typed(l.lo, DType::I64, "loop bound")?;
        let hi = self.typed(l.hi, DType::I64, "loop bound")?;
        let (head, single, tail, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        for blk in [head, single, tail] {
            self.b.append_block_param(blk, types::I64);
        }
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let checked = self.b.create_block();
        self.b.ins().brif(go, checked, &[], done, &[]);
        self.b.switch_to_block(checked);
        // The induction value's range, once, as the scalar code checks it.
        let hoisted = self.hoistable_checks(l);
        let checks = self.induction_range_checks(l, &hoisted, lo, hi);
        // The address of iteration `lo`'s element of every access at the induction value,
        // once: a step's is that plus its distance from `lo` (the last stride is one element).
        let rows = self.row_addresses(l, plan, lo)?;
        if checks.is_empty() {
            self.b.ins().jump(head, &[BlockArg::Value(lo)]);
        } else {
            self.check_or_fault(checks, head, &[BlockArg::Value(lo)]);
        }

        // Steps of `UNROLL` vectors while they fit, then one of a vector if it fits.
        for (unroll, block, next_block) in [(UNROLL, head, single), (1, single, tail)] {
            self.b.switch_to_block(block);
            let jv = self.b.block_params(block)[0];
            let width = i64::from(lanes) * unroll as i64;
            let step_end = self.b.ins().iadd_imm_s(jv, width);
            let whole = self
                .b
                .ins()
                .icmp(IntCC::SignedLessThanOrEqual, step_end, hi);
            let body = self.b.create_block();
            self.b.append_block_param(body, types::I64);
            self.b.ins().brif(
                whole,
                body,
                &[BlockArg::Value(jv)],
                next_block,
                &[BlockArg::Value(jv)],
            );
            self.b.switch_to_block(body);
            let j = self.b.block_params(body)[0];
            let starts: Vec<Value> = (0..unroll)
                .map(|k| self.b.ins().iadd_imm_s(j, i64::from(lanes) * k as i64))
                .collect();
            let mark = self.env.mark();
            let mut vecs: Vec<HashMap<ValueId, Value>> = vec![HashMap::new(); unroll];
            let at = Rows { lo, rows: &rows };
            for inst in &l.body {
                self.iteration_inst(inst, l.induction, plan, (&starts, &at), &mut vecs)?;
            }
            self.env.pop_to(mark);
            let next = self.b.ins().iadd_imm_s(j, width);
            if unroll == 1 {
                self.b.ins().jump(tail, &[BlockArg::Value(next)]);
            } else {
                if !super::loops::bounded_by_a_store(l) {
                    self.check_cancel()?;
                }
                self.b.ins().jump(block, &[BlockArg::Value(next)]);
            }
        }

        // The remaining iterations, in the scalar loop.
        self.b.switch_to_block(tail);
        let rest = self.b.block_params(tail)[0];
        self.lower_for_scalar(inst, l, rest, hi)?;
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        Ok(())
    }

    /// The addresses at iteration `lo` of the accesses of `l`'s body at the induction value
    /// whose other indices are defined before the loop, keyed by parameter and indices.
    fn row_addresses(
        &mut self,
        l: &ForLoop,
        plan: &IterPlan,
        lo: Value,
    ) -> LResult<HashMap<(u32, Vec<ValueId>), Value>> {
        let mut out = HashMap::new();
        let mark = self.env.mark();
        self.env.define(l.induction, lo, DType::I64);
        for inst in &l.body {
            let acc = match &inst.op {
                Op::Load(acc) | Op::Reduce(acc, ..) | Op::Store(acc, _) => acc,
                _ => continue,
            };
            let at_j = acc.indices.last() == Some(&l.induction);
            let key = (acc.param, acc.indices.clone());
            let ready = acc.indices.iter().all(|&v| {
                v == l.induction || (!plan.varying.contains_key(&v) && self.val(v).is_ok())
            });
            if !at_j || !ready || out.contains_key(&key) {
                continue;
            }
            let a = self.address(acc)?;
            out.insert(key, a);
        }
        self.env.pop_to(mark);
        Ok(out)
    }

    /// The address of `acc` in the step whose vector starts at iteration `start`: from its
    /// address at `lo` where [`Self::row_addresses`] has it, else computed.
    fn step_address(&mut self, acc: &Access, start: Value, at: &Rows<'_>) -> LResult<Value> {
        let Some(&base) = at.rows.get(&(acc.param, acc.indices.clone())) else {
            return self.address(acc);
        };
        let (_, slot) = self.layout.store(acc.param)?;
        let size = i64::try_from(slot.dtype.size()).map_err(|e| e.to_string())?;
        let distance = self.b.ins().isub(start, at.lo);
        let bytes = self.b.ins().imul_imm_s(distance, size);
        Ok(self.b.ins().iadd(base, bytes))
    }

    /// The vector of `v` for lanes of `t`: a varying value's, or the scalar's splat.
    fn lane_vector(
        &mut self,
        v: ValueId,
        lanes: u8,
        vecs: &HashMap<ValueId, Value>,
    ) -> LResult<Value> {
        if let Some(&x) = vecs.get(&v) {
            return Ok(x);
        }
        let (s, t) = self.val(v)?;
        Ok(self.splat(s, t, lanes))
    }

    /// One body instruction in a vector step whose vectors start at iterations `starts`
    /// (`vecs[k]` holds the vectors of the one starting at `starts[k]`).
    fn iteration_inst(
        &mut self,
        inst: &Inst,
        induction: ValueId,
        plan: &IterPlan,
        (starts, at): (&[Value], &Rows<'_>),
        vecs: &mut [HashMap<ValueId, Value>],
    ) -> LResult<()> {
        let lanes = plan.lanes;
        let result = inst.results.first().copied();
        let vary = result.and_then(|r| plan.varying.get(&r).copied());
        let writes = matches!(inst.op, Op::Reduce(..) | Op::Store(..));
        if vary.is_none() && !writes {
            // Independent of the induction value: the scalar code, once per step.
            return self.lower_inst(inst);
        }
        for (k, &start) in starts.iter().enumerate() {
            self.env.define(induction, start, DType::I64);
            let vk = &mut vecs[k];
            match (&inst.op, vary) {
                (Op::Load(acc), Some(t)) => {
                    let addr = self.step_address(acc, start, at)?;
                    let x = self.b.ins().load(vec_type(t, lanes), data_flags(), addr, 0);
                    vk.insert(result.ok_or("a load without a result")?, x);
                }
                (Op::Reduce(acc, op, v), _) => {
                    let (_, slot) = self.layout.store(acc.param)?;
                    let t = slot.dtype;
                    let x = self.lane_vector(*v, lanes, vk)?;
                    let addr = self.step_address(acc, start, at)?;
                    let old = self.b.ins().load(vec_type(t, lanes), data_flags(), addr, 0);
                    let new = self.combine(*op, t, old, x);
                    self.b.ins().store(data_flags(), new, addr, 0);
                }
                (Op::Store(acc, v), _) => {
                    let x = self.lane_vector(*v, lanes, vk)?;
                    let addr = self.step_address(acc, start, at)?;
                    self.b.ins().store(data_flags(), x, addr, 0);
                }
                (Op::Binary(op, a, b), Some(t)) => {
                    let x = self.lane_vector(*a, lanes, vk)?;
                    let y = self.lane_vector(*b, lanes, vk)?;
                    let ins = self.b.ins();
                    let r = match (op, t.is_float()) {
                        (BinaryOp::Add, true) => ins.fadd(x, y),
                        (BinaryOp::Sub, true) => ins.fsub(x, y),
                        (BinaryOp::Mul, true) => ins.fmul(x, y),
                        (BinaryOp::Div, true) => ins.fdiv(x, y),
                        (BinaryOp::Min, true) => ins.fmin(x, y),
                        (BinaryOp::Max, true) => ins.fmax(x, y),
                        (BinaryOp::Add, false) => ins.iadd(x, y),
                        (BinaryOp::Sub, false) => ins.isub(x, y),
                        (BinaryOp::And, false) => ins.band(x, y),
                        (BinaryOp::Or, false) => ins.bor(x, y),
                        (BinaryOp::Xor, false) => ins.bxor(x, y),
                        _ => return Err(format!("internal: {} in vector lanes", op.name())),
                    };
                    vk.insert(result.ok_or("an operation without a result")?, r);
                }
                (Op::Unary(op, a), Some(_)) => {
                    let x = self.lane_vector(*a, lanes, vk)?;
                    let ins = self.b.ins();
                    let r = match op {
                        UnaryOp::Neg => ins.fneg(x),
                        UnaryOp::Abs => ins.fabs(x),
                        UnaryOp::Sqrt => ins.sqrt(x),
                        _ => return Err(format!("internal: {} in vector lanes", op.name())),
                    };
                    vk.insert(result.ok_or("an operation without a result")?, r);
                }
                _ => return Err("internal: a varying operation with no vector form".into()),
            }
        }
        Ok(())
    }
}
