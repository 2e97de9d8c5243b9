//! The `logreg` example against `examples/numpy/logreg.py` (the same program in NumPy, run on
//! the example's own `--out` files), fused against unfused, and against its rayon loop.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use weft_examples::npy;
use weft_tests::assert_close;

const BIN: &str = env!("CARGO_BIN_EXE_logreg");

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("logreg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs the example; returns its result line.
fn run(dir: &Path, extra: &[&str]) -> Value {
    let out = Command::new(BIN)
        .args([
            "--n", "20011", "--d", "5", "--iters", "3", "--warmup", "2", "--lr", "0.5",
        ])
        .args(["--threads", "2", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("logreg runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "logreg failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}"))
}

fn load(dir: &Path, name: &str) -> Vec<f64> {
    npy::read(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .data
        .to_f64()
}

#[test]
fn logreg_matches_numpy_and_the_rayon_loop_fused_or_not() {
    let fused = temp_dir("fused");
    let report = run(&fused, &[]);
    assert_eq!(report["steps"], 5);
    assert_eq!(report["fusion"], true);
    // The whole step fuses: one task over the rows, one for the update of w.
    assert_eq!(report["tasks_executed_per_iter"], 2.0);
    assert!(
        report["max_weight_diff_vs_rayon"].as_f64().expect("diff") < 1e-12,
        "{report}"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("numpy/logreg.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&fused)
        .args(["5", "0.5"])
        .output()
        .expect("these tests need python3 with NumPy: run scripts/test, which installs it");
    assert!(
        out.status.success(),
        "logreg.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

    let unfused = temp_dir("unfused");
    let report = run(&unfused, &["--no-fusion"]);
    assert_eq!(report["fusion"], false);
    assert_close("w unfused", &load(&unfused, "w.npy"), &w, 1e-13, 1e-15);
    assert_eq!(load(&unfused, "X.npy"), load(&fused, "X.npy"));
}
