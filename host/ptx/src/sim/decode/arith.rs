//! The arithmetic instructions: integer and float arithmetic, comparisons, conversions.

use super::{Mods, Res, count};
use crate::sim::ops::{Cmp, FConv, IntOp, IntUn, Kind, Op, Round, Ty};
use crate::sim::parse::{Builder, Operand};

impl<'s> Builder<'s> {
    /// Float arithmetic: round to nearest only, no `.ftz`.
    pub(super) fn float(
        &mut self,
        base: &str,
        m: &mut Mods<'s>,
        ty: Ty,
        ops: &[Operand<'s>],
    ) -> Res<Op> {
        let opcode = m.opcode;
        let rn = m.take("rn");
        let rounded = matches!(base, "add" | "sub" | "mul" | "mad" | "fma" | "div" | "sqrt");
        if matches!(base, "mad" | "fma" | "div" | "sqrt") && !rn {
            return Err(format!("`{opcode}`: only the `.rn` form is simulated"));
        }
        if rn && !rounded {
            return Err(format!("unsupported modifier `.rn` in `{opcode}`"));
        }
        let f64 = ty.bits == 64;
        match base {
            "neg" | "abs" | "sqrt" => {
                count(ops, 2, opcode)?;
                let a = self.src(&ops[1], ty)?;
                let d = self.dst(&ops[0], ty)?;
                let sign = if f64 { 1u64 << 63 } else { 1u64 << 31 };
                Ok(match base {
                    "neg" => Op::Xor {
                        d,
                        a,
                        b: self.konst(sign)?,
                    },
                    "abs" => Op::And {
                        d,
                        a,
                        b: self.konst(!sign & ty.mask())?,
                    },
                    _ if f64 => Op::SqrtF64 { d, a },
                    _ => Op::SqrtF32 { d, a },
                })
            }
            "mad" | "fma" => {
                count(ops, 4, opcode)?;
                let (d, a, b) = self.three(ops, ty)?;
                let c = self.src(&ops[3], ty)?;
                Ok(if f64 {
                    Op::FmaF64 { d, a, b, c }
                } else {
                    Op::FmaF32 { d, a, b, c }
                })
            }
            _ => {
                count(ops, 3, opcode)?;
                let (d, a, b) = self.three(ops, ty)?;
                Ok(match (base, f64) {
                    ("add", false) => Op::AddF32 { d, a, b },
                    ("sub", false) => Op::SubF32 { d, a, b },
                    ("mul", false) => Op::MulF32 { d, a, b },
                    ("div", false) => Op::DivF32 { d, a, b },
                    ("min", false) => Op::MinF32 { d, a, b },
                    ("max", false) => Op::MaxF32 { d, a, b },
                    ("add", true) => Op::AddF64 { d, a, b },
                    ("sub", true) => Op::SubF64 { d, a, b },
                    ("mul", true) => Op::MulF64 { d, a, b },
                    ("div", true) => Op::DivF64 { d, a, b },
                    ("min", true) => Op::MinF64 { d, a, b },
                    ("max", true) => Op::MaxF64 { d, a, b },
                    _ => return Err(format!("`{opcode}`: an unsupported type")),
                })
            }
        }
    }

    /// Integer arithmetic.
    pub(super) fn int(
        &mut self,
        base: &str,
        m: &mut Mods<'s>,
        ty: Ty,
        ops: &[Operand<'s>],
    ) -> Res<Op> {
        let opcode = m.opcode;
        let bits = ty.bits;
        if bits == 8 {
            return Err(format!("`{opcode}`: 8-bit arithmetic does not exist"));
        }
        let width = m.take_one(&["lo", "hi", "wide"]);
        let sat = m.take("sat");
        let mul = match width {
            Some("lo") => IntOp::MulLo,
            Some("hi") => IntOp::MulHi,
            Some(_) if bits == 64 => return Err(format!("`{opcode}`: no 128-bit results")),
            Some(_) => IntOp::MulWide,
            None if matches!(base, "mul" | "mad") => {
                return Err(format!("`{opcode}` needs `.lo`, `.hi` or `.wide`"));
            }
            None => IntOp::MulLo,
        };
        if width.is_some() && !matches!(base, "mul" | "mad") {
            return Err(format!("unsupported modifier in `{opcode}`"));
        }
        if sat && !(matches!(base, "add" | "sub") && ty.kind == Kind::S && bits == 32) {
            return Err(format!("unsupported modifier `.sat` in `{opcode}`"));
        }
        let wide = Ty {
            bits: bits * 2,
            ..ty
        };
        let out = if mul == IntOp::MulWide { wide } else { ty };
        match base {
            "neg" | "abs" => {
                if ty.kind != Kind::S {
                    return Err(format!("`{opcode}` takes a signed type"));
                }
                count(ops, 2, opcode)?;
                let a = self.src(&ops[1], ty)?;
                let op = if base == "neg" {
                    IntUn::Neg
                } else {
                    IntUn::Abs
                };
                Ok(Op::IntUn {
                    op,
                    ty,
                    d: self.dst(&ops[0], ty)?,
                    a,
                })
            }
            "mad" => {
                count(ops, 4, opcode)?;
                let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
                let (c, d) = (self.src(&ops[3], out)?, self.dst(&ops[0], out)?);
                Ok(match (mul, bits) {
                    (IntOp::MulLo, 32) => Op::MadLo32 { d, a, b, c },
                    (IntOp::MulLo, 64) => Op::MadLo64 { d, a, b, c },
                    _ => Op::Mad {
                        op: mul,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                })
            }
            "sqrt" | "fma" => Err(format!("`{opcode}`: an unsupported type")),
            _ => {
                count(ops, 3, opcode)?;
                let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
                let d = self.dst(&ops[0], out)?;
                let signed = ty.kind == Kind::S;
                let op = match base {
                    "add" if sat => IntOp::AddSat,
                    "sub" if sat => IntOp::SubSat,
                    "add" => IntOp::Add,
                    "sub" => IntOp::Sub,
                    "mul" => mul,
                    "div" => IntOp::Div,
                    "rem" => IntOp::Rem,
                    "min" => IntOp::Min,
                    _ => IntOp::Max,
                };
                Ok(match (op, bits, signed) {
                    (IntOp::Add, 32, _) => Op::Add32 { d, a, b },
                    (IntOp::Add, 64, _) => Op::Add64 { d, a, b },
                    (IntOp::Sub, 32, _) => Op::Sub32 { d, a, b },
                    (IntOp::Sub, 64, _) => Op::Sub64 { d, a, b },
                    (IntOp::MulLo, 32, _) => Op::MulLo32 { d, a, b },
                    (IntOp::MulLo, 64, _) => Op::MulLo64 { d, a, b },
                    (IntOp::MulWide, 32, false) => Op::MulWideU32 { d, a, b },
                    (IntOp::MulWide, 32, true) => Op::MulWideS32 { d, a, b },
                    (IntOp::Div, 64, false) => Op::DivU64 { d, a, b },
                    (IntOp::Rem, 64, false) => Op::RemU64 { d, a, b },
                    _ => Op::Int { op, ty, d, a, b },
                })
            }
        }
    }

    pub(super) fn setp(&mut self, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        const CMPS: &[&str] = &[
            "eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu",
            "gtu", "geu", "num", "nan",
        ];
        let Some(cc) = m.take_one(CMPS) else {
            return Err(format!("`{opcode}`: a missing comparison"));
        };
        if let Some(b) = m.take_one(&["and", "or", "xor"]) {
            return Err(format!(
                "`{opcode}`: the combining `.{b}` form is not simulated"
            ));
        }
        let ty = m.ty()?;
        count(ops, 3, opcode)?;
        let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
        let d = self.dst(&ops[0], Ty::PRED)?;
        let unsigned = matches!(cc, "lo" | "ls" | "hi" | "hs");
        let cmp = match cc {
            "eq" => Cmp::Eq,
            "ne" => Cmp::Ne,
            "lt" | "lo" => Cmp::Lt,
            "le" | "ls" => Cmp::Le,
            "gt" | "hi" => Cmp::Gt,
            "ge" | "hs" => Cmp::Ge,
            "equ" => Cmp::Equ,
            "neu" => Cmp::Neu,
            "ltu" => Cmp::Ltu,
            "leu" => Cmp::Leu,
            "gtu" => Cmp::Gtu,
            "geu" => Cmp::Geu,
            "num" => Cmp::Num,
            _ => Cmp::Nan,
        };
        let bad = || {
            Err(format!(
                "`{opcode}`: `.{cc}` does not apply to .{}",
                ty.name()
            ))
        };
        match ty.kind {
            Kind::F if unsigned => bad(),
            Kind::F if ty.bits == 64 => Ok(Op::SetpF64 { cc: cmp, d, a, b }),
            Kind::F => Ok(Op::SetpF32 { cc: cmp, d, a, b }),
            Kind::Pred => bad(),
            _ if matches!(cmp, Cmp::Eq | Cmp::Ne) => Ok(Op::SetpU { cc: cmp, d, a, b }),
            Kind::B => bad(),
            _ if !matches!(cmp, Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge) => bad(),
            Kind::S if !unsigned => Ok(Op::SetpS {
                cc: cmp,
                bits: ty.bits,
                d,
                a,
                b,
            }),
            _ => Ok(Op::SetpU { cc: cmp, d, a, b }),
        }
    }

    pub(super) fn cvt(&mut self, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        let round = m.take_one(&["rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"]);
        let sat = m.take("sat");
        let (to, from) = match m.types().as_slice() {
            [to, from] if to.kind != Kind::Pred && from.kind != Kind::Pred => (*to, *from),
            _ => return Err(format!("`{opcode}`: expected two supported types")),
        };
        count(ops, 2, opcode)?;
        let a = self.src(&ops[1], from)?;
        let d = self.dst(&ops[0], to)?;
        let (float_round, int_round) = match round {
            Some("rn") => (Some(Round::Nearest), None),
            Some("rz") => (Some(Round::Zero), None),
            Some("rm") => (Some(Round::Down), None),
            Some("rp") => (Some(Round::Up), None),
            Some("rni") => (None, Some(Round::Nearest)),
            Some("rzi") => (None, Some(Round::Zero)),
            Some("rmi") => (None, Some(Round::Down)),
            Some("rpi") => (None, Some(Round::Up)),
            _ => (None, None),
        };
        let bad = |what: &str| Err(format!("`{opcode}`: {what}"));
        let (fi, ti) = (from.is_int(), to.is_int());
        match (fi, ti) {
            (true, true) => {
                if round.is_some() {
                    return bad("an integer conversion takes no rounding");
                }
                if sat {
                    return Ok(Op::CvtSat { d, a, from, to });
                }
                Ok(if to.bits <= from.bits {
                    if to.bits == 64 {
                        Op::Mov { d, a }
                    } else {
                        Op::And {
                            d,
                            a,
                            b: self.konst(to.mask())?,
                        }
                    }
                } else if from.kind == Kind::S {
                    Op::Extend {
                        d,
                        a,
                        from: from.bits,
                        to: to.bits,
                    }
                } else {
                    Op::Mov { d, a }
                })
            }
            (false, true) => {
                let Some(round) = int_round else {
                    return bad(
                        "a float-to-integer conversion needs `.rni`, `.rzi`, `.rmi` or `.rpi`",
                    );
                };
                Ok(Op::F2I {
                    d,
                    a,
                    from64: from.bits == 64,
                    round,
                    to,
                })
            }
            (true, false) => match float_round {
                Some(round) if !sat => Ok(Op::I2F {
                    d,
                    a,
                    from,
                    round,
                    to64: to.bits == 64,
                }),
                _ => bad("an integer-to-float conversion needs `.rn`, `.rz`, `.rm` or `.rp`"),
            },
            (false, false) => {
                if sat {
                    return bad("`.sat` to a float is not simulated");
                }
                let conv = match (from.bits, to.bits, float_round, int_round) {
                    (32, 64, None, None) => FConv::F32ToF64,
                    (64, 32, Some(r), None) => FConv::F64ToF32(r),
                    (32, 32, None, Some(r)) => FConv::F32Int(r),
                    (64, 64, None, Some(r)) => FConv::F64Int(r),
                    _ => return bad("an unsupported rounding for this conversion"),
                };
                Ok(Op::F2F { d, a, conv })
            }
        }
    }
}
