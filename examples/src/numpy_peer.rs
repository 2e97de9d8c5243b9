//! NumPy as a peer measured in the same run: a short Python script, run with `python3`, that
//! times a NumPy program and prints one number. Benchmarks report NumPy's time beside Weft's
//! instead of quoting a figure measured at another time.
//!
//! Where `python3` or NumPy is missing the measurement is `Err` with the reason, and the
//! benchmark reports the field as `null` with that reason beside it: never a made-up number.

use std::process::Command;

/// The `python3` to run: `WEFT_PYTHON` if set, else `python3` on the `PATH`.
fn python() -> String {
    std::env::var("WEFT_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Runs `script` (Python that imports NumPy as `np` itself and prints one float as its last
/// line of output) with `threads` threads for NumPy's BLAS and returns that float.
pub fn measure(script: &str, threads: usize) -> Result<f64, String> {
    let last = run(script, &[], threads)?;
    last.parse::<f64>()
        .map_err(|e| format!("the NumPy script printed {last:?}, not a number: {e}"))
}

/// Runs `script` with `args` (its `sys.argv[1..]`) and `threads` threads for NumPy's BLAS,
/// and returns the last line it printed, trimmed.
pub fn run(script: &str, args: &[String], threads: usize) -> Result<String, String> {
    let text = run_all(script, args, threads)?;
    Ok(text.lines().last().unwrap_or("").trim().to_string())
}

/// Runs `examples/numpy/<file>` (read from the source tree) with `args` on one BLAS thread
/// and returns the two numbers its last line prints (`seconds other`).
pub fn run_program(file: &str, args: &[String]) -> Result<(f64, f64), String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("numpy")
        .join(file);
    let text =
        std::fs::read_to_string(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    let line = run(&text, args, 1)?;
    let mut words = line.split_whitespace().map(str::parse::<f64>);
    match (words.next(), words.next()) {
        (Some(Ok(first)), Some(Ok(second))) => Ok((first, second)),
        _ => Err(format!("{file} printed {line:?}")),
    }
}

/// As [`run`], returning everything the script printed.
pub fn run_all(script: &str, args: &[String], threads: usize) -> Result<String, String> {
    let threads = threads.max(1).to_string();
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .env("OMP_NUM_THREADS", &threads)
        .env("OPENBLAS_NUM_THREADS", &threads)
        .env("MKL_NUM_THREADS", &threads)
        .output()
        .map_err(|e| format!("could not run {}: {e}", python()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim().to_string();
        return Err(format!("the NumPy script failed ({}): {last}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// NumPy's time per operation, in seconds, of `ops` element-wise operations on a 16-element
/// `float64` array: `y = y * 1.0001 + 1.0`, `ops / 2` times, the median of `reps` runs.
pub fn per_tiny_op(ops: usize, reps: usize) -> Result<f64, String> {
    let script = format!(
        "import time\nimport numpy as np\nx = np.ones(16)\nts = []\n\
         for _ in range({reps} + 2):\n    y = x\n    t = time.perf_counter()\n\
         \x20   for _ in range({half}):\n        y = y * 1.0001 + 1.0\n\
         \x20   ts.append((time.perf_counter() - t) / {ops})\n\
         ts = sorted(ts[2:])\nprint(ts[len(ts) // 2])\n",
        reps = reps.max(1),
        half = (ops / 2).max(1),
        ops = 2 * (ops / 2).max(1),
    );
    measure(&script, 1)
}
