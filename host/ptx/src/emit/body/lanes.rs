//! A fold's lanes split across threads: a rank-1 loop whose points each run a long `for` loop
//! of [`FOLD_LANES`] independent partial results (the lane order that
//! [`weft_ir::builder::BodyBuilder::fold_lanes`] writes out: `A @ x`'s rows, a reduction over
//! a trailing dimension) runs a *group* of [`LANES`] threads per point instead of one.
//!
//! With a thread per point, the threads of a warp read 32 rows at once, far apart, and a
//! matrix of 8192 rows keeps only 8192 threads busy: too few loads in flight to approach the
//! memory's bandwidth. In a group, thread `k` runs lane `k`'s chain alone (the terms
//! `p = lo + 8 q + k` in increasing `q`, from the same initial value), so the eight threads of
//! a group read eight adjacent elements of a row, and a warp four rows' 64-byte runs. The
//! partials meet in shared memory at a block barrier; every thread of the group then holds
//! all eight, and runs the rest of the point (the tail, the fixed tree that combines the
//! partials, whatever the fused body does next) exactly as a single thread would, so the bits
//! are those of the IR's order. Only thread 0 of a group stores.
//!
//! Which loops split ([`plan`]): a `for` loop at the top of the point's body with
//! [`LANES`] carried values, loads and pure operations only in its body, in which partial `k`
//! depends on no other partial, and whose per-lane instructions are lane 0's with only integer
//! constants differing, by `k` (`p = base + k`; fusion may have shared those constants with
//! unrelated values, so the comparison is by value). Lane `k` then runs lane 0's instructions
//! with each such constant `c` replaced by `c + k`.
//!
//! In the split loop, index checks do not branch: a failed check records its fault code in a
//! register and predicates its load off (into a register set to zero just before, so that
//! the assembler may rename it), and the code is raised after each unrolled step, so that
//! the steps' loads ([`UNROLL`] of them per operand) are in flight together; a loop that no
//! store bounds reads the fault word (its stop) every [`STOP_EVERY`] steps, not every step. A thread
//! that faults ends; its group sees its stale token in shared memory and does not store.

use std::collections::{HashMap, HashSet};

use weft_ir::builder::FOLD_LANES;
use weft_ir::passes::{map_op_uses, op_uses};
use weft_ir::{DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Scalar, ValueId};

use super::{Body, Res, reg_type};
use crate::emit::{BLOCK_THREADS, Leaf};

/// Threads per point of an entry that splits lanes ([`crate::emit::Entry::lanes`]).
pub const LANES: u32 = FOLD_LANES as u32;

/// Iterations of a split loop per step between fault checks (the loads in flight at once).
const UNROLL: usize = 8;

/// Unrolled steps of a split loop between checks of the fault word (a runaway loop's stop).
const STOP_EVERY: u32 = 8;

/// Bytes of a group member's slot in shared memory (every carried type fits).
const SLOT: u32 = 8;

/// How one `for` loop of a point's body runs split by lanes.
#[derive(Clone, Debug)]
pub(super) struct Split {
    /// The loop's position in the parallel loop's body.
    at: usize,
    /// The positions, in the loop's body, of the instructions lane 0's partial needs (constants
    /// excluded: they are defined where they are).
    keep: Vec<usize>,
    /// The operands that hold a lane constant: (position in the loop's body, index of the use
    /// as [`op_uses`] lists them, lane 0's value, its type). Lane `k` uses the value plus `k`.
    lane_operands: Vec<(usize, usize, i64, DType)>,
}

impl Split {
    /// The loop's position in the parallel loop's body.
    pub(super) fn at(&self) -> usize {
        self.at
    }
}

/// The loops of `lp`'s body that run split by lanes, in order (empty if none does).
pub(super) fn plan(kernel: &Kernel, lp: &ParallelLoop) -> Vec<Split> {
    let mut consts = HashMap::new();
    collect_consts(&kernel.body, &mut consts);
    lp.body
        .iter()
        .enumerate()
        .filter_map(|(at, inst)| match &inst.op {
            Op::For(l) => plan_loop(at, l, &consts),
            _ => None,
        })
        .collect()
}

/// Every integer constant of `body`, at any depth, by value.
fn collect_consts(body: &[Inst], out: &mut HashMap<ValueId, (i64, DType)>) {
    for inst in body {
        match &inst.op {
            Op::Const(Scalar::I64(v)) => {
                if let Some(&r) = inst.results.first() {
                    out.insert(r, (*v, DType::I64));
                }
            }
            Op::Const(Scalar::I32(v)) => {
                if let Some(&r) = inst.results.first() {
                    out.insert(r, (i64::from(*v), DType::I32));
                }
            }
            Op::For(l) => collect_consts(&l.body, out),
            Op::Parallel(p) => collect_consts(&p.body, out),
            _ => {}
        }
    }
}

/// The op with every use replaced by one value: two ops are the same operation on possibly
/// different operands when these are equal.
fn shape(op: &Op) -> Op {
    let mut op = op.clone();
    map_op_uses(&mut op, &mut |_| ValueId(0));
    op
}

fn uses_of(op: &Op) -> Vec<ValueId> {
    let mut out = Vec::new();
    op_uses(op, &mut |v| out.push(v));
    out
}

fn plan_loop(at: usize, l: &ForLoop, consts: &HashMap<ValueId, (i64, DType)>) -> Option<Split> {
    let lanes = FOLD_LANES;
    if l.carried.len() != lanes || l.yields.len() != lanes || l.init.len() != lanes {
        return None;
    }
    if l.init.iter().any(|&i| i != l.init[0]) {
        return None;
    }
    // Loads and pure operations only.
    let simple = l.body.iter().all(|i| {
        !matches!(
            i.op,
            Op::Store(..) | Op::Reduce(..) | Op::For(_) | Op::Parallel(_)
        )
    });
    if !simple {
        return None;
    }
    let mut def: HashMap<ValueId, usize> = HashMap::new();
    for (pos, inst) in l.body.iter().enumerate() {
        for &r in &inst.results {
            def.insert(r, pos);
        }
    }
    let carried: HashMap<ValueId, usize> =
        l.carried.iter().enumerate().map(|(k, &c)| (c, k)).collect();
    // Each lane's instructions: what its yield needs, back to values from outside.
    let mut slices: Vec<HashSet<usize>> = Vec::with_capacity(lanes);
    for k in 0..lanes {
        let mut slice = HashSet::new();
        let mut work = vec![l.yields[k]];
        while let Some(v) = work.pop() {
            if let Some(&j) = carried.get(&v) {
                if j != k {
                    return None;
                }
                continue;
            }
            let Some(&pos) = def.get(&v) else {
                continue;
            };
            if matches!(l.body[pos].op, Op::Const(_)) || !slice.insert(pos) {
                continue;
            }
            work.extend(uses_of(&l.body[pos].op));
        }
        slices.push(slice);
    }
    let shared: HashSet<usize> = slices[0]
        .iter()
        .copied()
        .filter(|p| slices.iter().all(|s| s.contains(p)))
        .collect();
    let own = |s: &HashSet<usize>| -> Vec<usize> {
        let mut v: Vec<usize> = s.difference(&shared).copied().collect();
        v.sort_unstable();
        v
    };
    let lane0 = own(&slices[0]);
    if lane0.is_empty() {
        return None;
    }
    let mut lane_operands: Option<Vec<(usize, usize, i64, DType)>> = None;
    for (k, slice) in slices.iter().enumerate().skip(1) {
        let lane_k = own(slice);
        if lane_k.len() != lane0.len() {
            return None;
        }
        // Lane 0's value -> lane k's, for values the lanes define.
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        map.insert(l.carried[0], l.carried[k]);
        let mut found = Vec::new();
        for (&p0, &pk) in lane0.iter().zip(&lane_k) {
            let (i0, ik) = (&l.body[p0], &l.body[pk]);
            if shape(&i0.op) != shape(&ik.op) || i0.results.len() != ik.results.len() {
                return None;
            }
            for (u, (a, b)) in uses_of(&i0.op).into_iter().zip(uses_of(&ik.op)).enumerate() {
                if map.get(&a) == Some(&b) || (a == b && !map.contains_key(&a)) {
                    continue;
                }
                let (Some(&(ca, ta)), Some(&(cb, tb))) = (consts.get(&a), consts.get(&b)) else {
                    return None;
                };
                if ta != tb || cb.checked_sub(ca) != Some(k as i64) {
                    return None;
                }
                found.push((p0, u, ca, ta));
            }
            for (&r0, &rk) in i0.results.iter().zip(&ik.results) {
                map.insert(r0, rk);
            }
        }
        if map.get(&l.yields[0]) != Some(&l.yields[k]) {
            return None;
        }
        match &lane_operands {
            None => lane_operands = Some(found),
            Some(prev) if *prev == found => {}
            Some(_) => return None,
        }
    }
    let mut keep: Vec<usize> = slices[0].iter().copied().collect();
    keep.sort_unstable();
    Some(Split {
        at,
        keep,
        lane_operands: lane_operands.unwrap_or_default(),
    })
}

/// The registers a lanes entry's points share.
#[derive(Clone)]
pub(super) struct LaneRegs {
    /// The thread's lane in its group (`u64`).
    lane: String,
    /// The point's token (`u32`): the iteration of the grid-stride loop, plus one.
    token: String,
    /// The thread's slot and its group's first slot, in `weft_lanes`.
    mine: String,
    group: String,
    /// The same in `weft_tokens`.
    token_mine: String,
    token_group: String,
}

impl Body<'_> {
    /// A rank-1 loop with loops split by lanes: a grid-stride loop over groups of [`LANES`]
    /// threads, one point per group. Every thread of a block runs the same number of
    /// iterations (until the block's first group is past the end), so the barriers of the
    /// exchanges match; a group past the end only takes part in the barriers.
    pub(super) fn lanes_points(
        &mut self,
        lp: &ParallelLoop,
        leaves: &[Leaf],
        extents: &[String],
        splits: &[Split],
    ) -> Res {
        let total = extents
            .first()
            .cloned()
            .ok_or_else(|| "lanes of a 0-d loop".to_string())?;
        let (linear, step, tid) = self.grid();
        let shift = LANES.trailing_zeros();
        let (lane, group, gstep, first) = (
            self.tmp("u64"),
            self.tmp("u64"),
            self.tmp("u64"),
            self.tmp("u64"),
        );
        let slot = self.tmp("u64");
        self.line(format!("and.b64 {lane}, {linear}, {};", LANES - 1));
        self.line(format!("shr.u64 {group}, {linear}, {shift};"));
        self.line(format!("shr.u64 {gstep}, {step}, {shift};"));
        self.line(format!("shr.u64 {slot}, {tid}, {shift};"));
        self.line(format!("sub.s64 {first}, {group}, {slot};"));
        let token = self.tmp("u32");
        self.line(format!("mov.u32 {token}, 1;"));
        // Slots in shared memory: the thread's own and its group's first.
        let regs = {
            let (base, off, mine, group_off, group_at) = (
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
            );
            let (tbase, toff, tmine, tgroup_off, tgroup) = (
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
                self.tmp("u64"),
            );
            let first_lane = !u64::from(LANES - 1);
            self.line(format!("mov.u64 {base}, weft_lanes;"));
            self.line(format!("mul.lo.u64 {off}, {tid}, {SLOT};"));
            self.line(format!("add.s64 {mine}, {base}, {off};"));
            self.line(format!("and.b64 {group_off}, {tid}, {first_lane};"));
            self.line(format!("mul.lo.u64 {group_off}, {group_off}, {SLOT};"));
            self.line(format!("add.s64 {group_at}, {base}, {group_off};"));
            self.line(format!("mov.u64 {tbase}, weft_tokens;"));
            self.line(format!("shl.b64 {toff}, {tid}, 2;"));
            self.line(format!("add.s64 {tmine}, {tbase}, {toff};"));
            self.line(format!("and.b64 {tgroup_off}, {tid}, {first_lane};"));
            self.line(format!("shl.b64 {tgroup_off}, {tgroup_off}, 2;"));
            self.line(format!("add.s64 {tgroup}, {tbase}, {tgroup_off};"));
            LaneRegs {
                lane: lane.clone(),
                token: token.clone(),
                mine,
                group: group_at,
                token_mine: tmine,
                token_group: tgroup,
            }
        };
        self.lanes = Some(regs);
        let (head, idle, next, end) = (
            self.label("group"),
            self.label("idle"),
            self.label("next"),
            self.label("groups_done"),
        );
        let (block_done, past) = (self.tmp("pred"), self.tmp("pred"));
        self.place(&head);
        self.line(format!("setp.ge.u64 {block_done}, {first}, {total};"));
        self.line(format!("@{block_done} bra {end};"));
        self.line(format!("setp.ge.u64 {past}, {group}, {total};"));
        self.line(format!("@{past} bra {idle};"));
        let ix = self.reg(lp.indices[0]);
        self.line(format!("mov.s64 {ix}, {group};"));
        let guard = self.tmp("pred");
        self.line(format!("setp.eq.u64 {guard}, {lane}, 0;"));
        self.guard = Some(guard);
        self.point_split(lp, leaves, &group, splits)?;
        self.guard = None;
        self.line(format!("bra.uni {next};"));
        self.place(&idle);
        for _ in 0..2 * splits.len() {
            self.line("bar.sync 0;");
        }
        self.place(&next);
        self.line(format!("add.s64 {group}, {group}, {gstep};"));
        self.line(format!("add.s64 {first}, {first}, {gstep};"));
        self.line(format!("add.u32 {token}, {token}, 1;"));
        self.line(format!("bra.uni {head};"));
        self.place(&end);
        self.lanes_entry = true;
        Ok(())
    }

    /// Loop `inst` (a `for` at `split.at`) run by this thread's lane, then the group's
    /// partials exchanged: each thread of the group ends with every lane's result.
    pub(super) fn split_loop(&mut self, inst: &Inst, split: &Split) -> Res {
        let Op::For(l) = &inst.op else {
            return Err("a split that is not a `for` loop".to_string());
        };
        let LaneRegs {
            lane,
            token,
            mine,
            group,
            token_mine,
            token_group,
        } = self
            .lanes
            .clone()
            .ok_or_else(|| "a split loop outside a lanes entry".to_string())?;
        // This lane's constants: lane 0's plus the lane.
        let mut substitute: HashMap<(usize, usize), ValueId> = HashMap::new();
        for &(pos, u, c0, dtype) in &split.lane_operands {
            let v = self.synthetic(dtype);
            let r = self.reg(v);
            if dtype == DType::I32 {
                let narrow = self.tmp("u32");
                self.line(format!("cvt.u32.u64 {narrow}, {lane};"));
                self.line(format!("add.s32 {r}, {narrow}, {c0};"));
            } else {
                self.line(format!("add.s64 {r}, {lane}, {c0};"));
            }
            substitute.insert((pos, u), v);
        }
        let body: Vec<Inst> = split
            .keep
            .iter()
            .map(|&pos| {
                let mut inst = l.body[pos].clone();
                let mut u = 0;
                map_op_uses(&mut inst.op, &mut |v| {
                    let out = substitute.get(&(pos, u)).copied().unwrap_or(v);
                    u += 1;
                    out
                });
                inst
            })
            .collect();
        let carried = l.carried[0];
        let ty = reg_type(self.ty(carried));
        let (ri, rlo, rhi) = (self.reg(l.induction), self.reg(l.lo), self.reg(l.hi));
        let (rc, rinit) = (self.reg(carried), self.reg(l.init[0]));
        self.line(format!("mov.s64 {ri}, {rlo};"));
        self.line(format!("mov.{ty} {rc}, {rinit};"));
        let pending = "%fault_pending".to_string();
        self.regs.insert(pending.clone(), "b32");
        self.line(format!("mov.b32 {pending}, 0;"));
        self.deferred = Some(pending.clone());
        let (steps, rest, end) = (
            self.label("lane_steps"),
            self.label("lane_rest"),
            self.label("lane_end"),
        );
        let (far, done, faulted) = (self.tmp("s64"), self.tmp("pred"), self.tmp("pred"));
        let bounded = weft_ir::coverage::bounded_by_a_store(l);
        let (count, low, between) = (self.tmp("u32"), self.tmp("u32"), self.tmp("pred"));
        self.line(format!("mov.u32 {count}, 0;"));
        self.place(&steps);
        self.line(format!("add.s64 {far}, {ri}, {UNROLL};"));
        self.line(format!("setp.gt.s64 {done}, {far}, {rhi};"));
        self.line(format!("@{done} bra {rest};"));
        self.unrolled_steps(&body, l, &ri)?;
        self.line(format!("setp.ne.b32 {faulted}, {pending}, 0;"));
        self.line(format!("@{faulted} bra $fault_pending;"));
        if !bounded {
            // The fault word every `STOP_EVERY` steps: its load is a round trip to memory
            // that the next step's loads would wait behind.
            let skip = self.label("lane_run_on");
            self.line(format!("add.u32 {count}, {count}, 1;"));
            self.line(format!("and.b32 {low}, {count}, {};", STOP_EVERY - 1));
            self.line(format!("setp.ne.u32 {between}, {low}, 0;"));
            self.line(format!("@{between} bra {skip};"));
            self.stop_check(false);
            self.place(&skip);
        }
        self.line(format!("bra.uni {steps};"));
        self.place(&rest);
        self.line(format!("setp.ge.s64 {done}, {ri}, {rhi};"));
        self.line(format!("@{done} bra {end};"));
        self.lane_step(&body, l.yields[0], carried, &ri)?;
        self.line(format!("setp.ne.b32 {faulted}, {pending}, 0;"));
        self.line(format!("@{faulted} bra $fault_pending;"));
        // Fewer than `UNROLL` iterations: no runaway.
        self.line(format!("bra.uni {rest};"));
        self.place(&end);
        self.deferred = None;
        self.pending_raised = true;
        // The exchange: each lane's partial and the point's token into the thread's slot;
        // after the barrier, the group's eight into the loop's results.
        self.line(format!("st.shared.{ty} [{mine}], {rc};"));
        self.line(format!("st.shared.u32 [{token_mine}], {token};"));
        self.line("bar.sync 0;");
        let guard = self
            .guard
            .clone()
            .ok_or_else(|| "a split loop without a store guard".to_string())?;
        let seen = self.tmp("u32");
        let same = self.tmp("pred");
        for (k, &r) in inst.results.iter().enumerate() {
            let rr = self.reg(r);
            let k = u32::try_from(k).map_err(|_| "too many lanes".to_string())?;
            self.line(format!("ld.shared.{ty} {rr}, [{group}+{}];", k * SLOT));
            self.line(format!("ld.shared.u32 {seen}, [{token_group}+{}];", k * 4));
            self.line(format!("setp.eq.u32 {same}, {seen}, {token};"));
            self.line(format!("and.pred {guard}, {guard}, {same};"));
        }
        self.line("bar.sync 0;");
        Ok(())
    }

    /// One iteration of a split loop: the lane's instructions, its partial's next value, the
    /// induction variable's.
    fn lane_step(
        &mut self,
        body: &[Inst],
        yielded: ValueId,
        carried: ValueId,
        induction: &str,
    ) -> Res {
        for inst in body {
            self.inst(inst)?;
        }
        let ty = reg_type(self.ty(carried));
        let (rc, ry) = (self.reg(carried), self.reg(yielded));
        self.line(format!("mov.{ty} {rc}, {ry};"));
        self.line(format!("add.s64 {induction}, {induction}, 1;"));
        Ok(())
    }

    /// [`UNROLL`] iterations of a split loop at once: each copy's values renamed (copy `u`
    /// runs at induction value `i + u`), every copy's instructions that do not depend on the
    /// partial (its loads, their indices, the terms) first, then the copies' updates of the
    /// partial in order. So the copies' loads are issued together, not one copy's after the
    /// last one's use; the partial's chain, and so its bits, are unchanged.
    fn unrolled_steps(&mut self, body: &[Inst], l: &ForLoop, induction: &str) -> Res {
        let carried = l.carried[0];
        // Which of the body's values depend on the partial.
        let mut chained: HashSet<ValueId> = HashSet::from([carried]);
        for inst in body {
            if uses_of(&inst.op).iter().any(|u| chained.contains(u)) {
                chained.extend(inst.results.iter().copied());
            }
        }
        let mut copies: Vec<(Vec<Inst>, ValueId)> = Vec::with_capacity(UNROLL);
        for u in 0..UNROLL {
            let mut rename: HashMap<ValueId, ValueId> = HashMap::new();
            if u > 0 {
                let at = self.synthetic(DType::I64);
                let r = self.reg(at);
                self.line(format!("add.s64 {r}, {induction}, {u};"));
                rename.insert(l.induction, at);
                for inst in body {
                    for &v in &inst.results {
                        let ty = self.ty(v);
                        rename.insert(v, self.synthetic(ty));
                    }
                }
            }
            let copy = body
                .iter()
                .map(|inst| {
                    let mut inst = inst.clone();
                    map_op_uses(&mut inst.op, &mut |v| rename.get(&v).copied().unwrap_or(v));
                    for r in &mut inst.results {
                        *r = rename.get(r).copied().unwrap_or(*r);
                    }
                    inst
                })
                .collect();
            let yielded = rename.get(&l.yields[0]).copied().unwrap_or(l.yields[0]);
            copies.push((copy, yielded));
        }
        // The original body's positions say which instructions are on the chain.
        let on_chain: Vec<bool> = body
            .iter()
            .map(|i| i.results.iter().any(|r| chained.contains(r)) || i.results.is_empty())
            .collect();
        for (copy, _) in &copies {
            for (inst, &chain) in copy.iter().zip(&on_chain) {
                if !chain {
                    self.inst(inst)?;
                }
            }
        }
        let ty = reg_type(self.ty(carried));
        let rc = self.reg(carried);
        for (copy, yielded) in &copies {
            for (inst, &chain) in copy.iter().zip(&on_chain) {
                if chain {
                    self.inst(inst)?;
                }
            }
            let ry = self.reg(*yielded);
            self.line(format!("mov.{ty} {rc}, {ry};"));
        }
        self.line(format!("add.s64 {induction}, {induction}, {UNROLL};"));
        Ok(())
    }

    /// A fresh value of type `dtype` that no kernel defines (a lane constant).
    fn synthetic(&mut self, dtype: DType) -> ValueId {
        self.synthetics += 1;
        let v = ValueId(u32::MAX - self.synthetics);
        self.overrides.insert(v, dtype);
        v
    }

    /// The shared memory a lanes entry declares.
    pub(super) fn lanes_shared(&self) -> Option<String> {
        self.lanes.as_ref().map(|_| {
            format!(
                "    .shared .align 8 .b8 weft_lanes[{}];\n    .shared .align 4 .b8 weft_tokens[{}];\n",
                BLOCK_THREADS * SLOT,
                BLOCK_THREADS * 4
            )
        })
    }
}
