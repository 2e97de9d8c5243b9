//! NPBench's kernels in Weft against NumPy, in one run (see [`weft_examples::npbench`]).
//!
//! `examples/numpy/npbench.py init` writes each kernel's inputs (NPBench's initialization at
//! `--preset`); each kernel then runs in Weft once (its first run: plans and kernels are
//! compiled) and `--iters` more times, each on fresh copies of its inputs made before the
//! clock starts, and its outputs go to `.npy` files; `npbench.py run` times NumPy the same
//! way and compares the outputs. Prints one JSON line: per kernel (`by_kernel`) Weft's median
//! and first run, NumPy's, the speedup and the largest difference relative to NumPy's
//! largest output; overall `seconds_per_iter` (Weft's medians summed), `kernels`, `faster_than_numpy`, `geomean_speedup_vs_numpy`,
//! `first_run_over_steady_max` and `max_rel_diff_max`. First runs also beside NumPy's own (which
//! pay the same first touches of fresh memory): per kernel `numpy_first_run_over_steady` and
//! `first_run_speedup_vs_numpy`, overall `numpy_first_run_over_steady_max` and
//! `first_run_geomean_speedup_vs_numpy`. Where JAX is installed, the kernels
//! with a JAX version (`examples/numpy/npbench_jax.py`: the time-stepped stencils under
//! `jax.jit`) are timed in the same script: per kernel `jax_seconds`, `speedup_vs_jax` and
//! `jax_max_rel_diff`, overall `jax_kernels` and `faster_than_jax`; elsewhere each kernel
//! says why not (`jax_unavailable`). `--list` prints the kernels' names, one a line.

use std::process::ExitCode;
use std::time::Instant;

use weft_examples::npbench::{Inputs, KERNELS};
use weft_examples::timing::median;
use weft_examples::{AppError, Args, Cli, Kind, Report, load_numeric, numpy_peer, run_main, save};

const NAME: &str = "npbench";

const PRESETS: &[&str] = &["XS", "S", "M", "L", "paper"];

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "NPBench's kernels in Weft against NumPy, on NPBench's initialization, in one run.",
        0,
        5,
    )
    .help("n", "unused (sizes are the preset's)")
    .help("iters", "timed runs of each kernel after its first")
    .default_value("warmup", "0")
    .extra(
        "preset",
        "P",
        "NPBench's sizes: XS (tiny, for tests), S, M, L or paper",
        Kind::Choice(PRESETS),
        "M",
    )
    .extra(
        "kernels",
        "K,K",
        "the kernels to run, by name, comma-separated (default: all)",
        Kind::Text,
        "",
    )
    .extra(
        "list",
        "",
        "print the names of the kernels, one a line, and run nothing",
        Kind::Switch,
        "",
    );
    let args = cli.parse_env_or_exit();
    if args.extra("list") == Some("1") {
        for k in KERNELS {
            println!("{}", k.name);
        }
        return ExitCode::SUCCESS;
    }
    run_main(NAME, || run(&args))
}

/// The NumPy side, `npbench.py` with `words`; its printed lines.
fn python(words: &[String]) -> Result<String, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("numpy/npbench.py");
    let text =
        std::fs::read_to_string(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    numpy_peer::run_all(&text, words, 1)
}

/// Copies the JAX versions of the kernels (`numpy/npbench_jax.py`) into `dir`, where
/// `npbench.py run` imports them from.
fn place_jax_peer(dir: &std::path::Path) -> Result<(), AppError> {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("numpy/npbench_jax.py");
    std::fs::copy(&from, dir.join("npbench_jax.py"))
        .map_err(|e| format!("{}: {e}", from.display()))?;
    Ok(())
}

fn run(args: &Args) -> Result<(), AppError> {
    let preset = args.extra("preset").unwrap_or("M").to_string();
    let chosen: Vec<&str> = match args.extra("kernels").unwrap_or("") {
        "" => KERNELS.iter().map(|k| k.name).collect(),
        list => list.split(',').map(str::trim).collect(),
    };
    for name in &chosen {
        if !KERNELS.iter().any(|k| k.name == *name) {
            return Err(format!("no kernel {name}").into());
        }
    }
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("weft-npbench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let dir_text = dir.display().to_string();
    let mut words = vec!["init".to_string(), dir_text.clone(), preset.clone()];
    words.extend(chosen.iter().map(|s| s.to_string()));
    python(&words).map_err(|e| format!("the NumPy side could not make the inputs: {e}"))?;

    let np = load_numeric(args)?;
    let sparse = weft::Sparse::new(&np, weft_plugin_artifacts::SPARSE)?;
    let mut weft_times = Vec::new();
    for name in &chosen {
        let kernel = KERNELS
            .iter()
            .find(|k| k.name == *name)
            .ok_or_else(|| format!("no kernel {name}"))?;
        let kdir = dir.join(name);
        let inputs = Inputs::load(&np, &kdir, Some(&sparse))?;
        let mut samples = Vec::new();
        let mut last = Vec::new();
        for _ in 0..=args.iters {
            let fresh = inputs.copies();
            np.runtime(|rt| rt.synchronize())?;
            let start = Instant::now();
            let outputs = (kernel.run)(&fresh)?;
            for (_, a) in &outputs {
                a.check()?;
            }
            np.runtime(|rt| rt.flush())?;
            np.runtime(|rt| rt.synchronize())?;
            samples.push(start.elapsed().as_secs_f64());
            last = outputs;
        }
        for (o, a) in &last {
            save(&kdir, &format!("weft_{o}.npy"), a)?;
        }
        let steady = if samples.len() > 1 {
            median(&samples[1..])
        } else {
            samples[0]
        };
        weft_times.push((name.to_string(), steady, samples[0]));
    }

    let mut words = vec![
        "run".to_string(),
        dir_text,
        preset.clone(),
        args.iters.to_string(),
    ];
    words.extend(chosen.iter().map(|s| s.to_string()));
    place_jax_peer(&dir)?;
    let lines = python(&words).map_err(|e| format!("the NumPy side failed: {e}"))?;
    if args.out.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut rows = Vec::new();
    let (mut faster, mut log_sum, mut first_worst, mut diff_worst) = (0u64, 0.0f64, 0.0f64, 0.0f64);
    // First runs: NumPy's own first over steady, and Weft's first against NumPy's first.
    let (mut numpy_first_worst, mut first_log_sum) = (0.0f64, 0.0f64);
    let mut summary = Vec::new();
    let (mut jax_kernels, mut faster_than_jax) = (0u64, 0u64);
    for (name, steady, first) in &weft_times {
        let line = lines
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["kernel"] == name.as_str())
            .ok_or_else(|| format!("NumPy printed nothing for {name}"))?;
        let numpy = line["numpy_seconds"].as_f64().ok_or("no numpy_seconds")?;
        let diff = line["max_rel_diff"].as_f64().unwrap_or(f64::INFINITY);
        let speedup = numpy / steady;
        let numpy_first = line["numpy_first_seconds"]
            .as_f64()
            .ok_or("no numpy_first_seconds")?;
        let first_speedup = numpy_first / first;
        numpy_first_worst = numpy_first_worst.max(numpy_first / numpy);
        first_log_sum += first_speedup.ln();
        faster += u64::from(speedup > 1.0);
        log_sum += speedup.ln();
        first_worst = first_worst.max(first / steady);
        diff_worst = diff_worst.max(diff);
        summary.push(format!("{name} {speedup:.2}x"));
        let jax = line["jax_seconds"].as_f64();
        if let Some(jax) = jax {
            jax_kernels += 1;
            faster_than_jax += u64::from(jax > *steady);
        }
        rows.push(serde_json::json!({
            "jax_seconds": jax,
            "jax_first_seconds": line["jax_first_seconds"],
            "speedup_vs_jax": jax.map(|j| j / steady),
            "jax_max_rel_diff": line["jax_max_rel_diff"],
            "jax_unavailable": line["jax_unavailable"],
            "kernel": name,
            "weft_seconds": steady,
            "weft_first_seconds": first,
            "numpy_seconds": numpy,
            "numpy_first_seconds": numpy_first,
            "speedup_vs_numpy": speedup,
            "first_run_over_steady": first / steady,
            "numpy_first_run_over_steady": numpy_first / numpy,
            "first_run_speedup_vs_numpy": first_speedup,
            "max_rel_diff": diff,
            "outputs_compared": line["outputs_compared"],
        }));
    }
    let count = weft_times.len().max(1) as f64;
    let geomean = (log_sum / count).exp();
    let first_geomean = (first_log_sum / count).exp();
    let mut report = Report::new(NAME, args);
    report
        .set(
            "seconds_per_iter",
            weft_times.iter().map(|(_, steady, _)| steady).sum::<f64>(),
        )
        .set("preset", preset.as_str())
        .set("kernels", weft_times.len() as u64)
        .set("faster_than_numpy", faster)
        .set("geomean_speedup_vs_numpy", geomean)
        .set("first_run_over_steady_max", first_worst)
        .set("numpy_first_run_over_steady_max", numpy_first_worst)
        .set("first_run_geomean_speedup_vs_numpy", first_geomean)
        .set("max_rel_diff_max", diff_worst)
        .set("jax_kernels", jax_kernels)
        .set("faster_than_jax", faster_than_jax)
        .set("by_kernel", serde_json::Value::Array(rows))
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME} ({preset}): {} kernels, faster than NumPy on {faster}, geometric mean {geomean:.2}x; \
         first run at most {first_worst:.1}x the steady one (NumPy's at most \
         {numpy_first_worst:.1}x its own), first runs {first_geomean:.2}x NumPy's first; largest \
         relative difference \
         {diff_worst:.1e}. {}",
        weft_times.len(),
        summary.join(", ")
    ))?;
    report.print()?;
    Ok(())
}
