//! Tests of the lane analysis: which loops qualify, with which nodes and sites, and why
//! the others do not.

use weft_ir::validate::Types;
use weft_ir::{ForLoop, Inst, Op};

use super::*;
use crate::lower::Layout;

/// How many vector loads a plan makes per iteration.
fn loads(plan: &LanePlan) -> usize {
    plan.nodes
        .iter()
        .filter(|n| matches!(n, Node::Load { .. }))
        .count()
}

fn parse(src: &str) -> (weft_ir::Kernel, Types) {
    let k = weft_ir::text::parse(src).expect("parses");
    let v = weft_ir::validate(&k).expect("valid");
    (k, v)
}

fn first_for(body: &[Inst]) -> Option<&ForLoop> {
    body.iter().find_map(|i| match &i.op {
        Op::For(l) => Some(l),
        Op::Parallel(p) => first_for(&p.body),
        _ => None,
    })
}

fn plan_of(src: &str) -> Result<LanePlan, String> {
    let (k, types) = parse(src);
    let layout = Layout::new(&k)?;
    let l = first_for(&k.body).expect("a for loop");
    plan(l, &layout, &types, &|_| true, &|_| None)
}

const ROW: &str = "
kernel @row(%a: store<f64, 2, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %a, 1
  parallel %y (%i) {
%zero = const f64 0.0
%lo = const i64 0
%two = const i64 2
%blocks = div %n, %two
%s0, %s1 = for %q = %lo to %blocks iter(%c0 = %zero, %c1 = %zero) {
  %p0 = mul %q, %two
  %one = const i64 1
  %p1 = add %p0, %one
  %a0 = load %a[%i, %p0]
  %x0 = load %x[%p0]
  %t0 = mul %a0, %x0
  %n0 = add %c0, %t0
  %a1 = load %a[%i, %p1]
  %x1 = load %x[%p1]
  %t1 = mul %a1, %x1
  %n1 = add %c1, %t1
  yield %n0, %n1
}
%s = add %s0, %s1
store %y[%i], %s
  }
}
";

#[test]
fn a_two_lane_row_product_runs_as_one_vector() {
    let plan = plan_of(ROW).expect("qualifies");
    assert_eq!(plan.lanes, 2);
    assert_eq!(plan.groups, vec![DType::F64]);
    assert_eq!(loads(&plan), 2);
    assert_eq!(plan.sites.len(), 2);
    assert!(plan.sites.iter().all(|s| (s.min, s.max) == (0, 1)));
}

#[test]
fn a_row_product_by_fma_runs_as_a_vector_fma() {
    let src = ROW
        .replace(
            "%t0 = mul %a0, %x0\n  %n0 = add %c0, %t0",
            "%n0 = fma %a0, %x0, %c0",
        )
        .replace(
            "%t1 = mul %a1, %x1\n  %n1 = add %c1, %t1",
            "%n1 = fma %a1, %x1, %c1",
        );
    assert!(src.contains("fma %a1"), "the row's lanes now add by fma");
    let plan = plan_of(&src).expect("qualifies");
    assert_eq!(plan.lanes, 2);
    assert_eq!(loads(&plan), 2);
    assert_eq!(
        plan.nodes
            .iter()
            .filter(|n| matches!(n, Node::Fma(DType::F64, ..)))
            .count(),
        1
    );
    // Lanes whose operations differ (an fma beside a multiply and an add) do not qualify.
    let mixed = ROW.replace(
        "%t0 = mul %a0, %x0\n  %n0 = add %c0, %t0",
        "%n0 = fma %a0, %x0, %c0",
    );
    assert!(plan_of(&mixed).is_err());
}

/// `y[i] = sum of vals[j] * x[crd[j]]` over two lanes, `crd` of `i32`.
const GATHER: &str = "
kernel @gather(%crd: store<i32, 1, read>, %vals: store<f64, 1, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %crd, 0
  parallel %y (%i) {
%zero = const f64 0.0
%lo = const i64 0
%two = const i64 2
%blocks = div %n, %two
%s0, %s1 = for %q = %lo to %blocks iter(%c0 = %zero, %c1 = %zero) {
  %p0 = mul %q, %two
  %one = const i64 1
  %p1 = add %p0, %one
  %k0 = load %crd[%p0]
  %w0 = cast i64 %k0
  %a0 = load %vals[%p0]
  %x0 = load %x[%w0]
  %t0 = mul %a0, %x0
  %n0 = add %c0, %t0
  %k1 = load %crd[%p1]
  %w1 = cast i64 %k1
  %a1 = load %vals[%p1]
  %x1 = load %x[%w1]
  %t1 = mul %a1, %x1
  %n1 = add %c1, %t1
  yield %n0, %n1
}
%s = add %s0, %s1
store %y[%i], %s
  }
}
";

#[test]
fn a_csr_row_gathers_at_widened_column_indices() {
    let plan = plan_of(GATHER).expect("qualifies");
    assert_eq!(plan.lanes, 2);
    // `crd` and `vals` are sites; `x` is gathered at the widened `crd` elements.
    assert_eq!(plan.sites.len(), 2);
    assert_eq!(loads(&plan), 1);
    let widened = plan
        .nodes
        .iter()
        .position(|n| matches!(n, Node::LoadWidened { offset: 0, .. }))
        .expect("a widened load");
    assert!(plan.nodes.iter().any(|n| matches!(
        n,
        Node::Gather { param: 2, indices, dtype: DType::F64, .. } if *indices == widened
    )));
    // No scalar code loads what the lanes own.
    let body = first_for(&parse(GATHER).0.body)
        .expect("a loop")
        .body
        .clone();
    for (inst, &scalar) in body.iter().zip(&plan.scalar) {
        assert!(!(scalar && matches!(inst.op, Op::Load(_))), "{inst:?}");
    }
}

#[test]
fn gathered_i32_elements_do_not_qualify() {
    // The gathered elements are `i32`: two of them are not a 128-bit vector of `i32`.
    let src = GATHER
        .replace("%x: store<f64, 1, read>", "%x: store<i32, 1, read>")
        .replace(
            "%x0 = load %x[%w0]",
            "%xn0 = load %x[%w0]\n      %x0 = cast f64 %xn0",
        )
        .replace(
            "%x1 = load %x[%w1]",
            "%xn1 = load %x[%w1]\n      %x1 = cast f64 %xn1",
        );
    let why = plan_of(&src).expect_err("does not qualify");
    assert!(why.contains("mixes i32"), "{why}");
}

#[test]
fn lanes_out_of_order_do_not_qualify() {
    // Lane 1 reads element `2q`, lane 0 element `2q + 1`.
    let swapped = ROW
        .replace("%a0 = load %a[%i, %p0]", "%a0 = load %a[%i, %p1]")
        .replace("%a1 = load %a[%i, %p1]", "%a1 = load %a[%i, %p0]");
    let why = plan_of(&swapped).expect_err("does not qualify");
    assert!(why.contains("consecutive"), "{why}");
}

#[test]
fn a_lane_value_used_by_the_scalar_code_does_not_qualify() {
    let leaky = ROW.replace(
        "%n1 = add %c1, %t1",
        "%n1 = add %c1, %t1\n      %u = add %t0, %t0",
    );
    let why = plan_of(&leaky).expect_err("does not qualify");
    assert!(why.contains("needed outside"), "{why}");
}

#[test]
fn scalar_code_that_reads_a_carried_value_does_not_qualify() {
    // `%u` is the same in both lanes (a splat) but computed from carried value `%c0`.
    let reading = ROW
        .replace(
            "%t0 = mul %a0, %x0",
            "%u = add %c0, %c0\n      %t0 = mul %a0, %u",
        )
        .replace("%t1 = mul %a1, %x1", "%t1 = mul %a1, %u");
    let why = plan_of(&reading).expect_err("does not qualify");
    assert!(why.contains("carried"), "{why}");
}

#[test]
fn a_store_in_the_body_does_not_qualify() {
    let storing = ROW.replace(
        "%x0 = load %x[%p0]",
        "%x0 = load %x[%p0]\n      store %y[%i], %x0",
    );
    assert!(plan_of(&storing).is_err());
}

#[test]
fn an_odd_lane_count_does_not_qualify() {
    let src = "
kernel @odd(%a: store<f64, 1, read>, %y: store<f64, 1, write>) {
  %n = extent %a, 0
  parallel %y (%i) {
%zero = const f64 0.0
%lo = const i64 0
%s = for %j = %lo to %n iter(%c = %zero) {
  %v = load %a[%j]
  %next = add %c, %v
  yield %next
}
store %y[%i], %s
  }
}
";
    let why = plan_of(src).expect_err("does not qualify");
    assert!(why.contains("multiple"), "{why}");
}
