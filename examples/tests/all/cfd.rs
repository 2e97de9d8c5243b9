//! The `cfd` example against `examples/numpy/cfd.py` (CFD Python step 12 in NumPy, run on the
//! example's own initial velocities), and fused against unfused in the same run.

use weft_tests::assert_close;

use crate::program::{assert_fewer_tasks, load, run_example, run_numpy, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_cfd");

#[test]
fn cfd_matches_numpy_and_fused_equals_unfused() {
    let dir = temp_dir("cfd", "fused");
    let report = run_example(
        BIN,
        &dir,
        &["--n", "23", "--nit", "7", "--iters", "4", "--warmup", "1"],
    );
    assert_eq!(report["fusion"], true);
    // The unfused run took the same steps and left the same bits.
    assert_eq!(report["max_diff_fused_vs_unfused"], 0.0, "{report}");
    assert_fewer_tasks(&report, 3.0);

    run_numpy("cfd.py", &dir, &["4", "7"]);
    for field in ["u", "v", "p"] {
        let got = load(&dir, &format!("{field}.npy"));
        assert_eq!(got.len(), 23 * 23);
        assert!(
            got.iter().any(|&x| x.abs() > 1e-6),
            "{field} is not all zeros"
        );
        let want = load(&dir, &format!("{field}_numpy.npy"));
        assert_close(&format!("{field} against NumPy"), &got, &want, 1e-12, 1e-14);
    }
    assert_close(
        "udiff against NumPy",
        &load(&dir, "udiff.npy"),
        &load(&dir, "udiff_numpy.npy"),
        1e-9,
        1e-14,
    );
}

#[test]
fn cfd_without_fusion_runs_once() {
    let dir = temp_dir("cfd", "unfused");
    let report = run_example(
        BIN,
        &dir,
        &["--n", "9", "--nit", "2", "--iters", "1", "--no-fusion"],
    );
    assert_eq!(report["fusion"], false);
    assert!(report.get("speedup_fused_vs_unfused").is_none(), "{report}");
    assert_eq!(load(&dir, "p.npy").len(), 81);
}
