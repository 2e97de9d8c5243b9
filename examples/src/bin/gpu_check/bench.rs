//! `bench`: the workloads of the GPU targets, each on a runtime of its own, against the
//! device's copy probe ([`weft::Runtime::copy_bandwidth`]; on the CPU, the examples' read
//! probe): Black-Scholes (fused, and unfused for the ratio), the 5-point stencil, CG and
//! BiCGSTAB on the Poisson problem, and dense Jacobi. The computations are the example
//! modules' own (`weft_examples::{black_scholes, stencil, krylov, jacobi}`), timed as the
//! example benchmarks time them (`weft_examples::bench`, which synchronizes the runtime
//! before it stops the clock; the solvers time each iteration up to its residual read), and
//! their compulsory bytes are the benchmarks' (`bench_black_scholes`, `bench_stencil`,
//! `bench_krylov`, `jacobi`).
//!
//! Each workload reports `seconds_per_iter` (the median), `bytes_per_iter`, `probe_gbs`,
//! `floor_seconds` (the bytes at the probe's rate) and `floor_ratio` (the seconds over the
//! floor: 1 is the floor). A workload that fails is reported with its error and the others
//! still run.

use std::time::Instant;

use serde_json::{Map, Value, json};
use weft::{Config, Numeric, Runtime, Sparse};
use weft_examples::black_scholes::{self, Cnd};
use weft_examples::stencil::{Stencil, initial_grid};
use weft_examples::timing::{Timing, warm_up};
use weft_examples::{AppError, bandwidth, bench, jacobi, krylov};
use weft_ir::DType;

use crate::cli::{BenchArgs, Common};
use crate::outcome::{median, note, num};

/// The seed of every workload's inputs.
const SEED: u64 = 42;

/// One benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Black-Scholes, fused and unfused.
    BlackScholes,
    /// The 5-point stencil.
    Stencil,
    /// CG on the Poisson problem.
    Cg,
    /// BiCGSTAB on the Poisson problem.
    Bicgstab,
    /// Dense Jacobi.
    Jacobi,
}

impl Workload {
    /// Every workload, in the order `all` runs them.
    pub const ALL: [Workload; 5] = [
        Workload::BlackScholes,
        Workload::Stencil,
        Workload::Cg,
        Workload::Bicgstab,
        Workload::Jacobi,
    ];

    /// The `--workload` words.
    pub const CHOICES: &'static [&'static str] = &[
        "black-scholes",
        "stencil",
        "cg",
        "bicgstab",
        "jacobi",
        "all",
    ];

    /// The workload's name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::BlackScholes => "black-scholes",
            Workload::Stencil => "stencil",
            Workload::Cg => "cg",
            Workload::Bicgstab => "bicgstab",
            Workload::Jacobi => "jacobi",
        }
    }

    /// The workloads `--workload` words name, each once, in the order of [`Workload::ALL`].
    pub fn parse_all(words: &[String]) -> Vec<Workload> {
        Workload::ALL
            .into_iter()
            .filter(|w| words.iter().any(|x| x == "all" || x == w.name()))
            .collect()
    }
}

/// The sizes and iteration counts of a run.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Black-Scholes options (2^26).
    pub options: u64,
    /// The stencil's interior side (8190: an 8192^2 grid).
    pub stencil_n: u64,
    /// Stencil sweeps per timed iteration.
    pub sweeps: u64,
    /// The Poisson grid side (2000: 4M unknowns).
    pub grid: u64,
    /// Dense Jacobi's unknowns (8192).
    pub jacobi_n: u64,
    /// Timed iterations, if set for every workload.
    pub iters: Option<u64>,
    /// Warm-up iterations, if set for every workload.
    pub warmup: Option<u64>,
    /// Bytes per copy of the probe, in MiB, if set.
    pub probe_mib: Option<u64>,
}

impl Sizes {
    /// The sizes, or small ones, with the flags' overrides.
    pub fn of(a: &BenchArgs) -> Sizes {
        let small = a.common.small;
        let pick = |flag: Option<u64>, full: u64, little: u64| {
            flag.unwrap_or(if small { little } else { full })
        };
        Sizes {
            options: pick(a.options, 1 << 26, 4096),
            stencil_n: pick(a.stencil_n, 8190, 30),
            sweeps: pick(a.sweeps, 10, 2),
            grid: pick(a.grid, 2000, 12),
            jacobi_n: pick(a.jacobi_n, 8192, 48),
            iters: a.iters,
            warmup: a.warmup,
            probe_mib: a.probe_mib,
        }
    }

    /// `(warmup, iters)` of a workload whose defaults are `full` (`small` with `--small`),
    /// unless the flags set them.
    fn counts(&self, small: bool, full: (u64, u64), little: (u64, u64)) -> (usize, usize) {
        let (w, i) = if small { little } else { full };
        (
            self.warmup.unwrap_or(w) as usize,
            self.iters.unwrap_or(i) as usize,
        )
    }
}

fn numeric(c: &Common, fusion: bool) -> weft::Result<Numeric> {
    let config = Config {
        device: c.device,
        threads: c.threads,
        fusion,
        ..Config::from_env()
    };
    Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)
}

/// The probe on `np`'s device: the median GB/s, its samples, and what it measured.
fn probe(np: &Numeric, c: &Common, s: &Sizes) -> Result<Value, AppError> {
    let (bytes, samples) = crate::env::probe_size(c, s.probe_mib);
    let (rates, kind) = match np.runtime(|rt| rt.copy_bandwidth(bytes, samples))? {
        Some(rates) => (rates, "device-to-device copy"),
        None => {
            // The CPU: the examples' read probe, in this process.
            let bytes = if c.small {
                8 << 20
            } else {
                bandwidth::PROBE_BYTES
            };
            let mut p = bandwidth::Probe::new(c.threads, bytes);
            p.samples(samples);
            (p.rates().to_vec(), "host read")
        }
    };
    Ok(json!({"gbs": num(median(&rates)), "kind": kind, "bytes": bytes, "samples": rates}))
}

/// The fields every workload reports, for `seconds` per unit of `bytes`.
fn floor(out: &mut Map<String, Value>, seconds: f64, bytes: f64, probe: &Value) {
    let gbs = probe["gbs"].as_f64().unwrap_or(f64::NAN);
    let floor = bandwidth::floor_seconds(bytes, gbs);
    out.insert("seconds_per_iter".into(), num(seconds));
    out.insert("bytes_per_iter".into(), num(bytes));
    out.insert("gbs_effective".into(), num(bytes / seconds / 1e9));
    out.insert("probe_gbs".into(), num(gbs));
    out.insert("probe".into(), probe.clone());
    out.insert("floor_seconds".into(), num(floor));
    out.insert("floor_ratio".into(), num(seconds / floor));
}

fn timing(out: &mut Map<String, Value>, prefix: &str, t: &Timing, per: f64) {
    out.insert(format!("{prefix}seconds_min"), num(t.min / per));
    out.insert(format!("{prefix}seconds_max"), num(t.max / per));
}

/// Runs the stage: one entry per workload under `workloads`.
pub fn run(a: &BenchArgs, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let sizes = Sizes::of(a);
    let mut results = Map::new();
    let mut failed = Vec::new();
    for w in &a.workloads {
        note("bench", w.name());
        let mut r = Map::new();
        let start = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match w {
            Workload::BlackScholes => black_scholes(&a.common, &sizes, &mut r),
            Workload::Stencil => stencil(&a.common, &sizes, &mut r),
            Workload::Cg | Workload::Bicgstab => solver(*w, &a.common, &sizes, &mut r),
            Workload::Jacobi => dense_jacobi(&a.common, &sizes, &mut r),
        }))
        .unwrap_or_else(|_| Err("panicked".into()));
        r.insert("wall_seconds".into(), num(start.elapsed().as_secs_f64()));
        r.insert("ok".into(), result.is_ok().into());
        if let Err(e) = result {
            r.insert("error".into(), e.to_string().into());
            failed.push(format!("{}: {e}", w.name()));
        }
        results.insert(w.name().into(), Value::Object(r));
    }
    out.insert("workloads".into(), Value::Object(results));
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; ").into())
    }
}

/// Black-Scholes on `options` options (erf form), fused and unfused; compulsory bytes: three
/// arrays in, two out.
fn black_scholes(c: &Common, s: &Sizes, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let n = s.options;
    let (warmup, iters) = s.counts(c.small, (1, 5), (1, 2));
    let bytes = 5.0 * 8.0 * n as f64;
    out.insert("options".into(), n.into());
    out.insert("iters".into(), iters.into());
    out.insert("warmup".into(), warmup.into());
    let mut seconds = [0.0; 2];
    let mut checksums = [0.0; 2];
    let mut probe_value = Value::Null;
    for (k, fusion) in [true, false].into_iter().enumerate() {
        let np = numeric(c, fusion)?;
        let inputs = black_scholes::inputs(&np, n, SEED);
        np.runtime(|rt| rt.synchronize())?;
        let (t, per, last) = bench(&np, warmup, iters, || {
            let (call, put) = inputs.price(Cnd::Erf);
            call.check()?;
            put.check()?;
            Ok((call, put))
        })?;
        let (call, put) = last.ok_or("no iteration ran")?;
        checksums[k] = (call.sum() + put.sum()).item()?;
        seconds[k] = t.median;
        let prefix = if fusion { "fused_" } else { "unfused_" };
        out.insert(format!("{prefix}seconds"), num(t.median));
        timing(out, prefix, &t, 1.0);
        out.insert(format!("{prefix}tasks_per_iter"), num(per.tasks_executed));
        out.insert(
            format!("{prefix}kernels_compiled_timed"),
            per.kernels_compiled.into(),
        );
        if fusion {
            probe_value = probe(&np, c, s)?;
        }
    }
    floor(out, seconds[0], bytes, &probe_value);
    out.insert("fused_vs_unfused".into(), num(seconds[1] / seconds[0]));
    out.insert(
        "unfused_floor_ratio".into(),
        num(seconds[1]
            / bandwidth::floor_seconds(bytes, probe_value["gbs"].as_f64().unwrap_or(f64::NAN))),
    );
    out.insert("checksum".into(), num(checksums[0]));
    out.insert(
        "fused_equals_unfused_checksum".into(),
        (checksums[0].to_bits() == checksums[1].to_bits()).into(),
    );
    Ok(())
}

/// The stencil on an `(n+2)^2` grid, `sweeps` sweeps per timed iteration, reported per
/// sweep; compulsory bytes per sweep: the grid read once and the interior written once.
fn stencil(c: &Common, s: &Sizes, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let n = s.stencil_n;
    let sweeps = s.sweeps.max(1);
    let (warmup, iters) = s.counts(c.small, (1, 5), (1, 2));
    out.insert("n".into(), n.into());
    out.insert("grid_side".into(), (n + 2).into());
    out.insert("sweeps_per_iter".into(), sweeps.into());
    out.insert("iter_unit".into(), "sweep".into());
    out.insert("iters".into(), iters.into());
    out.insert("warmup".into(), warmup.into());
    let np = numeric(c, true)?;
    let grid = initial_grid(&np, n, SEED)?;
    let st = Stencil::new(&grid);
    np.runtime(|rt| rt.synchronize())?;
    let (t, per, _) = bench(&np, warmup, iters, || {
        for _ in 0..sweeps {
            st.step()?;
        }
        Ok(())
    })?;
    let per_sweep = t.median / sweeps as f64;
    let bytes = 8.0 * ((n + 2) * (n + 2) + n * n) as f64;
    let probe_value = probe(&np, c, s)?;
    floor(out, per_sweep, bytes, &probe_value);
    timing(out, "", &t, sweeps as f64);
    out.insert(
        "tasks_per_sweep".into(),
        num(per.tasks_executed / sweeps as f64),
    );
    out.insert("kernels_compiled_timed".into(), per.kernels_compiled.into());
    out.insert("checksum".into(), num(grid.sum().item()?));
    Ok(())
}

/// CG or BiCGSTAB on the `grid`^2 Poisson problem (32-bit indices, tolerance 0 so that no
/// solve stops early), `warmup + iters` iterations of which the last `iters` are timed, each
/// up to its residual read; compulsory bytes per iteration: CG the matrix as stored plus x, r
/// and p each read and written once; BiCGSTAB the matrix twice plus ten vector passes.
fn solver(
    w: Workload,
    c: &Common,
    s: &Sizes,
    out: &mut Map<String, Value>,
) -> Result<(), AppError> {
    let g = s.grid;
    let (warmup, iters) = s.counts(c.small, (3, 20), (1, 2));
    out.insert("grid".into(), g.into());
    out.insert("unknowns".into(), (g * g).into());
    out.insert("iters".into(), iters.into());
    out.insert("warmup".into(), warmup.into());
    let np = numeric(c, true)?;
    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE)?;
    let a = sp.poisson2d(g, DType::F64, DType::I32)?;
    let b = np.random_uniform(
        &[g * g],
        0.0,
        1.0,
        weft_examples::sub_seed(SEED, 0),
        DType::F64,
    );
    b.check()?;
    np.runtime(|rt| rt.synchronize())?;
    let before = np.runtime(|rt| rt.stats());
    let solve = match w {
        Workload::Cg => krylov::cg(&a, &b, 0.0, warmup + iters)?,
        _ => krylov::bicgstab(&a, &b, 0.0, warmup + iters)?,
    };
    np.runtime(|rt| rt.synchronize())?;
    let after = np.runtime(|rt| rt.stats());
    let timed = solve.seconds.get(warmup..).unwrap_or_default();
    if timed.is_empty() {
        return Err(format!(
            "the solve ran {} iterations, none timed",
            solve.iterations()
        )
        .into());
    }
    let n = (g * g) as f64;
    let nnz = a.nnz()? as f64;
    // The matrix as stored: pos as (rows, 2) i32, crd i32, vals f64.
    let matrix = 8.0 * n + 4.0 * nnz + 8.0 * nnz;
    let bytes = match w {
        Workload::Cg => matrix + 6.0 * 8.0 * n,
        _ => 2.0 * matrix + 10.0 * 8.0 * n,
    };
    let probe_value = probe(&np, c, s)?;
    floor(out, median(timed), bytes, &probe_value);
    out.insert(
        "seconds_min".into(),
        num(timed.iter().copied().fold(f64::INFINITY, f64::min)),
    );
    out.insert(
        "seconds_max".into(),
        num(timed.iter().copied().fold(0.0, f64::max)),
    );
    out.insert("nnz".into(), num(nnz));
    out.insert(
        "tasks_per_iter".into(),
        num(
            (after.exec.tasks_executed - before.exec.tasks_executed) as f64
                / solve.iterations().max(1) as f64,
        ),
    );
    out.insert(
        "residual_ratio".into(),
        num(solve.residuals.last().copied().unwrap_or(f64::NAN)
            / solve.residuals.first().copied().unwrap_or(f64::NAN)),
    );
    Ok(())
}

/// Dense Jacobi on an `n x n` diagonally dominant system, the warm-up steps on a copy of
/// `x0`; compulsory bytes per step: the matrix read once.
fn dense_jacobi(c: &Common, s: &Sizes, out: &mut Map<String, Value>) -> Result<(), AppError> {
    let n = s.jacobi_n;
    let (warmup, iters) = s.counts(c.small, (2, 10), (2, 2));
    out.insert("n".into(), n.into());
    out.insert("iters".into(), iters.into());
    out.insert("warmup".into(), warmup.into());
    let np = numeric(c, true)?;
    let (a, b) = jacobi::system(&np, n, SEED);
    let x0 = np.zeros(&[n], DType::F64);
    let solver = jacobi::Jacobi::new(&a, &b);
    solver.r.check()?;
    np.runtime(|rt| rt.synchronize())?;
    let mut warm = x0.copy();
    warm_up(&np, warmup, || {
        warm = solver.step(&warm);
        warm.check()
    })?;
    drop(warm);
    let mut x = x0.copy();
    np.runtime(|rt| rt.synchronize())?;
    let (t, per, _) = bench(&np, 0, iters, || {
        x = solver.step(&x);
        x.check()
    })?;
    let bytes = 8.0 * (n * n) as f64;
    let probe_value = probe(&np, c, s)?;
    floor(out, t.median, bytes, &probe_value);
    timing(out, "", &t, 1.0);
    out.insert("tasks_per_iter".into(), num(per.tasks_executed));
    out.insert("kernels_compiled_timed".into(), per.kernels_compiled.into());
    out.insert(
        "relative_residual".into(),
        num(jacobi::relative_residual(&a, &b, &x).item()?),
    );
    Ok(())
}
