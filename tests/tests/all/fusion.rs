//! Task fusion through the real host and plugin: the paper's worked cases, memoization, the
//! switches, and fused results against unfused ones.

use weft::{Array, Config, Ix, Numeric, Range};
use weft_ir::DType;

fn numeric(fusion: bool, pieces: u64) -> Numeric {
    let config = Config {
        fusion,
        pieces,
        threads: 2,
        component_cache: None,
        explain: true,
        ..Config::default()
    };
    weft_tests::numeric_with(config)
}

fn explanations(np: &Numeric) -> String {
    np.runtime(|rt| rt.take_explanations()).join("")
}

/// One sweep of Figure 1's stencil on the `(n+2) x (n+2)` `grid`: `work`, the five views'
/// sum times 0.2 (named `work_name` if given), written back through the center view; then
/// the window runs and its explanations are returned.
fn stencil_sweep(grid: &Array, n: i64, work_name: Option<&str>) -> String {
    let np = grid.numeric();
    let view = |r: i64, c: i64| grid.slice(&[Range::new(r, r + n), Range::new(c, c + n)]);
    let center = view(1, 1);
    let mut work = (&center + &view(0, 1) + &view(1, 2) + &view(1, 0) + &view(2, 1)) * 0.2;
    if let Some(name) = work_name {
        work = work.named(name);
    }
    center.assign(&work).expect("the write-back");
    drop(work);
    np.runtime(|rt| rt.flush()).expect("the window runs");
    explanations(np)
}

/// Figure 1 of the Diffuse paper: the five-point stencil. The sums over the aliasing views
/// fuse; `center[:] = work` writes `grid` through the center view after other views of `grid`
/// were read, which Diffuse's anti-dependence constraint cuts. Those views are the center's
/// shifted by one row or column, so here it fuses through a bounded anti-dependence instead,
/// on two pieces as on one (see `stencil_fusion`).
#[test]
fn figure_1_stencil_write_back_fuses_through_a_bounded_anti_dependence() {
    let np = numeric(true, 2);
    let n = 8u64;
    let grid = np.random_uniform(&[n + 2, n + 2], 0.0, 1.0, 7, DType::F64);
    grid.check().unwrap();
    np.runtime(|rt| rt.flush()).unwrap();
    explanations(&np);
    let text = stencil_sweep(&grid, n as i64, None);
    let grid_store = grid.handle().unwrap().id().0;
    assert!(
        text.contains("6 task(s) fused"),
        "the four adds, the scale and the write-back fuse:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "fused through a bounded anti-dependence on store {grid_store}: argument 1 of \
             numeric.copy.f64.r2.a overwrites what earlier tasks read through views shifted by \
             at most 1 row(s)"
        )),
        "{text}"
    );
}

/// Diffuse's anti-dependence cut still holds where the shift is not bounded: a write over
/// rows that an earlier task of the window read six rows away.
#[test]
fn an_anti_dependence_beyond_the_halo_still_cuts() {
    let np = numeric(true, 1);
    let grid = np.random_uniform(&[20, 5], 0.0, 1.0, 3, DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    explanations(&np);
    let doubled = &grid.slice(&[Range::new(0, 10), Range::all()]) * 2.0;
    grid.slice(&[Range::new(6, 16), Range::all()])
        .assign(&doubled)
        .expect("the write-back");
    drop(doubled);
    np.runtime(|rt| rt.flush()).expect("the window runs");
    let text = explanations(&np);
    let grid_store = grid.handle().unwrap().id().0;
    assert!(
        text.contains(&format!(
            "anti-dependence on store {grid_store} (argument 0 of numeric.binary.mul.f64.r2.as)"
        )),
        "{text}"
    );
    assert!(!text.contains("bounded anti-dependence"), "{text}");
}

/// Arrays the application names (`Array::named`) are named in explanations: the stencil's
/// deferred write on the grid, and the fused kernel's parameters, say `"grid"`; a view's name
/// goes to the storage it views.
#[test]
fn named_arrays_are_named_in_explanations() {
    let np = numeric(true, 1);
    let n = 8i64;
    let grid = np
        .random_uniform(&[10, 10], 0.0, 1.0, 7, DType::F64)
        .named("grid");
    let text = stencil_sweep(&grid, n, Some("work"));
    let grid_store = grid.handle().unwrap().id().0;
    assert!(
        text.contains(&format!(
            "bounded anti-dependence on store {grid_store} \"grid\": argument 1 of"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("store {grid_store} \"grid\", argument 0 of")),
        "the fused kernel's parameters name the grid:\n{text}"
    );
    assert!(text.contains("\"work\""), "{text}");
}

/// Figure 6 of the Diffuse paper: `z = 2x; w = y + z; v = w**2; norm(w[n/2:])`, then
/// `del x, y, z, w`. The three element-wise tasks fuse (with the norm's first task, which
/// fills its 0-d result: a scalar task joins any launch), and the norm's reduction, over
/// another launch domain, does not. Only `z` is temporary: the application still holds `v`,
/// and the pending norm reads `w`.
#[test]
fn figure_6_only_z_is_temporary() {
    let np = numeric(true, 1);
    let n = 64u64;
    let x = np.zeros(&[n], DType::F64);
    let y = np.ones(&[n], DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    explanations(&np);
    let z = &x * 2.0;
    let w = &y + &z;
    let v = w.pow(2.0);
    let norm = w.slice(&[Range::new(n as i64 / 2, n as i64)]).norm();
    let (zid, wid, vid) = (
        z.handle().unwrap().id().0,
        w.handle().unwrap().id().0,
        v.handle().unwrap().id().0,
    );
    drop((x, y, z, w));
    np.runtime(|rt| rt.flush()).unwrap();
    let text = explanations(&np);
    let first = text.split("weft fusion:").nth(1).unwrap_or_default();
    for op in ["binary.mul", "binary.add", "binary.pow"] {
        assert!(
            first.contains(op),
            "{op} is in the first fused task:\n{text}"
        );
    }
    assert!(!first.contains("reduce"), "the reduction is not:\n{text}");
    let temps = first
        .lines()
        .find(|l| l.contains("temporaries:"))
        .unwrap_or_else(|| panic!("no temporaries line:\n{text}"));
    let named = |id: u64| {
        temps
            .split(|c: char| !c.is_ascii_alphanumeric() && c != ' ')
            .any(|part| part.trim() == format!("store {id}"))
    };
    assert!(named(zid), "z is temporary: {temps}");
    assert!(!named(wid), "w is not: {temps}");
    assert!(!named(vid), "v is not: {temps}");
    // And the values are right: v = (1 + 0)^2, norm = sqrt(n/2).
    assert!(v.to_vec().unwrap().iter().all(|&e| e == 1.0));
    assert!((norm.item().unwrap() - (n as f64 / 2.0).sqrt()).abs() < 1e-12);
}

/// A chain of element-wise operations becomes one task and one kernel, and its temporaries
/// are never allocated.
#[test]
fn element_wise_chains_fuse_and_temporaries_are_never_allocated() {
    let n = 1 << 16;
    let np = numeric(true, 1);
    let a = np.random_uniform(&[n], 1.0, 2.0, 1, DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    let before = np.runtime(|rt| rt.stats());
    let (_, bytes_before) = np.runtime(|rt| rt.memory());
    let r = ((&a * 3.0 + 1.0).sqrt() - &a) / 2.0;
    let out = r.to_vec().unwrap();
    let after = np.runtime(|rt| rt.stats());
    assert_eq!(
        after.exec.tasks_executed - before.exec.tasks_executed,
        1,
        "one fused task"
    );
    let (_, bytes_after) = np.runtime(|rt| rt.memory());
    // Only `r` itself was allocated: 8 bytes per element.
    assert_eq!(bytes_after - bytes_before, 8 * n);
    let want: Vec<f64> = a
        .to_vec()
        .unwrap()
        .iter()
        .map(|&x| ((x * 3.0 + 1.0).sqrt() - x) / 2.0)
        .collect();
    assert_eq!(out, want);
}

/// A loop in steady state compiles nothing: after two iterations, compiling is forbidden and
/// more iterations still run.
#[test]
fn a_steady_state_loop_compiles_nothing() {
    let np = numeric(true, 2);
    let x = np.random_uniform(&[1000], 0.0, 1.0, 3, DType::F64);
    let step = |x: &Array| -> Array {
        let y = (x * 0.5 + 0.25).sqrt();
        let s = y.sum();
        &y / &s
    };
    let mut x = step(&x);
    x.to_vec().unwrap();
    x = step(&x);
    x.to_vec().unwrap();
    let compiled = np.runtime(|rt| rt.stats().exec.kernels_compiled);
    np.runtime(|rt| rt.forbid_compiles(true));
    for _ in 0..5 {
        x = step(&x);
        x.to_vec().unwrap();
    }
    assert_eq!(np.runtime(|rt| rt.stats().exec.kernels_compiled), compiled);
    let hits = np.runtime(|rt| rt.fusion_stats().memo_hits);
    assert!(hits >= 5, "memo hits: {hits}");
    // And a new kind of operation is refused while compiling is forbidden.
    let err = (&x * &x).exp().to_vec().unwrap_err().to_string();
    assert!(err.contains("compiling is forbidden"), "{err}");
}

/// `WEFT_FUSION=0` and the API switch turn fusion off, and results are the same: element-wise
/// results bit for bit, reductions within 1e-12 relative (a fused kernel may add the same
/// terms in another order).
#[test]
fn fusion_can_be_switched_off_and_results_agree() {
    let run = |np: &Numeric| {
        let a = np.random_uniform(&[500], -1.0, 1.0, 5, DType::F64);
        let b = np.random_uniform(&[500], -1.0, 1.0, 6, DType::F64);
        let c = (&a * &b + 1.0).exp() - a.abs().sqrt();
        (c.to_vec().unwrap(), c.sum().item().unwrap())
    };
    let fused = numeric(true, 3);
    let unfused = numeric(false, 3);
    let (f, fs) = run(&fused);
    let (u, us) = run(&unfused);
    assert_eq!(f, u);
    assert!((fs - us).abs() <= 1e-12 * us.abs(), "{fs} vs {us}");
    let tasks = |np: &Numeric| np.runtime(|rt| rt.stats().exec.tasks_executed);
    assert!(tasks(&fused) < tasks(&unfused));
    // The API switch.
    let np = numeric(true, 3);
    np.runtime(|rt| rt.set_fusion(false)).unwrap();
    let (s, ss) = run(&np);
    assert_eq!(s, u);
    assert_eq!(ss, us, "unfused runs agree bit for bit");
}

/// `WEFT_TRACE` (here `Config::trace`) writes a Chrome trace (through `tracing-chrome`) whose
/// spans are named by provenance: a fused kernel names the plugin operations it came from, a
/// plugin call names the plugin and the export; the planner's explanations are in it too.
#[test]
fn traces_name_fused_kernels_by_their_provenance() {
    let path = std::env::temp_dir().join(format!("weft-trace-{}.json", std::process::id()));
    let config = Config {
        trace: Some(path.clone()),
        component_cache: None,
        ..Config::default()
    };
    {
        let np = weft_tests::numeric_with(config);
        let a = np.ones(&[100], DType::F64);
        let b = (&a * 2.0 + 1.0).sqrt();
        b.to_vec().unwrap();
    }
    let text = std::fs::read_to_string(&path).expect("trace written");
    let _ = std::fs::remove_file(&path);
    let events: serde_json::Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = events.as_array().expect("an array of trace events");
    let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(
        names.iter().any(|n| n.starts_with("fused(numeric.")
            && n.contains("numeric.binary.mul")
            && n.contains("numeric.unary.sqrt")),
        "{names:?}"
    );
    assert!(names.contains(&"numeric.ones"), "a plugin call: {names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("compile: fused(numeric.")),
        "{names:?}"
    );
    assert!(
        names.contains(&"weft::explain"),
        "an explanation: {names:?}"
    );
}

#[test]
fn a_window_whose_fused_kernel_would_pass_the_kernel_limits_runs_in_smaller_fused_tasks() {
    // 600 independent element-wise tasks (two store arguments and a scalar each) in one
    // window: one fused kernel would have 1800 parameters, more than a kernel may have.
    let np = weft_tests::numeric_with(Config {
        window_bound: 1024,
        component_cache: None,
        ..Config::default()
    });
    let inputs: Vec<Array> = (0..600)
        .map(|k| np.from_vec(&[4], &[k as f64, 1.0, 2.0, 3.0]))
        .collect();
    let outputs: Vec<Array> = inputs
        .iter()
        .map(|a| a.binary(weft::numeric::BinaryOp::Mul, 2.0))
        .collect();
    // Run the whole window at once (a read runs only what it needs).
    np.runtime(|rt| rt.flush()).expect("runs");
    let stats = np.runtime(|rt| rt.fusion_stats());
    assert!(
        (2..=600).contains(&stats.kernels_fused),
        "the 600 tasks ran in several fused tasks: {stats:?}"
    );
    for (k, out) in outputs.iter().enumerate() {
        assert_eq!(
            out.to_vec().expect("computes"),
            vec![2.0 * k as f64, 2.0, 4.0, 6.0]
        );
    }
}

/// A runtime that gathers the summaries of its window's runs (`WEFT_EXPLAIN=1`'s text).
fn summarizing(fusion: bool) -> Numeric {
    weft_tests::numeric_with(Config {
        fusion,
        threads: 2,
        component_cache: None,
        summarize: true,
        explain: true,
        ..Config::default()
    })
}

fn summaries(np: &Numeric) -> String {
    np.runtime(|rt| rt.take_summaries()).join("")
}

/// The summary of a small program (a few element-wise operations and a sum): one line per
/// run of the window, in the application's terms, naming the lines of this file that asked
/// for the work; results are those of the unfused program.
#[test]
fn the_summary_of_a_small_program_names_its_lines() {
    let np = summarizing(true);
    let a = np.linspace(0.0, 1.0, 64, DType::F64);
    let b = np.ones(&[64], DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    summaries(&np);
    let first = line!() + 1;
    let c = (&a * 2.0 + &b).exp();
    let total = c.sum();
    drop(c);
    let got = total.item().unwrap();
    let want: f64 = (0..64).map(|i| (2.0 * i as f64 / 63.0 + 1.0).exp()).sum();
    assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
    assert_eq!(
        summaries(&np),
        format!(
            "weft: 4 tasks -> one task running 1 loop (3 temporaries vanished), at {}:{}-{}\n",
            file!(),
            first,
            first + 1
        )
    );
}

/// A fused task whose loops did not all merge is said to run them all: two element-wise
/// operations on arrays of different lengths become one task of two loops, and the summary
/// says which did not merge and why (the full explanation too, instead of only "the whole
/// window fused").
#[test]
fn a_fused_task_whose_loops_stay_apart_is_not_overstated() {
    let np = summarizing(true);
    let a = np.ones(&[64], DType::F64);
    let b = np.ones(&[32], DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    summaries(&np);
    explanations(&np);
    let first = line!() + 1;
    let x = &a * 2.0;
    let y = &b * 3.0;
    np.runtime(|rt| rt.flush()).unwrap();
    let here = |line: u32| format!("{}:{line}", file!());
    assert_eq!(
        summaries(&np),
        format!(
            "weft: 2 tasks -> one task running 2 loops, at {}-{}\n  the loops of \
             numeric.binary.mul (at {}) and numeric.binary.mul (at {}) did not merge: they \
             iterate over arrays of different shapes or tilings\n",
            here(first),
            first + 1,
            here(first),
            here(first + 1)
        )
    );
    let detail = explanations(&np);
    assert!(
        detail.contains("the whole window fused into one task running 2 loops"),
        "{detail}"
    );
    assert_eq!(x.to_vec().unwrap(), vec![2.0; 64]);
    assert_eq!(y.to_vec().unwrap(), vec![3.0; 32]);
}

/// With fusion off, the summary says that every task ran alone, and why.
#[test]
fn the_summary_says_when_fusion_is_off() {
    let np = summarizing(false);
    let a = np.ones(&[8], DType::F64);
    np.runtime(|rt| rt.flush()).unwrap();
    summaries(&np);
    let at = line!() + 1;
    let b = (&a * 2.0).sqrt();
    b.to_vec().unwrap();
    let site = format!("{}:{at}", file!());
    assert_eq!(
        summaries(&np),
        format!(
            "weft: window of 2 tasks -> 2 tasks\n  numeric.binary.mul ran alone (fusion is \
             off), at {site}\n  numeric.unary.sqrt ran alone (fusion is off), at {site}\n"
        )
    );
}

/// `WEFT_PROFILE` (here `Config::profile`) counts every run of every kernel under its
/// provenance: the launch counts are exact, the kernels listed are those that ran, a fused
/// kernel names the operations it came from, and its call site is this file's.
#[test]
fn the_profile_counts_every_kernel_run_exactly() {
    let profiled = |fusion: bool| {
        weft_tests::numeric_with(Config {
            fusion,
            threads: 2,
            component_cache: None,
            profile: true,
            ..Config::default()
        })
    };
    // Unfused: one launch per operation per iteration.
    let np = profiled(false);
    let a = np.ones(&[256], DType::F64);
    for _ in 0..3 {
        let b = (&a * 2.0).exp();
        b.to_vec().unwrap();
    }
    let profile = np.runtime(|rt| rt.profile());
    let mut counts: Vec<(String, u64)> = profile
        .kernels
        .iter()
        .map(|k| (k.kernel.clone(), k.launches))
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [
            ("numeric.binary.mul.f64.r1.as".to_string(), 3),
            ("numeric.fill.f64.r1".to_string(), 1),
            ("numeric.unary.exp.f64.r1".to_string(), 3),
        ]
    );
    let tasks = np.runtime(|rt| rt.stats().exec.tasks_executed);
    assert_eq!(profile.launches(), tasks, "every task run is counted");
    // Fused: the two operations are one kernel, run once per iteration.
    let np = profiled(true);
    let a = np.ones(&[256], DType::F64);
    a.to_vec().unwrap();
    let at = line!() + 2;
    for _ in 0..3 {
        let b = (&a * 2.0).exp();
        b.to_vec().unwrap();
    }
    let profile = np.runtime(|rt| rt.profile());
    let fused = profile
        .kernels
        .iter()
        .find(|k| k.kernel.starts_with("fused("))
        .unwrap_or_else(|| panic!("a fused kernel: {profile:?}"));
    assert_eq!(
        fused.kernel,
        "fused(numeric.binary.mul.f64.r1.as+numeric.unary.exp.f64.r1)"
    );
    assert_eq!(fused.launches, 3);
    assert_eq!(
        fused.site.as_deref().map(|s| s.rsplit_once(':').unwrap().0),
        Some(format!("{}:{at}", file!()).as_str())
    );
    assert_eq!(profile.kernels.len(), 2, "{profile:?}");
    let table = profile.table(10);
    assert!(
        table.starts_with("weft profile: 2 kernel(s), 4 launch(es), "),
        "{table}"
    );
    assert!(
        table.contains("         3  ") && table.contains(&fused.kernel),
        "{table}"
    );
}

/// `trace = trace + tanh(a[i, i])` over the diagonal (the example that took seconds on its
/// first run): the views differ only in where they start, and the array is only read, so
/// the windows share their plans. The analyses do not grow with the number of diagonal
/// elements, and the result equals the unfused runtime's bit for bit.
#[test]
fn reads_of_one_array_at_many_offsets_share_their_plans() {
    let trace_of = |np: &Numeric, n: i64| {
        let a = np.random_uniform(&[n as u64, n as u64], -2.0, 2.0, 11, DType::F64);
        a.check().unwrap();
        let before = np.runtime(|rt| rt.fusion_stats().analyses);
        let mut trace = np.zeros(&[], DType::F64);
        for i in 0..n {
            trace = &trace + &a.index(&[weft::Ix::At(i), weft::Ix::At(i)]).tanh();
        }
        let value = trace.item().unwrap();
        (value, np.runtime(|rt| rt.fusion_stats().analyses) - before)
    };
    let window = |bound: usize| {
        weft_tests::numeric_with(Config {
            window_bound: bound,
            threads: 2,
            component_cache: None,
            ..Config::default()
        })
    };
    let (short, short_analyses) = trace_of(&window(16), 64);
    let (long, long_analyses) = trace_of(&window(16), 256);
    assert!(
        long_analyses <= short_analyses,
        "analyses grew with the diagonal: {short_analyses} for 64 elements, {long_analyses} \
         for 256"
    );
    let unfused = numeric(false, 1);
    assert_eq!(short.to_bits(), trace_of(&unfused, 64).0.to_bits());
    assert_eq!(long.to_bits(), trace_of(&unfused, 256).0.to_bits());
}

/// A long chain of scalar tasks (`trace = trace + tanh(a[i, i])`, 300 tasks in one window)
/// fuses into several kernels, each within `weft_fusion::SCALAR_INSTS_BUDGET`: one kernel of
/// the whole chain compiled for tens of milliseconds (NPBench's `go_fast`). The result
/// equals the unfused runtime's bit for bit.
#[test]
fn a_long_chain_of_scalar_tasks_fuses_into_kernels_within_the_budget() {
    let trace_of = |np: &Numeric| {
        let a = np.random_uniform(&[150, 150], -2.0, 2.0, 5, DType::F64);
        a.check().unwrap();
        np.runtime(|rt| rt.flush()).unwrap();
        let mut trace = np.zeros(&[], DType::F64);
        for i in 0..150 {
            trace = &trace + &a.index(&[weft::Ix::At(i), weft::Ix::At(i)]).tanh();
        }
        trace.item().unwrap()
    };
    let np = weft_tests::numeric_with(Config {
        window_bound: 1024,
        threads: 2,
        component_cache: None,
        ..Config::default()
    });
    np.runtime(|rt| rt.set_profile(true));
    let fused = trace_of(&np);
    let profile = np.runtime(|rt| rt.profile());
    let chains: Vec<_> = profile
        .kernels
        .iter()
        .filter(|k| k.kernel.contains("numeric.unary.tanh"))
        .collect();
    let launches: u64 = chains.iter().map(|k| k.launches).sum();
    assert!(
        launches >= 3,
        "the chain of 300 tasks ran in {launches} launches: {profile:?}"
    );
    assert!(
        chains.iter().all(|k| k.kernel.starts_with("fused(")),
        "{profile:?}"
    );
    assert_eq!(fused.to_bits(), trace_of(&numeric(false, 1)).to_bits());
}

/// A loop whose windows all differ in their numbers (a triangular solve, NPBench's
/// `trisolv`: each row's `L[i, :i] @ x[:i]` of its own length; the rows' tasks all launch on
/// one point, so a window holds many rows) shares a few plans through the canonical keys, and
/// from its third pass on takes each window's plan from the window memo (which skips the
/// constraint scan and the key). Every pass gives the first's bits.
#[test]
fn a_loop_of_thousands_of_distinct_windows_takes_them_from_the_window_memo() {
    let np = weft_tests::numeric_with(Config {
        threads: 2,
        component_cache: None,
        ..Config::default()
    });
    let n = 2500i64;
    let l = np.random_uniform(&[n as u64, n as u64], 0.5, 1.5, 3, DType::F64);
    let b = np.random_uniform(&[n as u64], -1.0, 1.0, 4, DType::F64);
    let solve = || -> Vec<u64> {
        let x = np.zeros(&[n as u64], DType::F64);
        for i in 0..n {
            let dot = l
                .index(&[weft::Ix::At(i), weft::Ix::Slice(Range::new(0, i))])
                .matmul(&x.slice(&[Range::new(0, i)]));
            let value = (&b.index(&[weft::Ix::At(i)]) - &dot)
                / &l.index(&[weft::Ix::At(i), weft::Ix::At(i)]);
            x.index(&[weft::Ix::At(i)]).assign(&value).expect("assigns");
        }
        x.to_vec()
            .expect("reads")
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let first = solve();
    assert_eq!(solve(), first);
    let before = np.runtime(|rt| rt.fusion_stats());
    assert_eq!(solve(), first);
    let after = np.runtime(|rt| rt.fusion_stats());
    // Every row's tasks launch on one point (a short dot product, then scalar steps), so a
    // window holds many rows; the third pass plans nothing and takes every window but the
    // read's at the end from the window memo.
    let windows = (after.memo_hits - before.memo_hits) + (after.analyses - before.analyses);
    assert!(windows > 1 && windows < n as u64, "{before:?} -> {after:?}");
    assert_eq!(after.analyses, before.analyses, "{before:?} -> {after:?}");
    assert!(
        after.window_hits - before.window_hits >= windows - 1,
        "the third pass took the rows' windows from the window memo: {before:?} -> {after:?}"
    );
}

/// Windows whose read-only views differ only in offsets share a plan only when the same
/// reads name the same view: `a[i] + a[j]` with `i == j` reads one view (one fused argument)
/// and with `i != j` two, and every sum is right whatever order the windows come in.
#[test]
fn read_only_views_at_equal_and_distinct_offsets_keep_their_own_plans() {
    let np = weft_tests::numeric_with(Config {
        window_bound: 4,
        threads: 2,
        component_cache: None,
        ..Config::default()
    });
    let values: Vec<f64> = (0..16).map(|i| (i * i) as f64 + 0.5).collect();
    let a = np.from_vec(&[16], &values);
    let pairs = [
        (0, 1),
        (2, 2),
        (3, 4),
        (5, 5),
        (7, 6),
        (9, 9),
        (1, 1),
        (3, 3),
    ];
    for round in 0..2 {
        let sums: Vec<Array> = pairs
            .iter()
            .map(|&(i, j)| {
                let x = a.slice(&[Range::new(i, i + 4)]);
                let y = a.slice(&[Range::new(j, j + 4)]);
                (&x + &y) * 1.0
            })
            .collect();
        for (s, &(i, j)) in sums.iter().zip(&pairs) {
            let want: Vec<f64> = (0..4)
                .map(|k| (values[(i + k) as usize] + values[(j + k) as usize]) * 1.0)
                .collect();
            assert_eq!(
                s.to_vec().unwrap(),
                want,
                "round {round}, a[{i}:] + a[{j}:]"
            );
        }
    }
}

/// A product of scaled matrices (NPBench's `gesummv`, `(alpha * A) @ x + (beta * B) @ x`):
/// fusion recomputes each scaled element inside the product that reads it
/// (`weft_ir::passes::inline`) instead of keeping the scaled matrices as scratch buffers the
/// size of `A` and `B`, and the results are the unfused program's bits, for shapes whose rows
/// are and are not a whole number of the product's unrolled steps.
#[test]
fn a_product_of_scaled_matrices_keeps_no_scaled_matrix() {
    for (rows, cols) in [(5u64, 3u64), (16, 24), (33, 17)] {
        let mut results = Vec::new();
        for fusion in [true, false] {
            let np = summarizing(fusion);
            let a = np.random_uniform(&[rows, cols], -1.0, 1.0, 1, DType::F64);
            let b = np.random_uniform(&[rows, cols], -1.0, 1.0, 2, DType::F64);
            let x = np.random_uniform(&[cols], -1.0, 1.0, 3, DType::F64);
            np.runtime(|rt| rt.flush()).unwrap();
            summaries(&np);
            let out = (&a * 1.5).matmul(&x) + (&b * -0.25).matmul(&x);
            let got = out.to_vec().expect("computes");
            let said = summaries(&np);
            if fusion {
                // Both scaled matrices vanish (with the unfused program's other temporaries);
                // at most the first product's vector keeps a buffer.
                let count = |what: &str| -> u64 {
                    said.split(&[',', '('][..])
                        .filter(|part| part.contains(what))
                        .filter_map(|part| part.split_whitespace().next()?.parse::<u64>().ok())
                        .sum()
                };
                let (vanished, kept) = (count("vanished"), count("kept a scratch buffer"));
                assert!(vanished >= 2 && kept <= 1, "{rows}x{cols}: {said}");
            }
            results.push(got);
        }
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        assert_eq!(bits(&results[0]), bits(&results[1]), "{rows}x{cols}");
    }
}

/// A scalar step in the window of a task over an empty array (a launch of no points) still
/// runs: fused with it, the scalar step had never run, and a 0-d `full` read back 0.
#[test]
fn a_scalar_step_beside_a_task_over_an_empty_array_still_runs() {
    for pieces in [1, 3] {
        let np = numeric(true, pieces);
        // The empty task first, then the scalar one; then the other way round.
        let empty = np.from_vec(&[0, 0], &[]);
        let copied = empty.copy();
        let one = np.full(&[], 1.5, DType::F64);
        let scaled = &np.from_vec(&[0], &[]) * 2.0;
        assert_eq!(one.item().expect("reads"), 1.5, "pieces {pieces}");
        let two = np.full(&[], 2.5, DType::F64);
        let doubled = &np.from_vec(&[0, 3], &[]) * 2.0;
        assert_eq!(two.item().expect("reads"), 2.5, "pieces {pieces}");
        assert_eq!(copied.shape().expect("a shape"), vec![0, 0]);
        assert_eq!(scaled.shape().expect("a shape"), vec![0]);
        assert_eq!(doubled.shape().expect("a shape"), vec![0, 3]);
        // A step that updates a 0-d store, after an empty launch in the same window.
        let total = np.full(&[], 1.0, DType::F64);
        let _ = &np.from_vec(&[0], &[]) + 1.0;
        let mut t = total.clone();
        t += 2.0;
        assert_eq!(total.item().expect("reads"), 3.0, "pieces {pieces}");
    }
}

/// A row of a Cholesky factorization, `a[i, j] -= a[i, :j] @ a[j, :j]; a[i, j] /= a[j, j]`
/// for each `j < i`: each step's short dot product (one point, folded in the lane order) reads
/// rows of `a` that the steps before wrote, and its scalar tasks write `a[i, j]` and read
/// `a[j, j]`, other views of one array. All of them launch on one point, so the four steps
/// fuse into one task and one loop, in program order, with the unfused bits and the plain
/// loop's values.
#[test]
fn scalar_steps_on_two_elements_of_one_array_fuse_on_one_point() {
    let n = 6usize;
    let i = 4usize;
    let data = weft_tests::uniform_data(n * n, 11, 0.5, 1.5);
    let run = |fusion: bool| -> (Vec<f64>, String) {
        let np = numeric(fusion, 1);
        let a = np.from_vec(&[n as u64, n as u64], &data);
        a.check().expect("the array is made");
        np.runtime(|rt| rt.flush()).expect("the window runs");
        explanations(&np);
        let row = |r: usize, len: usize| {
            a.index(&[Ix::At(r as i64), Ix::Slice(Range::new(0, len as i64))])
        };
        for j in 0..i {
            let mut at = a.index(&[Ix::At(i as i64), Ix::At(j as i64)]);
            at -= &row(i, j).dot(&row(j, j));
            at /= &a.index(&[Ix::At(j as i64), Ix::At(j as i64)]);
            at.check().expect("the step runs");
        }
        let values = a.to_vec().expect("the array reads");
        (values, explanations(&np))
    };
    let (fused, text) = run(true);
    let (unfused, _) = run(false);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&fused), bits(&unfused));
    assert!(
        text.contains("20 task(s) fused")
            && text.contains("numeric.dotfold.f64")
            && text.contains("the whole window fused into one task running 1 loop")
            && !text.contains("cut before"),
        "the four steps' dot products, subtractions, divisions and copies fuse:\n{text}"
    );
    let mut want = data.clone();
    for j in 0..i {
        let dot: f64 = (0..j).fold(0.0, |s, k| want[i * n + k].mul_add(want[j * n + k], s));
        want[i * n + j] = (want[i * n + j] - dot) / want[j * n + j];
    }
    for (g, w) in fused.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-13 * w.abs().max(1.0), "{g} against {w}");
    }
}

/// The maximum of a short vector (exact in any order) is folded on one point and written
/// into its 0-d result, so the scalar step that uses it fuses with it, as NPBench's
/// `nussinov` does (`table[i, j] = max(table[i, j], max(row + column))`); a long vector's is
/// a reduction over its points, which the scalar step cannot join.
#[test]
fn the_maximum_of_a_short_vector_fuses_with_the_scalar_step_after_it() {
    for (len, fused) in [(1_000usize, true), (20_000, false)] {
        let np = numeric(true, 2);
        let values = weft_tests::uniform_data(len, 5, -3.0, 3.0);
        let v = np.from_vec(&[len as u64], &values);
        let t = np.full(&[], 0.5, DType::F64);
        v.check().expect("made");
        np.runtime(|rt| rt.flush()).expect("the window runs");
        explanations(&np);
        t.assign(&t.maximum(&(&v * 2.0).max())).expect("the step");
        let got = t.item().expect("reads");
        let text = explanations(&np);
        let want = values.iter().fold(0.5f64, |m, x| m.max(x * 2.0));
        assert_eq!(got, want, "len {len}");
        let one_task = text.contains("numeric.reducerows.max.f64.r0.q1")
            && !text.contains("cut before numeric.binary.maximum");
        assert_eq!(one_task, fused, "len {len}:\n{text}");
    }
}
