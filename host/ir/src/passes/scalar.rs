//! Scalar replacement of local temporaries.
//!
//! A *local* parameter ([`FusionFacts::local`]) is a temporary produced wholly inside the fused
//! task and read by nobody after it, so its contents at the end of the kernel do not matter.
//! Once [forwarding](super::forward) has replaced its loads by the values stored, a local that
//! no instruction loads any more is write-only: its stores (and reductions) are deleted, and the
//! values they stored live on only as SSA values. Parallel loops that run over it, and `extent`s
//! of it, are moved to another store parameter of its iteration class and rank (the lowest
//! such parameter that stays), so that nothing names it and
//! [`remove_unused_params`](super::dce::remove_unused_params) can drop it. A local that is
//! still loaded, or whose `origin` is read, or that is the only parameter of its iteration
//! space, stays (with the reason in [`ScalarReplacement::kept`]).

use crate::passes::pipeline::FusionFacts;
use crate::passes::util::{AccessKind, for_each_access};
use crate::{Inst, Kernel, Op, Param};

/// What [`scalar_replace`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScalarReplacement {
    /// Local parameters whose stores were deleted and that nothing names any more.
    pub replaced: Vec<u32>,
    /// Local parameters that stay, each with the reason.
    pub kept: Vec<(u32, String)>,
    /// Stores and reductions deleted.
    pub stores_deleted: usize,
}

/// Deletes the stores to local parameters that nothing loads (see the [module
/// documentation](self)).
pub fn scalar_replace(kernel: &Kernel, facts: &FusionFacts) -> (Kernel, ScalarReplacement) {
    let n = kernel.params.len();
    let mut loaded = vec![false; n];
    for_each_access(&kernel.body, false, &mut |a, kind, _| {
        if kind == AccessKind::Load
            && let Some(s) = loaded.get_mut(a.param as usize)
        {
            *s = true;
        }
    });
    let mut origin = vec![false; n];
    mark_origins(&kernel.body, &mut origin);
    let mut report = ScalarReplacement::default();
    // Locals whose stores go.
    let mut dead = vec![false; n];
    for p in 0..n {
        let is_store = matches!(kernel.params[p], Param::Store { .. });
        if !is_store || !facts.is_local(p as u32) {
            continue;
        }
        if loaded[p] {
            report.kept.push((
                p as u32,
                "still loaded (not every load could be replaced by a stored value)".into(),
            ));
        } else {
            dead[p] = true;
        }
    }
    // Where loops over (and extents of) a dead local go: another store of its class and rank.
    let rank = |p: usize| match kernel.params.get(p) {
        Some(Param::Store { rank, .. }) => Some(*rank),
        _ => None,
    };
    let mut substitute: Vec<Option<u32>> = vec![None; n];
    for p in 0..n {
        if !dead[p] {
            continue;
        }
        substitute[p] = (0..n).find_map(|q| {
            let ok = q != p
                && !dead[q]
                && rank(q).is_some()
                && rank(q) == rank(p)
                && facts.class_of(p as u32).is_some()
                && facts.class_of(p as u32) == facts.class_of(q as u32);
            ok.then_some(q as u32)
        });
    }
    let mut needed = vec![false; n];
    let body = rewrite(&kernel.body, &dead, &substitute, &mut needed, &mut report);
    for p in 0..n {
        if !dead[p] {
            continue;
        }
        if needed[p] || origin[p] {
            let why = if origin[p] {
                "its origin is read"
            } else {
                "a loop runs over it (or its extent is read) and no other parameter has its \
                 iteration class and rank"
            };
            report.kept.push((
                p as u32,
                format!("stores deleted, but the parameter stays: {why}"),
            ));
        } else {
            report.replaced.push(p as u32);
        }
    }
    report.kept.sort_by_key(|(p, _)| *p);
    let out = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body,
    };
    (out, report)
}

fn mark_origins(body: &[Inst], origin: &mut [bool]) {
    for inst in body {
        match &inst.op {
            Op::Origin { param, .. } => {
                if let Some(o) = origin.get_mut(*param as usize) {
                    *o = true;
                }
            }
            Op::Parallel(p) => mark_origins(&p.body, origin),
            Op::For(l) => mark_origins(&l.body, origin),
            _ => {}
        }
    }
}

fn rewrite(
    body: &[Inst],
    dead: &[bool],
    substitute: &[Option<u32>],
    needed: &mut [bool],
    report: &mut ScalarReplacement,
) -> Vec<Inst> {
    let is_dead = |p: u32| dead.get(p as usize).copied().unwrap_or(false);
    let swap = |p: u32, needed: &mut [bool]| -> u32 {
        if !is_dead(p) {
            return p;
        }
        match substitute.get(p as usize).copied().flatten() {
            Some(q) => q,
            None => {
                if let Some(n) = needed.get_mut(p as usize) {
                    *n = true;
                }
                p
            }
        }
    };
    let mut out = Vec::with_capacity(body.len());
    for inst in body {
        let mut inst = inst.clone();
        match &mut inst.op {
            Op::Store(a, _) | Op::Reduce(a, _, _) if is_dead(a.param) => {
                report.stores_deleted += 1;
                continue;
            }
            Op::Extent { param, .. } => *param = swap(*param, needed),
            Op::Parallel(p) => {
                p.over = swap(p.over, needed);
                p.body = rewrite(&p.body, dead, substitute, needed, report);
            }
            Op::For(l) => l.body = rewrite(&l.body, dead, substitute, needed, report),
            _ => {}
        }
        out.push(inst);
    }
    out
}
