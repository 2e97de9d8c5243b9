//! The `logreg` example against `examples/numpy/logreg.py` (the same program in NumPy, run on
//! the example's own `--out` files), fused against unfused, and against its rayon loop.

use std::path::Path;

use serde_json::Value;
use weft_tests::assert_close;

use crate::program::{load, run_example, run_numpy, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_logreg");

/// Runs the example; returns its result line.
fn run(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--n", "20011", "--d", "5", "--iters", "3", "--warmup", "2", "--lr", "0.5",
    ];
    args.extend_from_slice(extra);
    run_example(BIN, dir, &args)
}

#[test]
fn logreg_matches_numpy_and_the_rayon_loop_fused_or_not() {
    let fused = temp_dir("logreg", "fused");
    let report = run(&fused, &[]);
    assert_eq!(report["steps"], 5);
    assert_eq!(report["fusion"], true);
    // The whole step fuses: one task over the rows, one for the update of w.
    assert_eq!(report["tasks_executed_per_iter"], 2.0);
    assert!(
        report["max_weight_diff_vs_rayon"].as_f64().expect("diff") < 1e-12,
        "{report}"
    );
    run_numpy("logreg.py", &fused, &["5", "0.5"]);
    let w = load(&fused, "w.npy");
    assert_eq!(w.len(), 5);
    assert!(
        w.iter().any(|&v| v.abs() > 1e-3),
        "the weights moved: {w:?}"
    );
    assert_close(
        "w against NumPy",
        &w,
        &load(&fused, "w_numpy.npy"),
        1e-12,
        1e-14,
    );

    let unfused = temp_dir("logreg", "unfused");
    let report = run(&unfused, &["--no-fusion"]);
    assert_eq!(report["fusion"], false);
    assert_close("w unfused", &load(&unfused, "w.npy"), &w, 1e-13, 1e-15);
    assert_eq!(load(&unfused, "X.npy"), load(&fused, "X.npy"));
}
