//! Which store parameters a kernel overwrites before it reads them: what a runtime needs to
//! know to hand a kernel memory that was never cleared (a fresh store's buffer without its
//! zero fill, which is a whole pass over memory).
//!
//! A store parameter `s` is *overwritten by* the parallel loop over `q` when the first
//! top-level instruction of the kernel that touches `s` (loads, stores or reduces into it,
//! at any depth) is that loop, and the loop
//! - stores into `s` at exactly its own indices, in order (`s[i_0, .., i_{r-1}]`), in its
//!   body's top level (not inside a `for` loop, so once per point), and
//! - neither loads `s` nor reduces into it anywhere in its body.
//!
//! Then, on every point task whose sub-store of `s` has the same extents as its sub-store of
//! `q`, every element of the sub-store of `s` is written before anything can read it, and its
//! old contents are never seen. (The runtime checks the extents, and that the points' sub-stores
//! cover the store.) Reading `Extent` or `Origin` of `s` does not touch its elements.

use crate::{ForLoop, Inst, Kernel, Op, Param};

/// For each parameter of `kernel`, the store parameter whose parallel loop overwrites it (see
/// the module documentation), or `None` (scalars, and stores that may be read first).
pub fn overwritten_by(kernel: &Kernel) -> Vec<Option<u32>> {
    let mut result = vec![None; kernel.params.len()];
    let mut touched = vec![false; kernel.params.len()];
    for inst in &kernel.body {
        if let Op::Parallel(p) = &inst.op {
            for (s, param) in kernel.params.iter().enumerate() {
                let rank_fits =
                    matches!(param, Param::Store { rank, .. } if *rank as usize == p.indices.len());
                if touched[s] || !rank_fits {
                    continue;
                }
                let s32 = s as u32;
                let stored_at_index = p.body.iter().any(|i| {
                    matches!(&i.op, Op::Store(a, _) if a.param == s32 && a.indices == p.indices)
                });
                if stored_at_index && !reads(&p.body, s32) {
                    result[s] = Some(p.over);
                }
            }
        }
        mark_touched(std::slice::from_ref(inst), &mut touched);
    }
    result
}

/// For each parameter of `kernel`, whether the kernel touches it only *pointwise*: every
/// load, store and reduction of it sits in a top-level parallel loop (at any depth inside it)
/// at exactly that loop's index tuple. Then a point reads and writes only its own element of
/// the parameter's sub-store. `false` for scalars.
pub fn pointwise(kernel: &Kernel) -> Vec<bool> {
    let mut result: Vec<bool> = kernel
        .params
        .iter()
        .map(|p| matches!(p, Param::Store { .. }))
        .collect();
    for inst in &kernel.body {
        match &inst.op {
            Op::Parallel(p) => visit_accesses(&p.body, &mut |a| {
                if a.indices != p.indices
                    && let Some(r) = result.get_mut(a.param as usize)
                {
                    *r = false;
                }
            }),
            _ => visit_accesses(std::slice::from_ref(inst), &mut |a| {
                if let Some(r) = result.get_mut(a.param as usize) {
                    *r = false;
                }
            }),
        }
    }
    result
}

/// For each parameter `k` of `kernel`, the store parameters `j` whose memory `k` may take
/// over: the kernel may run with `k`'s sub-store at the same addresses as `j`'s, when the
/// runtime knows that `j`'s contents die with the kernel (NumPy's `x = x + a * p` writing
/// into the old `x` instead of a fresh array). That holds when
/// - `j` and `k` are distinct store parameters of the same element type and rank;
/// - one top-level parallel loop touches `j`, nothing else in the kernel does, and nothing
///   before that loop touches `k` (later instructions may: `j` is dead by then);
/// - in that loop `j` is only loaded and `k` only stored, both at exactly the loop's index
///   tuple (so a point touches only its own element of each);
/// - every instruction of the loop's body that loads `j` (at any depth) comes before the
///   first one that stores `k`.
///
/// Then every point reads its element of `j` before it writes that element of `k`, and no
/// point reads an element another point writes, so any back end that keeps each point's
/// program order (and runs points over disjoint elements) computes what it would with
/// separate memory. The runtime checks the rest: the same layout and sub-stores for `j` and
/// `k` at every point, and that nothing else will read `j`.
///
/// One pass over the kernel gathers, per parameter, the top-level instructions that touch it
/// and, per top-level loop, how each parameter is accessed in it; each pair is then decided
/// in constant time, so a fused kernel of many small tasks (hundreds of parameters) costs
/// time linear in its size plus the pairs, not the pairs times its size. Only pairs that can
/// share are visited: a `k` with the parameters that can give memory in its first loop.
pub fn shares_in_place(kernel: &Kernel) -> Vec<Vec<u32>> {
    let store = |p: &Param| match p {
        Param::Store { dtype, rank, .. } => Some((*dtype, *rank)),
        _ => None,
    };
    let n = kernel.params.len();
    // Per parameter: the first top-level instruction that touches it, and the only one if
    // exactly one does.
    let mut first_touch: Vec<Option<usize>> = vec![None; n];
    let mut only_touch: Vec<Option<usize>> = vec![None; n];
    let mut touch_count = vec![0u32; n];
    for (at, inst) in kernel.body.iter().enumerate() {
        let mut seen: Vec<u32> = Vec::new();
        visit_accesses(std::slice::from_ref(inst), &mut |a| seen.push(a.param));
        seen.sort_unstable();
        seen.dedup();
        for param in seen {
            let Some(i) = usize::try_from(param).ok().filter(|&i| i < n) else {
                continue;
            };
            first_touch[i].get_or_insert(at);
            touch_count[i] += 1;
            only_touch[i] = (touch_count[i] == 1).then_some(at);
        }
    }
    // Per top-level parallel loop that is some parameter's only toucher: how each parameter
    // is accessed in it.
    let mut usage: std::collections::HashMap<usize, Vec<Usage>> = Default::default();
    for &at in only_touch.iter().flatten() {
        if usage.contains_key(&at) {
            continue;
        }
        if let Op::Parallel(p) = &kernel.body[at].op {
            usage.insert(at, loop_usage(p, n));
        }
    }
    // A pair needs `j` only loaded in its only loop, and `k` first touched and stored in that
    // loop and never loaded there: per loop, the `j`s that can give their memory, in order;
    // each `k` is then paired with those of its first loop only, not with every parameter.
    let mut givers: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for (j, at) in only_touch.iter().enumerate() {
        let Some(at) = *at else { continue };
        let Some(uses) = usage.get(&at) else { continue };
        let uj = &uses[j];
        if !uj.wrong && uj.fits && uj.first_store.is_none() {
            givers.entry(at).or_default().push(j);
        }
    }
    let mut result = vec![Vec::new(); n];
    for (k, pk) in kernel.params.iter().enumerate() {
        let Some(kt) = store(pk) else { continue };
        let Some(at) = first_touch[k] else { continue };
        let (Some(uses), Some(js)) = (usage.get(&at), givers.get(&at)) else {
            continue;
        };
        let uk = &uses[k];
        if uk.wrong || !uk.fits || uk.last_load.is_some() {
            continue;
        }
        let Some(f) = uk.first_store else { continue };
        for &j in js {
            if j == k || store(&kernel.params[j]) != Some(kt) {
                continue;
            }
            if uses[j].last_load.is_none_or(|l| l < f) {
                result[k].push(j as u32);
            }
        }
    }
    result
}

/// How a parameter is accessed in one parallel loop (see [`loop_usage`]).
#[derive(Clone, Copy, Default)]
struct Usage {
    /// Every access is at exactly the loop's index tuple.
    fits: bool,
    /// It is reduced into.
    wrong: bool,
    /// The last position of the loop's body (a top-level instruction of it) that loads it,
    /// at any depth.
    last_load: Option<usize>,
    /// The first position that stores it.
    first_store: Option<usize>,
}

/// Per parameter of a kernel of `n`, how loop `p` accesses it.
fn loop_usage(p: &crate::ParallelLoop, n: usize) -> Vec<Usage> {
    let mut out = vec![
        Usage {
            fits: true,
            ..Usage::default()
        };
        n
    ];
    for (pos, inst) in p.body.iter().enumerate() {
        visit_ops(std::slice::from_ref(inst), &mut |op| {
            let (a, kind) = match op {
                Op::Load(a) => (a, 0),
                Op::Store(a, _) => (a, 1),
                Op::Reduce(a, _, _) => (a, 2),
                _ => return,
            };
            let Some(u) = usize::try_from(a.param).ok().and_then(|i| out.get_mut(i)) else {
                return;
            };
            u.fits &= a.indices == p.indices;
            match kind {
                0 => u.last_load = Some(pos),
                1 => {
                    u.first_store.get_or_insert(pos);
                }
                _ => u.wrong = true,
            }
        });
    }
    out
}

/// Whether store `k` may take over store `j`'s memory (see [`shares_in_place`]), decided
/// from the definition, pair by pair: the reference the tests hold [`shares_in_place`] to.
#[cfg(test)]
fn in_place(kernel: &Kernel, j: u32, k: u32) -> bool {
    let touches = |inst: &Inst, param: u32| {
        let mut t = false;
        visit_accesses(std::slice::from_ref(inst), &mut |a| t |= a.param == param);
        t
    };
    // One top-level instruction touches `j`: a parallel loop, the first to touch `k`.
    let mut touching = kernel
        .body
        .iter()
        .enumerate()
        .filter(|(_, i)| touches(i, j));
    let (Some((at, inst)), None) = (touching.next(), touching.next()) else {
        return false;
    };
    if kernel.body[..at].iter().any(|i| touches(i, k)) {
        return false;
    }
    let Op::Parallel(p) = &inst.op else {
        return false;
    };
    let mut fits = true;
    visit_accesses(&p.body, &mut |a| {
        if a.param == j || a.param == k {
            fits &= a.indices == p.indices;
        }
    });
    let mut last_load = None;
    let mut first_store = None;
    for (pos, inst) in p.body.iter().enumerate() {
        let mut loads_j = false;
        let mut stores_k = false;
        let mut wrong = false;
        visit_ops(std::slice::from_ref(inst), &mut |op| match op {
            Op::Load(a) if a.param == j => loads_j = true,
            Op::Store(a, _) if a.param == k => stores_k = true,
            Op::Load(a) | Op::Store(a, _) | Op::Reduce(a, _, _) if a.param == j || a.param == k => {
                wrong = true
            }
            _ => {}
        });
        if wrong {
            return false;
        }
        if loads_j {
            last_load = Some(pos);
        }
        if stores_k && first_store.is_none() {
            first_store = Some(pos);
        }
    }
    match (last_load, first_store) {
        (Some(l), Some(f)) => fits && l < f,
        (None, Some(_)) => fits,
        _ => false,
    }
}

/// Calls `f` on every instruction's operation in `body`, at any depth.
fn visit_ops(body: &[Inst], f: &mut impl FnMut(&Op)) {
    for inst in body {
        f(&inst.op);
        match &inst.op {
            Op::Parallel(p) => visit_ops(&p.body, f),
            Op::For(l) => visit_ops(&l.body, f),
            _ => {}
        }
    }
}

/// Calls `f` on every access (load, store, reduction) in `body`, at any depth.
fn visit_accesses(body: &[Inst], f: &mut impl FnMut(&crate::Access)) {
    for inst in body {
        match &inst.op {
            Op::Load(a) | Op::Store(a, _) | Op::Reduce(a, _, _) => f(a),
            Op::Parallel(p) => visit_accesses(&p.body, f),
            Op::For(l) => visit_accesses(&l.body, f),
            _ => {}
        }
    }
}

/// Whether `body` loads `param` or reduces into it, at any depth.
fn reads(body: &[Inst], param: u32) -> bool {
    body.iter().any(|inst| match &inst.op {
        Op::Load(a) | Op::Reduce(a, _, _) => a.param == param,
        Op::Parallel(p) => reads(&p.body, param),
        Op::For(l) => reads(&l.body, param),
        _ => false,
    })
}

/// Marks every store parameter that `body` loads, stores or reduces into, at any depth.
fn mark_touched(body: &[Inst], touched: &mut [bool]) {
    visit_accesses(body, &mut |a| {
        if let Some(t) = touched.get_mut(a.param as usize) {
            *t = true;
        }
    });
}

/// Whether the trip count of `l` is bounded by a store's extent: its body (which has no
/// branches) accesses a store at exactly the induction value in some dimension, an access
/// that is checked (before the loop, or in each iteration) and so ends the loop with a fault
/// once the induction value leaves the store. Such a loop runs no longer than a pass over
/// that store, as a parallel loop does, and its back edge needs no cancel check (the back
/// ends' kernel time limits): a CSR row's loop over its nonzeros is one.
pub fn bounded_by_a_store(l: &ForLoop) -> bool {
    l.body.iter().any(|inst| match &inst.op {
        Op::Load(acc) | Op::Store(acc, _) | Op::Reduce(acc, _, _) => {
            acc.indices.contains(&l.induction)
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::{overwritten_by, pointwise, shares_in_place};
    use crate::text::parse;

    fn over(src: &str) -> Vec<Option<u32>> {
        let kernel = parse(src).expect("the test kernel parses");
        crate::validate(&kernel).expect("the test kernel is valid");
        overwritten_by(&kernel)
    }

    #[test]
    fn a_loop_that_stores_every_point_overwrites() {
        let k = over(
            "kernel @axpy(%arg0: f64, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>) {
               %0 = param %arg0
               parallel %arg1 (%1) {
                 %2 = load %arg1[%1]
                 %3 = mul %0, %2
                 store %arg2[%1], %3
               }
             }",
        );
        assert_eq!(k, vec![None, None, Some(1)]);
    }

    #[test]
    fn pointwise_parameters_are_touched_only_at_the_loop_index() {
        let kernel = parse(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>, %arg3: store<f64, 0, read>) {
               %0 = const i64 0
               %1 = load %arg3[]
               parallel %arg2 (%2) {
                 %3 = load %arg0[%2]
                 %4 = load %arg1[%0]
                 %5 = add %3, %4
                 store %arg2[%2], %5
               }
             }",
        )
        .expect("parses");
        assert_eq!(pointwise(&kernel), vec![true, false, true, false]);
    }

    #[test]
    fn a_store_read_first_or_updated_is_not_overwritten() {
        // Read back in the same loop.
        let k = over(
            "kernel @k(%arg0: store<f64, 1, readwrite>) {
               parallel %arg0 (%0) {
                 %1 = load %arg0[%0]
                 %2 = add %1, %1
                 store %arg0[%0], %2
               }
             }",
        );
        assert_eq!(k, vec![None]);
        // Read by an earlier loop.
        let k = over(
            "kernel @k(%arg0: store<f64, 1, readwrite>, %arg1: store<f64, 1, write>) {
               parallel %arg0 (%0) {
                 %1 = load %arg0[%0]
                 store %arg1[%0], %1
               }
               parallel %arg0 (%2) {
                 %3 = const f64 1.0
                 store %arg0[%2], %3
               }
             }",
        );
        assert_eq!(k, vec![None, Some(0)]);
    }

    #[test]
    fn a_shifted_or_repeated_store_is_not_overwritten() {
        // At a shifted index: the last element is never written.
        let k = over(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>) {
               parallel %arg0 (%0) {
                 %1 = load %arg0[%0]
                 %2 = const i64 1
                 %3 = sub %0, %2
                 store %arg1[%3], %1
               }
             }",
        );
        assert_eq!(k, vec![None, None]);
        // Transposed indices.
        let k = over(
            "kernel @k(%arg0: store<f64, 2, read>, %arg1: store<f64, 2, write>) {
               parallel %arg0 (%0, %1) {
                 %2 = load %arg0[%0, %1]
                 store %arg1[%1, %0], %2
               }
             }",
        );
        assert_eq!(k, vec![None, None]);
        // Inside a for loop, which may run no times.
        let k = over(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>) {
               parallel %arg0 (%0) {
                 %1 = load %arg0[%0]
                 %2 = const i64 0
                 %3 = const i64 1
                 for %4 = %2 to %3 {
                   store %arg1[%0], %1
                 }
               }
             }",
        );
        assert_eq!(k, vec![None, None]);
    }

    fn shares(src: &str) -> Vec<Vec<u32>> {
        let kernel = parse(src).expect("the test kernel parses");
        crate::validate(&kernel).expect("the test kernel is valid");
        shares_in_place(&kernel)
    }

    #[test]
    fn a_pointwise_update_may_write_over_what_it_read() {
        // x2 = x + a * p: x2 may take x's or p's memory (same type), never a's (0-d) or q's
        // (i32); the stores it only reads take nothing.
        let k = shares(
            "kernel @k(%arg0: store<f64, 0, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, read>, %arg3: store<f64, 1, write>, %arg4: store<i32, 1, read>) {
               %0 = load %arg0[]
               parallel %arg3 (%1) {
                 %2 = load %arg1[%1]
                 %3 = load %arg2[%1]
                 %4 = load %arg4[%1]
                 %5 = cast f64 %4
                 %6 = mul %0, %3
                 %7 = add %2, %6
                 %8 = add %7, %5
                 store %arg3[%1], %8
               }
             }",
        );
        assert_eq!(k, vec![vec![], vec![], vec![], vec![1, 2], vec![]]);
    }

    #[test]
    fn reads_after_the_write_elsewhere_or_shifted_share_nothing() {
        // A load of %arg0 after the store of %arg1.
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>, %arg2: store<f64, 1, write>) {
               parallel %arg0 (%0) {
                 %1 = const f64 1.0
                 store %arg1[%0], %1
                 %2 = load %arg0[%0]
                 store %arg2[%0], %2
               }
             }",
        );
        assert_eq!(k[1], Vec::<u32>::new());
        assert_eq!(k[2], vec![0]);
        // A neighbour's element (a stencil): no.
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>) {
               parallel %arg1 (%0) {
                 %1 = const i64 1
                 %2 = add %0, %1
                 %3 = load %arg0[%2]
                 store %arg1[%0], %3
               }
             }",
        );
        assert_eq!(k, vec![Vec::<u32>::new(), vec![]]);
        // Read again by a second loop, or reduced into: no.
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>, %arg2: store<f64, 1, write>) {
               parallel %arg1 (%0) {
                 %1 = load %arg0[%0]
                 store %arg1[%0], %1
               }
               parallel %arg2 (%2) {
                 %3 = load %arg0[%2]
                 store %arg2[%2], %3
               }
             }",
        );
        assert_eq!(k, vec![Vec::<u32>::new(), vec![], vec![]]);
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, reduce(sum)>, %arg1: store<f64, 1, write>) {
               parallel %arg1 (%0) {
                 %1 = const f64 1.0
                 reduce sum %arg0[%0], %1
                 store %arg1[%0], %1
               }
             }",
        );
        assert_eq!(k, vec![Vec::<u32>::new(), vec![]]);
        // The written store read by a later loop (CG's `p = r + beta p` then `A p`): yes;
        // touched by an earlier one: no.
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, readwrite>, %arg2: store<f64, 1, write>) {
               parallel %arg1 (%0) {
                 %1 = load %arg0[%0]
                 store %arg1[%0], %1
               }
               parallel %arg2 (%2) {
                 %3 = const i64 0
                 %4 = load %arg1[%3]
                 store %arg2[%2], %4
               }
             }",
        );
        assert_eq!(k, vec![vec![], vec![0], vec![]]);
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, readwrite>) {
               parallel %arg1 (%0) {
                 %1 = const f64 2.0
                 store %arg1[%0], %1
               }
               parallel %arg1 (%2) {
                 %3 = load %arg0[%2]
                 store %arg1[%2], %3
               }
             }",
        );
        assert_eq!(k, vec![Vec::<u32>::new(), vec![]]);
        // The written store read back: no.
        let k = shares(
            "kernel @k(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, readwrite>) {
               parallel %arg1 (%0) {
                 %1 = load %arg0[%0]
                 store %arg1[%0], %1
                 %2 = load %arg1[%0]
                 %3 = add %2, %1
                 store %arg1[%0], %3
               }
             }",
        );
        assert_eq!(k, vec![Vec::<u32>::new(), vec![]]);
    }
}

#[cfg(test)]
mod shares_in_place_against_the_definition {
    use super::{in_place, shares_in_place};
    use crate::{Kernel, Param};

    /// [`shares_in_place`] decided pair by pair from the definition.
    fn pairwise(kernel: &Kernel) -> Vec<Vec<u32>> {
        let store = |p: &Param| match p {
            Param::Store { dtype, rank, .. } => Some((*dtype, *rank)),
            _ => None,
        };
        let mut result = vec![Vec::new(); kernel.params.len()];
        for (k, pk) in kernel.params.iter().enumerate() {
            let Some(kt) = store(pk) else { continue };
            for (j, pj) in kernel.params.iter().enumerate() {
                if j != k && store(pj) == Some(kt) && in_place(kernel, j as u32, k as u32) {
                    result[k].push(j as u32);
                }
            }
        }
        result
    }

    /// Every filetest kernel of `weft-ir`, and each with its loops fused: the one-pass
    /// answer is the pair-by-pair one.
    #[test]
    fn the_one_pass_answer_is_the_pairwise_one_on_every_filetest_kernel() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("the filetests") {
            let path = entry.expect("an entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("ir") {
                continue;
            }
            let src = std::fs::read_to_string(&path).expect("reads");
            let Ok(kernel) = crate::text::parse(&src) else {
                continue;
            };
            let facts = crate::passes::pipeline::FusionFacts::distinct(&kernel);
            let (fused, _) = crate::passes::fuse::fuse_loops(&kernel, &facts);
            for k in [&kernel, &fused] {
                assert_eq!(shares_in_place(k), pairwise(k), "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 40, "only {checked} kernels");
    }

    /// A chain of 0-d tasks fused into one loop (the scalar programs of NumPy ports): loads
    /// and stores interleaved, so that many pairs share and many do not.
    #[test]
    fn the_one_pass_answer_is_the_pairwise_one_on_a_fused_scalar_chain() {
        let n = 40;
        let mut params = Vec::new();
        let mut body = String::new();
        for i in 0..n {
            params.push(format!("%s{i}: store<f64, 0, read>"));
            params.push(format!("%t{i}: store<f64, 0, write>"));
            body.push_str(&format!(
                "  parallel %t{i} () {{\n    %a{i} = load %s{i}[]\n    %b{i} = mul %a{i}, %a{i}\n    store %t{i}[], %b{i}\n  }}\n"
            ));
        }
        let text = format!("kernel @chain({}) {{\n{body}}}\n", params.join(", "));
        let kernel = crate::text::parse(&text).expect("the chain parses");
        let facts = crate::passes::pipeline::FusionFacts::distinct(&kernel);
        let (fused, _) = crate::passes::fuse::fuse_loops(&kernel, &facts);
        for k in [&kernel, &fused] {
            let got = shares_in_place(k);
            assert_eq!(got, pairwise(k));
            assert!(got.iter().any(|s| !s.is_empty()), "some pairs share");
        }
    }
}
