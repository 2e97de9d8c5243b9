//! `y = A x` for a sparse `A` with long rows, in each of the `sparse` plugin's row orders
//! (`weft::RowOrder`), side by side in one process with plain-Rust CSR loops of the same two
//! orders over the same arrays at the same thread count. The matrix is the 27-point
//! stencil on a `--grid`^3 grid (27 entries in an interior row; default 64, 262K rows and
//! 6.9M entries, 32-bit indices); with `--points 7`, the 7-point one, rows shorter than a
//! block of eight lanes; or, with `--row-len L`, `--rows` rows (default: 4M entries' worth)
//! of `L` entries at random columns of a 64K-element `x`. The loops:
//! - `weft` and `rust_sequential`: each row summed in one chain, in order, as SciPy's loop
//!   sums it (the plugin's default order, scalar code). Weft's `y` must have the loop's bits
//!   (`bits_equal_sequential`).
//! - `weft_lanes` and `rust_lanes`: each row in the lane order of
//!   `weft_ir::builder::BodyBuilder::fold_lanes` (eight partials, their tree, then the tail),
//!   which the CPU back end runs as vectors gathering `x`. Weft's `y` must have the loop's bits
//!   (`bits_equal_lanes`); `rows_differing_from_lanes` counts the rows whose bits the two
//!   orders give differently.
//!
//! The product runs `--warmup` + `--iters` times; each timed Weft product is followed by one
//! product in the lane order and one of each loop, and every variant reports its median. Compulsory bytes are the
//! matrix once as stored (row ranges as `(rows, 2)` `i32`, `i32` columns, `f64` values), `x`
//! read once and `y` written once; the floor uses the median of the bandwidth probe sampled
//! before and after the runs ([`weft_examples::bandwidth::Probe`]).

use std::process::ExitCode;
use std::time::Instant;

use weft::{CsrMatrix, RowOrder};
use weft_examples::bandwidth::{PROBE_BYTES, Probe, floor_seconds};
use weft_examples::csr_rows::{Csr32, Row, product, row_lanes, row_sequential};
use weft_examples::solve_app::load_sparse;
use weft_examples::timing::{bench_then, median};
use weft_examples::{AppError, Args, Cli, Kind, Report, load_numeric, run_main};
use weft_ir::DType;

const NAME: &str = "bench_spmv";

/// Rows per rayon task of the plain-Rust loops, at most; a matrix of long rows gets at least
/// sixteen tasks.
const ROWS: usize = 4096;

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "y = A x for a stencil or a long-row random matrix, in Weft's two row orders, against \
         plain-Rust CSR loops of the same orders.",
        0,
        20,
    )
    .help("n", "unused (the problem is --grid)")
    .help("iters", "timed products")
    .help("warmup", "untimed products before the timed ones")
    .default_value("warmup", "3")
    .extra(
        "grid",
        "G",
        "the 27-point stencil on a G x G x G grid",
        Kind::Count { min: 2, max: 1024 },
        "64",
    )
    .extra(
        "points",
        "P",
        "the stencil's points: 27 (rows of 27 entries) or 7 (rows of 7, shorter than a lane \
         block)",
        Kind::Choice(&["27", "7"]),
        "27",
    )
    .extra(
        "row-len",
        "L",
        "instead of a stencil, rows of L entries at random columns of a 64K-element x (0: the \
         stencil)",
        Kind::Count {
            min: 0,
            max: 1 << 22,
        },
        "0",
    )
    .extra(
        "rows",
        "R",
        "the rows of --row-len's matrix (0: 4M entries' worth)",
        Kind::Count {
            min: 0,
            max: 1 << 22,
        },
        "0",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// The matrix of the 27-point stencil (faces, edges and corners) or, if `!full`, the 7-point
/// one (faces) on a `g`^3 grid: `points - 1` on the diagonal, -1 per neighbour, columns
/// sorted.
fn stencil(g: usize, full: bool) -> Result<Csr32, AppError> {
    let n = g * g * g;
    let (mut ptr, mut col, mut val) = (Vec::with_capacity(n + 1), Vec::new(), Vec::new());
    ptr.push(0i32);
    let gi = g as i64;
    for z in 0..gi {
        for y in 0..gi {
            for x in 0..gi {
                let row = (z * gi + y) * gi + x;
                for dz in -1..=1i64 {
                    for dy in -1..=1i64 {
                        for dx in -1..=1i64 {
                            let (a, b, c) = (z + dz, y + dy, x + dx);
                            let face = dz.abs() + dy.abs() + dx.abs() <= 1;
                            if (full || face) && [a, b, c].iter().all(|&v| (0..gi).contains(&v)) {
                                let k = (a * gi + b) * gi + c;
                                col.push(i32::try_from(k).map_err(|e| e.to_string())?);
                                let diagonal = if full { 26.0 } else { 6.0 };
                                val.push(if k == row { diagonal } else { -1.0 });
                            }
                        }
                    }
                }
                ptr.push(i32::try_from(col.len()).map_err(|e| e.to_string())?);
            }
        }
    }
    Ok(Csr32 { ptr, col, val })
}

/// Entries of the random matrix of `--row-len` unless `--rows` says otherwise.
const RANDOM_NNZ: usize = 1 << 22;

/// Columns of the random matrix of `--row-len`.
const RANDOM_COLS: usize = 1 << 16;

fn run(args: &Args) -> Result<(), AppError> {
    let g = args.extra_u64("grid").ok_or("--grid needs a number")? as usize;
    let row_len = args.extra_u64("row-len").unwrap_or(0) as usize;
    let np = load_numeric(args)?;
    let sp = load_sparse(&np)?;
    let points = args.extra("points").unwrap_or("27");
    let a = match RANDOM_NNZ.checked_div(row_len) {
        Some(fill) => {
            let rows = match args.extra_u64("rows").unwrap_or(0) as usize {
                0 => fill.max(1),
                rows => rows,
            };
            Csr32::random(rows, row_len, RANDOM_COLS, 0x5eed)?
        }
        // `--row-len 0`: the stencil.
        None => stencil(g, points == "27")?,
    };
    let n = a.ptr.len() - 1;
    let cols = if row_len > 0 { RANDOM_COLS } else { n };
    let nnz = a.col.len();
    let as_f64 = |v: &[i32]| v.iter().map(|&c| f64::from(c)).collect::<Vec<f64>>();
    let n64 = n as u64;
    // Straight into stores (the arrays are too large to pass through the plugin's memory).
    let matrix: CsrMatrix = sp.from_csr_arrays(
        (n64, cols as u64),
        &np.from_vec(&[n64 + 1], &as_f64(&a.ptr)).astype(DType::I32),
        &np.from_vec(&[nnz as u64], &as_f64(&a.col))
            .astype(DType::I32),
        &np.from_vec(&[nnz as u64], &a.val),
    )?;
    let xs: Vec<f64> = (0..cols).map(|i| 1.0 / (1.0 + (i % 1009) as f64)).collect();
    let x = np.from_vec(&[cols as u64], &xs);
    x.check()?;
    np.runtime(|rt| rt.synchronize())?;
    let in_lanes = matrix.with_row_order(RowOrder::Lanes);

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    let mut probe = Probe::for_device(&np, args.threads, PROBE_BYTES)?;
    probe.sample();
    let mut y_seq = vec![0.0; n];
    let mut y_lanes = vec![0.0; n];
    let (mut seq, mut lanes, mut weft_lanes) = (Vec::new(), Vec::new(), Vec::new());
    let mut y_weft_lanes = None;
    let (timing, per_iter, y) = bench_then(
        &np,
        args.warmup,
        args.iters,
        || {
            let y = matrix.matvec(&x);
            y.check()?;
            Ok(y)
        },
        |timed| {
            let start = Instant::now();
            let y = in_lanes.matvec(&x);
            y.check()?;
            np.runtime(|rt| rt.synchronize())?;
            if timed {
                weft_lanes.push(start.elapsed().as_secs_f64());
            }
            y_weft_lanes = Some(y);
            for (out, row, times) in [
                (&mut y_seq, row_sequential as Row, &mut seq),
                (&mut y_lanes, row_lanes, &mut lanes),
            ] {
                let start = Instant::now();
                pool.install(|| product(&a, &xs, out, row, (n / 16).clamp(1, ROWS)));
                if timed {
                    times.push(start.elapsed().as_secs_f64());
                }
            }
            Ok(())
        },
    )?;
    probe.sample();
    let y = y.ok_or("no product ran")?.to_vec()?;
    let y_weft_lanes = y_weft_lanes.ok_or("no product ran")?.to_vec()?;
    let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
    let (equal_seq, equal_lanes) = (same(&y, &y_seq), same(&y_weft_lanes, &y_lanes));
    let differ_from_lanes = y_seq
        .iter()
        .zip(&y_lanes)
        .filter(|(s, l)| s.to_bits() != l.to_bits())
        .count();
    let (seq, lanes, weft_lanes) = (median(&seq), median(&lanes), median(&weft_lanes));
    let bytes = 16.0 * n as f64 + 12.0 * nnz as f64 + 8.0 * cols as f64;
    let gbs = probe.gbs();
    let mut report = Report::new(NAME, args);
    report
        .set("grid", g as u64)
        .set("points", points)
        .set("row_len", row_len as u64)
        .set("cols", cols as u64)
        .set("rows", n as u64)
        .set("nnz", nnz as u64)
        .timing(&timing, &per_iter)
        .set("weft_seconds", timing.median)
        .set("rust_sequential_seconds", seq)
        .set("rust_lanes_seconds", lanes)
        .set("speedup_weft_vs_rust_sequential", seq / timing.median)
        .set("weft_lanes_seconds", weft_lanes)
        .set("speedup_weft_lanes_vs_weft", timing.median / weft_lanes)
        .set("speedup_weft_lanes_vs_rust_lanes", lanes / weft_lanes)
        .set("bits_equal_sequential", equal_seq)
        .set("bits_equal_lanes", equal_lanes)
        .set("rows_differing_from_lanes", differ_from_lanes as u64)
        .floor("", timing.median, bytes, gbs)
        .set(
            "weft_lanes_floor_ratio",
            weft_lanes / floor_seconds(bytes, gbs),
        )
        .set(
            "rust_sequential_floor_ratio",
            seq / floor_seconds(bytes, gbs),
        )
        .set("rust_lanes_floor_ratio", lanes / floor_seconds(bytes, gbs))
        .probe(&probe)
        .runtime_stats(&np);
    report.print()?;
    if !equal_seq {
        return Err("Weft's y differs from the sequential loop's bits".into());
    }
    if !equal_lanes {
        return Err("Weft's y in the lane order differs from the lane loop's bits".into());
    }
    Ok(())
}
