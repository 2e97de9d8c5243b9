//! Logistic regression by gradient descent in matrix form, `w -= lr * X.T @ (sigmoid(X @ w)
//! - y) / n`, on `--n` samples of `--d` features (see [`weft_examples::logreg`]).
//!
//! Each iteration is one gradient step; `--warmup` steps run first, untimed, so `w` is the
//! result of `warmup + iters` steps from zeros. The same steps run as a plain-Rust rayon loop
//! over the same data with `--threads` threads, in the same process, one rayon step after
//! each Weft step (so both see the machine alike), timed the same way; the result line
//! reports both and the largest difference of the weights. `--out DIR` writes
//! `X.npy y.npy w.npy` (`examples/numpy/logreg.py` runs the NumPy original on them).

use std::process::ExitCode;
use std::time::Instant;

use weft_examples::logreg;
use weft_examples::timing::median;
use weft_examples::{
    AppError, Args, Cli, Kind, Report, bench_then, load_numeric, out_dir, run_main, save,
};

const NAME: &str = "logreg";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Logistic regression by gradient descent in matrix form, X.T @ (sigmoid(X @ w) - y), \
         on the numeric plugin, timed side by side with a plain-Rust rayon loop.",
        1_000_000,
        10,
    )
    .range("n", 1, 1 << 28)
    .help("n", "samples")
    .help("iters", "timed gradient steps")
    .extra(
        "d",
        "D",
        "features per sample",
        Kind::Count { min: 1, max: 64 },
        "8",
    )
    .extra(
        "lr",
        "LR",
        "the learning rate",
        Kind::Float { min: 0.0 },
        "1.0",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let d = args.extra_u64("d").ok_or("bad --d")?;
    let lr = args.extra_f64("lr").ok_or("bad --lr")?;
    let n = args.n;
    let np = load_numeric(args)?;
    let problem = logreg::problem(&np, n, d, args.seed);
    problem.x.check()?;
    problem.y.check()?;
    np.runtime(|rt| rt.synchronize())?;

    // The same steps as a rayon loop over the same data, on a copy of the arrays, each step
    // timed right after a Weft step (in alternation, so both see the machine alike).
    let x = problem.x.to_vec()?;
    let y = problem.y.to_vec()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    let mut w_ref = vec![0.0; d as usize];
    let mut samples = Vec::with_capacity(args.iters);

    let mut w = np.zeros(&[d], weft_ir::DType::F64);
    let (timing, per_iter, _) = bench_then(
        &np,
        args.warmup,
        args.iters,
        || {
            w = logreg::step(&problem, &w, lr, n);
            w.check()?;
            Ok(())
        },
        |timed| {
            let start = Instant::now();
            logreg::reference_steps(&x, &y, d as usize, &mut w_ref, lr, 1, &pool);
            if timed {
                samples.push(start.elapsed().as_secs_f64());
            }
            Ok(())
        },
    )?;
    let w_weft = w.to_vec()?;
    let rayon_median = median(&samples);
    let max_diff = w_weft
        .iter()
        .zip(&w_ref)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);

    if let Some(dir) = out_dir(args)? {
        save(&dir, "X.npy", &problem.x)?;
        save(&dir, "y.npy", &problem.y)?;
        save(&dir, "w.npy", &w)?;
    }

    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("d", d)
        .set("lr", lr)
        .set("steps", (args.warmup + args.iters) as u64)
        .set("rayon_seconds_per_iter", rayon_median)
        .set("speedup_vs_rayon", rayon_median / timing.median)
        .set("max_weight_diff_vs_rayon", max_diff)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: n={n} d={d}, {:.3} ms per step (median of {}), rayon loop {:.3} ms \
         ({:.2}x), weights differ by at most {max_diff:.2e}",
        timing.median * 1e3,
        args.iters,
        rayon_median * 1e3,
        rayon_median / timing.median,
    ))?;
    report.print()?;
    Ok(())
}
