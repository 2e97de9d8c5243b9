//! Loop fusion: adjacent top-level parallel loops over the same iteration space become one.
//!
//! # When two loops fuse
//!
//! Two top-level parallel loops `L1` (indices `I`) and `L2` (indices `J`) that follow each
//! other, with only pure instructions between them, fuse when all of these hold:
//!
//! 1. **Same iteration space.** They have the same rank, and their `over` parameters are the
//!    same parameter or two parameters of one iteration class ([`FusionFacts::class`]).
//! 2. **Hoistable instructions between.** The instructions between the loops are pure (the
//!    validator already forbids stores outside parallel loops), and none of them loads from a
//!    store that `L1` writes or reduces into, or that may overlap one ([`FusionFacts::alias`]).
//!    They are hoisted before `L1`, which defines no values, so nothing they use moves past its
//!    definition.
//! 3. **Same-element access to shared stores.** Call two accesses, one in each loop, a
//!    *conflict* when at least one of them writes (a store or a reduction) and their
//!    parameters may overlap. For every conflict:
//!    - if both are reductions with the same operator, it is fine, at any indices: reductions
//!      commute (this is how several reductions into different rank-0 stores live in one fused
//!      loop), unless they are float sums or products: those follow the canonical order
//!      ([`crate::reduction`]), one tree per loop, and fused into one loop each point would
//!      fold its two contributions before the tree, in other bits;
//!    - otherwise both must name the *same* parameter `X` (two distinct parameters that may
//!      overlap, such as a stencil's shifted views of one grid, refuse fusion), and then every
//!      access to `X` in both loops, loads included and wherever it sits (nested `for` loops
//!      included), must be at exactly its loop's index tuple: `X[I]` in `L1`, `X[J]` in `L2`,
//!      the loop's index values themselves, in order.
//!
//! One exception to rule 3: a load in `L1` and a store in `L2` to *distinct* parameters that
//! may overlap do not conflict when `L2`'s parameter is deferred ([`FusionFacts::deferred`]):
//! its stores land when the fused loop ends, so every load of `L1` still reads what it read
//! unfused. This is how a stencil's sweep (`work = f(shifted views of grid)`, then
//! `center[:] = work`) becomes one loop. The reverse (a deferred store in `L1`, a load in
//! `L2`) still conflicts: unfused, `L2` would read the new values.
//!
//! The fused loop is `L1`'s, with `L2`'s body appended and `J` replaced by `I`.
//!
//! **Why this is sound.** The fused loop runs, for each point `p`, `L1`'s body at `p` and then
//! `L2`'s body at `p`. Unfused, all of `L1` runs before any of `L2`. The two orders differ only
//! in how `L2(p)` is placed relative to `L1(q)` for `q` after `p`. Memory that no conflict
//! involves is not shared between the two (or is only read), so the order is invisible. For a
//! conflicting store `X`, every access in both loops at point `p` touches only the element
//! `X[p]`, and `L1(q)` for `q != p` touches only `X[q]`: the accesses to each element come in
//! the same order fused and unfused (`L1(p)` then `L2(p)`). Since the iteration spaces are the
//! same, `p` ranges over the same points in both. Reductions with one operator commute with each
//! other.
//!
//! The rule is monotone: fusing a loop into `L1` only adds accesses, so a pair refused once
//! stays refused. One left-to-right sweep over adjacent pairs therefore reaches the fixed point:
//! [`fuse_loops`] applied to its own output changes nothing.

use std::collections::BTreeSet;
use std::fmt;

use crate::passes::pipeline::FusionFacts;
use crate::passes::util::{AccessKind, for_each_access, index_list, map_uses};
use crate::{DType, Inst, Kernel, Op, ParallelLoop, Param, ReduceOp, ValueId};

/// What loop fusion decided for one pair of adjacent parallel loops.
///
/// Loops are numbered from 1 in program order among the input kernel's top-level parallel
/// loops; a fused group keeps its first loop's number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusionDecision {
    /// The number of the first loop (or of the group it now heads).
    pub first: usize,
    /// The number of the second loop.
    pub second: usize,
    /// Whether the second loop was fused into the first.
    pub fused: bool,
    /// Why (for a refusal, the first rule that failed and the parameter and accesses at fault).
    pub reason: String,
}

impl fmt::Display for FusionDecision {
    /// `loop 2 fused into loop 1: ...` or `loop 2 not fused with loop 1: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fused {
            write!(
                f,
                "loop {} fused into loop {}: {}",
                self.second, self.first, self.reason
            )
        } else {
            write!(
                f,
                "loop {} not fused with loop {}: {}",
                self.second, self.first, self.reason
            )
        }
    }
}

/// Fuses adjacent top-level parallel loops wherever the rule in the [module
/// documentation](self) allows, and returns the new kernel with one decision per pair of
/// loops considered.
pub fn fuse_loops(kernel: &Kernel, facts: &FusionFacts) -> (Kernel, Vec<FusionDecision>) {
    let mut out: Vec<Inst> = Vec::with_capacity(kernel.body.len());
    let mut decisions = Vec::new();
    // The loop the next one may fuse into: its position in `out` and its number.
    let mut current: Option<(usize, usize)> = None;
    // Top-level instructions since the current loop.
    let mut pending: Vec<Inst> = Vec::new();
    let mut number = 0;
    for inst in &kernel.body {
        let Op::Parallel(second) = &inst.op else {
            pending.push(inst.clone());
            continue;
        };
        number += 1;
        if let Some((pos, first_number)) = current
            && let Some(Inst {
                op: Op::Parallel(first),
                ..
            }) = out.get(pos)
            && inst.results.is_empty()
        {
            match legality(
                facts,
                &kernel.params,
                first,
                first_number,
                &pending,
                second,
                number,
            ) {
                Ok(reason) => {
                    let merged = merge(first, second);
                    let hoisted = pending.len();
                    out.splice(pos..pos, pending.drain(..));
                    let pos = pos + hoisted;
                    out[pos].op = Op::Parallel(merged);
                    current = Some((pos, first_number));
                    decisions.push(FusionDecision {
                        first: first_number,
                        second: number,
                        fused: true,
                        reason,
                    });
                    continue;
                }
                Err(reason) => decisions.push(FusionDecision {
                    first: first_number,
                    second: number,
                    fused: false,
                    reason,
                }),
            }
        }
        out.append(&mut pending);
        out.push(inst.clone());
        current = Some((out.len() - 1, number));
    }
    out.append(&mut pending);
    let fused = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body: out,
    };
    (fused, decisions)
}

/// One memory access of a loop, for the legality check.
struct Acc<'a> {
    param: u32,
    kind: AccessKind,
    indices: &'a [ValueId],
    /// Whether the indices are the loop's index tuple.
    at_index: bool,
    /// Whether it sits in a `for` loop.
    in_for: bool,
    /// The loop's number.
    loop_number: usize,
}

impl Acc<'_> {
    fn describe(&self) -> String {
        format!(
            "{} at {} in loop {}{}",
            self.kind.verb(),
            index_list(self.indices),
            self.loop_number,
            if self.in_for { " (in a for loop)" } else { "" }
        )
    }
}

fn accesses(l: &ParallelLoop, number: usize) -> Vec<Acc<'_>> {
    let mut out = Vec::new();
    for_each_access(&l.body, false, &mut |a, kind, in_for| {
        out.push(Acc {
            param: a.param,
            kind,
            indices: &a.indices,
            at_index: a.indices == l.indices,
            in_for,
            loop_number: number,
        })
    });
    out
}

/// Checks the fusion rule; `Ok` carries the reason for fusing, `Err` the reason not to.
fn legality(
    facts: &FusionFacts,
    params: &[Param],
    first: &ParallelLoop,
    n1: usize,
    between: &[Inst],
    second: &ParallelLoop,
    n2: usize,
) -> Result<String, String> {
    if first.indices.len() != second.indices.len() {
        return Err(format!(
            "the loops have different ranks ({} and {})",
            first.indices.len(),
            second.indices.len()
        ));
    }
    if !facts.same_space(first.over, second.over) {
        return Err(format!(
            "they run over param {} and param {}, which are not in one iteration class",
            first.over, second.over
        ));
    }
    let a1 = accesses(first, n1);
    let a2 = accesses(second, n2);
    let written1: BTreeSet<u32> = a1
        .iter()
        .filter(|a| a.kind.writes())
        .map(|a| a.param)
        .collect();
    let mut hoist_error = None;
    for_each_access(between, false, &mut |a, _, _| {
        if hoist_error.is_none()
            && let Some(w) = written1.iter().find(|&&w| facts.may_alias(w, a.param))
        {
            hoist_error = Some(format!(
                "a top-level load of param {} between them reads what loop {n1} writes \
                 (param {w})",
                a.param
            ));
        }
    });
    if let Some(e) = hoist_error {
        return Err(e);
    }
    // Conflicting parameters that need every access at the loop index.
    let mut shared: BTreeSet<u32> = BTreeSet::new();
    for x in &a1 {
        for y in &a2 {
            if !(x.kind.writes() || y.kind.writes()) || !facts.may_alias(x.param, y.param) {
                continue;
            }
            // A deferred store of the second loop lands after the fused loop ends, so the
            // first loop's loads of what it overwrites still read the old values.
            if x.param != y.param
                && matches!(x.kind, AccessKind::Load)
                && matches!(y.kind, AccessKind::Store)
                && facts.is_deferred(y.param)
            {
                continue;
            }
            if let (AccessKind::Reduce(p), AccessKind::Reduce(q)) = (x.kind, y.kind)
                && p == q
            {
                // Each loop's float sum or product is one canonical tree over its points;
                // fused, each point would fold both contributions first, in other bits.
                let float = |param: u32| {
                    matches!(
                        params.get(param as usize),
                        Some(Param::Store {
                            dtype: DType::F32 | DType::F64,
                            ..
                        })
                    )
                };
                if matches!(p, ReduceOp::Sum | ReduceOp::Prod) && (float(x.param) || float(y.param))
                {
                    return Err(format!(
                        "param {} {} may be param {} {}: float {} reductions keep one \
                         canonical order per loop",
                        x.param,
                        x.describe(),
                        y.param,
                        y.describe(),
                        p.name()
                    ));
                }
                continue;
            }
            if x.param != y.param {
                return Err(format!(
                    "param {} {} may overlap param {} {}",
                    x.param,
                    x.describe(),
                    y.param,
                    y.describe()
                ));
            }
            shared.insert(x.param);
        }
    }
    for &p in &shared {
        let all = a1.iter().chain(&a2).filter(|a| a.param == p);
        if let Some(bad) = all.clone().find(|a| !a.at_index) {
            // Name a conflicting access of the other loop, preferring a write.
            let others: Vec<&Acc<'_>> = all.filter(|a| a.loop_number != bad.loop_number).collect();
            let other = others
                .iter()
                .find(|a| a.kind.writes() || !bad.kind.writes())
                .or(others.first());
            let loop_index = if bad.loop_number == n1 {
                &first.indices
            } else {
                &second.indices
            };
            let (w, r) = match other {
                Some(o) if o.kind.writes() && !bad.kind.writes() => (o.describe(), bad.describe()),
                Some(o) => (bad.describe(), o.describe()),
                None => (bad.describe(), String::from("accessed in the other loop")),
            };
            return Err(format!(
                "param {p} {w} and {r}; fused loops may access it only at the loop index ({} \
                 in loop {})",
                index_list(loop_index),
                bad.loop_number
            ));
        }
    }
    let mut reason = if first.over == second.over {
        format!("both run over param {}", first.over)
    } else {
        format!(
            "params {} and {} are in one iteration class",
            first.over, second.over
        )
    };
    if !shared.is_empty() {
        let list: Vec<String> = shared.iter().map(u32::to_string).collect();
        reason.push_str(&format!(
            "; shared param(s) {} accessed only at the loop index",
            list.join(", ")
        ));
    }
    if !between.is_empty() {
        reason.push_str(&format!(
            "; {} instruction(s) between them hoisted",
            between.len()
        ));
    }
    Ok(reason)
}

/// `first` with `second`'s body appended, `second`'s indices replaced by `first`'s.
fn merge(first: &ParallelLoop, second: &ParallelLoop) -> ParallelLoop {
    let mut body2 = second.body.clone();
    map_uses(
        &mut body2,
        &mut |v| match second.indices.iter().position(|&j| j == v) {
            Some(k) => first.indices.get(k).copied().unwrap_or(v),
            None => v,
        },
    );
    let mut body = first.body.clone();
    body.extend(body2);
    ParallelLoop {
        over: first.over,
        indices: first.indices.clone(),
        body,
    }
}
