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
//! Two exceptions to rule 3. On a kernel that runs on one point
//! ([`FusionFacts::one_point`]), two rank-0 loops each run their body exactly once, so fused
//! (`L1`'s body, then `L2`'s) they make the same accesses in the same order as unfused: their
//! conflicts between distinct parameters are fine, except where one of them is a reduction (a
//! reduction's result lands when the task ends). And a load in `L1` and a store in `L2` to *distinct* parameters that
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
///
/// Linear in the kernel: the loop being built keeps a summary of its accesses indexed by alias
/// set (`Group`), so checking the next loop looks only at the accesses that may overlap its
/// own, and a fused loop's body grows in place.
pub fn fuse_loops(kernel: &Kernel, facts: &FusionFacts) -> (Kernel, Vec<FusionDecision>) {
    let mut out: Vec<Inst> = Vec::with_capacity(kernel.body.len());
    let mut decisions = Vec::new();
    // The loop the next one may fuse into: its position in `out`, and its accesses.
    let mut current: Option<(usize, Group)> = None;
    // Top-level instructions since the current loop.
    let mut pending: Vec<Inst> = Vec::new();
    let mut number = 0;
    for inst in &kernel.body {
        let Op::Parallel(second) = &inst.op else {
            pending.push(inst.clone());
            continue;
        };
        number += 1;
        let a2 = accesses(second, number);
        if let Some((pos, group)) = current.as_mut()
            && let Some(Inst {
                op: Op::Parallel(first),
                ..
            }) = out.get(*pos)
            && inst.results.is_empty()
        {
            match legality(facts, &kernel.params, first, group, &pending, second, &a2) {
                Ok(reason) => {
                    let hoisted = pending.len();
                    out.splice(*pos..*pos, pending.drain(..));
                    *pos += hoisted;
                    if let Op::Parallel(first) = &mut out[*pos].op {
                        group.absorb(facts, a2, &second.indices, &first.indices);
                        append(first, second);
                    }
                    decisions.push(FusionDecision {
                        first: group.number,
                        second: number,
                        fused: true,
                        reason,
                    });
                    continue;
                }
                Err(reason) => decisions.push(FusionDecision {
                    first: group.number,
                    second: number,
                    fused: false,
                    reason,
                }),
            }
        }
        out.append(&mut pending);
        out.push(inst.clone());
        let mut group = Group::new(number);
        group.absorb(facts, a2, &[], &[]);
        current = Some((out.len() - 1, group));
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
struct Acc {
    param: u32,
    kind: AccessKind,
    /// Its indices, as the loop that holds it names them (for messages).
    indices: Vec<ValueId>,
    /// Whether the indices are the loop's index tuple.
    at_index: bool,
    /// Whether it sits in a `for` loop.
    in_for: bool,
    /// The loop's number.
    loop_number: usize,
}

impl Acc {
    fn describe(&self) -> String {
        format!(
            "{} at {} in loop {}{}",
            self.kind.verb(),
            index_list(&self.indices),
            self.loop_number,
            if self.in_for { " (in a for loop)" } else { "" }
        )
    }
}

fn accesses(l: &ParallelLoop, number: usize) -> Vec<Acc> {
    let mut out = Vec::new();
    for_each_access(&l.body, false, &mut |a, kind, in_for| {
        out.push(Acc {
            param: a.param,
            kind,
            indices: a.indices.clone(),
            at_index: a.indices == l.indices,
            in_for,
            loop_number: number,
        })
    });
    out
}

/// The accesses of the loop being built (the first loop of a group and those fused into it),
/// in program order, all numbered as the group's first loop, indexed so that a check
/// against the next loop costs what that loop's own accesses may overlap, not the group's
/// size.
struct Group {
    /// The number of the group's first loop.
    number: usize,
    accs: Vec<Acc>,
    /// Per alias set (`None`: unknown), the positions in `accs` of its parameters' accesses.
    by_alias: std::collections::HashMap<Option<u32>, Vec<usize>>,
    /// Per parameter, the positions in `accs` of its accesses.
    by_param: std::collections::HashMap<u32, Vec<usize>>,
    /// The parameters the group writes or reduces into, their alias sets, and whether one
    /// of them has an unknown alias set.
    written: BTreeSet<u32>,
    written_alias: BTreeSet<u32>,
    written_unknown: bool,
}

impl Group {
    fn new(number: usize) -> Group {
        Group {
            number,
            accs: Vec::new(),
            by_alias: Default::default(),
            by_param: Default::default(),
            written: BTreeSet::new(),
            written_alias: BTreeSet::new(),
            written_unknown: false,
        }
    }

    /// Adds a fused loop's accesses, its indices `from` renamed to the group's `to`.
    fn absorb(&mut self, facts: &FusionFacts, accs: Vec<Acc>, from: &[ValueId], to: &[ValueId]) {
        for mut a in accs {
            for v in &mut a.indices {
                if let Some(k) = from.iter().position(|j| j == v)
                    && let Some(&w) = to.get(k)
                {
                    *v = w;
                }
            }
            a.loop_number = self.number;
            // An access the group already makes, the same way (a loop body of hundreds of
            // statements updates one array at the loop index in each), adds nothing to the
            // check, whose pairs are judged one by one: kept once, so that the check of each
            // next loop costs the distinct accesses it may overlap, not the group's length.
            let same = |b: &Acc| {
                b.param == a.param
                    && b.kind == a.kind
                    && b.indices == a.indices
                    && b.at_index == a.at_index
                    && b.in_for == a.in_for
            };
            if self
                .by_param
                .get(&a.param)
                .is_some_and(|ats| ats.iter().any(|&i| same(&self.accs[i])))
            {
                continue;
            }
            let at = self.accs.len();
            let alias = facts.alias_of(a.param);
            if a.kind.writes() {
                self.written.insert(a.param);
                match alias {
                    Some(set) => {
                        self.written_alias.insert(set);
                    }
                    None => self.written_unknown = true,
                }
            }
            self.by_alias.entry(alias).or_default().push(at);
            self.by_param.entry(a.param).or_default().push(at);
            self.accs.push(a);
        }
    }

    /// A parameter the group writes that may overlap `param`, if any.
    fn written_overlapping(&self, facts: &FusionFacts, param: u32) -> Option<u32> {
        let may = self.written.contains(&param)
            || self.written_unknown
            || match facts.alias_of(param) {
                Some(set) => self.written_alias.contains(&set),
                None => !self.written.is_empty(),
            };
        if !may {
            return None;
        }
        self.written
            .iter()
            .copied()
            .find(|&w| facts.may_alias(w, param))
    }

    /// The positions of the group's accesses whose parameters may overlap `param`, in
    /// program order.
    fn overlapping(&self, facts: &FusionFacts, param: u32) -> Vec<usize> {
        let mut out: Vec<usize> = match facts.alias_of(param) {
            None => (0..self.accs.len()).collect(),
            Some(set) => {
                let mut v = self.by_alias.get(&Some(set)).cloned().unwrap_or_default();
                v.extend(self.by_alias.get(&None).into_iter().flatten());
                v
            }
        };
        out.sort_unstable();
        out
    }
}

/// Checks the fusion rule for the group `first` (its accesses `a1`) and the next loop
/// `second` (its accesses `a2`); `Ok` carries the reason for fusing, `Err` the reason not to.
fn legality(
    facts: &FusionFacts,
    params: &[Param],
    first: &ParallelLoop,
    a1: &Group,
    between: &[Inst],
    second: &ParallelLoop,
    a2: &[Acc],
) -> Result<String, String> {
    let n1 = a1.number;
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
    let mut hoist_error = None;
    for_each_access(between, false, &mut |a, _, _| {
        if hoist_error.is_none()
            && let Some(w) = a1.written_overlapping(facts, a.param)
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
    // The pairs that may conflict, in the order of the group's accesses, then the loop's.
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (j, y) in a2.iter().enumerate() {
        pairs.extend(a1.overlapping(facts, y.param).into_iter().map(|i| (i, j)));
    }
    pairs.sort_unstable();
    // Whether each loop's body runs exactly once (see `FusionFacts::one_point`).
    let once = facts.one_point && first.indices.is_empty() && second.indices.is_empty();
    // Conflicting parameters that need every access at the loop index.
    let mut shared: BTreeSet<u32> = BTreeSet::new();
    for (i, j) in pairs {
        let (x, y) = (&a1.accs[i], &a2[j]);
        if !(x.kind.writes() || y.kind.writes()) || !facts.may_alias(x.param, y.param) {
            continue;
        }
        // One point, rank-0 loops: each body runs once, and fused they run in the same order.
        if once
            && !matches!(x.kind, AccessKind::Reduce(_))
            && !matches!(y.kind, AccessKind::Reduce(_))
        {
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
            if matches!(p, ReduceOp::Sum | ReduceOp::Prod) && (float(x.param) || float(y.param)) {
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
    for &p in &shared {
        let ours = a1
            .by_param
            .get(&p)
            .into_iter()
            .flatten()
            .map(|&i| &a1.accs[i]);
        let all = ours.chain(a2.iter().filter(|a| a.param == p));
        if let Some(bad) = all.clone().find(|a| !a.at_index) {
            // Name a conflicting access of the other loop, preferring a write.
            let others: Vec<&Acc> = all.filter(|a| a.loop_number != bad.loop_number).collect();
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

/// Appends `second`'s body to `first`'s, `second`'s indices replaced by `first`'s.
fn append(first: &mut ParallelLoop, second: &ParallelLoop) {
    let mut body2 = second.body.clone();
    map_uses(
        &mut body2,
        &mut |v| match second.indices.iter().position(|&j| j == v) {
            Some(k) => first.indices.get(k).copied().unwrap_or(v),
            None => v,
        },
    );
    first.body.extend(body2);
}
