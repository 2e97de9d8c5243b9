//! The solver examples (`cg`, `bicgstab`, `gmg`): convergence to the requested tolerance on
//! Poisson problems, checked against the plain-Rust CSR reference; `--matrix` files; the
//! `.npy` outputs; fused against unfused; and a timed loop that compiles nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use weft::matrix_market::{self, Coo};
use weft_examples::npy;
use weft_examples::sparse_reference::{self as reference, Csr};
use weft_tests::assert_close;

const SOLVERS: [(&str, &str); 3] = [
    ("cg", env!("CARGO_BIN_EXE_cg")),
    ("bicgstab", env!("CARGO_BIN_EXE_bicgstab")),
    ("gmg", env!("CARGO_BIN_EXE_gmg")),
];

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("solvers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"))
}

fn result_line(out: &Output, name: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {last}"))
}

fn load(dir: &Path, name: &str) -> (Vec<u64>, Vec<f64>) {
    let a = npy::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    (a.shape.clone(), a.data.to_f64())
}

/// `|b - A x| / |b|` in plain Rust.
fn relative_residual(a: &Csr, b: &[f64], x: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.spmv(x, &mut ax);
    let r: f64 = ax.iter().zip(b).map(|(p, q)| (q - p) * (q - p)).sum();
    let nb: f64 = b.iter().map(|v| v * v).sum();
    (r / nb).sqrt()
}

/// Runs a solver with `--out` and checks its outputs against the reference; returns x.
fn check_solver(name: &str, bin: &str, extra: &[&str], g: usize, tol: f64) -> Vec<f64> {
    let dir = temp_dir(&format!("{name}-{}", extra.join("")));
    let d = dir.to_string_lossy().into_owned();
    let tol_text = format!("{tol:e}");
    let mut args = vec!["--tol", &tol_text, "--seed", "5", "--out", &d];
    args.extend_from_slice(extra);
    let v = result_line(&run(bin, &args, &[]), name);
    assert_eq!(v["converged"], true, "{name}: {v}");
    let n = g * g;
    assert_eq!(v["unknowns"].as_u64(), Some(n as u64));
    let (bs, b) = load(&dir, "b.npy");
    let (xs, x) = load(&dir, "x.npy");
    let (rs, residuals) = load(&dir, "residuals.npy");
    assert_eq!((bs, xs), (vec![n as u64], vec![n as u64]));
    let iterations = v["iterations"].as_u64().expect("iterations") as usize;
    assert_eq!(
        rs,
        vec![iterations as u64 + 1],
        "{name}: one residual per iteration and r0"
    );
    assert!(
        residuals[iterations] <= tol * residuals[0],
        "{name}: {residuals:?}"
    );
    // The independent check: the reference matrix, the solver's x and b.
    let a = Csr::poisson2d(g);
    let rel = relative_residual(&a, &b, &x);
    assert!(
        rel <= 2.0 * tol,
        "{name}: true relative residual {rel:e} > {tol:e}"
    );
    let reported = v["relative_residual"].as_f64().expect("relative_residual");
    assert!(
        (reported - rel).abs() <= 1e-6 * rel + 1e-15,
        "{reported:e} vs {rel:e}"
    );
    // Against the reference CG's solution.
    let want = reference::cg(&a, &b, 1e-13, 10 * n);
    assert_close(&format!("{name} x"), &x, &want.x, 1e-5, 1e-7);
    let _ = std::fs::remove_dir_all(&dir);
    x
}

#[test]
fn every_solver_converges_to_the_tolerance_and_matches_the_reference() {
    for (name, bin) in SOLVERS {
        for g in [15usize, 32] {
            let grid = g.to_string();
            check_solver(name, bin, &["--grid", &grid], g, 1e-10);
        }
    }
}

#[test]
fn fused_and_unfused_solves_agree() {
    for (name, bin) in SOLVERS {
        let fused = check_solver(name, bin, &["--grid", "31"], 31, 1e-9);
        let unfused = check_solver(name, bin, &["--grid", "31", "--no-fusion"], 31, 1e-9);
        // Element-wise work is identical; dot products may add in another order.
        assert_close(
            &format!("{name} fused vs unfused"),
            &fused,
            &unfused,
            1e-8,
            1e-10,
        );
    }
}

#[test]
fn a_matrix_market_file_gives_the_grid_problem() {
    let g = 12usize;
    let a = Csr::poisson2d(g);
    let mut coo = Coo {
        rows: (g * g) as u64,
        cols: (g * g) as u64,
        ..Coo::default()
    };
    for r in 0..a.rows {
        for k in a.indptr[r]..a.indptr[r + 1] {
            coo.row.push(r as u64);
            coo.col.push(a.indices[k] as u64);
            coo.val.push(a.data[k]);
        }
    }
    let dir = temp_dir("mtx");
    let path = dir.join("poisson.mtx");
    matrix_market::write(&path, &coo).expect("writes");
    let p = path.to_string_lossy().into_owned();
    for (name, bin) in SOLVERS {
        let from_file = check_solver(name, bin, &["--matrix", &p], g, 1e-10);
        let from_grid = check_solver(name, bin, &["--grid", "12"], g, 1e-10);
        assert_eq!(
            from_file, from_grid,
            "{name}: the same matrix gives the same iterates"
        );
    }
    // gmg needs a square grid: 7 unknowns are not one.
    let small = Coo {
        rows: 7,
        cols: 7,
        row: (0..7).collect(),
        col: (0..7).collect(),
        val: vec![2.0; 7],
    };
    matrix_market::write(&path, &small).expect("writes");
    let out = run(SOLVERS[2].1, &["--matrix", &p], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("square grid"), "{err}");
    // A malformed file is an error that names the line.
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1\n",
    )
    .unwrap();
    let out = run(SOLVERS[0].1, &["--matrix", &p], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timed_solves_compile_nothing() {
    for (name, bin) in SOLVERS {
        for extra in [None, Some("--no-fusion")] {
            let mut args = vec!["--grid", "20", "--warmup", "1", "--iters", "2"];
            args.extend(extra);
            let out = run(bin, &args, &[("WEFT_FORBID_COMPILES_AFTER_WARMUP", "1")]);
            let v = result_line(&out, name);
            assert_eq!(v["kernels_compiled_timed"], 0, "{name} {extra:?}: {v}");
            assert_eq!(v["fusion"], extra.is_none(), "{name} {extra:?}");
        }
    }
}

#[test]
fn a_solver_that_does_not_converge_says_so() {
    let out = run(SOLVERS[0].1, &["--grid", "40", "--maxiter", "3"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    assert_eq!(v["converged"], false);
    assert_eq!(v["iterations"], 3);
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not reach"));
}

#[test]
fn bad_solver_flags_exit_with_2() {
    for (name, bin) in SOLVERS {
        for args in [
            &["--grid", "0"][..],
            &["--tol", "-1"],
            &["--tol", "x"],
            &["--matrix"],
        ] {
            let out = run(bin, args, &[]);
            assert_eq!(out.status.code(), Some(2), "{name} {args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!("Usage: {name}")),
                "{name} {args:?}: {err}"
            );
        }
        let out = run(bin, &["--matrix", "/nonexistent/a.mtx"], &[]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name}: a missing file is a run error"
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/a.mtx"));
    }
}
