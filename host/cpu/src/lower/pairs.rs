//! Scalar `for` loops run two iterations per trip: a short body that only loads and
//! computes (a CSR row's product), whose loop increment, test and branch are otherwise a
//! large part of every iteration.
//!
//! An odd count runs its first iteration alone; then each trip runs iterations `i` and
//! `i + 1`, one after the other, the second from the first's yielded values. Every iteration
//! computes what it computes in the plain loop, in the same order, so the results are the
//! same bits; the loop's accesses at its induction value are checked once before it, as the
//! plain loop's are ([`FnLower::induction_range_checks`]), and its prefetches are the same.
//!
//! Measured on a 2-core AMD EPYC with AVX-512 (`docs/bandwidth-floor.md`, *CSR rows two
//! entries per trip*): CG's fused product and the 7- and 27-point products ran faster.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, BlockArg, InstBuilder, Value, types};
use weft_ir::{DType, ForLoop, Inst, Op};

use super::loops::bounded_by_a_store;
use super::{FnLower, LResult, cl_type};

/// The most instructions a `for` loop's body may have to run two iterations per trip: a CSR
/// row's product has 7.
const PAIR_BODY_MAX: usize = 12;

impl FnLower<'_, '_> {
    /// Whether `l` runs two iterations per trip of its loop: a short body that only loads
    /// and computes (a CSR row's product), where the loop's own increment, test and branch
    /// are a large part of each iteration. (The caller also requires its accesses at the
    /// induction value to be checked before the loop.)
    pub(super) fn pairs_pay(l: &ForLoop) -> bool {
        l.body.len() <= PAIR_BODY_MAX
            && l.body.iter().all(|i| {
                !matches!(
                    i.op,
                    Op::Store(..) | Op::Reduce(..) | Op::For(_) | Op::Parallel(_)
                )
            })
    }

    /// `l` (whose accesses at its induction value, `hoisted`, are checked once before it)
    /// two iterations per trip: an odd count runs its first iteration alone, then each trip
    /// runs iterations `i` and `i + 1`, in order, so the values are the same bits. Per pair
    /// of iterations, one increment, test and branch instead of two.
    pub(super) fn lower_for_pairs(
        &mut self,
        inst: &Inst,
        l: &ForLoop,
        (lo, hi): (Value, Value),
        (init, tys): (&[Value], &[DType]),
        hoisted: &[(u32, usize, Value)],
    ) -> LResult<()> {
        let checked = self.b.create_block();
        let single = self.b.create_block();
        let pairs = self.b.create_block();
        let exit = self.b.create_block();
        for block in [single, pairs] {
            self.b.append_block_param(block, types::I64);
            for &t in tys {
                self.b.append_block_param(block, cl_type(t));
            }
        }
        for &t in tys {
            self.b.append_block_param(exit, cl_type(t));
        }
        let go = self.b.ins().icmp(IntCC::SignedLessThan, lo, hi);
        let skip: Vec<BlockArg> = init.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b.ins().brif(go, checked, &[], exit, &skip);

        self.b.switch_to_block(checked);
        let checks = self.induction_range_checks(l, hoisted, lo, hi);
        self.prefetch_streams(l, lo);
        let sorted = self.b.create_block();
        self.check_or_fault(checks, sorted, &[]);
        self.b.switch_to_block(sorted);
        let count = self.b.ins().isub(hi, lo);
        let odd = self.b.ins().band_imm_u(count, 1);
        let entry = trip_args(lo, init);
        self.b.ins().brif(odd, single, &entry, pairs, &entry);

        // The first iteration of an odd count; the rest is even.
        self.b.switch_to_block(single);
        let params = self.b.block_params(single).to_vec();
        let ys = self.lower_iteration(l, params[0], &params[1..], tys)?;
        self.end_trip(l, (params[0], 1), &ys, hi, (pairs, exit))?;

        self.loop_counts.paired += 1;
        self.b.switch_to_block(pairs);
        let params = self.b.block_params(pairs).to_vec();
        let first = self.lower_iteration(l, params[0], &params[1..], tys)?;
        let second_at = self.b.ins().iadd_imm_s(params[0], 1);
        let ys = self.lower_iteration(l, second_at, &first, tys)?;
        self.end_trip(l, (params[0], 2), &ys, hi, (pairs, exit))?;

        self.b.switch_to_block(exit);
        let results = self.b.block_params(exit).to_vec();
        for (k, &r) in results.iter().enumerate() {
            self.env.define(inst.results[k], r, tys[k]);
        }
        Ok(())
    }

    /// Ends a trip that ran `step` iterations from `at` and yielded `ys`: the cancel check
    /// (unless a store bounds the loop), then the next trip from `at + step` while that is
    /// below `hi`, else `exit` with `ys`.
    fn end_trip(
        &mut self,
        l: &ForLoop,
        (at, step): (Value, i64),
        ys: &[Value],
        hi: Value,
        (pairs, exit): (Block, Block),
    ) -> LResult<()> {
        if !bounded_by_a_store(l) {
            self.check_cancel()?;
        }
        let next = self.b.ins().iadd_imm_s(at, step);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, hi);
        let out: Vec<BlockArg> = ys.iter().map(|&v| BlockArg::Value(v)).collect();
        self.b
            .ins()
            .brif(more, pairs, &trip_args(next, ys), exit, &out);
        Ok(())
    }
}

/// The arguments of a trip's block: the induction value, then the carried values.
fn trip_args(at: Value, carried: &[Value]) -> Vec<BlockArg> {
    std::iter::once(at)
        .chain(carried.iter().copied())
        .map(BlockArg::Value)
        .collect()
}
