//! The executor: a launch's grid, block by block, each block's threads one after another
//! (the emitter uses no shared memory and no barriers), each thread a loop over its entry's
//! decoded instructions with its own register file.
//!
//! A thread's state is its program counter and its registers ([`Thread`]), and [`run`]
//! returns when the thread ends. To add `.shared` memory and `bar.sync` later, `run` would
//! also return at a barrier (with the thread's state kept), and [`run_block`] would keep one
//! `Thread` per thread of the block and resume them in turn until all have passed it.

use super::memory::{Illegal, View};
use super::ops::{DISCARD, IntOp, Op};
use super::parse::{CTAID, Entry, NCTAID, NTID, PARAMS, TID};
use super::scalar;
use crate::device::Grid;

/// Why a thread stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// An illegal memory access by instruction `pc`.
    Illegal {
        pc: usize,
        access: Illegal,
        what: &'static str,
    },
    /// The thread ran past the step limit (at instruction `pc`).
    Steps { pc: usize },
}

/// A launch that failed: why, and where in the grid.
#[derive(Debug)]
pub(crate) struct Failure {
    pub stop: Stop,
    pub block: [u32; 3],
    pub thread: [u32; 3],
}

/// One thread: where it is and its registers.
pub(crate) struct Thread {
    pub pc: usize,
    pub regs: Vec<u64>,
}

/// Runs every thread of `grid` of `entry` with parameters `args` (already checked against
/// the entry's), at most `limit` instructions each.
pub(crate) fn launch(
    entry: &Entry,
    grid: Grid,
    args: &[u64],
    mem: &mut View<'_>,
    limit: u64,
) -> Result<(), Failure> {
    let mut start = entry.template.clone();
    for k in 0..3 {
        start[NTID + k] = u64::from(grid.threads[k]);
        start[NCTAID + k] = u64::from(grid.blocks[k]);
    }
    for (i, (&arg, (_, ty))) in args.iter().zip(&entry.params).enumerate() {
        start[PARAMS + i] = arg & ty.mask();
    }
    let mut thread = Thread {
        pc: 0,
        regs: start.clone(),
    };
    for z in 0..grid.blocks[2] {
        for y in 0..grid.blocks[1] {
            for x in 0..grid.blocks[0] {
                let block = [x, y, z];
                for k in 0..3 {
                    start[CTAID + k] = u64::from(block[k]);
                }
                run_block(entry, grid, &start, &mut thread, mem, limit).map_err(
                    |(stop, thread)| Failure {
                        stop,
                        block,
                        thread,
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// Runs the threads of one block, one after another, from register file `start`.
fn run_block(
    entry: &Entry,
    grid: Grid,
    start: &[u64],
    t: &mut Thread,
    mem: &mut View<'_>,
    limit: u64,
) -> Result<(), (Stop, [u32; 3])> {
    for z in 0..grid.threads[2] {
        for y in 0..grid.threads[1] {
            for x in 0..grid.threads[0] {
                t.regs.copy_from_slice(start);
                t.regs[TID] = u64::from(x);
                t.regs[TID + 1] = u64::from(y);
                t.regs[TID + 2] = u64::from(z);
                t.pc = 0;
                run(&entry.code, t, mem, limit).map_err(|s| (s, [x, y, z]))?;
            }
        }
    }
    Ok(())
}

#[inline(always)]
fn f32_of(x: u64) -> f32 {
    f32::from_bits(x as u32)
}

#[inline(always)]
fn f64_of(x: u64) -> f64 {
    f64::from_bits(x)
}

#[inline(always)]
fn bits32(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// Runs thread `t` until it returns. Instructions are counted by straight runs: at each
/// taken branch, the run that ends there is added, and the thread stops once the count
/// passes `limit`.
pub(crate) fn run(code: &[Op], t: &mut Thread, mem: &mut View<'_>, limit: u64) -> Result<(), Stop> {
    let r = &mut t.regs[..];
    let mut pc = t.pc;
    let mut seg = pc;
    let mut steps = 0u64;
    macro_rules! jump {
        ($target:expr) => {{
            steps += (pc - seg) as u64;
            if steps > limit {
                t.pc = pc - 1;
                return Err(Stop::Steps { pc: pc - 1 });
            }
            pc = $target as usize;
            seg = pc;
        }};
    }
    macro_rules! addr {
        ($a:expr, $off:expr) => {
            r[$a as usize].wrapping_add($off as i64 as u64)
        };
    }
    macro_rules! mem {
        ($e:expr, $what:expr) => {
            match $e {
                Ok(v) => v,
                Err(access) => {
                    t.pc = pc - 1;
                    return Err(Stop::Illegal {
                        pc: pc - 1,
                        access,
                        what: $what,
                    });
                }
            }
        };
    }
    loop {
        let Some(&op) = code.get(pc) else {
            t.pc = pc;
            return Ok(());
        };
        pc += 1;
        match op {
            Op::Nop => {}
            Op::Ret => {
                t.pc = pc - 1;
                return Ok(());
            }
            Op::Bra { target } => jump!(target),
            Op::BraIf { p, target } => {
                if r[p as usize] != 0 {
                    jump!(target)
                }
            }
            Op::BraIfNot { p, target } => {
                if r[p as usize] == 0 {
                    jump!(target)
                }
            }
            Op::SkipUnless { p } => {
                if r[p as usize] == 0 {
                    pc += 1;
                }
            }
            Op::SkipIf { p } => {
                if r[p as usize] != 0 {
                    pc += 1;
                }
            }
            Op::Mov { d, a } => r[d as usize] = r[a as usize],
            Op::And { d, a, b } => r[d as usize] = r[a as usize] & r[b as usize],
            Op::Or { d, a, b } => r[d as usize] = r[a as usize] | r[b as usize],
            Op::Xor { d, a, b } => r[d as usize] = r[a as usize] ^ r[b as usize],
            Op::Extend { d, a, from, to } => {
                r[d as usize] = scalar::sext(r[a as usize], u32::from(from)) as u64
                    & scalar::mask(u32::from(to));
            }
            Op::Add32 { d, a, b } => {
                r[d as usize] =
                    u64::from((r[a as usize] as u32).wrapping_add(r[b as usize] as u32));
            }
            Op::Add64 { d, a, b } => r[d as usize] = r[a as usize].wrapping_add(r[b as usize]),
            Op::Sub32 { d, a, b } => {
                r[d as usize] =
                    u64::from((r[a as usize] as u32).wrapping_sub(r[b as usize] as u32));
            }
            Op::Sub64 { d, a, b } => r[d as usize] = r[a as usize].wrapping_sub(r[b as usize]),
            Op::MulLo32 { d, a, b } => {
                r[d as usize] =
                    u64::from((r[a as usize] as u32).wrapping_mul(r[b as usize] as u32));
            }
            Op::MulLo64 { d, a, b } => r[d as usize] = r[a as usize].wrapping_mul(r[b as usize]),
            Op::MadLo32 { d, a, b, c } => {
                let p = (r[a as usize] as u32).wrapping_mul(r[b as usize] as u32);
                r[d as usize] = u64::from(p.wrapping_add(r[c as usize] as u32));
            }
            Op::MadLo64 { d, a, b, c } => {
                r[d as usize] = r[a as usize]
                    .wrapping_mul(r[b as usize])
                    .wrapping_add(r[c as usize]);
            }
            Op::MulWideU32 { d, a, b } => {
                r[d as usize] = (r[a as usize] & 0xffff_ffff) * (r[b as usize] & 0xffff_ffff);
            }
            Op::MulWideS32 { d, a, b } => {
                let x = i64::from(r[a as usize] as u32 as i32);
                r[d as usize] = x.wrapping_mul(i64::from(r[b as usize] as u32 as i32)) as u64;
            }
            Op::DivU64 { d, a, b } => {
                r[d as usize] = r[a as usize].checked_div(r[b as usize]).unwrap_or(u64::MAX);
            }
            Op::RemU64 { d, a, b } => {
                let x = r[a as usize];
                r[d as usize] = x.checked_rem(r[b as usize]).unwrap_or(x);
            }
            Op::Int { op, ty, d, a, b } => {
                r[d as usize] = scalar::int_op(op, ty, r[a as usize], r[b as usize]);
            }
            Op::Mad { op, ty, d, a, b, c } => {
                let p = scalar::int_op(op, ty, r[a as usize], r[b as usize]);
                let out = if op == IntOp::MulWide {
                    ty.bits * 2
                } else {
                    ty.bits
                };
                r[d as usize] = p.wrapping_add(r[c as usize]) & scalar::mask(u32::from(out));
            }
            Op::IntUn { op, ty, d, a } => r[d as usize] = scalar::int_un(op, ty, r[a as usize]),
            Op::Shl { bits, d, a, b } => {
                let n = r[b as usize] as u32;
                r[d as usize] = if n >= u32::from(bits) {
                    0
                } else {
                    (r[a as usize] << n) & scalar::mask(u32::from(bits))
                };
            }
            Op::ShrU { bits, d, a, b } => {
                let n = r[b as usize] as u32;
                r[d as usize] = if n >= u32::from(bits) {
                    0
                } else {
                    r[a as usize] >> n
                };
            }
            Op::ShrS { bits, d, a, b } => {
                let n = (r[b as usize] as u32).min(63);
                let x = scalar::sext(r[a as usize], u32::from(bits));
                r[d as usize] = (x >> n) as u64 & scalar::mask(u32::from(bits));
            }
            Op::AddF32 { d, a, b } => {
                r[d as usize] = bits32(f32_of(r[a as usize]) + f32_of(r[b as usize]));
            }
            Op::SubF32 { d, a, b } => {
                r[d as usize] = bits32(f32_of(r[a as usize]) - f32_of(r[b as usize]));
            }
            Op::MulF32 { d, a, b } => {
                r[d as usize] = bits32(f32_of(r[a as usize]) * f32_of(r[b as usize]));
            }
            Op::DivF32 { d, a, b } => {
                r[d as usize] = bits32(f32_of(r[a as usize]) / f32_of(r[b as usize]));
            }
            Op::FmaF32 { d, a, b, c } => {
                let (x, y, z) = (
                    f32_of(r[a as usize]),
                    f32_of(r[b as usize]),
                    f32_of(r[c as usize]),
                );
                r[d as usize] = bits32(x.mul_add(y, z));
            }
            Op::SqrtF32 { d, a } => r[d as usize] = bits32(f32_of(r[a as usize]).sqrt()),
            Op::MinF32 { d, a, b } => {
                let m = scalar::min_max_f32(f32_of(r[a as usize]), f32_of(r[b as usize]), false);
                r[d as usize] = u64::from(m);
            }
            Op::MaxF32 { d, a, b } => {
                let m = scalar::min_max_f32(f32_of(r[a as usize]), f32_of(r[b as usize]), true);
                r[d as usize] = u64::from(m);
            }
            Op::AddF64 { d, a, b } => {
                r[d as usize] = (f64_of(r[a as usize]) + f64_of(r[b as usize])).to_bits();
            }
            Op::SubF64 { d, a, b } => {
                r[d as usize] = (f64_of(r[a as usize]) - f64_of(r[b as usize])).to_bits();
            }
            Op::MulF64 { d, a, b } => {
                r[d as usize] = (f64_of(r[a as usize]) * f64_of(r[b as usize])).to_bits();
            }
            Op::DivF64 { d, a, b } => {
                r[d as usize] = (f64_of(r[a as usize]) / f64_of(r[b as usize])).to_bits();
            }
            Op::FmaF64 { d, a, b, c } => {
                let (x, y, z) = (
                    f64_of(r[a as usize]),
                    f64_of(r[b as usize]),
                    f64_of(r[c as usize]),
                );
                r[d as usize] = x.mul_add(y, z).to_bits();
            }
            Op::SqrtF64 { d, a } => r[d as usize] = f64_of(r[a as usize]).sqrt().to_bits(),
            Op::MinF64 { d, a, b } => {
                r[d as usize] =
                    scalar::min_max_f64(f64_of(r[a as usize]), f64_of(r[b as usize]), false);
            }
            Op::MaxF64 { d, a, b } => {
                r[d as usize] =
                    scalar::min_max_f64(f64_of(r[a as usize]), f64_of(r[b as usize]), true);
            }
            Op::SetpU { cc, d, a, b } => {
                r[d as usize] = u64::from(scalar::cmp_ord(cc, r[a as usize], r[b as usize]));
            }
            Op::SetpS { cc, bits, d, a, b } => {
                let x = scalar::sext(r[a as usize], u32::from(bits));
                let y = scalar::sext(r[b as usize], u32::from(bits));
                r[d as usize] = u64::from(scalar::cmp_ord(cc, x, y));
            }
            Op::SetpF32 { cc, d, a, b } => {
                let (x, y) = (f32_of(r[a as usize]), f32_of(r[b as usize]));
                r[d as usize] = u64::from(scalar::cmp_float(cc, f64::from(x), f64::from(y)));
            }
            Op::SetpF64 { cc, d, a, b } => {
                let (x, y) = (f64_of(r[a as usize]), f64_of(r[b as usize]));
                r[d as usize] = u64::from(scalar::cmp_float(cc, x, y));
            }
            Op::Selp { d, a, b, c } => {
                r[d as usize] = if r[c as usize] != 0 {
                    r[a as usize]
                } else {
                    r[b as usize]
                };
            }
            Op::CvtSat { d, a, from, to } => {
                r[d as usize] = scalar::cvt_sat(r[a as usize], from, to)
            }
            Op::F2I {
                d,
                a,
                from64,
                round,
                to,
            } => {
                let x = if from64 {
                    f64_of(r[a as usize])
                } else {
                    f64::from(f32_of(r[a as usize]))
                };
                r[d as usize] = scalar::float_to_int(x, round, to);
            }
            Op::I2F {
                d,
                a,
                from,
                round,
                to64,
            } => {
                let v = scalar::int_value(r[a as usize], from);
                r[d as usize] = if to64 {
                    scalar::int_to_f64(v, round).to_bits()
                } else {
                    bits32(scalar::int_to_f32(v, round))
                };
            }
            Op::F2F { d, a, conv } => r[d as usize] = scalar::f2f(r[a as usize], conv),
            Op::Ld8 { d, a, off } => r[d as usize] = mem!(mem.load::<1>(addr!(a, off)), "a load"),
            Op::Ld16 { d, a, off } => r[d as usize] = mem!(mem.load::<2>(addr!(a, off)), "a load"),
            Op::Ld32 { d, a, off } => r[d as usize] = mem!(mem.load::<4>(addr!(a, off)), "a load"),
            Op::Ld64 { d, a, off } => r[d as usize] = mem!(mem.load::<8>(addr!(a, off)), "a load"),
            Op::LdSext {
                d,
                a,
                off,
                bytes,
                to,
            } => {
                let at = addr!(a, off);
                let v = match bytes {
                    1 => mem!(mem.load::<1>(at), "a load"),
                    2 => mem!(mem.load::<2>(at), "a load"),
                    _ => mem!(mem.load::<4>(at), "a load"),
                };
                r[d as usize] =
                    scalar::sext(v, u32::from(bytes) * 8) as u64 & scalar::mask(u32::from(to));
            }
            Op::St8 { a, off, v } => mem!(mem.store::<1>(addr!(a, off), r[v as usize]), "a store"),
            Op::St16 { a, off, v } => mem!(mem.store::<2>(addr!(a, off), r[v as usize]), "a store"),
            Op::St32 { a, off, v } => mem!(mem.store::<4>(addr!(a, off), r[v as usize]), "a store"),
            Op::St64 { a, off, v } => mem!(mem.store::<8>(addr!(a, off), r[v as usize]), "a store"),
            Op::Atom {
                op,
                ty,
                d,
                a,
                off,
                b,
                c,
            } => {
                let at = addr!(a, off);
                let old = if ty.bits == 32 {
                    mem!(mem.load::<4>(at), "an atomic")
                } else {
                    mem!(mem.load::<8>(at), "an atomic")
                };
                let new = scalar::atom_new(op, ty, old, r[b as usize], r[c as usize]);
                if ty.bits == 32 {
                    mem!(mem.store::<4>(at, new), "an atomic");
                } else {
                    mem!(mem.store::<8>(at, new), "an atomic");
                }
                if d != DISCARD {
                    r[d as usize] = old;
                }
            }
        }
    }
}
