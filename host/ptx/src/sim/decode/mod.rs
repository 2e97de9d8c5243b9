//! One PTX instruction (opcode, modifiers, operands) into one [`Op`], its operands checked
//! against their types the way `ptxas` checks them (same width; integer types interchange, so
//! do float types; a `.b` type fits either), its immediates turned into constant slots.

mod arith;
mod memory;

use super::ops::{BitOp, Kind, Op, R, Ty};
use super::parse::{AddrBase, Builder, Operand, Reg, parse_int};

type Res<T = ()> = Result<T, String>;

/// An opcode's modifiers, consumed as the decoder recognizes them.
struct Mods<'s> {
    opcode: &'s str,
    rest: Vec<&'s str>,
}

impl<'s> Mods<'s> {
    fn take(&mut self, m: &str) -> bool {
        match self.rest.iter().position(|r| *r == m) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    fn take_one(&mut self, set: &[&str]) -> Option<&'s str> {
        let i = self.rest.iter().position(|r| set.contains(r))?;
        Some(self.rest.remove(i))
    }

    /// Drops the modifiers that do not change a sequential simulation (memory ordering,
    /// scopes, cache hints).
    fn ignore_ordering(&mut self) {
        const IGNORED: &[&str] = &[
            "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "weak", "cta", "gpu",
            "sys", "cluster", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "L2::64B",
            "L2::128B", "L2::256B",
        ];
        self.rest.retain(|r| !IGNORED.contains(r));
    }

    /// The type modifiers, in order (removed).
    fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        self.rest.retain(|r| match Ty::parse(r) {
            Some(t) => {
                out.push(t);
                false
            }
            None => true,
        });
        out
    }

    /// The one type modifier.
    fn ty(&mut self) -> Res<Ty> {
        match self.types().as_slice() {
            [t] => Ok(*t),
            [] => Err(format!("`{}`: a missing or unsupported type", self.opcode)),
            _ => Err(format!("`{}`: too many types", self.opcode)),
        }
    }

    /// Refuses the modifiers left.
    fn finish(&self) -> Res {
        match self.rest.first() {
            None => Ok(()),
            Some(m) => Err(format!("unsupported modifier `.{m}` in `{}`", self.opcode)),
        }
    }
}

/// Whether a register of type `reg` may stand where the instruction reads or writes `ty`.
fn compatible(reg: Ty, ty: Ty) -> bool {
    if reg.kind == Kind::Pred || ty.kind == Kind::Pred {
        return reg.kind == ty.kind;
    }
    reg.bits == ty.bits
        && (reg.kind == Kind::B
            || ty.kind == Kind::B
            || (reg.kind == Kind::F) == (ty.kind == Kind::F))
}

fn count(ops: &[Operand<'_>], n: usize, opcode: &str) -> Res {
    if ops.len() == n {
        Ok(())
    } else {
        Err(format!(
            "`{opcode}` takes {n} operands, found {}",
            ops.len()
        ))
    }
}

/// The bits of an immediate of type `ty`.
fn imm_bits(neg: bool, text: &str, ty: Ty) -> Res<u64> {
    let bad = || {
        format!(
            "a malformed {} immediate `{}{text}`",
            ty.name(),
            if neg { "-" } else { "" }
        )
    };
    let hex = |h: &str, n: usize| {
        (h.len() == n)
            .then(|| u64::from_str_radix(h, 16).ok())
            .flatten()
    };
    if ty.kind == Kind::F {
        let v: f64 = if let Some(h) = text.strip_prefix("0f").or(text.strip_prefix("0F")) {
            let bits = hex(h, 8).ok_or_else(bad)?;
            if ty.bits == 32 {
                return Ok(if neg { bits ^ (1 << 31) } else { bits });
            }
            f64::from(f32::from_bits(bits as u32))
        } else if let Some(h) = text.strip_prefix("0d").or(text.strip_prefix("0D")) {
            let bits = hex(h, 16).ok_or_else(bad)?;
            if ty.bits == 64 {
                let bits = if neg { bits ^ (1 << 63) } else { bits };
                return Ok(bits);
            }
            f64::from_bits(bits)
        } else if let Some(i) = parse_int(text) {
            i as f64
        } else {
            text.parse::<f64>().map_err(|_| bad())?
        };
        let v = if neg { -v } else { v };
        return Ok(if ty.bits == 32 {
            u64::from((v as f32).to_bits())
        } else {
            v.to_bits()
        });
    }
    let magnitude = parse_int(text).ok_or_else(bad)?;
    let v = if neg {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    let bits = u32::from(ty.bits);
    if v < -(1i128 << (bits.max(2) - 1)) || v >= (1i128 << bits) {
        return Err(format!(
            "the immediate `{}{text}` does not fit `.{}`",
            if neg { "-" } else { "" },
            ty.name()
        ));
    }
    Ok((v as u64) & ty.mask())
}

impl<'s> Builder<'s> {
    fn reg_named(&self, name: &str) -> Res<Reg> {
        self.regs
            .get(name)
            .copied()
            .ok_or_else(|| format!("unknown register `{name}`"))
    }

    /// A source operand of type `ty`: a register or an immediate.
    fn src(&mut self, o: &Operand<'_>, ty: Ty) -> Res<R> {
        match *o {
            Operand::Sym(name) => {
                let r = self.reg_named(name)?;
                if !compatible(r.ty, ty) {
                    return Err(format!(
                        "`{name}` (.{}) where a .{} operand is expected",
                        r.ty.name(),
                        ty.name()
                    ));
                }
                Ok(r.slot)
            }
            Operand::Imm { neg, text } => {
                let bits = imm_bits(neg, text, ty)?;
                if ty.kind == Kind::Pred && bits > 1 {
                    return Err(format!("a predicate immediate `{text}`"));
                }
                self.konst(bits)
            }
            Operand::Addr { .. } => Err("an address where a value is expected".to_string()),
        }
    }

    /// A register the instruction writes, of type `ty`.
    fn dst(&mut self, o: &Operand<'_>, ty: Ty) -> Res<R> {
        let Operand::Sym(name) = *o else {
            return Err("a destination that is not a register".to_string());
        };
        let r = self.reg_named(name)?;
        if !r.writable {
            return Err(format!("`{name}` is read-only"));
        }
        if !compatible(r.ty, ty) {
            return Err(format!(
                "`{name}` (.{}) where a .{} destination is expected",
                r.ty.name(),
                ty.name()
            ));
        }
        Ok(r.slot)
    }

    /// A register the instruction writes with a value of integer type `ty` or narrower
    /// (loads): its slot and width.
    fn dst_wide(&mut self, o: &Operand<'_>, ty: Ty) -> Res<(R, u8)> {
        let Operand::Sym(name) = *o else {
            return Err("a destination that is not a register".to_string());
        };
        let r = self.reg_named(name)?;
        if !r.writable {
            return Err(format!("`{name}` is read-only"));
        }
        let fits = if ty.kind == Kind::F || r.ty.kind == Kind::F {
            compatible(r.ty, ty)
        } else {
            r.ty.kind != Kind::Pred && r.ty.bits >= ty.bits
        };
        if !fits {
            return Err(format!(
                "`{name}` (.{}) cannot hold a .{}",
                r.ty.name(),
                ty.name()
            ));
        }
        Ok((r.slot, r.ty.bits))
    }

    /// A global address operand: its base slot (a 64-bit register, or a constant) and offset.
    fn addr(&mut self, o: &Operand<'_>) -> Res<(R, i32)> {
        let Operand::Addr { base, off } = *o else {
            return Err("expected an address `[...]`".to_string());
        };
        let off = i32::try_from(off).map_err(|_| format!("the offset {off} is too large"))?;
        match base {
            AddrBase::Imm(v) => Ok((self.konst(v)?, off)),
            AddrBase::Sym(name) => {
                if !self.regs.contains_key(name) && self.shared_slot(name)?.is_some() {
                    return Err(format!(
                        "`{name}` is a shared array: only `.shared` accesses reach it"
                    ));
                }
                let r = self.reg_named(name)?;
                if r.ty.kind == Kind::Pred || r.ty.kind == Kind::F || r.ty.bits != 64 {
                    return Err(format!(
                        "`{name}` (.{}) is not a 64-bit address",
                        r.ty.name()
                    ));
                }
                Ok((r.slot, off))
            }
        }
    }

    fn pred(&self, name: &str) -> Res<R> {
        let r = self.reg_named(name)?;
        if r.ty.kind != Kind::Pred {
            return Err(format!("`{name}` is not a predicate"));
        }
        Ok(r.slot)
    }

    /// Decodes one instruction statement (its guard included) and appends it.
    pub(crate) fn statement(
        &mut self,
        guard: Option<(bool, &'s str)>,
        opcode: &'s str,
        ops: &[Operand<'s>],
        line: u32,
    ) -> Res {
        let mut parts = opcode.split('.');
        let base = parts.next().unwrap_or_default();
        let mut m = Mods {
            opcode,
            rest: parts.collect(),
        };
        if base == "bra" {
            m.take("uni");
            m.finish()?;
            count(ops, 1, opcode)?;
            let Operand::Sym(label) = ops[0] else {
                return Err("`bra` takes a label".to_string());
            };
            let op = match guard {
                None => Op::Bra { target: 0 },
                Some((false, p)) => Op::BraIf {
                    p: self.pred(p)?,
                    target: 0,
                },
                Some((true, p)) => Op::BraIfNot {
                    p: self.pred(p)?,
                    target: 0,
                },
            };
            self.fixups.push((self.code.len(), label, line));
            self.push(op, line);
            return Ok(());
        }
        let skip = match guard {
            None => None,
            Some((false, p)) => Some(Op::SkipUnless { p: self.pred(p)? }),
            Some((true, p)) => Some(Op::SkipIf { p: self.pred(p)? }),
        };
        let op = self.decode(base, &mut m, ops)?;
        m.finish()?;
        if let Some(s) = skip {
            self.push(s, line);
        }
        self.push(op, line);
        Ok(())
    }

    fn decode(&mut self, base: &str, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        match base {
            "ret" | "exit" => {
                m.take("uni");
                count(ops, 0, opcode)?;
                Ok(Op::Ret)
            }
            "membar" | "fence" => {
                m.rest.clear();
                Ok(Op::Nop)
            }
            "bar" | "barrier" => self.barrier(m, ops),
            "mov" => {
                let ty = m.ty()?;
                count(ops, 2, opcode)?;
                // `mov.u64 %rd, array`: a shared array's address.
                let a = match ops[1] {
                    Operand::Sym(name) if !self.regs.contains_key(name) => {
                        match self.shared_slot(name)? {
                            Some(_) if !ty.is_int() || ty.bits < 32 => {
                                return Err(format!(
                                    "`{opcode}`: the address of `{name}` is a 32- or 64-bit \
                                     integer"
                                ));
                            }
                            Some(slot) => slot,
                            None => self.src(&ops[1], ty)?,
                        }
                    }
                    ref o => self.src(o, ty)?,
                };
                Ok(Op::Mov {
                    d: self.dst(&ops[0], ty)?,
                    a,
                })
            }
            "clz" | "popc" | "brev" | "bfind" => {
                let shift = base == "bfind" && m.take("shiftamt");
                let ty = m.ty()?;
                let ok = match base {
                    "bfind" => matches!(ty.kind, Kind::U | Kind::S),
                    _ => ty.kind == Kind::B,
                };
                if !ok || !matches!(ty.bits, 32 | 64) {
                    return Err(format!("`{opcode}`: an unsupported type"));
                }
                count(ops, 2, opcode)?;
                let a = self.src(&ops[1], ty)?;
                let (op, out) = match base {
                    "clz" => (BitOp::Clz, Ty::U32),
                    "popc" => (BitOp::Popc, Ty::U32),
                    "brev" => (BitOp::Brev, ty),
                    _ => (
                        BitOp::Bfind {
                            signed: ty.kind == Kind::S,
                            shift,
                        },
                        Ty::U32,
                    ),
                };
                Ok(Op::Bits {
                    op,
                    bits: ty.bits,
                    d: self.dst(&ops[0], out)?,
                    a,
                })
            }
            "cvta" => {
                m.take("to");
                if m.take("shared") {
                    return Err(format!(
                        "`{opcode}`: generic addresses of shared memory are not simulated \
                         (use `ld.shared`, `st.shared` with the array's address)"
                    ));
                }
                if !m.take("global") {
                    return Err(format!(
                        "`{opcode}`: only the global state space is simulated"
                    ));
                }
                let ty = m.ty()?;
                if ty.bits != 64 || ty.kind == Kind::F {
                    return Err(format!("`{opcode}`: addresses are 64-bit"));
                }
                count(ops, 2, opcode)?;
                Ok(Op::Mov {
                    d: self.dst(&ops[0], ty)?,
                    a: self.src(&ops[1], ty)?,
                })
            }
            "ld" => self.load(m, ops),
            "st" => self.store(m, ops),
            "atom" | "red" => self.atom(base == "red", m, ops),
            "setp" => self.setp(m, ops),
            "selp" => {
                let ty = m.ty()?;
                count(ops, 4, opcode)?;
                let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
                let c = self.src(&ops[3], Ty::PRED)?;
                Ok(Op::Selp {
                    d: self.dst(&ops[0], ty)?,
                    a,
                    b,
                    c,
                })
            }
            "cvt" => self.cvt(m, ops),
            "and" | "or" | "xor" | "not" => {
                let ty = m.ty()?;
                if !matches!(ty.kind, Kind::B | Kind::Pred) {
                    return Err(format!("`{opcode}` takes a .b or .pred type"));
                }
                if base == "not" {
                    count(ops, 2, opcode)?;
                    let (a, b) = (self.src(&ops[1], ty)?, self.konst(ty.mask())?);
                    return Ok(Op::Xor {
                        d: self.dst(&ops[0], ty)?,
                        a,
                        b,
                    });
                }
                count(ops, 3, opcode)?;
                let (d, a, b) = self.three(ops, ty)?;
                Ok(match base {
                    "and" => Op::And { d, a, b },
                    "or" => Op::Or { d, a, b },
                    _ => Op::Xor { d, a, b },
                })
            }
            "shl" | "shr" => {
                let ty = m.ty()?;
                if !ty.is_int() || (base == "shl" && ty.kind != Kind::B) {
                    return Err(format!("`{opcode}`: an unsupported type"));
                }
                count(ops, 3, opcode)?;
                let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], Ty::U32)?);
                let (d, bits) = (self.dst(&ops[0], ty)?, ty.bits);
                Ok(match (base, ty.kind) {
                    ("shl", _) => Op::Shl { bits, d, a, b },
                    (_, Kind::S) => Op::ShrS { bits, d, a, b },
                    _ => Op::ShrU { bits, d, a, b },
                })
            }
            "add" | "sub" | "mul" | "mad" | "fma" | "div" | "rem" | "min" | "max" | "neg"
            | "abs" | "sqrt" => {
                let ty = m.types();
                match ty.as_slice() {
                    [t] if t.kind == Kind::F => self.float(base, m, *t, ops),
                    [t] if matches!(t.kind, Kind::U | Kind::S) => self.int(base, m, *t, ops),
                    _ => Err(format!("`{opcode}`: a missing or unsupported type")),
                }
            }
            _ => Err(format!("unknown instruction `{opcode}`")),
        }
    }

    /// `bar.sync 0` (`barrier.sync`, `.aligned`, `bar.cta.sync`).
    fn barrier(&mut self, m: &mut Mods<'s>, ops: &[Operand<'s>]) -> Res<Op> {
        let opcode = m.opcode;
        m.take("cta");
        m.take("aligned");
        if !m.take("sync") || !m.rest.is_empty() {
            return Err(format!(
                "`{opcode}`: only `bar.sync` and `barrier.sync` are simulated"
            ));
        }
        match ops {
            [Operand::Imm { neg: false, text }] if parse_int(text) == Some(0) => Ok(Op::Bar),
            [Operand::Imm { .. }] => Err(format!("`{opcode}`: only barrier 0 is simulated")),
            [_, _] => Err(format!(
                "`{opcode}`: a barrier with a thread count is not simulated"
            )),
            _ => Err(format!("`{opcode}` takes the barrier number 0")),
        }
    }

    pub(super) fn three(&mut self, ops: &[Operand<'s>], ty: Ty) -> Res<(R, R, R)> {
        let (a, b) = (self.src(&ops[1], ty)?, self.src(&ops[2], ty)?);
        Ok((self.dst(&ops[0], ty)?, a, b))
    }
}
