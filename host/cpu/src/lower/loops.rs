//! Scalar `for` loops: the choice of lowering for a loop (lanes, iterations in vectors, pairs
//! or the plain scalar loop), the range check of the induction value made once before the
//! loop, prefetches of the streams it reads, and the cancel check on its back edge.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{BlockArg, InstBuilder, MemFlagsData, Value, types};
use weft_ir::{DType, ForLoop, Inst, Op, ValueId};

use super::access::FaultSite;
use super::{FnLower, LResult, cl_type, iterations, lanes, prefetch, wide};

/// Whether a store bounds `l`'s trip count (see [`weft_ir::coverage::bounded_by_a_store`]):
/// its back edge needs no cancel check.
pub(crate) fn bounded_by_a_store(l: &ForLoop) -> bool {
    weft_ir::coverage::bounded_by_a_store(l)
}

/// The status a compiled function returns when the cancel flag stopped it (fault sites are
/// numbered from 1).
pub(crate) const CANCELLED: i64 = -1;

impl FnLower<'_, '_> {
    /// `for i in lo..hi` as a guarded do-while loop with the carried values as block
    /// parameters.
    pub(super) fn lower_for(&mut self, inst: &Inst, l: &ForLoop) -> LResult<()> {
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

    /// The scalar code of `l` from iteration `lo` to `hi` (excluded).
    pub(super) fn lower_for_scalar(
        &mut self,
        inst: &Inst,
        l: &ForLoop,
        lo: Value,
        hi: Value,
    ) -> LResult<()> {
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
            self.check_cancel()?;
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

    /// One iteration of `l`'s body at induction value `i` from the carried values `carried`;
    /// returns the yielded values.
    pub(super) fn lower_iteration(
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

    /// The `(param, dim, extent)` of each access directly in the body of `l` (so run by every
    /// iteration) whose index on `dim` is the induction value and is not otherwise proven.
    pub(super) fn hoistable_checks(&self, l: &ForLoop) -> Vec<(u32, usize, Value)> {
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
    pub(super) fn induction_range_checks(
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
    pub(super) fn prefetch_streams(&mut self, l: &ForLoop, lo: Value) {
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

    /// Ends the current block with a test of the cancel flag: on in a new block if it is
    /// clear, else to a cold block that returns [`CANCELLED`]. The back edge of every `for`
    /// loop that no store bounds ([`bounded_by_a_store`]) runs it, so a runaway loop stops
    /// soon after the flag is set; a plain load and a predicted branch per iteration.
    pub(crate) fn check_cancel(&mut self) -> LResult<()> {
        let at = self.fixed_address(self.cancel_flag as u64)?;
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
        Ok(())
    }
}

#[cfg(test)]
mod cancel_tests {
    use super::*;
    use weft_ir::builder::KernelBuilder;
    use weft_ir::{DType, Kernel, Privilege};

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
