//! The memo of fusion plans: a hit is confirmed against the kernels it was made for (a forged
//! kernel id is analysed anew, never given another kernel's plan), plans that differ only in
//! extents share their fused kernel's compiled code, a window seen before exactly takes its
//! plan from the window memo (and only when what decides the plan is the same), and both
//! memos are bounded.

use std::sync::{Arc, Mutex};

use weft_fusion::Fuser;
use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::testing::{FakeBackend, Log, f64_store, f64_values};
use weft_runtime::{
    CacheLimits, Core, IndexTask, KernelEntry, Partition, PluginId, Settings, StoreId, TaskArg,
    Tiling,
};

/// `out[i] = a[i] * factor + shift`.
fn affine(name: &str, factor: f64, shift: f64) -> weft_ir::Kernel {
    let mut b = KernelBuilder::new(name);
    let a = b.store(DType::F64, 1, Privilege::Read);
    let out = b.store(DType::F64, 1, Privilege::Write);
    b.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let f = b.const_f64(factor);
        let s = b.const_f64(shift);
        let y = b.mul(x, f);
        let z = b.add(y, s);
        b.store(out, i, z);
    });
    b.finish()
}

fn entry(name: &str, factor: f64, shift: f64) -> Arc<KernelEntry> {
    Arc::new(KernelEntry::new(name, &affine(name, factor, shift)).expect("valid"))
}

fn core(fuser: Fuser) -> (Core, Arc<Mutex<Log>>) {
    let backend = FakeBackend::default();
    let log = backend.log();
    (
        Core::new(Settings::default(), Box::new(backend), Box::new(fuser)),
        log,
    )
}

fn task(kernel: &Arc<KernelEntry>, a: StoreId, out: StoreId, n: u64) -> IndexTask {
    let whole = || {
        Partition::Tiling(Tiling {
            tile: weft_runtime::smallvec::smallvec![n],
            offset: weft_runtime::smallvec::smallvec![0],
            projection: weft_runtime::smallvec::smallvec![Some(0)],
            skew: None,
        })
    };
    IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![1],
        vec![
            TaskArg::new(a, whole(), Privilege::Read),
            TaskArg::new(out, whole(), Privilege::Write),
        ],
        Vec::new(),
    )
}

/// `t = first(a); out = second(t)`, fused, over `n` elements; returns `out`.
fn chain(core: &mut Core, first: &Arc<KernelEntry>, second: &Arc<KernelEntry>, n: u64) -> Vec<f64> {
    chain_holding(core, first, second, n, true).0
}

/// `chain`, but `t` is either released before `out` is read (so it is a temporary of the
/// fused task and never written) or held and read after `out`: returns `out` and, when held,
/// `t`.
fn chain_holding(
    core: &mut Core,
    first: &Arc<KernelEntry>,
    second: &Arc<KernelEntry>,
    n: u64,
    hold: bool,
) -> (Vec<f64>, Option<Vec<f64>>) {
    let input: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let a = f64_store(core, &input).expect("a store");
    let t = core.create_store(vec![n], DType::F64).expect("a store");
    let out = core.create_store(vec![n], DType::F64).expect("a store");
    core.submit(task(first, a, t, n)).expect("submits");
    core.submit(task(second, t, out, n)).expect("submits");
    if !hold {
        core.release(t);
    }
    let got = f64_values(core, out).expect("reads");
    let held = hold.then(|| f64_values(core, t).expect("reads"));
    for s in [a, out] {
        core.release(s);
    }
    if hold {
        core.release(t);
    }
    (got, held)
}

#[test]
fn a_window_seen_again_exactly_takes_its_plan_without_analysis() {
    let (mut core, _) = core(Fuser::default());
    let double = entry("t.double", 2.0, 0.0);
    let inc = entry("t.inc", 1.0, 1.0);
    let want = |n: u64| (0..n).map(|i| 2.0 * i as f64 + 1.0).collect::<Vec<f64>>();
    let counts = |core: &Core| {
        let s = core.planner_stats();
        (s.analyses, s.memo_hits, s.window_hits, s.window_entries)
    };
    assert_eq!(chain(&mut core, &double, &inc, 4), want(4));
    assert_eq!(
        counts(&core),
        (1, 0, 0, 0),
        "a window seen once is not kept"
    );
    assert_eq!(chain(&mut core, &double, &inc, 4), want(4));
    assert_eq!(counts(&core), (1, 1, 0, 1), "seen twice: kept");
    assert_eq!(chain(&mut core, &double, &inc, 4), want(4));
    assert_eq!(counts(&core), (1, 2, 1, 1), "the same window again");
    // Another extent: the same canonical plan, but not the same window.
    for hits in [0, 0, 1] {
        assert_eq!(chain(&mut core, &double, &inc, 8), want(8));
        assert_eq!(core.planner_stats().window_hits, 1 + hits);
    }
    assert_eq!(core.planner_stats().analyses, 1);
}

#[test]
fn the_window_memo_tells_a_held_store_from_a_temporary() {
    let (mut core, _) = core(Fuser::default());
    let double = entry("t.double", 2.0, 0.0);
    let inc = entry("t.inc", 1.0, 1.0);
    let n = 6u64;
    let out: Vec<f64> = (0..n).map(|i| 2.0 * i as f64 + 1.0).collect();
    let t: Vec<f64> = (0..n).map(|i| 2.0 * i as f64).collect();
    for _ in 0..3 {
        assert_eq!(
            chain_holding(&mut core, &double, &inc, n, false),
            (out.clone(), None)
        );
    }
    let before = core.planner_stats();
    assert_eq!(before.window_hits, 1, "{before:?}");
    // The same tasks, but `t` is held: its plan (`t` written) is not the one where `t` was a
    // temporary, which would leave `t` unwritten.
    for hits in [0, 0, 1] {
        assert_eq!(
            chain_holding(&mut core, &double, &inc, n, true),
            (out.clone(), Some(t.clone()))
        );
        assert_eq!(core.planner_stats().window_hits, before.window_hits + hits);
    }
}

#[test]
fn a_memo_hit_needs_the_plans_own_kernels_not_only_their_ids() {
    let (mut core, _) = core(Fuser::default());
    let double = entry("t.double", 2.0, 0.0);
    let inc = entry("t.inc", 1.0, 1.0);
    assert_eq!(chain(&mut core, &double, &inc, 4), vec![1.0, 3.0, 5.0, 7.0]);
    let before = core.planner_stats();
    assert_eq!(chain(&mut core, &double, &inc, 4), vec![1.0, 3.0, 5.0, 7.0]);
    assert_eq!(core.planner_stats().memo_hits, before.memo_hits + 1);
    // A kernel that carries `double`'s id but triples: the window's key is the same, so
    // only the confirmation keeps it from `double`'s plan (and fused kernel).
    let forged = Arc::new(
        KernelEntry::with_forged_id(affine("t.triple", 3.0, 0.0), double.id()).expect("valid"),
    );
    // The forged window is also the same exact window as `double`'s: the window memo, too,
    // must confirm the kernels.
    let before = core.planner_stats();
    assert_eq!(
        chain(&mut core, &forged, &inc, 4),
        vec![1.0, 4.0, 7.0, 10.0]
    );
    let after = core.planner_stats();
    assert_eq!(
        after.memo_hits, before.memo_hits,
        "no hit for other kernels"
    );
    assert_eq!(after.analyses, before.analyses + 1);
}

#[test]
fn plans_that_differ_only_in_extents_are_one_plan() {
    let (mut core, log) = core(Fuser::default());
    let double = entry("t.double", 2.0, 0.0);
    let inc = entry("t.inc", 1.0, 1.0);
    for n in [4u64, 8, 16, 32] {
        let want: Vec<f64> = (0..n).map(|i| 2.0 * i as f64 + 1.0).collect();
        assert_eq!(chain(&mut core, &double, &inc, n), want);
    }
    // The keys keep which numbers are equal, not their values: one analysis, three hits.
    let stats = core.planner_stats();
    assert_eq!(
        (stats.analyses, stats.memo_hits),
        (1, 3),
        "one plan for every extent: {stats:?}"
    );
    // An extent equal to another number of the window (the launch's 1) is another pattern.
    assert_eq!(chain(&mut core, &double, &inc, 1), vec![1.0]);
    assert_eq!(core.planner_stats().analyses, 2);
    let compiled = log.lock().expect("the log").compiled.clone();
    let fused: Vec<_> = compiled
        .iter()
        .filter(|n| n.starts_with("fused("))
        .collect();
    assert_eq!(
        fused.len(),
        1,
        "one fused kernel for every extent: {compiled:?}"
    );
}

#[test]
fn the_memo_holds_no_more_plans_than_its_limit() {
    let (mut core, _) = core(Fuser::with_limits(CacheLimits {
        entries: 2,
        bytes: u64::MAX,
    }));
    let double = entry("t.double", 2.0, 0.0);
    for k in 1..=6u32 {
        // Another kernel each time: another plan.
        let shift = f64::from(k);
        let inc = entry(&format!("t.inc{k}"), 1.0, shift);
        let want: Vec<f64> = (0..5).map(|i| 2.0 * i as f64 + shift).collect();
        assert_eq!(chain(&mut core, &double, &inc, 5), want);
        assert!(core.planner_stats().memo_entries <= 2);
        assert!(core.planner_stats().window_entries <= 2);
    }
    assert!(core.planner_stats().memo_evictions >= 4);
}
