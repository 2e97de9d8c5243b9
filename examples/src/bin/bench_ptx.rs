//! What the GPU back end's code generation costs, measured where no GPU is: every kernel the
//! examples make (fused and unfused, as `kernel_recording` records them) is emitted as PTX
//! `--iters` times; prints one JSON line with the kernel count, the median and largest median
//! emission time per kernel, the largest module, and the kernel that took longest. (Loading a
//! module, the driver's compile, needs a GPU and is not measured here.)

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use weft_examples::kernel_recording::{Seen, recorded, run_examples};
use weft_examples::{AppError, Cli, Report, run_main, timing::median};

const NAME: &str = "bench_ptx";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "PTX emission time of every kernel the examples make.",
        0,
        20,
    )
    .help("n", "unused")
    .help("iters", "emissions of each kernel (the median is reported)");
    let args = cli.parse_env_or_exit();
    run_main(NAME, || {
        let seen: Seen = Arc::default();
        for fusion in [true, false] {
            let (np, sp) = recorded(fusion, &seen)?;
            run_examples(&np, &sp)?;
        }
        let seen = seen
            .lock()
            .map_err(|_| "the recording was poisoned")?
            .clone();
        let mut medians = Vec::new();
        let (mut largest, mut slowest, mut slowest_name) = (0usize, 0.0f64, String::new());
        for (name, ir) in &seen {
            let mut times = Vec::new();
            for _ in 0..args.iters.max(1) {
                let start = Instant::now();
                let module = weft_ptx::emit(ir)?;
                times.push(start.elapsed().as_secs_f64() * 1e3);
                largest = largest.max(module.text.len());
            }
            let m = median(&times);
            if m > slowest {
                slowest = m;
                slowest_name = name.clone();
            }
            medians.push(m);
        }
        let all = median(&medians);
        args.say(&format!(
            "{NAME}: {} kernels, PTX emission median {all:.3} ms per kernel, slowest {slowest:.3} ms ({slowest_name:.60}), largest module {largest} bytes",
            seen.len()
        ))?;
        let mut r = Report::new(NAME, &args);
        r.set("kernels", seen.len() as f64)
            .set("emit_ms_median", all)
            .set("emit_ms_max", slowest)
            .set("module_bytes_max", largest as f64)
            .set("slowest_kernel", slowest_name.as_str());
        r.print()?;
        Ok::<(), AppError>(())
    })
}
