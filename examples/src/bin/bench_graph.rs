//! Setting up and multiplying by a random graph's matrix, PageRank's workload, against SciPy in
//! the same run.
//!
//! The graph has `--n` nodes (default 200,000), each with `--degree` (default 10) out-edges to
//! nodes drawn at random (`weft_examples::pagerank::graph`, from `--seed`); the matrix is
//! PageRank's transition matrix
//! `M[dst, src] = 1 / degree`, as COO triplets in edge order (rows unsorted, a duplicate edge
//! summed). Timed, each the median of `--iters` runs after `--warmup`:
//! - `weft_from_coo_seconds`: `Sparse::from_coo` from triplets already in Weft's stores to a
//!   CSR matrix with sorted columns and summed duplicates, 32-bit indices;
//! - `weft_spmv_seconds`: `y = M x` (the plugin's default row order: each row summed in
//!   order, as SciPy's loop sums it), `y` read back;
//! - `scipy_from_coo_seconds` and `scipy_spmv_seconds`: `coo_matrix((v, (r, c))).tocsr()`
//!   with `sum_duplicates()`, and `M @ x`, by `python3` on the same triplets and `x` (written
//!   as `.npy` files), single-threaded as SciPy's sparse loops are.
//!
//! Reports the ratios (`from_coo_over_scipy`, `spmv_speedup_vs_scipy`), whether Weft's `y`
//! has SciPy's bits (`y_equals_scipy`), and `y_sum` (`y`'s elements summed in order, for
//! comparing devices). Where SciPy is missing the SciPy fields are `null` and
//! `scipy_unavailable` says why.

use std::process::ExitCode;
use std::time::Instant;

use weft::npy::{self, NpyData};
use weft_examples::numpy_peer;
use weft_examples::solve_app::load_sparse;
use weft_examples::timing::median;
use weft_examples::{AppError, Args, Cli, Kind, Report, load_numeric, run_main};
use weft_ir::DType;

const NAME: &str = "bench_graph";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "from_coo and y = M x on a random graph's PageRank matrix, against SciPy in the same \
         run.",
        200_000,
        7,
    )
    .range("n", 2, 1 << 26)
    .help("n", "nodes of the graph")
    .default_value("warmup", "2")
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

/// The SciPy side: loads the triplets and `x`, times both operations, saves `y`, prints
/// `from_coo_seconds spmv_seconds`.
const SCIPY: &str = r#"
import sys, time
import numpy as np
import scipy.sparse as sp
d, n, warmup, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r, c, v, x = (np.load(f"{d}/{name}.npy") for name in ("row", "col", "val", "x"))
def build():
    m = sp.coo_matrix((v, (r, c)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    return m
def timed(f):
    ts = []
    for i in range(warmup + iters):
        t = time.perf_counter()
        out = f()
        if i >= warmup:
            ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2], out
build_s, m = timed(build)
spmv_s, y = timed(lambda: m @ x)
np.save(f"{d}/y.npy", y)
print(build_s, spmv_s)
"#;

/// SciPy's times for building the matrix and one product, and its `y`.
fn scipy(
    dir: &std::path::Path,
    args: &Args,
    triplets: &(Vec<i64>, Vec<i64>, Vec<f64>),
    x: &[f64],
) -> Result<(f64, f64, Vec<f64>), String> {
    let nnz = triplets.0.len() as u64;
    let save = |name: &str, shape: &[u64], data: NpyData| {
        npy::write(dir.join(format!("{name}.npy")), shape, data).map_err(|e| e.to_string())
    };
    save("row", &[nnz], NpyData::I64(triplets.0.clone()))?;
    save("col", &[nnz], NpyData::I64(triplets.1.clone()))?;
    save("val", &[nnz], NpyData::F64(triplets.2.clone()))?;
    save("x", &[x.len() as u64], NpyData::F64(x.to_vec()))?;
    let line = numpy_peer::run(
        SCIPY,
        &[
            dir.display().to_string(),
            args.n.to_string(),
            args.warmup.to_string(),
            args.iters.max(1).to_string(),
        ],
        1,
    )?;
    let mut words = line.split_whitespace().map(str::parse::<f64>);
    let (Some(Ok(build)), Some(Ok(spmv))) = (words.next(), words.next()) else {
        return Err(format!("the SciPy script printed {line:?}"));
    };
    let y = match npy::read(dir.join("y.npy"))
        .map_err(|e| e.to_string())?
        .data
    {
        NpyData::F64(y) => y,
        _ => return Err("SciPy's y is not float64".into()),
    };
    Ok((build, spmv, y))
}

fn run(args: &Args) -> Result<(), AppError> {
    let n = args.n;
    let degree = args.extra_u64("degree").ok_or("no --degree")?;
    let np = load_numeric(args)?;
    let sp = load_sparse(&np)?;
    let triplets = weft_examples::pagerank::graph(n, degree, args.seed);
    let nnz = triplets.0.len() as u64;
    let as_f64 = |v: &[i64]| v.iter().map(|&i| i as f64).collect::<Vec<f64>>();
    let row = np.from_f64s(&[nnz], &as_f64(&triplets.0), DType::I64);
    let col = np.from_f64s(&[nnz], &as_f64(&triplets.1), DType::I64);
    let val = np.from_vec(&[nnz], &triplets.2);
    let xs: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 / 8.0).collect();
    let x = np.from_vec(&[n], &xs);
    for a in [&row, &col, &val, &x] {
        a.check()?;
    }

    let (warmup, iters) = (args.warmup, args.iters.max(1));
    let mut build = Vec::new();
    let mut matrix = None;
    for i in 0..warmup + iters {
        drop(matrix.take());
        let start = Instant::now();
        let m = sp.from_coo((n, n), &row, &col, &val, DType::I32)?;
        m.nnz()?;
        if i >= warmup {
            build.push(start.elapsed().as_secs_f64());
        }
        matrix = Some(m);
    }
    let m = matrix.ok_or("no matrix was built")?;
    let mut spmv = Vec::new();
    let mut y = Vec::new();
    for i in 0..warmup + iters {
        let start = Instant::now();
        y = m.matvec(&x).to_vec()?;
        if i >= warmup {
            spmv.push(start.elapsed().as_secs_f64());
        }
    }
    let (weft_build, weft_spmv) = (median(&build), median(&spmv));

    let dir = std::env::temp_dir().join(format!("weft-bench-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let peer = scipy(&dir, args, &triplets, &xs);
    let _ = std::fs::remove_dir_all(&dir);

    let mut report = Report::new(NAME, args);
    report
        .set("nodes", n)
        .set("degree", degree)
        .set("nnz", m.nnz()?)
        .set("weft_from_coo_seconds", weft_build)
        .set("weft_spmv_seconds", weft_spmv)
        .set("y_sum", y.iter().sum::<f64>());
    let summary = match &peer {
        Ok((sb, ss, sy)) => {
            let equal =
                sy.len() == y.len() && sy.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits());
            report
                .set("scipy_from_coo_seconds", *sb)
                .set("scipy_spmv_seconds", *ss)
                .set("from_coo_over_scipy", weft_build / sb)
                .set("spmv_speedup_vs_scipy", ss / weft_spmv)
                .set("y_equals_scipy", equal);
            format!(
                "from_coo {:.1} ms (SciPy {:.1} ms, {:.2}x its time); y = M x {:.2} ms (SciPy \
                 {:.2} ms, {:.2}x faster); y equals SciPy's bits: {equal}",
                weft_build * 1e3,
                sb * 1e3,
                weft_build / sb,
                weft_spmv * 1e3,
                ss * 1e3,
                ss / weft_spmv
            )
        }
        Err(why) => {
            for key in [
                "scipy_from_coo_seconds",
                "scipy_spmv_seconds",
                "from_coo_over_scipy",
                "spmv_speedup_vs_scipy",
                "y_equals_scipy",
            ] {
                report.set(key, serde_json::Value::Null);
            }
            report.set("scipy_unavailable", why.as_str());
            format!(
                "from_coo {:.1} ms; y = M x {:.2} ms; SciPy unavailable: {why}",
                weft_build * 1e3,
                weft_spmv * 1e3
            )
        }
    };
    report.set("seconds_per_iter", weft_spmv).runtime_stats(&np);
    args.say(&format!("{NAME}: {n} nodes, {nnz} edges: {summary}"))?;
    report.print()?;
    Ok(())
}
