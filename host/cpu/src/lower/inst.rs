//! Instructions one at a time: [`FnLower::lower_inst`] dispatches on the operation (the
//! operations without a file of their own lower here: constants, parameters, selects, casts,
//! extents and origins), and the values in scope and constants that every lowering reads.

use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, Type, Value, types};
use weft_ir::{DType, Inst, Op, Scalar, ValueId};

use super::layout::Slot;
use super::{FnLower, LResult, cl_type};

/// Values an operation reads (not counting values read by nested bodies).
pub(super) fn operands(op: &Op) -> Vec<ValueId> {
    match op {
        Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => vec![],
        Op::Binary(_, a, b) | Op::Cmp(_, a, b) => vec![*a, *b],
        Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => vec![*a],
        Op::Select(c, a, b) | Op::Fma(c, a, b) => vec![*c, *a, *b],
        Op::Load(acc) => acc.indices.clone(),
        Op::Store(acc, v) | Op::Reduce(acc, _, v) => {
            let mut v2 = acc.indices.clone();
            v2.push(*v);
            v2
        }
        Op::Parallel(_) => vec![],
        Op::For(l) => {
            let mut v = vec![l.lo, l.hi];
            v.extend(&l.init);
            v
        }
    }
}

impl FnLower<'_, '_> {
    pub(super) fn lower_body(&mut self, body: &[Inst]) -> LResult<()> {
        let mark = self.env.mark();
        for inst in body {
            self.lower_inst(inst)?;
        }
        self.env.pop_to(mark);
        Ok(())
    }

    fn one_result(inst: &Inst) -> LResult<ValueId> {
        match inst.results.as_slice() {
            [r] => Ok(*r),
            _ => Err(format!(
                "{:?} must define exactly one value, defines {}",
                op_name(&inst.op),
                inst.results.len()
            )),
        }
    }

    fn no_result(inst: &Inst) -> LResult<()> {
        if inst.results.is_empty() {
            Ok(())
        } else {
            Err(format!("{} defines no values", op_name(&inst.op)))
        }
    }

    pub(super) fn lower_inst(&mut self, inst: &Inst) -> LResult<()> {
        let (val, ty) = match &inst.op {
            Op::Const(s) => {
                if let [r] = inst.results[..] {
                    self.consts.insert(r, *s);
                }
                (self.constant(*s), s.dtype())
            }
            Op::Param(p) => match self.layout.slots.get(*p as usize) {
                Some(Slot::Scalar(s)) => {
                    let slot = &self.layout.scalars[*s];
                    let (dt, off) = (slot.dtype, slot.off);
                    (self.frame_word(cl_type(dt), off), dt)
                }
                _ => return Err(format!("parameter {p} is not a scalar")),
            },
            Op::Binary(op, a, b) => self.binary(*op, *a, *b)?,
            Op::Unary(op, a) => self.unary(*op, *a)?,
            Op::Cmp(op, a, b) => (self.cmp(*op, *a, *b)?, DType::Bool),
            Op::Select(c, a, b) => {
                let c = self.typed(*c, DType::Bool, "select condition")?;
                let (a, ta) = self.val(*a)?;
                let (b, tb) = self.val(*b)?;
                if ta != tb {
                    return Err(format!("select of {ta} and {tb}"));
                }
                (self.b.ins().select(c, a, b), ta)
            }
            Op::Fma(a, b, c) => {
                let (x, t) = self.val(*a)?;
                if !t.is_float() {
                    return Err(format!("fma of {t}"));
                }
                let y = self.typed(*b, t, "fma operand")?;
                let z = self.typed(*c, t, "fma operand")?;
                // Cranelift's `fma` rounds once: the FMA instruction where the CPU has it,
                // else a call to `fma`/`fmaf` (registered with the JIT module).
                (self.ins().fma(x, y, z), t)
            }
            Op::Cast(to, v) => {
                let (x, from) = self.val(*v)?;
                match self.widened.get(v) {
                    Some(&(narrow, wide)) if narrow == x && *to == DType::I64 => (wide, *to),
                    _ => (self.cast(x, from, *to), *to),
                }
            }
            Op::Bitcast(to, v) => {
                let (x, from) = self.val(*v)?;
                if !weft_ir::validate::bitcast_ok(from, *to) {
                    return Err(format!("bitcast of {from} to {to}"));
                }
                let y = if from == *to {
                    x
                } else {
                    // Same lane count, so the byte order does not matter; little-endian is
                    // the IR's definition anyway.
                    let flags = MemFlagsData::new().with_endianness(ir::Endianness::Little);
                    self.ins().bitcast(cl_type(*to), flags, x)
                };
                (y, *to)
            }
            Op::Extent { param, dim } | Op::Origin { param, dim } => {
                let (_, slot) = self.layout.store(*param)?;
                let d = *dim as usize;
                if d >= slot.rank {
                    return Err(format!(
                        "dimension {dim} of store parameter {param}, which has rank {}",
                        slot.rank
                    ));
                }
                let is_extent = matches!(inst.op, Op::Extent { .. });
                if !is_extent && self.zero_origins {
                    // (Not recorded as a constant: the other copies of the loop nest read
                    // the frame word.)
                    (self.iconst(types::I64, 0), DType::I64)
                } else {
                    let word = if is_extent {
                        slot.extent(d)
                    } else {
                        slot.origin(d)
                    };
                    (self.frame_word(types::I64, word), DType::I64)
                }
            }
            Op::Load(acc) => self.lower_load(inst, acc)?,
            Op::Store(acc, v) => {
                Self::no_result(inst)?;
                self.lower_store(acc, *v)?;
                return Ok(());
            }
            Op::Reduce(acc, op, v) => {
                Self::no_result(inst)?;
                self.reduce(acc, *op, *v)?;
                return Ok(());
            }
            Op::Parallel(_) => {
                return Err("a parallel loop may appear only at the top level".into());
            }
            Op::For(l) => return self.lower_for(inst, l),
        };
        let r = Self::one_result(inst)?;
        self.env.define(r, val, ty);
        Ok(())
    }

    pub(super) fn val(&self, v: ValueId) -> LResult<(Value, DType)> {
        self.env
            .map
            .get(&v)
            .copied()
            .ok_or_else(|| format!("value {v} is used where it is not defined"))
    }

    pub(super) fn typed(&self, v: ValueId, want: DType, what: &str) -> LResult<Value> {
        let (val, ty) = self.val(v)?;
        if ty != want {
            return Err(format!("{what} {v} has type {ty}, expected {want}"));
        }
        Ok(val)
    }

    pub(super) fn iconst(&mut self, ty: Type, v: i64) -> Value {
        let v = match ty {
            types::I8 => i64::from(v as u8),
            types::I32 => i64::from(v as u32),
            _ => v,
        };
        self.b.ins().iconst(ty, v)
    }

    pub(super) fn constant(&mut self, s: Scalar) -> Value {
        match s {
            Scalar::F32(x) => self.b.ins().f32const(x),
            Scalar::F64(x) => self.b.ins().f64const(x),
            Scalar::I32(x) => self.iconst(types::I32, i64::from(x)),
            Scalar::I64(x) => self.iconst(types::I64, x),
            Scalar::Bool(x) => self.iconst(types::I8, i64::from(x)),
        }
    }
}

pub(super) fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Const(_) => "const",
        Op::Param(_) => "param",
        Op::Binary(..) => "binary",
        Op::Unary(..) => "unary",
        Op::Cmp(..) => "cmp",
        Op::Select(..) => "select",
        Op::Fma(..) => "fma",
        Op::Cast(..) => "cast",
        Op::Bitcast(..) => "bitcast",
        Op::Load(_) => "load",
        Op::Store(..) => "store",
        Op::Reduce(..) => "reduce",
        Op::Extent { .. } => "extent",
        Op::Origin { .. } => "origin",
        Op::Parallel(_) => "parallel",
        Op::For(_) => "for",
    }
}
