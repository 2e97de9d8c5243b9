//! What one numeric call costs an application component: `call_cost N ITERS` times `ITERS`
//! batches of `N` additions of a scalar to a one-element array (each creates a store and
//! submits a task; nothing runs), and prints the median nanoseconds per call as one JSON
//! line. `weft-examples`' `plugin_calls` runs it beside the native case.

use weft_app::{DType, Numeric};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    let (n, iters) = match args.as_slice() {
        [n, iters, ..] if *n > 0 && *iters > 0 => (*n, *iters),
        _ => (10_000, 7),
    };
    let np = Numeric::new();
    let a = np.zeros(&[1], DType::F64);
    let mut samples = Vec::new();
    for _ in 0..iters {
        let start = std::time::Instant::now();
        for _ in 0..n {
            let b = &a + 1.0;
            std::hint::black_box(&b);
        }
        samples.push(start.elapsed().as_secs_f64() * 1e9 / n as f64);
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!("{{\"op_submit_ns\":{median}}}");
}
