//! The decoded instructions the executor runs ([`Op`]) and the types, comparisons and
//! rounding modes they carry.
//!
//! Every register is a slot of a thread's register file (`u64`s); so are the special
//! registers, the entry's parameters and every immediate operand (a constant slot the decoder
//! fills once), so an operand is always a slot index. A register of `n` bits holds its value
//! zero-extended from `n` bits (a predicate holds 0 or 1): each operation writes its result
//! masked to its width, and reads a signed operand by sign-extending it from its width.

/// A slot of the register file.
pub(crate) type R = u32;

/// The slot a reduction (`red`) writes its (discarded) old value to: never read.
pub(crate) const DISCARD: R = u32::MAX;

/// The class of a PTX type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `.uN`.
    U,
    /// `.sN`.
    S,
    /// `.bN`.
    B,
    /// `.fN`.
    F,
    /// `.pred`.
    Pred,
}

/// A PTX scalar type: its class and width in bits (1 for a predicate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ty {
    /// The class.
    pub kind: Kind,
    /// The width in bits.
    pub bits: u8,
}

impl Ty {
    /// The type a modifier names (`u32`, `f64`, `pred`...), if it names one we simulate.
    pub(crate) fn parse(s: &str) -> Option<Ty> {
        let (kind, bits) = match s {
            "pred" => return Some(Ty::PRED),
            _ => (s.get(..1)?, s.get(1..)?),
        };
        let kind = match kind {
            "u" => Kind::U,
            "s" => Kind::S,
            "b" => Kind::B,
            "f" => Kind::F,
            _ => return None,
        };
        let bits: u8 = match (kind, bits) {
            (Kind::F, "32" | "64") => bits.parse().ok()?,
            (Kind::F, _) => return None,
            (_, "8" | "16" | "32" | "64") => bits.parse().ok()?,
            _ => return None,
        };
        Some(Ty { kind, bits })
    }

    /// The predicate type.
    pub(crate) const PRED: Ty = Ty {
        kind: Kind::Pred,
        bits: 1,
    };

    /// The 32-bit unsigned type (special registers, shift amounts).
    pub(crate) const U32: Ty = Ty {
        kind: Kind::U,
        bits: 32,
    };

    /// The mask of the type's bits.
    pub(crate) fn mask(self) -> u64 {
        super::scalar::mask(u32::from(self.bits))
    }

    /// Whether it is an integer type (`.u`, `.s` or `.b`).
    pub(crate) fn is_int(self) -> bool {
        matches!(self.kind, Kind::U | Kind::S | Kind::B)
    }

    /// Its name, as a modifier spells it.
    pub(crate) fn name(self) -> String {
        match self.kind {
            Kind::Pred => "pred".to_string(),
            Kind::U => format!("u{}", self.bits),
            Kind::S => format!("s{}", self.bits),
            Kind::B => format!("b{}", self.bits),
            Kind::F => format!("f{}", self.bits),
        }
    }
}

/// A comparison of `setp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

/// A rounding mode: of floats (`.rn`...), or to an integral value (`.rni`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// To nearest, ties to even.
    Nearest,
    /// Toward zero.
    Zero,
    /// Toward negative infinity.
    Down,
    /// Toward positive infinity.
    Up,
}

/// A generic integer operation of two operands (the rarer forms and widths).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntOp {
    Add,
    Sub,
    AddSat,
    SubSat,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
}

/// A generic integer operation of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntUn {
    Neg,
    Abs,
}

/// The operation of an `atom` or `red`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomOp {
    Cas,
    Exch,
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
    Inc,
    Dec,
}

/// A bit operation of one operand (`clz`, `popc`, `brev`, `bfind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BitOp {
    /// Leading zeros (the width for 0).
    Clz,
    /// Set bits.
    Popc,
    /// The bits reversed.
    Brev,
    /// The most significant 1 bit's position (of a signed value: the most significant bit
    /// that differs from the sign); all ones when there is none. With `shift`, its distance
    /// from the top bit instead (`.shiftamt`).
    Bfind { signed: bool, shift: bool },
}

/// A float-to-float conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FConv {
    /// `cvt.f64.f32`: exact.
    F32ToF64,
    /// `cvt.rX.f32.f64`.
    F64ToF32(Round),
    /// `cvt.rXi.f32.f32`: to an integral value.
    F32Int(Round),
    /// `cvt.rXi.f64.f64`: to an integral value.
    F64Int(Round),
}

/// One decoded instruction. `d` is the destination slot; `a`, `b`, `c` the sources; `off`
/// an address's byte offset.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Op {
    Nop,
    Ret,
    /// `bar.sync 0`: the thread waits for the rest of its block.
    Bar,
    Bra {
        target: u32,
    },
    BraIf {
        p: R,
        target: u32,
    },
    BraIfNot {
        p: R,
        target: u32,
    },
    /// A guard `@p`: skips the next instruction unless `p`.
    SkipUnless {
        p: R,
    },
    /// A guard `@!p`: skips the next instruction if `p`.
    SkipIf {
        p: R,
    },
    Mov {
        d: R,
        a: R,
    },
    And {
        d: R,
        a: R,
        b: R,
    },
    Or {
        d: R,
        a: R,
        b: R,
    },
    Xor {
        d: R,
        a: R,
        b: R,
    },
    /// Sign-extends `a` from `from` bits, keeping `to` bits.
    Extend {
        d: R,
        a: R,
        from: u8,
        to: u8,
    },
    Add32 {
        d: R,
        a: R,
        b: R,
    },
    Add64 {
        d: R,
        a: R,
        b: R,
    },
    Sub32 {
        d: R,
        a: R,
        b: R,
    },
    Sub64 {
        d: R,
        a: R,
        b: R,
    },
    MulLo32 {
        d: R,
        a: R,
        b: R,
    },
    MulLo64 {
        d: R,
        a: R,
        b: R,
    },
    MadLo32 {
        d: R,
        a: R,
        b: R,
        c: R,
    },
    MadLo64 {
        d: R,
        a: R,
        b: R,
        c: R,
    },
    MulWideU32 {
        d: R,
        a: R,
        b: R,
    },
    MulWideS32 {
        d: R,
        a: R,
        b: R,
    },
    DivU64 {
        d: R,
        a: R,
        b: R,
    },
    RemU64 {
        d: R,
        a: R,
        b: R,
    },
    Int {
        op: IntOp,
        ty: Ty,
        d: R,
        a: R,
        b: R,
    },
    /// `mad.{lo,hi,wide}`: `op` is the multiplication.
    Mad {
        op: IntOp,
        ty: Ty,
        d: R,
        a: R,
        b: R,
        c: R,
    },
    IntUn {
        op: IntUn,
        ty: Ty,
        d: R,
        a: R,
    },
    /// A bit operation on the low `bits` bits of `a`.
    Bits {
        op: BitOp,
        bits: u8,
        d: R,
        a: R,
    },
    Shl {
        bits: u8,
        d: R,
        a: R,
        b: R,
    },
    ShrU {
        bits: u8,
        d: R,
        a: R,
        b: R,
    },
    ShrS {
        bits: u8,
        d: R,
        a: R,
        b: R,
    },
    AddF32 {
        d: R,
        a: R,
        b: R,
    },
    SubF32 {
        d: R,
        a: R,
        b: R,
    },
    MulF32 {
        d: R,
        a: R,
        b: R,
    },
    DivF32 {
        d: R,
        a: R,
        b: R,
    },
    FmaF32 {
        d: R,
        a: R,
        b: R,
        c: R,
    },
    SqrtF32 {
        d: R,
        a: R,
    },
    MinF32 {
        d: R,
        a: R,
        b: R,
    },
    MaxF32 {
        d: R,
        a: R,
        b: R,
    },
    AddF64 {
        d: R,
        a: R,
        b: R,
    },
    SubF64 {
        d: R,
        a: R,
        b: R,
    },
    MulF64 {
        d: R,
        a: R,
        b: R,
    },
    DivF64 {
        d: R,
        a: R,
        b: R,
    },
    FmaF64 {
        d: R,
        a: R,
        b: R,
        c: R,
    },
    SqrtF64 {
        d: R,
        a: R,
    },
    MinF64 {
        d: R,
        a: R,
        b: R,
    },
    MaxF64 {
        d: R,
        a: R,
        b: R,
    },
    SetpU {
        cc: Cmp,
        d: R,
        a: R,
        b: R,
    },
    SetpS {
        cc: Cmp,
        bits: u8,
        d: R,
        a: R,
        b: R,
    },
    SetpF32 {
        cc: Cmp,
        d: R,
        a: R,
        b: R,
    },
    SetpF64 {
        cc: Cmp,
        d: R,
        a: R,
        b: R,
    },
    /// `d = c ? a : b`.
    Selp {
        d: R,
        a: R,
        b: R,
        c: R,
    },
    /// Integer to integer, saturating.
    CvtSat {
        d: R,
        a: R,
        from: Ty,
        to: Ty,
    },
    F2I {
        d: R,
        a: R,
        from64: bool,
        round: Round,
        to: Ty,
    },
    I2F {
        d: R,
        a: R,
        from: Ty,
        round: Round,
        to64: bool,
    },
    F2F {
        d: R,
        a: R,
        conv: FConv,
    },
    Ld8 {
        d: R,
        a: R,
        off: i32,
    },
    Ld16 {
        d: R,
        a: R,
        off: i32,
    },
    Ld32 {
        d: R,
        a: R,
        off: i32,
    },
    Ld64 {
        d: R,
        a: R,
        off: i32,
    },
    /// A signed load of `bytes` bytes into a register of `to` bits.
    LdSext {
        d: R,
        a: R,
        off: i32,
        bytes: u8,
        to: u8,
    },
    St8 {
        a: R,
        off: i32,
        v: R,
    },
    St16 {
        a: R,
        off: i32,
        v: R,
    },
    St32 {
        a: R,
        off: i32,
        v: R,
    },
    St64 {
        a: R,
        off: i32,
        v: R,
    },
    /// A load of `bytes` bytes from the block's shared memory; sign-extended into a
    /// register of `sext` bits unless `sext` is 0.
    LdShared {
        d: R,
        a: R,
        off: i32,
        bytes: u8,
        sext: u8,
    },
    /// A store of the low `bytes` bytes of `v` to the block's shared memory.
    StShared {
        a: R,
        off: i32,
        v: R,
        bytes: u8,
    },
    /// [`Op::Atom`] on the block's shared memory.
    AtomShared {
        op: AtomOp,
        ty: Ty,
        d: R,
        a: R,
        off: i32,
        b: R,
        c: R,
    },
    /// `d = atom(op) [a + off], b (, c)`; `d` is [`DISCARD`] for `red`.
    Atom {
        op: AtomOp,
        ty: Ty,
        d: R,
        a: R,
        off: i32,
        b: R,
        c: R,
    },
}
