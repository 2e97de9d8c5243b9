//! Dense Jacobi iteration `x = (b - R x) / d` for a random diagonally dominant `n x n`
//! system (`R = A - diag(d)`, `d = diag(A)`), with `matvec` and `diag`. See
//! [`weft_examples::jacobi`].
//!
//! Runs `--warmup` steps from a copy of `x0 = 0`, then `--iters` timed steps from `x0`; the
//! result line reports the median time of one timed step, its ratio to the memory-bandwidth
//! floor (the matrix read once, at the median rate of the bandwidth probe
//! [`weft_examples::bandwidth::Probe`], sampled in this process between the timed steps) and the final relative residual `|A x - b| / |b|`. `--out DIR` writes `A.npy b.npy x0.npy x.npy` (`x` after exactly
//! `--iters` steps).

use std::process::ExitCode;

use weft_examples::bandwidth::{PROBE_BYTES, Probe};
use weft_examples::jacobi::{self, Jacobi};
use weft_examples::{
    AppError, Args, Cli, Report, bench_then, load_numeric, out_dir, run_main, save, timing::warm_up,
};
use weft_ir::DType;

const NAME: &str = "jacobi";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Solves a random diagonally dominant N x N system A x = b by dense Jacobi iteration, \
         x = (b - (A - D) x) / d.",
        1024,
        50,
    )
    .range("n", 1, 1 << 15)
    .help("n", "unknowns: A is N x N")
    .help("iters", "timed Jacobi steps (after the warm-up steps)");
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let np = load_numeric(args)?;
    let (a, b) = jacobi::system(&np, args.n, args.seed);
    let x0 = np.zeros(&[args.n], DType::F64);
    for v in [&a, &b, &x0] {
        v.check()?;
    }
    let solver = Jacobi::new(&a, &b);
    solver.r.check()?;
    np.runtime(|rt| rt.synchronize())?;

    // The warm-up steps run from a copy of the initial state, so `x` sees exactly `--iters`
    // steps.
    // (Both start from a copy of `x0`, so that the warm-up's first step is the timed loop's
    // first step, and the timed loop compiles nothing.)
    let mut warm = x0.copy();
    np.runtime(|rt| rt.synchronize())?;
    warm_up(&np, args.warmup, || {
        warm = solver.step(&warm);
        warm.check()
    })?;
    drop(warm);
    let mut x = x0.copy();
    np.runtime(|rt| rt.synchronize())?;
    // The bandwidth probe samples once before the timed steps and once after each.
    let mut probe = Probe::for_device(&np, args.threads, PROBE_BYTES)?;
    probe.sample();
    let (timing, per_iter, _) = bench_then(
        &np,
        0,
        args.iters,
        || {
            x = solver.step(&x);
            x.check()
        },
        |_| {
            probe.sample();
            Ok(())
        },
    )?;

    let residual = jacobi::relative_residual(&a, &b, &x).item()?;
    if let Some(dir) = out_dir(args)? {
        save(&dir, "A.npy", &a)?;
        save(&dir, "b.npy", &b)?;
        save(&dir, "x0.npy", &x0)?;
        save(&dir, "x.npy", &x)?;
    }

    let steps = args.iters;
    // Compulsory bytes per step: the n x n matrix read once.
    let bytes = 8.0 * (args.n * args.n) as f64;
    let gbs = probe.gbs();
    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .floor("", timing.median, bytes, gbs)
        .probe(&probe)
        .set("steps", steps as u64)
        .set("warmup_steps", args.warmup as u64)
        .set("relative_residual", residual)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: n={}, {steps} steps, {:.3} ms per step (median of {}), {:.2}x the floor at \
         {gbs:.1} GB/s, relative residual {residual:.3e}",
        args.n,
        timing.median * 1e3,
        args.iters,
        timing.median / weft_examples::bandwidth::floor_seconds(bytes, gbs)
    ))?;
    report.print()?;
    Ok(())
}
