//! Reductions: how a parallel step reduces into a store ([`RedMode`], [`RedBuf`]), and the
//! `reduce` instruction into a register accumulator, a chunk buffer or the store itself.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value};
use weft_ir::{Access, DType, Privilege, ReduceOp, ValueId};

use super::{FnLower, LResult, cl_type, data_flags};

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
    /// Index into [`Layout::stores`](super::Layout::stores).
    pub store: usize,
    pub op: ReduceOp,
    pub mode: RedMode,
}

impl FnLower<'_, '_> {
    pub(super) fn combine(&mut self, op: ReduceOp, dt: DType, a: Value, b: Value) -> Value {
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
            // No unsigned store takes a reduction (the validator refuses them); on their
            // `i64` values this is the unsigned arithmetic.
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Sum) => ins.iadd(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Prod) => ins.imul(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Min) => ins.umin(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Max) => ins.umax(a, b),
        }
    }

    pub(super) fn reduce(&mut self, acc: &Access, op: ReduceOp, v: ValueId) -> LResult<()> {
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
}
