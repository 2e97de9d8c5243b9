//! Helpers shared by the fusion passes: walking uses, renaming values and parameters, and
//! summarising what a block does to memory.
//!
//! Every table here is indexed by value id or parameter index (never a hash map iterated), so
//! the passes built on them are deterministic. None of them panics on an invalid kernel.

use crate::{Access, ForLoop, Inst, Kernel, Op, ParallelLoop, ValueId};

/// Calls `f` on the values `op` uses directly: not those of a loop's body, nor a `for` loop's
/// yielded values (which belong to its body).
pub fn op_uses(op: &Op, f: &mut impl FnMut(ValueId)) {
    match op {
        Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => {}
        Op::Binary(_, a, b) | Op::Cmp(_, a, b) => {
            f(*a);
            f(*b);
        }
        Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => f(*a),
        Op::Select(c, a, b) | Op::Fma(c, a, b) => {
            f(*c);
            f(*a);
            f(*b);
        }
        Op::Load(a) => a.indices.iter().copied().for_each(f),
        Op::Store(a, v) | Op::Reduce(a, _, v) => {
            a.indices.iter().copied().for_each(&mut *f);
            f(*v);
        }
        Op::Parallel(_) => {}
        Op::For(l) => {
            f(l.lo);
            f(l.hi);
            l.init.iter().copied().for_each(f);
        }
    }
}

/// `body` with each instruction, at any depth, replaced by what `expand` gives for it (`None`
/// keeps it): the walk of the passes that expand single instructions into sequences (math
/// functions, float remainders). Loops are rebuilt around their expanded bodies.
pub(crate) fn expand_body(
    body: &[Inst],
    expand: &mut impl FnMut(&Inst) -> Option<Vec<Inst>>,
) -> Vec<Inst> {
    let mut out = Vec::with_capacity(body.len());
    for inst in body {
        let op = match &inst.op {
            Op::Parallel(p) => Op::Parallel(ParallelLoop {
                body: expand_body(&p.body, expand),
                ..p.clone()
            }),
            Op::For(l) => Op::For(ForLoop {
                body: expand_body(&l.body, expand),
                ..l.clone()
            }),
            _ => match expand(inst) {
                Some(insts) => {
                    out.extend(insts);
                    continue;
                }
                None => inst.op.clone(),
            },
        };
        out.push(Inst {
            results: inst.results.clone(),
            op,
        });
    }
    out
}

/// Rewrites the values `op` uses directly (as [`op_uses`] lists them) through `f`.
pub fn map_op_uses(op: &mut Op, f: &mut impl FnMut(ValueId) -> ValueId) {
    let mut m = |v: &mut ValueId| *v = f(*v);
    match op {
        Op::Const(_) | Op::Param(_) | Op::Extent { .. } | Op::Origin { .. } => {}
        Op::Binary(_, a, b) | Op::Cmp(_, a, b) => {
            m(a);
            m(b);
        }
        Op::Unary(_, a) | Op::Cast(_, a) | Op::Bitcast(_, a) => m(a),
        Op::Select(c, a, b) | Op::Fma(c, a, b) => {
            m(c);
            m(a);
            m(b);
        }
        Op::Load(a) => a.indices.iter_mut().for_each(m),
        Op::Store(a, v) | Op::Reduce(a, _, v) => {
            a.indices.iter_mut().for_each(&mut m);
            m(v);
        }
        Op::Parallel(_) => {}
        Op::For(l) => {
            m(&mut l.lo);
            m(&mut l.hi);
            l.init.iter_mut().for_each(m);
        }
    }
}

/// Rewrites every value *used* in `body` through `f`, recursing into loop bodies (definitions
/// are left alone).
pub fn map_uses(body: &mut [Inst], f: &mut impl FnMut(ValueId) -> ValueId) {
    for inst in body {
        map_op_uses(&mut inst.op, f);
        match &mut inst.op {
            Op::Parallel(p) => map_uses(&mut p.body, f),
            Op::For(l) => {
                map_uses(&mut l.body, f);
                for y in &mut l.yields {
                    *y = f(*y);
                }
            }
            _ => {}
        }
    }
}

/// Rewrites every parameter index named in `body` (by `param`, accesses, `extent`, `origin`
/// and parallel loops) through `f`.
pub(crate) fn map_params(body: &mut [Inst], f: &mut impl FnMut(u32) -> u32) {
    for inst in body {
        match &mut inst.op {
            Op::Param(p) | Op::Extent { param: p, .. } | Op::Origin { param: p, .. } => *p = f(*p),
            Op::Load(a) | Op::Store(a, _) | Op::Reduce(a, _, _) => a.param = f(a.param),
            Op::Parallel(p) => {
                p.over = f(p.over);
                map_params(&mut p.body, f);
            }
            Op::For(l) => map_params(&mut l.body, f),
            _ => {}
        }
    }
}

/// Calls `f` on every parameter index named in `body`.
pub(crate) fn for_each_param(body: &[Inst], f: &mut impl FnMut(u32)) {
    for inst in body {
        match &inst.op {
            Op::Param(p) | Op::Extent { param: p, .. } | Op::Origin { param: p, .. } => f(*p),
            Op::Load(a) | Op::Store(a, _) | Op::Reduce(a, _, _) => f(a.param),
            Op::Parallel(p) => {
                f(p.over);
                for_each_param(&p.body, f);
            }
            Op::For(l) => for_each_param(&l.body, f),
            _ => {}
        }
    }
}

/// How an instruction touches a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessKind {
    /// A load.
    Load,
    /// A store.
    Store,
    /// A reduction with this operator.
    Reduce(crate::ReduceOp),
}

impl AccessKind {
    /// Whether the access changes memory.
    pub(crate) fn writes(self) -> bool {
        !matches!(self, AccessKind::Load)
    }

    /// A past-tense verb for reports (`read`, `written`, `reduced`).
    pub(crate) fn verb(self) -> &'static str {
        match self {
            AccessKind::Load => "read",
            AccessKind::Store => "written",
            AccessKind::Reduce(_) => "reduced",
        }
    }
}

/// Calls `f` on every memory access in `body` (recursively), with its kind and whether it
/// sits inside a `for` loop of `body`.
pub(crate) fn for_each_access<'a>(
    body: &'a [Inst],
    in_for: bool,
    f: &mut impl FnMut(&'a Access, AccessKind, bool),
) {
    for inst in body {
        match &inst.op {
            Op::Load(a) => f(a, AccessKind::Load, in_for),
            Op::Store(a, _) => f(a, AccessKind::Store, in_for),
            Op::Reduce(a, op, _) => f(a, AccessKind::Reduce(*op), in_for),
            Op::Parallel(p) => for_each_access(&p.body, in_for, f),
            Op::For(l) => for_each_access(&l.body, true, f),
            _ => {}
        }
    }
}

/// Whether `body` stores or reduces anywhere (recursively).
pub(crate) fn has_effects(body: &[Inst]) -> bool {
    body.iter().any(|inst| match &inst.op {
        Op::Store(..) | Op::Reduce(..) => true,
        Op::Parallel(p) => has_effects(&p.body),
        Op::For(l) => has_effects(&l.body),
        _ => false,
    })
}

/// Whether `op` is a pure value operation: it has no effect on memory and its result depends
/// only on its operands (and on memory, for loads). Loads count as pure.
pub(crate) fn is_pure(op: &Op) -> bool {
    op.is_value() || matches!(op, Op::Load(_))
}

/// A copy of `body` with every value (definitions and uses) renamed through `value` and every
/// parameter index through `param`.
pub(crate) fn rename(
    body: &[Inst],
    value: &mut impl FnMut(ValueId) -> ValueId,
    param: &mut impl FnMut(u32) -> u32,
) -> Vec<Inst> {
    let mut out = Vec::with_capacity(body.len());
    for inst in body {
        let mut op = inst.op.clone();
        map_op_uses(&mut op, value);
        op = match op {
            Op::Param(p) => Op::Param(param(p)),
            Op::Extent { param: p, dim } => Op::Extent {
                param: param(p),
                dim,
            },
            Op::Origin { param: p, dim } => Op::Origin {
                param: param(p),
                dim,
            },
            Op::Load(mut a) => {
                a.param = param(a.param);
                Op::Load(a)
            }
            Op::Store(mut a, v) => {
                a.param = param(a.param);
                Op::Store(a, v)
            }
            Op::Reduce(mut a, o, v) => {
                a.param = param(a.param);
                Op::Reduce(a, o, v)
            }
            Op::Parallel(p) => Op::Parallel(ParallelLoop {
                over: param(p.over),
                indices: p.indices.iter().map(|&v| value(v)).collect(),
                body: rename(&p.body, value, param),
            }),
            Op::For(l) => {
                let induction = value(l.induction);
                let carried = l.carried.iter().map(|&v| value(v)).collect();
                let body = rename(&l.body, value, param);
                let yields = l.yields.iter().map(|&v| value(v)).collect();
                Op::For(ForLoop {
                    lo: l.lo,
                    hi: l.hi,
                    induction,
                    init: l.init,
                    carried,
                    body,
                    yields,
                })
            }
            other => other,
        };
        let results = inst.results.iter().map(|&v| value(v)).collect();
        out.push(Inst { results, op });
    }
    out
}

/// A table from value id to a value, sized for `kernel`, that maps every value to itself until
/// told otherwise. Lookups of ids outside the table give the id itself.
#[derive(Clone, Debug)]
pub(crate) struct Subst {
    map: Vec<ValueId>,
}

impl Subst {
    /// The identity on the values of `kernel`.
    pub(crate) fn new(kernel: &Kernel) -> Subst {
        let n = kernel.value_bound();
        Subst {
            map: (0..n).map(ValueId).collect(),
        }
    }

    /// From now on, `from` stands for `to` (resolved through earlier substitutions).
    pub(crate) fn set(&mut self, from: ValueId, to: ValueId) {
        let to = self.get(to);
        if let Some(slot) = self.map.get_mut(from.0 as usize) {
            *slot = to;
        }
    }

    /// What `v` stands for.
    pub(crate) fn get(&self, v: ValueId) -> ValueId {
        self.map.get(v.0 as usize).copied().unwrap_or(v)
    }
}

/// `[%a, %b]` for reports.
pub(crate) fn index_list(vs: &[ValueId]) -> String {
    let parts: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
    format!("[{}]", parts.join(", "))
}
