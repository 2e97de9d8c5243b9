//! The step of a loop cut into segments (see [`crate::strips`]): each segment compiles to a
//! function of its own (vector or scalar, as any parallel loop), and a *driver* function,
//! with the signature of every step, runs them strip by strip:
//!
//! ```text
//! driver(frame, red, lo, hi):
//!     copy the frame to the stack; give each segment its own array of reduction buffers
//!     for s in lo..hi by STRIP_ROWS:
//!         e = min(s + STRIP_ROWS, hi)
//!         point each scratch store of the copy at its stack buffer, element s at its start
//!         for each segment: status = segment(copy, its reds, s, e); a fault returns status
//!     return 0
//! ```
//!
//! The launcher runs the driver as it runs any parallel step: its obligations and reduction
//! buffers are those of all its segments together.

use std::collections::BTreeSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    BlockArg, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, types,
};
use cranelift_module::{FuncId, Module};
use weft_ir::{ParallelLoop, ReduceOp};

use super::kernel::Step;
use super::skeleton::has_for_loop;
use super::{FnLower, LResult, RedBuf, RedMode, StepCx, StepKind, frame_flags};
use crate::strips::{Group, STRIP_ROWS};

/// One segment as the driver calls it.
struct Segment {
    func: FuncId,
    /// For each of the segment's reduction buffers, its index among the group's.
    reds: Vec<usize>,
}

/// A scratch store as the driver points it at its buffer.
struct ScratchBuf {
    /// The frame word of its data pointer.
    word: usize,
    /// Bytes per element.
    size: i64,
}

impl StepCx<'_> {
    /// The step of group `g`, from its segments' loops and steps.
    pub(super) fn lower_group(
        &mut self,
        loops: &[&ParallelLoop],
        g: &Group,
        segs: Vec<Step>,
    ) -> LResult<Step> {
        let mut over = None;
        let mut obligations = BTreeSet::new();
        let mut reds: Vec<RedBuf> = Vec::new();
        for s in &segs {
            let StepKind::Parallel {
                over: o,
                obligations: ob,
                reds: r,
                ..
            } = &s.kind
            else {
                return Err("internal: a segment compiled to a sequential step".into());
            };
            if over.is_some_and(|x| x != *o) {
                return Err("internal: the segments of a loop run over different stores".into());
            }
            over = Some(*o);
            obligations.extend(ob.iter().copied());
            for r in r {
                if reds.iter().any(|q| q.store == r.store) {
                    return Err("internal: two segments reduce into one store".into());
                }
                reds.push(r.clone());
            }
        }
        let over = over.ok_or("internal: a group without segments")?;
        reds.sort_by_key(|r| r.store);
        let mut calls = Vec::with_capacity(segs.len());
        for s in &segs {
            let StepKind::Parallel { reds: r, .. } = &s.kind else {
                continue;
            };
            let idx = r
                .iter()
                .map(|q| reds.iter().position(|u| u.store == q.store))
                .collect::<Option<Vec<usize>>>()
                .ok_or("internal: a segment's reduction buffer is not the group's")?;
            calls.push(Segment {
                func: s.func,
                reds: idx,
            });
        }
        let mut scratch = Vec::with_capacity(g.scratch.len());
        for &param in &g.scratch {
            let (_, slot) = self.layout.store(param)?;
            if slot.rank != 1 {
                return Err(format!(
                    "internal: scratch store {param} has rank {}",
                    slot.rank
                ));
            }
            scratch.push(ScratchBuf {
                word: slot.ptr(),
                size: slot.dtype.size() as i64,
            });
        }
        let func = self.define(None, &mut |fl| fl.build_driver(&calls, &scratch))?;
        let ordered = reds.iter().any(|r| {
            r.mode == RedMode::Buffer
                && matches!(r.op, ReduceOp::Sum | ReduceOp::Prod)
                && self.layout.stores[r.store].dtype.is_float()
        });
        let heavy = segs.get(g.heavy);
        let runs_for = loops.iter().any(|l| has_for_loop(&l.body));
        Ok(Step {
            kind: StepKind::Parallel {
                over,
                obligations: obligations.into_iter().collect(),
                reds,
                spread: runs_for && !ordered,
                grouped: false,
            },
            func,
            vectorized: heavy.is_some_and(|s| s.vectorized),
            wide: heavy.and_then(|s| s.wide),
            wide_refusal: heavy.and_then(|s| s.wide_refusal.clone()),
            whole_rows: heavy.is_some_and(|s| s.whole_rows),
        })
    }
}

impl FnLower<'_, '_> {
    /// The driver of a group: see the module documentation.
    fn build_driver(&mut self, segs: &[Segment], scratch: &[ScratchBuf]) -> LResult<()> {
        let (lo, hi) = self.entry();
        let frame_bytes = self
            .layout
            .frame_len
            .checked_mul(8)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or("the frame is too large for a driver's copy")?;
        let fslot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            frame_bytes.max(8),
            3,
        ));
        let copy = self.b.ins().stack_addr(self.ptr_ty, fslot, 0);
        // The frame, word by word.
        let (head, body, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(head, types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().jump(head, &[BlockArg::Value(zero)]);
        self.b.switch_to_block(head);
        let off = self.b.block_params(head)[0];
        let more = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThan, off, i64::from(frame_bytes));
        self.b.ins().brif(more, body, &[], done, &[]);
        self.b.switch_to_block(body);
        let from = self.b.ins().iadd(self.frame, off);
        let word = self.b.ins().load(types::I64, frame_flags(), from, 0);
        let to = self.b.ins().iadd(copy, off);
        self.b.ins().store(MemFlagsData::trusted(), word, to, 0);
        let next = self.b.ins().iadd_imm_s(off, 8);
        self.b.ins().jump(head, &[BlockArg::Value(next)]);
        self.b.switch_to_block(done);

        // Each segment's reduction-buffer pointers, picked from the group's.
        let mut red_args = Vec::with_capacity(segs.len());
        for seg in segs {
            if seg.reds.is_empty() {
                red_args.push(self.b.ins().iconst(self.ptr_ty, 0));
                continue;
            }
            let bytes = u32::try_from(seg.reds.len() * 8).map_err(|e| e.to_string())?;
            let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                bytes,
                3,
            ));
            for (k, &u) in seg.reds.iter().enumerate() {
                let p = self.b.ins().load(
                    self.ptr_ty,
                    frame_flags(),
                    self.red,
                    i32::try_from(u * 8).map_err(|e| e.to_string())?,
                );
                let at = i32::try_from(k * 8).map_err(|e| e.to_string())?;
                self.b.ins().stack_store(self.ptr_ty, p, slot, at);
            }
            red_args.push(self.b.ins().stack_addr(self.ptr_ty, slot, 0));
        }
        // The scratch buffers.
        let mut bufs = Vec::with_capacity(scratch.len());
        for sc in scratch {
            let bytes = u32::try_from(STRIP_ROWS * sc.size).map_err(|e| e.to_string())?;
            let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                bytes,
                4,
            ));
            bufs.push(self.b.ins().stack_addr(self.ptr_ty, slot, 0));
        }
        let callees: Vec<_> = segs
            .iter()
            .map(|s| {
                let r = self.module.declare_func_in_func(s.func, self.b.func);
                // The segment may land further than a 32-bit displacement reaches from the
                // driver: call it through its absolute address.
                self.b.func.dfg.ext_funcs[r].colocated = false;
                r
            })
            .collect();

        // The strips.
        let (strip, run, exit, fail) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(strip, types::I64);
        self.b.append_block_param(fail, types::I64);
        self.b.ins().jump(strip, &[BlockArg::Value(lo)]);
        self.b.switch_to_block(strip);
        let s = self.b.block_params(strip)[0];
        let more = self.b.ins().icmp(IntCC::SignedLessThan, s, hi);
        self.b.ins().brif(more, run, &[], exit, &[]);
        self.b.switch_to_block(run);
        let end = self.b.ins().iadd_imm_s(s, STRIP_ROWS);
        let e = self.b.ins().smin(end, hi);
        for (sc, &buf) in scratch.iter().zip(&bufs) {
            // Element `s` of the scratch store is the buffer's start.
            let back = self.b.ins().imul_imm_s(s, sc.size);
            let base = self.b.ins().isub(buf, back);
            let at = i32::try_from(sc.word * 8).map_err(|e| e.to_string())?;
            self.b.ins().store(MemFlagsData::trusted(), base, copy, at);
        }
        for (callee, &reds) in callees.iter().zip(&red_args) {
            let call = self.b.ins().call(*callee, &[copy, reds, s, e]);
            let status = self.b.inst_results(call)[0];
            let ok = self.b.ins().icmp_imm_s(IntCC::Equal, status, 0);
            let cont = self.b.create_block();
            self.b
                .ins()
                .brif(ok, cont, &[], fail, &[BlockArg::Value(status)]);
            self.b.switch_to_block(cont);
        }
        self.b.ins().jump(strip, &[BlockArg::Value(e)]);
        self.b.switch_to_block(fail);
        let status = self.b.block_params(fail)[0];
        self.b.ins().return_(&[status]);
        self.b.switch_to_block(exit);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.ins().return_(&[zero]);
        self.finish();
        Ok(())
    }
}
