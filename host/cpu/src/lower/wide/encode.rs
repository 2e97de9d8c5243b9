//! x86-64 machine code for the wide loop bodies: the 512-bit EVEX and 256-bit VEX vector
//! instructions, the VEX-encoded mask-register instructions and the few general-purpose
//! instructions of a loop's frame.
//!
//! Every memory operand is `[base + index * scale + disp32]` (no displacement compression), so an
//! operand's encoding never depends on its displacement's value. Register numbers are the
//! hardware's: `zmm0..zmm31` (`ymm0..ymm15`), `k0..k7`, and the general-purpose registers
//! below.

use super::Isa;

/// General-purpose registers, by their hardware numbers.
pub(crate) mod gpr {
    pub const RAX: u8 = 0;
    pub const RCX: u8 = 1;
    pub const RDX: u8 = 2;
    pub const RBX: u8 = 3;
    pub const RSP: u8 = 4;
    pub const RBP: u8 = 5;
    pub const RSI: u8 = 6;
    pub const RDI: u8 = 7;
    pub const R8: u8 = 8;
    pub const R9: u8 = 9;
    pub const R10: u8 = 10;
    pub const R11: u8 = 11;
    pub const R12: u8 = 12;
    pub const R13: u8 = 13;
    pub const R14: u8 = 14;
    pub const R15: u8 = 15;
}

/// A memory operand `[base + index * 2^scale + disp]` (general-purpose registers; `index`
/// not `rsp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mem {
    pub base: u8,
    pub index: Option<u8>,
    /// The index's scale, as a power of two (0 to 3).
    pub scale: u8,
    pub disp: i32,
}

impl Mem {
    /// `[base + disp]`.
    pub fn at(base: u8, disp: i32) -> Mem {
        Mem {
            base,
            index: None,
            scale: 0,
            disp,
        }
    }
}

/// The register-or-memory operand of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rm {
    /// A register (a `zmm`, a `k` or a general-purpose register, by the instruction).
    Reg(u8),
    /// Memory: all 64 bytes, or (`bcst`) one 8-byte element broadcast to every lane.
    Mem { mem: Mem, bcst: bool },
}

impl Rm {
    /// The REX/VEX `X` and `B` bits of a general-purpose register or memory operand: bit 3 of
    /// the index and of the base (or of the register).
    fn xb(self) -> (u8, u8) {
        match self {
            Rm::Reg(r) => (0, (r >> 3) & 1),
            Rm::Mem { mem, .. } => ((mem.index.unwrap_or(0) >> 3) & 1, (mem.base >> 3) & 1),
        }
    }
}

/// The opcode map of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Map {
    M0f = 1,
    M0f38 = 2,
    M0f3a = 3,
}

/// The implied prefix of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pp {
    /// None.
    Np = 0,
    P66 = 1,
    Pf3 = 2,
    Pf2 = 3,
}

/// A vector instruction's `W` bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WBit {
    /// By the encoding: `W1` in EVEX (64-bit lanes), `W0` (or `WIG`) in VEX; most
    /// instructions here.
    ByEncoding,
    /// `W0` in both (`vpmovsxdq`).
    Zero,
    /// `W1` in both (`vgatherqpd`).
    One,
}

/// A vector instruction's fixed part: map, prefix, opcode byte and `W` bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VecOp {
    pub map: Map,
    pub pp: Pp,
    pub opcode: u8,
    pub w: WBit,
}

const fn vop(map: Map, pp: Pp, opcode: u8) -> VecOp {
    VecOp {
        map,
        pp,
        opcode,
        w: WBit::ByEncoding,
    }
}

const fn vop_w(map: Map, pp: Pp, opcode: u8, w: WBit) -> VecOp {
    VecOp { map, pp, opcode, w }
}

/// The vector instructions of the bodies, on 64-bit lanes. Most have the same map, prefix and
/// opcode in their VEX (256-bit) and EVEX (512-bit) forms; the others say which form they
/// have.
pub(crate) mod op {
    use super::{Map, Pp, VecOp, WBit, vop, vop_w};

    pub const VADDPD: VecOp = vop(Map::M0f, Pp::P66, 0x58);
    pub const VMULPD: VecOp = vop(Map::M0f, Pp::P66, 0x59);
    pub const VSUBPD: VecOp = vop(Map::M0f, Pp::P66, 0x5c);
    pub const VMINPD: VecOp = vop(Map::M0f, Pp::P66, 0x5d);
    pub const VDIVPD: VecOp = vop(Map::M0f, Pp::P66, 0x5e);
    pub const VMAXPD: VecOp = vop(Map::M0f, Pp::P66, 0x5f);
    pub const VSQRTPD: VecOp = vop(Map::M0f, Pp::P66, 0x51);
    /// `vcmppd`: a mask register (EVEX) or a vector of lane masks (VEX).
    pub const VCMPPD: VecOp = vop(Map::M0f, Pp::P66, 0xc2);
    pub const VPADDQ: VecOp = vop(Map::M0f, Pp::P66, 0xd4);
    pub const VPSUBQ: VecOp = vop(Map::M0f, Pp::P66, 0xfb);
    /// `vpand` (`vpandq` in EVEX), and the same for the three below.
    pub const VPAND: VecOp = vop(Map::M0f, Pp::P66, 0xdb);
    /// `!a & b`.
    pub const VPANDN: VecOp = vop(Map::M0f, Pp::P66, 0xdf);
    pub const VPOR: VecOp = vop(Map::M0f, Pp::P66, 0xeb);
    pub const VPXOR: VecOp = vop(Map::M0f, Pp::P66, 0xef);
    /// `vpsllq v, v/m, imm8` is `/6`, `vpsrlq` is `/2` of this opcode.
    pub const VPSHIFTQ_IMM: VecOp = vop(Map::M0f, Pp::P66, 0x73);
    /// `vbroadcastsd v, m64`.
    pub const VBROADCASTSD: VecOp = vop(Map::M0f38, Pp::P66, 0x19);
    /// `vrndscalepd` (EVEX) and `vroundpd` (VEX) share the opcode and the meaning of the
    /// immediate's low four bits.
    pub const VROUNDPD: VecOp = vop(Map::M0f3a, Pp::P66, 0x09);
    pub const VMOVUPD_LOAD: VecOp = vop(Map::M0f, Pp::P66, 0x10);
    pub const VMOVUPD_STORE: VecOp = vop(Map::M0f, Pp::P66, 0x11);
    pub const VMOVAPD_LOAD: VecOp = vop(Map::M0f, Pp::P66, 0x28);
    pub const VMOVAPD_STORE: VecOp = vop(Map::M0f, Pp::P66, 0x29);
    /// `vmovsd m64, xmm`: lane 0 of a vector into memory.
    pub const VMOVSD_STORE: VecOp = vop(Map::M0f, Pp::Pf2, 0x11);
    /// `vpermilpd v, v/m, imm8`: within each 128-bit pair, lane `i` takes the pair's lane
    /// given by bit `i` of the immediate.
    pub const VPERMILPD_IMM: VecOp = vop(Map::M0f3a, Pp::P66, 0x05);
    /// `vpmovzxbq v, m64` (EVEX): eight consecutive bytes, each zero-extended to a 64-bit
    /// lane.
    pub const VPMOVZXBQ: VecOp = vop(Map::M0f38, Pp::P66, 0x32);
    /// `vptestmq k, v, v/m` (EVEX): a mask of the lanes where `a & b` is not zero.
    pub const VPTESTMQ: VecOp = vop(Map::M0f38, Pp::P66, 0x27);
    /// `vpmovqb m64, v` (EVEX, `W0`): each 64-bit lane's low byte, the eight stored
    /// consecutively (ModRM.reg names the source vector).
    pub const VPMOVQB: VecOp = vop_w(Map::M0f38, Pp::Pf3, 0x32, WBit::Zero);
    /// `vpmovsxdq v, m`: consecutive `i32` elements, each sign-extended to a 64-bit lane.
    pub const VPMOVSXDQ: VecOp = vop_w(Map::M0f38, Pp::P66, 0x25, WBit::Zero);
    /// `vfmadd132pd d, v, m`: `d = d·m + v`, rounded once (`W1` in both forms, as below).
    pub const VFMADD132PD: VecOp = vop_w(Map::M0f38, Pp::P66, 0x98, WBit::One);
    /// `vfmadd213pd d, v, m`: `d = v·d + m`, rounded once.
    pub const VFMADD213PD: VecOp = vop_w(Map::M0f38, Pp::P66, 0xa8, WBit::One);
    /// `vfmadd231pd d, v, m`: `d = v·m + d`, rounded once.
    pub const VFMADD231PD: VecOp = vop_w(Map::M0f38, Pp::P66, 0xb8, WBit::One);
    /// `vgatherqpd`: 64-bit lanes at 64-bit indices (a VSIB operand, see [`super::Asm::gather`]).
    pub const VGATHERQPD: VecOp = vop_w(Map::M0f38, Pp::P66, 0x93, WBit::One);

    // EVEX only.
    pub const VPMULLQ: VecOp = vop(Map::M0f38, Pp::P66, 0x40);
    pub const VPMINSQ: VecOp = vop(Map::M0f38, Pp::P66, 0x39);
    pub const VPMAXSQ: VecOp = vop(Map::M0f38, Pp::P66, 0x3d);
    pub const VPABSQ: VecOp = vop(Map::M0f38, Pp::P66, 0x1f);
    /// `vblendmpd v{k}, f, t`.
    pub const VBLENDMPD: VecOp = vop(Map::M0f38, Pp::P66, 0x65);
    pub const VPCMPQ: VecOp = vop(Map::M0f3a, Pp::P66, 0x1f);
    pub const VCVTQQ2PD: VecOp = vop(Map::M0f, Pp::Pf3, 0xe6);
    /// `vcvttpd2qq v, v/m`: each lane truncated toward zero to an `i64`; a NaN or a value
    /// out of range gives `i64::MIN`.
    pub const VCVTTPD2QQ: VecOp = vop(Map::M0f, Pp::P66, 0x7a);
    pub const VPMOVM2Q: VecOp = vop(Map::M0f38, Pp::Pf3, 0x38);
    /// `vpmovq2m k, v`: bit `l` of the mask register is the sign bit of lane `l`.
    pub const VPMOVQ2M: VecOp = vop(Map::M0f38, Pp::Pf3, 0x39);
    /// `vpcmpuq k, v, v/m, imm8`: unsigned comparison (imm 5: not less than).
    pub const VPCMPUQ: VecOp = vop(Map::M0f3a, Pp::P66, 0x1e);
    /// `vpermpd v, v/m, imm8`: within each 256-bit half, lane `i` takes the half's lane given
    /// by bits `2i..2i+2` of the immediate.
    pub const VPERMPD_IMM: VecOp = vop(Map::M0f3a, Pp::P66, 0x01);
    /// `vshuff64x2 v, a, b/m, imm8`: 128-bit blocks 0 and 1 from `a`, 2 and 3 from `b`, each
    /// picked by two bits of the immediate.
    pub const VSHUFF64X2: VecOp = vop(Map::M0f3a, Pp::P66, 0x23);

    // VEX only.
    /// `vblendvpd v, f, t, mask`: the mask register in the immediate's high four bits.
    pub const VBLENDVPD: VecOp = vop(Map::M0f3a, Pp::P66, 0x4b);
    pub const VPCMPEQQ: VecOp = vop(Map::M0f38, Pp::P66, 0x29);
    pub const VPCMPGTQ: VecOp = vop(Map::M0f38, Pp::P66, 0x37);
    /// `vtestpd v, v/m`: `ZF` when no lane of `a & b` has its sign bit set.
    pub const VTESTPD: VecOp = vop(Map::M0f38, Pp::P66, 0x0f);
    /// `vperm2f128 v, a, b/m, imm8`: each 128-bit half picked from `a` and `b`'s four by two
    /// bits of the immediate.
    pub const VPERM2F128: VecOp = vop(Map::M0f3a, Pp::P66, 0x06);
    /// `vmaskmovpd v, mask, m`: the lanes whose mask lane has its sign bit set, from memory
    /// (the others zero; masked-out lanes are not read and cannot fault).
    pub const VMASKMOVPD_LOAD: VecOp = vop(Map::M0f38, Pp::P66, 0x2d);
    /// `vmaskmovpd m, mask, v`: the lanes whose mask lane has its sign bit set, into memory
    /// (the others are not written and cannot fault).
    pub const VMASKMOVPD_STORE: VecOp = vop(Map::M0f38, Pp::P66, 0x2f);
}

/// The mask-register instructions (VEX, map 0F, `W0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KOp {
    /// `kandw k, k, k`
    And = 0x41,
    /// `kandnw k, k, k`: `!a & b`.
    AndN = 0x42,
    /// `korw k, k, k`
    Or = 0x45,
    /// `kxorw k, k, k`
    Xor = 0x47,
}

/// A growing buffer of machine code for bodies of one instruction set.
#[derive(Debug)]
pub(crate) struct Asm {
    pub code: Vec<u8>,
    /// The width and encoding of its vector instructions.
    pub isa: Isa,
    /// The displacements of the jumps to the function's early exit ([`Asm::exit_if`]), for
    /// the function around the body to point there.
    pub exits: Vec<usize>,
}

impl Asm {
    /// An empty buffer.
    pub fn new(isa: Isa) -> Asm {
        Asm {
            code: Vec::new(),
            isa,
            exits: Vec::new(),
        }
    }

    fn byte(&mut self, b: u8) {
        self.code.push(b);
    }

    fn bytes(&mut self, bs: &[u8]) {
        self.code.extend_from_slice(bs);
    }

    /// ModRM (and SIB and displacement) for `reg` (low 3 bits) and `rm`.
    fn modrm(&mut self, reg: u8, rm: Rm) {
        match rm {
            Rm::Reg(r) => self.byte(0xc0 | ((reg & 7) << 3) | (r & 7)),
            Rm::Mem { mem, .. } => {
                let needs_sib = mem.index.is_some() || mem.base & 7 == gpr::RSP;
                if needs_sib {
                    self.byte(0x80 | ((reg & 7) << 3) | 4);
                    let index = mem.index.unwrap_or(gpr::RSP);
                    self.byte(((mem.scale & 3) << 6) | ((index & 7) << 3) | (mem.base & 7));
                } else {
                    self.byte(0x80 | ((reg & 7) << 3) | (mem.base & 7));
                }
                self.bytes(&mem.disp.to_le_bytes());
            }
        }
    }

    /// A vector instruction of the buffer's width and encoding: `reg` is ModRM.reg (a register
    /// number, or an opcode extension), `vvvv` the second register operand (`None`: unused),
    /// `rm` the last operand, `mask` the opmask register (EVEX only; 0: none), `imm` a
    /// trailing immediate.
    pub fn vector(
        &mut self,
        ins: VecOp,
        reg: u8,
        vvvv: Option<u8>,
        rm: Rm,
        mask: u8,
        imm: Option<u8>,
    ) {
        match self.isa {
            Isa::Avx512 => self.evex(ins, reg, vvvv, rm, mask, imm),
            Isa::Avx2 => {
                debug_assert!(mask == 0 && !matches!(rm, Rm::Mem { bcst: true, .. }));
                self.vex(ins, true, reg, vvvv.unwrap_or(0), rm);
                if let Some(i) = imm {
                    self.byte(i);
                }
            }
        }
    }

    /// An EVEX instruction, 512 bits wide, `W1`: operands as for [`Asm::vector`].
    fn evex(&mut self, ins: VecOp, reg: u8, vvvv: Option<u8>, rm: Rm, mask: u8, imm: Option<u8>) {
        let (x, b, bcst) = match rm {
            Rm::Reg(r) => ((r >> 4) & 1, (r >> 3) & 1, false),
            Rm::Mem { mem, bcst } => ((mem.index.unwrap_or(0) >> 3) & 1, (mem.base >> 3) & 1, bcst),
        };
        let r = (reg >> 3) & 1;
        let r2 = (reg >> 4) & 1;
        let v = vvvv.unwrap_or(0);
        self.byte(0x62);
        self.byte(
            ((r ^ 1) << 7) | ((x ^ 1) << 6) | ((b ^ 1) << 5) | ((r2 ^ 1) << 4) | ins.map as u8,
        );
        let w = u8::from(ins.w != WBit::Zero);
        self.byte((w << 7) | (((!v) & 0xf) << 3) | 0x04 | ins.pp as u8);
        let v2 = (v >> 4) & 1;
        self.byte((0b10 << 5) | (u8::from(bcst) << 4) | ((v2 ^ 1) << 3) | (mask & 7));
        self.byte(ins.opcode);
        self.modrm(reg, rm);
        if let Some(i) = imm {
            self.byte(i);
        }
    }

    /// `vmovupd dst{k}{z}, m` (EVEX): the lanes that mask register `k` marks from memory, the
    /// others zero; the lanes it does not mark are not read and cannot fault.
    pub fn load_zero_masked(&mut self, dst: u8, mem: Mem, k: u8) {
        let at = self.code.len();
        let rm = Rm::Mem { mem, bcst: false };
        self.evex(op::VMOVUPD_LOAD, dst, None, rm, k, None);
        // EVEX.z (bit 7 of the prefix's last byte): zeroing, not merging, masked-out lanes.
        self.code[at + 3] |= 0x80;
    }

    /// A three-byte VEX instruction with `W0`: `l` picks 256 bits (or `L1` for the mask
    /// instructions); `reg`, `vvvv` (0 if unused) and `rm` as for [`Asm::vector`].
    fn vex(&mut self, ins: VecOp, l: bool, reg: u8, vvvv: u8, rm: Rm) {
        let (x, b) = rm.xb();
        let r = (reg >> 3) & 1;
        self.byte(0xc4);
        self.byte(((r ^ 1) << 7) | ((x ^ 1) << 6) | ((b ^ 1) << 5) | ins.map as u8);
        let w = u8::from(ins.w == WBit::One);
        self.byte((w << 7) | (((!vvvv) & 0xf) << 3) | (u8::from(l) << 2) | ins.pp as u8);
        self.byte(ins.opcode);
        self.modrm(reg, rm);
    }

    /// A mask-register instruction (VEX map 0F, no prefix, `W0`).
    fn vex0f(&mut self, opcode: u8, l: bool, reg: u8, vvvv: u8, rm: Rm) {
        self.vex(vop(Map::M0f, Pp::Np, opcode), l, reg, vvvv, rm);
    }

    /// `k{dst} = op(k{a}, k{b})` on 16-bit masks.
    pub fn kop(&mut self, op: KOp, dst: u8, a: u8, b: u8) {
        self.vex0f(op as u8, true, dst, a, Rm::Reg(b));
    }

    /// `knotw k{dst}, k{src}`.
    pub fn knot(&mut self, dst: u8, src: u8) {
        self.vex0f(0x44, false, dst, 0, Rm::Reg(src));
    }

    /// `kmovw k, m16`.
    pub fn kload(&mut self, k: u8, mem: Mem) {
        self.vex0f(0x90, false, k, 0, Rm::Mem { mem, bcst: false });
    }

    /// `kmovw m16, k`.
    pub fn kstore(&mut self, mem: Mem, k: u8) {
        self.vex0f(0x91, false, k, 0, Rm::Mem { mem, bcst: false });
    }

    /// `kxnorw k, k, k`: every bit of `k` set.
    pub fn kones(&mut self, k: u8) {
        self.vex0f(0x46, true, k, k, Rm::Reg(k));
    }

    /// `kortestw k{a}, k{b}`: `ZF` when `a | b` is all zeros.
    pub fn kortest(&mut self, a: u8, b: u8) {
        self.vex0f(0x98, false, a, 0, Rm::Reg(b));
    }

    /// `vgatherqpd dst{mask}, [base + index * 8]` (EVEX) or `vgatherqpd dst, [base + index *
    /// 8], mask` (VEX): lane `l` of `dst` loads the element at byte `base + 8 index[l]` where
    /// `mask`'s lane `l` is set, and clears that lane of `mask`. `dst`, `index` and `mask`
    /// must differ, and an EVEX `mask` is not `k0`.
    pub fn gather(&mut self, dst: u8, base: u8, index: u8, mask: u8) {
        let ins = op::VGATHERQPD;
        let (r, r2) = ((dst >> 3) & 1, (dst >> 4) & 1);
        let (x, v2) = ((index >> 3) & 1, (index >> 4) & 1);
        let b = (base >> 3) & 1;
        match self.isa {
            Isa::Avx512 => {
                self.byte(0x62);
                self.byte(
                    ((r ^ 1) << 7)
                        | ((x ^ 1) << 6)
                        | ((b ^ 1) << 5)
                        | ((r2 ^ 1) << 4)
                        | ins.map as u8,
                );
                // W1, vvvv unused (1111).
                self.byte(0x80 | (0xf << 3) | 0x04 | ins.pp as u8);
                self.byte((0b10 << 5) | ((v2 ^ 1) << 3) | (mask & 7));
            }
            Isa::Avx2 => {
                self.byte(0xc4);
                self.byte(((r ^ 1) << 7) | ((x ^ 1) << 6) | ((b ^ 1) << 5) | ins.map as u8);
                self.byte(0x80 | (((!mask) & 0xf) << 3) | 0x04 | ins.pp as u8);
            }
        }
        self.byte(ins.opcode);
        // ModRM: a SIB follows, disp32; SIB: scale 8, the vector index, the base.
        self.byte(0x80 | ((dst & 7) << 3) | 4);
        self.byte((3 << 6) | ((index & 7) << 3) | (base & 7));
        self.bytes(&0i32.to_le_bytes());
    }

    /// `vzeroupper`.
    pub fn vzeroupper(&mut self) {
        self.bytes(&[0xc5, 0xf8, 0x77]);
    }

    /// REX.W and an opcode with ModRM for two general-purpose registers or memory.
    fn rex_w(&mut self, opcode: u8, reg: u8, rm: Rm) {
        let (x, b) = rm.xb();
        self.byte(0x48 | (((reg >> 3) & 1) << 2) | (x << 1) | b);
        self.byte(opcode);
        self.modrm(reg, rm);
    }

    /// `push r64`.
    pub fn push(&mut self, r: u8) {
        if r >= 8 {
            self.byte(0x41);
        }
        self.byte(0x50 | (r & 7));
    }

    /// `pop r64`.
    pub fn pop(&mut self, r: u8) {
        if r >= 8 {
            self.byte(0x41);
        }
        self.byte(0x58 | (r & 7));
    }

    /// `mov dst, src` (64-bit registers).
    pub fn mov_rr(&mut self, dst: u8, src: u8) {
        self.rex_w(0x89, src, Rm::Reg(dst));
    }

    /// `mov dst, [mem]` (64 bits).
    pub fn mov_load(&mut self, dst: u8, mem: Mem) {
        self.rex_w(0x8b, dst, Rm::Mem { mem, bcst: false });
    }

    /// `mov [mem], src` (64 bits).
    pub fn mov_store(&mut self, mem: Mem, src: u8) {
        self.rex_w(0x89, src, Rm::Mem { mem, bcst: false });
    }

    /// `add dst, [mem]` (64 bits).
    pub fn add_load(&mut self, dst: u8, mem: Mem) {
        self.rex_w(0x03, dst, Rm::Mem { mem, bcst: false });
    }

    /// `mov dst, imm64`.
    pub fn mov_imm64(&mut self, dst: u8, imm: u64) {
        self.byte(0x48 | ((dst >> 3) & 1));
        self.byte(0xb8 | (dst & 7));
        self.bytes(&imm.to_le_bytes());
    }

    /// `add r64, imm32` (`sub` with `ext` 5, `and` with 4).
    fn alu_imm(&mut self, ext: u8, r: u8, imm: i32) {
        self.rex_w(0x81, ext, Rm::Reg(r));
        self.bytes(&imm.to_le_bytes());
    }

    /// `add r64, imm32`.
    pub fn add_imm(&mut self, r: u8, imm: i32) {
        self.alu_imm(0, r, imm);
    }

    /// `sub r64, imm32`.
    pub fn sub_imm(&mut self, r: u8, imm: i32) {
        self.alu_imm(5, r, imm);
    }

    /// `and r64, imm32` (sign-extended).
    pub fn and_imm(&mut self, r: u8, imm: i32) {
        self.alu_imm(4, r, imm);
    }

    /// `xor r32, r32` (zeroes the 64-bit register).
    pub fn zero(&mut self, r: u8) {
        if r >= 8 {
            self.byte(0x45);
        }
        self.byte(0x31);
        self.byte(0xc0 | ((r & 7) << 3) | (r & 7));
    }

    /// `test r64, r64`.
    pub fn test(&mut self, r: u8) {
        self.rex_w(0x85, r, Rm::Reg(r));
    }

    /// `jcc rel32` to `target` (an offset in this buffer); `cc` is the condition's low nibble
    /// (`0x5`: not zero, `0xe`: less or equal).
    pub fn jcc(&mut self, cc: u8, target: usize) {
        self.byte(0x0f);
        self.byte(0x80 | cc);
        let next = self.code.len() + 4;
        let rel = target as i64 - next as i64;
        self.bytes(&(rel as i32).to_le_bytes());
    }

    /// A `jcc rel32` whose target is set later by [`Asm::patch`]; returns its displacement's
    /// offset.
    pub fn jcc_forward(&mut self, cc: u8) -> usize {
        self.byte(0x0f);
        self.byte(0x80 | cc);
        let at = self.code.len();
        self.bytes(&[0; 4]);
        at
    }

    /// A `jcc rel32` to the function's early exit, which the function around the body sets
    /// (see [`Asm::exits`]).
    pub fn exit_if(&mut self, cc: u8) {
        let at = self.jcc_forward(cc);
        self.exits.push(at);
    }

    /// Points the jump whose displacement is at `at` to the current end of the buffer.
    pub fn patch(&mut self, at: usize) {
        let rel = self.code.len() as i64 - (at as i64 + 4);
        self.code[at..at + 4].copy_from_slice(&(rel as i32).to_le_bytes());
    }

    /// `ret`.
    pub fn ret(&mut self) {
        self.byte(0xc3);
    }
}

#[cfg(test)]
mod tests {
    //! Encodings checked against a disassembler's (GNU objdump's) reading of the same bytes.

    use super::gpr::*;
    use super::*;

    fn enc(f: impl FnOnce(&mut Asm)) -> Vec<u8> {
        let mut a = Asm::new(Isa::Avx512);
        f(&mut a);
        a.code
    }

    #[test]
    fn evex_register_forms() {
        // vaddpd zmm1, zmm2, zmm3
        assert_eq!(
            enc(|a| a.evex(op::VADDPD, 1, Some(2), Rm::Reg(3), 0, None)),
            [0x62, 0xf1, 0xed, 0x48, 0x58, 0xcb]
        );
        // vmulpd zmm17, zmm30, zmm9
        assert_eq!(
            enc(|a| a.evex(op::VMULPD, 17, Some(30), Rm::Reg(9), 0, None)),
            [0x62, 0xc1, 0x8d, 0x40, 0x59, 0xc9]
        );
        // vblendmpd zmm4{k3}, zmm5, zmm28
        assert_eq!(
            enc(|a| a.evex(op::VBLENDMPD, 4, Some(5), Rm::Reg(28), 3, None)),
            [0x62, 0x92, 0xd5, 0x4b, 0x65, 0xe4]
        );
        // vcmppd k2, zmm1, zmm20, 0x11
        assert_eq!(
            enc(|a| a.evex(op::VCMPPD, 2, Some(1), Rm::Reg(20), 0, Some(0x11))),
            [0x62, 0xb1, 0xf5, 0x48, 0xc2, 0xd4, 0x11]
        );
        // vpsllq zmm3, zmm25, 52
        assert_eq!(
            enc(|a| a.evex(op::VPSHIFTQ_IMM, 6, Some(3), Rm::Reg(25), 0, Some(52))),
            [0x62, 0x91, 0xe5, 0x48, 0x73, 0xf1, 0x34]
        );
        // vcvtqq2pd zmm0, zmm16
        assert_eq!(
            enc(|a| a.evex(op::VCVTQQ2PD, 0, None, Rm::Reg(16), 0, None)),
            [0x62, 0xb1, 0xfe, 0x48, 0xe6, 0xc0]
        );
        // vcvttpd2qq zmm1, zmm2
        assert_eq!(
            enc(|a| a.evex(op::VCVTTPD2QQ, 1, None, Rm::Reg(2), 0, None)),
            [0x62, 0xf1, 0xfd, 0x48, 0x7a, 0xca]
        );
    }

    #[test]
    fn evex_memory_forms() {
        // vaddpd zmm1, zmm2, [rdx+0x10]{1to8}
        assert_eq!(
            enc(|a| a.evex(
                op::VADDPD,
                1,
                Some(2),
                Rm::Mem {
                    mem: Mem::at(RDX, 0x10),
                    bcst: true
                },
                0,
                None
            )),
            [0x62, 0xf1, 0xed, 0x58, 0x58, 0x8a, 0x10, 0, 0, 0]
        );
        // vmovupd zmm9, [r12+rax]
        assert_eq!(
            enc(|a| a.evex(
                op::VMOVUPD_LOAD,
                9,
                None,
                Rm::Mem {
                    mem: Mem {
                        base: R12,
                        index: Some(RAX),
                        scale: 0,
                        disp: 0
                    },
                    bcst: false
                },
                0,
                None
            )),
            [0x62, 0x51, 0xfd, 0x48, 0x10, 0x8c, 0x04, 0, 0, 0, 0]
        );
        // vmovapd [rsp+0x80], zmm31
        assert_eq!(
            enc(|a| a.evex(
                op::VMOVAPD_STORE,
                31,
                None,
                Rm::Mem {
                    mem: Mem::at(RSP, 0x80),
                    bcst: false
                },
                0,
                None
            )),
            [0x62, 0x61, 0xfd, 0x48, 0x29, 0xbc, 0x24, 0x80, 0, 0, 0]
        );
    }

    #[test]
    fn evex_masked_forms() {
        let at = |base: u8| Mem {
            base,
            index: Some(RAX),
            scale: 0,
            disp: 0,
        };
        // vpmovq2m k7, zmm31
        assert_eq!(
            enc(|a| a.evex(op::VPMOVQ2M, 7, None, Rm::Reg(31), 0, None)),
            [0x62, 0x92, 0xfe, 0x48, 0x39, 0xff]
        );
        // vmovupd zmm3{k7}{z}, [r10+rax]
        assert_eq!(
            enc(|a| a.load_zero_masked(3, at(R10), 7)),
            [0x62, 0xd1, 0xfd, 0xcf, 0x10, 0x9c, 0x02, 0, 0, 0, 0]
        );
        // vmovupd [r13+rax]{k7}, zmm0
        assert_eq!(
            enc(|a| a.evex(
                op::VMOVUPD_STORE,
                0,
                None,
                Rm::Mem {
                    mem: at(R13),
                    bcst: false
                },
                7,
                None
            )),
            [0x62, 0xd1, 0xfd, 0x4f, 0x11, 0x84, 0x05, 0, 0, 0, 0]
        );
    }

    #[test]
    fn mask_and_general_forms() {
        // kandw k1, k2, k3
        assert_eq!(
            enc(|a| a.kop(KOp::And, 1, 2, 3)),
            [0xc4, 0xe1, 0x6c, 0x41, 0xcb]
        );
        // knotw k4, k5
        assert_eq!(enc(|a| a.knot(4, 5)), [0xc4, 0xe1, 0x78, 0x44, 0xe5]);
        // kmovw [rsp+0x40], k6
        assert_eq!(
            enc(|a| a.kstore(Mem::at(RSP, 0x40), 6)),
            [0xc4, 0xe1, 0x78, 0x91, 0xb4, 0x24, 0x40, 0, 0, 0]
        );
        // mov r9, [rdi+0x18]
        assert_eq!(
            enc(|a| a.mov_load(R9, Mem::at(RDI, 0x18))),
            [0x4c, 0x8b, 0x8f, 0x18, 0, 0, 0]
        );
        // add r9, [rdi+0x18] ; mov [rdi+0x20], rsi ; add r15, [rdi+0x40]
        assert_eq!(
            enc(|a| {
                a.add_load(R9, Mem::at(RDI, 0x18));
                a.mov_store(Mem::at(RDI, 0x20), RSI);
                a.add_load(R15, Mem::at(RDI, 0x40));
            }),
            [
                0x4c, 0x03, 0x8f, 0x18, 0, 0, 0, 0x48, 0x89, 0xb7, 0x20, 0, 0, 0, 0x4c, 0x03, 0xbf,
                0x40, 0, 0, 0
            ]
        );
        // add rax, 64 ; sub rsi, 1 ; and rsp, -64
        assert_eq!(
            enc(|a| {
                a.add_imm(RAX, 64);
                a.sub_imm(RSI, 1);
                a.and_imm(RSP, -64);
            }),
            [
                0x48, 0x81, 0xc0, 64, 0, 0, 0, 0x48, 0x81, 0xee, 1, 0, 0, 0, 0x48, 0x81, 0xe4,
                0xc0, 0xff, 0xff, 0xff
            ]
        );
        // push r12 ; pop rbx ; mov rbp, rsp ; xor r11d, r11d ; test rsi, rsi
        assert_eq!(
            enc(|a| {
                a.push(R12);
                a.pop(RBX);
                a.mov_rr(RBP, RSP);
                a.zero(R11);
                a.test(RSI);
            }),
            [
                0x41, 0x54, 0x5b, 0x48, 0x89, 0xe5, 0x45, 0x31, 0xdb, 0x48, 0x85, 0xf6
            ]
        );
    }

    fn vex(f: impl FnOnce(&mut Asm)) -> Vec<u8> {
        let mut a = Asm::new(Isa::Avx2);
        f(&mut a);
        a.code
    }

    /// The bytes `f` assembles for AVX-512, and for AVX2.
    fn both(f: &dyn Fn(&mut Asm)) -> (Vec<u8>, Vec<u8>) {
        let (mut e, mut v) = (Asm::new(Isa::Avx512), Asm::new(Isa::Avx2));
        f(&mut e);
        f(&mut v);
        (e.code, v.code)
    }

    /// The operand `[base + index * 2^scale + disp]`, not broadcast.
    fn mem(base: u8, index: Option<u8>, scale: u8, disp: i32) -> Rm {
        Rm::Mem {
            mem: Mem {
                base,
                index,
                scale,
                disp,
            },
            bcst: false,
        }
    }

    #[test]
    fn fma_forms() {
        // vfmadd231pd zmm1, zmm2, zmm3 / ymm1, ymm2, ymm3
        assert_eq!(
            both(&|a| a.vector(op::VFMADD231PD, 1, Some(2), Rm::Reg(3), 0, None)),
            (
                vec![0x62, 0xf2, 0xed, 0x48, 0xb8, 0xcb],
                vec![0xc4, 0xe2, 0xed, 0xb8, 0xcb]
            )
        );
        // vfmadd132pd zmm17, zmm30, zmm9
        assert_eq!(
            enc(|a| a.vector(op::VFMADD132PD, 17, Some(30), Rm::Reg(9), 0, None)),
            [0x62, 0xc2, 0x8d, 0x40, 0x98, 0xc9]
        );
        // vfmadd132pd ymm0, ymm15, ymm8
        assert_eq!(
            vex(|a| a.vector(op::VFMADD132PD, 0, Some(15), Rm::Reg(8), 0, None)),
            [0xc4, 0xc2, 0x85, 0x98, 0xc0]
        );
        // vfmadd213pd zmm4, zmm5, qword bcst [r12+0x40]
        let bcst = Rm::Mem {
            mem: Mem::at(R12, 0x40),
            bcst: true,
        };
        assert_eq!(
            enc(|a| a.vector(op::VFMADD213PD, 4, Some(5), bcst, 0, None)),
            [
                0x62, 0xd2, 0xd5, 0x58, 0xa8, 0xa4, 0x24, 0x40, 0x00, 0x00, 0x00
            ]
        );
        // vfmadd213pd ymm9, ymm12, [rsp+0x60]
        assert_eq!(
            vex(|a| a.vector(
                op::VFMADD213PD,
                9,
                Some(12),
                mem(RSP, None, 0, 0x60),
                0,
                None
            )),
            [0xc4, 0x62, 0x9d, 0xa8, 0x8c, 0x24, 0x60, 0x00, 0x00, 0x00]
        );
    }

    #[test]
    fn vex_forms() {
        let m = |base, index, disp| mem(base, index, 0, disp);
        // vaddpd ymm1, ymm2, ymm3
        assert_eq!(
            vex(|a| a.vector(op::VADDPD, 1, Some(2), Rm::Reg(3), 0, None)),
            [0xc4, 0xe1, 0x6d, 0x58, 0xcb]
        );
        // vmulpd ymm9, ymm14, ymm11
        assert_eq!(
            vex(|a| a.vector(op::VMULPD, 9, Some(14), Rm::Reg(11), 0, None)),
            [0xc4, 0x41, 0x0d, 0x59, 0xcb]
        );
        // vblendvpd ymm4, ymm5, ymm12, ymm7
        assert_eq!(
            vex(|a| a.vector(op::VBLENDVPD, 4, Some(5), Rm::Reg(12), 0, Some(7 << 4))),
            [0xc4, 0xc3, 0x55, 0x4b, 0xe4, 0x70]
        );
        // vcmppd ymm2, ymm1, [rdx+0x40], 0x11
        assert_eq!(
            vex(|a| a.vector(op::VCMPPD, 2, Some(1), m(RDX, None, 0x40), 0, Some(0x11))),
            [0xc4, 0xe1, 0x75, 0xc2, 0x92, 0x40, 0x00, 0x00, 0x00, 0x11]
        );
        // vpsllq ymm3, ymm10, 52
        assert_eq!(
            vex(|a| a.vector(op::VPSHIFTQ_IMM, 6, Some(3), Rm::Reg(10), 0, Some(52))),
            [0xc4, 0xc1, 0x65, 0x73, 0xf2, 0x34]
        );
        // vpsrlq ymm13, ymm1, 3
        assert_eq!(
            vex(|a| a.vector(op::VPSHIFTQ_IMM, 2, Some(13), Rm::Reg(1), 0, Some(3))),
            [0xc4, 0xe1, 0x15, 0x73, 0xd1, 0x03]
        );
        // vpcmpgtq ymm15, ymm8, ymm0
        assert_eq!(
            vex(|a| a.vector(op::VPCMPGTQ, 15, Some(8), Rm::Reg(0), 0, None)),
            [0xc4, 0x62, 0x3d, 0x37, 0xf8]
        );
        // vpcmpeqq ymm0, ymm1, [rsp+0x20]
        assert_eq!(
            vex(|a| a.vector(op::VPCMPEQQ, 0, Some(1), m(RSP, None, 0x20), 0, None)),
            [0xc4, 0xe2, 0x75, 0x29, 0x84, 0x24, 0x20, 0x00, 0x00, 0x00]
        );
        // vroundpd ymm3, ymm4, 9
        assert_eq!(
            vex(|a| a.vector(op::VROUNDPD, 3, None, Rm::Reg(4), 0, Some(0x09))),
            [0xc4, 0xe3, 0x7d, 0x09, 0xdc, 0x09]
        );
        // vbroadcastsd ymm12, [rdi+0x18]
        assert_eq!(
            vex(|a| a.vector(op::VBROADCASTSD, 12, None, m(RDI, None, 0x18), 0, None)),
            [0xc4, 0x62, 0x7d, 0x19, 0xa7, 0x18, 0x00, 0x00, 0x00]
        );
        // vmovupd ymm9, [r12+rax+0x20]
        assert_eq!(
            vex(|a| a.vector(op::VMOVUPD_LOAD, 9, None, m(R12, Some(RAX), 0x20), 0, None)),
            [0xc4, 0x41, 0x7d, 0x10, 0x8c, 0x04, 0x20, 0x00, 0x00, 0x00]
        );
        // vmovupd [r15+rax+0x60], ymm2
        assert_eq!(
            vex(|a| a.vector(op::VMOVUPD_STORE, 2, None, m(R15, Some(RAX), 0x60), 0, None)),
            [0xc4, 0xc1, 0x7d, 0x11, 0x94, 0x07, 0x60, 0x00, 0x00, 0x00]
        );
        // vmovapd [rsp+0x80], ymm15
        assert_eq!(
            vex(|a| a.vector(op::VMOVAPD_STORE, 15, None, m(RSP, None, 0x80), 0, None)),
            [0xc4, 0x61, 0x7d, 0x29, 0xbc, 0x24, 0x80, 0x00, 0x00, 0x00]
        );
        // vpandn ymm7, ymm6, ymm5
        assert_eq!(
            vex(|a| a.vector(op::VPANDN, 7, Some(6), Rm::Reg(5), 0, None)),
            [0xc4, 0xe1, 0x4d, 0xdf, 0xfd]
        );
        // vpxor ymm7, ymm6, [rdx+0x20]
        assert_eq!(
            vex(|a| a.vector(op::VPXOR, 7, Some(6), m(RDX, None, 0x20), 0, None)),
            [0xc4, 0xe1, 0x4d, 0xef, 0xba, 0x20, 0x00, 0x00, 0x00]
        );
        // vpsubq ymm7, ymm6, ymm5
        assert_eq!(
            vex(|a| a.vector(op::VPSUBQ, 7, Some(6), Rm::Reg(5), 0, None)),
            [0xc4, 0xe1, 0x4d, 0xfb, 0xfd]
        );
        // vsqrtpd ymm7, ymm8
        assert_eq!(
            vex(|a| a.vector(op::VSQRTPD, 7, None, Rm::Reg(8), 0, None)),
            [0xc4, 0xc1, 0x7d, 0x51, 0xf8]
        );
        // vmaxpd ymm7, ymm9, ymm8
        assert_eq!(
            vex(|a| a.vector(op::VMAXPD, 7, Some(9), Rm::Reg(8), 0, None)),
            [0xc4, 0xc1, 0x35, 0x5f, 0xf8]
        );
    }

    /// The instructions of the in-register group trees ([`super::super::select`]'s
    /// `group_tree`), in both encodings.
    #[test]
    fn group_tree_forms() {
        let m = |base, index, disp| mem(base, index, 0, disp);
        // vmovsd [r12+rax+0x40], xmm3
        assert_eq!(
            both(&|a| a.vector(op::VMOVSD_STORE, 3, None, m(R12, Some(RAX), 0x40), 0, None)),
            (
                vec![0x62, 0xd1, 0xff, 0x48, 0x11, 0x9c, 0x04, 0x40, 0, 0, 0],
                vec![0xc4, 0xc1, 0x7f, 0x11, 0x9c, 0x04, 0x40, 0, 0, 0]
            )
        );
        // vmovsd [rcx+rax], xmm12
        assert_eq!(
            both(&|a| a.vector(op::VMOVSD_STORE, 12, None, m(RCX, Some(RAX), 0), 0, None)),
            (
                vec![0x62, 0x71, 0xff, 0x48, 0x11, 0xa4, 0x01, 0, 0, 0, 0],
                vec![0xc4, 0x61, 0x7f, 0x11, 0xa4, 0x01, 0, 0, 0, 0]
            )
        );
        // vpermilpd zmm1/ymm1, zmm2/ymm2, 0x55
        assert_eq!(
            both(&|a| a.vector(op::VPERMILPD_IMM, 1, None, Rm::Reg(2), 0, Some(0x55))),
            (
                vec![0x62, 0xf3, 0xfd, 0x48, 0x05, 0xca, 0x55],
                vec![0xc4, 0xe3, 0x7d, 0x05, 0xca, 0x55]
            )
        );
        // vpermilpd zmm9/ymm9, [rsp+0x80], 0x5
        assert_eq!(
            both(&|a| a.vector(op::VPERMILPD_IMM, 9, None, m(RSP, None, 0x80), 0, Some(5))),
            (
                vec![
                    0x62, 0x73, 0xfd, 0x48, 0x05, 0x8c, 0x24, 0x80, 0, 0, 0, 0x05
                ],
                vec![0xc4, 0x63, 0x7d, 0x05, 0x8c, 0x24, 0x80, 0, 0, 0, 0x05]
            )
        );
        // vmovsd [r12+rax+0x40], xmm17
        assert_eq!(
            enc(|a| a.evex(op::VMOVSD_STORE, 17, None, m(R12, Some(RAX), 0x40), 0, None)),
            [0x62, 0xc1, 0xff, 0x48, 0x11, 0x8c, 0x04, 0x40, 0, 0, 0]
        );
        // vpermpd zmm20, zmm3, 0x4e
        assert_eq!(
            enc(|a| a.evex(op::VPERMPD_IMM, 20, None, Rm::Reg(3), 0, Some(0x4e))),
            [0x62, 0xe3, 0xfd, 0x48, 0x01, 0xe3, 0x4e]
        );
        // vshuff64x2 zmm5, zmm21, zmm30, 0x4e
        assert_eq!(
            enc(|a| a.evex(op::VSHUFF64X2, 5, Some(21), Rm::Reg(30), 0, Some(0x4e))),
            [0x62, 0x93, 0xd5, 0x40, 0x23, 0xee, 0x4e]
        );
        // vshuff64x2 zmm5, zmm5, [rsp+0x40], 0x4e
        assert_eq!(
            enc(|a| a.evex(
                op::VSHUFF64X2,
                5,
                Some(5),
                m(RSP, None, 0x40),
                0,
                Some(0x4e)
            )),
            [
                0x62, 0xf3, 0xd5, 0x48, 0x23, 0xac, 0x24, 0x40, 0, 0, 0, 0x4e
            ]
        );
        // vperm2f128 ymm10, ymm3, ymm11, 0x1
        assert_eq!(
            vex(|a| a.vector(op::VPERM2F128, 10, Some(3), Rm::Reg(11), 0, Some(1))),
            [0xc4, 0x43, 0x65, 0x06, 0xd3, 0x01]
        );
        // vperm2f128 ymm1, ymm1, [rsp+0x40], 0x1
        assert_eq!(
            vex(|a| a.vector(op::VPERM2F128, 1, Some(1), m(RSP, None, 0x40), 0, Some(1))),
            [0xc4, 0xe3, 0x75, 0x06, 0x8c, 0x24, 0x40, 0, 0, 0, 0x01]
        );
        // vmaskmovpd ymm3, ymm15, [r9+rax*1+0x20]
        assert_eq!(
            vex(|a| a.vector(
                op::VMASKMOVPD_LOAD,
                3,
                Some(15),
                mem(R9, Some(RAX), 0, 0x20),
                0,
                None
            )),
            [0xc4, 0xc2, 0x05, 0x2d, 0x9c, 0x01, 0x20, 0, 0, 0]
        );
        // vmaskmovpd [rbx+rax*1+0x60], ymm15, ymm12
        assert_eq!(
            vex(|a| a.vector(
                op::VMASKMOVPD_STORE,
                12,
                Some(15),
                mem(RBX, Some(RAX), 0, 0x60),
                0,
                None
            )),
            [0xc4, 0x62, 0x05, 0x2f, 0xa4, 0x03, 0x60, 0, 0, 0]
        );
    }

    /// The instructions of the wide bodies' gathers: widened index loads, the index check
    /// and the gather, with scaled indices and VSIB operands, in both encodings.
    #[test]
    fn gather_forms() {
        let scaled = |base, scale, disp| mem(base, Some(RAX), scale, disp);
        // vpmovsxdq zmm9/ymm9, [r12+rax*4+0x20]
        assert_eq!(
            both(&|a| a.vector(op::VPMOVSXDQ, 9, None, scaled(R12, 2, 0x20), 0, None)),
            (
                vec![0x62, 0x52, 0x7d, 0x48, 0x25, 0x8c, 0x84, 0x20, 0, 0, 0],
                vec![0xc4, 0x42, 0x7d, 0x25, 0x8c, 0x84, 0x20, 0, 0, 0]
            )
        );
        // vpmovsxdq zmm2/ymm2, [rcx+rax*8-0x8]
        assert_eq!(
            both(&|a| a.vector(op::VPMOVSXDQ, 2, None, scaled(RCX, 3, -8), 0, None)),
            (
                vec![
                    0x62, 0xf2, 0x7d, 0x48, 0x25, 0x94, 0xc1, 0xf8, 0xff, 0xff, 0xff
                ],
                vec![0xc4, 0xe2, 0x7d, 0x25, 0x94, 0xc1, 0xf8, 0xff, 0xff, 0xff]
            )
        );
        // vgatherqpd zmm3{k2}, [r9+zmm5*8] / vgatherqpd ymm3, [r9+ymm5*8], ymm2
        assert_eq!(
            both(&|a| a.gather(3, R9, 5, 2)),
            (
                vec![0x62, 0xd2, 0xfd, 0x4a, 0x93, 0x9c, 0xe9, 0, 0, 0, 0],
                vec![0xc4, 0xc2, 0xed, 0x93, 0x9c, 0xe9, 0, 0, 0, 0]
            )
        );
        // vgatherqpd zmm12{k1}, [rbx+zmm14*8] / vgatherqpd ymm12, [rbx+ymm14*8], ymm1
        assert_eq!(
            both(&|a| a.gather(12, RBX, 14, 1)),
            (
                vec![0x62, 0x32, 0xfd, 0x49, 0x93, 0xa4, 0xf3, 0, 0, 0, 0],
                vec![0xc4, 0x22, 0xf5, 0x93, 0xa4, 0xf3, 0, 0, 0, 0]
            )
        );
        // vgatherqpd zmm17{k7}, [r15+zmm26*8]
        assert_eq!(
            enc(|a| a.gather(17, R15, 26, 7)),
            [0x62, 0x82, 0xfd, 0x47, 0x93, 0x8c, 0xd7, 0, 0, 0, 0]
        );
        // vpcmpnltuq k3, zmm20, [rdi+0x18]{1to8}
        assert_eq!(
            enc(|a| a.evex(
                op::VPCMPUQ,
                3,
                Some(20),
                Rm::Mem {
                    mem: Mem::at(RDI, 0x18),
                    bcst: true
                },
                0,
                Some(5)
            )),
            [0x62, 0xf3, 0xdd, 0x50, 0x1e, 0x9f, 0x18, 0, 0, 0, 0x05]
        );
        // kortestw k3, k3 ; kxnorw k6, k6, k6
        assert_eq!(
            enc(|a| {
                a.kortest(3, 3);
                a.kones(6);
            }),
            [0xc4, 0xe1, 0x78, 0x98, 0xdb, 0xc4, 0xe1, 0x4c, 0x46, 0xf6]
        );
        // vtestpd ymm11, ymm11 ; vtestpd ymm2, ymm9
        assert_eq!(
            vex(|a| {
                a.vector(op::VTESTPD, 11, None, Rm::Reg(11), 0, None);
                a.vector(op::VTESTPD, 2, None, Rm::Reg(9), 0, None);
            }),
            [0xc4, 0x42, 0x7d, 0x0f, 0xdb, 0xc4, 0xc2, 0x7d, 0x0f, 0xd1]
        );
    }
}
