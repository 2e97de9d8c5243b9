//! Loop nests that run a parallel loop's points several at a time: groups of eight points
//! whose contributions to grouped leaf stores combine in registers, and jammed rows (see
//! [`jam`]).

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value, types};
use weft_ir::{Access, DType, ForLoop, Inst, Op, ParallelLoop, ReduceOp, Scalar, ValueId};

use super::{FnLower, LResult, data_flags, jam, lanes, wide};

/// The stores of the rank-1 loop `pl`'s points into the leaf stores of `grouped` (see
/// [`Target::grouped`](super::Target::grouped)), at the loop's index, with their operators;
/// none for a loop of another rank.
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

impl FnLower<'_, '_> {
    /// The grouped leaf stores that `pl`'s body stores into at the loop's index, with their
    /// operators and element types.
    pub(super) fn group_targets(&self, pl: &ParallelLoop) -> LResult<Vec<(u32, ReduceOp, DType)>> {
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
    /// grouped leaf stores `targets` (see [`Target::grouped`](super::Target::grouped)): the
    /// points of each whole aligned group of eight in `lo..hi` run one after another, their
    /// contributions kept in registers and combined by the canonical pairwise tree, which
    /// goes to the group's first slot; the points before the first group and after the last
    /// store their own.
    pub(super) fn grouped_nest(
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
    pub(super) fn jammed_nest(
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
}
