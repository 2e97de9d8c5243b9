//! The summaries of fusion decisions (`WEFT_EXPLAIN=1`), on windows of small kernels run by
//! the interpreting back end: what ran as one task, how many loops it runs and which did not
//! merge, and why a window was cut, in the application's terms and with its call sites. The
//! full explanation (`WEFT_EXPLAIN=2`) says no more than what ran either.

use std::sync::Arc;

use weft_fusion::Fuser;
use weft_ir::{DType, KernelBuilder, Privilege, ReduceOp};
use weft_runtime::testing::{FakeBackend, f64_store, f64_values};
use weft_runtime::{
    Core, IndexTask, KernelEntry, Partition, PluginId, Settings, StoreId, TaskArg, Tiling,
};

/// `out[i] = a[i] * factor + shift`, named `name`.
fn affine(name: &str, factor: f64, shift: f64) -> Arc<KernelEntry> {
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
    Arc::new(KernelEntry::new(name, &b.finish()).expect("valid"))
}

/// `out[] += a[i]`, named `name`.
fn sum(name: &str) -> Arc<KernelEntry> {
    let mut b = KernelBuilder::new(name);
    let a = b.store(DType::F64, 1, Privilege::Read);
    let out = b.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    b.body().parallel(a, |b, i| {
        let x = b.load(a, i);
        b.reduce(out, &[], x);
    });
    Arc::new(KernelEntry::new(name, &b.finish()).expect("valid"))
}

/// A core that fuses, gathering summaries and full explanations.
fn core() -> Core {
    let settings = Settings {
        summarize: true,
        explain: true,
        ..Settings::default()
    };
    Core::new(
        settings,
        Box::new(FakeBackend::default()),
        Box::new(Fuser::default()),
    )
}

/// Rank-1 stores of `n` elements in `pieces` tiles.
fn tiles(n: u64, pieces: u64) -> Partition {
    Partition::Tiling(Tiling {
        tile: weft_runtime::smallvec::smallvec![n / pieces],
        offset: weft_runtime::smallvec::smallvec![0],
        projection: weft_runtime::smallvec::smallvec![Some(0)],
        skew: None,
    })
}

/// A task of `kernel` reading `a` and writing (or reducing into) `out`, asked for at `site`.
fn submit(core: &mut Core, kernel: &Arc<KernelEntry>, a: StoreId, out: StoreId, site: &str) {
    let n = core.stores().get(a).expect("a store").shape[0];
    let reduces = kernel.ir().params.iter().any(|p| {
        matches!(
            p,
            weft_ir::Param::Store {
                privilege: Privilege::Reduce(_),
                ..
            }
        )
    });
    let out_arg = if reduces {
        TaskArg::new(out, Partition::None, Privilege::Reduce(ReduceOp::Sum))
    } else {
        TaskArg::new(out, tiles(n, 1), Privilege::Write)
    };
    let args = vec![TaskArg::new(a, tiles(n, 1), Privilege::Read), out_arg];
    submit_args(core, kernel, vec![1], args, site);
}

/// A task of `kernel` over `launch` and `args`, asked for at `site`.
fn submit_args(
    core: &mut Core,
    kernel: &Arc<KernelEntry>,
    launch: Vec<u64>,
    args: Vec<TaskArg>,
    site: &str,
) {
    core.set_call_site(Some(site.into()));
    core.submit(IndexTask::new(
        PluginId(0),
        kernel.clone(),
        launch,
        args,
        Vec::new(),
    ))
    .expect("submits");
    core.set_call_site(None);
}

fn vector(core: &mut Core, n: u64) -> StoreId {
    let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
    f64_store(core, &values).expect("a store")
}

/// Three element-wise steps and a sum, whose temporaries the application dropped: one task,
/// one loop, said in one line with the call sites.
#[test]
fn a_fused_chain_is_one_line_with_its_loops_temporaries_and_call_sites() {
    let mut core = core();
    let (double, inc) = (
        affine("t.double.f64.r1", 2.0, 0.0),
        affine("t.inc.f64.r1", 1.0, 1.0),
    );
    let total = sum("t.sum.f64.r1");
    let a = vector(&mut core, 8);
    let b = core.create_store(vec![8], DType::F64).expect("a store");
    let c = core.create_store(vec![8], DType::F64).expect("a store");
    let s = core.create_store(vec![], DType::F64).expect("a store");
    core.take_summaries();
    submit(&mut core, &double, a, b, "app.rs:10:5");
    submit(&mut core, &inc, b, c, "app.rs:11:5");
    submit(&mut core, &total, c, s, "app.rs:12:9");
    core.release(b);
    core.release(c);
    let got = f64_values(&mut core, s).expect("reads");
    // sum(2i + 1) over i < 8.
    assert_eq!(got, vec![64.0], "fused results are unaffected");
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: 3 tasks -> one task running 1 loop (2 temporaries vanished), at \
             app.rs:10-12\n"
                .to_string()
        ]
    );
}

/// Two tasks over arrays of different lengths fuse into one task whose loops stay apart: the
/// summary says one task of two loops and which did not merge, and the full explanation no
/// longer says only that the whole window fused.
#[test]
fn a_fused_task_whose_loops_did_not_merge_is_said_to_run_them_all() {
    let mut core = core();
    let double = affine("t.double.f64.r1", 2.0, 0.0);
    let (a, c) = (vector(&mut core, 4), vector(&mut core, 8));
    let b = core.create_store(vec![4], DType::F64).expect("a store");
    let d = core.create_store(vec![8], DType::F64).expect("a store");
    core.take_summaries();
    core.take_explanations();
    submit(&mut core, &double, a, b, "app.rs:20:5");
    submit(&mut core, &double, c, d, "app.rs:21:5");
    core.flush().expect("runs");
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: 2 tasks -> one task running 2 loops, at app.rs:20-21\n  the loops of \
             t.double (at app.rs:20) and t.double (at app.rs:21) did not merge: they iterate \
             over arrays of different shapes or tilings\n"
                .to_string()
        ]
    );
    let detail = core.take_explanations().join("");
    assert!(
        detail.contains(
            "the whole window fused into one task running 2 loops (1 pair(s) of loops not \
             fused, below)"
        ),
        "{detail}"
    );
    assert!(
        detail.contains("loop 2 not fused with loop 1"),
        "the detail keeps the passes' words:\n{detail}"
    );
    assert_eq!(
        f64_values(&mut core, d).expect("reads"),
        (0..8).map(|i| 2.0 * i as f64).collect::<Vec<_>>()
    );
}

/// A window cut by a launch of another shape: one block for the run, each plan on a line of
/// its own, and the cut in the application's terms with the call site of the task it is
/// before; a later run alike is not shown again but counted at the end.
#[test]
fn a_cut_window_says_why_in_one_line_and_repeats_are_counted() {
    let mut core = core();
    let double = affine("t.double.f64.r1", 2.0, 0.0);
    let inc = affine("t.inc.f64.r1", 1.0, 1.0);
    let a = vector(&mut core, 8);
    let b = core.create_store(vec![8], DType::F64).expect("a store");
    let c = core.create_store(vec![8], DType::F64).expect("a store");
    let d = core.create_store(vec![8], DType::F64).expect("a store");
    core.take_summaries();
    for _ in 0..3 {
        submit(&mut core, &double, a, b, "app.rs:30:5");
        submit(&mut core, &inc, b, c, "app.rs:31:5");
        // Over two pieces: another launch.
        submit_args(
            &mut core,
            &inc,
            vec![2],
            vec![
                TaskArg::new(c, tiles(8, 2), Privilege::Read),
                TaskArg::new(d, tiles(8, 2), Privilege::Write),
            ],
            "app.rs:32:5",
        );
        core.flush().expect("runs");
    }
    core.finish_summaries();
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: window of 3 tasks -> 2 tasks\n  2 tasks -> one task running 1 loop, at \
             app.rs:30-31\n  cut before t.inc (at app.rs:32): it runs over launch shape (2,), \
             the tasks before it over (1,): only tasks of one launch shape fuse\n  t.inc ran \
             alone, at app.rs:32\n"
                .to_string(),
            "weft: 2 more window run(s) like those above\n".to_string(),
        ]
    );
    assert_eq!(
        f64_values(&mut core, d).expect("reads"),
        (0..8).map(|i| 2.0 * i as f64 + 2.0).collect::<Vec<_>>()
    );
}

/// A cut on an array the application named says its name.
#[test]
fn a_cut_on_a_named_array_names_it() {
    let mut core = core();
    let double = affine("t.double.f64.r1", 2.0, 0.0);
    let a = vector(&mut core, 8);
    let b = core.create_store(vec![8], DType::F64).expect("a store");
    core.set_label(b, "grid".into()).expect("labels");
    let c = core.create_store(vec![8], DType::F64).expect("a store");
    core.take_summaries();
    submit(&mut core, &double, a, b, "app.rs:40:5");
    // Reads b through two tiles where it was written whole: a true dependence.
    submit_args(
        &mut core,
        &double,
        vec![1],
        vec![
            TaskArg::new(b, tiles(8, 2), Privilege::Read),
            TaskArg::new(c, tiles(8, 2), Privilege::Write),
        ],
        "app.rs:41:5",
    );
    core.flush().expect("runs");
    let text = core.take_summaries().join("");
    assert!(
        text.contains(
            "cut before t.double (at app.rs:41): it reads \"grid\", which t.double (at \
             app.rs:40) wrote through another view or tiling"
        ),
        "{text}"
    );
}

/// A cut by a reduction names the task whose result is not complete yet.
#[test]
fn a_cut_by_a_reduction_names_the_reducing_task() {
    let mut core = core();
    let total = sum("t.sum.f64.r1");
    // out[i] = a[i] * s[]
    let scale = {
        let mut b = KernelBuilder::new("t.scale.f64.r1");
        let a = b.store(DType::F64, 1, Privilege::Read);
        let s = b.store(DType::F64, 0, Privilege::Read);
        let out = b.store(DType::F64, 1, Privilege::Write);
        b.body().parallel(out, |b, i| {
            let x = b.load(a, i);
            let k = b.load(s, &[]);
            let y = b.mul(x, k);
            b.store(out, i, y);
        });
        Arc::new(KernelEntry::new("t.scale.f64.r1", &b.finish()).expect("valid"))
    };
    let a = vector(&mut core, 4);
    let s = core.create_store(vec![], DType::F64).expect("a store");
    let out = core.create_store(vec![4], DType::F64).expect("a store");
    core.take_summaries();
    submit(&mut core, &total, a, s, "app.rs:50:5");
    submit_args(
        &mut core,
        &scale,
        vec![1],
        vec![
            TaskArg::new(a, tiles(4, 1), Privilege::Read),
            TaskArg::new(s, Partition::None, Privilege::Read),
            TaskArg::new(out, tiles(4, 1), Privilege::Write),
        ],
        "app.rs:51:5",
    );
    assert_eq!(
        f64_values(&mut core, out).expect("reads"),
        vec![0.0, 6.0, 12.0, 18.0]
    );
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: window of 2 tasks -> 2 tasks\n  t.sum ran alone, at app.rs:50\n  cut before \
             t.scale (at app.rs:51): it uses the result of t.sum (at app.rs:50), a reduction, \
             which is complete only after that task\n  t.scale ran alone, at app.rs:51\n"
                .to_string()
        ]
    );
}

/// The summaries of `t.double` from `a` into `b` (at app.rs:60), then `t.double` from `c`
/// through two tiles into `a` (its input: an anti-dependence) or into `b` (its output: a write
/// after a write), at app.rs:61.
fn double_then_tiled_double(into_input: bool) -> String {
    let mut core = core();
    let double = affine("t.double.f64.r1", 2.0, 0.0);
    let (a, c) = (vector(&mut core, 8), vector(&mut core, 8));
    let b = core.create_store(vec![8], DType::F64).expect("a store");
    core.take_summaries();
    submit(&mut core, &double, a, b, "app.rs:60:5");
    let written = if into_input { a } else { b };
    submit_args(
        &mut core,
        &double,
        vec![1],
        vec![
            TaskArg::new(c, tiles(8, 2), Privilege::Read),
            TaskArg::new(written, tiles(8, 2), Privilege::Write),
        ],
        "app.rs:61:5",
    );
    core.flush().expect("runs");
    core.take_summaries().join("")
}

/// A cut by an anti-dependence names the task that read what the next task overwrites.
#[test]
fn a_cut_by_an_anti_dependence_names_the_reading_task() {
    let text = double_then_tiled_double(true);
    assert!(
        text.contains(
            "cut before t.double (at app.rs:61): it overwrites what t.double (at app.rs:60) \
             read, through another view or tiling"
        ),
        "{text}"
    );
}

/// A 0-d (scalar) step that uses what a step over an array computed earlier in the window is
/// cut, and the summary says why in those terms.
#[test]
fn a_cut_of_a_scalar_step_says_so() {
    let mut core = core();
    let total = sum("t.sum.f64.r1");
    // out[] = s[] * 0.5, a task over 0-d stores.
    let half = {
        let mut b = KernelBuilder::new("t.half.f64.r0");
        let s = b.store(DType::F64, 0, Privilege::Read);
        let out = b.store(DType::F64, 0, Privilege::Write);
        b.body().parallel(out, |b, _| {
            let x = b.load(s, &[]);
            let k = b.const_f64(0.5);
            let y = b.mul(x, k);
            b.store(out, &[], y);
        });
        Arc::new(KernelEntry::new("t.half.f64.r0", &b.finish()).expect("valid"))
    };
    let a = vector(&mut core, 4);
    let s = core.create_store(vec![], DType::F64).expect("a store");
    let out = core.create_store(vec![], DType::F64).expect("a store");
    core.take_summaries();
    submit(&mut core, &total, a, s, "app.rs:70:5");
    submit_args(
        &mut core,
        &half,
        vec![],
        vec![
            TaskArg::new(s, Partition::None, Privilege::Read),
            TaskArg::new(out, Partition::None, Privilege::Write),
        ],
        "app.rs:71:5",
    );
    assert_eq!(f64_values(&mut core, out).expect("reads"), vec![3.0]);
    let text = core.take_summaries().join("");
    assert!(
        text.contains(
            "cut before t.half (at app.rs:71): t.sum (at app.rs:70) and it both use an array, \
             and one of them is a 0-d (scalar) step, which a fused task runs before the others"
        ),
        "{text}"
    );
}

/// A write over what a task before it wrote, through another tiling, is said to be one.
#[test]
fn a_cut_by_a_write_after_a_write_says_so() {
    let text = double_then_tiled_double(false);
    assert!(
        text.contains(
            "cut before t.double (at app.rs:61): it writes over what t.double (at app.rs:60) \
             wrote, through another view or tiling"
        ),
        "{text}"
    );
}
