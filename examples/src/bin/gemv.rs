//! A distributed product of a matrix by a vector, `y = A @ x`, of an `n x k` `f64` matrix
//! stored by rows (`k = n` unless `--k` says), on one process or on the ranks of `mpirun`.
//! Rows longer than 8,192 terms are summed by parts (`weft_ir::matvec`), which a grid of
//! layers may split along `k` with the same bits: `WEFT_MATMUL_GRID=RxCxL` launches it over
//! `R` row tiles and `L` layers (`C` is cut to `y`'s one column; `weft_runtime::matvec_grid`).
//! By default each rank takes its rows of `A` and the whole of `x`.
//!
//! `A` and `x` are uniform in `[-1, 1)` from `--seed`, made by tasks (so that on several
//! ranks each rank holds its rows of `A`). `--iters` products after `--warmup`; the result
//! line reports the median seconds of one, the rate at which it read `A`
//! (`8 n k` bytes over the time), what rank 0 sent per product (`bytes_sent_per_iter`),
//! the grid (`Rx1` for rows alone, `Rx1xL` with layers) and the sum of `y`'s elements
//! (`y_sum`). `--out DIR` writes `A.npy`, `x.npy` and `y.npy`.
//!
//! ```sh
//! cargo run --release -p weft-examples --bin gemv -- --n 4096 --k 65536 --threads 2
//! WEFT_MATMUL_GRID=2x1x2 mpirun -n 4 target/release/gemv --n 512 --k 100000 --threads 1
//! ```

use std::process::ExitCode;

use weft_examples::{AppError, Args, Cli, Report, bench, load_numeric, out_dir, run_main, save};
use weft_ir::DType;
use weft_runtime::products::ProductGrid;

const NAME: &str = "gemv";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "A product y = A @ x of an N x K f64 matrix by a vector, over a grid of ranks.",
        2048,
        5,
    )
    .range("n", 1, 1 << 24)
    .help("n", "A has N rows")
    .help("iters", "timed products (after the warm-up ones)")
    .inner_dimension("the terms of each row (0: N)", 1 << 30);
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let np = load_numeric(args)?;
    let n = args.n;
    let k = args.inner_dimension()?;
    let seeds = weft_examples::sub_seed;
    let a = np.random_uniform(&[n, k], -1.0, 1.0, seeds(args.seed, 0), DType::F64);
    let x = np.random_uniform(&[k], -1.0, 1.0, seeds(args.seed, 1), DType::F64);
    a.check()?;
    x.check()?;
    np.runtime(|rt| rt.synchronize())?;
    let (timing, per_iter, y) = bench(&np, args.warmup, args.iters, || {
        let product = a.matvec(&x);
        product.check()?;
        Ok(product)
    })?;
    let y = y.ok_or("no product ran (--iters 0)")?;
    let y_sum = y.sum().item()?;
    if let Some(dir) = out_dir(args)? {
        save(&dir, "A.npy", &a)?;
        save(&dir, "x.npy", &x)?;
        save(&dir, "y.npy", &y)?;
    }
    let ranks = args.rank_count() as u64;
    let setting = np.runtime(|rt| rt.config().matmul_grid);
    // What `numeric` and `weft_runtime::matvec_grid` do with this shape and setting.
    let by_parts = k > weft_ir::matvec::PARTS_FROM && (n >= 64 || n >= k);
    let grid = match setting {
        ProductGrid::Fixed { rows, layers, .. } if by_parts => {
            match weft_runtime::matvec_grid::layers_for(k, layers) {
                1 => format!("{}x1", ranks.min(n)),
                l => format!("{}x1x{l}", rows.clamp(1, n)),
            }
        }
        _ => format!("{}x1", ranks.min(n)),
    };
    let gbps = 8.0 * n as f64 * k as f64 / timing.median / 1e9;
    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("a_read_gb_per_s", gbps)
        .set("y_sum", y_sum)
        .set("k", k)
        .set("by_parts", by_parts)
        .set("grid", grid.clone())
        .set("matmul_grid", format!("{setting:?}"))
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: n={n} k={k} on {ranks} rank(s), {grid} grid: {:.4} s per product (median of \
         {}), A read at {gbps:.1} GB/s",
        timing.median, args.iters
    ))?;
    report.print()?;
    Ok(())
}
