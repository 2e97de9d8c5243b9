//! The window's policy, tested without Wasm and without Cranelift: fake planners decide what
//! runs together, and the interpreting `FakeBackend` runs kernels and logs what it was asked.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use weft_ir::{DType, KernelBuilder, Privilege, Scalar};
use weft_runtime::testing::{FakeBackend, Log, f64_store, f64_values};
use weft_runtime::window::INITIAL_WINDOW;
use weft_runtime::{
    Core, Error, IndexTask, KernelEntry, NoFusion, Partition, Plan, PlanContext, Planner,
    PlannerStats, PluginId, Settings, StoreId, TaskArg, Tiling,
};

/// A planner that would run the whole window together, and runs `group` tasks at a time
/// (each on its own kernel: the policy, not fusion, is under test).
struct Together {
    group: usize,
}

impl Planner for Together {
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize {
        window.len()
    }

    fn plan(
        &mut self,
        window: &[IndexTask],
        context: &PlanContext<'_>,
    ) -> weft_runtime::Result<Plan> {
        let prefix = self.group.min(window.len());
        Ok(Plan {
            prefix,
            fused: None,
            explanation: context
                .explain
                .then(|| format!("{prefix} of {} together\n", window.len())),
            summary: context.summarize.then(|| weft_runtime::PlanSummary {
                tasks: prefix,
                headline: format!("{prefix} together"),
                details: vec![format!("of {}", window.len())],
                cut: (prefix < window.len()).then(|| "cut".to_string()),
            }),
        })
    }

    fn stats(&self) -> PlannerStats {
        PlannerStats::default()
    }
}

fn core_with(planner: Box<dyn Planner>, bound: usize) -> (Core, Arc<Mutex<Log>>) {
    let backend = FakeBackend::default();
    let log = backend.log();
    let settings = Settings {
        window_bound: bound,
        ..Settings::default()
    };
    (Core::new(settings, Box::new(backend), planner), log)
}

fn launched(log: &Arc<Mutex<Log>>) -> Vec<String> {
    log.lock().unwrap().launched.clone()
}

/// `out = a * k + c`, element-wise over one dimension.
fn affine(name: &str, k: f64, c: f64) -> Arc<KernelEntry> {
    let mut b = KernelBuilder::new(name);
    let a = b.store(DType::F64, 1, Privilege::Read);
    let out = b.store(DType::F64, 1, Privilege::Write);
    b.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let kk = b.const_f64(k);
        let cc = b.const_f64(c);
        let y = b.mul(x, kk);
        let z = b.add(y, cc);
        b.store(out, i, z);
    });
    Arc::new(KernelEntry::new(name, &b.finish()).unwrap())
}

/// A kernel with two store parameters and an empty body: for tasks that submit checks reject
/// or that never run.
fn signature(
    name: &str,
    a: (DType, u32, Privilege),
    b: (DType, u32, Privilege),
) -> Arc<KernelEntry> {
    let mut k = KernelBuilder::new(name);
    let _a = k.store(a.0, a.1, a.2);
    let _b = k.store(b.0, b.1, b.2);
    Arc::new(KernelEntry::new(name, &k.finish()).unwrap())
}

fn vector(core: &mut Core, values: &[f64]) -> StoreId {
    f64_store(core, values).unwrap()
}

fn values(core: &mut Core, s: StoreId) -> Vec<f64> {
    f64_values(core, s).unwrap()
}

fn whole(n: u64) -> Partition {
    Partition::Tiling(Tiling {
        tile: smallvec::smallvec![n],
        offset: smallvec::smallvec![0],
        projection: smallvec::smallvec![Some(0)],
        skew: None,
    })
}

/// A task `kernel(a -> out)` over one point.
fn task(kernel: &Arc<KernelEntry>, a: StoreId, out: StoreId, n: u64) -> IndexTask {
    IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![1],
        vec![
            TaskArg::new(a, whole(n), Privilege::Read),
            TaskArg::new(out, whole(n), Privilege::Write),
        ],
        Vec::new(),
    )
}

#[test]
fn a_window_that_would_run_together_grows_instead_of_running() {
    let (mut core, log) = core_with(Box::new(Together { group: usize::MAX }), 256);
    let k = affine("t.inc", 1.0, 1.0);
    let src = vector(&mut core, &[0.0; 4]);
    let outs: Vec<StoreId> = (0..40)
        .map(|_| core.create_store(vec![4], DType::F64).unwrap())
        .collect();
    for &o in &outs {
        core.submit(task(&k, src, o, 4)).unwrap();
    }
    assert!(
        launched(&log).is_empty(),
        "nothing ran while the window grew"
    );
    assert_eq!(core.window().size(), 64, "16 -> 32 -> 64");
    assert_eq!(core.pending_tasks(), 40);
    core.flush().unwrap();
    assert_eq!(launched(&log).len(), 40);
    assert_eq!(values(&mut core, outs[39]), vec![1.0; 4]);
}

#[test]
fn a_window_grows_only_up_to_its_bound() {
    let (mut core, log) = core_with(Box::new(Together { group: 5 }), 20);
    let k = affine("t.inc", 1.0, 1.0);
    let src = vector(&mut core, &[0.0; 2]);
    for _ in 0..20 {
        let o = core.create_store(vec![2], DType::F64).unwrap();
        core.submit(task(&k, src, o, 2)).unwrap();
    }
    assert_eq!(core.window().size(), 20);
    // The window reached its bound full: its front (one group of 5) ran.
    assert_eq!(launched(&log).len(), 5);
    assert_eq!(core.pending_tasks(), 15);
}

/// A full window of a loop's iterations runs up to the end of its last whole iteration, so
/// that every later window starts at the body's first task (and is the same plan); the tasks
/// before the loop belong to no iteration.
#[test]
fn a_full_window_of_a_loop_is_cut_after_a_whole_iteration() {
    let (mut core, log) = core_with(Box::new(Together { group: usize::MAX }), 32);
    let head = affine("t.head", 1.0, 0.0);
    let body: Vec<Arc<KernelEntry>> = ["t.a", "t.b", "t.c", "t.d", "t.e"]
        .iter()
        .map(|name| affine(name, 2.0, 1.0))
        .collect();
    let src = vector(&mut core, &[1.0; 2]);
    let submit = |core: &mut Core, k: &Arc<KernelEntry>| {
        let o = core.create_store(vec![2], DType::F64).unwrap();
        core.submit(task(k, src, o, 2)).unwrap();
    };
    for _ in 0..3 {
        submit(&mut core, &head);
    }
    let mut ran = Vec::new();
    for _ in 0..40 {
        for k in &body {
            submit(&mut core, k);
            let now = launched(&log).len();
            if now > ran.last().copied().unwrap_or(0) {
                ran.push(now);
                let first = core
                    .window()
                    .tasks()
                    .first()
                    .map(|t| t.kernel.name().to_string());
                assert_eq!(first.as_deref(), Some("t.a"), "after {now} launches");
            }
        }
    }
    // The first full window (3 + 29 tasks) ran 3 + 5 * 5; each later one 6 whole iterations.
    assert_eq!(ran.first(), Some(&28), "{ran:?}");
    assert!(ran.windows(2).all(|w| w[1] - w[0] == 30), "{ran:?}");
    // Without a repeating body (every kernel its own), the whole window runs.
    let (mut core, log) = core_with(Box::new(Together { group: usize::MAX }), 32);
    let src = vector(&mut core, &[1.0; 2]);
    for i in 0..32 {
        let k = affine(&format!("t.k{i}"), 1.0, 1.0);
        let o = core.create_store(vec![2], DType::F64).unwrap();
        core.submit(task(&k, src, o, 2)).unwrap();
    }
    assert_eq!(launched(&log).len(), 32);
}

/// The cut only shortens what the planner sees: with fronts of 3 tasks (shorter than the
/// loop's iterations) and a chain through the stores (each task reads the last one's
/// result), every task runs once, in program order, and the values are the loop's.
#[test]
fn a_loop_cut_with_short_fronts_keeps_program_order() {
    let (mut core, log) = core_with(Box::new(Together { group: 3 }), 32);
    let body: Vec<(Arc<KernelEntry>, f64, f64)> = [(2.0, 1.0), (1.0, -3.0), (0.5, 0.25)]
        .iter()
        .enumerate()
        .map(|(i, &(k, c))| (affine(&format!("t.step{i}"), k, c), k, c))
        .collect();
    let mut last = vector(&mut core, &[1.0; 2]);
    let mut want = 1.0f64;
    let mut submitted = 0;
    for _ in 0..40 {
        for (kernel, k, c) in &body {
            let out = core.create_store(vec![2], DType::F64).unwrap();
            core.submit(task(kernel, last, out, 2)).unwrap();
            submitted += 1;
            last = out;
            want = want * k + c;
        }
    }
    core.flush().unwrap();
    assert_eq!(launched(&log).len(), submitted, "every task ran once");
    let order: Vec<String> = launched(&log);
    for (i, name) in order.iter().enumerate() {
        assert!(
            name.contains(&format!("step{}", i % 3)),
            "launch {i}: {name}"
        );
    }
    assert_eq!(values(&mut core, last), vec![want; 2]);
}

#[test]
fn without_fusion_the_window_runs_its_front_when_full() {
    let (mut core, log) = core_with(Box::new(NoFusion), 256);
    let k = affine("t.inc", 1.0, 1.0);
    let src = vector(&mut core, &[0.0; 2]);
    for _ in 0..INITIAL_WINDOW {
        let o = core.create_store(vec![2], DType::F64).unwrap();
        core.submit(task(&k, src, o, 2)).unwrap();
    }
    assert_eq!(core.window().size(), INITIAL_WINDOW, "it never grows");
    assert_eq!(launched(&log).len(), 1);
    assert_eq!(core.pending_tasks(), INITIAL_WINDOW - 1);
}

/// A read runs the window up to the last task that writes what it reads, in program order,
/// the tasks in between included (left behind, they would keep their inputs alive and miss
/// fusing with their neighbours); the tasks after it stay pending.
#[test]
fn a_read_runs_the_window_up_to_the_last_writer_in_program_order() {
    let (mut core, log) = core_with(Box::new(Together { group: 1 }), 256);
    let double = affine("t.double", 2.0, 0.0);
    let inc = affine("t.inc", 1.0, 1.0);
    let a = vector(&mut core, &[1.0, 2.0]);
    let b = core.create_store(vec![2], DType::F64).unwrap();
    let c = core.create_store(vec![2], DType::F64).unwrap();
    let unrelated = core.create_store(vec![2], DType::F64).unwrap();
    let later = core.create_store(vec![2], DType::F64).unwrap();
    core.submit(task(&double, a, b, 2)).unwrap(); // b = 2a
    core.submit(task(&inc, a, unrelated, 2)).unwrap(); // not needed for c, but before it
    core.submit(task(&inc, b, c, 2)).unwrap(); // c = b + 1
    core.submit(task(&double, c, a, 2)).unwrap(); // a = 2c, after c's read: stays pending
    core.submit(task(&inc, b, later, 2)).unwrap(); // after it too
    assert_eq!(values(&mut core, c), vec![3.0, 5.0]);
    assert_eq!(launched(&log), vec!["t.double", "t.inc", "t.inc"]);
    assert_eq!(core.pending_tasks(), 2);
    // The rest runs later, in program order.
    assert_eq!(values(&mut core, a), vec![6.0, 10.0]);
    assert_eq!(core.pending_tasks(), 1);
    assert_eq!(
        values(&mut core, unrelated),
        vec![2.0, 3.0],
        "it read a before a changed"
    );
    assert_eq!(values(&mut core, later), vec![3.0, 5.0]);
    assert_eq!(core.pending_tasks(), 0);
}

#[test]
fn a_host_write_runs_the_pending_readers_first() {
    let (mut core, _log) = core_with(Box::new(Together { group: 1 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0, 2.0]);
    let b = core.create_store(vec![2], DType::F64).unwrap();
    core.submit(task(&copy, a, b, 2)).unwrap();
    let new: Vec<u8> = [7.0f64, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    core.write_bytes(a, &new).unwrap();
    assert_eq!(values(&mut core, b), vec![1.0, 2.0]);
    assert_eq!(values(&mut core, a), vec![7.0, 8.0]);
}

/// What [`faulty_setup`] makes: the core, its log, the kernels `t.bad` and `t.good`, `a`, `b`.
type FaultySetup = (
    Core,
    Arc<Mutex<Log>>,
    Arc<KernelEntry>,
    Arc<KernelEntry>,
    StoreId,
    StoreId,
);

/// A core whose kernel `t.bad` faults and `t.good` adds 5, an input `a = [1]` and an
/// output `b` of one element.
fn faulty_setup() -> FaultySetup {
    let (mut core, log) = core_with(Box::new(Together { group: 1 }), 256);
    let bad = affine("t.bad", 1.0, 0.0);
    let good = affine("t.good", 1.0, 5.0);
    log.lock().unwrap().faulty.insert("t.bad".into());
    let a = vector(&mut core, &[1.0]);
    let b = core.create_store(vec![1], DType::F64).unwrap();
    (core, log, bad, good, a, b)
}

#[test]
fn a_fault_skips_only_what_depends_on_it_and_the_core_keeps_working() {
    let (mut core, log, bad, good, a, b) = faulty_setup();
    let c = core.create_store(vec![1], DType::F64).unwrap();
    let d = core.create_store(vec![1], DType::F64).unwrap();
    let after = affine("t.after", 1.0, 1.0);
    core.submit(task(&bad, a, b, 1)).unwrap();
    core.submit(task(&good, a, c, 1)).unwrap();
    // Reads what the failed task should have written: it cannot run.
    core.submit(task(&after, b, d, 1)).unwrap();
    let e = core.flush().unwrap_err();
    assert!(
        matches!(&e, Error::KernelFault { kernel, .. } if kernel == "t.bad"),
        "{e}"
    );
    assert_eq!(core.pending_tasks(), 0);
    assert_eq!(
        launched(&log),
        vec!["t.bad", "t.good"],
        "the independent task ran"
    );
    assert_eq!(values(&mut core, c), vec![6.0]);
    // What the failed task writes, and what depends on it, report the failure when read.
    let read_b = f64_values(&mut core, b).unwrap_err();
    assert!(
        matches!(&read_b, Error::KernelFault { kernel, .. } if kernel == "t.bad"),
        "{read_b}"
    );
    let read_d = f64_values(&mut core, d).unwrap_err();
    assert!(
        matches!(&read_d, Error::NotRun { kernel, message, .. }
            if kernel == "t.after" && message.contains("t.bad")),
        "{read_d}"
    );
    // Reported once: the next flush is clean.
    core.flush().unwrap();
    // Written whole by the host, the store holds values again.
    core.write_bytes(b, &4.0f64.to_le_bytes()).unwrap();
    core.submit(task(&after, b, d, 1)).unwrap();
    assert_eq!(values(&mut core, d), vec![5.0]);
    core.submit(task(&good, a, c, 1)).unwrap();
    assert_eq!(values(&mut core, c), vec![6.0]);
}

#[test]
fn a_read_reports_the_failure_that_left_its_store_without_a_value_and_flush_does_not_again() {
    let (mut core, _log, bad, _good, a, b) = faulty_setup();
    core.submit(task(&bad, a, b, 1)).unwrap();
    assert!(f64_values(&mut core, b).is_err());
    core.flush().unwrap();
    // Many failures: flush reports the first and counts the rest.
    let outs: Vec<StoreId> = (0..3)
        .map(|_| core.create_store(vec![1], DType::F64).unwrap())
        .collect();
    for &o in &outs {
        core.submit(task(&bad, a, o, 1)).unwrap();
    }
    let e = core.flush().unwrap_err().to_string();
    assert!(e.contains("and 2 more failed task(s)"), "{e}");
}

#[test]
fn a_faults_error_names_the_call_site_its_task_was_submitted_from() {
    let (mut core, _log, bad, good, a, b) = faulty_setup();
    core.set_call_site(Some("app.rs:7:3".into()));
    core.submit(task(&bad, a, b, 1)).unwrap();
    core.set_call_site(Some("app.rs:9:1".into()));
    core.submit(task(&good, a, b, 1)).unwrap();
    core.set_call_site(None);
    let e = core.flush().unwrap_err();
    assert!(
        matches!(&e, Error::KernelFault { kernel, message }
            if kernel == "t.bad" && message.ends_with("(from the call at app.rs:7:3)")),
        "{e}"
    );
    // Without a call site, errors are as they were.
    let fresh = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&bad, a, fresh, 1)).unwrap();
    let e = core.flush().unwrap_err().to_string();
    assert!(!e.contains("from the call"), "{e}");
}

#[test]
fn truncating_drops_a_calls_tasks_and_frees_what_only_they_held() {
    let (mut core, log) = core_with(Box::new(Together { group: 1 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0]);
    let kept = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&copy, a, kept, 1)).unwrap();
    let mark = core.next_seq();
    let temp = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&copy, a, temp, 1)).unwrap();
    core.release(temp);
    assert_eq!(
        core.memory().0,
        3,
        "the dropped store lives while a task names it"
    );
    core.truncate_window(mark);
    assert_eq!(core.pending_tasks(), 1);
    assert_eq!(core.memory().0, 2);
    assert_eq!(core.stats().tasks_submitted, 1);
    core.flush().unwrap();
    assert_eq!(launched(&log), vec!["t.copy"]);
}

#[test]
fn a_store_dropped_while_pending_is_freed_after_its_last_task() {
    let (mut core, log) = core_with(Box::new(Together { group: 1 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0, 2.0]);
    let t = core.create_store(vec![2], DType::F64).unwrap();
    core.submit(task(&copy, a, t, 2)).unwrap();
    core.release(t);
    assert!(log.lock().unwrap().freed.is_empty());
    core.flush().unwrap();
    assert_eq!(
        log.lock().unwrap().freed.len(),
        1,
        "its buffer went back to the back end"
    );
    assert_eq!(core.memory(), (1, 16));
}

#[test]
fn explanations_are_gathered_when_asked_for() {
    let (mut core, _log) = core_with(Box::new(Together { group: 2 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0]);
    let b = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert!(core.take_explanations().is_empty(), "off by default");
    core.set_explain(true);
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert_eq!(
        core.take_explanations(),
        vec!["2 of 2 together\n".to_string()]
    );
}

/// A run of the window is summarized under one heading, its plans one after another; a run
/// summarized alike before is counted, not shown again, and the count ends the summaries.
#[test]
fn window_runs_are_summarized_once_each_and_repeats_are_counted() {
    let (mut core, _log) = core_with(Box::new(Together { group: 2 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0]);
    let b = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert!(core.take_summaries().is_empty(), "off by default");
    core.set_summarize(true);
    for _ in 0..3 {
        core.submit(task(&copy, a, b, 1)).unwrap();
        core.submit(task(&copy, a, b, 1)).unwrap();
        core.submit(task(&copy, a, b, 1)).unwrap();
        core.flush().unwrap();
    }
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    core.finish_summaries();
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: window of 3 tasks -> 2 tasks\n  2 together\n    of 3\n  cut\n  1 together\n    of 1\n"
                .to_string(),
            "weft: 1 together\n  of 1\n".to_string(),
            "weft: 2 more window run(s) like those above\n".to_string(),
        ]
    );
    core.finish_summaries();
    assert!(core.take_summaries().is_empty(), "the count is reset");
}

/// Without a summary from the planner, each task of a run is named as running alone, with
/// the call site it was submitted from.
#[test]
fn a_planner_without_summaries_gets_tasks_named_alone() {
    let (mut core, _log) = core_with(Box::new(NoFusion), 256);
    core.set_summarize(true);
    let copy = affine("t.copy.f64.r1", 1.0, 0.0);
    let a = vector(&mut core, &[1.0]);
    let b = core.create_store(vec![1], DType::F64).unwrap();
    core.set_call_site(Some("app.rs:7:3".into()));
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.set_call_site(None);
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert_eq!(
        core.take_summaries(),
        vec![
            "weft: window of 2 tasks -> 2 tasks\n  t.copy ran alone (fusion is off), at app.rs:7\n  \
             t.copy ran alone (fusion is off)\n"
                .to_string()
        ]
    );
}

/// With profiling on, every task run is timed and counted under its kernel's name, with the
/// call site it was submitted from; with it off, nothing is.
#[test]
fn profiling_counts_every_run_per_kernel() {
    let (mut core, _log) = core_with(Box::new(Together { group: 1 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let scale = affine("t.scale", 2.0, 0.0);
    let a = vector(&mut core, &[1.0, 2.0]);
    let b = core.create_store(vec![2], DType::F64).unwrap();
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert!(core.profile().kernels.is_empty(), "off by default");
    core.set_profile(true);
    core.set_call_site(Some("app.rs:3:1".into()));
    for _ in 0..3 {
        core.submit(task(&copy, a, b, 1)).unwrap();
    }
    core.set_call_site(None);
    core.submit(task(&scale, b, a, 2)).unwrap();
    core.flush().unwrap();
    let profile = core.profile();
    let mut counts: Vec<(&str, u64)> = profile
        .kernels
        .iter()
        .map(|k| (k.kernel.as_str(), k.launches))
        .collect();
    counts.sort();
    assert_eq!(counts, [("t.copy", 3), ("t.scale", 1)]);
    assert_eq!(
        profile.kernel("t.copy").unwrap().site.as_deref(),
        Some("app.rs:3:1")
    );
    assert_eq!(profile.kernel("t.scale").unwrap().site, None);
    assert!(profile.total_seconds() >= 0.0);
}

#[test]
fn a_kernel_compiles_once_and_compiling_can_be_forbidden() {
    let (mut core, log) = core_with(Box::new(Together { group: 1 }), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let same = affine("t.copy", 1.0, 0.0);
    let other = affine("t.other", 2.0, 0.0);
    let a = vector(&mut core, &[1.0]);
    let b = core.create_store(vec![1], DType::F64).unwrap();
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.submit(task(&same, a, b, 1)).unwrap();
    core.flush().unwrap();
    assert_eq!(
        log.lock().unwrap().compiled,
        vec!["t.copy"],
        "same content, same id"
    );
    assert_eq!(core.stats().exec.kernels_compiled, 1);
    core.forbid_compiles(true);
    core.submit(task(&copy, a, b, 1)).unwrap();
    core.flush().unwrap();
    core.submit(task(&other, a, b, 1)).unwrap();
    let e = core.flush().unwrap_err();
    assert!(
        matches!(&e, Error::CompileForbidden { kernel } if kernel == "t.other"),
        "{e}"
    );
}

#[test]
fn submit_checks_tasks_against_their_kernels_and_partitions() {
    let (mut core, _log) = core_with(Box::new(NoFusion), 256);
    let copy = affine("t.copy", 1.0, 0.0);
    let a = vector(&mut core, &[1.0, 2.0]);
    let m = core.create_store(vec![2, 2], DType::F64).unwrap();
    let i = core.create_store(vec![2], DType::I64).unwrap();
    for (t, needle) in [
        (task(&copy, a, m, 2), "rank 2"),
        (task(&copy, a, i, 2), "i64"),
        (
            IndexTask::new(
                PluginId(0),
                copy.clone(),
                vec![1; 9],
                vec![
                    TaskArg::new(a, Partition::None, Privilege::Read),
                    TaskArg::new(a, Partition::None, Privilege::Write),
                ],
                Vec::new(),
            ),
            "launch domain of rank 9",
        ),
        (
            IndexTask::new(
                PluginId(0),
                copy.clone(),
                vec![2],
                vec![
                    TaskArg::new(a, Partition::None, Privilege::Read),
                    TaskArg::new(a, Partition::None, Privilege::Write),
                ],
                Vec::new(),
            ),
            "tiles overlap",
        ),
        (
            IndexTask::new(
                PluginId(0),
                copy.clone(),
                vec![1],
                vec![TaskArg::new(a, Partition::None, Privilege::Read)],
                vec![Scalar::F64(1.0)],
            ),
            "takes 2 stores",
        ),
    ] {
        let e = core.submit(t).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::InvalidTask { .. }), "{text}");
        assert!(
            text.contains(needle) && text.contains("t.copy"),
            "{needle}: {text}"
        );
    }
    assert_eq!(core.pending_tasks(), 0);
}

#[test]
fn reading_a_store_never_written_gives_zeros_and_allocates_nothing() {
    let (mut core, _log) = core_with(Box::new(NoFusion), 256);
    let s = core.create_store(vec![3], DType::I32).unwrap();
    assert_eq!(core.read_bytes(s).unwrap(), vec![0u8; 12]);
    assert_eq!(core.memory(), (1, 0));
    core.release(s);
    assert_eq!(core.memory(), (0, 0));
}

#[test]
fn image_partitions_are_checked_at_submit() {
    let (mut core, _log) = core_with(Box::new(NoFusion), 256);
    // Kernels of the right shape: an (n, 2) source of ranges and a rank-1 store.
    let ranges = (DType::I64, 2, Privilege::Read);
    let write = signature("t.image", ranges, (DType::F64, 1, Privilege::Write));
    let read = signature("t.image_read", ranges, (DType::F64, 1, Privilege::Read));
    let pos = core.create_store(vec![4, 2], DType::I64).unwrap();
    let vals = core.create_store(vec![10], DType::F64).unwrap();
    let rows = Partition::Tiling(Tiling {
        tile: smallvec::smallvec![2, 2],
        offset: smallvec::smallvec![0, 0],
        projection: smallvec::smallvec![Some(0), None],
        skew: None,
    });
    let image_task = |kernel: &Arc<KernelEntry>, args: Vec<TaskArg>| {
        IndexTask::new(PluginId(0), kernel.clone(), vec![2], args, Vec::new())
    };
    // Written through an image of a source every point sees whole: two points would write
    // the same entries.
    let e = core
        .submit(image_task(
            &write,
            vec![
                TaskArg::new(pos, Partition::None, Privilege::Read),
                TaskArg::new(vals, Partition::Image(0), Privilege::Write),
            ],
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("image of argument 0") && e.contains("same rows"),
        "{e}"
    );
    // A source that is not read-only, not (n, 2), or not an argument.
    let read_f64 = (DType::F64, 1, Privilege::Read);
    let pos_rw = signature(
        "t.image_rw",
        (DType::I64, 2, Privilege::ReadWrite),
        read_f64,
    );
    let vals_src = signature("t.image_flat", read_f64, read_f64);
    for (kernel, source, partition, privilege, image) in [
        (&pos_rw, pos, rows.clone(), Privilege::ReadWrite, 0),
        (&vals_src, vals, Partition::None, Privilege::Read, 0),
        (&read, pos, rows.clone(), Privilege::Read, 5),
    ] {
        let e = core
            .submit(image_task(
                kernel,
                vec![
                    TaskArg::new(source, partition, privilege),
                    TaskArg::new(vals, Partition::Image(image), Privilege::Read),
                ],
            ))
            .unwrap_err()
            .to_string();
        assert!(e.contains("image of argument"), "{e}");
    }
    // Rows tiled like the launch: accepted, and the image names the source's storage.
    core.submit(image_task(
        &write,
        vec![
            TaskArg::new(pos, rows, Privilege::Read),
            TaskArg::new(vals, Partition::Image(0), Privilege::Write),
        ],
    ))
    .unwrap();
    let queued = core.window().tasks().last().unwrap();
    let image = queued.args[1].root_partition.image.as_ref().unwrap();
    assert_eq!(image.source, core.stores().get(pos).unwrap().storage);
}

/// A launch that reads through an image reads its source's bounds back (two per point); later
/// launches find them known and read nothing, until the source changes: a host write, or a
/// task that writes it. Each read back waits for the device, so a solver's matrix-vector
/// product would otherwise wait for the GPU at every launch.
#[test]
fn image_bounds_are_read_back_once_until_their_source_changes() {
    let (mut core, log) = core_with(Box::new(NoFusion), 256);
    let ranges = (DType::I64, 2, Privilege::Read);
    let read = signature("t.image_read", ranges, (DType::F64, 1, Privilege::Read));
    let refill = signature(
        "t.refill",
        (DType::I64, 2, Privilege::ReadWrite),
        (DType::F64, 1, Privilege::Read),
    );
    let pos = core.create_store(vec![4, 2], DType::I64).unwrap();
    let bounds: Vec<u8> = [0i64, 2, 2, 5, 5, 7, 7, 10]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    core.write_bytes(pos, &bounds).unwrap();
    let vals = vector(&mut core, &[1.0; 10]);
    let rows = Partition::Tiling(Tiling {
        tile: smallvec::smallvec![2, 2],
        offset: smallvec::smallvec![0, 0],
        projection: smallvec::smallvec![Some(0), None],
        skew: None,
    });
    let reads = |log: &Arc<Mutex<Log>>| log.lock().unwrap().reads.len();
    let through_image = |core: &mut Core| {
        let before = reads(&log);
        core.submit(IndexTask::new(
            PluginId(0),
            read.clone(),
            vec![2],
            vec![
                TaskArg::new(pos, rows.clone(), Privilege::Read),
                TaskArg::new(vals, Partition::Image(0), Privilege::Read),
            ],
            Vec::new(),
        ))
        .unwrap();
        core.flush().unwrap();
        reads(&log) - before
    };
    assert_eq!(through_image(&mut core), 4, "two points, two bounds each");
    assert_eq!(through_image(&mut core), 0, "known");
    assert_eq!(through_image(&mut core), 0, "still known");
    core.write_bytes(pos, &bounds).unwrap();
    assert_eq!(through_image(&mut core), 4, "a host write: read again");
    assert_eq!(through_image(&mut core), 0, "known again");
    core.submit(IndexTask::new(
        PluginId(0),
        refill.clone(),
        vec![1],
        vec![
            TaskArg::new(pos, Partition::None, Privilege::ReadWrite),
            TaskArg::new(vals, Partition::None, Privilege::Read),
        ],
        Vec::new(),
    ))
    .unwrap();
    core.flush().unwrap();
    assert_eq!(through_image(&mut core), 4, "a task wrote it: read again");
}
