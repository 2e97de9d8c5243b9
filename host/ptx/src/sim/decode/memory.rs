//! The memory instructions: `ld`, `st`, `atom` and `red` (global and shared memory,
//! parameters).

use super::{Mods, Res, compatible, count};
use crate::sim::ops::{AtomOp, DISCARD, Kind, Op, R};
use crate::sim::parse::{AddrBase, Builder, Operand};

/// The state space of a memory instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Space {
    /// `.global`, or generic (which the simulator takes as global).
    Global,
    /// `.shared` (`.shared::cta`).
    Shared,
    /// `.param`.
    Param,
}

impl<'s> Builder<'s> {
    /// The state space of a memory instruction.
    pub(super) fn space(m: &mut Mods<'s>) -> Res<Space> {
        m.ignore_ordering();
        if let Some(s) = m.take_one(&["local", "const", "tex", "shared::cluster"]) {
            return Err(format!(
                "`{}`: the .{s} state space is not simulated (global and shared memory only)",
                m.opcode
            ));
        }
        if m.rest
            .iter()
            .any(|r| r.starts_with('v') && r[1..].parse::<u32>().is_ok())
        {
            return Err(format!("`{}`: vector accesses are not simulated", m.opcode));
        }
        let param = m.take("param");
        let shared = m.take("shared") || m.take("shared::cta");
        let global = m.take("global");
        Ok(match (param, shared, global) {
            (false, false, _) => Space::Global,
            (false, true, false) => Space::Shared,
            (true, false, false) => Space::Param,
            _ => return Err(format!("`{}`: two state spaces", m.opcode)),
        })
    }

    /// A shared address operand: its base slot (a 32- or 64-bit integer register, or a
    /// shared array) and offset. (`ptxas` refuses immediate addresses here.)
    fn shared_addr(&mut self, o: &Operand<'s>) -> Res<(R, i32)> {
        let Operand::Addr { base, off } = *o else {
            return Err("expected an address `[...]`".to_string());
        };
        let off = i32::try_from(off).map_err(|_| format!("the offset {off} is too large"))?;
        match base {
            AddrBase::Imm(_) => {
                Err("an immediate shared address (only `.local` takes them)".into())
            }
            AddrBase::Sym(name) => {
                if let Some(r) = self.regs.get(name) {
                    if !r.ty.is_int() || r.ty.bits < 32 {
                        return Err(format!(
                            "`{name}` (.{}) is not a 32- or 64-bit address",
                            r.ty.name()
                        ));
                    }
                    return Ok((r.slot, off));
                }
                match self.shared_slot(name)? {
                    Some(slot) => Ok((slot, off)),
                    None => Err(format!("unknown register or shared array `{name}`")),
                }
            }
        }
    }

    /// The address operand of an access to `space` (not `.param`).
    fn space_addr(&mut self, space: Space, o: &Operand<'s>) -> Res<(R, i32)> {
        match space {
            Space::Shared => self.shared_addr(o),
            _ => self.addr(o),
        }
    }

    pub(super) fn load(&mut self, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        let space = Self::space(m)?;
        let ty = m.ty()?;
        if ty.kind == Kind::Pred {
            return Err(format!("`{opcode}`: predicates are not in memory"));
        }
        count(ops, 2, opcode)?;
        let (d, reg_bits) = self.dst_wide(&ops[0], ty)?;
        if space == Space::Shared {
            let (a, off) = self.shared_addr(&ops[1])?;
            let sext = if ty.kind == Kind::S && reg_bits > ty.bits {
                reg_bits
            } else {
                0
            };
            return Ok(Op::LdShared {
                d,
                a,
                off,
                bytes: ty.bits / 8,
                sext,
            });
        }
        if space == Space::Param {
            let Operand::Addr {
                base: AddrBase::Sym(name),
                off: 0,
            } = ops[1]
            else {
                return Err(format!("`{opcode}` takes `[PARAMETER]`"));
            };
            let &(a, _) = self
                .params
                .get(name)
                .ok_or_else(|| format!("unknown parameter `{name}`"))?;
            return Ok(if ty.bits == 64 {
                Op::Mov { d, a }
            } else if ty.kind == Kind::S && reg_bits > ty.bits {
                Op::Extend {
                    d,
                    a,
                    from: ty.bits,
                    to: reg_bits,
                }
            } else {
                Op::And {
                    d,
                    a,
                    b: self.konst(ty.mask())?,
                }
            });
        }
        let (a, off) = self.addr(&ops[1])?;
        Ok(match ty.bits {
            b if ty.kind == Kind::S && reg_bits > b => Op::LdSext {
                d,
                a,
                off,
                bytes: b / 8,
                to: reg_bits,
            },
            8 => Op::Ld8 { d, a, off },
            16 => Op::Ld16 { d, a, off },
            32 => Op::Ld32 { d, a, off },
            _ => Op::Ld64 { d, a, off },
        })
    }

    pub(super) fn store(&mut self, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        let space = Self::space(m)?;
        if space == Space::Param {
            return Err(format!("`{opcode}`: parameters are read-only"));
        }
        let ty = m.ty()?;
        if ty.kind == Kind::Pred {
            return Err(format!("`{opcode}`: predicates are not in memory"));
        }
        count(ops, 2, opcode)?;
        let (a, off) = self.space_addr(space, &ops[0])?;
        let v = match ops[1] {
            Operand::Sym(name) => {
                let r = self.reg_named(name)?;
                let fits = if r.ty.kind == Kind::F || ty.kind == Kind::F {
                    compatible(r.ty, ty)
                } else {
                    r.ty.kind != Kind::Pred && r.ty.bits >= ty.bits
                };
                if !fits {
                    return Err(format!(
                        "`{name}` (.{}) cannot be stored as .{}",
                        r.ty.name(),
                        ty.name()
                    ));
                }
                r.slot
            }
            ref o => self.src(o, ty)?,
        };
        if space == Space::Shared {
            return Ok(Op::StShared {
                a,
                off,
                v,
                bytes: ty.bits / 8,
            });
        }
        Ok(match ty.bits {
            8 => Op::St8 { a, off, v },
            16 => Op::St16 { a, off, v },
            32 => Op::St32 { a, off, v },
            _ => Op::St64 { a, off, v },
        })
    }

    pub(super) fn atom(&mut self, red: bool, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        let space = Self::space(m)?;
        if space == Space::Param {
            return Err(format!("`{opcode}`: parameters are read-only"));
        }
        const OPS: &[&str] = &[
            "cas", "exch", "add", "min", "max", "and", "or", "xor", "inc", "dec",
        ];
        let Some(name) = m.take_one(OPS) else {
            return Err(format!("`{opcode}`: a missing or unsupported operation"));
        };
        let ty = m.ty()?;
        let op = match name {
            "cas" => AtomOp::Cas,
            "exch" => AtomOp::Exch,
            "add" => AtomOp::Add,
            "min" => AtomOp::Min,
            "max" => AtomOp::Max,
            "and" => AtomOp::And,
            "or" => AtomOp::Or,
            "xor" => AtomOp::Xor,
            "inc" => AtomOp::Inc,
            _ => AtomOp::Dec,
        };
        let ok = match op {
            AtomOp::Cas | AtomOp::Exch | AtomOp::And | AtomOp::Or | AtomOp::Xor => {
                ty.kind != Kind::F || op == AtomOp::Exch
            }
            AtomOp::Add => true,
            AtomOp::Min | AtomOp::Max => matches!(ty.kind, Kind::U | Kind::S),
            AtomOp::Inc | AtomOp::Dec => ty.kind == Kind::U && ty.bits == 32,
        };
        if !ok || !matches!(ty.bits, 32 | 64) || ty.kind == Kind::Pred || (red && op == AtomOp::Cas)
        {
            return Err(format!("`{opcode}`: an unsupported operation or type"));
        }
        let n = if red {
            2
        } else if op == AtomOp::Cas {
            4
        } else {
            3
        };
        count(ops, n, opcode)?;
        let first = usize::from(!red);
        let (a, off) = self.space_addr(space, &ops[first])?;
        let b = self.src(&ops[first + 1], ty)?;
        let c = if op == AtomOp::Cas {
            self.src(&ops[3], ty)?
        } else {
            b
        };
        let d = if red { DISCARD } else { self.dst(&ops[0], ty)? };
        if space == Space::Shared {
            return Ok(Op::AtomShared {
                op,
                ty,
                d,
                a,
                off,
                b,
                c,
            });
        }
        Ok(Op::Atom {
            op,
            ty,
            d,
            a,
            off,
            b,
            c,
        })
    }
}
