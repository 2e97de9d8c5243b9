//! The vector variant's function: its rows, main vector loop and scalar tail
//! ([`FnLower::build_vector`]), groups of points, and the calls of its wide body.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    Block, BlockArg, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_module::Module;
use weft_ir::{Access, DType, Op, ParallelLoop, ReduceOp, Scalar, ValueId};

use super::{ConstTable, MAX_VECTORS, UNROLL, VecCx, VecPlan, vec_type};
use crate::lower::define::WideCall;
use crate::lower::inst::operands;
use crate::lower::skeleton::ParSetup;
use crate::lower::wide::ArgWord;
use crate::lower::{FnLower, LResult, RedMode, StepKind, data_flags};

impl FnLower<'_, '_> {
    /// The vector variant of the parallel step for `pl` at top-level position `pos`, lowered as
    /// `plan` says.
    pub(in crate::lower) fn build_vector(
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
        // A rank-1 loop whose points store reduction leaves runs its points eight at a time
        // where it can, each group's leaves combined in registers (see `grouped_vectors`).
        let targets = if rank == 1 {
            self.group_targets(pl)?
        } else {
            Vec::new()
        };
        // A body that runs whole rows walks every row of the dimension around the rows in
        // one call (see `ArgWord::Rows`), where nothing it reads at the row level depends on
        // that dimension's index: the first row of each walk calls it, and the row loop then
        // ends (when the rows have unit strides, as the body needs; a later row, which it
        // then never reaches, would go straight to the latch).
        let latch = self.b.create_block();
        let walk = if targets.is_empty()
            && rank >= 2
            && wide.is_some_and(|w| w.masks.is_some())
            && !row_level_depends_on(pl, plan, pl.indices[rank - 2])
        {
            let d = rank - 2;
            let j = self.b.block_params(heads[d])[0];
            let (first, limit) = if d == 0 {
                (lo, hi)
            } else {
                (self.b.ins().iconst(types::I64, 0), over_ext[d])
            };
            let later = self.b.ins().icmp(IntCC::NotEqual, j, first);
            let skip = self.b.ins().band(later, unit);
            // After the walk, the row loop goes straight to its end: its next index is the
            // walk's limit where the first row walked, else the next row.
            let first_here = self.b.ins().icmp(IntCC::Equal, j, first);
            let walked = self.b.ins().band(first_here, unit);
            let after_one = self.b.ins().iadd_imm_s(j, 1);
            let next = self.b.ins().select(walked, limit, after_one);
            let first_row = self.b.create_block();
            self.b.ins().brif(skip, latch, &[], first_row, &[]);
            self.b.switch_to_block(first_row);
            Some(RowWalk {
                index: pl.indices[d],
                rows: self.b.ins().isub(limit, j),
                next,
            })
        } else {
            None
        };
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
            let base = self.fixed_address(cx.table.as_ptr() as u64)?;
            cx.table_base = Some(base);
        }
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
                Some(w) => self.call_wide(w, &cx, start, end, unit, walk.as_ref())?,
                None => start,
            };
            // A wide body that runs whole rows leaves nothing of a unit-stride row, and rows
            // of other strides run the scalar body: a 128-bit loop would never run.
            let whole_rows = wide.is_some_and(|w| w.masks.is_some());
            let tail = self.b.create_block();
            self.b.append_block_param(tail, types::I64);
            if whole_rows {
                self.b.ins().jump(tail, &[BlockArg::Value(start)]);
            } else {
                self.main_vectors(pl, plan, &mut cx, (start, end, unit), tail)?;
            }

            // The remainder, one iteration at a time.
            self.b.switch_to_block(tail);
            let j = self.b.block_params(tail)[0];
            self.scalar_points(pl, plan, (j, end), latch)?;

            // Latches of the outer dimensions, innermost first.
            self.b.switch_to_block(latch);
            if outer == 0 {
                self.b.ins().jump(exit, &[]);
            }
            let inner_next = walk.as_ref().map(|w| w.next);
            self.loop_latches(&heads, hi, &over_ext, exit, inner_next);
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

    /// From the current block: the row's iterations `start..end` `UNROLL` vectors per step
    /// while unit strides (`unit`) and at least one step are left; on to `tail` with the
    /// first iteration left.
    fn main_vectors(
        &mut self,
        pl: &ParallelLoop,
        plan: &VecPlan,
        cx: &mut VecCx,
        (start, end, unit): (Value, Value, Value),
        tail: Block,
    ) -> LResult<()> {
        let l = i64::from(cx.lanes);
        let step = l * UNROLL as i64;
        let main = self.b.create_block();
        self.b.append_block_param(main, types::I64);
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
        self.b.switch_to_block(main);
        let j = self.b.block_params(main)[0];
        for (k, jk) in cx.j.iter_mut().enumerate() {
            *jk = self.b.ins().iadd_imm_s(j, l * k as i64);
        }
        self.vector_body(pl, plan, cx, UNROLL)?;
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
        Ok(())
    }

    /// The row of a rank-1 loop (from the row block; on to `exit`) whose points store their
    /// contributions into the grouped leaf stores `targets` (see
    /// [`crate::lower::Target::grouped`]), leaving them grouped as
    /// [`weft_ir::reduction::grouped_nodes_with`] reads them: the
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
            Some(w) => self.call_wide(w, cx, a, b, unit, None)?,
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
    /// `unit` says), and for the rest of the row too where `w` runs whole rows (with a
    /// partial step's lane masks), and for the rows `walk` gives after this one; returns
    /// where the rest of the row starts.
    fn call_wide(
        &mut self,
        w: &WideCall,
        cx: &VecCx,
        start: Value,
        end: Value,
        unit: Value,
        walk: Option<&RowWalk>,
    ) -> LResult<Value> {
        let words = u32::try_from(w.args.len().max(1) * 8).map_err(|e| e.to_string())?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            words,
            3,
        ));
        let step = w.isa.step();
        let left = self.b.ins().isub(end, start);
        let steps = self.div_pow2(left, step, "a wide step")?;
        let zero = self.b.ins().iconst(types::I64, 0);
        let steps = self.b.ins().smax(steps, zero);
        let steps = self.b.ins().select(unit, steps, zero);
        // Rows too short for one step skip the call, unless the body runs whole rows.
        let call = self.b.create_block();
        let after = self.b.create_block();
        self.b.append_block_param(after, types::I64);
        let any = match w.masks {
            Some(_) => {
                let some = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, left, 0);
                self.b.ins().band(some, unit)
            }
            None => self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, steps, 0),
        };
        self.b
            .ins()
            .brif(any, call, &[], after, &[BlockArg::Value(start)]);
        self.b.switch_to_block(call);
        let done = self.b.ins().imul_imm_s(steps, step);
        // The row's last `r = left - done` iterations: `r / lanes` whole vectors, then the
        // lane masks of the last `q = r % lanes` (see `ArgWord::Vectors` and `::Masks`).
        let tail = match w.masks {
            Some(at) => {
                let lanes = w.isa.lanes();
                let r = self.b.ins().isub(left, done);
                let vectors = self.div_pow2(r, lanes, "a wide vector's lanes")?;
                let q = self.b.ins().band_imm_u(r, lanes - 1);
                let bytes = self.b.ins().ishl_imm_u(q, 3);
                let top = self.fixed_address(at + 128)?;
                let addr = self.b.ins().isub(top, bytes);
                Some((vectors, self.b.ins().select(q, addr, zero)))
            }
            None => None,
        };
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
                ArgWord::Steps => steps,
                ArgWord::Rows => match walk {
                    Some(r) => r.rows,
                    None => self.b.ins().iconst(types::I64, 1),
                },
                ArgWord::RowStride(k) => self.row_stride(w, *k, walk)?,
                ArgWord::Vectors => tail.ok_or("internal: a tail for a body without")?.0,
                ArgWord::Masks => tail.ok_or("internal: lane masks for a body without")?.1,
                ArgWord::Uniform(v) => {
                    let (x, t) = self.val(*v)?;
                    match t {
                        DType::F64 => self.b.ins().bitcast(types::I64, MemFlagsData::new(), x),
                        DType::I64 => x,
                        // All ones for true, zero for false: a mask in every lane.
                        DType::Bool => {
                            let w = self.b.ins().uextend(types::I64, x);
                            self.b.ins().ineg(w)
                        }
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
        // A body that runs whole rows leaves nothing of the row.
        let rest = match w.masks {
            Some(_) => end,
            None => self.b.ins().iadd(start, done),
        };
        self.b.ins().jump(after, &[BlockArg::Value(rest)]);
        self.b.switch_to_block(after);
        Ok(self.b.block_params(after)[0])
    }
}

/// The rows that one call of a body that runs whole rows walks: `rows` of them, from the
/// current one along the loop index `index`.
pub(super) struct RowWalk {
    index: ValueId,
    rows: Value,
    /// The row loop's next index after this row: the walk's limit where this row walked the
    /// rest (so the rows it ran are not visited again), else the next row.
    next: Value,
}

/// Whether an instruction of `pl` reads `index` other than as an index of a varying load or
/// store (a row-level value or access, as `plan` places them, or a varying value): then rows
/// along `index` differ in more than their addresses, and a body cannot walk them. (A value
/// computed from `index` is computed by an instruction that reads it.)
fn row_level_depends_on(pl: &ParallelLoop, plan: &VecPlan, index: ValueId) -> bool {
    pl.body.iter().zip(&plan.row_level).any(|(inst, &at_row)| {
        let reads = |v: &ValueId| *v == index;
        match (&inst.op, at_row) {
            (Op::Load(_), false) => false,
            (Op::Store(_, v) | Op::Reduce(_, _, v), false) => reads(v),
            (op, _) => operands(op).iter().any(reads),
        }
    })
}

impl FnLower<'_, '_> {
    /// `x / d` rounded towards minus infinity (an arithmetic shift), for `d` a power of two;
    /// `what` names `d` in the error otherwise.
    fn div_pow2(&mut self, x: Value, d: i64, what: &str) -> LResult<Value> {
        if !(d > 0 && (d as u64).is_power_of_two()) {
            return Err(format!("internal: {what} ({d}) is not a power of two"));
        }
        Ok(self.b.ins().sshr_imm_u(x, i64::from(d.trailing_zeros())))
    }

    /// The bytes between consecutive rows of `walk` of the `k`-th pointer of `w` (an
    /// [`ArgWord::RowBase`]): the strides of its access's dimensions indexed by the walk's
    /// index; 0 without a walk.
    fn row_stride(&mut self, w: &WideCall, k: u32, walk: Option<&RowWalk>) -> LResult<Value> {
        let mut stride = self.b.ins().iconst(types::I64, 0);
        let Some(walk) = walk else {
            return Ok(stride);
        };
        let Some(ArgWord::RowBase(param, indices)) = w.args.get(k as usize) else {
            return Err("internal: a row stride of no pointer".into());
        };
        let view = self
            .views
            .get(param)
            .ok_or_else(|| format!("internal: store parameter {param} not loaded"))?;
        let strides = view.stride.clone();
        let outer = indices.len().saturating_sub(1);
        for (d, iv) in indices[..outer].iter().enumerate() {
            if *iv == walk.index {
                let s = *strides
                    .get(d)
                    .ok_or_else(|| format!("internal: no stride {d}"))?;
                stride = self.b.ins().iadd(stride, s);
            }
        }
        Ok(stride)
    }
}
