//! The Krylov solvers as one source built two ways: natively on the `weft` crate, and as an
//! application component on `weft-app` (which this file then calls `weft`). The solvers are
//! `weft-examples`' own `krylov.rs` (CG, BiCGSTAB, and CG preconditioned by geometric
//! multigrid), compiled here by path, on the sparse plugin's 5-point Laplacian.
//!
//! `krylov_app [METHOD [G [SEED [MAX_ITER]]]]` solves `A x = b` for `A` the Laplacian on a
//! `G` x `G` grid (default 64) and `b` uniform in `[0, 1)` from `SEED`'s stream (default 42),
//! with `METHOD` one of `cg` (the default), `bicgstab` and `gmg`, to a relative residual of
//! 1e-8 or `MAX_ITER` iterations (default 1,000). It writes the solution to `x.f64` and the
//! residual norms (before the first iteration and after each) to `residuals.f64`
//! (little-endian) in the working directory (the job's directory, for the component), and
//! prints one JSON line.

#[cfg(target_family = "wasm")]
extern crate weft_app as weft;

// The multigrid's names that only the native examples use.
#[allow(dead_code)]
#[path = "../../../src/krylov.rs"]
mod krylov;
#[path = "../../../src/seeds.rs"]
mod seeds;

use seeds::sub_seed;
use weft::DType;
use weft_example_apps::{arg, args, main_of, numeric, sparse, write_f64s};

/// The relative residual the solve stops at.
const TOL: f64 = 1e-8;

fn run() -> Result<(), String> {
    let args = args();
    let method: String = arg(&args, 0, "cg".to_string())?;
    let g = arg(&args, 1, 64u64)?;
    let seed = arg(&args, 2, 42u64)?;
    let max_iter = arg(&args, 3, 1000usize)?;
    let e = |e: weft::Error| e.to_string();
    let np = numeric()?;
    let sp = sparse(&np)?;
    let a = sp.poisson2d(g, DType::F64, DType::I32).map_err(e)?;
    let b = np.random_uniform(&[g * g], 0.0, 1.0, sub_seed(seed, 0), DType::F64);
    let start = std::time::Instant::now();
    let solve = match method.as_str() {
        "cg" => krylov::cg(&a, &b, TOL, max_iter),
        "bicgstab" => krylov::bicgstab(&a, &b, TOL, max_iter),
        "gmg" => {
            let mg = krylov::Multigrid::new(&sp, &a, g).map_err(e)?;
            krylov::gmg(&a, &mg, &b, TOL, max_iter)
        }
        other => return Err(format!("unknown method {other:?} (cg, bicgstab or gmg)")),
    }
    .map_err(e)?;
    let x = solve.x.to_vec().map_err(e)?;
    let seconds = start.elapsed().as_secs_f64();
    write_f64s("x.f64", &x)?;
    write_f64s("residuals.f64", &solve.residuals)?;
    println!(
        "{{\"example\":\"krylov_app\",\"method\":\"{method}\",\"g\":{g},\"iterations\":{},\"converged\":{},\"residual\":{},\"seconds\":{seconds}}}",
        solve.iterations(),
        solve.converged,
        solve.residuals.last().copied().unwrap_or(f64::NAN)
    );
    Ok(())
}

fn main() {
    main_of("krylov_app", run);
}
