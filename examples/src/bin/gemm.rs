//! A distributed dense product `C = A @ B` of `n x k` by `k x n` `f64` matrices (`k = n`
//! unless `--k` says), on one process or on the ranks of `mpirun`: each product is laid over
//! the grid that `WEFT_MATMUL_GRID` asks for, or, by default, the grid of the ranks whose
//! points read the fewest elements within a rank's memory, a 2-D grid or one of layers that
//! splits `k` (`weft_runtime::products`; on one process, the plugin's rows over the threads).
//!
//! `A` and `B` are uniform in `[-1, 1)` from `--seed`, made by tasks (so that on several
//! ranks each rank holds its rows of them). `--iters` products after `--warmup`; the result
//! line reports the median seconds of one, its rate (`2 n^2 k` over the time), what rank 0
//! sent per product (`bytes_sent_per_iter`), the grid (`RxC`, `RxCxL` with layers, or
//! `cannon QxQ` for Cannon's algorithm, `WEFT_MATMUL_GRID=cannon`), and
//! the elements one point reads (`panel_elements`: `2 n^2 / sqrt(P)` on a square grid of `P`
//! ranks, with layers also the other layers' partial sums) and the sum of `C`'s elements
//! (`c_sum`). `--out DIR` writes `A.npy`, `B.npy` and `C.npy`.
//!
//! ```sh
//! cargo run --release -p weft-examples --bin gemm -- --n 4096 --iters 3 --threads 2
//! mpirun -n 2 target/release/gemm --n 4096 --iters 3 --threads 1    # built with --features mpi
//! mpirun -n 4 target/release/gemm --n 512 --k 4096 --threads 1      # a 1x1x4 grid of layers
//! WEFT_MATMUL_GRID=cannon mpirun -n 4 target/release/gemm --n 4096 --threads 1   # Cannon, 2x2
//! ```

use std::process::ExitCode;

use weft_examples::{AppError, Args, Cli, Report, bench, load_numeric, out_dir, run_main, save};
use weft_ir::DType;

const NAME: &str = "gemm";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "A dense product C = A @ B of N x N f64 matrices, over a grid of ranks.",
        1024,
        3,
    )
    .range("n", 1, 1 << 15)
    .help(
        "n",
        "the matrices are N x N (A is N x K and B K x N with --k)",
    )
    .help("iters", "timed products (after the warm-up ones)")
    .inner_dimension("the inner dimension (0: N)", 1 << 20);
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let np = load_numeric(args)?;
    let n = args.n;
    let k = args.inner_dimension()?;
    let seeds = weft_examples::sub_seed;
    let a = np.random_uniform(&[n, k], -1.0, 1.0, seeds(args.seed, 0), DType::F64);
    let b = np.random_uniform(&[k, n], -1.0, 1.0, seeds(args.seed, 1), DType::F64);
    a.check()?;
    b.check()?;
    np.runtime(|rt| rt.synchronize())?;
    let (timing, per_iter, c) = bench(&np, args.warmup, args.iters, || {
        let product = a.matmul(&b);
        product.check()?;
        Ok(product)
    })?;
    let c = c.ok_or("no product ran (--iters 0)")?;
    let c_sum = c.sum().item()?;
    if let Some(dir) = out_dir(args)? {
        save(&dir, "A.npy", &a)?;
        save(&dir, "B.npy", &b)?;
        save(&dir, "C.npy", &c)?;
    }
    let ranks = args.rank_count() as u64;
    let (setting, memory) = np.runtime(|rt| (rt.config().matmul_grid, rt.config().rank_memory));
    let budget = weft_runtime::products::Budget {
        rank_bytes: memory
            .unwrap_or_else(|| weft_runtime::products::machine_memory_per_rank(ranks)),
        ..weft_runtime::products::Budget::unbounded()
    };
    let grid = weft_runtime::products::choose((n, n, k), ranks, setting, budget).map_or(
        weft_runtime::products::Grid::flat(ranks.min(n), 1),
        |(g, _)| g,
    );
    let cannon = weft_runtime::products::cannon_side((n, n, k), ranks, setting);
    // Cannon's steps read, in all, the panels of its 2-D grid.
    let grid = cannon.map_or(grid, |q| weft_runtime::products::Grid::flat(q, q));
    let panels = grid.panel_elements(n, n, k).unwrap_or(0);
    let grid_text = match cannon {
        Some(q) => format!("cannon {q}x{q}"),
        None if grid.layers > 1 => format!("{}x{}x{}", grid.rows, grid.cols, grid.layers),
        None => format!("{}x{}", grid.rows, grid.cols),
    };
    let gflops = 2.0 * (n as f64).powi(2) * k as f64 / timing.median / 1e9;
    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("gflops", gflops)
        .set("c_sum", c_sum)
        .set("k", k)
        .set("grid", grid_text.clone())
        .set("matmul_grid", format!("{setting:?}"))
        .set("panel_elements", panels)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: n={n} k={k} on {ranks} rank(s), {grid_text} grid: {:.3} s per product \
         (median of {}), {gflops:.1} GFLOP/s",
        timing.median, args.iters
    ))?;
    report.print()?;
    Ok(())
}
