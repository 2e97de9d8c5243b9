//! The `kmeans` example against a plain-Rust Lloyd's algorithm over the same points (the same
//! labels, the centroids and inertia within rounding) and against NumPy's program
//! (`examples/numpy/kmeans.py`, which the example runs on its own `--out` files).

use serde_json::Value;
use weft_examples::kmeans;

use crate::program::{load, run_example, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_kmeans");

/// 9,000 points: more than the 4,096 rows from which `onehot.T @ x` is launched over the
/// points, so both kinds of product run.
#[test]
fn kmeans_follows_the_reference_and_numpy() {
    let dir = temp_dir("kmeans", "small");
    let (n, d, k, seed, steps) = (9000u64, 5u64, 12u64, 7u64, 4usize);
    let report: Value = run_example(
        BIN,
        &dir,
        &[
            "--n",
            "9000",
            "--dim",
            "5",
            "--clusters",
            "12",
            "--seed",
            "7",
            "--iters",
            "3",
            "--warmup",
            "1",
        ],
    );
    assert_eq!(report["steps"], steps as u64, "{report}");
    let points = kmeans::points(n, d, seed);
    assert_eq!(load(&dir, "x.npy"), points, "the points written");
    let start = kmeans::start(&points, d, k);
    let (want, _labels, inertia) =
        kmeans::reference(&points, &start, d as usize, k as usize, steps);
    let got = load(&dir, "c.npy");
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-12, "coordinate {i}: {g} against {w}");
    }
    let weft_inertia = report["inertia"].as_f64().expect("inertia");
    assert!(
        (weft_inertia - inertia).abs() <= 1e-9 * inertia,
        "inertia {weft_inertia} against {inertia}"
    );
    assert!(
        report["numpy_unavailable"].is_null(),
        "this test needs python3 with NumPy (scripts/test installs it): {report}"
    );
    let diff = report["centroids_max_rel_diff_vs_numpy"]
        .as_f64()
        .expect("a difference from NumPy");
    assert!(diff <= 1e-12, "{report}");
    assert!(report["speedup_vs_numpy"].as_f64().is_some_and(|s| s > 0.0));
}
