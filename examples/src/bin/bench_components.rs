//! Black-Scholes built two ways, side by side: `examples/apps`' `black_scholes_app` run as an
//! application component (under `weft-apps`, a fresh runtime each run) against the same
//! model run natively (`weft_examples::black_scholes`, a fresh runtime each run), alternating.
//! Both time the same region, from pricing to both price files written and both sums known,
//! in each of the program's two modes: `files` (the host writes the files with `tofile` and
//! sums with `sum`: the vectors never enter the component's memory) and `vectors` (both
//! vectors read back with `to_vec`, which copies them into the component's linear memory,
//! then written and summed there). Prints one JSON line with, for each mode, the medians
//! and their ratio, and the median seconds each run's kernels took (its inputs' included:
//! the same work both ways), which tells the time in kernels from the time around them.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use weft::{Numeric, Runtime};
use weft_apps::{AppHost, AppLimits, Job};
use weft_examples::black_scholes::{self, Cnd};
use weft_examples::{AppError, Cli, timing::median};

/// One run's timed region and its runtime's kernel seconds.
type Timed = (f64, f64);

/// The little-endian bytes of `values`, as the program's `write_f64s` makes them.
fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn native(args: &weft_examples::Args, mode: &str, dir: &Path) -> Result<Timed, AppError> {
    let np = Numeric::new(Runtime::new(args.config())?, weft_plugin_artifacts::NUMERIC)?;
    let inputs = black_scholes::inputs(&np, args.n, args.seed);
    let start = Instant::now();
    let (call, put) = inputs.price(Cnd::Erf);
    let sums = if mode == "files" {
        call.tofile(dir.join("call.f64"))?;
        put.tofile(dir.join("put.f64"))?;
        (call.sum().item()?, put.sum().item()?)
    } else {
        let (call, put) = (call.to_vec()?, put.to_vec()?);
        std::fs::write(dir.join("call.f64"), f64_bytes(&call))?;
        std::fs::write(dir.join("put.f64"), f64_bytes(&put))?;
        (call.iter().sum::<f64>(), put.iter().sum::<f64>())
    };
    let seconds = start.elapsed().as_secs_f64();
    std::hint::black_box(sums);
    let kernels = np.runtime(|rt| rt.stats().kernel_seconds());
    Ok((seconds, kernels))
}

fn component(
    args: &weft_examples::Args,
    mode: &str,
    host: &AppHost,
    app: &weft::wasmtime::component::Component,
    dir: &Path,
) -> Result<Timed, AppError> {
    let mut rt = Runtime::new(args.config())?;
    let plugins = vec![rt.load(weft_plugin_artifacts::NUMERIC)?];
    let job = Job {
        name: "black_scholes_app".into(),
        args: vec![args.n.to_string(), args.seed.to_string(), mode.to_string()],
        dir: Some(dir.to_path_buf()),
        capture: true,
        limits: AppLimits {
            // Two price vectors as bytes and as f64s, in the application's own memory.
            memory_bytes: usize::try_from(args.n.saturating_mul(64).max(256 << 20))?,
            ..AppLimits::default()
        },
        ..Job::default()
    };
    let (outcome, mut rt) = host.run(rt, &plugins, app, &job);
    let outcome = outcome?;
    let kernels = rt.stats().kernel_seconds();
    if outcome.status != 0 {
        return Err(String::from_utf8_lossy(&outcome.stderr).into_owned().into());
    }
    let line: serde_json::Value = serde_json::from_slice(&outcome.stdout)?;
    let seconds = line["seconds"]
        .as_f64()
        .ok_or("black_scholes_app printed no seconds")?;
    Ok((seconds, kernels))
}

fn run() -> Result<(), AppError> {
    let cli = Cli::new(
        "bench_components",
        "Black-Scholes as an application component against the same model run natively",
        1 << 24,
        5,
    );
    let args = cli.parse_env_or_exit();
    let dir = std::env::temp_dir().join(format!("weft-bench-components-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let host = AppHost::new()?;
    let app = host.compile(
        "black_scholes_app",
        weft_plugin_artifacts::APP_BLACK_SCHOLES_APP,
    )?;
    let of = |runs: &[Timed], f: fn(&Timed) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let mut line = serde_json::json!({
        "example": "bench_components",
        "n": args.n,
        "iters": args.iters,
        "threads": args.threads,
    });
    for mode in ["files", "vectors"] {
        let (mut natives, mut components) = (Vec::new(), Vec::new());
        for _ in 0..args.iters {
            natives.push(native(&args, mode, &dir)?);
            components.push(component(&args, mode, &host, &app, &dir)?);
        }
        let (n, c) = (of(&natives, |t| t.0), of(&components, |t| t.0));
        line[mode] = serde_json::json!({
            "native_seconds": n,
            "component_seconds": c,
            "component_over_native": c / n,
            "native_kernel_seconds": of(&natives, |t| t.1),
            "component_kernel_seconds": of(&components, |t| t.1),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    weft_examples::run_main("bench_components", run)
}
