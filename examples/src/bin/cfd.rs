//! Channel flow of CFD Python step 12 (see [`weft_examples::cfd`]) on an `--n` x `--n` grid,
//! `--nit` pressure iterations per step, fused and unfused side by side in one process.
//!
//! Each iteration is one time step; `--warmup` steps run first on a copy of the flow, untimed,
//! so the fields written by `--out DIR` are those after exactly `--iters` steps from the
//! initial flow: `u0.npy v0.npy` (the initial velocities), `u.npy v.npy p.npy` and
//! `udiff.npy` (the last step's relative change of `sum(u)`). `examples/numpy/cfd.py` runs the
//! NumPy original on them. Unless `--no-fusion` is given, the same steps run again without
//! fusion and the result line adds the unfused time, the speedup and the largest difference.

use std::process::ExitCode;

use weft_examples::cfd::{self, Flow, Params};
use weft_examples::side_by_side::{self, max_abs_diff};
use weft_examples::timing::warm_up;
use weft_examples::{AppError, Args, Cli, Kind, Report, bench, out_dir, run_main, save};

const NAME: &str = "cfd";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Channel flow (CFD Python step 12: Navier-Stokes with a periodic pressure Poisson \
         iteration) on an N x N grid, fused and unfused side by side.",
        512,
        5,
    )
    .range("n", 5, 1 << 14)
    .help("n", "grid points in x and in y")
    .help("iters", "timed time steps (after the warm-up steps)")
    .extra(
        "nit",
        "K",
        "pressure iterations per time step",
        Kind::Count {
            min: 1,
            max: 10_000,
        },
        "50",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// The fields' values after the run, and the last `udiff`.
struct State {
    fields: Vec<Vec<f64>>,
    udiff: f64,
}

fn run(args: &Args) -> Result<(), AppError> {
    let nit = args.extra_u64("nit").ok_or("bad --nit")? as usize;
    let prm = Params::new(args.n, nit);
    let dir = out_dir(args)?;
    let mut first = true;
    let runs = side_by_side::fused_and_unfused(args, |np| {
        let flow = cfd::initial_flow(np, &prm, args.seed)?;
        if let (Some(dir), true) = (&dir, first) {
            save(dir, "u0.npy", &flow.u)?;
            save(dir, "v0.npy", &flow.v)?;
        }
        np.runtime(|rt| rt.synchronize())?;
        // The warm-up steps run on a copy, so the flow sees exactly `--iters` steps.
        let copy = Flow {
            u: flow.u.copy(),
            v: flow.v.copy(),
            p: flow.p.copy(),
        };
        warm_up(np, args.warmup, || cfd::step(&prm, &copy))?;
        drop(copy);
        let (timing, per_iter, udiff) = bench(np, 0, args.iters, || cfd::step(&prm, &flow))?;
        let udiff = udiff.ok_or("no time step ran")?;
        if let (Some(dir), true) = (&dir, first) {
            for (name, a) in [("u", &flow.u), ("v", &flow.v), ("p", &flow.p)] {
                save(dir, &format!("{name}.npy"), a)?;
            }
            save(dir, "udiff.npy", &udiff)?;
        }
        first = false;
        let fields = vec![flow.u.to_vec()?, flow.v.to_vec()?, flow.p.to_vec()?];
        let udiff = udiff.item()?;
        Ok((timing, per_iter, State { fields, udiff }))
    })?;

    let mut report = Report::new(NAME, args);
    let speedup = side_by_side::report(&mut report, &runs, |a, b| {
        max_abs_diff(&a.fields, &b.fields)
    });
    let (main, n) = (&runs[0], args.n);
    report
        .set("nit", nit as u64)
        .set("dt", prm.dt)
        .set("udiff", main.state.udiff)
        .set("grid_points", n * n);
    let seconds = main.timing.median;
    let versus = speedup.map_or(String::new(), |s| format!(", {s:.2}x the unfused run"));
    args.say(&format!(
        "{NAME}: {n}x{n} grid, nit={nit}, {:.3} ms per step (median of {}){versus}, udiff {:.3e}",
        seconds * 1e3,
        args.iters,
        main.state.udiff,
    ))?;
    report.print()?;
    Ok(())
}
