//! What the tests of the NumPy-program examples share: a scratch directory, running an
//! example binary for its result line, running its NumPy script, and reading `.npy` files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use weft_examples::npy;

/// A fresh, empty directory for one run of `example`.
pub fn temp_dir(example: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{example}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs the example binary `bin` with `args`, `--threads 2` and `--out dir`; returns its
/// result line, parsed.
pub fn run_example(bin: &str, dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(bin)
        .args(args)
        .args(["--threads", "2", "--out"])
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("{bin} runs: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{bin} failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {last}"))
}

/// Runs `examples/numpy/<script>` with `dir` and `args`.
pub fn run_numpy(script: &str, dir: &Path, args: &[&str]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("numpy")
        .join(script);
    let out = Command::new("python3")
        .arg(&path)
        .arg(dir)
        .args(args)
        .output()
        .expect("these tests need python3 with NumPy: run scripts/test, which installs it");
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The values of `dir/name`, as f64.
pub fn load(dir: &Path, name: &str) -> Vec<f64> {
    npy::read(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .data
        .to_f64()
}

/// The tasks run per iteration fused and unfused, from a side-by-side result line; checks
/// that fusion ran at least `factor` times fewer.
pub fn assert_fewer_tasks(report: &Value, factor: f64) {
    let (fused, unfused) = (
        report["tasks_executed_per_iter"].as_f64().expect("tasks"),
        report["unfused_tasks_executed_per_iter"]
            .as_f64()
            .expect("unfused tasks"),
    );
    assert!(fused * factor < unfused, "fusion merged tasks: {report}");
}
