//! `weft-gpu-check`, the GPU machine's staged checks (`examples/src/bin/gpu_check`), run as
//! that machine runs them, on the PTX simulator: every stage prints one JSON line that says
//! it passed with the fields `scripts/gpu-run.sh` reads, and `--device gpu` without a driver
//! is a JSON error naming the missing library, not a panic.
//!
//! The binary belongs to `weft-examples`, so it is not among this package's
//! `CARGO_BIN_EXE_*`: it is found where `cargo test --workspace` builds the examples (see
//! `sim_examples::example_bin`), or `WEFT_GPU_CHECK_BIN` names one.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The binary: `WEFT_GPU_CHECK_BIN`, else the one `cargo test --workspace` built beside the
/// examples (built here only if it is missing, as the examples are).
fn binary() -> PathBuf {
    match std::env::var_os("WEFT_GPU_CHECK_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => crate::sim_examples::example_bin("weft-gpu-check"),
    }
}

fn run(args: &[&str]) -> (i32, Value) {
    let out = Command::new(binary())
        .args(args)
        // No PTX check (`WEFT_PTX_CHECK`) in the child: ptx_modules.rs emits and assembles
        // every example's kernels, and the simulated GPU loads and runs the PTX itself.
        .env_remove("WEFT_PTX_CHECK")
        .output()
        .expect("weft-gpu-check runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: one line on stdout, got:\n{stdout}\nstderr:\n{stderr}"
    );
    let line: Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", lines[0]));
    (out.status.code().unwrap_or(-1), line)
}

fn passed(args: &[&str]) -> Value {
    let (code, line) = run(args);
    assert!(
        code == 0 && line["ok"] == true,
        "{args:?}: exit code {code}: {line}"
    );
    line
}

fn positive(v: &Value, key: &str) -> f64 {
    let x = v[key].as_f64().unwrap_or(f64::NAN);
    assert!(x.is_finite() && x > 0.0, "{key} = {} in {v}", v[key]);
    x
}

#[test]
fn env_on_the_simulator_launches_faults_and_probes() {
    let line = passed(&["env", "--device", "sim", "--small"]);
    assert_eq!(line["stage"], "env");
    let checks = &line["checks"];
    for step in [
        "device",
        "memory",
        "device_copy",
        "launch",
        "planted_fault",
        "copy_probe",
    ] {
        assert_eq!(checks[step]["ok"], true, "{step}: {line}");
    }
    assert_eq!(
        checks["planted_fault"]["fault"]["kernel"], "weft.check.planted_fault",
        "{line}"
    );
    positive(&checks["copy_probe"], "gbs");
}

#[test]
fn env_on_the_gpu_names_a_missing_driver_or_passes() {
    let (code, line) = run(&["env", "--device", "gpu", "--small"]);
    if weft_ptx::driver::present() {
        assert!(code == 0 && line["ok"] == true, "{line}");
    } else {
        assert_ne!(code, 0, "{line}");
        assert_eq!(line["ok"], false, "{line}");
        assert_eq!(line["failed_step"], "driver", "{line}");
        let error = line["error"].as_str().unwrap_or_default();
        assert!(error.contains("libcuda.so.1"), "{line}");
    }
}

#[test]
fn bits_on_the_simulator_are_the_cpu_bits() {
    let line = passed(&["bits", "--device", "sim", "--small", "--timeout", "60"]);
    assert_eq!(line["programs_same_bits"], 6, "{line}");
    assert_eq!(line["differences"], Value::Array(Vec::new()), "{line}");
    for p in line["programs"].as_array().expect("programs") {
        assert_eq!(p["same_bits"], true, "{p}");
        assert_eq!(p["cpu"]["ok"], true, "{p}");
        assert_eq!(p["device"]["ok"], true, "{p}");
    }
}

#[test]
fn recorded_kernels_all_load_on_the_simulator() {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gpu-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let file = dir.join("kernels.jsonl");
    let file = file.to_str().expect("a UTF-8 path");
    let record = passed(&["record", "--out", file]);
    let count = record["kernels"].as_u64().expect("a kernel count");
    assert!(count >= 50, "{record}");
    let jit = passed(&["jit", "--device", "sim", "--kernels", file]);
    assert_eq!(jit["count"], count, "{jit}");
    assert_eq!(jit["loaded"], count, "{jit}");
    assert_eq!(jit["failed"], 0, "{jit}");
    positive(&jit, "load_ms_max");
    positive(&jit, "emit_ms_max");
    assert_eq!(
        jit["modules"].as_array().map(Vec::len),
        Some(count as usize)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_benchmark_runs_on_the_simulator_against_the_probe() {
    let line = passed(&["bench", "--device", "sim", "--small", "--workload", "all"]);
    let workloads = &line["workloads"];
    for w in ["black-scholes", "stencil", "cg", "bicgstab", "jacobi"] {
        let r = &workloads[w];
        assert_eq!(r["ok"], true, "{w}: {r}");
        let seconds = positive(r, "seconds_per_iter");
        let bytes = positive(r, "bytes_per_iter");
        let gbs = positive(r, "probe_gbs");
        let ratio = positive(r, "floor_ratio");
        let want = seconds / (bytes / (gbs * 1e9));
        assert!((ratio - want).abs() <= 1e-9 * want, "{w}: {r}");
    }
    positive(&workloads["black-scholes"], "fused_vs_unfused");
    assert_eq!(
        workloads["black-scholes"]["fused_equals_unfused_checksum"], true,
        "{line}"
    );
}

#[test]
fn a_bad_command_line_is_a_json_error() {
    let (code, line) = run(&["bench", "--workload", "nope"]);
    assert_eq!(code, 2, "{line}");
    assert_eq!(line["stage"], "bench", "{line}");
    assert_eq!(line["ok"], false, "{line}");
    assert!(
        line["error"].as_str().is_some_and(|e| e.contains("nope")),
        "{line}"
    );
}
