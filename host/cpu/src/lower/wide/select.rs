//! Instruction selection of the wide loop bodies: the varying part of a loop body, one
//! vector of the step at a time, as [`MInst`]s over virtual registers.
//!
//! One selector serves both instruction sets. They differ in where masks live (AVX-512: `k`
//! registers; AVX2: vectors of all-ones or all-zeros lanes, so mask operations are the bitwise
//! vector instructions and a bool `select` is a blend) and in what AVX2 lacks: 64-bit integer
//! `mul`, `min`, `max`, `abs`, integer comparisons other than `eq` and `gt`, and the conversion
//! from `i64` to `f64`. `min`, `max`, `abs` and the comparisons are built from what it has (a
//! compare and a blend; a subtraction and a blend; swapped operands and a NOT); `mul` and the
//! conversion make the loop keep its 128-bit code.

use std::collections::HashMap;

use weft_ir::validate::Types;
use weft_ir::{BinaryOp, CmpOp, DType, Inst, Op, Scalar, UnaryOp, ValueId};

use super::Isa;
use super::encode::{KOp, VecOp, op};
use super::regalloc::{Class, MInst, Src, Uniform, Uniforms, VReg};
use crate::lower::vector::VecPlan;

/// Where selected instructions go: a selector's list, and its virtual registers.
pub(super) trait Emit {
    /// The instruction set selected for.
    fn isa(&self) -> Isa;
    /// A fresh virtual register of class `c`.
    fn fresh(&mut self, c: Class) -> VReg;
    /// Appends an instruction.
    fn emit(&mut self, i: MInst);

    /// `dst = ins(a, b)` (`imm` for comparisons), `dst` a fresh register of `class`.
    fn op3(&mut self, ins: VecOp, a: VReg, b: Src, imm: Option<u8>, class: Class) -> VReg {
        let dst = self.fresh(class);
        self.emit(MInst::Op3 {
            ins,
            dst,
            a,
            b,
            imm,
        });
        dst
    }

    /// `dst = u` in every lane, `dst` a fresh vector register.
    fn broadcast(&mut self, u: Uniform) -> VReg {
        let dst = self.fresh(Class::V);
        self.emit(MInst::Bcast { dst, u });
        dst
    }

    /// `dst = x·y + z`, rounded once, `dst` a fresh vector register. The product's operands
    /// may be swapped (the exact product does not depend on their order) so that the first is
    /// a vector; of the other two at most one stays uniform (see [`MInst::Fma`]).
    fn fma(&mut self, x: Src, y: Src, z: Src) -> VReg {
        let (a, b) = match (x, y) {
            (Src::V(a), b) => (a, b),
            (b, Src::V(a)) => (a, b),
            (Src::U(u), b) => (self.broadcast(u), b),
        };
        let c = match (b, z) {
            (Src::U(_), Src::U(u)) => Src::V(self.broadcast(u)),
            _ => z,
        };
        let dst = self.fresh(Class::V);
        self.emit(MInst::Fma { dst, a, b, c });
        dst
    }
}

impl Emit for Select<'_> {
    fn isa(&self) -> Isa {
        self.isa
    }

    fn fresh(&mut self, c: Class) -> VReg {
        self.new_reg(c)
    }

    fn emit(&mut self, i: MInst) {
        self.push(i);
    }
}

/// Float `min` or `max` of `x` and `y` (`x` in register `xa`; `y` as the operand `yb` and in
/// register `ya`) with the scalar code's results (see `vector::vfminmax`): the native
/// instruction, `x | y` (`x & y`) where the operands are equal, `y + x` where either is NaN.
pub(super) fn float_min_max(e: &mut dyn Emit, min: bool, (xa, yb, ya): (VReg, Src, VReg)) -> VReg {
    let mask = match e.isa() {
        Isa::Avx512 => Class::K,
        Isa::Avx2 => Class::V,
    };
    let blend = |e: &mut dyn Emit, k, f, t| {
        let dst = e.fresh(Class::V);
        e.emit(MInst::Blend { dst, k, f, t });
        dst
    };
    let native = if min { op::VMINPD } else { op::VMAXPD };
    let r = e.op3(native, xa, yb, None, Class::V);
    let eq = e.op3(op::VCMPPD, xa, yb, Some(FCMP_EQ), mask);
    let both = if min { op::VPOR } else { op::VPAND };
    let both = e.op3(both, xa, yb, None, Class::V);
    let r = blend(e, eq, r, Src::V(both));
    let nan = e.op3(op::VCMPPD, xa, yb, Some(FCMP_UNORD), mask);
    let sum = e.op3(op::VADDPD, ya, Src::V(xa), None, Class::V);
    blend(e, nan, r, Src::V(sum))
}

/// The instruction selector's state.
pub(super) struct Select<'a> {
    pub isa: Isa,
    plan: &'a VecPlan,
    types: &'a Types,
    const_of: &'a dyn Fn(ValueId) -> Option<Scalar>,
    /// The selected instructions, and the class of each virtual register.
    pub insts: Vec<MInst>,
    pub classes: Vec<Class>,
    /// The registers of the varying values, per vector of the step.
    vals: Vec<HashMap<ValueId, VReg>>,
    /// The vector of the step being selected.
    copy: usize,
    /// The constants the body reads, and the uniform values it takes as arguments.
    pub uniforms: Uniforms,
    /// The pointers whose elements are bool bytes (AVX-512 only), in order.
    pub byte_ptrs: Vec<u32>,
}

type R<T> = Result<T, String>;

impl<'a> Select<'a> {
    /// A selector for `isa`; `const_of` gives the value of each uniform value that is a
    /// constant.
    pub fn new(
        isa: Isa,
        plan: &'a VecPlan,
        types: &'a Types,
        const_of: &'a dyn Fn(ValueId) -> Option<Scalar>,
    ) -> Self {
        Select {
            isa,
            plan,
            types,
            const_of,
            insts: Vec::new(),
            classes: Vec::new(),
            vals: vec![HashMap::new(); isa.unroll()],
            copy: 0,
            uniforms: Uniforms::default(),
            byte_ptrs: Vec::new(),
        }
    }

    fn new_reg(&mut self, c: Class) -> VReg {
        self.classes.push(c);
        VReg(self.classes.len() as u32 - 1)
    }

    /// The byte offset of the current vector's elements from the step's first.
    fn disp(&self) -> i32 {
        (self.copy as i64 * self.isa.lanes() * 8) as i32
    }

    /// [`Self::disp`] for a pointer to bool bytes.
    fn byte_disp(&self) -> i32 {
        (self.copy as i64 * self.isa.lanes()) as i32
    }

    /// Notes that pointer `ptr` addresses bool bytes.
    fn bytes_at(&mut self, ptr: u32) {
        if !self.byte_ptrs.contains(&ptr) {
            self.byte_ptrs.push(ptr);
        }
    }

    fn push(&mut self, i: MInst) {
        self.insts.push(i);
    }

    fn ty(&self, v: ValueId) -> R<DType> {
        if let Some(&t) = self.plan.varying.get(&v) {
            return Ok(t);
        }
        self.types
            .get(v)
            .ok_or_else(|| format!("no type for value {v}"))
    }

    fn constant(&mut self, bits: u64) -> Uniform {
        self.uniforms.constant(bits)
    }

    /// The operand for `v`: its register if it varies, else a broadcast constant or argument.
    fn src(&mut self, v: ValueId) -> R<Src> {
        if let Some(&r) = self.vals[self.copy].get(&v) {
            return Ok(Src::V(r));
        }
        if self.plan.varying.contains_key(&v) {
            return Err(format!("internal: value {v} used before it is computed"));
        }
        match self.ty(v)? {
            DType::F64 | DType::I64 => {}
            t => return Err(format!("a uniform {t} operand")),
        }
        if let Some(c) = (self.const_of)(v) {
            return Ok(Src::U(self.constant(c.to_bits())));
        }
        Ok(Src::U(self.uniforms.arg(v)))
    }

    /// `v` in a vector register (a uniform is broadcast into a fresh one).
    fn reg(&mut self, v: ValueId) -> R<VReg> {
        match self.src(v)? {
            Src::V(r) => Ok(r),
            Src::U(u) => {
                let dst = self.new_reg(Class::V);
                self.push(MInst::Bcast { dst, u });
                Ok(dst)
            }
        }
    }

    /// A mask operand: a varying `bool`, or a uniform one (a `select` on a test of a scalar,
    /// as the lowered `pow` makes of its exponent), whose word is all ones or zero (see
    /// [`super::ArgWord::Uniform`]) broadcast to every lane.
    fn mask(&mut self, v: ValueId) -> R<VReg> {
        if let Some(&r) = self.vals[self.copy].get(&v) {
            if self.plan.varying.get(&v) == Some(&DType::Bool) {
                return Ok(r);
            }
        } else if !self.plan.varying.contains_key(&v) && self.ty(v)? == DType::Bool {
            let u = match (self.const_of)(v) {
                Some(Scalar::Bool(b)) => self.constant(if b { u64::MAX } else { 0 }),
                Some(_) => return Err(format!("the mask {v} is a constant of another type")),
                None => self.uniforms.arg(v),
            };
            let lanes = self.new_reg(Class::V);
            self.push(MInst::Bcast { dst: lanes, u });
            return Ok(match self.isa {
                Isa::Avx2 => lanes,
                Isa::Avx512 => {
                    let zero = Src::U(self.constant(0));
                    self.op3(op::VPCMPQ, lanes, zero, Some(icmp_imm(CmpOp::Ne)), Class::K)
                }
            });
        }
        Err(format!("the mask {v} is not a comparison result"))
    }

    /// The register class of masks.
    fn mask_class(&self) -> Class {
        match self.isa {
            Isa::Avx512 => Class::K,
            Isa::Avx2 => Class::V,
        }
    }

    fn op2(&mut self, ins: VecOp, b: Src, imm: Option<u8>) -> VReg {
        let dst = self.new_reg(Class::V);
        self.push(MInst::Op2 { ins, dst, b, imm });
        dst
    }

    /// `k ? t : f`, lane by lane; on AVX2 of masks too.
    fn blend(&mut self, k: VReg, f: VReg, t: Src) -> VReg {
        let dst = self.new_reg(self.classes[f.0 as usize]);
        self.push(MInst::Blend { dst, k, f, t });
        dst
    }

    /// A mask operation (on AVX2, the bitwise one on vectors).
    fn kop(&mut self, op: KOp, a: VReg, b: VReg) -> VReg {
        match self.isa {
            Isa::Avx512 => {
                let dst = self.new_reg(Class::K);
                self.push(MInst::KOp { op, dst, a, b });
                dst
            }
            Isa::Avx2 => {
                let ins = match op {
                    KOp::And => op::VPAND,
                    KOp::AndN => op::VPANDN,
                    KOp::Or => op::VPOR,
                    KOp::Xor => op::VPXOR,
                };
                self.op3(ins, a, Src::V(b), None, Class::V)
            }
        }
    }

    /// `!a` on masks (on AVX2, `a ^ all ones`).
    fn knot(&mut self, a: VReg) -> VReg {
        match self.isa {
            Isa::Avx512 => {
                let dst = self.new_reg(Class::K);
                self.push(MInst::KNot { dst, a });
                dst
            }
            Isa::Avx2 => {
                let ones = self.constant(u64::MAX);
                self.op3(op::VPXOR, a, Src::U(ones), None, Class::V)
            }
        }
    }

    /// `ins(x, y)` for a commutative integer operation: a uniform `x` goes last. (Float
    /// operations keep their order: of two NaN operands, the first one's is the result.)
    fn commutative(&mut self, ins: VecOp, x: ValueId, y: ValueId, class: Class) -> R<VReg> {
        let (x, y) = if self.vals[self.copy].contains_key(&x) {
            (x, y)
        } else {
            (y, x)
        };
        let a = self.reg(x)?;
        let b = self.src(y)?;
        Ok(self.op3(ins, a, b, None, class))
    }

    /// Float `add` or `mul`. On AVX2 a first operand that is a constant other than NaN goes
    /// last, as a memory operand, instead of taking a register: the result is the same bits
    /// (the sum or product is; a NaN result then comes from `y`, which the instruction
    /// propagates from either position, or is the default NaN of an invalid operation).
    /// AVX-512 keeps the order, reading the constant with a broadcast.
    fn fcommutative(&mut self, ins: VecOp, x: ValueId, y: ValueId) -> R<VReg> {
        let non_nan_const = !self.vals[self.copy].contains_key(&x)
            && (self.const_of)(x).is_some_and(|c| !f64::from_bits(c.to_bits()).is_nan());
        if self.isa == Isa::Avx2 && non_nan_const && self.vals[self.copy].contains_key(&y) {
            self.ordered(ins, y, x)
        } else {
            self.ordered(ins, x, y)
        }
    }

    fn ordered(&mut self, ins: VecOp, x: ValueId, y: ValueId) -> R<VReg> {
        let a = self.reg(x)?;
        let b = self.src(y)?;
        Ok(self.op3(ins, a, b, None, Class::V))
    }

    /// Float `min` or `max` with the scalar code's results: see [`float_min_max`].
    fn fminmax(&mut self, min: bool, x: ValueId, y: ValueId) -> R<VReg> {
        let (xa, yb) = (self.reg(x)?, self.src(y)?);
        let ya = self.reg(y)?;
        Ok(float_min_max(self, min, (xa, yb, ya)))
    }

    /// Integer `min` or `max` on AVX2: `x > y`, then a blend.
    fn iminmax(&mut self, min: bool, x: ValueId, y: ValueId) -> R<VReg> {
        let gt = self.icmp_gt(x, y)?;
        let (xa, ya) = (self.reg(x)?, self.reg(y)?);
        Ok(if min {
            self.blend(gt, xa, Src::V(ya))
        } else {
            self.blend(gt, ya, Src::V(xa))
        })
    }

    /// The AVX2 mask of `x > y` on `i64`.
    fn icmp_gt(&mut self, x: ValueId, y: ValueId) -> R<VReg> {
        let a = self.reg(x)?;
        let b = self.src(y)?;
        Ok(self.op3(op::VPCMPGTQ, a, b, None, Class::V))
    }

    /// The mask of `x op y`.
    fn cmp(&mut self, cop: CmpOp, x: ValueId, y: ValueId) -> R<VReg> {
        let t = self.ty(x)?;
        let mask = self.mask_class();
        match (t, self.isa) {
            (DType::F64, _) => {
                let a = self.reg(x)?;
                let b = self.src(y)?;
                Ok(self.op3(op::VCMPPD, a, b, Some(fcmp_imm(cop)), mask))
            }
            (DType::I64, Isa::Avx512) => {
                let a = self.reg(x)?;
                let b = self.src(y)?;
                Ok(self.op3(op::VPCMPQ, a, b, Some(icmp_imm(cop)), mask))
            }
            // `eq` and `gt`, with swapped operands and a NOT for the others.
            (DType::I64, Isa::Avx2) => match cop {
                CmpOp::Eq => self.commutative(op::VPCMPEQQ, x, y, Class::V),
                CmpOp::Ne => {
                    let eq = self.commutative(op::VPCMPEQQ, x, y, Class::V)?;
                    Ok(self.knot(eq))
                }
                CmpOp::Gt => self.icmp_gt(x, y),
                CmpOp::Lt => self.icmp_gt(y, x),
                CmpOp::Le => {
                    let gt = self.icmp_gt(x, y)?;
                    Ok(self.knot(gt))
                }
                CmpOp::Ge => {
                    let lt = self.icmp_gt(y, x)?;
                    Ok(self.knot(lt))
                }
            },
            (t, _) => Err(format!("a comparison of {t}")),
        }
    }

    /// The value a grouped leaf store receives from vector `copy` of the step: `v` in a
    /// register (a uniform value broadcast).
    pub fn stored(&mut self, copy: usize, v: ValueId) -> R<VReg> {
        self.copy = copy;
        let t = self.ty(v)?;
        if t != DType::F64 {
            return Err(format!("a grouped leaf of {t}"));
        }
        self.reg(v)
    }

    /// The canonical pairwise tree of one aligned group of eight `f64` contributions, combined
    /// by `op` (a float sum or product): `copies` are the group's vectors in order (one `zmm`
    /// on AVX-512, two `ymm` on AVX2), and lane 0 of the result holds the group's node, each
    /// combination in the tree's operand order (left sibling first):
    ///
    /// ```text
    /// within each vector:  x + vpermilpd(x, 0x55)  pairs:   lane 2i = x[2i] + x[2i+1]
    ///                      s + (lanes 2,3 of each 256-bit half moved down)
    ///                                               halves:  lane 4h = its half's tree
    /// AVX-512:             t + vshuff64x2(t, t, 0x4e)    lane 0 = lanes 0..4 + lanes 4..8
    /// AVX2:                t0 + t1                       lane 0 = first ymm + second ymm
    /// ```
    pub fn group_tree(&mut self, op: weft_ir::ReduceOp, copies: &[VReg]) -> R<VReg> {
        let ins = match op {
            weft_ir::ReduceOp::Sum => op::VADDPD,
            weft_ir::ReduceOp::Prod => op::VMULPD,
            other => return Err(format!("a grouped {} leaf", other.name())),
        };
        let v = Class::V;
        // `dst = permute(x, imm)`, one source.
        let permute = |s: &mut Self, ins: VecOp, x: VReg, imm: u8| {
            let dst = s.new_reg(v);
            s.push(MInst::Op2 {
                ins,
                dst,
                b: Src::V(x),
                imm: Some(imm),
            });
            dst
        };
        let half = |s: &mut Self, x: VReg| {
            let swapped = permute(s, op::VPERMILPD_IMM, x, 0x55);
            let pairs = s.op3(ins, x, Src::V(swapped), None, v);
            let moved = match s.isa {
                Isa::Avx512 => permute(s, op::VPERMPD_IMM, pairs, 0x4e),
                Isa::Avx2 => s.op3(op::VPERM2F128, pairs, Src::V(pairs), Some(0x01), v),
            };
            s.op3(ins, pairs, Src::V(moved), None, v)
        };
        match (self.isa, copies) {
            (Isa::Avx512, &[z]) => {
                let t = half(self, z);
                let high = self.op3(op::VSHUFF64X2, t, Src::V(t), Some(0x4e), v);
                Ok(self.op3(ins, t, Src::V(high), None, v))
            }
            (Isa::Avx2, &[y0, y1]) => {
                let t0 = half(self, y0);
                let t1 = half(self, y1);
                Ok(self.op3(ins, t0, Src::V(t1), None, v))
            }
            (isa, c) => Err(format!(
                "internal: a group of {} {} vectors",
                c.len(),
                isa.name()
            )),
        }
    }

    /// Lane 0 of `src` into pointer argument `ptr`, `disp` bytes from the step's first element.
    pub fn store_lane0(&mut self, src: VReg, ptr: u32, disp: i32) {
        self.push(MInst::StoreLane0 { src, ptr, disp });
    }

    /// Selects the instructions of one body instruction, for the current vector of the step;
    /// `ptr_of` numbers the contiguous accesses.
    pub fn inst(
        &mut self,
        copy: usize,
        inst: &Inst,
        ptr_of: &mut dyn FnMut(u32, &[ValueId]) -> u32,
    ) -> R<()> {
        self.copy = copy;
        let result = inst.results.first().copied();
        let r = match &inst.op {
            Op::Load(acc)
                if self.isa == Isa::Avx512
                    && result.is_some_and(|r| self.ty(r).ok() == Some(DType::Bool)) =>
            {
                // Eight bool bytes, each a lane, tested against zero: any nonzero byte is
                // true, as the scalar load reads it.
                let ptr = ptr_of(acc.param, &acc.indices);
                self.bytes_at(ptr);
                let bytes = self.new_reg(Class::V);
                self.push(MInst::LoadBytes {
                    dst: bytes,
                    ptr,
                    disp: self.byte_disp(),
                });
                let dst = self.new_reg(Class::K);
                self.push(MInst::Op3 {
                    ins: op::VPTESTMQ,
                    dst,
                    a: bytes,
                    b: Src::V(bytes),
                    imm: None,
                });
                dst
            }
            Op::Store(acc, v)
                if self.isa == Isa::Avx512 && self.ty(*v).ok() == Some(DType::Bool) =>
            {
                // The mask as lanes of 1 and 0, their low bytes stored.
                let k = self.mask(*v)?;
                let zero_word = self.constant(0);
                let zero = self.new_reg(Class::V);
                self.push(MInst::Bcast {
                    dst: zero,
                    u: zero_word,
                });
                let one = Src::U(self.constant(1));
                let lanes = self.blend(k, zero, one);
                let ptr = ptr_of(acc.param, &acc.indices);
                self.bytes_at(ptr);
                self.push(MInst::StoreBytes {
                    src: lanes,
                    ptr,
                    disp: self.byte_disp(),
                });
                return Ok(());
            }
            Op::Load(acc) => {
                let r = result.ok_or("a load without a result")?;
                self.need_64(self.ty(r)?)?;
                let ptr = ptr_of(acc.param, &acc.indices);
                let dst = self.new_reg(Class::V);
                self.push(MInst::Load {
                    dst,
                    ptr,
                    disp: self.disp(),
                });
                dst
            }
            Op::Store(acc, v) => {
                self.need_64(self.ty(*v)?)?;
                let src = self.reg(*v)?;
                let ptr = ptr_of(acc.param, &acc.indices);
                self.push(MInst::Store {
                    src,
                    ptr,
                    disp: self.disp(),
                });
                return Ok(());
            }
            Op::Binary(bop, x, y) => self.binary(*bop, *x, *y)?,
            Op::Unary(uop, x) => self.unary(*uop, *x)?,
            Op::Cmp(cop, x, y) => self.cmp(*cop, *x, *y)?,
            Op::Select(c, x, y) => {
                let k = self.mask(*c)?;
                match (
                    self.ty(result.ok_or("a select without a result")?)?,
                    self.isa,
                ) {
                    (DType::Bool, Isa::Avx512) => {
                        let (a, b) = (self.mask(*x)?, self.mask(*y)?);
                        let t = self.kop(KOp::And, k, a);
                        let f = self.kop(KOp::AndN, k, b);
                        self.kop(KOp::Or, t, f)
                    }
                    (DType::Bool, Isa::Avx2) => {
                        let (a, b) = (self.mask(*x)?, self.mask(*y)?);
                        self.blend(k, b, Src::V(a))
                    }
                    _ => {
                        let f = self.reg(*y)?;
                        let t = self.src(*x)?;
                        self.blend(k, f, t)
                    }
                }
            }
            Op::Fma(x, y, z) => {
                let t = self.ty(*x)?;
                if t != DType::F64 {
                    return Err(format!("no {} form of fma on {t}", self.isa.name()));
                }
                if !Isa::fma_detected() {
                    return Err("fma on a CPU without the FMA instructions".into());
                }
                let (x, y, z) = (self.src(*x)?, self.src(*y)?, self.src(*z)?);
                self.fma(x, y, z)
            }
            Op::Cast(to, x) => self.cast(*to, *x)?,
            Op::Bitcast(to, x) => {
                let from = self.ty(*x)?;
                if from.size() != to.size() || from == DType::Bool || *to == DType::Bool {
                    return Err(format!("a bitcast from {from} to {to}"));
                }
                self.reg(*x)?
            }
            other => return Err(format!("no {} form of {other:?}", self.isa.name())),
        };
        let result = result.ok_or("an operation without a result")?;
        self.vals[self.copy].insert(result, r);
        Ok(())
    }

    /// Loads and stores move whole vectors of 64-bit elements.
    fn need_64(&self, t: DType) -> R<()> {
        match t {
            DType::F64 | DType::I64 => Ok(()),
            t => Err(format!("a vector access to {t} elements")),
        }
    }

    fn binary(&mut self, bop: BinaryOp, x: ValueId, y: ValueId) -> R<VReg> {
        use BinaryOp::*;
        let t = self.ty(x)?;
        let avx512 = self.isa == Isa::Avx512;
        let v = Class::V;
        match (t, bop) {
            (DType::F64, Add) => self.fcommutative(op::VADDPD, x, y),
            (DType::F64, Mul) => self.fcommutative(op::VMULPD, x, y),
            (DType::F64, Sub) => self.ordered(op::VSUBPD, x, y),
            (DType::F64, Div) => self.ordered(op::VDIVPD, x, y),
            (DType::F64, Min) => self.fminmax(true, x, y),
            (DType::F64, Max) => self.fminmax(false, x, y),
            (DType::I64, Add) => self.commutative(op::VPADDQ, x, y, v),
            (DType::I64, Sub) => self.ordered(op::VPSUBQ, x, y),
            (DType::I64, Mul) if avx512 => self.commutative(op::VPMULLQ, x, y, v),
            (DType::I64, And) => self.commutative(op::VPAND, x, y, v),
            (DType::I64, Or) => self.commutative(op::VPOR, x, y, v),
            (DType::I64, Xor) => self.commutative(op::VPXOR, x, y, v),
            (DType::I64, Min) if avx512 => self.commutative(op::VPMINSQ, x, y, v),
            (DType::I64, Max) if avx512 => self.commutative(op::VPMAXSQ, x, y, v),
            (DType::I64, Min) => self.iminmax(true, x, y),
            (DType::I64, Max) => self.iminmax(false, x, y),
            (DType::I64, Shl | Shr) => {
                // The amount is taken modulo 64, as the IR says.
                let amount = (self.const_of)(y)
                    .map(|c| c.to_bits() & 63)
                    .ok_or("a shift by a non-constant amount")?;
                let b = self.reg(x)?;
                let dst = self.new_reg(Class::V);
                let ext = if bop == Shl { 6 } else { 2 };
                self.push(MInst::ShiftImm {
                    ext,
                    dst,
                    b,
                    imm: amount as u8,
                });
                Ok(dst)
            }
            (DType::Bool, And | Min) => {
                let (a, b) = (self.mask(x)?, self.mask(y)?);
                Ok(self.kop(KOp::And, a, b))
            }
            (DType::Bool, Or | Max) => {
                let (a, b) = (self.mask(x)?, self.mask(y)?);
                Ok(self.kop(KOp::Or, a, b))
            }
            (DType::Bool, Xor) => {
                let (a, b) = (self.mask(x)?, self.mask(y)?);
                Ok(self.kop(KOp::Xor, a, b))
            }
            _ => Err(format!(
                "no {} form of {} on {t}",
                self.isa.name(),
                bop.name()
            )),
        }
    }

    /// A vector of zeros.
    fn zeros(&mut self) -> VReg {
        let zero = self.constant(0);
        let z = self.new_reg(Class::V);
        self.push(MInst::Bcast { dst: z, u: zero });
        z
    }

    fn unary(&mut self, uop: UnaryOp, x: ValueId) -> R<VReg> {
        let t = self.ty(x)?;
        match (t, uop) {
            (DType::F64, UnaryOp::Neg) => {
                let sign = self.constant(1 << 63);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPXOR, a, Src::U(sign), None, Class::V))
            }
            (DType::F64, UnaryOp::Abs) => {
                let magnitude = self.constant(!(1 << 63));
                let a = self.reg(x)?;
                Ok(self.op3(op::VPAND, a, Src::U(magnitude), None, Class::V))
            }
            (DType::F64, UnaryOp::Sqrt) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VSQRTPD, b, None))
            }
            // Round down or up (precision exceptions suppressed; none are unmasked).
            (DType::F64, UnaryOp::Floor) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VROUNDPD, b, Some(0x09)))
            }
            (DType::F64, UnaryOp::Ceil) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VROUNDPD, b, Some(0x0a)))
            }
            (DType::I64, UnaryOp::Neg) => {
                let z = self.zeros();
                let b = self.src(x)?;
                Ok(self.op3(op::VPSUBQ, z, b, None, Class::V))
            }
            (DType::I64, UnaryOp::Abs) => match self.isa {
                Isa::Avx512 => {
                    let b = self.src(x)?;
                    Ok(self.op2(op::VPABSQ, b, None))
                }
                // `0 - x` in the lanes whose sign bit is set (`vblendvpd` reads only that).
                Isa::Avx2 => {
                    let z = self.zeros();
                    let a = self.reg(x)?;
                    let neg = self.op3(op::VPSUBQ, z, Src::V(a), None, Class::V);
                    Ok(self.blend(a, a, Src::V(neg)))
                }
            },
            (DType::I64, UnaryOp::Not) => {
                let ones = self.constant(u64::MAX);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPXOR, a, Src::U(ones), None, Class::V))
            }
            (DType::Bool, UnaryOp::Not) => {
                let a = self.mask(x)?;
                Ok(self.knot(a))
            }
            _ => Err(format!(
                "no {} form of {} on {t}",
                self.isa.name(),
                uop.name()
            )),
        }
    }

    fn cast(&mut self, to: DType, x: ValueId) -> R<VReg> {
        use DType::*;
        let from = self.ty(x)?;
        let mask = self.mask_class();
        match (from, to, self.isa) {
            _ if from == to => self.reg(x),
            (I64, F64, Isa::Avx512) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VCVTQQ2PD, b, None))
            }
            // Truncation gives `i64::MIN` for NaN and for values out of range, which is the
            // saturated value below -2^63 only: those at or above 2^63 become `i64::MAX` and
            // NaN 0, as the IR says.
            (F64, I64, Isa::Avx512) => {
                let a = self.reg(x)?;
                let t = self.op2(op::VCVTTPD2QQ, Src::V(a), None);
                let limit = Src::U(self.constant(9_223_372_036_854_775_808f64.to_bits()));
                let over = self.op3(op::VCMPPD, a, limit, Some(fcmp_imm(CmpOp::Ge)), mask);
                let max = Src::U(self.constant(i64::MAX as u64));
                let t = self.blend(over, t, max);
                let nan = self.op3(op::VCMPPD, a, Src::V(a), Some(FCMP_UNORD), mask);
                let zero = Src::U(self.constant(0));
                Ok(self.blend(nan, t, zero))
            }
            // A mask's lanes are all ones or zeros: ANDed with the bits of 1.
            (Bool, F64 | I64, _) => {
                let k = self.mask(x)?;
                let ones = match self.isa {
                    Isa::Avx512 => self.op2(op::VPMOVM2Q, Src::V(k), None),
                    Isa::Avx2 => k,
                };
                let one = if to == F64 { 1f64.to_bits() } else { 1 };
                let one = self.constant(one);
                Ok(self.op3(op::VPAND, ones, Src::U(one), None, Class::V))
            }
            // Unordered or not equal: NaN is true, as in the scalar code.
            (F64, Bool, _) => {
                let zero = self.constant(0);
                let a = self.reg(x)?;
                Ok(self.op3(op::VCMPPD, a, Src::U(zero), Some(FCMP_NEQ_U), mask))
            }
            (I64, Bool, Isa::Avx512) => {
                let zero = self.constant(0);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPCMPQ, a, Src::U(zero), Some(4), mask))
            }
            (I64, Bool, Isa::Avx2) => {
                let zero = self.constant(0);
                let a = self.reg(x)?;
                let eq = self.op3(op::VPCMPEQQ, a, Src::U(zero), None, Class::V);
                Ok(self.knot(eq))
            }
            _ => Err(format!("no {} cast from {from} to {to}", self.isa.name())),
        }
    }
}

/// `vcmppd` predicates: equal (ordered, quiet), unordered, not equal (unordered, quiet).
const FCMP_EQ: u8 = 0x00;
const FCMP_UNORD: u8 = 0x03;
const FCMP_NEQ_U: u8 = 0x04;

/// The `vcmppd` predicate of `op`: ordered and quiet, except `ne` (true when unordered).
fn fcmp_imm(op: CmpOp) -> u8 {
    match op {
        CmpOp::Eq => FCMP_EQ,
        CmpOp::Ne => FCMP_NEQ_U,
        CmpOp::Lt => 0x11,
        CmpOp::Le => 0x12,
        CmpOp::Gt => 0x1e,
        CmpOp::Ge => 0x1d,
    }
}

/// The `vpcmpq` predicate of `op` (signed).
fn icmp_imm(op: CmpOp) -> u8 {
    match op {
        CmpOp::Eq => 0,
        CmpOp::Lt => 1,
        CmpOp::Le => 2,
        CmpOp::Ne => 4,
        CmpOp::Ge => 5,
        CmpOp::Gt => 6,
    }
}
