//! Register allocation and emission of a straight-line wide loop body.
//!
//! A body is a list of [`MInst`]s over virtual registers of two classes: vectors (AVX-512:
//! `zmm0..zmm31`; AVX2: `ymm0..ymm15`) and lane masks (AVX-512 only: `k1..k7`; AVX2 keeps masks
//! in vectors). The body has no branches but the early exits of [`MInst::CheckIndices`],
//! which leave the function before the step that takes them changes a pinned register. The
//! only values that live from one iteration to the next are *pinned*: each holds one vector
//! register (the top ones) for the whole loop, which nothing else takes, and [`MInst::Pin`]
//! writes its next value at the end of the body (the accumulators of a `for` loop's lanes,
//! see [`super::fold`]). The rest is allocated in one walk in program order with Belady's
//! rule: when a register is needed and none is free, the value whose next use is furthest
//! away leaves its register (and is stored once, into its own 64-byte stack slot, if it is
//! still needed). A vector operand in the last (`r/m`) position of an instruction that is in
//! a slot is read from the slot directly; any other operand is first reloaded.

use std::collections::HashMap;
use std::hash::Hash;

use weft_ir::ValueId;

use super::Isa;
use super::encode::{Asm, KOp, Mem, Rm, VecOp, gpr, op};

/// A virtual register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VReg(pub u32);

/// The register class of a virtual register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// A vector of 64-bit lanes (of lane masks too, on AVX2).
    V,
    /// An AVX-512 lane mask.
    K,
}

/// A value that is the same in every lane, read from memory and broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Uniform {
    /// Entry `i` of the loop's constant table.
    Const(u32),
    /// Uniform argument word `i` of the call.
    Arg(u32),
}

/// The constants and uniform arguments a body reads, each numbered once; `K` names what an
/// argument word holds (a value of the kernel, or something the caller computes).
#[derive(Debug)]
pub(crate) struct Uniforms<K = ValueId> {
    /// The constants' bits, by [`Uniform::Const`] number.
    pub consts: Vec<u64>,
    const_index: HashMap<u64, u32>,
    /// What each uniform argument holds, by [`Uniform::Arg`] number.
    pub args: Vec<K>,
    arg_index: HashMap<K, u32>,
}

impl<K> Default for Uniforms<K> {
    fn default() -> Self {
        Uniforms {
            consts: Vec::new(),
            const_index: HashMap::new(),
            args: Vec::new(),
            arg_index: HashMap::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> Uniforms<K> {
    /// The constant with these bits.
    pub fn constant(&mut self, bits: u64) -> Uniform {
        let next = self.consts.len() as u32;
        let i = *self.const_index.entry(bits).or_insert(next);
        if i == next {
            self.consts.push(bits);
        }
        Uniform::Const(i)
    }

    /// The uniform argument that holds `v`.
    pub fn arg(&mut self, v: K) -> Uniform {
        let next = self.args.len() as u32;
        let i = *self.arg_index.entry(v).or_insert(next);
        if i == next {
            self.args.push(v);
        }
        Uniform::Arg(i)
    }
}

/// The last operand of an instruction: a virtual register or a broadcast uniform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    V(VReg),
    U(Uniform),
}

/// One machine instruction over virtual registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MInst {
    /// `dst = ins(a, b)`, with an immediate for comparisons (`dst` is a mask then).
    Op3 {
        ins: VecOp,
        dst: VReg,
        a: VReg,
        b: Src,
        imm: Option<u8>,
    },
    /// `dst = ins(b)`, with an immediate for `vrndscalepd`/`vroundpd`. A mask `b`
    /// (`vpmovm2q`) must be in a register.
    Op2 {
        ins: VecOp,
        dst: VReg,
        b: Src,
        imm: Option<u8>,
    },
    /// `vpsllq`/`vpsrlq dst, b, imm` (`ext`: the opcode extension, 6 or 2; `b` in a register,
    /// as the VEX form requires).
    ShiftImm {
        ext: u8,
        dst: VReg,
        b: VReg,
        imm: u8,
    },
    /// `dst = k ? t : f`, lane by lane (`vblendmpd dst{k}, f, t`; on AVX2
    /// `vblendvpd dst, f, t, k`, which reads each lane's sign bit of `k`).
    Blend { dst: VReg, k: VReg, f: VReg, t: Src },
    /// `dst = a·b + c`, rounded once (`vfmadd132pd`, `vfmadd213pd` or `vfmadd231pd`, by which
    /// operand's register `dst` takes; `vfmadd231pd` after a copy of `c` where it takes none).
    /// `b` and `c` are not both uniform; a spilled `b` is reloaded, as is a spilled `c` when `b`
    /// is uniform: so at least one of them is in a register.
    Fma { dst: VReg, a: VReg, b: Src, c: Src },
    /// `dst = u` in every lane (`vbroadcastsd`).
    Bcast { dst: VReg, u: Uniform },
    /// A mask operation.
    KOp {
        op: KOp,
        dst: VReg,
        a: VReg,
        b: VReg,
    },
    /// `dst = !a` on masks.
    KNot { dst: VReg, a: VReg },
    /// A vector of elements from pointer argument `ptr`, at the step's offset plus `disp`
    /// bytes.
    Load { dst: VReg, ptr: u32, disp: i32 },
    /// A vector of elements into pointer argument `ptr`, at the step's offset plus `disp`
    /// bytes.
    Store { src: VReg, ptr: u32, disp: i32 },
    /// Lane 0 of `src` into pointer argument `ptr`, at the step's offset plus `disp` bytes
    /// (`vmovsd`).
    StoreLane0 { src: VReg, ptr: u32, disp: i32 },
    /// The pinned register `to` takes the value of `src` (`vmovapd`), for the next iteration.
    Pin { to: VReg, src: VReg },
    /// Consecutive `i32` elements from pointer argument `ptr`, at the step's offset plus
    /// `disp` bytes, each sign-extended to a 64-bit lane (`vpmovsxdq`).
    LoadWiden { dst: VReg, ptr: u32, disp: i32 },
    /// `dst` = the eight bool bytes at the pointer's element, each zero-extended to a lane
    /// (AVX-512; the pointer's scale is 0, its elements bytes).
    LoadBytes { dst: VReg, ptr: u32, disp: i32 },
    /// Each lane's low byte of `src` stored as eight consecutive bool bytes (AVX-512).
    StoreBytes { src: VReg, ptr: u32, disp: i32 },
    /// Leaves the function, before the step that runs it (see [`super::assemble`]), unless
    /// every lane of `idx` lies in `0..n`, where `bound` holds `n` (AVX-512) or `n - 1`
    /// (AVX2); then `dst`, a lane mask, has every lane set, for [`MInst::Gather`].
    CheckIndices {
        dst: VReg,
        idx: VReg,
        bound: Uniform,
    },
    /// Lane `l` of `dst` is the 8-byte element `idx[l]` of the row that pointer argument
    /// `ptr` addresses (`vgatherqpd`); `mask`, from [`MInst::CheckIndices`], is used up.
    Gather {
        dst: VReg,
        idx: VReg,
        mask: VReg,
        ptr: u32,
    },
}

/// Whether an operand must be in a register or may be read from memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    Reg,
    RegOrMem,
}

impl MInst {
    /// The virtual registers it reads, with where they may be.
    fn uses(&self) -> Vec<(VReg, Need)> {
        let src = |s: &Src, out: &mut Vec<(VReg, Need)>| {
            if let Src::V(v) = s {
                out.push((*v, Need::RegOrMem));
            }
        };
        let mut out = Vec::with_capacity(3);
        match self {
            MInst::Op3 { a, b, .. } => {
                out.push((*a, Need::Reg));
                src(b, &mut out);
            }
            MInst::Op2 { b, .. } => src(b, &mut out),
            MInst::Fma { a, b, c, .. } => {
                out.push((*a, Need::Reg));
                if let Src::V(v) = b {
                    out.push((*v, Need::Reg));
                }
                if let Src::V(v) = c {
                    let need = match b {
                        Src::U(_) => Need::Reg,
                        Src::V(_) => Need::RegOrMem,
                    };
                    out.push((*v, need));
                }
            }
            MInst::ShiftImm { b, .. } => out.push((*b, Need::Reg)),
            MInst::Blend { k, f, t, .. } => {
                out.push((*k, Need::Reg));
                out.push((*f, Need::Reg));
                src(t, &mut out);
            }
            MInst::Bcast { .. } | MInst::Load { .. } => {}
            MInst::KOp { a, b, .. } => {
                out.push((*a, Need::Reg));
                out.push((*b, Need::Reg));
            }
            MInst::KNot { a, .. } => out.push((*a, Need::Reg)),
            MInst::Store { src, .. } | MInst::StoreLane0 { src, .. } => out.push((*src, Need::Reg)),
            MInst::Pin { src, .. } => out.push((*src, Need::RegOrMem)),
            MInst::LoadWiden { .. } | MInst::LoadBytes { .. } => {}
            MInst::StoreBytes { src, .. } => out.push((*src, Need::Reg)),
            MInst::CheckIndices { idx, .. } => out.push((*idx, Need::Reg)),
            MInst::Gather { idx, mask, .. } => {
                out.push((*idx, Need::Reg));
                out.push((*mask, Need::Reg));
            }
        }
        out
    }

    /// Whether its result must not share a register with an operand read here for the last
    /// time (the gather's registers must all differ; the AVX2 check reads its index after
    /// writing its result).
    fn defines_early(&self) -> bool {
        matches!(self, MInst::CheckIndices { .. } | MInst::Gather { .. })
    }

    /// The virtual register it defines.
    fn def(&self) -> Option<VReg> {
        match self {
            MInst::Op3 { dst, .. }
            | MInst::Op2 { dst, .. }
            | MInst::Fma { dst, .. }
            | MInst::ShiftImm { dst, .. }
            | MInst::Blend { dst, .. }
            | MInst::Bcast { dst, .. }
            | MInst::KOp { dst, .. }
            | MInst::KNot { dst, .. }
            | MInst::Load { dst, .. }
            | MInst::LoadWiden { dst, .. }
            | MInst::LoadBytes { dst, .. }
            | MInst::CheckIndices { dst, .. }
            | MInst::Gather { dst, .. } => Some(*dst),
            MInst::Store { .. }
            | MInst::StoreLane0 { .. }
            | MInst::StoreBytes { .. }
            | MInst::Pin { .. } => None,
        }
    }
}

/// Where the body finds what is not in a vector register.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// The instruction set of the body.
    pub isa: Isa,
    /// The register holding each pointer argument.
    pub ptr_regs: Vec<u8>,
    /// Per pointer argument, the scale of the step's offset in its accesses, as a power of
    /// two.
    pub ptr_scales: Vec<u8>,
    /// The register holding the offset of the iteration (in bytes, or in elements that each
    /// pointer's scale turns into bytes).
    pub index: u8,
    /// The register holding the constant table's address (16 bytes per entry).
    pub consts: u8,
    /// The register holding the argument words' address, and the first uniform word's index.
    pub args: u8,
    pub first_uniform: u32,
    /// The bytes below the stack slots, from a 64-byte aligned `rsp`: on AVX2, where the
    /// frame leaves the uniform arguments broadcast (32 bytes each).
    pub slots_at: u32,
    /// For a body that runs a row's last, partial step: the general-purpose register holding
    /// the address of the step's lane masks. On AVX2 each load and store of the step's offset
    /// plus `disp` bytes then moves only the lanes that the 32 bytes at that register plus
    /// `disp` mark (sign bits), through [`Frame::mask_register`], which the body's values
    /// leave alone. On AVX-512 the step is one vector (`disp` 0): the body starts by turning
    /// the 64 bytes at that register into mask register [`MASKED_K`] (through
    /// [`Frame::mask_register`]), which its loads (zeroing the other lanes) and stores then
    /// take, and which its own masks leave alone.
    pub masked: Option<u8>,
}

impl Frame {
    /// The vector register that a masked body's loads and stores take their lane mask in:
    /// the last of the file, kept from the body's values.
    pub(crate) fn mask_register(&self) -> u8 {
        (self.isa.vector_registers() - 1) as u8
    }

    /// A uniform operand: on AVX-512 one element broadcast (a table entry is 16 bytes, an
    /// argument word 8), on AVX2 a whole vector (of the table's 32-byte entries, or of the
    /// copies the frame broadcasts on the stack).
    fn uniform(&self, u: Uniform) -> Rm {
        let (mem, bcst) = match (self.isa, u) {
            (Isa::Avx512, Uniform::Const(i)) => (Mem::at(self.consts, (i * 16) as i32), true),
            (Isa::Avx512, Uniform::Arg(i)) => (
                Mem::at(self.args, ((self.first_uniform + i) * 8) as i32),
                true,
            ),
            (Isa::Avx2, Uniform::Const(i)) => (Mem::at(self.consts, (i * 32) as i32), false),
            (Isa::Avx2, Uniform::Arg(i)) => (Mem::at(gpr::RSP, (i * 32) as i32), false),
        };
        Rm::Mem { mem, bcst }
    }

    /// Stack slot `s`: 64 bytes each, above the broadcast uniforms.
    fn slot(&self, s: u32) -> Mem {
        Mem::at(gpr::RSP, (self.slots_at + s * 64) as i32)
    }

    fn data(&self, ptr: u32, disp: i32) -> Result<Mem, String> {
        let base = *self
            .ptr_regs
            .get(ptr as usize)
            .ok_or("internal: no register for a pointer argument")?;
        Ok(Mem {
            base,
            index: Some(self.index),
            scale: self.ptr_scales.get(ptr as usize).copied().unwrap_or(0),
            disp,
        })
    }

    /// The register holding pointer argument `ptr` (a gathered row's address).
    fn ptr_reg(&self, ptr: u32) -> Result<u8, String> {
        self.ptr_regs
            .get(ptr as usize)
            .copied()
            .ok_or_else(|| "internal: no register for a pointer argument".into())
    }
}

/// The allocator's state.
struct Alloc<'a> {
    frame: &'a Frame,
    classes: &'a [Class],
    /// Per virtual register: the positions of the instructions that read it, and how many of
    /// them are behind.
    uses: Vec<Vec<u32>>,
    done: Vec<usize>,
    reg: Vec<Option<u8>>,
    slot: Vec<Option<u32>>,
    /// The occupant of each vector register, and of each mask register (`k0` never used).
    vecs: Vec<Option<VReg>>,
    kmask: [Option<VReg>; 8],
    /// One past the last mask register the body's values may take (`k7` is kept for the lane
    /// mask of a masked AVX-512 body).
    k_end: usize,
    slots: u32,
    /// Per virtual register: whether it is pinned (its register is its own for the loop).
    pinned: Vec<bool>,
}

/// The most stack slots a body may use (its frame stays within 256 KiB of the worker's
/// stack); a body that needs more keeps the 128-bit code.
const MAX_SLOTS: u32 = 1 << 12;

impl Alloc<'_> {
    fn class(&self, v: VReg) -> Class {
        self.classes[v.0 as usize]
    }

    fn next_use(&self, v: VReg) -> u32 {
        let i = v.0 as usize;
        self.uses[i].get(self.done[i]).copied().unwrap_or(u32::MAX)
    }

    fn file(&mut self, c: Class) -> &mut [Option<VReg>] {
        match c {
            Class::V => &mut self.vecs,
            Class::K => &mut self.kmask[1..self.k_end],
        }
    }

    /// The hardware number of index `i` of class `c`'s register file.
    fn hw(c: Class, i: usize) -> u8 {
        match c {
            Class::V => i as u8,
            Class::K => i as u8 + 1,
        }
    }

    /// A free register of `c` for `v`, made free if need be by moving out the value used
    /// furthest ahead (storing it into its slot first if it is still needed).
    fn take(&mut self, c: Class, v: VReg, asm: &mut Asm) -> Result<u8, String> {
        let free = self.file(c).iter().position(Option::is_none);
        let i = match free {
            Some(i) => i,
            None => {
                let file: Vec<Option<VReg>> = self.file(c).to_vec();
                let (i, victim) = file
                    .iter()
                    .enumerate()
                    .filter_map(|(i, o)| o.map(|w| (i, w)))
                    .max_by_key(|(_, w)| self.next_use(*w))
                    .ok_or("internal: an empty register file")?;
                let r = Self::hw(c, i);
                if self.next_use(victim) != u32::MAX && self.slot[victim.0 as usize].is_none() {
                    if self.slots >= MAX_SLOTS {
                        return Err("the body needs too many stack slots".into());
                    }
                    let s = self.slots;
                    self.slots += 1;
                    self.slot[victim.0 as usize] = Some(s);
                    match c {
                        Class::V => asm.vector(
                            op::VMOVAPD_STORE,
                            r,
                            None,
                            Rm::Mem {
                                mem: self.frame.slot(s),
                                bcst: false,
                            },
                            0,
                            None,
                        ),
                        Class::K => asm.kstore(self.frame.slot(s), r),
                    }
                }
                self.reg[victim.0 as usize] = None;
                i
            }
        };
        self.file(c)[i] = Some(v);
        let r = Self::hw(c, i);
        self.reg[v.0 as usize] = Some(r);
        Ok(r)
    }

    /// A register of class [`Class::V`] for `v`: the first of `prefer` that is free, else
    /// as [`Alloc::take`] gives one.
    fn take_preferring(&mut self, v: VReg, prefer: &[u8], asm: &mut Asm) -> Result<u8, String> {
        for &r in prefer {
            if self.vecs.get(usize::from(r)) == Some(&None) {
                self.vecs[usize::from(r)] = Some(v);
                self.reg[v.0 as usize] = Some(r);
                return Ok(r);
            }
        }
        self.take(Class::V, v, asm)
    }

    fn free(&mut self, v: VReg) {
        if self.pinned[v.0 as usize] {
            return;
        }
        if let Some(r) = self.reg[v.0 as usize].take() {
            let c = self.class(v);
            let i = match c {
                Class::V => r as usize,
                Class::K => r as usize - 1,
            };
            self.file(c)[i] = None;
        }
    }

    /// Puts `v` in a register (reloading it from its slot).
    fn in_reg(&mut self, v: VReg, asm: &mut Asm) -> Result<u8, String> {
        if let Some(r) = self.reg[v.0 as usize] {
            return Ok(r);
        }
        let s = self.slot[v.0 as usize].ok_or_else(|| {
            format!(
                "internal: virtual register {} is read before it is defined",
                v.0
            )
        })?;
        let c = self.class(v);
        let r = self.take(c, v, asm)?;
        match c {
            Class::V => asm.vector(
                op::VMOVAPD_LOAD,
                r,
                None,
                Rm::Mem {
                    mem: self.frame.slot(s),
                    bcst: false,
                },
                0,
                None,
            ),
            Class::K => asm.kload(r, self.frame.slot(s)),
        }
        Ok(r)
    }
}

/// Allocates registers for `insts` (virtual register `i` of class `classes[i]`) and appends
/// their machine code to `asm`; returns how many 64-byte stack slots the code uses. Each
/// `pinned` virtual register (of class [`Class::V`]) holds vector register `.1` throughout,
/// one of the top ones of the file, which nothing else is given.
pub(crate) fn emit_body(
    insts: &[MInst],
    classes: &[Class],
    frame: &Frame,
    pinned: &[(VReg, u8)],
    asm: &mut Asm,
) -> Result<u32, String> {
    let n = classes.len();
    let registers = frame.isa.vector_registers();
    if frame.masked.is_some() && !pinned.is_empty() {
        return Err("internal: a masked body with pinned registers".into());
    }
    let reserved = usize::from(frame.masked.is_some());
    let free_regs = registers
        .checked_sub(pinned.len() + reserved)
        .filter(|&f| f >= 4)
        .ok_or("internal: too many pinned registers")?;
    let mut uses = vec![Vec::new(); n];
    for (pos, inst) in insts.iter().enumerate() {
        for (v, _) in inst.uses() {
            let list = uses
                .get_mut(v.0 as usize)
                .ok_or("internal: an unknown virtual register")?;
            if list.last() != Some(&(pos as u32)) {
                list.push(pos as u32);
            }
        }
    }
    let mut a = Alloc {
        frame,
        classes,
        uses,
        done: vec![0; n],
        reg: vec![None; n],
        slot: vec![None; n],
        vecs: vec![None; free_regs],
        kmask: [None; 8],
        k_end: match (frame.isa, frame.masked) {
            (Isa::Avx512, Some(_)) => usize::from(MASKED_K),
            _ => 8,
        },
        slots: 0,
        pinned: vec![false; n],
    };
    for &(v, hw) in pinned {
        let i = v.0 as usize;
        if i >= n || classes[i] != Class::V || usize::from(hw) < free_regs {
            return Err("internal: a pinned register outside the top of the file".into());
        }
        a.pinned[i] = true;
        a.reg[i] = Some(hw);
    }
    if let (Isa::Avx512, Some(at)) = (frame.isa, frame.masked) {
        // The step's lane mask, once: its eight words' sign bits into `k7`.
        let v = frame.mask_register();
        let mem = Mem::at(at, 0);
        asm.vector(
            op::VMOVUPD_LOAD,
            v,
            None,
            Rm::Mem { mem, bcst: false },
            0,
            None,
        );
        asm.vector(op::VPMOVQ2M, MASKED_K, None, Rm::Reg(v), 0, None);
    }
    for (pos, inst) in insts.iter().enumerate() {
        let pos = pos as u32;
        let uses = inst.uses();
        for &(v, need) in &uses {
            if need == Need::Reg || a.class(v) == Class::K {
                a.in_reg(v, asm)?;
            }
        }
        // Where each operand is now, for the encoding.
        let rm_of = |a: &Alloc<'_>, s: Src| -> Result<Rm, String> {
            Ok(match s {
                Src::U(u) => frame.uniform(u),
                Src::V(v) => match (a.reg[v.0 as usize], a.slot[v.0 as usize]) {
                    (Some(r), _) => Rm::Reg(r),
                    (None, Some(s)) => Rm::Mem {
                        mem: frame.slot(s),
                        bcst: false,
                    },
                    (None, None) => return Err(format!("internal: v{} has no place", v.0)),
                },
            })
        };
        let reg_of = |a: &Alloc<'_>, v: VReg| {
            a.reg[v.0 as usize].ok_or_else(|| format!("internal: v{} is not in a register", v.0))
        };
        enum Enc {
            Vector {
                ins: VecOp,
                reg_field: Option<u8>,
                vvvv: Option<u8>,
                rm: Rm,
                mask: u8,
                imm: Option<u8>,
                dst_in_vvvv: bool,
            },
            Fma {
                a: u8,
                b: Rm,
                c: Rm,
            },
            KOp(KOp, u8, u8),
            KNot(u8),
            Store(VecOp, Mem, u8),
            Load(Mem),
            Pin(u8, Rm),
            LoadWiden(Mem),
            LoadBytes(Mem),
            Check(u8, Rm),
            Gather {
                base: u8,
                idx: u8,
                mask: u8,
            },
        }
        let enc = match *inst {
            MInst::Op3 {
                ins, a: x, b, imm, ..
            } => Enc::Vector {
                ins,
                reg_field: None,
                vvvv: Some(reg_of(&a, x)?),
                rm: rm_of(&a, b)?,
                mask: 0,
                imm,
                dst_in_vvvv: false,
            },
            MInst::Op2 { ins, b, imm, .. } => Enc::Vector {
                ins,
                reg_field: None,
                vvvv: None,
                rm: rm_of(&a, b)?,
                mask: 0,
                imm,
                dst_in_vvvv: false,
            },
            MInst::Fma { a: x, b, c, .. } => Enc::Fma {
                a: reg_of(&a, x)?,
                b: rm_of(&a, b)?,
                c: rm_of(&a, c)?,
            },
            MInst::ShiftImm { ext, b, imm, .. } => Enc::Vector {
                ins: op::VPSHIFTQ_IMM,
                reg_field: Some(ext),
                vvvv: None,
                rm: Rm::Reg(reg_of(&a, b)?),
                mask: 0,
                imm: Some(imm),
                dst_in_vvvv: true,
            },
            MInst::Blend { k, f, t, .. } => {
                let k = reg_of(&a, k)?;
                let (ins, mask, imm) = match frame.isa {
                    Isa::Avx512 => (op::VBLENDMPD, k, None),
                    Isa::Avx2 => (op::VBLENDVPD, 0, Some(k << 4)),
                };
                Enc::Vector {
                    ins,
                    reg_field: None,
                    vvvv: Some(reg_of(&a, f)?),
                    rm: rm_of(&a, t)?,
                    mask,
                    imm,
                    dst_in_vvvv: false,
                }
            }
            MInst::Bcast { u, .. } => Enc::Vector {
                ins: op::VBROADCASTSD,
                reg_field: None,
                vvvv: None,
                rm: match frame.uniform(u) {
                    Rm::Mem { mem, .. } => Rm::Mem { mem, bcst: false },
                    rm => rm,
                },
                mask: 0,
                imm: None,
                dst_in_vvvv: false,
            },
            MInst::KOp { op, a: x, b, .. } => Enc::KOp(op, reg_of(&a, x)?, reg_of(&a, b)?),
            MInst::KNot { a: x, .. } => Enc::KNot(reg_of(&a, x)?),
            MInst::Load { ptr, disp, .. } => Enc::Load(frame.data(ptr, disp)?),
            MInst::Store { src, ptr, disp } => {
                Enc::Store(op::VMOVUPD_STORE, frame.data(ptr, disp)?, reg_of(&a, src)?)
            }
            MInst::StoreLane0 { src, ptr, disp } => {
                Enc::Store(op::VMOVSD_STORE, frame.data(ptr, disp)?, reg_of(&a, src)?)
            }
            MInst::Pin { to, src } => {
                if !a.pinned[to.0 as usize] {
                    return Err(format!("internal: v{} is not pinned", to.0));
                }
                Enc::Pin(reg_of(&a, to)?, rm_of(&a, Src::V(src))?)
            }
            MInst::LoadWiden { ptr, disp, .. } => Enc::LoadWiden(frame.data(ptr, disp)?),
            MInst::LoadBytes { ptr, disp, .. } => Enc::LoadBytes(frame.data(ptr, disp)?),
            MInst::StoreBytes { src, ptr, disp } => {
                Enc::Store(op::VPMOVQB, frame.data(ptr, disp)?, reg_of(&a, src)?)
            }
            MInst::CheckIndices { idx, bound, .. } => {
                Enc::Check(reg_of(&a, idx)?, frame.uniform(bound))
            }
            MInst::Gather { idx, mask, ptr, .. } => Enc::Gather {
                base: frame.ptr_reg(ptr)?,
                idx: reg_of(&a, idx)?,
                mask: reg_of(&a, mask)?,
            },
        };
        let early = match inst.def() {
            Some(d) if inst.defines_early() => Some((d, a.take(a.class(d), d, asm)?)),
            _ => None,
        };
        // Operands read here for the last time give up their registers (the result may take
        // one: the instruction reads its operands before it writes).
        for &(v, _) in &uses {
            let i = v.0 as usize;
            while a.uses[i].get(a.done[i]).is_some_and(|&p| p <= pos) {
                a.done[i] += 1;
            }
            if a.next_use(v) == u32::MAX {
                a.free(v);
            }
        }
        let dst = match (early, inst.def(), &enc) {
            (Some(e), ..) => Some(e),
            // An fma's result takes an operand's register where one is free now: no copy.
            (None, Some(d), Enc::Fma { a: ra, b, c }) => {
                let mut prefer = vec![*ra];
                prefer.extend([*c, *b].into_iter().filter_map(|rm| match rm {
                    Rm::Reg(r) => Some(r),
                    Rm::Mem { .. } => None,
                }));
                Some((d, a.take_preferring(d, &prefer, asm)?))
            }
            (None, Some(d), _) => Some((d, a.take(a.class(d), d, asm)?)),
            (None, None, _) => None,
        };
        let d = dst.map_or(0, |(_, r)| r);
        match enc {
            Enc::Vector {
                ins,
                reg_field,
                vvvv,
                rm,
                mask,
                imm,
                dst_in_vvvv,
            } => {
                if dst_in_vvvv {
                    asm.vector(ins, reg_field.unwrap_or(0), Some(d), rm, mask, imm);
                } else {
                    asm.vector(ins, d, vvvv, rm, mask, imm);
                }
            }
            Enc::Fma { a: ra, b, c } => fma(asm, d, ra, b, c)?,
            Enc::KOp(op, x, y) => asm.kop(op, d, x, y),
            Enc::KNot(x) => asm.knot(d, x),
            Enc::Load(mem) => match frame.masked {
                None => asm.vector(
                    op::VMOVUPD_LOAD,
                    d,
                    None,
                    Rm::Mem { mem, bcst: false },
                    0,
                    None,
                ),
                Some(_) if frame.isa == Isa::Avx512 => {
                    asm.load_zero_masked(d, one_vector(mem)?, MASKED_K)
                }
                Some(at) => masked_move(asm, frame, at, op::VMASKMOVPD_LOAD, d, mem)?,
            },
            Enc::Store(ins, mem, r) => match frame.masked {
                None => asm.vector(ins, r, None, Rm::Mem { mem, bcst: false }, 0, None),
                Some(_) if frame.isa == Isa::Avx512 && ins == op::VMOVUPD_STORE => {
                    let rm = Rm::Mem {
                        mem: one_vector(mem)?,
                        bcst: false,
                    };
                    asm.vector(ins, r, None, rm, MASKED_K, None)
                }
                Some(at) if ins == op::VMOVUPD_STORE => {
                    masked_move(asm, frame, at, op::VMASKMOVPD_STORE, r, mem)?
                }
                Some(_) => return Err("internal: a masked store of one lane".into()),
            },
            Enc::Pin(to, rm) => asm.vector(op::VMOVAPD_LOAD, to, None, rm, 0, None),
            Enc::LoadWiden(mem) => asm.vector(
                op::VPMOVSXDQ,
                d,
                None,
                Rm::Mem { mem, bcst: false },
                0,
                None,
            ),
            Enc::LoadBytes(mem) => {
                if frame.masked.is_some() || frame.isa != Isa::Avx512 {
                    return Err("internal: a bool load in a masked or AVX2 body".into());
                }
                asm.vector(
                    op::VPMOVZXBQ,
                    d,
                    None,
                    Rm::Mem { mem, bcst: false },
                    0,
                    None,
                )
            }
            Enc::Check(idx, bound) => check_indices(asm, frame.isa, d, idx, bound),
            Enc::Gather { base, idx, mask } => {
                // A zeroing idiom first: the gather merges into `dst`, whose old value would
                // otherwise be an input.
                asm.vector(op::VPXOR, d, Some(d), Rm::Reg(d), 0, None);
                asm.gather(d, base, idx, mask);
            }
        }
        if let Some((d, _)) = dst
            && a.next_use(d) == u32::MAX
        {
            a.free(d);
        }
    }
    Ok(a.slots)
}

/// The code of [`MInst::Fma`]: `d = ra·b + c` in the form that overwrites the operand whose
/// register `d` is, or, where `d` is none of theirs, `vfmadd231pd` after copying `c` into `d`.
fn fma(asm: &mut Asm, d: u8, ra: u8, b: Rm, c: Rm) -> Result<(), String> {
    let reg = |rm: Rm| match rm {
        Rm::Reg(r) => Some(r),
        Rm::Mem { .. } => None,
    };
    match (reg(b), reg(c)) {
        // d = ra·b + d
        (_, Some(rc)) if d == rc => asm.vector(op::VFMADD231PD, d, Some(ra), b, 0, None),
        // d = d·b + rc
        (_, Some(rc)) if d == ra => asm.vector(op::VFMADD132PD, d, Some(rc), b, 0, None),
        // d = rb·d + c
        (Some(rb), _) if d == ra => asm.vector(op::VFMADD213PD, d, Some(rb), c, 0, None),
        // d = ra·d + c
        (Some(rb), _) if d == rb => asm.vector(op::VFMADD213PD, d, Some(ra), c, 0, None),
        _ if d == ra => return Err("internal: an fma with two operands in memory".into()),
        _ => {
            match c {
                Rm::Reg(_) => asm.vector(op::VMOVAPD_LOAD, d, None, c, 0, None),
                Rm::Mem { mem, bcst: true } => {
                    let rm = Rm::Mem { mem, bcst: false };
                    asm.vector(op::VBROADCASTSD, d, None, rm, 0, None)
                }
                Rm::Mem { bcst: false, .. } => asm.vector(op::VMOVUPD_LOAD, d, None, c, 0, None),
            }
            asm.vector(op::VFMADD231PD, d, Some(ra), b, 0, None)
        }
    }
    Ok(())
}

/// The most bytes of one step of a masked body (AVX2: four vectors of four lanes; the
/// bodies that run whole rows mask one vector).
pub(crate) const MASKED_STEP_BYTES: i32 = 128;

/// The mask register that holds a masked AVX-512 body's lane mask (see [`Frame::masked`]).
pub(crate) const MASKED_K: u8 = 7;

/// `mem`, an access of a masked AVX-512 body, whose one vector starts its step.
fn one_vector(mem: Mem) -> Result<Mem, String> {
    if mem.disp == 0 {
        Ok(mem)
    } else {
        Err(format!(
            "internal: a masked AVX-512 access at {} bytes into its step",
            mem.disp
        ))
    }
}

/// Loads the lane mask of the masked step's vector at `disp` bytes from the step's offset
/// (the 32 bytes at the masks' address in `at`, plus `disp`) into the frame's mask register,
/// and returns that register.
fn load_mask(asm: &mut Asm, frame: &Frame, at: u8, disp: i32) -> Result<u8, String> {
    if disp % 8 != 0 || !(0..=(MASKED_STEP_BYTES - 32)).contains(&disp) {
        return Err(format!(
            "internal: a masked access at {disp} bytes into its step"
        ));
    }
    let k = frame.mask_register();
    let mem = Mem::at(at, disp);
    asm.vector(
        op::VMOVUPD_LOAD,
        k,
        None,
        Rm::Mem { mem, bcst: false },
        0,
        None,
    );
    Ok(k)
}

/// A masked body's load into, or store from, vector register `reg` (`ins`: a `vmaskmovpd`
/// form) at `mem`, with the lane mask of its vector (see [`load_mask`]).
fn masked_move(
    asm: &mut Asm,
    frame: &Frame,
    at: u8,
    ins: VecOp,
    reg: u8,
    mem: Mem,
) -> Result<(), String> {
    let k = load_mask(asm, frame, at, mem.disp)?;
    asm.vector(ins, reg, Some(k), Rm::Mem { mem, bcst: false }, 0, None);
    Ok(())
}

/// The code of [`MInst::CheckIndices`]: `d` is its result (a mask register on AVX-512, a
/// vector on AVX2), `idx` its index vector, `bound` its bound operand.
fn check_indices(asm: &mut Asm, isa: Isa, d: u8, idx: u8, bound: Rm) {
    match isa {
        Isa::Avx512 => {
            // The lanes not below `n`, taken unsigned (negative ones too): none, or leave.
            asm.vector(op::VPCMPUQ, d, Some(idx), bound, 0, Some(5));
            asm.kortest(d, d);
            asm.exit_if(0x5);
            asm.kones(d);
        }
        Isa::Avx2 => {
            // `idx > n - 1` or negative: no lane's sign bit set in `(idx > n - 1) | idx`.
            asm.vector(op::VPCMPGTQ, d, Some(idx), bound, 0, None);
            asm.vector(op::VPOR, d, Some(d), Rm::Reg(idx), 0, None);
            asm.vector(op::VTESTPD, d, None, Rm::Reg(d), 0, None);
            asm.exit_if(0x5);
            asm.vector(op::VPCMPEQQ, d, Some(d), Rm::Reg(d), 0, None);
        }
    }
}
