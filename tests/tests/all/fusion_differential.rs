//! Property-based differential tests of fusion: random programs over numeric ops and sparse
//! matrix-vector products (whose matrix is split by image partitions), with aliasing views of
//! every kind (slices with positive and negative steps, transposes, broadcasts, reshapes),
//! in-place updates, reductions over all and over one axis, reads in the middle and dropped
//! handles, run fused and unfused; every array the program still holds must agree.
//!
//! The runtimes run on `WEFT_DEVICE`'s device (the CPU when it is unset). On another device
//! (`WEFT_DEVICE=sim`: the GPU back end on the simulated GPU, as `scripts/test` runs it) each
//! program also runs fused on the CPU, and every array and every read of the device's fused
//! run must be the CPU's bits exactly. (There the compiled plugins are cached on disk, in the
//! target directory: each case makes three runtimes, and compiling the plugins for each would
//! take most of the time.)

use proptest::prelude::*;
use weft::{Config, Device, Numeric, Sparse};
use weft_ir::DType;
use weft_tests::programs::{N, ROWS, Step, run};

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => any::<u64>().prop_map(Step::Random),
        4 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Binary(a, b, o)),
        2 => (0..8usize, 0..5u8, -2.0..2.0f64).prop_map(|(a, o, s)| Step::Scalar(a, o, s)),
        2 => (0..8usize, 0..5u8).prop_map(|(a, o)| Step::Unary(a, o)),
        3 => (0..8usize, 0..8usize, 0..N, 0..N, 1..N).prop_map(|(a, b, l, l2, n)| Step::AssignView(a, b, l, l2, n)),
        1 => (0..8usize, -1.0..1.0f64).prop_map(|(a, s)| Step::Fill(a, s)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::Normalize(a, b)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::Norm(a, b)),
        2 => (0..8usize).prop_map(Step::Spmv),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::SpmvInto(a, b)),
        2 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Reversed(a, b, o)),
        2 => (0..8usize, 0..8usize, 0..N, 0..N, 1..N, 1..4u64)
            .prop_map(|(a, b, s, s2, c, k)| Step::AssignStrided(a, b, s, s2, c, k)),
        2 => (0..8usize, 0..8usize, 0..5u8).prop_map(|(a, b, o)| Step::Transposed(a, b, o)),
        2 => (0..8usize, 0..8usize, 0..5u8, -ROWS..ROWS)
            .prop_map(|(a, b, o, r)| Step::Broadcast(a, b, o, r)),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::AssignTransposed(a, b)),
        1 => (0..8usize, any::<bool>()).prop_map(|(a, rows)| Step::Center(a, rows)),
        1 => (0..8usize, 0..8usize, -2.0..2.0f64).prop_map(|(a, b, s)| Step::ScaledMatvec(a, b, s)),
        2 => (0..8usize, 0..8usize, 0..N, 0..N, 1..=N)
            .prop_map(|(a, b, i, j, n)| Step::ElementStep(a, b, i, j, n)),
        1 => (0..8usize, any::<bool>()).prop_map(|(a, rows)| Step::Sort(a, rows)),
        2 => (0..8usize, 0..8usize, 0..8u8, 0..4u8).prop_map(|(a, b, o, t)| Step::Unsigned(a, b, o, t)),
        1 => (0..8usize).prop_map(Step::Read),
        2 => (0..8usize).prop_map(Step::Drop),
    ]
}

fn numeric(fusion: bool) -> Numeric {
    plugins(fusion).0
}

/// The device under test: `WEFT_DEVICE`'s (the CPU when it is unset). A value that names no
/// device fails the test rather than falling back to the CPU.
fn device() -> Device {
    let env = Config::from_env();
    let bad: Vec<&String> = env
        .env_errors
        .iter()
        .filter(|e| e.starts_with("WEFT_DEVICE"))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    env.device
}

fn plugins(fusion: bool) -> (Numeric, Sparse) {
    plugins_on(device(), fusion)
}

fn plugins_on(device: Device, fusion: bool) -> (Numeric, Sparse) {
    // Off the CPU a case makes three runtimes, and compiling the plugins for each (about a
    // second) would be most of the time: there, the compiled plugins are kept on disk, in the
    // target directory.
    let component_cache = (self::device() != Device::Cpu)
        .then(|| std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-component-cache"));
    let config = Config {
        device,
        fusion,
        pieces: 3,
        threads: 2,
        component_cache,
        explain_to_stderr: std::env::var("WEFT_EXPLAIN").is_ok_and(|v| v == "1"),
        ..Config::default()
    };
    weft_tests::plugins_with(config)
}

fn agree(label: &str, fused: &[Vec<f64>], unfused: &[Vec<f64>]) -> Result<(), TestCaseError> {
    prop_assert_eq!(fused.len(), unfused.len());
    for (i, (f, u)) in fused.iter().zip(unfused).enumerate() {
        prop_assert_eq!(f.len(), u.len());
        for (j, (x, y)) in f.iter().zip(u).enumerate() {
            // Element-wise steps agree bit for bit; reductions may add in another order.
            let ok = x == y || (x - y).abs() <= 1e-9 * (1.0 + y.abs());
            prop_assert!(ok, "{} {}[{}]: fused {} unfused {}", label, i, j, x, y);
        }
    }
    Ok(())
}

/// Every value of `got` (the device's run) must be the CPU's bits (`want`); a failure names
/// the first element that differs and how many do.
fn same_bits(
    label: &str,
    device: Device,
    got: &[Vec<f64>],
    want: &[Vec<f64>],
) -> Result<(), TestCaseError> {
    let name = device.name();
    prop_assert_eq!(
        got.len(),
        want.len(),
        "{}s on {} and on the CPU",
        label,
        name
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert_eq!(
            g.len(),
            w.len(),
            "{} {}: elements on {} and on the CPU",
            label,
            i,
            name
        );
        let differ = |(x, y): (&f64, &f64)| x.to_bits() != y.to_bits();
        if let Some(j) = g.iter().zip(w).position(differ) {
            let count = g.iter().zip(w).filter(|&p| differ(p)).count();
            let (x, y) = (g[j], w[j]);
            return Err(TestCaseError::fail(format!(
                "{label} {i}[{j}]: {name} {x:e} ({:#018x}), the CPU {y:e} ({:#018x}); {count} of {} \
                 elements differ",
                x.to_bits(),
                y.to_bits(),
                g.len()
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    #[test]
    fn fused_programs_equal_unfused_ones(program in proptest::collection::vec(step(), 1..40)) {
        let (fused, fused_reads) = run(&plugins(true), &program);
        let (unfused, unfused_reads) = run(&plugins(false), &program);
        agree("array", &fused, &unfused)?;
        agree("read", &fused_reads, &unfused_reads)?;
        let device = device();
        if device != Device::Cpu {
            // The device's fused run against the CPU's, bit for bit.
            let (cpu, cpu_reads) = run(&plugins_on(Device::Cpu, true), &program);
            same_bits("array", device, &fused, &cpu)?;
            same_bits("read", device, &fused_reads, &cpu_reads)?;
        }
    }
}

/// Random programs on one fused runtime that outlives them: its memo of plans, whose keys
/// keep only which numbers of a window are equal (not the extents and offsets themselves),
/// serves each program the plans of earlier ones with other views and sizes; and each program
/// runs three times, the third time taking its windows' plans from the window memo (the same
/// windows exactly, kept the second time they are seen). Every array and read must still be the unfused run's.
#[test]
fn programs_sharing_plans_equal_unfused_ones() {
    use proptest::test_runner::{Config as RunnerConfig, TestRunner};
    let shared = plugins(true);
    let mut runner = TestRunner::new(RunnerConfig::with_cases(40));
    let result = runner.run(&proptest::collection::vec(step(), 1..40), |program| {
        let (unfused, unfused_reads) = run(&plugins(false), &program);
        for _ in 0..3 {
            let (fused, fused_reads) = run(&shared, &program);
            agree("array", &fused, &unfused)?;
            agree("read", &fused_reads, &unfused_reads)?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let stats = shared.0.runtime(|rt| rt.fusion_stats());
    assert!(
        stats.memo_hits > stats.window_hits && stats.window_hits > 0,
        "the programs reused each other's plans, and their own windows: {stats:?}"
    );
}

/// A triangular solve by rows (`x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]`): every step's
/// views move and grow, and its plans are a handful, not one per row; the solution is the
/// unfused run's and a plain Rust loop's.
#[test]
fn a_triangular_solve_plans_a_handful_of_times() {
    use weft::{Ix, Range};
    let n = 120usize;
    let l_values: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if j > i {
                0.0
            } else if i == j {
                2.0 + (i % 3) as f64
            } else {
                ((i * 7 + j * 3) % 5) as f64 * 0.1
            }
        })
        .collect();
    let b_values: Vec<f64> = (0..n).map(|i| (i % 7) as f64 - 2.5).collect();
    let solve = |np: &Numeric| {
        let l = np.from_f64s(&[n as u64, n as u64], &l_values, DType::F64);
        let b = np.from_f64s(&[n as u64], &b_values, DType::F64);
        let x = np.zeros(&[n as u64], DType::F64);
        for i in 0..n as i64 {
            let dot = l
                .index(&[Ix::At(i), Ix::Slice(Range::new(0, i))])
                .matmul(&x.slice(&[Range::new(0, i)]));
            let value = (&b.index(&[Ix::At(i)]) - &dot) / &l.index(&[Ix::At(i), Ix::At(i)]);
            x.index(&[Ix::At(i)])
                .assign(&value)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        x.to_vec().unwrap_or_else(|e| panic!("{e}"))
    };
    let fused_np = numeric(true);
    let fused = solve(&fused_np);
    assert_eq!(fused, solve(&numeric(false)), "fused and unfused");
    let mut want = vec![0.0f64; n];
    for i in 0..n {
        let dot: f64 = (0..i).map(|j| l_values[i * n + j] * want[j]).sum();
        want[i] = (b_values[i] - dot) / l_values[i * n + i];
    }
    for (i, (got, w)) in fused.iter().zip(&want).enumerate() {
        assert!(
            (got - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "x[{i}]: {got} against {w}"
        );
    }
    let stats = fused_np.runtime(|rt| rt.fusion_stats());
    // Every row's tasks launch on one point, so rows fuse with the rows after them: fewer
    // windows than rows, and a handful of plans.
    assert!(
        stats.analyses <= 40 && stats.analyses + stats.memo_hits < n as u64,
        "{n} rows, a handful of plans: {stats:?}"
    );
}

/// A read runs the window up to the last task it needs: a pending task that reads the store
/// the read's producer overwrites (a write-after-read hazard) runs first, and a chain
/// submitted after the producer stays in the window.
#[test]
fn a_read_flushes_up_to_what_it_needs() {
    let np = numeric(true);
    let a = np.random_uniform(&[N], -1.0, 1.0, 1, DType::F64);
    let b = np.random_uniform(&[N], -1.0, 1.0, 2, DType::F64);
    np.runtime(|rt| rt.flush()).expect("flush");
    let before = a.to_vec().expect("a");
    // Pending: c = a + 1 (reads a), then a[...] = 5, then an unrelated chain on b.
    let c = &a + 1.0;
    // a[...] = 5 overwrites what c reads: c must run before the write.
    a.assign(5.0).expect("assign");
    let unrelated = (&b * 2.0).exp();
    assert_eq!(np.runtime(|rt| rt.pending_tasks()), 4);
    let got = a.to_vec().expect("read a");
    assert!(got.iter().all(|&x| x == 5.0));
    // c's task and the fill ran; the unrelated chain (two tasks) did not.
    assert_eq!(
        np.runtime(|rt| rt.pending_tasks()),
        2,
        "the unrelated chain is still pending"
    );
    let c = c.to_vec().expect("c");
    let want: Vec<f64> = before.iter().map(|x| x + 1.0).collect();
    assert_eq!(c, want, "c saw a before the write");
    let bs = b.to_vec().expect("b");
    let want: Vec<f64> = bs.iter().map(|x| (x * 2.0).exp()).collect();
    let got = unrelated.to_vec().expect("unrelated");
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-14 * w.abs(), "{g} vs {w}");
    }
}

/// The window grows while whole windows fuse: a long chain of element-wise operations ends
/// up in one task.
#[test]
fn the_window_grows_while_whole_windows_fuse() {
    let np = numeric(true);
    let x = np.random_uniform(&[N], 0.0, 1.0, 3, DType::F64);
    np.runtime(|rt| rt.flush()).expect("flush");
    let mut y = &x * 1.0;
    for _ in 0..100 {
        y = &y * 0.999 + 0.001;
    }
    let before = np.runtime(|rt| rt.stats().exec.tasks_executed);
    y.to_vec().expect("read");
    let ran = np.runtime(|rt| rt.stats().exec.tasks_executed) - before;
    assert!(ran <= 2, "201 tasks ran as {ran} fused task(s)");
}

/// A case proptest found: `y = sqrt(|x|)`, then `x[...] = 0`: the fill must not reach `y`.
#[test]
fn a_fill_after_a_read_does_not_change_what_was_read() {
    let program = [
        Step::Random(0),
        Step::Random(0),
        Step::Unary(4, 0),
        Step::Fill(4, 0.0),
    ];
    let (fused, _) = run(&plugins(true), &program);
    let (unfused, _) = run(&plugins(false), &program);
    assert_eq!(fused, unfused);
}
