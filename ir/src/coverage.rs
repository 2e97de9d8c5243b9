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

use crate::{Inst, Kernel, Op, Param};

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

#[cfg(test)]
mod tests {
    use super::{overwritten_by, pointwise};
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
}
