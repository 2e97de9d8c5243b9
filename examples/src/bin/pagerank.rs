//! PageRank by power iteration on a random graph of `--n` nodes with `--degree` out-edges
//! each (see [`weft_examples::pagerank`]), against SciPy in the same run.
//!
//! The matrix is built once by `from_coo`; `--warmup` untimed and `--iters` timed power steps
//! follow, each reading its L1 change as a convergence test would. With `--out DIR` the
//! triplets go to `DIR/{row,col,val}.npy` and the ranks to `DIR/rank.npy`, and
//! `examples/numpy/pagerank.py` runs the SciPy program on them in the same run: the report
//! has SciPy's median step (`scipy_seconds_per_iter`, `speedup_vs_scipy`) and whether the
//! ranks have SciPy's bits (`ranks_equal_scipy`); where SciPy is missing, those are `null`
//! and `scipy_unavailable` says why. `--out` is a temporary directory when not given.

use std::process::ExitCode;

use weft_examples::pagerank;
use weft_examples::solve_app::load_sparse;
use weft_examples::{
    AppError, Args, Cli, Kind, Report, bench_then, load_numeric, numpy_peer, out_dir_or_temp,
    run_main,
};

const NAME: &str = "pagerank";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "PageRank by power iteration on a random graph, against SciPy in the same run.",
        200_000,
        20,
    )
    .range("n", 2, 1 << 26)
    .help("n", "nodes of the graph")
    .help("iters", "timed power steps")
    .default_value("warmup", "3")
    .extra(
        "degree",
        "D",
        "out-edges per node",
        Kind::Count { min: 1, max: 1024 },
        "10",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let n = args.n;
    let degree = args.extra_u64("degree").ok_or("bad --degree")?;
    let np = load_numeric(args)?;
    let sp = load_sparse(&np)?;
    let triplets = pagerank::graph(n, degree, args.seed);
    let m = pagerank::matrix(&np, &sp, n, &triplets)?;
    let mut r = pagerank::start(&np, n);
    let mut change = f64::NAN;
    let (timing, per_iter, _) = bench_then(
        &np,
        args.warmup,
        args.iters,
        || {
            let (next, delta) = pagerank::step(&m, &r, n);
            change = delta.item()?;
            r = next;
            Ok(())
        },
        |_| Ok(()),
    )?;
    let ranks = r.to_vec()?;
    let total: f64 = ranks.iter().sum();

    let (dir, temporary) = out_dir_or_temp(args, NAME)?;
    let nnz = triplets.0.len() as u64;
    let write = |name: &str, data: weft::npy::NpyData, len: u64| {
        weft::npy::write(dir.join(name), &[len], data)
    };
    write("row.npy", weft::npy::NpyData::I64(triplets.0.clone()), nnz)?;
    write("col.npy", weft::npy::NpyData::I64(triplets.1.clone()), nnz)?;
    write("val.npy", weft::npy::NpyData::F64(triplets.2.clone()), nnz)?;
    write("rank.npy", weft::npy::NpyData::F64(ranks.clone()), n)?;
    let peer = numpy_peer::run_program(
        "pagerank.py",
        &[
            dir.display().to_string(),
            n.to_string(),
            args.iters.max(1).to_string(),
            args.warmup.to_string(),
        ],
    )
    .and_then(|(step, _build)| {
        let theirs = weft::npy::read(dir.join("rank_scipy.npy"))
            .map_err(|e| e.to_string())?
            .data
            .to_f64();
        let equal = theirs.len() == ranks.len()
            && theirs
                .iter()
                .zip(&ranks)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        Ok((step, equal))
    });
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }

    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("nodes", n)
        .set("edges", nnz)
        .set("steps", (args.warmup + args.iters) as u64)
        .set("last_change", change)
        .set("rank_sum", total);
    let versus = match &peer {
        Ok((step, equal)) => {
            report
                .set("scipy_seconds_per_iter", *step)
                .set("speedup_vs_scipy", step / timing.median)
                .set("ranks_equal_scipy", *equal);
            format!(
                "SciPy {:.3} ms ({:.2}x); ranks equal SciPy's bits: {equal}",
                step * 1e3,
                step / timing.median
            )
        }
        Err(why) => {
            for key in [
                "scipy_seconds_per_iter",
                "speedup_vs_scipy",
                "ranks_equal_scipy",
            ] {
                report.set(key, serde_json::Value::Null);
            }
            report.set("scipy_unavailable", why.as_str());
            format!("SciPy unavailable: {why}")
        }
    };
    report.runtime_stats(&np);
    args.say(&format!(
        "{NAME}: {n} nodes, {nnz} edges: {:.3} ms per step (median of {}); {versus}; last \
         change {change:.3e}",
        timing.median * 1e3,
        args.iters,
    ))?;
    report.print()?;
    Ok(())
}
