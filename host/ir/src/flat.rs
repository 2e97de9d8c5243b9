//! The flat form of the kernel IR: the mirror of the WIT interface `kernel-ir`, in which loop
//! bodies are regions named by index and values are numbered implicitly.
//!
//! A [`FlatKernel`] is a list of [`Region`]s; region 0 is the kernel body, and each loop op
//! names the region that is its body. Every region other than 0 is the body of exactly one
//! loop. Values are numbered in definition order, walking the body in pre-order:
//! - entering a `parallel` region defines one `i64` index per dimension of the store it
//!   iterates over;
//! - entering a `for` region defines the induction value, then one carried value per `init`;
//! - then each op in the region defines its results in turn: one for value ops, none for
//!   `store`, `reduce` and `parallel`, and one per `init` for `for`, after its whole region.
//!
//! A region's `yields` are the next values of its `for` loop's carried values; region 0 and
//! parallel regions have none.
//!
//! [`to_flat`] and [`from_flat`] convert; `from_flat(&to_flat(&k)) == Ok(renumber(&k))` for
//! every valid kernel `k` (see [`crate::renumber`]). [`from_flat`] checks the structure (region
//! indices, value numbers, parameter indices, limits) but not types or scopes: run
//! [`crate::validate()`] on its result.
//!
//! ```
//! use weft_ir::flat::{FlatKernel, FlatOp, Region, from_flat, to_flat};
//! use weft_ir::{DType, Param, Privilege, Scalar};
//!
//! let flat = FlatKernel {
//!     name: "fill".into(),
//!     params: vec![Param::Store { dtype: DType::F64, rank: 1, privilege: Privilege::Write }],
//!     regions: vec![
//!         Region { ops: vec![FlatOp::Parallel { over: 0, body: 1 }], yields: vec![] },
//!         // value 0 is the loop index; the constant is value 1
//!         Region {
//!             ops: vec![
//!                 FlatOp::Const(Scalar::F64(1.0)),
//!                 FlatOp::Store(weft_ir::flat::FlatAccess { param: 0, indices: vec![0] }, 1),
//!             ],
//!             yields: vec![],
//!         },
//!     ],
//! };
//! let kernel = from_flat(&flat).unwrap();
//! weft_ir::validate(&kernel).unwrap();
//! assert_eq!(to_flat(&kernel), flat);
//! ```

use crate::validate::{MAX_INSTS, MAX_LOOP_DEPTH, MAX_PARAMS, MAX_RANK, renumber};
use crate::{
    Access, BinaryOp, CmpOp, DType, ForLoop, Inst, Kernel, Op, ParallelLoop, Param, ReduceOp,
    Scalar, UnaryOp, ValueId,
};

/// A kernel in flat form (WIT `kernel`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlatKernel {
    /// A name for diagnostics.
    pub name: String,
    /// The parameters.
    pub params: Vec<Param>,
    /// The regions; region 0 is the body.
    pub regions: Vec<Region>,
}

/// A region: a list of ops and, for a `for` loop body, its yields (WIT `region`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Region {
    /// The ops, in order.
    pub ops: Vec<FlatOp>,
    /// For a `for` loop body: the carried values' next values.
    pub yields: Vec<u32>,
}

/// An element of a store parameter (WIT `access`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlatAccess {
    /// Index of the store parameter.
    pub param: u32,
    /// One index value per dimension.
    pub indices: Vec<u32>,
}

/// One operation (WIT `op`); value operands are value numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FlatOp {
    /// A constant.
    Const(Scalar),
    /// The value of a scalar parameter.
    Param(u32),
    /// A binary operation: operator, lhs, rhs.
    Binary(BinaryOp, u32, u32),
    /// A unary operation.
    Unary(UnaryOp, u32),
    /// A comparison: operator, lhs, rhs.
    Cmp(CmpOp, u32, u32),
    /// `cond ? a : b`.
    Select(u32, u32, u32),
    /// [`Op::Fma`].
    Fma(u32, u32, u32),
    /// A conversion.
    Cast(DType, u32),
    /// A reinterpretation of the bits as another type of the same size.
    Bitcast(DType, u32),
    /// A load.
    Load(FlatAccess),
    /// A store of a value.
    Store(FlatAccess, u32),
    /// A reduction of a value into an element.
    Reduce(FlatAccess, ReduceOp, u32),
    /// The extent of a store parameter's sub-store along a dimension.
    Extent {
        /// The store parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// The origin of a store parameter's sub-store along a dimension.
    Origin {
        /// The store parameter.
        param: u32,
        /// The dimension.
        dim: u32,
    },
    /// A parallel loop over store parameter `over`, with body region `body`.
    Parallel {
        /// The store parameter.
        over: u32,
        /// The body's region index.
        body: u32,
    },
    /// A sequential loop.
    For {
        /// Lower bound (inclusive).
        lo: u32,
        /// Upper bound (exclusive).
        hi: u32,
        /// Initial values of the carried values.
        init: Vec<u32>,
        /// The body's region index.
        body: u32,
    },
}

/// Why a flat kernel cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid flat kernel `{kernel}`: {message}")]
pub struct FlatError {
    /// The kernel's name.
    pub kernel: String,
    /// What is wrong.
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// Kernel -> flat
// ---------------------------------------------------------------------------------------------

/// Converts a kernel to flat form. Regions are numbered in pre-order.
///
/// The flat form cannot express some invalid kernels (a `for` loop whose carried values do not
/// match its initial values, a parallel loop with the wrong number of indices, values used but
/// never defined); their conversion does not fail, but it does not convert back to the same
/// kernel.
pub fn to_flat(kernel: &Kernel) -> FlatKernel {
    // After renumbering, each value's id is its number in definition order.
    let k = renumber(kernel);
    let mut regions = vec![Region::default()];
    flatten(&k.body, 0, &mut regions);
    FlatKernel {
        name: k.name,
        params: k.params,
        regions,
    }
}

fn flatten(body: &[Inst], region: usize, regions: &mut Vec<Region>) {
    let vs = |v: &[ValueId]| v.iter().map(|v| v.0).collect::<Vec<_>>();
    let acc = |a: &Access| FlatAccess {
        param: a.param,
        indices: vs(&a.indices),
    };
    for inst in body {
        let op = match &inst.op {
            Op::Const(s) => FlatOp::Const(*s),
            Op::Param(p) => FlatOp::Param(*p),
            Op::Binary(op, a, b) => FlatOp::Binary(*op, a.0, b.0),
            Op::Unary(op, a) => FlatOp::Unary(*op, a.0),
            Op::Cmp(op, a, b) => FlatOp::Cmp(*op, a.0, b.0),
            Op::Select(c, a, b) => FlatOp::Select(c.0, a.0, b.0),
            Op::Fma(a, b, c) => FlatOp::Fma(a.0, b.0, c.0),
            Op::Cast(t, a) => FlatOp::Cast(*t, a.0),
            Op::Bitcast(t, a) => FlatOp::Bitcast(*t, a.0),
            Op::Load(a) => FlatOp::Load(acc(a)),
            Op::Store(a, v) => FlatOp::Store(acc(a), v.0),
            Op::Reduce(a, op, v) => FlatOp::Reduce(acc(a), *op, v.0),
            Op::Extent { param, dim } => FlatOp::Extent {
                param: *param,
                dim: *dim,
            },
            Op::Origin { param, dim } => FlatOp::Origin {
                param: *param,
                dim: *dim,
            },
            Op::Parallel(p) => {
                let r = regions.len();
                regions.push(Region::default());
                flatten(&p.body, r, regions);
                FlatOp::Parallel {
                    over: p.over,
                    body: r as u32,
                }
            }
            Op::For(l) => {
                let r = regions.len();
                regions.push(Region {
                    ops: Vec::new(),
                    yields: vs(&l.yields),
                });
                flatten(&l.body, r, regions);
                FlatOp::For {
                    lo: l.lo.0,
                    hi: l.hi.0,
                    init: vs(&l.init),
                    body: r as u32,
                }
            }
        };
        regions[region].ops.push(op);
    }
}

// ---------------------------------------------------------------------------------------------
// Flat -> kernel
// ---------------------------------------------------------------------------------------------

/// Converts a flat kernel back to a kernel, numbering values in definition order.
///
/// Fails, never panics, on malformed input: a region index out of range, region 0 used as a
/// loop body, a region used as the body of more than one loop or of a loop inside itself, a
/// region not reachable from region 0, yields on region 0 or on a parallel region, a parallel
/// loop over a parameter that is not a store (or of rank above [`MAX_RANK`]), loops nested
/// deeper than [`MAX_LOOP_DEPTH`], a parameter index out of range, or a value number not below
/// the number of values the kernel defines. Types and scopes are left to [`crate::validate()`].
pub fn from_flat(flat: &FlatKernel) -> Result<Kernel, FlatError> {
    let fail = |message: String| FlatError {
        kernel: flat.name.clone(),
        message,
    };
    check_size(
        flat.params.len(),
        flat.regions.iter().map(|r| r.ops.len()).sum(),
    )
    .map_err(fail)?;
    // Pass 1: the region tree and the number of values.
    let mut used = vec![false; flat.regions.len()];
    if flat.regions.is_empty() {
        return Err(fail(
            "the kernel has no regions (region 0 is the body)".into(),
        ));
    }
    used[0] = true;
    let mut count = 0u64;
    count_region(flat, 0, 0, &mut used, &mut count).map_err(fail)?;
    if let Some(r) = used.iter().position(|u| !u) {
        return Err(fail(format!("region {r} is not reachable from region 0")));
    }
    if !flat.regions[0].yields.is_empty() {
        return Err(fail("region 0 (the kernel body) has yields".into()));
    }
    // Pass 2: build, checking value numbers and parameter indices.
    let mut b = Build {
        flat,
        count: count as u32,
        next: 0,
    };
    let body = b.region(0).map_err(fail)?;
    Ok(Kernel {
        name: flat.name.clone(),
        params: flat.params.clone(),
        body,
    })
}

/// Checks a kernel's parameter and instruction counts against [`MAX_PARAMS`] and
/// [`MAX_INSTS`].
pub fn check_size(params: usize, insts: usize) -> Result<(), String> {
    if params > MAX_PARAMS {
        return Err(format!(
            "{params} parameters, more than the limit of {MAX_PARAMS}"
        ));
    }
    if insts > MAX_INSTS {
        return Err(format!(
            "{insts} instructions, more than the limit of {MAX_INSTS}"
        ));
    }
    Ok(())
}

/// Checks the tree of regions below `r` (marking each used once), and counts values.
fn count_region(
    flat: &FlatKernel,
    r: usize,
    depth: usize,
    used: &mut [bool],
    count: &mut u64,
) -> Result<(), String> {
    let add = |n: u64, count: &mut u64| -> Result<(), String> {
        *count += n;
        if *count > u64::from(u32::MAX) {
            return Err("the kernel defines more than 2^32 - 1 values".into());
        }
        Ok(())
    };
    for (i, op) in flat.regions[r].ops.iter().enumerate() {
        let at = || format!("region {r}, op {i}");
        let (body, entry, results) = match op {
            FlatOp::Parallel { over, body } => {
                let rank = match flat.params.get(*over as usize) {
                    Some(Param::Store { rank, .. }) if *rank <= MAX_RANK => *rank,
                    Some(Param::Store { rank, .. }) => {
                        return Err(format!(
                            "{}: parallel loop over parameter {over} of rank {rank}, more than \
                             the maximum {MAX_RANK}",
                            at()
                        ));
                    }
                    Some(Param::Scalar { .. }) => {
                        return Err(format!(
                            "{}: parallel loop over parameter {over}, which is a scalar",
                            at()
                        ));
                    }
                    None => {
                        return Err(format!(
                            "{}: parallel loop over unknown parameter {over} (the kernel has {} \
                             parameters)",
                            at(),
                            flat.params.len()
                        ));
                    }
                };
                (*body, u64::from(rank), 0)
            }
            FlatOp::For { init, body, .. } => {
                let n = init.len() as u64;
                (*body, 1 + n, n)
            }
            FlatOp::Store(..) | FlatOp::Reduce(..) => continue,
            _ => {
                add(1, count)?;
                continue;
            }
        };
        let b = body as usize;
        if b >= flat.regions.len() {
            return Err(format!(
                "{}: body region {body} is out of range (the kernel has {} regions)",
                at(),
                flat.regions.len()
            ));
        }
        if b == 0 {
            return Err(format!(
                "{}: region 0 is the kernel body and cannot be a loop body",
                at()
            ));
        }
        if used[b] {
            return Err(format!(
                "{}: region {body} is already the body of another loop (or encloses this one)",
                at()
            ));
        }
        used[b] = true;
        if depth >= MAX_LOOP_DEPTH {
            return Err(format!(
                "{}: loops nest more than {MAX_LOOP_DEPTH} deep",
                at()
            ));
        }
        if matches!(op, FlatOp::Parallel { .. }) && !flat.regions[b].yields.is_empty() {
            return Err(format!(
                "{}: parallel loop body region {body} has yields",
                at()
            ));
        }
        add(entry, count)?;
        count_region(flat, b, depth + 1, used, count)?;
        add(results, count)?;
    }
    Ok(())
}

struct Build<'f> {
    flat: &'f FlatKernel,
    /// The number of values the kernel defines.
    count: u32,
    /// The next value number.
    next: u32,
}

impl Build<'_> {
    fn def(&mut self) -> ValueId {
        let v = ValueId(self.next);
        self.next += 1;
        v
    }

    fn defs(&mut self, n: u32) -> Vec<ValueId> {
        (0..n).map(|_| self.def()).collect()
    }

    fn region(&mut self, r: usize) -> Result<Vec<Inst>, String> {
        let flat = self.flat;
        let count = self.count;
        let ops = &flat.regions[r].ops;
        let mut body = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            let at = || format!("region {r}, op {i}");
            let v = |n: u32| -> Result<ValueId, String> {
                if n < count {
                    Ok(ValueId(n))
                } else {
                    Err(format!(
                        "{}: value {n} is out of range (the kernel defines {count} values)",
                        at()
                    ))
                }
            };
            let vs = |ns: &[u32]| ns.iter().map(|&n| v(n)).collect::<Result<Vec<_>, _>>();
            let param = |p: u32| -> Result<u32, String> {
                if (p as usize) < flat.params.len() {
                    Ok(p)
                } else {
                    Err(format!(
                        "{}: unknown parameter {p} (the kernel has {} parameters)",
                        at(),
                        flat.params.len()
                    ))
                }
            };
            let acc = |a: &FlatAccess| -> Result<Access, String> {
                Ok(Access {
                    param: param(a.param)?,
                    indices: vs(&a.indices)?,
                })
            };
            let op = match op {
                FlatOp::Const(s) => Op::Const(*s),
                FlatOp::Param(p) => Op::Param(param(*p)?),
                FlatOp::Binary(op, a, b) => Op::Binary(*op, v(*a)?, v(*b)?),
                FlatOp::Unary(op, a) => Op::Unary(*op, v(*a)?),
                FlatOp::Cmp(op, a, b) => Op::Cmp(*op, v(*a)?, v(*b)?),
                FlatOp::Select(c, a, b) => Op::Select(v(*c)?, v(*a)?, v(*b)?),
                FlatOp::Fma(a, b, c) => Op::Fma(v(*a)?, v(*b)?, v(*c)?),
                FlatOp::Cast(t, a) => Op::Cast(*t, v(*a)?),
                FlatOp::Bitcast(t, a) => Op::Bitcast(*t, v(*a)?),
                FlatOp::Load(a) => Op::Load(acc(a)?),
                FlatOp::Store(a, x) => Op::Store(acc(a)?, v(*x)?),
                FlatOp::Reduce(a, op, x) => Op::Reduce(acc(a)?, *op, v(*x)?),
                FlatOp::Extent { param: p, dim } => Op::Extent {
                    param: param(*p)?,
                    dim: *dim,
                },
                FlatOp::Origin { param: p, dim } => Op::Origin {
                    param: param(*p)?,
                    dim: *dim,
                },
                FlatOp::Parallel { over, body: b } => {
                    // Pass 1 checked `over` and `b`.
                    let rank = match flat.params.get(*over as usize) {
                        Some(Param::Store { rank, .. }) => *rank,
                        _ => 0,
                    };
                    let indices = self.defs(rank);
                    let inner = self.region(*b as usize)?;
                    body.push(Inst {
                        results: Vec::new(),
                        op: Op::Parallel(ParallelLoop {
                            over: *over,
                            indices,
                            body: inner,
                        }),
                    });
                    continue;
                }
                FlatOp::For {
                    lo,
                    hi,
                    init,
                    body: b,
                } => {
                    let (lo, hi, init_vs) = (v(*lo)?, v(*hi)?, vs(init)?);
                    let n = init_vs.len() as u32;
                    let induction = self.def();
                    let carried = self.defs(n);
                    let inner = self.region(*b as usize)?;
                    let yields = flat.regions[*b as usize]
                        .yields
                        .iter()
                        .map(|&y| {
                            if y < count {
                                Ok(ValueId(y))
                            } else {
                                Err(format!(
                                    "region {b}: yielded value {y} is out of range (the kernel \
                                     defines {count} values)"
                                ))
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let results = self.defs(n);
                    body.push(Inst {
                        results,
                        op: Op::For(ForLoop {
                            lo,
                            hi,
                            induction,
                            init: init_vs,
                            carried,
                            body: inner,
                            yields,
                        }),
                    });
                    continue;
                }
            };
            let results = match op {
                Op::Store(..) | Op::Reduce(..) => Vec::new(),
                _ => vec![self.def()],
            };
            body.push(Inst { results, op });
        }
        Ok(body)
    }
}
