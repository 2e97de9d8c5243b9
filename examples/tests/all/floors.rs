//! The benchmarks' memory-bandwidth floors: every benchmark's JSON line has the probe's
//! `read_gbs`, the workload's compulsory bytes (by the formulas of issue 13), and
//! `floor_ratio` = seconds over those bytes at that rate; the stencil and Krylov benchmarks
//! also time the hand-written plain-Rust loops, whose results agree with Weft's.

use serde_json::Value;

use crate::cli::{result_line, run};

/// Checks the rate `v[gbs_key]`, `{prefix}compulsory_bytes` (against `bytes`) and
/// `{prefix}floor_ratio` (against `seconds` at that rate).
fn check_floor(v: &Value, gbs_key: &str, prefix: &str, seconds: f64, bytes: f64) {
    let gbs = v[gbs_key].as_f64().expect("read_gbs");
    assert!(gbs.is_finite() && gbs > 0.0, "read_gbs {gbs}");
    let got = v[format!("{prefix}compulsory_bytes")]
        .as_f64()
        .expect("bytes");
    assert_eq!(got, bytes, "{prefix}compulsory_bytes");
    let ratio = v[format!("{prefix}floor_ratio")].as_f64().expect("ratio");
    let want = seconds / (bytes / (gbs * 1e9));
    assert!((ratio - want).abs() <= 1e-9 * want, "{ratio} vs {want}");
}

/// Runs `bin` briefly (two timed iterations after one warm-up, two threads) with `args`, and
/// returns its JSON line, checked as every example's is.
fn run_briefly(bin: &str, example: &str, args: &[&str]) -> Value {
    let mut all = vec!["--iters", "2", "--warmup", "1", "--threads", "2"];
    all.extend_from_slice(args);
    result_line(&run(bin, &all), example)
}

/// Checks that the probe took `samples` samples and that `read_gbs` lies within their range.
fn check_probe(v: &Value, samples: u64) {
    assert_eq!(v["probe_samples"].as_u64(), Some(samples), "{v}");
    let (lo, mid, hi) = (f(v, "read_gbs_min"), f(v, "read_gbs"), f(v, "read_gbs_max"));
    assert!(0.0 < lo && lo <= mid && mid <= hi, "{lo} {mid} {hi}");
}

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number `{key}` in {v}"))
}

#[test]
fn bench_stencil_reports_its_floor_and_matches_the_hand_written_loop() {
    let v = run_briefly(
        env!("CARGO_BIN_EXE_bench_stencil"),
        "bench_stencil",
        &["--n", "60", "--sweeps", "3"],
    );
    let n = 60.0;
    let bytes = 8.0 * ((n + 2.0) * (n + 2.0) + n * n);
    check_floor(&v, "read_gbs", "", f(&v, "fused_seconds_per_sweep"), bytes);
    assert_eq!(v["fused_equals_rust"], true, "{v}");
    assert!(f(&v, "rust_seconds_per_sweep") > 0.0);
    // A sample after each timed iteration of the fused, unfused and hand-written sweeps.
    check_probe(&v, 6);
}

#[test]
fn bench_krylov_reports_both_floors_and_the_hand_written_solvers_agree() {
    let v = run_briefly(
        env!("CARGO_BIN_EXE_bench_krylov"),
        "bench_krylov",
        &["--grid", "40", "--rounds", "1"],
    );
    let (n, nnz) = (1600.0, f(&v, "nnz"));
    let matrix = 8.0 * n + 12.0 * nnz;
    check_floor(
        &v,
        "cg_read_gbs",
        "cg_",
        f(&v, "cg_fused_seconds_per_iter"),
        matrix + 48.0 * n,
    );
    check_floor(
        &v,
        "bicgstab_read_gbs",
        "bicgstab_",
        f(&v, "bicgstab_fused_seconds_per_iter"),
        2.0 * matrix + 80.0 * n,
    );
    for solver in ["cg", "bicgstab"] {
        let diff = f(&v, &format!("{solver}_max_rel_diff_residuals_hand_written"));
        assert!(diff < 1e-10, "{solver}: residuals differ by {diff}");
    }
    // Per solver and round: a sample before the solver, then one after the fused, unfused,
    // plain-Rust and hand-written solves.
    check_probe(&v, 2 * 5);
    for solver in ["cg", "bicgstab"] {
        let gbs = f(&v, &format!("{solver}_read_gbs"));
        assert!(f(&v, "read_gbs_min") <= gbs && gbs <= f(&v, "read_gbs_max"));
    }
}

#[test]
fn bench_spmv_reports_its_floor_and_the_bits_of_both_row_orders() {
    let g: f64 = 6.0;
    let n = g * g * g;
    // 27 points: interior points have 27 entries, faces 18, edges 12, corners 8. 7 points:
    // each of the 6 faces of the grid loses one neighbour per point.
    let (inner, faces, edges) = ((g - 2.0).powi(3), 6.0 * (g - 2.0).powi(2), 12.0 * (g - 2.0));
    // 7-point rows are shorter than a block of eight, where the orders agree.
    let stencils = [
        (
            "27",
            27.0 * inner + 18.0 * faces + 12.0 * edges + 8.0 * 8.0,
            true,
        ),
        ("7", 7.0 * n - 6.0 * g * g, false),
    ];
    for (points, nnz, orders_differ) in stencils {
        let v = run_briefly(
            env!("CARGO_BIN_EXE_bench_spmv"),
            "bench_spmv",
            &["--grid", "6", "--points", points],
        );
        assert_eq!(f(&v, "rows"), n, "{points} points");
        assert_eq!(f(&v, "nnz"), nnz, "{points} points");
        check_floor(
            &v,
            "read_gbs",
            "",
            f(&v, "weft_seconds"),
            24.0 * n + 12.0 * nnz,
        );
        check_orders(&v, orders_differ);
        // Before the products and after them.
        check_probe(&v, 2);
    }
    let v = run_briefly(
        env!("CARGO_BIN_EXE_bench_spmv"),
        "bench_spmv",
        &["--row-len", "600", "--rows", "50"],
    );
    assert_eq!((f(&v, "rows"), f(&v, "nnz")), (50.0, 30000.0), "{v}");
    let cols = f(&v, "cols");
    assert_eq!(cols, 65536.0, "{v}");
    check_floor(
        &v,
        "read_gbs",
        "",
        f(&v, "weft_seconds"),
        16.0 * 50.0 + 12.0 * 30000.0 + 8.0 * cols,
    );
    check_orders(&v, true);
}

/// `bench_spmv`'s products in both row orders have their loops' bits, and whether the orders
/// gave any row differently is `differ`.
fn check_orders(v: &Value, differ: bool) {
    assert_eq!(v["bits_equal_sequential"], true, "{v}");
    assert_eq!(v["bits_equal_lanes"], true, "{v}");
    assert_eq!(f(v, "rows_differing_from_lanes") > 0.0, differ, "{v}");
    for key in [
        "weft_lanes_seconds",
        "rust_sequential_seconds",
        "rust_lanes_seconds",
    ] {
        assert!(f(v, key) > 0.0, "{key}: {v}");
    }
    let ratio = f(v, "speedup_weft_lanes_vs_weft");
    let want = f(v, "weft_seconds") / f(v, "weft_lanes_seconds");
    assert!((ratio - want).abs() <= 1e-9 * want, "{ratio} vs {want}");
}

#[test]
fn bench_gather_runs_every_path_with_the_same_bits_and_reports_its_floor() {
    // 100 rows of 150 entries: 18 blocks of eight (the wide bodies take them) and a tail.
    let (rows, len, cols) = (100.0, 150.0, 777.0);
    let v = run_briefly(
        env!("CARGO_BIN_EXE_bench_gather"),
        "bench_gather",
        &["--rows", "100", "--row-len", "150", "--cols", "777"],
    );
    assert_eq!(f(&v, "nnz"), rows * len);
    assert_eq!(v["bits_equal_paths"], true, "{v}");
    assert_eq!(v["bits_equal_rust_lanes"], true, "{v}");
    assert_eq!(v["bits_equal_weft_rust_sequential"], true, "{v}");
    assert!(f(&v, "weft_sequential_seconds") > 0.0);
    let paths: Vec<&str> = v["paths"].as_str().expect("paths").split(',').collect();
    assert_eq!(paths[..2], ["scalar", "sse"], "{v}");
    for path in &paths {
        assert!(f(&v, &format!("{path}_seconds")) > 0.0, "{path}");
        let wide = matches!(*path, "avx2" | "avx512");
        assert_eq!(
            f(&v, &format!("{path}_wide_lane_loops")),
            f64::from(u8::from(wide))
        );
    }
    let widest = f(&v, &format!("{}_seconds", paths[paths.len() - 1]));
    check_floor(
        &v,
        "read_gbs",
        "",
        widest,
        4.0 * (rows + 1.0) + 12.0 * rows * len + 8.0 * (cols + rows),
    );
    assert!(f(&v, "rust_sequential_seconds") > 0.0 && f(&v, "rust_lanes_seconds") > 0.0);
    check_probe(&v, 2);
}

#[test]
fn black_scholes_and_jacobi_report_their_floors() {
    let v = run_briefly(
        env!("CARGO_BIN_EXE_bench_black_scholes"),
        "bench_black_scholes",
        &["--n", "1000"],
    );
    check_floor(
        &v,
        "read_gbs",
        "",
        f(&v, "fused_seconds"),
        5.0 * 8.0 * 1000.0,
    );
    let v = run_briefly(env!("CARGO_BIN_EXE_jacobi"), "jacobi", &["--n", "100"]);
    check_floor(
        &v,
        "read_gbs",
        "",
        f(&v, "seconds_per_iter"),
        8.0 * 100.0 * 100.0,
    );
    // One sample before the timed steps and one after each.
    check_probe(&v, 3);
}
