//! The executor: a launch's grid, block by block, each thread a loop over its entry's
//! decoded instructions with its own program counter and registers ([`Thread`]).
//!
//! [`run`] runs a thread until it ends or reaches a barrier (`bar.sync`), which it steps
//! past. An entry without barriers runs each thread of a block to its end, one after
//! another, in one reused register file (the fast path: the emitter writes no barriers).
//! An entry with barriers runs its blocks in lockstep ([`run_lockstep`]): it keeps a
//! register file, a program counter and a step count per thread of the block, runs each
//! thread (in order of `%tid`, x fastest) until it reaches a barrier or ends, then resumes
//! those waiting, and so on until every thread has ended. Threads that ended do not hold a barrier up (as on
//! the hardware, where `bar.sync` waits for the threads that have not exited).
//!
//! A block's shared memory ([`Shared`]) is refilled with `0xA5` bytes before the block
//! starts. The step limit is per thread, across its barriers.

use super::memory::{Illegal, Shared, View};
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

/// Why [`run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The thread ended.
    Exit,
    /// The thread reached a barrier (its `pc` is past it).
    Barrier,
}

/// A launch that failed: why, and where in the grid.
#[derive(Debug)]
pub(crate) struct Failure {
    pub stop: Stop,
    pub block: [u32; 3],
    pub thread: [u32; 3],
}

/// One thread: where it is, how many instructions it has run (counted at taken branches
/// and barriers), and its registers.
pub(crate) struct Thread<'r> {
    pub pc: usize,
    pub steps: u64,
    pub regs: &'r mut [u64],
}

/// The register files of a block's threads for an entry with barriers, one after another
/// in one buffer, with each thread's program counter and step count.
struct Lockstep {
    regs: Vec<u64>,
    pcs: Vec<usize>,
    steps: Vec<u64>,
    /// The threads yet to run (at a barrier, or not started), in order.
    waiting: Vec<u32>,
    next: Vec<u32>,
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
    let mut shared = Shared::new(entry.shared.iter().map(|a| (a.base, a.len)));
    let mut regs = start.clone();
    let mut lockstep = entry.barriers.then(|| {
        let n: usize = grid.threads.iter().map(|&t| t as usize).product();
        Lockstep {
            regs: vec![0; n * start.len()],
            pcs: vec![0; n],
            steps: vec![0; n],
            waiting: Vec::with_capacity(n),
            next: Vec::with_capacity(n),
        }
    });
    for z in 0..grid.blocks[2] {
        for y in 0..grid.blocks[1] {
            for x in 0..grid.blocks[0] {
                let block = [x, y, z];
                for k in 0..3 {
                    start[CTAID + k] = u64::from(block[k]);
                }
                shared.reset();
                let ran = match &mut lockstep {
                    None => run_block(entry, grid, &start, &mut regs, mem, &mut shared, limit),
                    Some(l) => run_lockstep(entry, grid, &start, l, mem, &mut shared, limit),
                };
                ran.map_err(|(stop, thread)| Failure {
                    stop,
                    block,
                    thread,
                })?;
            }
        }
    }
    Ok(())
}

/// Runs the threads of one block of an entry without barriers, one after another, each
/// from register file `start` in `regs`.
fn run_block(
    entry: &Entry,
    grid: Grid,
    start: &[u64],
    regs: &mut [u64],
    mem: &mut View<'_>,
    shared: &mut Shared,
    limit: u64,
) -> Result<(), (Stop, [u32; 3])> {
    for z in 0..grid.threads[2] {
        for y in 0..grid.threads[1] {
            for x in 0..grid.threads[0] {
                regs.copy_from_slice(start);
                regs[TID] = u64::from(x);
                regs[TID + 1] = u64::from(y);
                regs[TID + 2] = u64::from(z);
                let mut t = Thread {
                    pc: 0,
                    steps: 0,
                    regs: &mut *regs,
                };
                // The entry has no barrier; were there one, it would hold nothing up.
                while run(&entry.code, &mut t, mem, shared, limit).map_err(|s| (s, [x, y, z]))?
                    == Event::Barrier
                {}
            }
        }
    }
    Ok(())
}

/// Runs the threads of one block of an entry with barriers in lockstep: each thread until
/// it reaches a barrier or ends, then those at a barrier again, until all have ended.
fn run_lockstep(
    entry: &Entry,
    grid: Grid,
    start: &[u64],
    l: &mut Lockstep,
    mem: &mut View<'_>,
    shared: &mut Shared,
    limit: u64,
) -> Result<(), (Stop, [u32; 3])> {
    let [nx, ny, _] = grid.threads;
    let slots = start.len();
    l.waiting.clear();
    for (i, file) in l.regs.chunks_exact_mut(slots).enumerate() {
        let i = i as u32;
        file.copy_from_slice(start);
        file[TID] = u64::from(i % nx);
        file[TID + 1] = u64::from(i / nx % ny);
        file[TID + 2] = u64::from(i / nx / ny);
        l.pcs[i as usize] = 0;
        l.steps[i as usize] = 0;
        l.waiting.push(i);
    }
    while !l.waiting.is_empty() {
        l.next.clear();
        for &i in &l.waiting {
            let k = i as usize;
            let mut t = Thread {
                pc: l.pcs[k],
                steps: l.steps[k],
                regs: &mut l.regs[k * slots..(k + 1) * slots],
            };
            let event = run(&entry.code, &mut t, mem, shared, limit)
                .map_err(|s| (s, [i % nx, i / nx % ny, i / nx / ny]))?;
            if event == Event::Barrier {
                l.pcs[k] = t.pc;
                l.steps[k] = t.steps;
                l.next.push(i);
            }
        }
        std::mem::swap(&mut l.waiting, &mut l.next);
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

/// Runs thread `t` until it ends or reaches a barrier, accessing global memory through
/// `mem` and its block's shared memory in `shared`. Instructions are counted by straight
/// runs: at each taken branch (and barrier), the run that ends there is added to the
/// thread's count, and the thread stops once the count passes `limit`.
pub(crate) fn run(
    code: &[Op],
    t: &mut Thread<'_>,
    mem: &mut View<'_>,
    shared: &mut Shared,
    limit: u64,
) -> Result<Event, Stop> {
    let r = &mut *t.regs;
    let mut pc = t.pc;
    let mut seg = pc;
    let mut steps = t.steps;
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
    // A read-modify-write of `$m` (global memory or shared): threads run one at a time.
    macro_rules! atom {
        ($m:ident, $what:expr, $op:expr, $ty:expr, $d:expr, $a:expr, $off:expr, $b:expr, $c:expr) => {{
            let at = addr!($a, $off);
            let old = if $ty.bits == 32 {
                mem!($m.load::<4>(at), $what)
            } else {
                mem!($m.load::<8>(at), $what)
            };
            let new = scalar::atom_new($op, $ty, old, r[$b as usize], r[$c as usize]);
            if $ty.bits == 32 {
                mem!($m.store::<4>(at, new), $what);
            } else {
                mem!($m.store::<8>(at, new), $what);
            }
            if $d != DISCARD {
                r[$d as usize] = old;
            }
        }};
    }
    loop {
        let Some(&op) = code.get(pc) else {
            t.pc = pc;
            return Ok(Event::Exit);
        };
        pc += 1;
        match op {
            Op::Nop => {}
            Op::Ret => {
                t.pc = pc - 1;
                return Ok(Event::Exit);
            }
            Op::Bar => {
                t.steps = steps + (pc - seg) as u64;
                t.pc = pc;
                return Ok(Event::Barrier);
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
            Op::Bits { op, bits, d, a } => r[d as usize] = scalar::bit_op(op, bits, r[a as usize]),
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
            Op::LdShared {
                d,
                a,
                off,
                bytes,
                sext,
            } => {
                let at = addr!(a, off);
                let v = match bytes {
                    8 => mem!(shared.load::<8>(at), "a shared load"),
                    4 => mem!(shared.load::<4>(at), "a shared load"),
                    2 => mem!(shared.load::<2>(at), "a shared load"),
                    _ => mem!(shared.load::<1>(at), "a shared load"),
                };
                r[d as usize] = if sext == 0 {
                    v
                } else {
                    scalar::sext(v, u32::from(bytes) * 8) as u64 & scalar::mask(u32::from(sext))
                };
            }
            Op::StShared { a, off, v, bytes } => {
                let (at, v) = (addr!(a, off), r[v as usize]);
                match bytes {
                    8 => mem!(shared.store::<8>(at, v), "a shared store"),
                    4 => mem!(shared.store::<4>(at, v), "a shared store"),
                    2 => mem!(shared.store::<2>(at, v), "a shared store"),
                    _ => mem!(shared.store::<1>(at, v), "a shared store"),
                }
            }
            Op::Atom {
                op,
                ty,
                d,
                a,
                off,
                b,
                c,
            } => atom!(mem, "an atomic", op, ty, d, a, off, b, c),
            Op::AtomShared {
                op,
                ty,
                d,
                a,
                off,
                b,
                c,
            } => atom!(shared, "a shared atomic", op, ty, d, a, off, b, c),
        }
    }
}
