//! Producer inlining: a local temporary made by a small element-wise loop is recomputed where a
//! later loop of another shape reads it, and its loop and storage go.
//!
//! Loop fusion joins loops over one iteration space; a temporary that a loop of another rank
//! reads (`(alpha * A) @ x`: a 2-D loop writes `T = alpha * A`, a 1-D loop of dot products
//! reads `T[i, j]`) stays a scratch buffer the size of the matrix, written once and read once.
//! This pass removes it. A top-level parallel loop `P` is a *producer* of the local parameter
//! `T` ([`FusionFacts::local`]) when
//! 1. its body holds only value operations, loads whose indices are `P`'s own indices in order,
//!    and one store, to `T` at those indices (so `T[e] = f(e, L1[e], L2[e], ...)`), with at
//!    most [`MAX_OPS`] value operations and [`MAX_LOADS`] loads;
//! 2. `P` covers `T`: it runs over `T` or over a parameter of `T`'s iteration class, and every
//!    parameter `L` it loads is of that class too (so `L[e]` lies in bounds wherever `T[e]`
//!    does), is not `T` and may not overlap `T`;
//! 3. after `P`, nothing writes `T` or anything that may overlap a parameter `P` loads, and `T`
//!    is read only by loads inside later parallel loops, each of which *streams* it: the load
//!    sits at most one `for` loop deep and its indices include every index of its parallel
//!    loop, so a point reads each element of `T` about once (a product whose output has a
//!    dimension that `T` lacks, `(alpha * A) @ B`, reads each element once per column, and is
//!    left alone); and there are at most [`MAX_SITES`] such loads.
//!
//! Each load `v = load T[e]` becomes a copy of `P`'s body with `P`'s indices replaced by `e`,
//! whose stored value stands for `v`; `P` is deleted, and [`remove_unused_params`] then drops
//! `T`. The copies perform the same operations on the same operands in the same order, so each
//! value is the same bits as the element `P` stored.
//!
//! [`remove_unused_params`]: super::dce::remove_unused_params

use crate::passes::pipeline::FusionFacts;
use crate::passes::util::{Subst, for_each_access, map_uses, rename};
use crate::{Inst, Kernel, Op, ParallelLoop, ValueId};

/// The most value operations a producer's body may hold.
pub const MAX_OPS: usize = 8;

/// The most loads a producer's body may hold.
pub const MAX_LOADS: usize = 4;

/// The most loads of a temporary that its producer is copied into.
pub const MAX_SITES: usize = 16;

/// What [`inline_producers`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inlined {
    /// Each local parameter whose producer was inlined, with the number of loads that now
    /// recompute it.
    pub producers: Vec<(u32, usize)>,
}

/// Inlines the producers of local temporaries into the loads of the loops that read them (see
/// the [module documentation](self)).
pub fn inline_producers(kernel: &Kernel, facts: &FusionFacts) -> (Kernel, Inlined) {
    let mut k = kernel.clone();
    let mut report = Inlined::default();
    let mut next = k.value_bound();
    let mut at = 0;
    // A narrow unsigned temporary keeps only the low bits of what its producer computes: its
    // loads do not give the producer's value, so it is never inlined.
    let narrow = crate::passes::forward::narrow_params(kernel);
    while at < k.body.len() {
        let found = match &k.body[at].op {
            Op::Parallel(p) => producer(p, facts)
                .filter(|pr| narrow.get(pr.target as usize) != Some(&true))
                .filter(|pr| consumers_allow(&k.body[at + 1..], pr, facts))
                .map(|pr| (p.clone(), pr)),
            _ => None,
        };
        let Some((p, pr)) = found else {
            at += 1;
            continue;
        };
        let mut subst = Subst::new(&k);
        let mut sites = 0;
        for inst in &mut k.body[at + 1..] {
            if let Op::Parallel(q) = &mut inst.op {
                q.body = copy_into(&q.body, &p, &pr, &mut next, &mut subst, &mut sites);
            }
        }
        k.body.remove(at);
        map_uses(&mut k.body, &mut |v| subst.get(v));
        report.producers.push((pr.target, sites));
    }
    (k, report)
}

/// A producer loop's temporary, the value it stores and the parameters it loads.
struct Producer {
    target: u32,
    stored: ValueId,
    loads: Vec<u32>,
}

/// `p` as a producer of a local temporary (conditions 1 and 2), if it is one.
fn producer(p: &ParallelLoop, facts: &FusionFacts) -> Option<Producer> {
    let (mut ops, mut loads, mut store) = (0, Vec::new(), None);
    for inst in &p.body {
        match &inst.op {
            op if op.is_value() => ops += 1,
            Op::Load(a) if a.indices == p.indices => loads.push(a.param),
            Op::Store(a, v) if a.indices == p.indices && store.is_none() => {
                store = Some((a.param, *v));
            }
            _ => return None,
        }
    }
    let (target, stored) = store?;
    let ok = ops <= MAX_OPS
        && loads.len() <= MAX_LOADS
        && facts.is_local(target)
        && !facts.is_deferred(target)
        && facts.same_space(p.over, target)
        && loads
            .iter()
            .all(|&l| l != target && facts.same_space(l, target) && !facts.may_alias(l, target));
    ok.then_some(Producer {
        target,
        stored,
        loads,
    })
}

/// Whether the instructions after a producer allow it to be inlined (condition 3).
fn consumers_allow(after: &[Inst], pr: &Producer, facts: &FusionFacts) -> bool {
    let mut sites = 0usize;
    for inst in after {
        // Nothing writes the temporary or what the producer loads, and outside parallel loops
        // nothing reads the temporary.
        let mut ok = true;
        for_each_access(std::slice::from_ref(inst), false, &mut |a, kind, _| {
            let clobbers = kind.writes()
                && (a.param == pr.target || pr.loads.iter().any(|&l| facts.may_alias(l, a.param)));
            ok &= !clobbers;
        });
        let Op::Parallel(q) = &inst.op else {
            let mut reads = false;
            for_each_access(std::slice::from_ref(inst), false, &mut |a, _, _| {
                reads |= a.param == pr.target;
            });
            if reads || !ok {
                return false;
            }
            continue;
        };
        if !ok || !streams(&q.body, &q.indices, pr.target, 0, &mut sites) {
            return false;
        }
    }
    sites > 0 && sites <= MAX_SITES
}

/// Whether every load of `target` in `body` (at `depth` `for` loops inside a parallel loop
/// with `indices`) streams it, counting them into `sites`.
fn streams(
    body: &[Inst],
    indices: &[ValueId],
    target: u32,
    depth: usize,
    sites: &mut usize,
) -> bool {
    body.iter().all(|inst| match &inst.op {
        Op::Load(a) if a.param == target => {
            *sites += 1;
            depth <= 1 && indices.iter().all(|i| a.indices.contains(i))
        }
        Op::For(l) => streams(&l.body, indices, target, depth + 1, sites),
        _ => true,
    })
}

/// `body` with each load of the producer's temporary replaced by a copy of the producer's body
/// (its indices replaced by the load's), the load's value standing for the copy's stored one.
fn copy_into(
    body: &[Inst],
    p: &ParallelLoop,
    pr: &Producer,
    next: &mut u32,
    subst: &mut Subst,
    sites: &mut usize,
) -> Vec<Inst> {
    let mut out = Vec::with_capacity(body.len());
    for inst in body {
        match &inst.op {
            Op::Load(a) if a.param == pr.target => {
                *sites += 1;
                // Fresh values for the copy's definitions; the producer's indices become the
                // load's; anything else (values defined before the producer) stays.
                let mut fresh: Vec<(ValueId, ValueId)> = p
                    .indices
                    .iter()
                    .copied()
                    .zip(a.indices.iter().copied())
                    .collect();
                let defs: Vec<Inst> = p
                    .body
                    .iter()
                    .filter(|i| !matches!(i.op, Op::Store(..)))
                    .cloned()
                    .collect();
                for d in &defs {
                    for &r in &d.results {
                        fresh.push((r, ValueId(*next)));
                        *next += 1;
                    }
                }
                let mut value = |v: ValueId| {
                    fresh
                        .iter()
                        .find(|(from, _)| *from == v)
                        .map_or(v, |&(_, to)| to)
                };
                out.extend(rename(&defs, &mut value, &mut |q| q));
                let stored = value(pr.stored);
                if let Some(&r) = inst.results.first() {
                    subst.set(r, stored);
                }
            }
            Op::For(l) => {
                let mut l = l.clone();
                l.body = copy_into(&l.body, p, pr, next, subst, sites);
                out.push(Inst {
                    results: inst.results.clone(),
                    op: Op::For(l),
                });
            }
            _ => out.push(inst.clone()),
        }
    }
    out
}
