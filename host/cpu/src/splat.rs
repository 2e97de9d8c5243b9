//! Views broadcast along a loop's innermost dimension: a load whose index on some dimension
//! is the parallel loop's innermost index, from a view whose stride on that dimension is 0
//! (NumPy's broadcasting makes them: `x - x.max(axis=-1, keepdims=True)` reads the maxima
//! through a view of shape `(n, k)` and strides `(1, 0)`).
//!
//! The vector lowering runs a row in vectors only when every access indexed by the innermost
//! index has unit stride there, so such a loop ran its rows in scalar code, about three times
//! slower than the same loop with the broadcast operand along the first axis. Every index
//! on a dimension of stride 0 reads the same element, so the back end compiles a variant of
//! the kernel in which those loads read index 0 instead: they become the same for a whole
//! row (loaded once and splat), and the rows run in vectors.
//!
//! The variant is chosen per launch from the views ([`active`]): a load is rewritten only
//! where its view has stride 0 on that dimension and an extent that the loop's extent does
//! not pass, so the compiled code's bounds check of the original access (an obligation proven
//! before the loop, see the crate documentation) could not have failed, and index 0 is inside
//! the view. Same elements read, same bits.

use weft_ir::{Access, Inst, Kernel, Op, Param, Privilege, Scalar, ValueId, visit_defs};

use crate::compile::StoreView;

/// The most rewritable (parameter, dimension) pairs a kernel keeps: one bit each in a mask.
const MAX_CANDIDATES: usize = 16;

/// A read-only store parameter whose dimension `dim` some top-level parallel loop indexes by
/// its innermost index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The parameter's index in `Kernel::params`, and among the store parameters.
    param: u32,
    store: usize,
    dim: usize,
    /// Per loop that indexes it so: the store parameter (index among the store parameters)
    /// the loop runs over and the loop's innermost dimension.
    loops: Vec<(usize, usize)>,
}

/// The index of each parameter among the store parameters.
fn store_indices(params: &[Param]) -> Vec<Option<usize>> {
    let mut next = 0;
    params
        .iter()
        .map(|p| match p {
            Param::Store { .. } => {
                next += 1;
                Some(next - 1)
            }
            Param::Scalar { .. } => None,
        })
        .collect()
}

/// Calls `f` on every load in `body`, nested `for` loops included.
fn for_each_load(body: &[Inst], f: &mut impl FnMut(&Access)) {
    for inst in body {
        match &inst.op {
            Op::Load(acc) => f(acc),
            Op::For(l) => for_each_load(&l.body, f),
            Op::Parallel(l) => for_each_load(&l.body, f),
            _ => {}
        }
    }
}

/// The kernel's candidates, at most [`MAX_CANDIDATES`].
pub(crate) fn candidates(kernel: &Kernel) -> Vec<Candidate> {
    let stores = store_indices(&kernel.params);
    let read_only = |p: u32| {
        matches!(
            kernel.params.get(p as usize),
            Some(Param::Store {
                privilege: Privilege::Read,
                ..
            })
        )
    };
    let mut out: Vec<Candidate> = Vec::new();
    for inst in &kernel.body {
        let Op::Parallel(pl) = &inst.op else { continue };
        let (Some(&inner), Some(Some(over))) =
            (pl.indices.last(), stores.get(pl.over as usize).copied())
        else {
            continue;
        };
        let k = pl.indices.len() - 1;
        for_each_load(&pl.body, &mut |acc| {
            let Some(Some(store)) = stores.get(acc.param as usize).copied() else {
                return;
            };
            if !read_only(acc.param) {
                return;
            }
            for (dim, &ix) in acc.indices.iter().enumerate() {
                if ix != inner {
                    continue;
                }
                match out
                    .iter()
                    .position(|c| c.param == acc.param && c.dim == dim)
                {
                    Some(i) if !out[i].loops.contains(&(over, k)) => {
                        out[i].loops.push((over, k));
                    }
                    Some(_) => {}
                    None if out.len() < MAX_CANDIDATES => out.push(Candidate {
                        param: acc.param,
                        store,
                        dim,
                        loops: vec![(over, k)],
                    }),
                    None => {}
                }
            }
        });
    }
    out
}

/// The candidates whose loads the views let read index 0 (bit `i` for `candidates[i]`): the
/// view's stride on the dimension is 0 and every loop that indexes it runs within its extent
/// (which is then at least 1 wherever such a loop runs at all).
pub(crate) fn active(candidates: &[Candidate], views: &[StoreView]) -> u64 {
    active_by(candidates, |k| {
        views.get(k).map(|v| (&v.extents[..], &v.strides[..]))
    })
}

/// [`active`], the extents and strides of store argument `k` given by `view(k)`.
pub(crate) fn active_by<'a>(
    candidates: &[Candidate],
    view: impl Fn(usize) -> Option<(&'a [i64], &'a [i64])>,
) -> u64 {
    let mut mask = 0u64;
    for (i, c) in candidates.iter().enumerate() {
        let Some((extents, strides)) = view(c.store) else {
            continue;
        };
        let (Some(&stride), Some(&extent)) = (strides.get(c.dim), extents.get(c.dim)) else {
            continue;
        };
        let within = c.loops.iter().all(|&(over, k)| {
            view(over)
                .and_then(|(e, _)| e.get(k))
                .is_some_and(|&e| e <= extent)
        });
        if stride == 0 && extent >= 1 && within {
            mask |= 1 << i;
        }
    }
    mask
}

/// `kernel` with the loads of the candidates in `mask` reading index 0 on their dimension
/// wherever a top-level parallel loop indexes it by its innermost index.
pub(crate) fn rewrite(kernel: &Kernel, candidates: &[Candidate], mask: u64) -> Kernel {
    let mut next = 0u32;
    visit_defs(&kernel.body, &mut |v| {
        next = next.max(v.0.saturating_add(1))
    });
    let mut out = kernel.clone();
    let chosen: Vec<(u32, usize)> = candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, c)| (c.param, c.dim))
        .collect();
    for inst in &mut out.body {
        let Op::Parallel(pl) = &mut inst.op else {
            continue;
        };
        let Some(&inner) = pl.indices.last() else {
            continue;
        };
        let zero = ValueId(next);
        let mut used = false;
        rewrite_loads(&mut pl.body, &mut |acc| {
            for (dim, ix) in acc.indices.iter_mut().enumerate() {
                if *ix == inner && chosen.contains(&(acc.param, dim)) {
                    *ix = zero;
                    used = true;
                }
            }
        });
        if used {
            pl.body.insert(
                0,
                Inst {
                    results: vec![zero],
                    op: Op::Const(Scalar::I64(0)),
                },
            );
            next = next.saturating_add(1);
        }
    }
    out
}

/// Calls `f` on every load in `body`, nested loops included, to change it.
fn rewrite_loads(body: &mut [Inst], f: &mut impl FnMut(&mut Access)) {
    for inst in body {
        match &mut inst.op {
            Op::Load(acc) => f(acc),
            Op::For(l) => rewrite_loads(&mut l.body, f),
            Op::Parallel(l) => rewrite_loads(&mut l.body, f),
            _ => {}
        }
    }
}
