//! The 5-point stencil side by side in one process: Weft with fusion and without, and the
//! hand-written plain-Rust sweep (double-buffered, one pass per sweep, on a rayon pool at the
//! same thread count), on grids from the same seed. Each timed iteration is `--sweeps` sweeps
//! followed by a flush.
//!
//! Prints one JSON line with the median seconds per sweep of each, their ratios, and the
//! memory-bandwidth floor: compulsory bytes per sweep are the `(N+2)^2` grid read once and
//! the `N^2` interior written once, timed against the median read bandwidth of the probe
//! ([`weft_examples::bandwidth::Probe`]), sampled in this process after each timed iteration
//! of each variant.

use std::process::ExitCode;

use weft::{Numeric, Runtime};
use weft_examples::bandwidth::{PROBE_BYTES, Probe};
use weft_examples::hand_written;
use weft_examples::stencil::{Stencil, initial_grid};
use weft_examples::timing::time_iterations_then;
use weft_examples::{AppError, Args, Cli, Kind, Report, bench_then, run_main};

const NAME: &str = "bench_stencil";

fn numeric(args: &Args, fusion: bool) -> weft::Result<Numeric> {
    let config = weft::Config {
        fusion,
        ..args.config()
    };
    Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)
}

fn run(args: &Args) -> Result<(), AppError> {
    let sweeps = args.extra_u64("sweeps").unwrap_or(10) as usize;
    let mut per_sweep = Vec::new();
    let mut grids = Vec::new();
    let mut tasks = Vec::new();
    let mut fused_np = None;
    let mut initial = Vec::new();
    // The bandwidth probe (the device's) samples after each timed iteration of every variant.
    let mut probe: Option<Probe> = None;
    for fusion in [true, false] {
        let np = numeric(args, fusion)?;
        if probe.is_none() {
            probe = Some(Probe::for_device(&np, args.threads, PROBE_BYTES)?);
        }
        let grid = initial_grid(&np, args.n, args.seed)?;
        initial = grid.to_vec()?;
        let stencil = Stencil::new(&grid);
        np.runtime(|rt| rt.synchronize())?;
        let (t, per, _) = bench_then(
            &np,
            args.warmup,
            args.iters,
            || {
                for _ in 0..sweeps {
                    stencil.step()?;
                }
                Ok(())
            },
            |timed| {
                if timed && let Some(p) = probe.as_mut() {
                    p.sample();
                }
                Ok(())
            },
        )?;
        per_sweep.push(t.median / sweeps as f64);
        tasks.push(per.tasks_executed / sweeps as f64);
        grids.push(grid.to_vec()?);
        if fusion {
            fused_np = Some(np);
        }
    }
    let np = fused_np.ok_or("no fused run")?;
    let mut probe = probe.ok_or("no probe")?;
    let same = grids[0] == grids[1];
    let (fused, unfused) = (per_sweep[0], per_sweep[1]);

    // The hand-written sweep, from the same grid, for as many sweeps.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    let mut rust_grid = initial;
    let n = args.n as usize;
    let rust = time_iterations_then(
        args.warmup,
        args.iters,
        || {
            pool.install(|| hand_written::stencil(&mut rust_grid, n, sweeps));
            Ok::<(), AppError>(())
        },
        |timed| {
            if timed {
                probe.sample();
            }
            Ok(())
        },
    )?;
    let rust = rust.median / sweeps as f64;
    let rust_same = rust_grid == grids[0];
    let gbs = probe.gbs();
    let bytes = 8.0 * ((args.n + 2) * (args.n + 2) + args.n * args.n) as f64;
    let mut report = Report::new(NAME, args);
    report
        .set("sweeps_per_iter", sweeps as u64)
        .set("seconds_per_iter", fused * sweeps as f64)
        .set("fused_seconds_per_sweep", fused)
        .set("unfused_seconds_per_sweep", unfused)
        .set("speedup_fused_vs_unfused", unfused / fused)
        .set("fused_tasks_per_sweep", tasks[0])
        .set("unfused_tasks_per_sweep", tasks[1])
        .set("fused_equals_unfused", same)
        .set("rust_seconds_per_sweep", rust)
        .set("speedup_fused_vs_rust", rust / fused)
        .set("fused_equals_rust", rust_same)
        .floor("", fused, bytes, gbs)
        .probe(&probe)
        .set(
            "rust_floor_ratio",
            rust / weft_examples::bandwidth::floor_seconds(bytes, gbs),
        )
        .runtime_stats(&np);
    let floor = weft_examples::bandwidth::floor_seconds(bytes, gbs);
    args.say(&format!(
        "{NAME}: {}x{} grid: fused {:.2} ms per sweep, unfused {:.2} ms ({:.2}x), hand-written \
         Rust {:.2} ms ({:.2}x); floor {:.2} ms at {gbs:.1} GB/s (fused {:.2}x, Rust {:.2}x); \
         results {}",
        args.n + 2,
        args.n + 2,
        fused * 1e3,
        unfused * 1e3,
        unfused / fused,
        rust * 1e3,
        rust / fused,
        floor * 1e3,
        fused / floor,
        rust / floor,
        if same && rust_same {
            "identical"
        } else {
            "DIFFER"
        }
    ))?;
    report.print()?;
    if !same {
        return Err("fused and unfused grids differ".into());
    }
    if !rust_same {
        return Err("Weft's grid and the hand-written loop's differ".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "The 5-point stencil fused and unfused, side by side.",
        2000,
        5,
    )
    .range("n", 1, 1 << 15)
    .extra(
        "sweeps",
        "K",
        "sweeps per timed iteration",
        Kind::Count {
            min: 1,
            max: 10_000,
        },
        "10",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}
