//! A dense least-squares fit through the normal equations, the application that needs dense
//! products at scale: `x` minimizing `|A x - b|` for a tall `M x N` `A` (`--n` rows, `--cols`
//! columns) and `b` of `M`, from `G = A.T @ A` (a product over a grid of ranks, see
//! `weft_runtime::products`), `c = A.T @ b`, and `G x = c` solved by `Array::solve` (blocked
//! elimination, whose updates are products too).
//!
//! `A` is uniform in `[-1, 1)` (a tall random matrix is well conditioned: `G`'s condition
//! number is about `((1 + sqrt(N / M)) / (1 - sqrt(N / M)))^2`); `b` is `A @ x_true + noise`
//! for `x_true` uniform in `[-1, 1)` and noise of `1e-3`. The result line reports the
//! median seconds of one fit (`--iters` after `--warmup`), the relative residual of the normal
//! equations `|A.T (A x - b)| / |A.T b|`, the relative error against `x_true`, and what rank 0
//! sent per fit. `--out DIR` writes `A.npy`, `b.npy` and `x.npy`.
//!
//! ```sh
//! cargo run --release -p weft-examples --bin lstsq -- --n 20000 --cols 500 --threads 2
//! mpirun -n 4 target/release/lstsq --n 20000 --cols 500 --threads 1   # built with --features mpi
//! ```

use std::process::ExitCode;

use weft::{Array, Numeric};
use weft_examples::{
    AppError, Args, Cli, Kind, Report, bench, load_numeric, out_dir, run_main, save, sub_seed,
};
use weft_ir::DType;

const NAME: &str = "lstsq";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "A dense least-squares fit through the normal equations: G = A.T @ A, then G's \
         solve.",
        20_000,
        3,
    )
    .range("n", 2, 1 << 24)
    .help("n", "rows of A (observations)")
    .help("iters", "timed fits (after the warm-up ones)")
    .extra(
        "cols",
        "N",
        "columns of A (unknowns)",
        Kind::Count { min: 1, max: 8192 },
        "500",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// The tall system: `A`, `b` and the coefficients that made `b`.
fn system(np: &Numeric, m: u64, n: u64, seed: u64) -> (Array, Array, Array) {
    let a = np.random_uniform(&[m, n], -1.0, 1.0, sub_seed(seed, 0), DType::F64);
    let x_true = np.random_uniform(&[n], -1.0, 1.0, sub_seed(seed, 1), DType::F64);
    let noise = np.random_uniform(&[m], -1e-3, 1e-3, sub_seed(seed, 2), DType::F64);
    let b = a.matvec(&x_true) + &noise;
    (a, b, x_true)
}

/// The least-squares `x` for `A` and `b`, through the normal equations.
fn fit(a: &Array, b: &Array) -> weft::Result<Array> {
    let at = a.t();
    let g = at.matmul(a);
    let c = at.matvec(b);
    g.solve(&c)
}

fn run(args: &Args) -> Result<(), AppError> {
    let np = load_numeric(args)?;
    let (m, n) = (args.n, args.extra_u64("cols").ok_or("bad --cols")?);
    if n > m {
        return Err(format!("--cols {n} is more than the {m} rows: not a tall system").into());
    }
    let (a, b, x_true) = system(&np, m, n, args.seed);
    for v in [&a, &b, &x_true] {
        v.check()?;
    }
    np.runtime(|rt| rt.synchronize())?;
    let mut x = None;
    let (timing, per_iter, _) = bench(&np, args.warmup, args.iters, || {
        let got = fit(&a, &b)?;
        got.check()?;
        x = Some(got);
        Ok(())
    })?;
    let x = x.ok_or("no fit ran (--iters 0)")?;
    let at = a.t();
    let residual = (at.matvec(&(a.matvec(&x) - &b)).norm() / at.matvec(&b).norm()).item()?;
    let error = ((&x - &x_true).norm() / x_true.norm()).item()?;
    if let Some(dir) = out_dir(args)? {
        save(&dir, "A.npy", &a)?;
        save(&dir, "b.npy", &b)?;
        save(&dir, "x.npy", &x)?;
    }
    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("cols", n)
        .set("normal_residual", residual)
        .set("relative_error", error)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: {m} x {n} on {} rank(s): {:.3} s per fit (median of {}), normal-equations \
         residual {residual:.2e}, error against the true coefficients {error:.2e}",
        args.rank_count(),
        timing.median,
        args.iters
    ))?;
    report.print()?;
    Ok(())
}
