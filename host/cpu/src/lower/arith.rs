//! Arithmetic: binary and unary operations, comparisons, casts, and calls of the math shims
//! for operations Cranelift has no instruction for.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, Value, types};
use cranelift_module::Module;
use weft_ir::passes::math::MathFn as IrFn;
use weft_ir::{BinaryOp, CmpOp, DType, UnaryOp, ValueId};

use super::{FnLower, LResult, cl_type};
use crate::math::MathFn;

impl FnLower<'_, '_> {
    pub(super) fn binary(
        &mut self,
        op: BinaryOp,
        a: ValueId,
        b: ValueId,
    ) -> LResult<(Value, DType)> {
        let (x, ta) = self.val(a)?;
        let (y, tb) = self.val(b)?;
        if ta != tb {
            return Err(format!("{} of {ta} and {tb}", op.name()));
        }
        let bad = || Err(format!("{} is not defined on {ta}", op.name()));
        let v = match ta {
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add => self.ins().fadd(x, y),
                BinaryOp::Sub => self.ins().fsub(x, y),
                BinaryOp::Mul => self.ins().fmul(x, y),
                BinaryOp::Div => self.ins().fdiv(x, y),
                BinaryOp::Min => self.ins().fmin(x, y),
                BinaryOp::Max => self.ins().fmax(x, y),
                BinaryOp::Rem => self.call_math(MathFn::Rem, ta, &[x, y])?,
                BinaryOp::Pow => self.call_math(MathFn::Ir(IrFn::Pow), ta, &[x, y])?,
                BinaryOp::Atan2 => self.call_math(MathFn::Ir(IrFn::Atan2), ta, &[x, y])?,
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Shl | BinaryOp::Shr => {
                    return bad();
                }
            },
            DType::I32 | DType::I64 => {
                let ty = cl_type(ta);
                match op {
                    BinaryOp::Add => self.ins().iadd(x, y),
                    BinaryOp::Sub => self.ins().isub(x, y),
                    BinaryOp::Mul => self.ins().imul(x, y),
                    BinaryOp::Div | BinaryOp::Rem => {
                        // Never trap: a zero divisor gives 0, and -1 is handled apart
                        // (MIN / -1 wraps to MIN; any x % -1 is 0).
                        let zero = self.iconst(ty, 0);
                        let one = self.iconst(ty, 1);
                        let m1 = self.iconst(ty, -1);
                        let is0 = self.ins().icmp(IntCC::Equal, y, zero);
                        let is_m1 = self.ins().icmp(IntCC::Equal, y, m1);
                        let avoid = self.ins().bor(is0, is_m1);
                        let d = self.ins().select(avoid, one, y);
                        if op == BinaryOp::Rem {
                            // x % 1 == 0 covers both special divisors.
                            self.ins().srem(x, d)
                        } else {
                            let q = self.ins().sdiv(x, d);
                            let neg = self.ins().ineg(x);
                            let q = self.ins().select(is_m1, neg, q);
                            self.ins().select(is0, zero, q)
                        }
                    }
                    BinaryOp::Min => self.ins().smin(x, y),
                    BinaryOp::Max => self.ins().smax(x, y),
                    BinaryOp::And => self.ins().band(x, y),
                    BinaryOp::Or => self.ins().bor(x, y),
                    BinaryOp::Xor => self.ins().bxor(x, y),
                    // Cranelift takes the amount modulo the bit width, as the IR does.
                    BinaryOp::Shl => self.ins().ishl(x, y),
                    BinaryOp::Shr => self.ins().ushr(x, y),
                    BinaryOp::Pow | BinaryOp::Atan2 => return bad(),
                }
            }
            DType::Bool => match op {
                BinaryOp::And | BinaryOp::Min => self.ins().band(x, y),
                BinaryOp::Or | BinaryOp::Max => self.ins().bor(x, y),
                BinaryOp::Xor => self.ins().bxor(x, y),
                _ => return bad(),
            },
            // Storage types only: no value has one.
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => return bad(),
        };
        Ok((v, ta))
    }

    pub(super) fn unary(&mut self, op: UnaryOp, a: ValueId) -> LResult<(Value, DType)> {
        let (x, t) = self.val(a)?;
        let bad = || Err(format!("{} is not defined on {t}", op.name()));
        let v = match t {
            DType::F32 | DType::F64 => match op {
                UnaryOp::Neg => self.b.ins().fneg(x),
                UnaryOp::Abs => self.b.ins().fabs(x),
                UnaryOp::Sqrt => self.b.ins().sqrt(x),
                UnaryOp::Floor => self.b.ins().floor(x),
                UnaryOp::Ceil => self.b.ins().ceil(x),
                UnaryOp::Not => return bad(),
                _ => match IrFn::of_unary(op) {
                    Some(f) => self.call_math(MathFn::Ir(f), t, &[x])?,
                    None => return bad(),
                },
            },
            DType::I32 | DType::I64 => match op {
                UnaryOp::Neg => self.b.ins().ineg(x),
                UnaryOp::Abs => self.b.ins().iabs(x),
                UnaryOp::Not => self.b.ins().bnot(x),
                _ => return bad(),
            },
            DType::Bool => match op {
                UnaryOp::Not => self.b.ins().bxor_imm_u(x, 1),
                _ => return bad(),
            },
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => return bad(),
        };
        Ok((v, t))
    }

    pub(super) fn cmp(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> LResult<Value> {
        let (x, ta) = self.val(a)?;
        let (y, tb) = self.val(b)?;
        if ta != tb {
            return Err(format!("{} of {ta} and {tb}", op.name()));
        }
        Ok(match ta {
            DType::F32 | DType::F64 => self.b.ins().fcmp(float_cc(op), x, y),
            DType::I32 | DType::I64 => self.b.ins().icmp(int_cc(op, true), x, y),
            DType::Bool => self.b.ins().icmp(int_cc(op, false), x, y),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                return Err(format!("{} of {ta}, a storage type", op.name()));
            }
        })
    }

    pub(super) fn cast(&mut self, x: Value, from: DType, to: DType) -> Value {
        use DType::*;
        match (from, to) {
            _ if from == to => x,
            (I32, I64) => self.ins().sextend(types::I64, x),
            (I64, I32) => self.ins().ireduce(types::I32, x),
            (Bool, I32 | I64) => self.ins().uextend(cl_type(to), x),
            (I32 | I64, F32 | F64) => self.ins().fcvt_from_sint(cl_type(to), x),
            (Bool, F32 | F64) => {
                let w = self.ins().uextend(types::I32, x);
                self.ins().fcvt_from_sint(cl_type(to), w)
            }
            (F32 | F64, I32 | I64) => self.ins().fcvt_to_sint_sat(cl_type(to), x),
            (F32, F64) => self.ins().fpromote(types::F64, x),
            (F64, F32) => self.ins().fdemote(types::F32, x),
            (I32 | I64, Bool) => self.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
            (F32 | F64, Bool) => {
                let zero = if from == F32 {
                    self.ins().f32const(0.0)
                } else {
                    self.ins().f64const(0.0)
                };
                // Unordered or not equal: NaN is true, as in C.
                self.ins().fcmp(FloatCC::NotEqual, x, zero)
            }
            // Covered by the guard above; kept total without panicking.
            _ => x,
        }
    }

    fn call_math(&mut self, f: MathFn, ty: DType, args: &[Value]) -> LResult<Value> {
        let fref = match self.math_refs.get(&(f, ty)) {
            Some(r) => *r,
            None => {
                let id = *self
                    .math
                    .ids
                    .get(&(f, ty))
                    .ok_or_else(|| format!("internal: no shim for {f:?} on {ty}"))?;
                let r = self.module.declare_func_in_func(id, self.b.func);
                self.math_refs.insert((f, ty), r);
                r
            }
        };
        let call = self.b.ins().call(fref, args);
        Ok(self.b.inst_results(call)[0])
    }
}

/// The float condition of a comparison (ordered: false if either operand is NaN, except `ne`).
pub(crate) fn float_cc(op: CmpOp) -> FloatCC {
    match op {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The integer condition of a comparison, signed or unsigned (`bool`s compare unsigned).
pub(crate) fn int_cc(op: CmpOp, signed: bool) -> IntCC {
    match (op, signed) {
        (CmpOp::Eq, _) => IntCC::Equal,
        (CmpOp::Ne, _) => IntCC::NotEqual,
        (CmpOp::Lt, true) => IntCC::SignedLessThan,
        (CmpOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CmpOp::Gt, true) => IntCC::SignedGreaterThan,
        (CmpOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CmpOp::Lt, false) => IntCC::UnsignedLessThan,
        (CmpOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CmpOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CmpOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    }
}
