//! Runs the example binaries as processes: the JSON result line, the `.npy` files of `--out`
//! (read back with `weft_examples::npy` and checked against `weft_tests::reference`), exit
//! codes and usage messages for bad command lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use weft_examples::npy::{self, Npy};
use weft_examples::report::REQUIRED_KEYS;
use weft_tests::{assert_close, reference};

const BLACK_SCHOLES: &str = env!("CARGO_BIN_EXE_black_scholes");
const STENCIL: &str = env!("CARGO_BIN_EXE_stencil");
const JACOBI: &str = env!("CARGO_BIN_EXE_jacobi");
const ALL: [(&str, &str); 9] = [
    ("black_scholes", BLACK_SCHOLES),
    ("stencil", STENCIL),
    ("jacobi", JACOBI),
    ("cg", env!("CARGO_BIN_EXE_cg")),
    ("bicgstab", env!("CARGO_BIN_EXE_bicgstab")),
    ("gmg", env!("CARGO_BIN_EXE_gmg")),
    ("logreg", env!("CARGO_BIN_EXE_logreg")),
    ("cfd", env!("CARGO_BIN_EXE_cfd")),
    ("swe", env!("CARGO_BIN_EXE_swe")),
];

pub(crate) fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh, empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Checks a successful run and returns its JSON result line (the last line of stdout).
pub(crate) fn result_line(out: &Output, example: &str) -> Value {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{example} failed ({:?})\nstdout:\n{stdout}\nstderr:\n{}",
        out.status.code(),
        text(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{example}: last line is not JSON ({e}): {last}"));
    assert!(v.is_object(), "{example}: {last}");
    for key in REQUIRED_KEYS {
        assert!(v.get(key).is_some(), "{example}: no `{key}` in {last}");
    }
    assert_eq!(v["example"], example);
    let seconds = v["seconds_per_iter"]
        .as_f64()
        .expect("seconds_per_iter is a number");
    assert!(
        seconds > 0.0 && seconds.is_finite(),
        "{example}: seconds {seconds}"
    );
    assert!(v["tasks_submitted"].as_u64().is_some_and(|t| t > 0));
    assert!(v["kernels_compiled"].as_u64().is_some());
    v
}

fn load(dir: &Path, name: &str, shape: &[u64]) -> Vec<f64> {
    let a: Npy = npy::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(a.shape, shape, "{name}: shape");
    assert!(matches!(a.data, npy::NpyData::F64(_)), "{name}: not <f8");
    a.data.to_f64()
}

fn check_black_scholes(cnd: &str) {
    let dir = temp_dir(&format!("bs-{cnd}"));
    let d = dir.to_string_lossy().into_owned();
    let args = [
        "--n",
        "777",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--threads",
        "2",
        "--seed",
        "5",
    ];
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--cnd", cnd, "--out", &d]);
    let v = result_line(&run(BLACK_SCHOLES, &all), "black_scholes");
    assert_eq!((v["n"].as_u64(), v["iters"].as_u64()), (Some(777), Some(2)));
    assert_eq!(
        (v["threads"].as_u64(), v["seed"].as_u64()),
        (Some(2), Some(5))
    );
    assert_eq!(v["cnd"], cnd);
    let n = [777u64];
    let (s, x, t) = (
        load(&dir, "S.npy", &n),
        load(&dir, "X.npy", &n),
        load(&dir, "T.npy", &n),
    );
    let r = load(&dir, "R.npy", &[])[0];
    let vol = load(&dir, "V.npy", &[])[0];
    assert_eq!((r, vol), (0.02, 0.30));
    let (want_call, want_put) = reference::black_scholes(&s, &x, &t, r, vol, cnd == "poly");
    assert_close(
        "call.npy",
        &load(&dir, "call.npy", &n),
        &want_call,
        1e-9,
        1e-9,
    );
    assert_close("put.npy", &load(&dir, "put.npy", &n), &want_put, 1e-9, 1e-9);
    let mean = want_call.iter().sum::<f64>() / 777.0;
    let reported = v["call_mean"].as_f64().expect("call_mean");
    assert!(
        (reported - mean).abs() < 1e-9 * mean.abs().max(1.0),
        "call_mean {reported} vs {mean}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn black_scholes_writes_outputs_that_match_the_reference() {
    check_black_scholes("erf");
}

#[test]
fn black_scholes_polynomial_form_matches_the_reference() {
    check_black_scholes("poly");
}

#[test]
fn stencil_writes_outputs_that_match_the_reference() {
    let dir = temp_dir("stencil");
    let d = dir.to_string_lossy().into_owned();
    let args = [
        "--n",
        "21",
        "--iters",
        "3",
        "--warmup",
        "2",
        "--threads",
        "2",
        "--out",
        &d,
    ];
    let v = result_line(&run(STENCIL, &args), "stencil");
    // The warm-up runs on a copy: the grid written is the one after exactly `--iters` sweeps.
    assert_eq!(v["sweeps"].as_u64(), Some(3));
    assert_eq!(v["warmup_sweeps"].as_u64(), Some(2));
    let shape = [23u64, 23];
    let g0 = load(&dir, "grid0.npy", &shape);
    let want = reference::stencil(&g0, 21, 3);
    assert_close(
        "grid.npy",
        &load(&dir, "grid.npy", &shape),
        &want,
        1e-12,
        1e-13,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn jacobi_writes_outputs_that_match_the_reference() {
    let dir = temp_dir("jacobi");
    let d = dir.to_string_lossy().into_owned();
    let args = [
        "--n", "50", "--iters", "10", "--warmup", "1", "--seed", "3", "--out", &d,
    ];
    let v = result_line(&run(JACOBI, &args), "jacobi");
    assert_eq!(v["steps"].as_u64(), Some(10));
    assert_eq!(v["warmup_steps"].as_u64(), Some(1));
    let a = load(&dir, "A.npy", &[50, 50]);
    let b = load(&dir, "b.npy", &[50]);
    let x0 = load(&dir, "x0.npy", &[50]);
    assert!(x0.iter().all(|&v| v == 0.0));
    let want = reference::jacobi(&a, &b, &x0, 10);
    assert_close("x.npy", &load(&dir, "x.npy", &[50]), &want, 1e-10, 1e-12);
    let residual = v["relative_residual"].as_f64().expect("relative_residual");
    let want_residual = reference::relative_residual(&a, &b, &want);
    assert!(
        (residual - want_residual).abs() <= 1e-8 * want_residual,
        "residual {residual:e} vs {want_residual:e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--device gpu`: where no NVIDIA driver is, every example and benchmark exits with 2 and
/// names the missing library; where one is, it runs on the GPU.
#[test]
fn device_gpu_runs_or_names_the_missing_driver() {
    let benches = [
        (
            "bench_black_scholes",
            env!("CARGO_BIN_EXE_bench_black_scholes"),
        ),
        ("bench_stencil", env!("CARGO_BIN_EXE_bench_stencil")),
        ("bench_krylov", env!("CARGO_BIN_EXE_bench_krylov")),
        ("bench_spmv", env!("CARGO_BIN_EXE_bench_spmv")),
    ];
    for (name, bin) in ALL.iter().chain(&benches) {
        let out = run(bin, &["--device", "gpu", "--n", "64", "--iters", "1"]);
        if weft_ptx::driver::present() {
            assert!(
                out.status.success(),
                "{name} on the GPU: {}",
                text(&out.stderr)
            );
        } else {
            assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out.stderr));
            let err = text(&out.stderr);
            assert!(err.contains("libcuda.so.1"), "{name}: {err}");
            assert!(!err.contains("panicked"), "{name}: {err}");
        }
    }
}

/// `bench_gather` measures the CPU back end's SIMD paths below the runtime: `--device gpu`
/// exits with 2 and says so.
#[test]
fn bench_gather_refuses_the_gpu() {
    let out = run(
        env!("CARGO_BIN_EXE_bench_gather"),
        &["--device", "gpu", "--iters", "1"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("bench_gather") && err.contains("no GPU form"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn every_example_runs_with_its_defaults() {
    for (name, bin, n) in [
        ("black_scholes", BLACK_SCHOLES, 1u64 << 20),
        ("stencil", STENCIL, 1000),
        ("jacobi", JACOBI, 1024),
    ] {
        let v = result_line(&run(bin, &[]), name);
        assert_eq!(v["n"].as_u64(), Some(n), "{name}: default n");
    }
}

#[test]
fn bad_command_lines_exit_with_2_and_the_usage() {
    let bad: &[&[&str]] = &[
        &["--bogus"],
        &["--bogus", "3"],
        &["--n"],
        &["--n", "0"],
        &["--n", "abc"],
        &["--n", "-5"],
        &["--n", "1.5"],
        &["--n", "18446744073709551615"],
        &["--n", "99999999999999999999999"],
        &["--iters"],
        &["--iters", "0"],
        &["--threads", "0"],
        &["--seed", "x"],
        &["--n", "--iters", "3"],
        &["stray"],
    ];
    for (name, bin) in ALL {
        for args in bad {
            let out = run(bin, args);
            let stderr = text(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{name} {args:?}: stderr {stderr}"
            );
            assert!(stderr.contains("error:"), "{name} {args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("Usage: {name}")),
                "{name} {args:?}: {stderr}"
            );
            assert!(out.stdout.is_empty(), "{name} {args:?} printed to stdout");
        }
    }
    let out = run(BLACK_SCHOLES, &["--cnd", "exact"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("one of erf, poly"));
    let out = run(STENCIL, &["--cnd", "erf"]);
    assert_eq!(out.status.code(), Some(2), "stencil has no --cnd");
}

#[test]
fn help_prints_the_usage_and_exits_with_0() {
    for (name, bin) in ALL {
        for flag in ["--help", "-h"] {
            let out = run(bin, &[flag]);
            assert_eq!(out.status.code(), Some(0), "{name} {flag}");
            let stdout = text(&out.stdout);
            assert!(stdout.contains(&format!("Usage: {name}")), "{stdout}");
            for f in [
                "--n <N>",
                "--iters <K>",
                "--threads <T>",
                "--seed <S>",
                "--out <DIR>",
            ] {
                assert!(stdout.contains(f), "{name}: usage lacks {f}:\n{stdout}");
            }
        }
    }
}

#[test]
fn plugin_calls_reports_the_cost_of_each_kind_of_call() {
    let out = run(
        env!("CARGO_BIN_EXE_plugin_calls"),
        &["--n", "50", "--iters", "1"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    let json: Value = serde_json::from_str(line.trim().lines().last().unwrap_or("")).expect("json");
    for key in [
        "typed_export_call_ns",
        "dynamic_call_ns",
        "numeric_op_submit_ns",
    ] {
        let ns = json[key].as_f64().unwrap_or(-1.0);
        assert!(ns > 0.0, "{key} = {ns} in {line}");
    }
}

/// With `WEFT_FORBID_COMPILES_AFTER_WARMUP=1`, a compile in the timed loop is an error: every
/// example reaches a steady state (nothing new to compile) after two warm-up iterations, and
/// runs fused and unfused.
#[test]
fn every_example_compiles_nothing_in_its_timed_loop() {
    for bin in [BLACK_SCHOLES, STENCIL, JACOBI] {
        for extra in [None, Some("--no-fusion")] {
            let mut cmd = std::process::Command::new(bin);
            cmd.args(["--n", "64", "--iters", "3", "--warmup", "2"])
                .env("WEFT_FORBID_COMPILES_AFTER_WARMUP", "1");
            if let Some(flag) = extra {
                cmd.arg(flag);
            }
            let out = cmd.output().expect("runs");
            let v = result_line(
                &out,
                std::path::Path::new(bin)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or(""),
            );
            assert_eq!(v["kernels_compiled_timed"], 0, "{bin} {extra:?}");
            assert_eq!(v["fusion"], extra.is_none(), "{bin} {extra:?}");
        }
    }
}

/// `WEFT_EXPLAIN=2` prints every fusion decision on stderr (the planner's explanations are
/// `tracing` events; the runtime's subscriber prints them), `WEFT_EXPLAIN=1` a short summary
/// of each run of the window in their place, and neither prints anything without it.
#[test]
fn weft_explain_prints_fusion_decisions_on_stderr() {
    let stencil = |explain: Option<&str>| {
        let mut command = Command::new(STENCIL);
        command.args(["--n", "16", "--iters", "1", "--warmup", "0"]);
        match explain {
            Some(level) => command.env("WEFT_EXPLAIN", level),
            None => command.env_remove("WEFT_EXPLAIN"),
        };
        let out = command.output().expect("runs");
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let detail = stencil(Some("2"));
    assert!(detail.contains("weft fusion:"), "{detail}");
    assert!(detail.contains("task(s) fused"), "{detail}");
    let summary = stencil(Some("1"));
    assert!(!summary.contains("weft fusion:"), "{summary}");
    assert!(
        summary.starts_with("weft: ") && summary.contains(" tasks -> one task running "),
        "{summary}"
    );
    assert!(
        summary.lines().count() < detail.lines().count(),
        "the summary is shorter:\n{summary}"
    );
    let quiet = stencil(None);
    assert!(
        !quiet.contains("weft fusion:") && !quiet.contains("weft: "),
        "{quiet}"
    );
}

/// `WEFT_PROFILE=1` prints, when the runtime is dropped, the kernels that took the most time:
/// a heading with the totals, then one line per kernel with its launches and its provenance.
#[test]
fn weft_profile_prints_the_kernels_with_the_most_time_on_stderr() {
    let out = Command::new(STENCIL)
        .args(["--n", "16", "--iters", "3", "--warmup", "0"])
        .env("WEFT_PROFILE", "1")
        .env_remove("WEFT_EXPLAIN")
        .output()
        .expect("runs");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let table: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("weft profile: "))
        .collect();
    assert!(
        table.len() >= 3,
        "a heading, columns and kernels:\n{stderr}"
    );
    assert_eq!(
        table[1], "   share    total ms  launches    mean us  kernel",
        "{stderr}"
    );
    assert!(
        table[2..].iter().any(|l| l.contains("fused(numeric.")),
        "{stderr}"
    );
    let quiet = run(STENCIL, &["--n", "16", "--iters", "1", "--warmup", "0"]);
    assert!(!text(&quiet.stderr).contains("weft profile"));
}
