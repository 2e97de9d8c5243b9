//! Shallow water in TorchSWE's style (see [`weft_examples::swe`]) on `--n` x `--n` cells,
//! fused and unfused side by side in one process.
//!
//! Each iteration is one SSP-RK2 time step; `--warmup` steps run first on a copy of the
//! water, untimed, so the fields written by `--out DIR` are those after exactly `--iters`
//! steps: `h0.npy` (the initial depth), `h.npy hu.npy hv.npy` and `t.npy` (the simulated
//! time). `examples/numpy/swe.py` runs the NumPy program on them. Unless `--no-fusion` is
//! given, the same steps run again without fusion and the result line adds the unfused time,
//! the speedup and the largest difference.

use std::process::ExitCode;

use weft_examples::side_by_side::{self, max_abs_diff};
use weft_examples::swe;
use weft_examples::timing::warm_up;
use weft_examples::{AppError, Args, Cli, Report, bench, out_dir, run_main, save};

const NAME: &str = "swe";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Shallow water in TorchSWE's style (finite volumes, MUSCL with a minmod limiter, \
         central-upwind fluxes, SSP-RK2) on N x N cells, fused and unfused side by side.",
        1000,
        5,
    )
    .range("n", 2, 1 << 14)
    .help(
        "n",
        "cells in x and in y (the arrays have two ghost cells on each side)",
    )
    .help("iters", "timed time steps (after the warm-up steps)");
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// The fields' values after the run, the simulated time and the interior mass.
struct State {
    fields: Vec<Vec<f64>>,
    time: f64,
    mass: f64,
}

fn run(args: &Args) -> Result<(), AppError> {
    let n = args.n;
    let dx = 1.0 / n as f64;
    let dir = out_dir(args)?;
    let mut first = true;
    let mut mass0 = 0.0;
    let runs = side_by_side::fused_and_unfused(args, |np| {
        let water = swe::initial_water(np, n);
        water.h.check()?;
        if let (Some(dir), true) = (&dir, first) {
            save(dir, "h0.npy", &water.h)?;
        }
        mass0 = swe::mass(&water.h).item()?;
        // The warm-up steps run on a copy, so the water sees exactly `--iters` steps.
        let copy = water.copy();
        warm_up(np, args.warmup, || swe::step(&copy, dx, dx))?;
        drop(copy);
        let mut time = np.zeros(&[], weft_ir::DType::F64);
        let (timing, per_iter, _) = bench(np, 0, args.iters, || {
            time = &time + &swe::step(&water, dx, dx)?;
            Ok(())
        })?;
        if let (Some(dir), true) = (&dir, first) {
            for (name, a) in [("h", &water.h), ("hu", &water.hu), ("hv", &water.hv)] {
                save(dir, &format!("{name}.npy"), a)?;
            }
            save(dir, "t.npy", &time)?;
        }
        first = false;
        let fields = vec![water.h.to_vec()?, water.hu.to_vec()?, water.hv.to_vec()?];
        let state = State {
            fields,
            time: time.item()?,
            mass: swe::mass(&water.h).item()?,
        };
        Ok((timing, per_iter, state))
    })?;

    let mut report = Report::new(NAME, args);
    let speedup = side_by_side::report(&mut report, &runs, |a, b| {
        max_abs_diff(&a.fields, &b.fields)
    });
    let main = &runs[0];
    let drift = (main.state.mass - mass0).abs() / mass0;
    report
        .set("cells", n * n)
        .set("simulated_time", main.state.time)
        .set("relative_mass_drift", drift);
    let versus = speedup.map_or(String::new(), |s| format!(", {s:.2}x the unfused run"));
    args.say(&format!(
        "{NAME}: {n}x{n} cells, {:.3} ms per step (median of {}){versus}, t = {:.4}, \
         mass drift {drift:.1e}",
        main.timing.median * 1e3,
        args.iters,
        main.state.time,
    ))?;
    report.print()?;
    Ok(())
}
