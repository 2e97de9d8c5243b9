//! The reports of the benchmarks that time a peer in the same run: `bench_dispatch` (the
//! analysis per task for every window from 16 to 4,096 tasks, element-wise and 0-d chains;
//! the end-to-end cost per task beside NumPy's for the same operation), `bench_graph`
//! (`from_coo` and a random graph's SpMV beside SciPy's) and `bench_products` (every form of
//! dense product beside NumPy's `@`). Where the peer is missing its fields are `null`, with
//! the reason.

use crate::cli::{result_line, run};

#[test]
fn bench_dispatch_reports_analysis_by_window_and_numpy_beside_it() {
    let out = run(
        env!("CARGO_BIN_EXE_bench_dispatch"),
        &[
            "--n",
            "4",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--threads",
            "2",
        ],
    );
    let v = result_line(&out, "bench_dispatch");
    let rows = v["analysis_by_window"]
        .as_array()
        .expect("analysis_by_window");
    let mut worst = std::collections::BTreeMap::new();
    for chain in ["element-wise", "0-d", "in-place"] {
        for tasks in [16u64, 64, 256, 1024, 4096] {
            let row = rows
                .iter()
                .find(|r| r["chain"] == chain && r["tasks"].as_u64() == Some(tasks))
                .unwrap_or_else(|| panic!("no row for {chain} at {tasks} tasks: {v}"));
            let us = row["analysis_us_per_task"].as_f64().expect("a number");
            assert!(us.is_finite() && us > 0.0, "{row}");
            let plans = row["plans"].as_u64().expect("plans");
            // A window is planned in prefixes no longer than the kernel limits allow.
            assert!(plans >= 1 && plans <= tasks, "{row}");
            let w = worst.entry(tasks).or_insert(0.0f64);
            *w = w.max(us);
        }
    }
    for tasks in [16u64, 4096] {
        let key = format!("analysis_per_task_us_window_{tasks}");
        assert_eq!(v[&key].as_f64(), Some(worst[&tasks]), "{key} in {v}");
    }
    let e2e = v["end_to_end_per_task_us"].as_f64().expect("end to end");
    assert!(e2e.is_finite() && e2e > 0.0, "{v}");
    match v["numpy_per_op_us"].as_f64() {
        Some(us) => assert!(us.is_finite() && us > 0.0, "{v}"),
        None => {
            assert!(v["numpy_per_op_us"].is_null(), "{v}");
            let why = v["numpy_unavailable"]
                .as_str()
                .expect("the reason NumPy is missing");
            assert!(!why.is_empty(), "{v}");
        }
    }
}

/// `bench_graph`: the matrix has the graph's edges less its duplicates, the timings are
/// there, and where SciPy runs, Weft's `y` has SciPy's bits.
#[test]
fn bench_graph_reports_weft_and_scipy_side_by_side() {
    let out = run(
        env!("CARGO_BIN_EXE_bench_graph"),
        &[
            "--n",
            "3000",
            "--degree",
            "5",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--threads",
            "2",
        ],
    );
    let v = result_line(&out, "bench_graph");
    let nnz = v["nnz"].as_u64().expect("nnz");
    assert!(nnz > 14_000 && nnz <= 15_000, "{v}");
    for key in ["weft_from_coo_seconds", "weft_spmv_seconds"] {
        let s = v[key].as_f64().expect(key);
        assert!(s.is_finite() && s > 0.0, "{key} in {v}");
    }
    if v["scipy_from_coo_seconds"].is_null() {
        let why = v["scipy_unavailable"]
            .as_str()
            .expect("the reason SciPy is missing");
        assert!(!why.is_empty(), "{v}");
    } else {
        assert_eq!(v["y_equals_scipy"], true, "{v}");
        let ratio = v["from_coo_over_scipy"].as_f64().expect("ratio");
        let want = v["weft_from_coo_seconds"].as_f64().unwrap_or(0.0)
            / v["scipy_from_coo_seconds"].as_f64().unwrap_or(1.0);
        assert!((ratio - want).abs() <= 1e-9 * want, "{v}");
    }
}

/// `bench_products` times every form of product it lists, checks each against plain-Rust
/// sums, and puts NumPy's rate beside Weft's (or says why NumPy is missing).
#[test]
fn bench_products_reports_every_form_beside_numpy() {
    let out = run(
        env!("CARGO_BIN_EXE_bench_products"),
        &[
            "--divide",
            "64",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--threads",
            "2",
        ],
    );
    let v = result_line(&out, "bench_products");
    let rows = v["by_shape"].as_array().expect("by_shape");
    assert_eq!(v["shapes"].as_u64(), Some(rows.len() as u64), "{v}");
    let forms: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r["form"].as_str()).collect();
    for form in ["A@B", "A.T@B", "A@B.T", "A@x", "A.T@x", "x@A"] {
        assert!(forms.contains(form), "no {form} in {v}");
    }
    let numpy = v["numpy_unavailable"].is_null();
    for row in rows {
        let tol = if row["dtype"] == "f32" { 1e-5 } else { 1e-13 };
        let diff = row["max_rel_diff_sampled"].as_f64().expect("a difference");
        assert!(diff <= tol, "{row}");
        let gflops = row["weft_gflops"].as_f64().expect("Weft's rate");
        assert!(gflops.is_finite() && gflops > 0.0, "{row}");
        if numpy {
            let ratio = row["ratio_vs_numpy"].as_f64().expect("a ratio");
            assert!(ratio.is_finite() && ratio > 0.0, "{row}");
        } else {
            assert!(row["ratio_vs_numpy"].is_null(), "{row}");
        }
    }
    if numpy {
        assert!(v["ratio_vs_numpy_geomean"].as_f64().is_some(), "{v}");
    }
}
