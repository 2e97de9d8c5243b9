//! Tests of the kernel-fusion passes (`weft_ir::passes`): composition, the loop-fusion
//! legality rule, forwarding, scalar replacement, dead-code elimination and the pipeline.
//!
//! Every transformation is checked against the reference interpreter (`weft_ir::interp`):
//! the fused, optimized kernel must compute what the parts compute when run one after another.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use weft_ir::builder::KernelBuilder;
use weft_ir::interp::{Arg, Storage, run};
use weft_ir::passes::compose::{ComposeError, Part, compose};
use weft_ir::passes::dce::{dce, remove_unused_params};
use weft_ir::passes::forward::forward_loads;
use weft_ir::passes::fuse::fuse_loops;
use weft_ir::passes::scalar::scalar_replace;
use weft_ir::passes::{FusionFacts, PASS_NAMES, by_name, optimize};
use weft_ir::{BinaryOp, DType, Kernel, Op, Param, Privilege, ReduceOp, renumber, text, validate};

use crate::common;
use crate::interp_support::{Tolerance, differential, make_args};

fn parse(src: &str) -> Kernel {
    let k = text::parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    validate(&k).unwrap_or_else(|e| panic!("{e}\n{src}"));
    k
}

fn store(dtype: DType, rank: u32, privilege: Privilege) -> Param {
    Param::Store {
        dtype,
        rank,
        privilege,
    }
}

fn f64_1d(privilege: Privilege) -> Param {
    store(DType::F64, 1, privilege)
}

fn facts(class: &[Option<u32>], alias: &[Option<u32>], local: &[bool]) -> FusionFacts {
    FusionFacts {
        class: class.to_vec(),
        local: local.to_vec(),
        alias: alias.to_vec(),
        deferred: vec![false; class.len()],
        one_point: false,
    }
}

/// Facts for `n` parameters, all in class 0, all distinct, none local.
fn same_class_distinct(n: usize) -> FusionFacts {
    FusionFacts {
        class: vec![Some(0); n],
        local: vec![false; n],
        alias: (0..n as u32).map(Some).collect(),
        deferred: vec![false; n],
        one_point: false,
    }
}

fn parallel_loops(k: &Kernel) -> usize {
    k.body
        .iter()
        .filter(|i| matches!(i.op, Op::Parallel(_)))
        .count()
}

/// Checks that `after` computes what `before` does on several data sets.
fn assert_same(before: &Kernel, after: &Kernel, map: &[Option<u32>], f: &FusionFacts) {
    validate(after).unwrap_or_else(|e| panic!("{e}\n{}", text::print(after)));
    for seed in 0..5 {
        let ran = differential(before, after, map, f, seed, Tolerance::Relative(1e-12))
            .unwrap_or_else(|e| panic!("{e}\nbefore:\n{before}\nafter:\n{after}"));
        assert!(ran, "the input fails in the interpreter:\n{before}");
    }
}

fn identity(k: &Kernel) -> Vec<Option<u32>> {
    (0..k.params.len() as u32).map(Some).collect()
}

// ---------------------------------------------------------------------------------------------
// compose

const SCALE: &str = "kernel @scale(%x: store<f64, 1, read>, %y: store<f64, 1, write>, %a: f64) {
  %av = param %a
  parallel %y (%i) {
    %v = load %x[%i]
    %w = mul %v, %av
    store %y[%i], %w
  }
}";

const ADD: &str = "kernel @add(%x: store<f64, 1, read>, %y: store<f64, 1, read>,
                               %z: store<f64, 1, write>) {
  %one = const f64 1.0
  parallel %z (%i) {
    %a = load %x[%i]
    %b = load %y[%i]
    %c = add %a, %b
    %d = add %c, %one
    store %z[%i], %d
  }
}";

#[test]
fn compose_concatenates_in_program_order_with_fresh_values() {
    let scale = parse(SCALE);
    let add = parse(ADD);
    // t = 2 x; z = t + x + 1; t = 3 z (scale again, with another scalar)
    let params = vec![
        f64_1d(Privilege::Read),
        f64_1d(Privilege::ReadWrite),
        f64_1d(Privilege::ReadWrite),
        Param::Scalar { dtype: DType::F64 },
        Param::Scalar { dtype: DType::F64 },
    ];
    let parts = [
        Part {
            kernel: &scale,
            params: vec![0, 1, 3],
        },
        Part {
            kernel: &add,
            params: vec![1, 0, 2],
        },
        Part {
            kernel: &scale,
            params: vec![2, 1, 4],
        },
    ];
    let k = compose("fused", params, &parts).unwrap();
    validate(&k).unwrap();
    assert_eq!(k.name, "fused");
    assert_eq!(renumber(&k), k, "values are numbered in definition order");
    assert_eq!(parallel_loops(&k), 3);
    let printed = text::print(&k);
    assert!(printed.contains("%0 = param %arg3"), "{printed}");
    assert!(printed.contains("param %arg4"), "{printed}");
    assert!(printed.contains("store %arg2["), "{printed}");
    // Composition is exactly sequential execution.
    let f = same_class_distinct(5);
    let (args, storages, _) = make_args(&k, &f, 7);
    let mut reference = storages.clone();
    for part in &parts {
        let a: Vec<Arg> = part
            .params
            .iter()
            .map(|&p| args[p as usize].clone())
            .collect();
        run(part.kernel, &a, &mut reference).unwrap();
    }
    let mut fused = storages;
    run(&k, &args, &mut fused).unwrap();
    assert_eq!(fused, reference);
}

#[test]
fn compose_of_nothing_is_an_empty_kernel() {
    let k = compose("empty", vec![f64_1d(Privilege::Read)], &[]).unwrap();
    assert!(k.body.is_empty());
    validate(&k).unwrap();
}

#[test]
fn compose_keeps_top_level_values_of_each_part_apart() {
    // Both parts define top-level values; after composition each part uses its own.
    let scale = parse(SCALE);
    let params = vec![
        f64_1d(Privilege::Read),
        f64_1d(Privilege::Write),
        Param::Scalar { dtype: DType::F64 },
        Param::Scalar { dtype: DType::F64 },
    ];
    let k = compose(
        "two",
        params,
        &[
            Part {
                kernel: &scale,
                params: vec![0, 1, 2],
            },
            Part {
                kernel: &scale,
                params: vec![0, 1, 3],
            },
        ],
    )
    .unwrap();
    validate(&k).unwrap();
    let printed = text::print(&k);
    assert!(printed.contains("%0 = param %arg2"), "{printed}");
    assert!(printed.contains("%4 = param %arg3"), "{printed}");
    assert!(printed.contains("%7 = mul %6, %4"), "{printed}");
}

#[test]
fn compose_errors() {
    let scale = parse(SCALE);
    let ok_params = || {
        vec![
            f64_1d(Privilege::Read),
            f64_1d(Privilege::Write),
            Param::Scalar { dtype: DType::F64 },
        ]
    };
    let part = |params: Vec<u32>| Part {
        kernel: &scale,
        params,
    };
    assert!(matches!(
        compose("k", ok_params(), &[part(vec![0, 1])]),
        Err(ComposeError::ParamCount {
            params: 3,
            mapped: 2,
            ..
        })
    ));
    assert!(matches!(
        compose("k", ok_params(), &[part(vec![0, 1, 9])]),
        Err(ComposeError::OutOfRange { fused: 9, .. })
    ));
    // A store mapped to a scalar, a scalar to a store.
    assert!(matches!(
        compose("k", ok_params(), &[part(vec![2, 1, 0])]),
        Err(ComposeError::Mismatch { param: 0, .. })
    ));
    // Wrong element type, wrong rank.
    let mut p = ok_params();
    p[1] = store(DType::F32, 1, Privilege::Write);
    let e = compose("k", p, &[part(vec![0, 1, 2])]).unwrap_err();
    assert!(
        e.to_string().contains(
            "parameter 1 is store<f64, 1, write> but fused parameter 1 is store<f32, 1, write>"
        ),
        "{e}"
    );
    let mut p = ok_params();
    p[0] = store(DType::F64, 2, Privilege::Read);
    assert!(matches!(
        compose("k", p, &[part(vec![0, 1, 2])]),
        Err(ComposeError::Mismatch { param: 0, .. })
    ));
    // The part loads x: the fused parameter must be readable.
    let mut p = ok_params();
    p[0] = f64_1d(Privilege::Write);
    let e = compose("k", p, &[part(vec![0, 1, 2])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "part 0: parameter 0 is read but fused parameter 0 has privilege write"
    );
    // The part stores y: the fused parameter must be writable.
    let mut p = ok_params();
    p[1] = f64_1d(Privilege::Read);
    assert!(matches!(
        compose("k", p, &[part(vec![0, 1, 2])]),
        Err(ComposeError::Privilege { param: 1, .. })
    ));
    // A reduction needs the same operator.
    let red = parse(
        "kernel @r(%x: store<f64, 1, read>, %s: store<f64, 0, reduce(sum)>) {
           parallel %x (%i) { %v = load %x[%i]  reduce sum %s[], %v }
         }",
    );
    let e = compose(
        "k",
        vec![
            f64_1d(Privilege::Read),
            store(DType::F64, 0, Privilege::Reduce(ReduceOp::Max)),
        ],
        &[Part {
            kernel: &red,
            params: vec![0, 1],
        }],
    )
    .unwrap_err();
    assert!(e.to_string().contains("reduced with sum"), "{e}");
    // An invalid part.
    let mut bad = scale.clone();
    bad.params[1] = f64_1d(Privilege::Read);
    assert!(matches!(
        compose(
            "k",
            ok_params(),
            &[Part {
                kernel: &bad,
                params: vec![0, 1, 2]
            }]
        ),
        Err(ComposeError::InvalidPart { part: 0, .. })
    ));
}

#[test]
fn compose_checks_what_a_part_does_not_what_it_declares() {
    // Declared readwrite, but only writes: may map to a write-only fused parameter.
    let k = parse(
        "kernel @fill(%y: store<f64, 1, readwrite>) {
           %z = const f64 0.0
           parallel %y (%i) { store %y[%i], %z }
         }",
    );
    let fused = compose(
        "k",
        vec![f64_1d(Privilege::Write)],
        &[Part {
            kernel: &k,
            params: vec![0],
        }],
    )
    .unwrap();
    validate(&fused).unwrap();
}

// ---------------------------------------------------------------------------------------------
// loop fusion: legality

/// Fuses and returns the decisions' texts.
fn fuse_report(k: &Kernel, f: &FusionFacts) -> (Kernel, Vec<String>) {
    let (out, d) = fuse_loops(k, f);
    validate(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    (out, d.iter().map(|d| d.to_string()).collect())
}

#[test]
fn fusion_of_element_wise_loops_is_exact() {
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %t: store<f64, 1, readwrite>, %y: store<f64, 1, write>) {
           parallel %t (%i) { %v = load %x[%i]  %w = mul %v, %v  store %t[%i], %w }
           parallel %y (%j) { %v = load %t[%j]  %u = load %x[%j]  %w = sub %v, %u  store %y[%j], %w }
         }",
    );
    let f = same_class_distinct(3);
    let (out, report) = fuse_report(&k, &f);
    assert_eq!(parallel_loops(&out), 1);
    assert!(
        report[0].starts_with("loop 2 fused into loop 1"),
        "{report:?}"
    );
    for seed in 0..5 {
        assert!(differential(&k, &out, &identity(&k), &f, seed, Tolerance::Exact).unwrap());
    }
}

#[test]
fn fusion_refuses_a_transposed_access() {
    // t is written at [i, j] and read at [j, i]: another iteration's element.
    let k = parse(
        "kernel @k(%x: store<f64, 2, read>, %t: store<f64, 2, readwrite>, %y: store<f64, 2, write>) {
           parallel %t (%i, %j) { %v = load %x[%i, %j]  store %t[%i, %j], %v }
           parallel %y (%i, %j) { %v = load %t[%j, %i]  store %y[%i, %j], %v }
         }",
    );
    let (out, report) = fuse_report(&k, &same_class_distinct(3));
    assert_eq!(out, k);
    assert!(
        report[0].contains("param 1 written at [%0, %1] in loop 1 and read at [%4, %3] in loop 2"),
        "{report:?}"
    );
}

#[test]
fn fusion_refuses_an_access_at_a_computed_index_even_if_equal() {
    // %k = %j + 0 is the same element at run time, but the rule compares index values.
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %t: store<f64, 1, readwrite>, %y: store<f64, 1, write>) {
           %z = const i64 0
           parallel %t (%i) { %v = load %x[%i]  store %t[%i], %v }
           parallel %y (%j) { %k = add %j, %z  %v = load %t[%k]  store %y[%j], %v }
         }",
    );
    let (out, report) = fuse_report(&k, &same_class_distinct(3));
    assert_eq!(parallel_loops(&out), 2);
    assert!(report[0].contains("not fused"), "{report:?}");
}

#[test]
fn fusion_refuses_a_write_in_the_second_loop_of_what_the_first_reads_elsewhere() {
    // An anti-dependence: loop 1 reads x[0] in every iteration, loop 2 writes x[j].
    let k = parse(
        "kernel @k(%x: store<f64, 1, readwrite>, %y: store<f64, 1, write>) {
           %z = const i64 0
           %one = const f64 1.0
           parallel %y (%i) { %v = load %x[%z]  store %y[%i], %v }
           parallel %x (%j) { store %x[%j], %one }
         }",
    );
    let (out, report) = fuse_report(&k, &same_class_distinct(2));
    assert_eq!(parallel_loops(&out), 2);
    assert!(
        report[0].contains("param 0 written at [%4] in loop 2 and read at [%0] in loop 1"),
        "{report:?}"
    );
}

#[test]
fn fusion_allows_reading_the_same_store_anywhere_when_nobody_writes_it() {
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %y: store<f64, 1, write>, %w: store<f64, 1, write>) {
           %z = const i64 0
           parallel %y (%i) { %v = load %x[%z]  store %y[%i], %v }
           parallel %w (%j) { %v = load %x[%j]  %u = load %x[%z]  %s = add %u, %v  store %w[%j], %s }
         }",
    );
    let f = same_class_distinct(3);
    let (out, _) = fuse_report(&k, &f);
    assert_eq!(parallel_loops(&out), 1);
    assert_same(&k, &out, &identity(&k), &f);
}

/// A stencil's sweep: loop 1 reads two views of one grid (`n` shifted, `c` not) into `w`,
/// loop 2 copies `w` into the grid through `o` (the same view as `c`). `o`'s stores are
/// deferred when `deferred`.
fn sweep(deferred: bool, swapped: bool) -> (Kernel, Vec<String>) {
    let (l1, l2) = (
        "parallel %w (%i) { %a = load %n[%i]  %b = load %c[%i]  %s = add %a, %b  store %w[%i], %s }",
        "parallel %o (%j) { %v = load %w[%j]  store %o[%j], %v }",
    );
    let (first, second) = if swapped { (l2, l1) } else { (l1, l2) };
    let k = parse(&format!(
        "kernel @k(%n: store<f64, 1, read>, %c: store<f64, 1, read>, %w: store<f64, 1, readwrite>, %o: store<f64, 1, write>) {{
           {first}
           {second}
         }}"
    ));
    let mut f = facts(
        &[Some(0); 4],
        &[Some(0), Some(0), Some(2), Some(0)],
        &[false; 4],
    );
    f.deferred[3] = deferred;
    fuse_report(&k, &f)
}

#[test]
fn fusion_takes_a_deferred_store_after_loads_of_its_aliases() {
    let (out, report) = sweep(true, false);
    assert_eq!(parallel_loops(&out), 1, "{report:?}");
    // Without deferral, the copy would overwrite what later points of loop 1 still read.
    let (out, report) = sweep(false, false);
    assert_eq!(parallel_loops(&out), 2);
    assert!(
        report[0].contains("param 0 read at [%0] in loop 1 may overlap param 3 written at [%4]"),
        "{report:?}"
    );
}

#[test]
fn fusion_refuses_loads_after_a_deferred_store_of_an_alias() {
    // Unfused, the second loop reads what the first one stored; fused, the deferred stores
    // would not have landed yet.
    let (out, report) = sweep(true, true);
    assert_eq!(parallel_loops(&out), 2, "{report:?}");
}

#[test]
fn fusion_refuses_distinct_params_of_one_alias_set() {
    // y and x are two views of one storage: y written at [i] may be x[i+1].
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %y: store<f64, 1, write>, %z: store<f64, 1, readwrite>) {
           parallel %z (%i) { %v = load %x[%i]  store %z[%i], %v }
           parallel %y (%j) { %v = load %z[%j]  store %y[%j], %v }
         }",
    );
    let f = facts(&[Some(0); 3], &[Some(0), Some(0), Some(1)], &[false; 3]);
    let (out, report) = fuse_report(&k, &f);
    assert_eq!(out, k);
    assert!(report[0].contains("may overlap param 1"), "{report:?}");
    // With x and y distinct, the same kernel fuses and computes the same thing.
    let f = same_class_distinct(3);
    let (out, _) = fuse_report(&k, &f);
    assert_eq!(parallel_loops(&out), 1);
    assert_same(&k, &out, &identity(&k), &f);
}

#[test]
fn fusion_refuses_different_reduction_targets_that_may_overlap_with_different_ops() {
    // Two rank-0 reduction targets in one alias set, different operators: refused. The same
    // exact operator: fine (it commutes). Float sums: refused (one canonical tree per loop).
    let src = |op1: &str, op2: &str| {
        format!(
            "kernel @k(%x: store<f64, 1, read>, %a: store<f64, 0, reduce({op1})>,
                       %b: store<f64, 0, reduce({op2})>) {{
               parallel %x (%i) {{ %v = load %x[%i]  reduce {op1} %a[], %v }}
               parallel %x (%i) {{ %v = load %x[%i]  reduce {op2} %b[], %v }}
             }}"
        )
    };
    let f = facts(
        &[Some(0), None, None],
        &[Some(0), Some(1), Some(1)],
        &[false; 3],
    );
    let (out, report) = fuse_report(&parse(&src("sum", "max")), &f);
    assert_eq!(parallel_loops(&out), 2, "{report:?}");
    let (out, report) = fuse_report(&parse(&src("max", "max")), &f);
    assert_eq!(parallel_loops(&out), 1, "{report:?}");
    let (out, report) = fuse_report(&parse(&src("sum", "sum")), &f);
    assert_eq!(parallel_loops(&out), 2, "{report:?}");
    assert!(report[0].contains("canonical order"), "{report:?}");
}

#[test]
fn fusion_allows_exact_reductions_into_one_target_and_float_sums_into_several() {
    let k = parse(
        "kernel @k(%p: store<f64, 1, read>, %q: store<f64, 1, read>,
                   %dot: store<f64, 0, reduce(sum)>, %norm: store<f64, 0, reduce(max)>) {
           parallel %p (%i) { %a = load %p[%i]  %b = load %q[%i]  %c = mul %a, %b  reduce sum %dot[], %c }
           parallel %q (%i) { %a = load %q[%i]  %b = abs %a  reduce max %norm[], %b }
           parallel %p (%i) { %a = load %p[%i]  reduce sum %dot[], %a }
         }",
    );
    let f = facts(
        &[Some(0), Some(0), None, None],
        &[Some(0), Some(1), Some(2), Some(3)],
        &[false; 4],
    );
    // The max joins the first loop; the second float sum into `dot` keeps its own loop.
    let o = optimize(&k, &f);
    assert_eq!(parallel_loops(&o.kernel), 2, "{}", o.report);
    assert_same(&k, &o.kernel, &o.param_map, &f);
    // Integer sums into one target fuse.
    let k = parse(
        "kernel @k(%p: store<i64, 1, read>, %n: store<i64, 0, reduce(sum)>) {
           parallel %p (%i) { %a = load %p[%i]  reduce sum %n[], %a }
           parallel %p (%i) { %a = load %p[%i]  %b = mul %a, %a  reduce sum %n[], %b }
         }",
    );
    let f = facts(&[Some(0), None], &[Some(0), Some(1)], &[false; 2]);
    let o = optimize(&k, &f);
    assert_eq!(parallel_loops(&o.kernel), 1, "{}", o.report);
    assert_same(&k, &o.kernel, &o.param_map, &f);
    // Reductions at a non-trivial index into a rank-1 target, same operator: fine too.
    let k = parse(
        "kernel @k(%x: store<i64, 1, read>, %h: store<i64, 1, reduce(sum)>) {
           %z = const i64 0
           parallel %x (%i) { %v = load %x[%i]  reduce sum %h[%v], %v }
           parallel %x (%i) { %v = load %x[%i]  reduce sum %h[%z], %v }
         }",
    );
    let f = facts(&[Some(0), Some(1)], &[Some(0), Some(1)], &[false; 2]);
    let (out, _) = fuse_report(&k, &f);
    assert_eq!(parallel_loops(&out), 1);
    assert_same(&k, &out, &identity(&k), &f);
}

#[test]
fn fusion_refuses_different_ranks_and_classes() {
    let k = parse(
        "kernel @k(%a: store<f64, 1, write>, %b: store<f64, 1, write>, %m: store<f64, 2, write>) {
           %one = const f64 1.0
           parallel %a (%i) { store %a[%i], %one }
           parallel %b (%i) { store %b[%i], %one }
           parallel %m (%i, %j) { store %m[%i, %j], %one }
         }",
    );
    let f = facts(
        &[Some(0), Some(1), Some(0)],
        &[Some(0), Some(1), Some(2)],
        &[false; 3],
    );
    let (out, report) = fuse_report(&k, &f);
    assert_eq!(out, k);
    assert_eq!(
        report,
        vec![
            "loop 2 not fused with loop 1: they run over param 0 and param 1, which are not in \
             one iteration class",
            "loop 3 not fused with loop 2: the loops have different ranks (1 and 2)",
        ]
    );
}

#[test]
fn fusion_needs_no_facts_for_loops_over_one_param() {
    // Both loops run over y and touch only y, at the loop index: no facts needed.
    let k = parse(
        "kernel @k(%y: store<f64, 1, readwrite>) {
           %two = const f64 2.0
           parallel %y (%i) { %v = load %y[%i]  %w = mul %v, %two  store %y[%i], %w }
           parallel %y (%i) { %v = load %y[%i]  %w = add %v, %two  store %y[%i], %w }
         }",
    );
    let f = FusionFacts::unknown(1);
    let (out, _) = fuse_report(&k, &f);
    assert_eq!(parallel_loops(&out), 1);
    assert_same(&k, &out, &identity(&k), &f);
}

#[test]
fn fusion_reaches_its_fixed_point_in_one_sweep() {
    let k = parse(
        "kernel @k(%x: store<f64, 1, readwrite>, %y: store<f64, 1, readwrite>) {
           %one = const i64 1
           %z = const i64 0
           parallel %x (%i) { %v = load %x[%i]  store %y[%i], %v }
           parallel %x (%i) { %v = load %y[%i]  store %x[%i], %v }
           parallel %x (%i) { %v = load %y[%z]  store %x[%i], %v }
           parallel %x (%i) { %v = load %x[%i]  store %y[%i], %v }
           parallel %x (%i) { %v = load %y[%i]  store %x[%i], %v }
         }",
    );
    let f = same_class_distinct(2);
    let (once, d1) = fuse_loops(&k, &f);
    let (twice, d2) = fuse_loops(&once, &f);
    assert_eq!(once, twice);
    // Loops 1 and 2 fuse, loop 3 reads y[0] so it stays alone, loops 4 and 5 fuse.
    assert_eq!(parallel_loops(&once), 3, "{d1:?}");
    assert!(d2.iter().all(|d| !d.fused));
    assert_same(&k, &once, &identity(&k), &f);
}

// ---------------------------------------------------------------------------------------------
// Diffuse's stencil

const STENCIL: &str =
    "kernel @stencil(%center: store<f64, 2, readwrite>, %north: store<f64, 2, read>,
                %south: store<f64, 2, read>, %west: store<f64, 2, read>,
                %east: store<f64, 2, read>, %out: store<f64, 2, readwrite>) {
  %fifth = const f64 0.2
  parallel %out (%i, %j) {
    %c = load %center[%i, %j]
    %n = load %north[%i, %j]
    %s = load %south[%i, %j]
    %w = load %west[%i, %j]
    %e = load %east[%i, %j]
    %s1 = add %c, %n
    %s2 = add %s1, %s
    %s3 = add %s2, %w
    %s4 = add %s3, %e
    %avg = mul %s4, %fifth
    store %out[%i, %j], %avg
  }
  parallel %center (%i2, %j2) {
    %v = load %out[%i2, %j2]
    store %center[%i2, %j2], %v
  }
}";

fn stencil_facts() -> FusionFacts {
    facts(
        &[Some(0); 6],
        &[Some(0), Some(0), Some(0), Some(0), Some(0), Some(1)],
        &[false, false, false, false, false, true],
    )
}

#[test]
fn stencil_then_write_of_center_is_not_fused() {
    let k = parse(STENCIL);
    let f = stencil_facts();
    let o = optimize(&k, &f);
    assert_eq!(parallel_loops(&o.kernel), 2, "{}", o.report);
    assert!(
        o.report.fusion[0]
            .reason
            .starts_with("param 1 read at [%1, %2] in loop 1 may overlap param 0 written"),
        "{}",
        o.report
    );
    assert_same(&k, &o.kernel, &o.param_map, &f);
}

#[test]
fn fusing_the_stencil_anyway_would_be_wrong() {
    // What loop fusion would produce if it ignored aliasing: the interpreter, with the five
    // parameters as shifted views of one grid, shows the results differ. So the refusal above
    // is needed, not merely cautious.
    let k = parse(STENCIL);
    let wrong = fuse_loops(&k, &same_class_distinct(6)).0;
    assert_eq!(parallel_loops(&wrong), 1);
    let f = stencil_facts();
    let differs = (0..5).any(|seed| {
        differential(
            &k,
            &wrong,
            &identity(&k),
            &f,
            seed,
            Tolerance::Relative(1e-12),
        )
        .is_err()
    });
    assert!(differs, "the unsound fusion was not caught:\n{wrong}");
}

// ---------------------------------------------------------------------------------------------
// forwarding, scalar replacement, DCE, parameters

#[test]
fn forwarding_does_not_cross_a_for_loop_that_writes() {
    let k = parse(
        "kernel @k(%t: store<f64, 1, readwrite>, %y: store<f64, 1, write>) {
           %z = const i64 0
           %n = const i64 3
           %one = const f64 1.0
           parallel %t (%i) {
             store %t[%i], %one
             for %k = %z to %n {
               %a = load %t[%i]
               %b = add %a, %one
               store %t[%i], %b
             }
             %c = load %t[%i]
             store %y[%i], %c
           }
         }",
    );
    let f = same_class_distinct(2);
    let (out, stats) = forward_loads(&k, &f);
    assert_eq!(stats.forwarded, 0, "{out}");
    assert_eq!(out, k);
    assert_same(&k, &out, &identity(&k), &f);
}

#[test]
fn forwarding_inside_a_for_body_and_dedup_through_computed_indices() {
    // x[col[i]] loaded twice: the second load of col[i] is redundant, so both loads of x use
    // the same index value and the second one is redundant too.
    let k = parse(
        "kernel @k(%col: store<i64, 1, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {
           %z = const i64 0
           %n = const i64 2
           %f0 = const f64 0.0
           parallel %y (%i) {
             %c1 = load %col[%i]
             %a = load %x[%c1]
             %s = for %k = %z to %n iter(%acc = %f0) {
               %c2 = load %col[%i]
               %b = load %x[%c2]
               %acc2 = add %acc, %b
               yield %acc2
             }
             %r = add %s, %a
             store %y[%i], %r
           }
         }",
    );
    let f = FusionFacts::distinct(&k);
    let (out, stats) = forward_loads(&k, &f);
    assert_eq!(stats.deduplicated, 2, "{out}");
    assert_same(&k, &out, &identity(&k), &f);
}

#[test]
fn scalar_replacement_needs_no_loads_and_keeps_loaded_locals() {
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %t: store<f64, 1, write>, %u: store<f64, 1, readwrite>) {
           %z = const i64 0
           parallel %x (%i) {
             %v = load %x[%i]
             store %t[%i], %v
             store %u[%i], %v
             %w = load %u[%z]
             store %u[%i], %w
           }
         }",
    );
    let f = facts(
        &[Some(0); 3],
        &[Some(0), Some(1), Some(2)],
        &[false, true, true],
    );
    let (out, r) = scalar_replace(&k, &f);
    assert_eq!(r.replaced, vec![1]);
    assert_eq!(r.kept.len(), 1);
    assert_eq!(r.kept[0].0, 2);
    assert_eq!(r.stores_deleted, 1);
    validate(&out).unwrap();
    let (out2, map) = remove_unused_params(&dce(&out).0);
    assert_eq!(map, vec![Some(0), None, Some(1)]);
    assert_same(&k, &out2, &map, &f);
}

#[test]
fn a_local_that_only_loops_run_over_stays_when_no_other_param_has_its_class() {
    let k = parse(
        "kernel @k(%t: store<f64, 1, write>, %s: store<f64, 0, reduce(sum)>) {
           %one = const f64 1.0
           parallel %t (%i) { store %t[%i], %one  reduce sum %s[], %one }
         }",
    );
    let f = facts(&[Some(0), None], &[Some(0), Some(1)], &[true, false]);
    let o = optimize(&k, &f);
    assert_eq!(o.param_map, vec![Some(0), Some(1)], "{}", o.report);
    assert!(
        o.report.locals_kept[0]
            .1
            .contains("no other parameter has its iteration class"),
        "{}",
        o.report
    );
    assert!(!text::print(&o.kernel).contains("  store "), "{}", o.kernel);
    assert_same(&k, &o.kernel, &o.param_map, &f);
}

#[test]
fn dce_removes_dead_loops_and_keeps_effects() {
    let k = parse(
        "kernel @k(%x: store<f64, 1, read>, %y: store<f64, 1, write>) {
           %z = const i64 0
           %n = const i64 5
           %dead = load %x[%z]
           parallel %y (%i) {
             %a = load %x[%i]
             %r = for %k = %z to %n iter(%acc = %a) {
               %b = add %acc, %a
               %inner = for %l = %z to %k iter(%c = %b) {
                 %d = mul %c, %c
                 yield %d
               }
               yield %b
             }
             store %y[%i], %r
           }
         }",
    );
    let (out, stats) = dce(&k);
    // %dead, the inner for loop.
    assert_eq!(stats.removed, 2, "{out}");
    assert!(!text::print(&out).contains("mul"), "{out}");
    assert_same(&k, &out, &identity(&k), &FusionFacts::distinct(&k));
    // A for loop that stores stays even if its results are unused.
    let k = parse(
        "kernel @k(%y: store<f64, 1, write>) {
           %z = const i64 0
           %n = const i64 5
           %one = const f64 1.0
           parallel %y (%i) {
             %r = for %k = %z to %n iter(%acc = %one) { store %y[%i], %acc  yield %acc }
           }
         }",
    );
    let (out, stats) = dce(&k);
    assert_eq!(stats.removed, 0);
    assert_eq!(out, k);
}

#[test]
fn remove_unused_params_maps_old_to_new() {
    let k = parse(
        "kernel @k(%a: f64, %b: store<f64, 1, read>, %c: f64, %d: store<f64, 1, write>) {
           %v = param %c
           parallel %d (%i) { store %d[%i], %v }
         }",
    );
    let (out, map) = remove_unused_params(&k);
    assert_eq!(map, vec![None, None, Some(0), Some(1)]);
    assert_eq!(
        text::print(&out),
        "kernel @k(%arg0: f64, %arg1: store<f64, 1, write>) {\n  %0 = param %arg0\n  \
         parallel %arg1 (%1) {\n    store %arg1[%1], %0\n  }\n}\n"
    );
}

// ---------------------------------------------------------------------------------------------
// the pipeline

#[test]
fn black_scholes_like_chain_fuses_into_one_loop_without_temporaries() {
    // The parts: d = s / k; e = exp(d); n = erf(e) * half; out = n + s. d, e, n are locals.
    let div = parse(
        "kernel @div(%a: store<f64, 1, read>, %b: store<f64, 1, read>, %c: store<f64, 1, write>) {
           parallel %c (%i) { %x = load %a[%i]  %y = load %b[%i]  %z = div %x, %y  store %c[%i], %z }
         }",
    );
    let exp = parse(
        "kernel @exp(%a: store<f64, 1, read>, %c: store<f64, 1, write>) {
           parallel %c (%i) { %x = load %a[%i]  %z = exp %x  store %c[%i], %z }
         }",
    );
    let erf_scaled = parse(
        "kernel @erf(%a: store<f64, 1, read>, %c: store<f64, 1, write>, %h: f64) {
           %hv = param %h
           parallel %c (%i) { %x = load %a[%i]  %z = erf %x  %w = mul %z, %hv  store %c[%i], %w }
         }",
    );
    let add = parse(
        "kernel @add(%a: store<f64, 1, read>, %b: store<f64, 1, read>, %c: store<f64, 1, write>) {
           parallel %c (%i) { %x = load %a[%i]  %y = load %b[%i]  %z = add %x, %y  store %c[%i], %z }
         }",
    );
    // s, k, d, e, n, out, half
    let params = vec![
        f64_1d(Privilege::Read),
        f64_1d(Privilege::Read),
        f64_1d(Privilege::ReadWrite),
        f64_1d(Privilege::ReadWrite),
        f64_1d(Privilege::ReadWrite),
        f64_1d(Privilege::Write),
        Param::Scalar { dtype: DType::F64 },
    ];
    let parts = [
        Part {
            kernel: &div,
            params: vec![0, 1, 2],
        },
        Part {
            kernel: &exp,
            params: vec![2, 3],
        },
        Part {
            kernel: &erf_scaled,
            params: vec![3, 4, 6],
        },
        Part {
            kernel: &add,
            params: vec![4, 0, 5],
        },
    ];
    let fused = compose("bs", params, &parts).unwrap();
    let f = facts(
        &[Some(0), Some(0), Some(0), Some(0), Some(0), Some(0), None],
        &[Some(0), Some(1), Some(2), Some(3), Some(4), Some(5), None],
        &[false, false, true, true, true, false, false],
    );
    let o = optimize(&fused, &f);
    assert_eq!(parallel_loops(&o.kernel), 1, "{}", o.report);
    assert_eq!(
        o.param_map,
        vec![Some(0), Some(1), None, None, None, Some(2), Some(3)]
    );
    assert_eq!(o.report.locals_replaced, vec![2, 3, 4]);
    assert_eq!(o.report.loads_forwarded, 3);
    assert_eq!(o.report.loads_deduplicated, 1);
    assert_eq!(
        text::print(&o.kernel),
        "kernel @bs(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, read>, \
         %arg2: store<f64, 1, write>, %arg3: f64) {
  %0 = param %arg3
  parallel %arg0 (%1) {
    %2 = load %arg0[%1]
    %3 = load %arg1[%1]
    %4 = div %2, %3
    %5 = exp %4
    %6 = erf %5
    %7 = mul %6, %0
    %8 = add %7, %2
    store %arg2[%1], %8
  }
}
"
    );
    assert_same(&fused, &o.kernel, &o.param_map, &f);
    // The report says what happened, one fact per line.
    let report = o.report.to_string();
    for line in [
        "loop 2 fused into loop 1",
        "loop 4 fused into loop 1",
        "3 load(s) replaced by the stored value",
        "1 redundant load(s) removed",
        "local param 2 replaced by SSA values",
        "param 4 removed: no longer used",
    ] {
        assert!(report.contains(line), "{line:?} not in:\n{report}");
    }
}

#[test]
fn optimize_leaves_an_invalid_kernel_alone() {
    let mut k = parse(SCALE);
    k.params[1] = f64_1d(Privilege::Read);
    let o = optimize(&k, &FusionFacts::unknown(3));
    assert_eq!(o.kernel, k);
    assert_eq!(o.param_map, vec![Some(0), Some(1), Some(2)]);
    assert!(o.report.notes[0].starts_with("not optimized: invalid kernel"));
}

#[test]
fn facts_of_the_wrong_length_are_safe() {
    let k = parse(ADD);
    for f in [
        FusionFacts::default(),
        facts(&[Some(0)], &[Some(0)], &[true]),
        facts(&[Some(0); 9], &[Some(1); 9], &[true; 9]),
    ] {
        let o = optimize(&k, &f);
        validate(&o.kernel).unwrap();
    }
}

#[test]
fn optimize_does_not_depend_on_value_names() {
    let k = parse(STENCIL);
    let f = stencil_facts();
    let a = optimize(&k, &f);
    for seed in 1..5 {
        let b = optimize(&common::scramble(&k, seed), &f);
        assert_eq!(text::print(&a.kernel), text::print(&b.kernel));
        assert_eq!(a.param_map, b.param_map);
    }
}

#[test]
fn by_name_knows_every_pass_and_keeps_kernels_valid() {
    let k = parse(STENCIL);
    let f = stencil_facts();
    for name in PASS_NAMES {
        let pass = by_name(name).unwrap_or_else(|| panic!("{name}"));
        let out = pass(&k, &f);
        validate(&out.kernel).unwrap();
        assert_eq!(out.param_map.len(), k.params.len());
        assert_eq!(out.facts.class.len(), out.kernel.params.len());
    }
    assert!(by_name("no-such-pass").is_none());
}

// ---------------------------------------------------------------------------------------------
// property: a random chain of element-wise tasks, composed and optimized, computes what the
// tasks compute one after another

/// One task of a chain.
#[derive(Clone, Debug)]
struct Task {
    /// 0: out = in1 op in2; 1: out = in1 op scalar; 2: out = in1[i + 1 (clamped)];
    /// 3: sum += in1 * in1.
    kind: u8,
    out: usize,
    in1: usize,
    in2: usize,
    op: BinaryOp,
}

#[derive(Clone, Debug)]
struct Chain {
    /// Per array: iteration class (None or Some(0 or 1)) and alias set.
    arrays: Vec<(Option<u32>, u32)>,
    tasks: Vec<Task>,
    /// Which arrays to make local, where allowed.
    local: Vec<bool>,
    seed: u64,
}

fn arb_task(n: usize, kinds: u8) -> impl Strategy<Value = Task> {
    let ops = prop::sample::select(vec![
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Max,
        BinaryOp::Min,
    ]);
    (0..kinds, 0..n, 0..n, 0..n, ops).prop_map(|(kind, out, in1, in2, op)| Task {
        kind,
        out,
        in1,
        in2,
        op,
    })
}

/// Chains over 2 to 5 arrays. `simple` chains use one class, distinct arrays and element-wise
/// tasks only.
fn arb_chain(simple: bool) -> impl Strategy<Value = Chain> {
    (2usize..=5).prop_flat_map(move |n| {
        let array = if simple {
            Just((Some(0u32), 0u32)).boxed()
        } else {
            (
                prop::sample::select(vec![None, Some(0u32), Some(0), Some(1)]),
                0u32..4,
            )
                .boxed()
        };
        (
            prop::collection::vec(array, n),
            prop::collection::vec(arb_task(n, if simple { 2 } else { 4 }), 1..=6),
            prop::collection::vec(any::<bool>(), n),
            any::<u64>(),
        )
            .prop_map(move |(mut arrays, tasks, local, seed)| {
                if simple {
                    for (i, a) in arrays.iter_mut().enumerate() {
                        a.1 = i as u32;
                    }
                }
                Chain {
                    arrays,
                    tasks,
                    local,
                    seed,
                }
            })
    })
}

/// The space an array's extents come from in `make_args`.
fn space(class: Option<u32>) -> u32 {
    class.map_or(0, |c| c % 2)
}

/// Builds the chain's task kernels, the fused parameters, the parts' parameter maps and the
/// facts. Fused parameters: the arrays, then a rank-0 sum target, then a scalar.
fn build(chain: &Chain) -> (Vec<Kernel>, Vec<Vec<u32>>, Vec<Param>, FusionFacts) {
    let n = chain.arrays.len();
    let (sum, scalar) = (n as u32, n as u32 + 1);
    let mut kernels = Vec::new();
    let mut maps = Vec::new();
    let mut read = vec![false; n];
    let mut written = vec![false; n];
    // Whether an array's first access is a whole write (so it may be local).
    let mut first_write: Vec<Option<bool>> = vec![None; n];
    for t in &chain.tasks {
        // Inputs must have the output's extents: fall back to the output itself.
        let sp = |a: usize| space(chain.arrays[a].0);
        let out = t.out;
        let fix = |a: usize| if sp(a) == sp(out) { a } else { out };
        let (in1, in2) = (fix(t.in1), fix(t.in2));
        let mut kb = KernelBuilder::new(format!("task{}", kernels.len()));
        let mut map = Vec::new();
        match t.kind {
            3 => {
                let x = kb.store(DType::F64, 1, Privilege::Read);
                let s = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
                map.extend([t.in1 as u32, sum]);
                kb.parallel(x, |b, i| {
                    let v = b.load(x, i);
                    let w = b.mul(v, v);
                    b.reduce(s, &[], w);
                });
                read[t.in1] = true;
                first_write[t.in1].get_or_insert(false);
            }
            _ => {
                let reads: Vec<usize> = match t.kind {
                    0 => vec![in1, in2],
                    _ => vec![in1],
                };
                let rw = reads.contains(&out);
                let o = kb.store(
                    DType::F64,
                    1,
                    if rw {
                        Privilege::ReadWrite
                    } else {
                        Privilege::Write
                    },
                );
                map.push(out as u32);
                // One parameter per distinct array.
                let mut have = vec![(out, o)];
                let mut inputs = Vec::new();
                for &r in &reads {
                    let p = match have.iter().find(|(a, _)| *a == r) {
                        Some(&(_, p)) => p,
                        None => {
                            let p = kb.store(DType::F64, 1, Privilege::Read);
                            map.push(r as u32);
                            have.push((r, p));
                            p
                        }
                    };
                    inputs.push(p);
                }
                let sv = if t.kind == 1 {
                    map.push(scalar);
                    Some(kb.scalar(DType::F64))
                } else {
                    None
                };
                let op = t.op;
                let kind = t.kind;
                kb.parallel(o, |b, i| {
                    let a = if kind == 2 {
                        let one = b.const_i64(1);
                        let n = b.extent(inputs[0], 0);
                        let last = b.sub(n, one);
                        let ip = b.add(i[0], one);
                        let k = b.min(ip, last);
                        b.load(inputs[0], &[k])
                    } else {
                        b.load(inputs[0], i)
                    };
                    let v = match (kind, sv) {
                        (0, _) => {
                            let c = b.load(inputs[1], i);
                            b.binary(op, a, c)
                        }
                        (1, Some(s)) => b.binary(op, a, s),
                        _ => a,
                    };
                    b.store(o, i, v);
                });
                for &r in &reads {
                    read[r] = true;
                    first_write[r].get_or_insert(false);
                }
                written[out] = true;
                first_write[out].get_or_insert(!rw);
            }
        }
        kernels.push(kb.finish_validated().unwrap());
        maps.push(map);
    }
    let mut params: Vec<Param> = (0..n)
        .map(|a| {
            f64_1d(match (read[a], written[a]) {
                (true, true) => Privilege::ReadWrite,
                (false, true) => Privilege::Write,
                _ => Privilege::Read,
            })
        })
        .collect();
    params.push(store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum)));
    params.push(Param::Scalar { dtype: DType::F64 });
    let mut f = FusionFacts::unknown(n + 2);
    for (a, &(class, alias)) in chain.arrays.iter().enumerate() {
        f.class[a] = class;
        f.alias[a] = Some(alias);
        if chain.local[a] && first_write[a] == Some(true) {
            f.local[a] = true;
            // A local is a scratch buffer: its own alias set.
            f.alias[a] = Some(100 + a as u32);
        }
    }
    f.alias[n] = Some(200);
    (kernels, maps, params, f)
}

/// Runs the tasks one after another on `args` (indexed by fused parameter).
fn run_tasks(kernels: &[Kernel], maps: &[Vec<u32>], args: &[Arg], storages: &mut [Storage]) {
    for (k, map) in kernels.iter().zip(maps) {
        let a: Vec<Arg> = map.iter().map(|&p| args[p as usize].clone()).collect();
        run(k, &a, storages).unwrap_or_else(|e| panic!("{e}\n{k}"));
    }
}

fn check_chain(chain: &Chain) -> Result<Kernel, TestCaseError> {
    let (kernels, maps, params, f) = build(chain);
    let parts: Vec<Part<'_>> = kernels
        .iter()
        .zip(&maps)
        .map(|(kernel, m)| Part {
            kernel,
            params: m.clone(),
        })
        .collect();
    let fused = compose("chain", params, &parts).unwrap();
    validate(&fused).unwrap();
    let (args, storages, local) = make_args(&fused, &f, chain.seed);
    let mut reference = storages.clone();
    run_tasks(&kernels, &maps, &args, &mut reference);
    // Composition is exact.
    let mut composed = storages.clone();
    run(&fused, &args, &mut composed).unwrap();
    prop_assert_eq!(&composed, &reference);
    // The optimized kernel agrees on every non-local storage.
    let o = optimize(&fused, &f);
    prop_assert!(o.report.notes.is_empty(), "{}", o.report);
    validate(&o.kernel).unwrap();
    let args2: Vec<Arg> = {
        let mut a = vec![None; o.kernel.params.len()];
        for (old, new) in o.param_map.iter().enumerate() {
            if let Some(new) = new {
                a[*new as usize] = Some(args[old].clone());
            }
        }
        a.into_iter().map(Option::unwrap).collect()
    };
    let mut optimized = storages.clone();
    run(&o.kernel, &args2, &mut optimized).unwrap();
    for (s, (a, b)) in reference.iter().zip(&optimized).enumerate() {
        if local[s] {
            continue;
        }
        for (x, y) in a.data.iter().zip(&b.data) {
            let (x, y) = (x.as_f64(), y.as_f64());
            prop_assert!(
                x.to_bits() == y.to_bits()
                    || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
                    || (x.is_nan() && y.is_nan()),
                "storage {} differs: {} vs {}\nfused:\n{}\noptimized:\n{}\n{}",
                s,
                x,
                y,
                fused,
                o.kernel,
                o.report
            );
        }
    }
    // Deterministic.
    prop_assert_eq!(&optimize(&fused, &f), &o);
    Ok(o.kernel)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_chains_optimize_correctly(chain in arb_chain(false)) {
        check_chain(&chain)?;
    }

    #[test]
    fn simple_chains_fuse_into_one_loop_and_lose_their_locals(chain in arb_chain(true)) {
        let (_, _, _, f) = build(&chain);
        let k = check_chain(&chain)?;
        prop_assert!(parallel_loops(&k) <= 1, "{}", k);
        let locals = f.local.iter().filter(|l| **l).count();
        prop_assert!(k.params.len() <= chain.arrays.len() + 2 - locals, "{}", k);
    }

    /// Random valid kernels (from the round-trip generator) under random facts: the pipeline
    /// never panics, keeps kernels valid, is deterministic, and computes the same results.
    #[test]
    fn random_kernels_survive_the_pipeline(
        choices in prop::collection::vec(any::<u32>(), 0..400),
        classes in prop::collection::vec(prop::option::of(0u32..2), 0..12),
        aliases in prop::collection::vec(0u32..12, 0..12),
        locals in prop::collection::vec(any::<bool>(), 0..12),
        one_point in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let k = common::Gen::new(&choices).kernel();
        let n = k.params.len();
        let mut f = FusionFacts {
            class: classes,
            local: locals,
            alias: aliases.into_iter().map(Some).collect(),
            deferred: vec![false; n],
            one_point,
        };
        f.class.resize(n, None);
        f.local.resize(n, false);
        f.alias.resize(n, None);
        // Locals are scratch buffers of their own.
        for p in 0..n {
            if f.local[p] {
                f.alias[p] = Some(1000 + p as u32);
            }
        }
        let o = optimize(&k, &f);
        prop_assert!(o.report.notes.is_empty(), "{}", o.report);
        validate(&o.kernel).unwrap();
        prop_assert_eq!(&optimize(&k, &f), &o);
        // Reductions into one target from several loops may be reordered by fusion; compare
        // those only loosely (skip), everything else within rounding.
        let tol = Tolerance::Relative(1e-9);
        if !reduces_from_several_loops(&k) {
            differential(&k, &o.kernel, &o.param_map, &f, seed, tol)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{k}\n{}", o.kernel)))?;
        }
    }
}

/// Whether some parameter is reduced into by two different top-level loops.
fn reduces_from_several_loops(k: &Kernel) -> bool {
    fn reduced(body: &[weft_ir::Inst], out: &mut Vec<u32>) {
        for inst in body {
            match &inst.op {
                Op::Reduce(a, _, _) => out.push(a.param),
                Op::For(l) => reduced(&l.body, out),
                Op::Parallel(p) => reduced(&p.body, out),
                _ => {}
            }
        }
    }
    let mut seen: Vec<u32> = Vec::new();
    for inst in &k.body {
        let mut here = Vec::new();
        reduced(std::slice::from_ref(inst), &mut here);
        here.sort_unstable();
        here.dedup();
        for p in here {
            if seen.contains(&p) {
                return true;
            }
            seen.push(p);
        }
    }
    false
}
