//! CG and BiCGSTAB on the `--grid` x `--grid` Poisson problem (default 2000 x 2000, 4M
//! unknowns) side by side in one process: Weft with fusion, Weft without, and the plain-Rust
//! CSR solvers of `weft_examples::sparse_reference` (one rayon pass per vector operation, as a
//! library without fusion makes, at the same thread count).
//!
//! Each Weft solve runs `--warmup` + `--iters` iterations (the tolerance is 0, so none stops
//! early); `--rounds` rounds each run the fused and the unfused solve, one after the other, and
//! the result is the median over all their timed iterations. The plain-Rust solves run the same
//! number of iterations once per round; the result is the median of their mean seconds per
//! iteration. The hand-written plain-Rust solvers of `weft_examples::hand_written` (vector
//! updates and dot products sharing passes with the CSR products, 32-bit indices) are timed
//! per iteration like the Weft solves.
//!
//! Prints one JSON line, with each solver's memory-bandwidth floor: compulsory bytes per
//! iteration are, for CG, the matrix once as stored (row ranges, 32-bit columns, values) plus
//! x, r and p each read once and written once; for BiCGSTAB, the matrix twice plus ten vector
//! passes; timed against the median read bandwidth of the probe
//! ([`weft_examples::bandwidth::Probe`]), sampled in this process before each solver and after
//! each of its solves (`{solver}_read_gbs`; `read_gbs` is the median of both solvers'
//! samples).

use std::process::ExitCode;
use std::time::Instant;

use weft_examples::bandwidth::{PROBE_BYTES, Probe, floor_seconds};
use weft_examples::hand_written::{self, Csr32};
use weft_examples::krylov;
use weft_examples::solve_app::load_sparse;
use weft_examples::sparse_reference::{self as reference, Csr};
use weft_examples::timing::median;
use weft_examples::{AppError, Args, Cli, Kind, Report, load_numeric, run_main};
use weft_ir::DType;

const NAME: &str = "bench_krylov";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "CG and BiCGSTAB on the Poisson problem: fused, unfused, and plain-Rust CSR solvers with \
         one pass per vector operation.",
        0,
        20,
    )
    .help("n", "unused (the problem is --grid)")
    .help("iters", "timed iterations of each solver")
    .help("warmup", "untimed iterations before the timed ones")
    .default_value("warmup", "3")
    .extra(
        "grid",
        "G",
        "the Poisson problem on a G x G grid",
        Kind::Count {
            min: 2,
            max: 1 << 15,
        },
        "2000",
    )
    .extra(
        "rounds",
        "R",
        "rounds, each running every variant once, fused and unfused alternating",
        Kind::Count { min: 1, max: 100 },
        "3",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let g = args.extra_u64("grid").ok_or("--grid needs a number")?;
    let total = args.warmup + args.iters;
    let np = load_numeric(args)?;
    let sp = load_sparse(&np)?;
    // 32-bit column indices, as SciPy uses for matrices of fewer than 2^31 entries (and as the
    // Diffuse paper configured Legate Sparse to compare with PETSc).
    let a = sp.poisson2d(g, DType::F64, DType::I32)?;
    let b = np.random_uniform(
        &[g * g],
        0.0,
        1.0,
        weft_examples::sub_seed(args.seed, 0),
        DType::F64,
    );
    b.check()?;
    np.runtime(|rt| rt.synchronize())?;

    let mut report = Report::new(NAME, args);
    let mut lines = Vec::new();
    let rust_a = Csr::poisson2d(g as usize);
    let rust_b = b.to_vec()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    let rounds = args.extra_u64("rounds").unwrap_or(3) as usize;
    let fast_a = Csr32::new(&rust_a).ok_or("the matrix's indices do not fit 32 bits")?;
    let mut probe = Probe::for_device(&np, args.threads, PROBE_BYTES)?;
    let mut all_rates = Vec::new();
    let n = (g * g) as f64;
    let nnz = a.nnz()? as f64;
    // The matrix as stored: pos as (rows, 2) i32, crd i32, vals f64.
    let matrix_bytes = 8.0 * n + 4.0 * nnz + 8.0 * nnz;
    for solver in ["cg", "bicgstab"] {
        // Per mode (fused, unfused): every timed iteration of every round, and tasks run.
        let mut samples = [Vec::new(), Vec::new()];
        let mut tasks = [0.0; 2];
        let mut histories = [Vec::new(), Vec::new()];
        // This solver's probe samples: one now, one after each solve.
        let first = probe.rates().len();
        probe.sample();
        for _ in 0..rounds {
            for (m, fusion) in [true, false].into_iter().enumerate() {
                np.runtime(|rt| rt.set_fusion(fusion))?;
                let before = np.runtime(|rt| rt.stats()).exec.tasks_executed;
                let solve = match solver {
                    "cg" => krylov::cg(&a, &b, 0.0, total)?,
                    _ => krylov::bicgstab(&a, &b, 0.0, total)?,
                };
                let ran = np.runtime(|rt| rt.stats()).exec.tasks_executed - before;
                samples[m].extend_from_slice(solve.seconds.get(args.warmup..).unwrap_or_default());
                tasks[m] = ran as f64 / solve.iterations().max(1) as f64;
                histories[m] = solve.residuals;
                probe.sample();
            }
        }
        let per_iter = [median(&samples[0]), median(&samples[1])];
        let agree = histories[0]
            .iter()
            .zip(&histories[1])
            .map(|(f, u)| (f - u).abs() / u.abs().max(f64::MIN_POSITIVE))
            .fold(0.0f64, f64::max);
        let mut rust = Vec::new();
        for _ in 0..rounds {
            let start = Instant::now();
            let solve = pool.install(|| match solver {
                "cg" => reference::cg(&rust_a, &rust_b, 0.0, total),
                _ => reference::bicgstab(&rust_a, &rust_b, 0.0, total),
            });
            rust.push(start.elapsed().as_secs_f64() / solve.iterations.max(1) as f64);
            probe.sample();
        }
        let rust = median(&rust);
        // Like the Weft solves: the median over every round's timed iterations.
        let mut hand = Vec::new();
        let mut hand_residuals = Vec::new();
        for _ in 0..rounds {
            let h = pool.install(|| match solver {
                "cg" => hand_written::cg(&fast_a, &rust_b, total),
                _ => hand_written::bicgstab(&fast_a, &rust_b, total),
            });
            hand.extend_from_slice(h.seconds.get(args.warmup..).unwrap_or_default());
            hand_residuals = h.residuals;
            probe.sample();
        }
        let hand = median(&hand);
        let hand_agree = histories[0]
            .iter()
            .zip(&hand_residuals)
            .map(|(f, h)| (f - h).abs() / h.abs().max(f64::MIN_POSITIVE))
            .fold(0.0f64, f64::max);
        let bytes = match solver {
            "cg" => matrix_bytes + 6.0 * 8.0 * n,
            _ => 2.0 * matrix_bytes + 10.0 * 8.0 * n,
        };
        let rates = &probe.rates()[first..];
        all_rates.extend_from_slice(rates);
        let gbs = median(rates);
        let floor = floor_seconds(bytes, gbs);
        let (fused, unfused) = (per_iter[0], per_iter[1]);
        report
            .set(&format!("{solver}_fused_seconds_per_iter"), fused)
            .set(&format!("{solver}_unfused_seconds_per_iter"), unfused)
            .set(&format!("{solver}_rust_seconds_per_iter"), rust)
            .set(
                &format!("{solver}_speedup_fused_vs_unfused"),
                unfused / fused,
            )
            .set(&format!("{solver}_speedup_fused_vs_rust"), rust / fused)
            .set(&format!("{solver}_fused_tasks_per_iter"), tasks[0])
            .set(&format!("{solver}_unfused_tasks_per_iter"), tasks[1])
            .set(&format!("{solver}_max_rel_diff_residuals"), agree)
            .set(&format!("{solver}_hand_written_seconds_per_iter"), hand)
            .set(
                &format!("{solver}_speedup_fused_vs_hand_written"),
                hand / fused,
            )
            .set(
                &format!("{solver}_max_rel_diff_residuals_hand_written"),
                hand_agree,
            )
            .floor(&format!("{solver}_"), fused, bytes, gbs)
            .set(&format!("{solver}_read_gbs"), gbs)
            .set(&format!("{solver}_hand_written_floor_ratio"), hand / floor);
        lines.push(format!(
            "{solver} (read bandwidth {gbs:.1} GB/s): fused {:.2} ms, unfused {:.2} ms ({:.2}x), rust {:.2} ms ({:.2}x), \
             hand-written {:.2} ms ({:.2}x) per iteration; floor {:.2} ms (fused {:.2}x, \
             hand-written {:.2}x)",
            fused * 1e3,
            unfused * 1e3,
            unfused / fused,
            rust * 1e3,
            rust / fused,
            hand * 1e3,
            hand / fused,
            floor * 1e3,
            fused / floor,
            hand / floor
        ));
        if solver == "cg" {
            report.set("seconds_per_iter", fused);
        }
    }
    report
        .set("read_gbs", median(&all_rates))
        .probe(&probe)
        .set("grid", g)
        .set("unknowns", g * g)
        .set("nnz", a.nnz()?)
        .runtime_stats(&np);
    args.say(&format!("{NAME}: {g}x{g} grid: {}", lines.join("; ")))?;
    report.print()?;
    Ok(())
}
