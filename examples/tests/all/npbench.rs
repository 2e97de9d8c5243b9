//! `npbench` at NPBench-shaped tiny sizes (preset `XS`): every kernel's outputs against
//! NumPy's on NPBench's initialization (`examples/numpy/npbench.py`), and the report's
//! summary fields against its rows.

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
    assert!(rows.len() >= 22, "{v}");
    let mut faster = 0;
    for row in rows {
        let name = row["kernel"].as_str().expect("a name");
        // float32 kernels (softmax, mlp) agree to float32's precision; the others, in
        // float64, to a few units in the last place (products sum in another order than
        // BLAS; trisolv's recurrence carries it along).
        let tol = if ["softmax", "mlp"].contains(&name) {
            1e-5
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
    }
    assert_eq!(v["faster_than_numpy"].as_u64(), Some(faster), "{v}");
}
