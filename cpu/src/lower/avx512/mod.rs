//! AVX-512 loop bodies: the varying part of a vectorizable loop with 64-bit lanes, eight
//! iterations at a time in `zmm` registers, as machine code of its own.
//!
//! Cranelift 0.135's x86-64 back end has 128-bit vectors only. For a loop that
//! [`super::vector`] takes, with `f64`/`i64` lanes, no reduction and no use of the loop index as
//! a value, this module emits a function
//!
//! ```text
//! extern "C" fn(args: *const u64, steps: i64)
//! ```
//!
//! that runs `steps` steps of [`STEP`] iterations (eight per vector, [`UNROLL`] vectors
//! interleaved instruction by instruction). `args` holds one pointer per contiguous access
//! (the address of the first iteration's element), then the bits of each uniform value that the
//! body reads. Constants live in a table that the function addresses directly. The vector
//! function calls it for each row's first `STEP * floor(len / STEP)` iterations and runs the
//! rest as before.
//!
//! Every operation is the one the 128-bit and scalar code perform, lane by lane, in the same
//! operand order: no contraction into fused multiply-adds, no reassociation, the scalar rules
//! for `min`/`max`, so results are the same bits on every path (up to the sign and payload of a
//! NaN made by arithmetic, which the IR leaves unspecified and Cranelift's optimizer changes).
//! Masks (comparison results, `bool` values) live in `k` registers.
//!
//! [`compile`] selects instructions ([`regalloc::MInst`]) from the body, then
//! [`regalloc::emit_body`] allocates registers and encodes them ([`encode`]).

mod encode;
mod regalloc;

use std::collections::HashMap;

use weft_ir::validate::Types;
use weft_ir::{BinaryOp, CmpOp, DType, Inst, Op, ParallelLoop, Scalar, UnaryOp, ValueId};

use self::encode::{Asm, KOp, Mem, gpr, op};
use self::regalloc::{Class, Frame, MInst, Src, Uniform, VReg};
use super::vector::{ConstTable, VecPlan};

/// Whether this CPU runs the AVX-512 bodies: AVX-512 F and DQ, enabled by the OS.
pub(crate) fn detected() -> bool {
    #[cfg(all(target_arch = "x86_64", unix))]
    {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(all(target_arch = "x86_64", unix)))]
    {
        false
    }
}

/// One word of a call's argument array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArgWord {
    /// The address of the row's element at the first iteration of the call, for the
    /// contiguous access of store parameter `.0` at indices `.1`.
    RowBase(u32, Vec<ValueId>),
    /// The bits of a uniform value (a `f64` or an `i64`).
    Uniform(ValueId),
}

/// A compiled AVX-512 body.
#[derive(Debug)]
pub(crate) struct WideBody {
    /// The machine code of the function.
    pub code: Vec<u8>,
    /// The constants it reads (at a fixed address): must live as long as the code.
    pub table: ConstTable,
    /// What the caller puts in each word of the argument array.
    pub args: Vec<ArgWord>,
}

/// Lanes of a `zmm` register of 64-bit elements.
const LANES: i64 = 8;

/// Vectors per step, interleaved instruction by instruction.
const UNROLL: usize = 4;

/// Iterations per step of the function.
pub(crate) const STEP: i64 = LANES * UNROLL as i64;

/// Registers for pointer arguments: caller-saved first, then callee-saved (saved by the
/// function).
const PTR_REGS: [u8; 10] = [
    gpr::RCX,
    gpr::R8,
    gpr::R9,
    gpr::R10,
    gpr::R11,
    gpr::RBX,
    gpr::R12,
    gpr::R13,
    gpr::R14,
    gpr::R15,
];

/// The instruction selector's state.
struct Select<'a> {
    plan: &'a VecPlan,
    types: &'a Types,
    const_of: &'a dyn Fn(ValueId) -> Option<Scalar>,
    insts: Vec<MInst>,
    classes: Vec<Class>,
    /// The registers of the varying values, per vector of the step.
    vals: [HashMap<ValueId, VReg>; UNROLL],
    /// The vector of the step being selected.
    copy: usize,
    consts: Vec<u64>,
    const_index: HashMap<u64, u32>,
    uniforms: Vec<ValueId>,
    uniform_index: HashMap<ValueId, u32>,
    ptrs: Vec<(u32, Vec<ValueId>)>,
}

type R<T> = Result<T, String>;

impl Select<'_> {
    fn new_reg(&mut self, c: Class) -> VReg {
        self.classes.push(c);
        VReg(self.classes.len() as u32 - 1)
    }

    /// The byte offset of the current vector's elements from the step's first.
    fn disp(&self) -> i32 {
        (self.copy as i64 * LANES * 8) as i32
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
        let next = self.consts.len() as u32;
        let i = *self.const_index.entry(bits).or_insert(next);
        if i == next {
            self.consts.push(bits);
        }
        Uniform::Const(i)
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
        let next = self.uniforms.len() as u32;
        let i = *self.uniform_index.entry(v).or_insert(next);
        if i == next {
            self.uniforms.push(v);
        }
        Ok(Src::U(Uniform::Arg(i)))
    }

    /// `v` in a vector register (a uniform is broadcast into a fresh one).
    fn reg(&mut self, v: ValueId) -> R<VReg> {
        match self.src(v)? {
            Src::V(r) => Ok(r),
            Src::U(u) => {
                let dst = self.new_reg(Class::Z);
                self.push(MInst::Bcast { dst, u });
                Ok(dst)
            }
        }
    }

    /// A mask operand (masks never come from uniform values here).
    fn mask(&mut self, v: ValueId) -> R<VReg> {
        match self.vals[self.copy].get(&v) {
            Some(&r) if self.classes[r.0 as usize] == Class::K => Ok(r),
            _ => Err(format!("the mask {v} is not a varying comparison result")),
        }
    }

    fn op3(&mut self, ins: encode::Evex, a: VReg, b: Src, imm: Option<u8>, class: Class) -> VReg {
        let dst = self.new_reg(class);
        self.push(MInst::Op3 {
            ins,
            dst,
            a,
            b,
            imm,
        });
        dst
    }

    fn op2(&mut self, ins: encode::Evex, b: Src, imm: Option<u8>) -> VReg {
        let dst = self.new_reg(Class::Z);
        self.push(MInst::Op2 { ins, dst, b, imm });
        dst
    }

    fn blend(&mut self, k: VReg, f: VReg, t: Src) -> VReg {
        let dst = self.new_reg(Class::Z);
        self.push(MInst::Blend { dst, k, f, t });
        dst
    }

    fn kop(&mut self, op: KOp, a: VReg, b: VReg) -> VReg {
        let dst = self.new_reg(Class::K);
        self.push(MInst::KOp { op, dst, a, b });
        dst
    }

    /// `ins(x, y)` for a commutative integer operation: a uniform `x` goes last. (Float
    /// operations keep their order: of two NaN operands, the first one's is the result.)
    fn commutative(&mut self, ins: encode::Evex, x: ValueId, y: ValueId) -> R<VReg> {
        let (x, y) = if self.vals[self.copy].contains_key(&x) {
            (x, y)
        } else {
            (y, x)
        };
        let a = self.reg(x)?;
        let b = self.src(y)?;
        Ok(self.op3(ins, a, b, None, Class::Z))
    }

    fn ordered(&mut self, ins: encode::Evex, x: ValueId, y: ValueId) -> R<VReg> {
        let a = self.reg(x)?;
        let b = self.src(y)?;
        Ok(self.op3(ins, a, b, None, Class::Z))
    }

    /// Float `min` or `max` with the scalar code's results (see `vector::vfminmax`): the
    /// native instruction, `x | y` (`x & y`) where the operands are equal, `y + x` where either
    /// is NaN.
    fn fminmax(&mut self, min: bool, x: ValueId, y: ValueId) -> R<VReg> {
        let (xa, yb) = (self.reg(x)?, self.src(y)?);
        let r = self.op3(
            if min { op::VMINPD } else { op::VMAXPD },
            xa,
            yb,
            None,
            Class::Z,
        );
        let eq = self.op3(op::VCMPPD, xa, yb, Some(FCMP_EQ), Class::K);
        let both = self.op3(
            if min { op::VPORQ } else { op::VPANDQ },
            xa,
            yb,
            None,
            Class::Z,
        );
        let r = self.blend(eq, r, Src::V(both));
        let nan = self.op3(op::VCMPPD, xa, yb, Some(FCMP_UNORD), Class::K);
        let ya = self.reg(y)?;
        let sum = self.op3(op::VADDPD, ya, Src::V(xa), None, Class::Z);
        Ok(self.blend(nan, r, Src::V(sum)))
    }

    /// The mask of `x op y`.
    fn cmp(&mut self, cop: CmpOp, x: ValueId, y: ValueId) -> R<VReg> {
        let t = self.ty(x)?;
        let a = self.reg(x)?;
        let b = self.src(y)?;
        let (ins, imm) = match t {
            DType::F64 => (op::VCMPPD, fcmp_imm(cop)),
            DType::I64 => (op::VPCMPQ, icmp_imm(cop)),
            t => return Err(format!("a comparison of {t}")),
        };
        Ok(self.op3(ins, a, b, Some(imm), Class::K))
    }

    /// Selects the instructions of one body instruction.
    fn inst(&mut self, inst: &Inst, ptr_of: &mut dyn FnMut(u32, &[ValueId]) -> u32) -> R<()> {
        let result = inst.results.first().copied();
        let r = match &inst.op {
            Op::Load(acc) => {
                let ptr = ptr_of(acc.param, &acc.indices);
                let dst = self.new_reg(Class::Z);
                self.push(MInst::Load {
                    dst,
                    ptr,
                    disp: self.disp(),
                });
                dst
            }
            Op::Store(acc, v) => {
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
                match self.ty(result.ok_or("a select without a result")?)? {
                    DType::Bool => {
                        let (a, b) = (self.mask(*x)?, self.mask(*y)?);
                        let t = self.kop(KOp::And, k, a);
                        let f = self.kop(KOp::AndN, k, b);
                        self.kop(KOp::Or, t, f)
                    }
                    _ => {
                        let f = self.reg(*y)?;
                        let t = self.src(*x)?;
                        self.blend(k, f, t)
                    }
                }
            }
            Op::Cast(to, x) => self.cast(*to, *x)?,
            Op::Bitcast(to, x) => {
                let from = self.ty(*x)?;
                if from.size() != to.size() || from == DType::Bool || *to == DType::Bool {
                    return Err(format!("a bitcast from {from} to {to}"));
                }
                self.reg(*x)?
            }
            other => return Err(format!("no AVX-512 form of {other:?}")),
        };
        let result = result.ok_or("an operation without a result")?;
        self.vals[self.copy].insert(result, r);
        Ok(())
    }

    fn binary(&mut self, bop: BinaryOp, x: ValueId, y: ValueId) -> R<VReg> {
        use BinaryOp::*;
        let t = self.ty(x)?;
        match (t, bop) {
            (DType::F64, Add) => self.ordered(op::VADDPD, x, y),
            (DType::F64, Mul) => self.ordered(op::VMULPD, x, y),
            (DType::F64, Sub) => self.ordered(op::VSUBPD, x, y),
            (DType::F64, Div) => self.ordered(op::VDIVPD, x, y),
            (DType::F64, Min) => self.fminmax(true, x, y),
            (DType::F64, Max) => self.fminmax(false, x, y),
            (DType::I64, Add) => self.commutative(op::VPADDQ, x, y),
            (DType::I64, Sub) => self.ordered(op::VPSUBQ, x, y),
            (DType::I64, Mul) => self.commutative(op::VPMULLQ, x, y),
            (DType::I64, And) => self.commutative(op::VPANDQ, x, y),
            (DType::I64, Or) => self.commutative(op::VPORQ, x, y),
            (DType::I64, Xor) => self.commutative(op::VPXORQ, x, y),
            (DType::I64, Min) => self.commutative(op::VPMINSQ, x, y),
            (DType::I64, Max) => self.commutative(op::VPMAXSQ, x, y),
            (DType::I64, Shl | Shr) => {
                // The amount is taken modulo 64, as the IR says.
                let amount = (self.const_of)(y)
                    .map(|c| c.to_bits() & 63)
                    .ok_or("a shift by a non-constant amount")?;
                let b = self.src(x)?;
                let dst = self.new_reg(Class::Z);
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
            _ => Err(format!("no AVX-512 form of {} on {t}", bop.name())),
        }
    }

    fn unary(&mut self, uop: UnaryOp, x: ValueId) -> R<VReg> {
        let t = self.ty(x)?;
        match (t, uop) {
            (DType::F64, UnaryOp::Neg) => {
                let sign = self.constant(1 << 63);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPXORQ, a, Src::U(sign), None, Class::Z))
            }
            (DType::F64, UnaryOp::Abs) => {
                let magnitude = self.constant(!(1 << 63));
                let a = self.reg(x)?;
                Ok(self.op3(op::VPANDQ, a, Src::U(magnitude), None, Class::Z))
            }
            (DType::F64, UnaryOp::Sqrt) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VSQRTPD, b, None))
            }
            // Round down or up (precision exceptions suppressed; none are unmasked).
            (DType::F64, UnaryOp::Floor) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VRNDSCALEPD, b, Some(0x09)))
            }
            (DType::F64, UnaryOp::Ceil) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VRNDSCALEPD, b, Some(0x0a)))
            }
            (DType::I64, UnaryOp::Neg) => {
                let zero = self.constant(0);
                let z = self.new_reg(Class::Z);
                self.push(MInst::Bcast { dst: z, u: zero });
                let b = self.src(x)?;
                Ok(self.op3(op::VPSUBQ, z, b, None, Class::Z))
            }
            (DType::I64, UnaryOp::Abs) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VPABSQ, b, None))
            }
            (DType::I64, UnaryOp::Not) => {
                let ones = self.constant(u64::MAX);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPXORQ, a, Src::U(ones), None, Class::Z))
            }
            (DType::Bool, UnaryOp::Not) => {
                let a = self.mask(x)?;
                let dst = self.new_reg(Class::K);
                self.push(MInst::KNot { dst, a });
                Ok(dst)
            }
            _ => Err(format!("no AVX-512 form of {} on {t}", uop.name())),
        }
    }

    fn cast(&mut self, to: DType, x: ValueId) -> R<VReg> {
        use DType::*;
        let from = self.ty(x)?;
        match (from, to) {
            _ if from == to => self.reg(x),
            (I64, F64) => {
                let b = self.src(x)?;
                Ok(self.op2(op::VCVTQQ2PD, b, None))
            }
            (Bool, F64 | I64) => {
                let k = self.mask(x)?;
                let ones = self.op2(op::VPMOVM2Q, Src::V(k), None);
                let one = if to == F64 { 1f64.to_bits() } else { 1 };
                let one = self.constant(one);
                Ok(self.op3(op::VPANDQ, ones, Src::U(one), None, Class::Z))
            }
            // Unordered or not equal: NaN is true, as in the scalar code.
            (F64, Bool) => {
                let zero = self.constant(0);
                let a = self.reg(x)?;
                Ok(self.op3(op::VCMPPD, a, Src::U(zero), Some(FCMP_NEQ_U), Class::K))
            }
            (I64, Bool) => {
                let zero = self.constant(0);
                let a = self.reg(x)?;
                Ok(self.op3(op::VPCMPQ, a, Src::U(zero), Some(4), Class::K))
            }
            _ => Err(format!("no AVX-512 cast from {from} to {to}")),
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

/// Compiles the varying part of `pl` (as `plan` splits it) into an AVX-512 function, or says
/// why it does not qualify. `const_of` gives the value of each uniform value that is a
/// constant.
pub(crate) fn compile(
    pl: &ParallelLoop,
    plan: &VecPlan,
    types: &Types,
    const_of: &dyn Fn(ValueId) -> Option<Scalar>,
) -> Result<WideBody, String> {
    if plan.lanes != 2 {
        return Err("not 64-bit lanes".into());
    }
    if plan.uses_iota {
        return Err("uses the loop index as a value".into());
    }
    let mut s = Select {
        plan,
        types,
        const_of,
        insts: Vec::new(),
        classes: Vec::new(),
        vals: Default::default(),
        copy: 0,
        consts: Vec::new(),
        const_index: HashMap::new(),
        uniforms: Vec::new(),
        uniform_index: HashMap::new(),
        ptrs: Vec::new(),
    };
    let mut ptrs: Vec<(u32, Vec<ValueId>)> = Vec::new();
    let mut ptr_of = |param: u32, indices: &[ValueId]| -> u32 {
        match ptrs
            .iter()
            .position(|(p, ix)| *p == param && ix.as_slice() == indices)
        {
            Some(i) => i as u32,
            None => {
                ptrs.push((param, indices.to_vec()));
                ptrs.len() as u32 - 1
            }
        }
    };
    for (inst, &at_row) in pl.body.iter().zip(&plan.row_level) {
        if at_row {
            continue;
        }
        if matches!(inst.op, Op::Reduce(..)) {
            return Err("a reduction".into());
        }
        for copy in 0..UNROLL {
            s.copy = copy;
            s.inst(inst, &mut ptr_of)?;
        }
    }
    s.ptrs = ptrs;
    if s.ptrs.len() > PTR_REGS.len() {
        return Err(format!("{} contiguous accesses", s.ptrs.len()));
    }
    assemble(s)
}

/// The function around the body: saves what it uses, loads the pointers, runs the steps.
fn assemble(s: Select<'_>) -> Result<WideBody, String> {
    let mut entries = vec![0u128; s.consts.len().max(1)];
    for (e, &c) in entries.iter_mut().zip(&s.consts) {
        *e = u128::from(c);
    }
    let entries = entries.into_boxed_slice();
    let ptr_regs = PTR_REGS[..s.ptrs.len()].to_vec();
    let frame = Frame {
        ptr_regs: ptr_regs.clone(),
        index: gpr::RAX,
        consts: gpr::RDX,
        args: gpr::RDI,
        first_uniform: s.ptrs.len() as u32,
    };
    let mut body = Asm::default();
    let slots = regalloc::emit_body(&s.insts, &s.classes, &frame, &mut body)?;
    let saved: Vec<u8> = ptr_regs
        .iter()
        .copied()
        .filter(|r| matches!(*r, gpr::RBX | gpr::R12 | gpr::R13 | gpr::R14 | gpr::R15))
        .collect();

    let mut a = Asm::default();
    a.push(gpr::RBP);
    a.mov_rr(gpr::RBP, gpr::RSP);
    for &r in &saved {
        a.push(r);
    }
    a.and_imm(gpr::RSP, -64);
    if slots > 0 {
        let bytes = i32::try_from(slots * 64).map_err(|e| e.to_string())?;
        a.sub_imm(gpr::RSP, bytes);
    }
    a.mov_imm64(gpr::RDX, entries.as_ptr() as u64);
    for (i, &r) in ptr_regs.iter().enumerate() {
        a.mov_load(r, Mem::at(gpr::RDI, (i * 8) as i32));
    }
    a.zero(gpr::RAX);
    a.test(gpr::RSI);
    // jle: no steps.
    let skip = a.jcc_forward(0xe);
    let top = a.code.len();
    a.code.extend_from_slice(&body.code);
    a.add_imm(gpr::RAX, (STEP * 8) as i32);
    a.sub_imm(gpr::RSI, 1);
    // jnz top
    a.jcc(0x5, top);
    a.patch(skip);
    // rsp = rbp - 8 * saved, then restore.
    a.mov_rr(gpr::RSP, gpr::RBP);
    if !saved.is_empty() {
        a.sub_imm(gpr::RSP, (saved.len() * 8) as i32);
    }
    for &r in saved.iter().rev() {
        a.pop(r);
    }
    a.pop(gpr::RBP);
    a.vzeroupper();
    a.ret();

    let mut args: Vec<ArgWord> = s
        .ptrs
        .into_iter()
        .map(|(p, ix)| ArgWord::RowBase(p, ix))
        .collect();
    args.extend(s.uniforms.into_iter().map(ArgWord::Uniform));
    Ok(WideBody {
        code: a.code,
        table: ConstTable::new(entries),
        args,
    })
}
