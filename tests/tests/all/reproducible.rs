//! Reductions are reproducible: `sum`, `prod`, `dot` and `norm` of 1-d and 2-d arrays give
//! the bits of the canonical order (`weft_ir::reduction::canonical`, an independent
//! recursive implementation of the definition) for 1 and 2 threads, 1 and 3 pieces and every
//! SIMD path this CPU runs, on lengths that are not multiples of any lane count, that cross
//! the CPU back end's chunks, and empty arrays.

use weft::{Config, SimdPath};
use weft_ir::reduction::canonical;
use weft_ir::{DType, ReduceOp, Scalar};

/// Values whose sums and products depend on the order: mixed magnitudes and signs.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut h = seed | 1;
    (0..n)
        .map(|_| {
            h = h
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mag = [1e-3, 1.0, 3.5, 1e5, 1e11][(h >> 40) as usize % 5];
            let frac = ((h >> 20) % 1000) as f64 / 999.0;
            let sign = if (h >> 60) & 1 == 0 { 1.0 } else { -1.0 };
            sign * mag * (0.5 + frac)
        })
        .collect()
}

/// Factors near one, so that long products stay finite and still depend on the order.
fn factors(n: usize, seed: u64) -> Vec<f64> {
    values(n, seed)
        .iter()
        .map(|x| 1.0 + (x.abs().fract() - 0.5) * 1e-3)
        .collect()
}

/// `init op (the canonical reduction of value(point))` over `shape`, as f64 bits.
fn reference(op: ReduceOp, init: f64, shape: &[u64], value: &dyn Fn(&[u64]) -> f64) -> u64 {
    let tree = canonical(op, DType::F64, shape, &|p| Scalar::F64(value(p)));
    match tree {
        Some(Scalar::F64(t)) => match op {
            ReduceOp::Prod => (init * t).to_bits(),
            _ => (init + t).to_bits(),
        },
        _ => init.to_bits(),
    }
}

const SHAPES: [&[u64]; 9] = [
    &[0],
    &[1],
    &[7],
    &[1000],
    &[16_384 + 77],
    &[70_001],
    &[37, 61],
    &[3, 20_000],
    &[2, 0],
];

/// Every reduction of every shape, as bits, run with `config`; checked against the
/// canonical order.
fn run(config: Config) -> Vec<u64> {
    let label = format!(
        "threads {}, pieces {}, simd {:?}",
        config.threads, config.pieces, config.simd
    );
    let np = weft_tests::numeric_with(config);
    let mut out = Vec::new();
    for (k, shape) in SHAPES.iter().enumerate() {
        let n: u64 = shape.iter().product();
        let n = n as usize;
        let flat = |p: &[u64]| -> usize {
            p.iter()
                .zip(shape.iter())
                .fold(0u64, |a, (&c, &e)| a * e + c) as usize
        };
        let xs = values(n, 11 + k as u64);
        let ys = values(n, 97 + k as u64);
        let fs = factors(n, 5 + k as u64);
        let a = np.from_vec(shape, &xs);
        let b = np.from_vec(shape, &ys);
        let f = np.from_vec(shape, &fs);
        let got_sum = a.sum().to_vec().expect("sum")[0].to_bits();
        let got_prod = f.prod().to_vec().expect("prod")[0].to_bits();
        let want_sum = reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)]);
        let want_prod = reference(ReduceOp::Prod, 1.0, shape, &|p| fs[flat(p)]);
        assert_eq!(got_sum, want_sum, "sum of {shape:?} ({label})");
        assert_eq!(got_prod, want_prod, "prod of {shape:?} ({label})");
        out.extend([got_sum, got_prod]);
        if shape.len() == 1 {
            let got_dot = a.dot(&b).to_vec().expect("dot")[0].to_bits();
            let got_norm = a.norm().to_vec().expect("norm")[0].to_bits();
            let want_dot = reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)] * ys[flat(p)]);
            let sq = reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)] * xs[flat(p)]);
            let want_norm = f64::from_bits(sq).sqrt().to_bits();
            assert_eq!(got_dot, want_dot, "dot of {shape:?} ({label})");
            assert_eq!(got_norm, want_norm, "norm of {shape:?} ({label})");
            out.extend([got_dot, got_norm]);
        }
        // Fused with the element-wise work that feeds it: the same bits.
        let fused = (&a * 2.0 + &b).sum().to_vec().expect("fused sum")[0].to_bits();
        let want = reference(ReduceOp::Sum, 0.0, shape, &|p| {
            xs[flat(p)] * 2.0 + ys[flat(p)]
        });
        assert_eq!(fused, want, "fused sum of {shape:?} ({label})");
        out.push(fused);
    }
    out
}

fn config(threads: usize, pieces: u64, simd: Option<SimdPath>) -> Config {
    Config {
        threads,
        pieces,
        simd,
        component_cache: None,
        ..Config::default()
    }
}

#[test]
fn reductions_give_the_canonical_bits_on_any_threads_pieces_and_path() {
    let base = run(config(1, 1, None));
    for (threads, pieces) in [(2, 1), (1, 3), (2, 3)] {
        assert!(run(config(threads, pieces, None)) == base);
    }
    let mut paths = 0;
    for path in SimdPath::ALL {
        if weft::Runtime::new(config(2, 3, Some(path))).is_ok() {
            assert!(run(config(2, 3, Some(path))) == base, "{path}");
            paths += 1;
        }
    }
    assert!(paths >= 2, "scalar and 128-bit code run everywhere");
}

#[test]
fn the_canonical_order_is_not_the_sequential_one() {
    // The test above would pass for a sequential sum only if the orders agreed.
    let xs = values(1000, 14);
    let sequential: f64 = xs.iter().fold(0.0, |a, &x| a + x);
    let want = reference(ReduceOp::Sum, 0.0, &[1000], &|p| xs[p[0] as usize]);
    assert_ne!(sequential.to_bits(), want);
}
