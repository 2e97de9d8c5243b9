//! The 5-point Jacobi heat iteration of Figure 1 of the Diffuse paper, on an
//! `(n+2) x (n+2)` grid through five aliasing views. See [`weft_examples::stencil`].
//!
//! Runs `--warmup` sweeps on a copy of the grid, then `--iters` timed sweeps on the grid; the
//! result line reports the median time of one timed sweep. `--out DIR` writes `grid0.npy` (the
//! initial grid) and `grid.npy` (the grid after exactly `--iters` sweeps).

use std::process::ExitCode;

use weft::Range;
use weft_examples::stencil::{self, Stencil};
use weft_examples::{
    AppError, Args, Cli, Report, bench, load_numeric, out_dir, run_main, save, timing::warm_up,
};

const NAME: &str = "stencil";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Runs the 5-point Jacobi heat iteration (Figure 1 of the Diffuse paper) on an \
         (N+2) x (N+2) grid: center[:] = 0.2 * (center + north + east + west + south).",
        1000,
        20,
    )
    .range("n", 1, 1 << 15)
    .help("n", "interior size: the grid is (N+2) x (N+2)")
    .help("iters", "timed sweeps (after the warm-up sweeps)");
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let np = load_numeric(args)?;
    let grid = stencil::initial_grid(&np, args.n, args.seed)?;
    let dir = out_dir(args)?;
    if let Some(dir) = &dir {
        save(dir, "grid0.npy", &grid)?;
    }
    np.runtime(|rt| rt.synchronize())?;

    // The warm-up sweeps run on a copy, so the grid sees exactly `--iters` sweeps.
    let copy = grid.copy();
    let warm = Stencil::new(&copy);
    warm_up(&np, args.warmup, || warm.step())?;
    drop((warm, copy));
    let views = Stencil::new(&grid);
    let (timing, per_iter, _) = bench(&np, 0, args.iters, || views.step())?;

    let interior = grid.slice(&[Range::new(1, -1), Range::new(1, -1)]);
    let n2 = (args.n * args.n) as f64;
    let mean = interior.sum().item()? / n2;
    if let Some(dir) = &dir {
        save(dir, "grid.npy", &grid)?;
    }

    let sweeps = args.iters;
    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("sweeps", sweeps as u64)
        .set("warmup_sweeps", args.warmup as u64)
        .set("grid_points", (args.n + 2) * (args.n + 2))
        .set("points_per_second", n2 / timing.median)
        .set("interior_mean", mean)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: {n}x{n} interior, {sweeps} sweeps, {:.3} ms per sweep (median of {}), \
         interior mean {mean:.6}",
        timing.median * 1e3,
        args.iters,
        n = args.n,
    ))?;
    report.print()?;
    Ok(())
}
