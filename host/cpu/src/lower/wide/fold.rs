//! Wide bodies of `for` loops whose carried values form lanes (the row reductions that
//! `weft_ir::builder::BodyBuilder::fold_lanes` writes, run as 128-bit vectors by
//! [`crate::lower::lanes`]): the loop's bulk, eight `f64` lanes at a time, in one `zmm`
//! register (AVX-512) or two `ymm` registers (AVX2).
//!
//! The function
//!
//! ```text
//! extern "C" fn(args: *const u64, steps: i64)
//! ```
//!
//! runs `steps` steps of [`UNROLL`] iterations of the loop. `args` holds one pointer per *site*
//! of the plan (the address of its element at the shared base index of the first iteration),
//! one per gathered row (the address of its element 0), then the bits of each uniform value
//! (and each gathered row's bound), then the address of the carried values (the loop's `K`
//! carried values in order, `K * 8` bytes): the function loads them into pinned registers
//! before the first step and stores them back after the last. It returns the steps it did not
//! run: 0, unless a gather's index was out of range, when the step of that iteration and the
//! rest are left to the caller's 128-bit loop (which faults where the scalar code would), and
//! the carried values are those before that step.
//!
//! A loop qualifies when, besides what [`crate::lower::lanes::plan_wide`] requires, its lanes
//! are `f64` computed by `add`, `sub`, `mul`, `div`, `fma` (on a CPU with the FMA
//! instructions), `min`, `max`, `neg`, `abs` and `sqrt` of
//! loads, gathers, uniform values and carried values (a gather's indices `i64` lanes of
//! loads, `i32` loads widened, uniform values, `add` and `sub`; each lane's index is checked
//! before the gather, `vgatherqpd`, reads it), and every site's base index advances by the
//! same positive number of elements per iteration: the scalar code of the body computes only
//! values that are affine in the induction value (`+`, `-`, and `*` or `<<` by constants,
//! whose wrapping keeps them affine) or do not depend on it. So the caller can compute the first iteration's addresses and
//! uniform values by running the body's scalar code once, and prove the last iteration's
//! sites in bounds with one comparison per site. Lane `l` of every vector holds exactly what
//! lane `l` of the 128-bit code computes, by the same operations in the same order, so the
//! results are the same bits.

use std::collections::HashMap;

use weft_ir::{BinaryOp, DType, ForLoop, Op, Scalar, UnaryOp, ValueId};

use super::encode::op;
use super::regalloc::{Class, MInst, Src, Uniforms, VReg};
use super::select::{Emit, float_min_max};
use super::{Body, Carry, Isa, assemble};
use crate::lower::lanes::{LanePlan, Node};
use crate::lower::vector::ConstTable;

/// Loop iterations per step of the function.
pub(crate) const UNROLL: i64 = 2;

/// The largest number of elements a site's base may advance by per iteration.
const MAX_STRIDE: i64 = 1 << 16;

/// One word of a call's argument array, before the last (the carried values' address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FoldWord {
    /// The address of site `.0`'s element at its base index in the first iteration.
    Site(usize),
    /// The address of element 0 of the row that gather `.0` (of [`FoldBody::gathers`]) reads.
    GatherRow(usize),
    /// The bits of a uniform value (an `f64` or an `i64`).
    Uniform(ValueId),
    /// The extent `n` of the last dimension of the store that gather `gather` reads, less
    /// one if `less_one` (as [`super::regalloc::MInst::CheckIndices`] takes it).
    Bound { gather: usize, less_one: bool },
}

/// A compiled wide body of a lane loop.
#[derive(Debug)]
pub(crate) struct FoldBody {
    /// Its instruction set.
    pub isa: Isa,
    /// The machine code of the function.
    pub code: Vec<u8>,
    /// The constants it reads (at a fixed address): must live as long as the code.
    pub table: ConstTable,
    /// What the caller puts in each word of the argument array before the last.
    pub args: Vec<FoldWord>,
    /// The elements every site's base advances by per iteration.
    pub stride: i64,
    /// The rows the lanes gather from: a store parameter and the indices of its dimensions
    /// before the last, which the iterations share.
    pub gathers: Vec<(u32, Vec<ValueId>)>,
}

type R<T> = Result<T, String>;

/// How a value of the loop body depends on the induction value `q`: `Some(c)` when it is
/// `x + c q` for an `x` that does not depend on `q` (`c = 0`: it does not depend on `q` at
/// all), in wrapping `i64` arithmetic; `None` otherwise.
struct Affine<'a> {
    induction: ValueId,
    coef: HashMap<ValueId, Option<i64>>,
    const_of: &'a dyn Fn(ValueId) -> Option<Scalar>,
    body_consts: HashMap<ValueId, Scalar>,
}

impl Affine<'_> {
    fn of(&self, v: ValueId) -> Option<i64> {
        if v == self.induction {
            return Some(1);
        }
        // Values of the body were visited in order; any other is defined before the loop.
        self.coef.get(&v).copied().unwrap_or(Some(0))
    }

    fn konst(&self, v: ValueId) -> Option<i64> {
        match self
            .body_consts
            .get(&v)
            .copied()
            .or_else(|| (self.const_of)(v))
        {
            Some(Scalar::I64(c)) => Some(c),
            _ => None,
        }
    }

    /// The coefficient of the value an instruction of the body defines.
    fn inst(&self, op: &Op) -> Option<i64> {
        match op {
            Op::Const(_) => Some(0),
            Op::Binary(BinaryOp::Add, x, y) => self.of(*x)?.checked_add(self.of(*y)?),
            Op::Binary(BinaryOp::Sub, x, y) => self.of(*x)?.checked_sub(self.of(*y)?),
            Op::Binary(BinaryOp::Mul, x, y) => match (self.of(*x)?, self.of(*y)?) {
                (0, 0) => Some(0),
                (0, c) => self.konst(*x)?.checked_mul(c),
                (c, 0) => self.konst(*y)?.checked_mul(c),
                _ => None,
            },
            Op::Binary(BinaryOp::Shl, x, y) => match (self.of(*x)?, self.of(*y)?) {
                (0, 0) => Some(0),
                (c, 0) => {
                    let k = self.konst(*y)?;
                    (0..32).contains(&k).then(|| c.checked_mul(1 << k))?
                }
                _ => None,
            },
            // Anything else is fine only where it does not depend on `q`.
            op => crate::lower::inst::operands(op)
                .into_iter()
                .all(|v| self.of(v) == Some(0))
                .then_some(0),
        }
    }
}

/// Compiles the loop `l`, planned by [`crate::lower::lanes::plan_wide`] for `isa`, into a wide
/// body, or says why it does not qualify. `const_of` gives the value of constants defined
/// before the loop.
pub(crate) fn compile_fold(
    isa: Isa,
    l: &ForLoop,
    plan: &LanePlan,
    const_of: &dyn Fn(ValueId) -> Option<Scalar>,
) -> R<FoldBody> {
    if i64::from(plan.lanes) != isa.lanes() {
        return Err("internal: a plan for another vector width".into());
    }
    if plan.groups.iter().any(|&t| t != DType::F64) {
        return Err("lanes of another type than f64".into());
    }
    // The scalar code: affine in the induction value, or independent of it.
    let mut aff = Affine {
        induction: l.induction,
        coef: HashMap::new(),
        const_of,
        body_consts: HashMap::new(),
    };
    for (inst, &scalar) in l.body.iter().zip(&plan.scalar) {
        if !scalar {
            continue;
        }
        if let Op::Const(c) = inst.op {
            for &r in &inst.results {
                aff.body_consts.insert(r, c);
            }
        }
        let c = aff.inst(&inst.op);
        if c.is_none() {
            return Err(
                "its scalar code depends on the iteration in a way that is not affine".into(),
            );
        }
        for &r in &inst.results {
            aff.coef.insert(r, c);
        }
    }
    // Every site's base advances by one stride; the rest of its indices stay.
    let mut stride = None;
    for site in &plan.sites {
        let c = match site.base {
            Some(b) => aff.of(b),
            None => Some(0),
        };
        let c = c
            .filter(|&c| c > 0 && c <= MAX_STRIDE)
            .ok_or("a site that does not advance")?;
        if stride.is_some_and(|s| s != c) {
            return Err("sites that advance by different strides".into());
        }
        stride = Some(c);
        if site.outer.iter().any(|&v| aff.of(v) != Some(0)) {
            return Err("a site whose row changes with the iteration".into());
        }
    }
    let stride = stride.ok_or("no loads")?;
    if plan
        .roots
        .iter()
        .any(|&r| matches!(plan.nodes[r], Node::Carried(_)))
    {
        return Err("a group that yields carried values".into());
    }

    // Each site's elements: 8 bytes, or `i32` indices that lanes widen.
    let mut site_size: Vec<Option<i64>> = vec![None; plan.sites.len()];
    for node in &plan.nodes {
        let (site, size) = match *node {
            Node::Load { site, dtype, .. } => (site, dtype.size() as i64),
            Node::LoadWidened { site, .. } => (site, 4),
            _ => continue,
        };
        let slot = site_size
            .get_mut(site)
            .ok_or("internal: a load of no site")?;
        if slot.is_some_and(|s| s != size) {
            return Err("a site loaded at two element sizes".into());
        }
        *slot = Some(size);
    }
    let site_size: Vec<i64> = site_size
        .into_iter()
        .map(|s| s.ok_or_else(|| "a site with no loads".to_string()))
        .collect::<R<_>>()?;
    // The rows the lanes gather from, each checked the same in every iteration.
    let mut gathers: Vec<(u32, Vec<ValueId>)> = Vec::new();
    for node in &plan.nodes {
        if let Node::Gather {
            param,
            ref outer,
            dtype,
            ..
        } = *node
        {
            if dtype != DType::F64 {
                return Err(format!("a gather of {dtype}"));
            }
            if outer.iter().any(|&v| aff.of(v) != Some(0)) {
                return Err("a gather whose row changes with the iteration".into());
            }
            if !gathers.iter().any(|g| g.0 == param && g.1 == *outer) {
                gathers.push((param, outer.clone()));
            }
        }
    }

    let mut s = Sel {
        isa,
        insts: Vec::new(),
        classes: Vec::new(),
        uniforms: Uniforms::default(),
    };
    // The carried vectors (one per group), pinned to the top registers.
    let top = isa.vector_registers();
    let pinned: Vec<(VReg, u8)> = (0..plan.groups.len())
        .map(|g| {
            let v = s.new_reg(Class::V);
            (v, (top - 1 - g) as u8)
        })
        .collect();
    let mut carried: Vec<VReg> = pinned.iter().map(|p| p.0).collect();
    for u in 0..UNROLL {
        // Elements of every site that earlier iterations of the step took.
        let advance = u.checked_mul(stride).ok_or("a stride too large")?;
        let disp = |site: usize, offset: i64| -> R<i32> {
            offset
                .checked_add(advance)
                .and_then(|e| e.checked_mul(site_size[site]))
                .and_then(|o| i32::try_from(o).ok())
                .ok_or_else(|| "a load too far from its site's base".into())
        };
        let mut vals: Vec<Src> = Vec::with_capacity(plan.nodes.len());
        for node in &plan.nodes {
            let v = match *node {
                Node::Splat(v, t) => match t {
                    DType::F64 | DType::I64 => {
                        if aff.of(v) != Some(0) {
                            return Err("a uniform value that changes with the iteration".into());
                        }
                        match aff.body_consts.get(&v).copied().or_else(|| const_of(v)) {
                            Some(c) => Src::U(s.uniforms.constant(c.to_bits())),
                            None => Src::U(s.uniforms.arg(FoldWord::Uniform(v))),
                        }
                    }
                    t => return Err(format!("a uniform {t}")),
                },
                Node::Consts(t, ref cs) => {
                    let bits = cs.first().ok_or("internal: no constants")?.to_bits();
                    if t.size() != 8 || cs.iter().any(|c| c.to_bits() != bits) {
                        return Err("constants that differ between lanes".into());
                    }
                    Src::U(s.uniforms.constant(bits))
                }
                Node::Carried(g) => Src::V(*carried.get(g).ok_or("internal: no carried vector")?),
                Node::Binary(bop @ (BinaryOp::Min | BinaryOp::Max), DType::F64, x, y) => {
                    let xa = s.reg(vals[x]);
                    let ya = s.reg(vals[y]);
                    let min = bop == BinaryOp::Min;
                    Src::V(float_min_max(&mut s, min, (xa, vals[y], ya)))
                }
                Node::Binary(bop, t, x, y) => {
                    let ins = match (bop, t) {
                        (BinaryOp::Add, DType::F64) => op::VADDPD,
                        (BinaryOp::Sub, DType::F64) => op::VSUBPD,
                        (BinaryOp::Mul, DType::F64) => op::VMULPD,
                        (BinaryOp::Div, DType::F64) => op::VDIVPD,
                        // Index arithmetic of gathers (wrapping, as the scalar code's).
                        (BinaryOp::Add, DType::I64) => op::VPADDQ,
                        (BinaryOp::Sub, DType::I64) => op::VPSUBQ,
                        (other, t) => {
                            return Err(format!("{} on {t} has no wide form here", other.name()));
                        }
                    };
                    let a = s.reg(vals[x]);
                    Src::V(s.op3(ins, a, vals[y], None, Class::V))
                }
                Node::Load {
                    site,
                    offset,
                    dtype,
                } => {
                    if !matches!(dtype, DType::F64 | DType::I64) {
                        return Err(format!("a load of {dtype}"));
                    }
                    let dst = s.new_reg(Class::V);
                    s.insts.push(MInst::Load {
                        dst,
                        ptr: u32::try_from(site).map_err(|e| e.to_string())?,
                        disp: disp(site, offset)?,
                    });
                    Src::V(dst)
                }
                Node::LoadWidened { site, offset } => {
                    let dst = s.new_reg(Class::V);
                    s.insts.push(MInst::LoadWiden {
                        dst,
                        ptr: u32::try_from(site).map_err(|e| e.to_string())?,
                        disp: disp(site, offset)?,
                    });
                    Src::V(dst)
                }
                Node::Gather {
                    param,
                    ref outer,
                    indices,
                    ..
                } => {
                    let g = gathers
                        .iter()
                        .position(|g| g.0 == param && g.1 == *outer)
                        .ok_or("internal: an unlisted gather")?;
                    let idx = s.reg(vals[indices]);
                    let bound = s.uniforms.arg(FoldWord::Bound {
                        gather: g,
                        less_one: isa == Isa::Avx2,
                    });
                    let mask = s.new_reg(match isa {
                        Isa::Avx512 => Class::K,
                        Isa::Avx2 => Class::V,
                    });
                    s.insts.push(MInst::CheckIndices {
                        dst: mask,
                        idx,
                        bound,
                    });
                    let dst = s.new_reg(Class::V);
                    s.insts.push(MInst::Gather {
                        dst,
                        idx,
                        mask,
                        ptr: u32::try_from(plan.sites.len() + g).map_err(|e| e.to_string())?,
                    });
                    Src::V(dst)
                }
                Node::Unary(uop, DType::F64, x) => {
                    // As the 128-bit code: the sign flipped or cleared, or the square root.
                    let (ins, mask) = match uop {
                        UnaryOp::Neg => (op::VPXOR, Some(1u64 << 63)),
                        UnaryOp::Abs => (op::VPAND, Some(!(1u64 << 63))),
                        UnaryOp::Sqrt => (op::VSQRTPD, None),
                        other => return Err(format!("{} has no wide form here", other.name())),
                    };
                    let dst = s.new_reg(Class::V);
                    let i = match mask {
                        Some(bits) => MInst::Op3 {
                            ins,
                            dst,
                            a: s.reg(vals[x]),
                            b: Src::U(s.uniforms.constant(bits)),
                            imm: None,
                        },
                        None => MInst::Op2 {
                            ins,
                            dst,
                            b: vals[x],
                            imm: None,
                        },
                    };
                    s.insts.push(i);
                    Src::V(dst)
                }
                // A cast to the type a value has already (`i64` column indices cast to `i64`).
                Node::Cast(from, to, x) if from == to => vals[x],
                Node::Fma(DType::F64, x, y, z) => {
                    if !Isa::fma_detected() {
                        return Err("fma on a CPU without the FMA instructions".into());
                    }
                    Src::V(s.fma(vals[x], vals[y], vals[z]))
                }
                Node::Fma(t, ..) => return Err(format!("fma on {t} has no wide form here")),
                Node::Unary(..) | Node::Cast(..) => {
                    return Err("a unary operation on integers, or a cast".into());
                }
            };
            vals.push(v);
        }
        for (g, &root) in plan.roots.iter().enumerate() {
            carried[g] = s.reg(vals[root]);
        }
    }
    for (&(to, _), &src) in pinned.iter().zip(&carried) {
        s.insts.push(MInst::Pin { to, src });
    }
    let pointers = plan.sites.len() + gathers.len();
    let words = pointers + s.uniforms.args.len();
    // The step's offset counts elements; each site scales it by its element's size.
    let mut scales: Vec<u8> = site_size
        .iter()
        .map(|&size| u8::from(size == 8) + 2)
        .collect();
    scales.resize(pointers, 0);
    let (code, table, _) = assemble(Body {
        isa,
        insts: &s.insts,
        classes: &s.classes,
        consts: &s.uniforms.consts,
        scales,
        uniforms: s.uniforms.args.len(),
        advance: i32::try_from(UNROLL * stride).map_err(|e| e.to_string())?,
        carry: Some(Carry {
            word: u32::try_from(words).map_err(|e| e.to_string())?,
            pinned,
        }),
        tail: None,
    })?;
    let mut args: Vec<FoldWord> = (0..plan.sites.len()).map(FoldWord::Site).collect();
    args.extend((0..gathers.len()).map(FoldWord::GatherRow));
    args.extend(s.uniforms.args);
    Ok(FoldBody {
        isa,
        code,
        table,
        args,
        stride,
        gathers,
    })
}

/// The selector's state.
struct Sel {
    isa: Isa,
    insts: Vec<MInst>,
    classes: Vec<Class>,
    uniforms: Uniforms<FoldWord>,
}

impl Emit for Sel {
    fn isa(&self) -> Isa {
        self.isa
    }

    fn fresh(&mut self, c: Class) -> VReg {
        self.new_reg(c)
    }

    fn emit(&mut self, i: MInst) {
        self.insts.push(i);
    }
}

impl Sel {
    fn new_reg(&mut self, c: Class) -> VReg {
        self.classes.push(c);
        VReg(self.classes.len() as u32 - 1)
    }

    /// `s` in a vector register (a uniform is broadcast into a fresh one).
    fn reg(&mut self, s: Src) -> VReg {
        match s {
            Src::V(r) => r,
            Src::U(u) => {
                let dst = self.new_reg(Class::V);
                self.insts.push(MInst::Bcast { dst, u });
                dst
            }
        }
    }
}
