//! `npbench` at NPBench-shaped tiny sizes (preset `XS`): every kernel's outputs against
//! NumPy's on NPBench's initialization (`examples/numpy/npbench.py`), JAX's where JAX is
//! installed (each row says why not elsewhere), and the report's summary fields (first runs
//! against NumPy's included) against its rows.

use crate::cli::{result_line, run};

#[test]
fn every_npbench_kernel_matches_numpy() {
    let out = run(
        env!("CARGO_BIN_EXE_npbench"),
        &["--preset", "XS", "--iters", "1", "--threads", "2"],
    );
    let v = result_line(&out, "npbench");
    let rows = v["by_kernel"].as_array().expect("by_kernel");
    assert_eq!(v["kernels"].as_u64(), Some(rows.len() as u64), "{v}");
    assert!(rows.len() >= 24, "{v}");
    // `--list` names the kernels a full run runs, in its order, and runs none.
    let listed = run(env!("CARGO_BIN_EXE_npbench"), &["--list"]);
    assert!(listed.status.success());
    let names: Vec<&str> = rows.iter().filter_map(|r| r["kernel"].as_str()).collect();
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout)
            .lines()
            .collect::<Vec<_>>(),
        names
    );
    let (mut faster, mut jax_kernels, mut faster_than_jax) = (0, 0, 0);
    let (mut numpy_first_worst, mut first_logs) = (0.0f64, 0.0f64);
    for row in rows {
        let name = row["kernel"].as_str().expect("a name");
        // float32 kernels (softmax, mlp, conv2d_bias, lenet, resnet) agree to float32's precision; the others, in
        // float64, to a few units in the last place (products sum in another order than
        // BLAS; trisolv's recurrence carries it along).
        // The Mandelbrot sets iterate a chaotic map on complex numbers, which NumPy 2
        // multiplies with fused multiply-adds on machines that have them (Weft does not):
        // their last-bit differences grow over the iterations (to about 1e-13 at XS).
        let tol = if ["softmax", "mlp", "conv2d_bias", "lenet", "resnet"].contains(&name) {
            1e-5
        } else if ["mandelbrot1", "mandelbrot2"].contains(&name) {
            1e-10
        } else {
            1e-13
        };
        let diff = row["max_rel_diff"].as_f64().expect("max_rel_diff");
        assert!(
            diff <= tol,
            "{name}: relative difference {diff} from NumPy: {row}"
        );
        assert!(
            row["outputs_compared"].as_u64().is_some_and(|n| n >= 1),
            "{row}"
        );
        let speedup = row["speedup_vs_numpy"].as_f64().expect("speedup");
        let want = row["numpy_seconds"].as_f64().unwrap_or(0.0)
            / row["weft_seconds"].as_f64().unwrap_or(1.0);
        assert!((speedup - want).abs() <= 1e-9 * want, "{row}");
        faster += u64::from(speedup > 1.0);
        // First runs: Weft's against NumPy's first, and NumPy's first against its median.
        let field = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("no {k}: {row}"));
        let (first, numpy_first) = (field("weft_first_seconds"), field("numpy_first_seconds"));
        let got = field("first_run_speedup_vs_numpy");
        assert!((got - numpy_first / first).abs() <= 1e-9 * got, "{row}");
        let got = field("numpy_first_run_over_steady");
        let want = numpy_first / field("numpy_seconds");
        assert!((got - want).abs() <= 1e-9 * want, "{row}");
        numpy_first_worst = f64::max(numpy_first_worst, want);
        first_logs += (numpy_first / first).ln();
        // JAX's run: timed and agreeing with NumPy's, or a reason it did not run.
        match (row["jax_seconds"].as_f64(), row["jax_unavailable"].as_str()) {
            (Some(jax), None) => {
                jax_kernels += 1;
                let diff = row["jax_max_rel_diff"].as_f64().expect("jax_max_rel_diff");
                assert!(
                    diff <= 1e-12,
                    "{name}: JAX differs from NumPy by {diff}: {row}"
                );
                let vs_jax = row["speedup_vs_jax"].as_f64().expect("speedup_vs_jax");
                let want = jax / row["weft_seconds"].as_f64().unwrap_or(1.0);
                assert!((vs_jax - want).abs() <= 1e-9 * want, "{row}");
                faster_than_jax += u64::from(vs_jax > 1.0);
            }
            (None, Some(why)) => assert!(!why.is_empty(), "{row}"),
            _ => panic!("{name}: neither JAX's time nor why it is missing: {row}"),
        }
    }
    assert_eq!(v["faster_than_numpy"].as_u64(), Some(faster), "{v}");
    let worst = v["numpy_first_run_over_steady_max"]
        .as_f64()
        .expect("worst");
    assert!((worst - numpy_first_worst).abs() <= 1e-9 * worst, "{v}");
    let geomean = v["first_run_geomean_speedup_vs_numpy"]
        .as_f64()
        .expect("first-run geomean");
    let want = (first_logs / rows.len() as f64).exp();
    assert!((geomean - want).abs() <= 1e-9 * want, "{v}");
    assert_eq!(v["jax_kernels"].as_u64(), Some(jax_kernels), "{v}");
    assert_eq!(v["faster_than_jax"].as_u64(), Some(faster_than_jax), "{v}");
}
