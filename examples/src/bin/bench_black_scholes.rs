//! Black-Scholes side by side in one process: Weft with fusion, Weft without fusion, and a
//! hand-written Rust loop of the same formula (`f64::ln`, `f64::exp`, `f64::sqrt` and the
//! host's `erf`) on a rayon pool of the same size. All three price the same inputs.
//!
//! Prints one JSON line: the median seconds per iteration of each, the ratios
//! `unfused / fused` and `rust_loop / fused`, and the memory-bandwidth floor: the compulsory
//! bytes (3 arrays in, 2 out) at the read bandwidth the probe measures in this process
//! (`read_gbs`, `floor_ratio`, `rust_loop_floor_ratio`), the SIMD path of the CPU back end
//! (`simd_path`) and a hash of the bits of the fused outputs (`fused_output_bits`, FNV-1a over
//! every call and then every put price), to compare paths run by run.

use std::process::ExitCode;

use rayon::prelude::*;
use weft::{Numeric, Runtime};
use weft_examples::bandwidth::{PROBE_BYTES, Probe, floor_seconds};
use weft_examples::black_scholes::{self, Cnd, RISK_FREE, VOLATILITY};
use weft_examples::{AppError, Args, Cli, Report, bench, run_main, timing};

const NAME: &str = "bench_black_scholes";

fn numeric(args: &Args, fusion: bool) -> weft::Result<Numeric> {
    let config = weft::Config {
        fusion,
        ..args.config()
    };
    Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)
}

/// The cumulative normal distribution through erf, as the Weft version computes it.
fn cnd(d: f64) -> f64 {
    0.5 + 0.5 * weft_cpu::math::erf(d * std::f64::consts::FRAC_1_SQRT_2)
}

/// Prices every option with a plain loop, split across `pool`.
fn rust_loop(
    pool: &rayon::ThreadPool,
    s: &[f64],
    x: &[f64],
    t: &[f64],
    call: &mut [f64],
    put: &mut [f64],
) {
    let (r, v) = (RISK_FREE, VOLATILITY);
    pool.install(|| {
        call.par_chunks_mut(1 << 14)
            .zip(put.par_chunks_mut(1 << 14))
            .enumerate()
            .for_each(|(c, (call, put))| {
                let base = c << 14;
                for i in 0..call.len() {
                    let (s, x, t) = (s[base + i], x[base + i], t[base + i]);
                    let sqrt_t = t.sqrt();
                    let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * sqrt_t);
                    let d2 = d1 - v * sqrt_t;
                    let (c1, c2) = (cnd(d1), cnd(d2));
                    let t3 = (-r * t).exp();
                    call[i] = s * c1 - x * t3 * c2;
                    put[i] = x * t3 * (1.0 - c2) - s * (1.0 - c1);
                }
            });
    });
}

fn run(args: &Args) -> Result<(), AppError> {
    let fused_np = numeric(args, true)?;
    let unfused_np = numeric(args, false)?;
    let mut medians = Vec::new();
    let mut results = Vec::new();
    for np in [&fused_np, &unfused_np] {
        let inputs = black_scholes::inputs(np, args.n, args.seed);
        np.runtime(|rt| rt.synchronize())?;
        let (t, per, last) = bench(np, args.warmup, args.iters, || {
            let (call, put) = inputs.price(Cnd::Erf);
            call.check()?;
            put.check()?;
            Ok((call, put))
        })?;
        let (call, put) = last.ok_or("no iteration ran")?;
        results.push((call.to_vec()?, put.to_vec()?, inputs));
        medians.push((t.median, per.tasks_executed, per.kernels_compiled));
    }
    // The hand-written loop, on the same inputs.
    let inputs = &results[0].2;
    let (s, x, t) = (inputs.s.to_vec()?, inputs.x.to_vec()?, inputs.t.to_vec()?);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()?;
    let n = args.n as usize;
    let (mut call, mut put) = (vec![0.0; n], vec![0.0; n]);
    let rust = timing::time_iterations(args.warmup, args.iters, || {
        rust_loop(&pool, &s, &x, &t, &mut call, &mut put);
        Ok::<(), AppError>(())
    })?;
    // All three agree.
    let worst = |a: &[f64], b: &[f64]| {
        a.iter()
            .zip(b)
            .map(|(p, q)| (p - q).abs() / (1.0 + q.abs()))
            .fold(0.0f64, f64::max)
    };
    let diff_unfused = worst(&results[0].0, &results[1].0).max(worst(&results[0].1, &results[1].1));
    let diff_rust = worst(&results[0].0, &call).max(worst(&results[0].1, &put));

    // FNV-1a over the bits of the fused outputs.
    let hash = results[0]
        .0
        .iter()
        .chain(&results[0].1)
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    // The configured path, else the widest this CPU runs (the back end's default).
    let path = args
        .config()
        .simd
        .or_else(|| weft::SimdPath::ALL.into_iter().rev().find(|p| p.detected()));
    let (fused, fused_tasks, fused_compiled) = medians[0];
    let (unfused, unfused_tasks, _) = medians[1];
    // Compulsory bytes: three inputs read, two outputs written.
    let bytes = 5.0 * 8.0 * args.n as f64;
    let gbs = Probe::for_device(&fused_np, args.threads, PROBE_BYTES)?
        .samples(4)
        .gbs();
    let mut report = Report::new(NAME, args);
    report
        .set("seconds_per_iter", fused)
        .set("fused_seconds", fused)
        .set("unfused_seconds", unfused)
        .set("rust_loop_seconds", rust.median)
        .set("speedup_fused_vs_unfused", unfused / fused)
        .set("speedup_fused_vs_rust_loop", rust.median / fused)
        .set("fused_gb_per_s", bytes / fused / 1e9)
        .set("fused_tasks_per_iter", fused_tasks)
        .set("unfused_tasks_per_iter", unfused_tasks)
        .set("kernels_compiled_timed", fused_compiled)
        .set("max_rel_diff_vs_unfused", diff_unfused)
        .set("max_rel_diff_vs_rust_loop", diff_rust)
        .set("simd_path", path.map_or("none", |p| p.name()))
        .set("fused_output_bits", format!("{hash:016x}"))
        .floor("", fused, bytes, gbs)
        .set(
            "rust_loop_floor_ratio",
            rust.median / floor_seconds(bytes, gbs),
        )
        .runtime_stats(&fused_np);
    args.say(&format!(
        "{NAME}: n={} threads={}: fused {:.1} ms, unfused {:.1} ms ({:.2}x), rust loop {:.1} ms ({:.2}x)",
        args.n,
        args.threads,
        fused * 1e3,
        unfused * 1e3,
        unfused / fused,
        rust.median * 1e3,
        rust.median / fused
    ))?;
    report.print()?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Black-Scholes fused, unfused and as a hand-written Rust loop, side by side.",
        1 << 24,
        5,
    )
    .range("n", 1, 1 << 28);
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}
