//! The `swe` example against `examples/numpy/swe.py` (the same shallow-water program in
//! NumPy, run on the example's own initial depth), fused against unfused in the same run, and
//! against a law of the physics: reflecting walls conserve the mass.

use weft_tests::assert_close;

use crate::program::{assert_fewer_tasks, load, run_example, run_numpy, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_swe");

#[test]
fn swe_matches_numpy_conserves_mass_and_fused_equals_unfused() {
    let dir = temp_dir("swe", "fused");
    let report = run_example(BIN, &dir, &["--n", "37", "--iters", "6", "--warmup", "1"]);
    assert_eq!(report["fusion"], true);
    assert_eq!(report["max_diff_fused_vs_unfused"], 0.0, "{report}");
    assert_fewer_tasks(&report, 5.0);
    let drift = report["relative_mass_drift"].as_f64().expect("drift");
    assert!(drift < 1e-13, "mass is conserved: {report}");

    run_numpy("swe.py", &dir, &["6"]);
    let side = 37 + 4;
    for field in ["h", "hu", "hv"] {
        let got = load(&dir, &format!("{field}.npy"));
        assert_eq!(got.len(), side * side);
        let want = load(&dir, &format!("{field}_numpy.npy"));
        assert_close(&format!("{field} against NumPy"), &got, &want, 1e-12, 1e-14);
    }
    // The water moved: the hump spreads, so both momenta are nonzero somewhere.
    for field in ["hu", "hv"] {
        let m = load(&dir, &format!("{field}.npy"));
        assert!(m.iter().any(|&x| x.abs() > 1e-3), "{field} moved");
    }
    assert_close(
        "simulated time against NumPy",
        &load(&dir, "t.npy"),
        &load(&dir, "t_numpy.npy"),
        1e-13,
        0.0,
    );
}
