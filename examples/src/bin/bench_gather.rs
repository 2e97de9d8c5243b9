//! `y = A x` for a sparse `A` with long rows, each row summed in the lane order of
//! `weft_ir::builder::BodyBuilder::fold_lanes` (eight partials gathering `x[crd[j]]`, their
//! tree, then the tail): the CPU back end's code for it on every SIMD path this CPU has, side
//! by side in one process, with two plain-Rust loops over the same arrays.
//!
//! The kernel is built and compiled here, below the runtime, so that each path
//! (`WEFT_SIMD`'s `scalar`, `sse`, `avx2`, `avx512`) runs the same kernel on the same arrays:
//! - `scalar`: one load per entry, the eight partials in scalar registers;
//! - `sse`: the partials as 128-bit vectors, each lane's entry loaded into its lane;
//! - `avx2` and `avx512`: the bulk of each row of 64 entries or more in a wide body of our own,
//!   one `vgatherqpd` per vector (see `docs/design.md`, *Wide lanes*).
//!
//! Beside them runs the same product with each row in one chain, in order, as the `sparse`
//! plugin writes its rows (`weft_sequential`, the widest path: scalar code, two entries per
//! trip). Every path must give the same bits (`bits_equal_paths`), the plain-Rust loop of the
//! lane order those bits too (`bits_equal_rust_lanes`), and the sequential kernel the
//! sequential loop's (`bits_equal_weft_rust_sequential`). The matrix has `--rows` rows of
//! `--row-len` entries at random columns of `0..--cols` (`i32` indices). Each of
//! `--warmup` + `--iters` rounds runs every path and both loops once; each reports its
//! median over the timed rounds. Compulsory bytes: the matrix once as stored (`i32` row
//! starts and columns, `f64` values), `x` read once and `y` written once. `seconds_per_iter`
//! is the widest path's median; there is no runtime, so `tasks_submitted` counts the launches
//! of the compiled kernels.

use std::process::ExitCode;
use std::time::Instant;

use weft::Device;
use weft_cpu::{CompiledKernel, CpuBackend, SimdPath, StoreView};
use weft_examples::bandwidth::{PROBE_BYTES, Probe, floor_seconds};
use weft_examples::csr_rows::{Csr32, Row, product, row_lanes, row_sequential};
use weft_examples::report::peak_rss_bytes;
use weft_examples::timing::median;
use weft_examples::{AppError, Args, Cli, Kind, Report, run_main};
use weft_ir::builder::{BodyBuilder, KernelBuilder, Value};
use weft_ir::{DType, Kernel, Privilege, ReduceOp};

const NAME: &str = "bench_gather";

/// Rows per rayon task of the plain-Rust loops.
const ROWS: usize = 256;

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "y = A x, rows in the lane order gathering x: the CPU back end on every SIMD path \
         against plain-Rust loops.",
        0,
        20,
    )
    .help("n", "unused (the problem is --rows, --row-len and --cols)")
    .help(
        "iters",
        "timed rounds (each runs every path and both loops)",
    )
    .help("warmup", "untimed rounds before the timed ones")
    .default_value("warmup", "3")
    .extra(
        "rows",
        "R",
        "rows of the matrix",
        Kind::Count {
            min: 1,
            max: 1 << 22,
        },
        "16384",
    )
    .extra(
        "row-len",
        "L",
        "entries a row",
        Kind::Count { min: 0, max: 4096 },
        "256",
    )
    .extra(
        "cols",
        "C",
        "columns of the matrix (the length of x)",
        Kind::Count {
            min: 1,
            max: 1 << 26,
        },
        "65536",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// The kernel `y[i] = sum over row i of vals[j] * x[crd[j]]`: in the lane order if `lanes`,
/// else in one chain, in order, as the `sparse` plugin writes its rows.
fn kernel(lanes: bool) -> Result<Kernel, AppError> {
    let name = if lanes { "lanes" } else { "sequential" };
    let mut k = KernelBuilder::new(format!("bench_gather.csr_{name}"));
    let ptr = k.store(DType::I32, 1, Privilege::Read);
    let crd = k.store(DType::I32, 1, Privilege::Read);
    let vals = k.store(DType::F64, 1, Privilege::Read);
    let x = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    k.parallel(y, |b, i| {
        let one = b.const_i64(1);
        let next = b.add(i[0], one);
        let lo = b.load(ptr, &[i[0]]);
        let lo = b.cast(DType::I64, lo);
        let hi = b.load(ptr, &[next]);
        let hi = b.cast(DType::I64, hi);
        let term = |b: &mut BodyBuilder, j: Value| {
            let c = b.load(crd, &[j]);
            let c = b.cast(DType::I64, c);
            let a = b.load(vals, &[j]);
            let xc = b.load(x, &[c]);
            b.mul(a, xc)
        };
        let sum = if lanes {
            b.fold_lanes(ReduceOp::Sum, DType::F64, lo, hi, term)
        } else {
            let zero = b.const_f64(0.0);
            b.for_loop(lo, hi, &[zero], |b, j, acc| {
                let t = term(b, j);
                vec![b.add(acc[0], t)]
            })[0]
        };
        b.store(y, i, sum);
    });
    Ok(k.finish_validated()?)
}

/// Runs `k` on the arrays, writing `y`.
fn launch(
    k: &CompiledKernel,
    a: &mut Csr32,
    x: &mut [f64],
    y: &mut [f64],
    pool: &rayon::ThreadPool,
) -> Result<(), AppError> {
    let views = [
        StoreView::dense(a.ptr.as_mut_ptr().cast(), &[a.ptr.len() as i64]),
        StoreView::dense(a.col.as_mut_ptr().cast(), &[a.col.len() as i64]),
        StoreView::dense(a.val.as_mut_ptr().cast(), &[a.val.len() as i64]),
        StoreView::dense(x.as_mut_ptr().cast(), &[x.len() as i64]),
        StoreView::dense(y.as_mut_ptr().cast(), &[y.len() as i64]),
    ];
    // SAFETY: each view covers exactly its live, dense buffer (`ptr`, `col`, `val`, `x`,
    // `y`), which nothing else touches while the kernel runs; the kernel only reads the first
    // four.
    unsafe { k.run(&views, &[], pool) }?;
    Ok(())
}

fn run(args: &Args) -> Result<(), AppError> {
    if args.device != Device::Cpu {
        return Err(weft::Error::Device(format!(
            "{NAME} measures the CPU back end's SIMD paths; it has no GPU form"
        ))
        .into());
    }
    let count = |name: &str| -> Result<usize, AppError> {
        Ok(args
            .extra_u64(name)
            .ok_or_else(|| format!("--{name} needs a number"))? as usize)
    };
    let (rows, len, cols) = (count("rows")?, count("row-len")?, count("cols")?);
    let mut a = Csr32::random(rows, len, cols, args.seed)?;
    let nnz = a.col.len();
    let mut x: Vec<f64> = (0..cols).map(|j| 1.0 / (1.0 + (j % 1009) as f64)).collect();

    let kernel_lanes = kernel(true)?;
    let mut backend = CpuBackend::new()?;
    let mut paths: Vec<(SimdPath, CompiledKernel)> = Vec::new();
    for path in backend.compiler().available_paths() {
        backend.compiler().set_path(path)?;
        paths.push((path, backend.compile(&kernel_lanes)?));
    }
    // The plugin's sequential rows, on the widest path (the last one compiled for).
    let sequential = backend.compile(&kernel(false)?)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .stack_size(weft_cpu::WORKER_STACK_BYTES)
        .build()?;
    let mut probe = Probe::new(args.threads, PROBE_BYTES);
    probe.sample();
    let mut ys: Vec<Vec<f64>> = vec![vec![0.0; rows]; paths.len()];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    let (mut y_seq, mut y_lanes) = (vec![0.0; rows], vec![0.0; rows]);
    let (mut seq, mut lanes) = (Vec::new(), Vec::new());
    let (mut y_weft_seq, mut weft_seq) = (vec![0.0; rows], Vec::new());
    for round in 0..args.warmup + args.iters {
        let timed = round >= args.warmup;
        let start = Instant::now();
        launch(&sequential, &mut a, &mut x, &mut y_weft_seq, &pool)?;
        if timed {
            weft_seq.push(start.elapsed().as_secs_f64());
        }
        for ((_, k), (y, t)) in paths.iter().zip(ys.iter_mut().zip(&mut times)) {
            let start = Instant::now();
            launch(k, &mut a, &mut x, y, &pool)?;
            if timed {
                t.push(start.elapsed().as_secs_f64());
            }
        }
        for (out, row, t) in [
            (&mut y_seq, row_sequential as Row, &mut seq),
            (&mut y_lanes, row_lanes, &mut lanes),
        ] {
            let start = Instant::now();
            pool.install(|| product(&a, &x, out, row, ROWS));
            if timed {
                t.push(start.elapsed().as_secs_f64());
            }
        }
    }
    probe.sample();

    let bits = |y: &[f64]| y.iter().map(|v| v.to_bits()).collect::<Vec<u64>>();
    let first = bits(&ys[0]);
    let equal_paths = ys.iter().all(|y| bits(y) == first);
    let equal_lanes = bits(&y_lanes) == first;
    let equal_sequential = bits(&y_weft_seq) == bits(&y_seq);
    let bytes = 4.0 * (rows + 1) as f64 + 12.0 * nnz as f64 + 8.0 * (cols + rows) as f64;
    let gbs = probe.gbs();
    let medians: Vec<f64> = times.iter().map(|t| median(t)).collect();
    let (seq, lanes, weft_seq) = (median(&seq), median(&lanes), median(&weft_seq));
    let mut report = Report::new(NAME, args);
    report
        .set("rows", rows as u64)
        .set("row_len", len as u64)
        .set("cols", cols as u64)
        .set("nnz", nnz as u64)
        .set(
            "paths",
            paths
                .iter()
                .map(|(p, _)| p.name())
                .collect::<Vec<_>>()
                .join(","),
        );
    for ((path, k), &t) in paths.iter().zip(&medians) {
        let name = path.name();
        report
            .set(&format!("{name}_seconds"), t)
            .set(
                &format!("{name}_wide_lane_loops"),
                k.wide_lane_loops() as u64,
            )
            .set(
                &format!("{name}_floor_ratio"),
                t / floor_seconds(bytes, gbs),
            );
    }
    let widest = *medians.last().ok_or("no SIMD path")?;
    let widest_times = times.last().ok_or("no SIMD path")?;
    // No runtime here: its tasks are this program's launches of the compiled kernels.
    let launches = ((paths.len() + 1) * (args.warmup + args.iters)) as u64;
    report
        .set("seconds_per_iter", widest)
        .set(
            "seconds_min",
            widest_times.iter().copied().fold(f64::INFINITY, f64::min),
        )
        .set(
            "seconds_max",
            widest_times.iter().copied().fold(0.0, f64::max),
        )
        .set("fusion", false)
        .set("tasks_submitted", launches)
        .set("tasks_executed", launches)
        .set("kernels_compiled", paths.len() as u64 + 1)
        .set("peak_rss_bytes", peak_rss_bytes());
    report
        .set("weft_sequential_seconds", weft_seq)
        .set("speedup_widest_vs_weft_sequential", weft_seq / widest)
        .set("rust_sequential_seconds", seq)
        .set("rust_lanes_seconds", lanes)
        .set("widest_vs_rust_lanes", widest / lanes)
        .set("bits_equal_paths", equal_paths)
        .set("bits_equal_rust_lanes", equal_lanes)
        .set("bits_equal_weft_rust_sequential", equal_sequential)
        .floor("", widest, bytes, gbs)
        .probe(&probe);
    if let Some(sse) = paths.iter().position(|(p, _)| *p == SimdPath::Sse) {
        report.set("speedup_widest_vs_sse", medians[sse] / widest);
    }
    report.print()?;
    if !equal_paths || !equal_lanes || !equal_sequential {
        return Err("the paths, or a kernel and its plain-Rust loop, differ in bits".into());
    }
    Ok(())
}
