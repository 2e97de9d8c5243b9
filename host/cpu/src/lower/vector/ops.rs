//! Vector values and operations of the vector body: lanes and splats, addresses of
//! contiguous accesses, the body's instructions, arithmetic, comparisons and casts.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{ConstantData, InstBuilder, MemFlagsData, Type, Value, types};
use weft_ir::{Access, BinaryOp, CmpOp, DType, Inst, Op, ParallelLoop, ReduceOp, UnaryOp, ValueId};

use super::{INTERLEAVE, UNROLL, VecCx, VecPlan, vec_type};
use crate::lower::arith::{float_cc, int_cc};
use crate::lower::{FnLower, LResult, Obligation, data_flags};

impl FnLower<'_, '_> {
    /// The mask of `lanes` consecutive bool elements at `addr` (one byte each; any nonzero
    /// byte is true, as the scalar load reads it): the bytes loaded as one word, each lane
    /// keeping its own byte (the word splat, and-ed with a vector of byte masks), compared
    /// with zero.
    fn load_mask(&mut self, addr: Value, lanes: u8) -> LResult<Value> {
        let vt = vec_type(DType::Bool, lanes);
        let lane = vt.lane_type();
        let word = match lanes {
            2 => self.b.ins().uload16(types::I32, data_flags(), addr, 0),
            4 => self.b.ins().load(types::I32, data_flags(), addr, 0),
            _ => return Err(format!("internal: a bool vector of {lanes} lanes")),
        };
        let word = if lane == types::I64 {
            self.b.ins().uextend(types::I64, word)
        } else {
            word
        };
        let mut bytes = Vec::with_capacity(16);
        for l in 0..u32::from(lanes) {
            let m = 0xFFu64 << (8 * l);
            bytes.extend_from_slice(&m.to_le_bytes()[..lane.bytes() as usize]);
        }
        let c = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        let select = self.b.ins().vconst(vt, c);
        let spread = self.b.ins().splat(vt, word);
        let own = self.b.ins().band(spread, select);
        let zero = self.b.ins().iconst(lane, 0);
        let zeros = self.b.ins().splat(vt, zero);
        Ok(self.b.ins().icmp(IntCC::NotEqual, own, zeros))
    }

    /// Stores the mask `x` (lanes of all ones or all zeros) as `lanes` consecutive bool
    /// bytes (0 or 1) at `addr`: the lanes' top bits gathered into a word, each moved to its
    /// own byte.
    fn store_mask(&mut self, x: Value, addr: Value, lanes: u8) -> LResult<()> {
        let bits = self.b.ins().vhigh_bits(types::I32, x);
        let mut word = self.b.ins().band_imm_s(bits, 1);
        for l in 1..i64::from(lanes) {
            let bit = self.b.ins().band_imm_s(bits, 1 << l);
            let byte = self.b.ins().ishl_imm_u(bit, 7 * l);
            word = self.b.ins().bor(word, byte);
        }
        match lanes {
            2 => self.b.ins().istore16(data_flags(), word, addr, 0),
            4 => self.b.ins().store(data_flags(), word, addr, 0),
            _ => return Err(format!("internal: a bool vector of {lanes} lanes")),
        };
        Ok(())
    }

    /// Lane `lane` of the vector `v` of `dt` as a scalar of `dt` (a mask lane becomes a bool).
    pub(in crate::lower) fn lane(&mut self, v: Value, lane: u8, dt: DType) -> Value {
        let x = self.b.ins().extractlane(v, lane);
        if dt == DType::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        } else {
            x
        }
    }

    /// The scalar `s` of type `t` in every lane (a bool becomes a mask).
    pub(in crate::lower) fn splat(&mut self, s: Value, t: DType, lanes: u8) -> Value {
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
    pub(super) fn row_base(&mut self, acc: &Access, cx: &mut VecCx) -> LResult<()> {
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
    pub(super) fn vector_address(
        &mut self,
        acc: &Access,
        k: usize,
        cx: &VecCx,
    ) -> LResult<(Value, DType)> {
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
    pub(super) fn vector_body(
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
                if dt == DType::Bool {
                    self.load_mask(addr, lanes)?
                } else {
                    self.b
                        .ins()
                        .load(vec_type(dt, lanes), data_flags(), addr, 0)
                }
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
                let (addr, dt) = self.vector_address(acc, k, cx)?;
                if dt == DType::Bool {
                    self.store_mask(x, addr, lanes)?;
                } else {
                    self.b.ins().store(data_flags(), x, addr, 0);
                }
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
            Op::Fma(a, b, c) => {
                // One rounding per lane, as the scalar `fma` (the FMA instruction: the
                // analysis takes `fma` only where the target has it).
                let x = self.vval(*a, k, cx)?;
                let y = self.vval(*b, k, cx)?;
                let z = self.vval(*c, k, cx)?;
                self.b.ins().fma(x, y, z)
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
    pub(in crate::lower) fn vunary(&mut self, op: UnaryOp, t: DType, x: Value) -> LResult<Value> {
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

    pub(in crate::lower) fn vbinary(
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
    pub(in crate::lower) fn vfminmax(
        &mut self,
        min: bool,
        x: Value,
        y: Value,
        t: DType,
        lanes: u8,
    ) -> Value {
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
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                return Err(format!(
                    "internal: no vector comparison of {t}, a storage type"
                ));
            }
        })
    }

    pub(in crate::lower) fn vcast(
        &mut self,
        x: Value,
        from: DType,
        to: DType,
        lanes: u8,
    ) -> LResult<Value> {
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
            // x86 has no 128-bit `f64 -> i64` conversion: lane by lane (two lanes), each
            // saturating as the scalar cast does.
            (F64, I64) => {
                let zero = self.b.ins().iconst(types::I64, 0);
                let mut out = self.b.ins().splat(vt, zero);
                for lane in 0..lanes {
                    let v = self.b.ins().extractlane(x, lane);
                    let t = self.b.ins().fcvt_to_sint_sat(types::I64, v);
                    out = self.b.ins().insertlane(out, t, lane);
                }
                out
            }
            _ => return Err(format!("internal: no vector cast from {from} to {to}")),
        })
    }

    /// `a op b` lane by lane, for a reduction's accumulator.
    pub(super) fn vcombine(
        &mut self,
        op: ReduceOp,
        dt: DType,
        a: Value,
        b: Value,
        lanes: u8,
    ) -> Value {
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
            // No unsigned store takes a reduction (the validator refuses them); on their
            // `i64` values this is the unsigned arithmetic.
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Sum) => ins.iadd(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Prod) => ins.imul(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Min) => ins.umin(a, b),
            (DType::U8 | DType::U16 | DType::U32 | DType::U64, ReduceOp::Max) => ins.umax(a, b),
        }
    }
}
