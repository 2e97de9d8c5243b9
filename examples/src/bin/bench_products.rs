//! Dense products against NumPy's `@` (its BLAS) in the same run: `matmul`, `matvec`,
//! `vecmat` and their transposed forms, `f32` and `f64`.
//!
//! Each shape is timed as the median of `--iters` products after `--warmup` (each product
//! run to completion: `synchronize`), Weft first, then, right after it and before the next
//! shape, NumPy on arrays of the same shape, layout and dtype, with NumPy's BLAS at
//! `--threads` threads (shape by shape, so that the two of a ratio run minutes apart at most
//! seconds, on a machine whose speed drifts). The forms name how the
//! operands lie: `A@B` both row-major; `A.T@B` and `A@B.T` an operand read through the
//! transpose of a row-major array; `A@x`, `A.T@x` and `x@A` with a vector. Every dimension is
//! divided by `--divide` (the tests run small shapes).
//!
//! Per shape (`by_shape`): `weft_seconds`, `numpy_seconds`, `weft_gflops` and `numpy_gflops`
//! (`2 m k n` over the time), `ratio_vs_numpy` (Weft's rate over NumPy's) and
//! `max_rel_diff_sampled` (16 sampled elements of Weft's product against plain-Rust sums, in
//! `f64`, relative to the largest of them). Overall: `ratio_vs_numpy_min` and
//! `ratio_vs_numpy_geomean`; `seconds_per_iter`, Weft's medians of every shape added;
//! `sampled_sum`, the sampled elements of every product added in
//! order (for comparing devices, whose products have the same bits). Where NumPy is missing its fields are `null` and
//! `numpy_unavailable` says why.

use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};
use weft::{Array, Numeric};
use weft_examples::numpy_peer;
use weft_examples::timing::median;
use weft_examples::{AppError, Args, Cli, Kind, Report, load_numeric, run_main};
use weft_ir::DType;

const NAME: &str = "bench_products";

/// One product: `(m, k) @ (k, n)`, the operands laid out as `form` says.
struct Shape {
    form: &'static str,
    dtype: DType,
    m: u64,
    k: u64,
    n: u64,
    /// Where it comes from.
    why: &'static str,
}

const SHAPES: &[Shape] = &[
    Shape {
        form: "A@B",
        dtype: DType::F64,
        m: 1024,
        k: 1024,
        n: 1024,
        why: "a square product",
    },
    Shape {
        form: "A@B",
        dtype: DType::F32,
        m: 1024,
        k: 1024,
        n: 1024,
        why: "a square product",
    },
    Shape {
        form: "A.T@B",
        dtype: DType::F64,
        m: 1024,
        k: 1024,
        n: 1024,
        why: "NPBench's covariance and syrk",
    },
    Shape {
        form: "A@B.T",
        dtype: DType::F64,
        m: 1024,
        k: 1024,
        n: 1024,
        why: "a Gram matrix",
    },
    Shape {
        form: "A@B",
        dtype: DType::F32,
        m: 8,
        k: 30000,
        n: 2000,
        why: "an MLP's layer on a small batch",
    },
    Shape {
        form: "A@B.T",
        dtype: DType::F64,
        m: 200_000,
        k: 32,
        n: 64,
        why: "k-means' x @ c.T",
    },
    Shape {
        form: "A.T@B",
        dtype: DType::F64,
        m: 64,
        k: 200_000,
        n: 32,
        why: "k-means' onehot.T @ x",
    },
    Shape {
        form: "A@x",
        dtype: DType::F64,
        m: 4000,
        k: 5000,
        n: 1,
        why: "a matrix-vector product",
    },
    Shape {
        form: "A.T@x",
        dtype: DType::F64,
        m: 4000,
        k: 5000,
        n: 1,
        why: "through a transpose (atax, bicg)",
    },
    Shape {
        form: "x@A",
        dtype: DType::F64,
        m: 1,
        k: 4000,
        n: 5000,
        why: "a vector-matrix product",
    },
];

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Dense products (matmul, matvec, vecmat, transposed) against NumPy's @ in the same run.",
        0,
        5,
    )
    .help("n", "unused (the shapes are fixed; see --divide)")
    .default_value("warmup", "1")
    .extra(
        "divide",
        "D",
        "divide every dimension by D",
        Kind::Count {
            min: 1,
            max: 1 << 20,
        },
        "1",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

/// NumPy's median time for the product of shape `s` (the peer script run for it alone).
fn numpy_time(s: &Shape, args: &Args) -> Result<f64, String> {
    let words = [
        args.iters.max(1).to_string(),
        args.warmup.to_string(),
        s.form.to_string(),
        numpy_dtype(s.dtype).to_string(),
        s.m.to_string(),
        s.k.to_string(),
        s.n.to_string(),
    ];
    let text = numpy_peer::run_all(NUMPY, &words, args.threads)?;
    text.trim()
        .parse::<f64>()
        .map_err(|e| format!("the NumPy script printed {text:?}: {e}"))
}

/// The NumPy side: argv holds `iters warmup` then `form dtype m k n` per shape; prints one
/// median per shape.
const NUMPY: &str = r#"
import sys, time
import numpy as np
iters, warmup = int(sys.argv[1]), int(sys.argv[2])
rest = sys.argv[3:]
rng = np.random.default_rng(0)
for s in range(0, len(rest), 5):
    form, dtype, m, k, n = rest[s], rest[s + 1], int(rest[s + 2]), int(rest[s + 3]), int(rest[s + 4])
    u = lambda *shape: rng.uniform(-1.0, 1.0, shape).astype(dtype)
    if form == "A@B":
        a, b = u(m, k), u(k, n)
    elif form == "A.T@B":
        a, b = u(k, m).T, u(k, n)
    elif form == "A@B.T":
        a, b = u(m, k), u(n, k).T
    elif form == "A@x":
        a, b = u(m, k), u(k)
    elif form == "A.T@x":
        a, b = u(k, m).T, u(k)
    else:
        a, b = u(k), u(k, n)
    times = []
    for i in range(warmup + iters):
        t = time.perf_counter()
        c = a @ b
        if i >= warmup:
            times.append(time.perf_counter() - t)
    print(sorted(times)[len(times) // 2])
"#;

/// The operands of `shape` in Weft (as laid out by its form) and row-major `f64` copies of
/// `A` (`m x k`) and `B` (`k x n`) for the sampled check.
fn operands(
    np: &Numeric,
    s: &Shape,
    seed: u64,
) -> Result<(Array, Array, Vec<f64>, Vec<f64>), AppError> {
    let u = |shape: &[u64], stream: u64| {
        np.random_uniform(
            shape,
            -1.0,
            1.0,
            weft_examples::sub_seed(seed, stream),
            s.dtype,
        )
    };
    let (m, k, n) = (s.m, s.k, s.n);
    let (a, b) = match s.form {
        "A@B" => (u(&[m, k], 0), u(&[k, n], 1)),
        "A.T@B" => (u(&[k, m], 0).t(), u(&[k, n], 1)),
        "A@B.T" => (u(&[m, k], 0), u(&[n, k], 1).t()),
        "A@x" => (u(&[m, k], 0), u(&[k], 1)),
        "A.T@x" => (u(&[k, m], 0).t(), u(&[k], 1)),
        _ => (u(&[k], 0), u(&[k, n], 1)),
    };
    // Row-major copies through Weft's own reshape of the (possibly transposed) views.
    let dense = |x: &Array, rows: u64, cols: u64| -> Result<Vec<f64>, AppError> {
        Ok(x.copy().reshape(&[rows as i64, cols as i64]).to_vec()?)
    };
    let (ra, rb) = (dense(&a, m, k)?, dense(&b, k, n)?);
    Ok((a, b, ra, rb))
}

/// The largest difference of 16 sampled elements of `c` (`m x n`, row-major) from plain-Rust
/// sums of `a` (`m x k`) times `b` (`k x n`), relative to the largest sum; and those elements
/// of `c` added in order.
fn sampled_diff(c: &[f64], a: &[f64], b: &[f64], s: &Shape) -> (f64, f64) {
    let (m, k, n) = (s.m as usize, s.k as usize, s.n as usize);
    let (mut worst, mut scale, mut sum) = (0.0f64, 0.0f64, 0.0f64);
    for q in 0..16u64 {
        let i = (weft_examples::sub_seed(q, 1) % m as u64) as usize;
        let j = (weft_examples::sub_seed(q, 2) % n as u64) as usize;
        let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        worst = worst.max((c[i * n + j] - want).abs());
        sum += c[i * n + j];
        scale = scale.max(want.abs());
    }
    (worst / scale.max(f64::MIN_POSITIVE), sum)
}

/// NumPy's name of `dtype`.
fn numpy_dtype(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        _ => "float64",
    }
}

fn run(args: &Args) -> Result<(), AppError> {
    let divide = args.extra_u64("divide").ok_or("bad --divide")?;
    let shapes: Vec<Shape> = SHAPES
        .iter()
        .map(|s| {
            let d = |x: u64| if x == 1 { 1 } else { (x / divide).max(1) };
            Shape {
                m: d(s.m),
                k: d(s.k),
                n: d(s.n),
                ..*s
            }
        })
        .collect();
    let np = load_numeric(args)?;
    let (mut rows, mut sampled_sum, mut total) = (Vec::new(), 0.0, 0.0);
    // NumPy's time per shape, or why there is none (the first failure ends the tries).
    let mut numpy_times: Vec<Result<f64, String>> = Vec::new();
    for (q, s) in shapes.iter().enumerate() {
        let (a, b, ra, rb) = operands(&np, s, args.seed.wrapping_add(q as u64))?;
        let mut times = Vec::new();
        let mut last = None;
        for i in 0..args.warmup + args.iters {
            np.runtime(|rt| rt.synchronize())?;
            let start = Instant::now();
            let c = a.matmul(&b);
            c.check()?;
            np.runtime(|rt| rt.synchronize())?;
            if i >= args.warmup {
                times.push(start.elapsed().as_secs_f64());
            }
            last = Some(c);
        }
        let c = last.ok_or("no product ran")?.to_vec()?;
        let seconds = median(&times);
        total += seconds;
        let flops = 2.0 * (s.m * s.k * s.n) as f64;
        let (diff, sum) = sampled_diff(&c, &ra, &rb, s);
        sampled_sum += sum;
        rows.push(json!({
            "form": s.form,
            "dtype": s.dtype.to_string(),
            "m": s.m,
            "k": s.k,
            "n": s.n,
            "why": s.why,
            "weft_seconds": seconds,
            "weft_gflops": flops / seconds / 1e9,
            "max_rel_diff_sampled": diff,
        }));
        let numpy = match numpy_times.last() {
            Some(Err(why)) => Err(why.clone()),
            _ => numpy_time(s, args),
        };
        numpy_times.push(numpy);
    }
    let peer: Result<Vec<f64>, String> = numpy_times.into_iter().collect();
    let mut report = Report::new(NAME, args);

    let mut ratios = Vec::new();
    match &peer {
        Ok(times) => {
            for (row, &t) in rows.iter_mut().zip(times) {
                let flops = 2.0
                    * row["m"].as_f64().unwrap_or(0.0)
                    * row["k"].as_f64().unwrap_or(0.0)
                    * row["n"].as_f64().unwrap_or(0.0);
                let ratio = t / row["weft_seconds"].as_f64().unwrap_or(f64::NAN);
                row["numpy_seconds"] = json!(t);
                row["numpy_gflops"] = json!(flops / t / 1e9);
                row["ratio_vs_numpy"] = json!(ratio);
                ratios.push(ratio);
            }
            let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
            report
                .set(
                    "ratio_vs_numpy_min",
                    ratios.iter().copied().fold(f64::INFINITY, f64::min),
                )
                .set("ratio_vs_numpy_geomean", geomean);
        }
        Err(why) => {
            for row in rows.iter_mut() {
                for key in ["numpy_seconds", "numpy_gflops", "ratio_vs_numpy"] {
                    row[key] = Value::Null;
                }
            }
            report
                .set("ratio_vs_numpy_min", Value::Null)
                .set("ratio_vs_numpy_geomean", Value::Null)
                .set("numpy_unavailable", why.as_str());
        }
    }
    for row in &rows {
        args.say(&format!(
            "{NAME}: {} {} ({}, {}, {}): Weft {:.2} GFLOP/s, NumPy {}",
            row["form"].as_str().unwrap_or(""),
            row["dtype"].as_str().unwrap_or(""),
            row["m"],
            row["k"],
            row["n"],
            row["weft_gflops"].as_f64().unwrap_or(f64::NAN),
            row["numpy_gflops"]
                .as_f64()
                .map_or("unavailable".to_string(), |g| format!("{g:.2} GFLOP/s")),
        ))?;
    }
    report
        .set("shapes", rows.len() as u64)
        .set("divide", divide)
        .set("seconds_per_iter", total)
        .set("sampled_sum", sampled_sum)
        .set("by_shape", Value::Array(rows));
    report.runtime_stats(&np);
    report.print()?;
    Ok(())
}
