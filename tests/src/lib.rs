//! Cross-crate tests of Weft, and what they share: plain-Rust reference implementations of the
//! example applications ([`reference`](mod@reference)) and comparison helpers ([`assert_close`]).
//!
//! The references are written independently of the host and the numeric plugin: their own
//! `erf`, their own loops, sequential f64 arithmetic. Tests feed them the same inputs (read
//! back from Weft or from `.npy` files) and compare every output element.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod programs;
pub mod reference;

use weft::{Config, Numeric, Runtime, Sparse};

/// The numeric plugin in a fresh runtime with two worker threads and `pieces` points per
/// launch (more than one splits every array into tiles, to check that results do not depend
/// on partitioning).
///
/// Under the PTX check (`WEFT_PTX_CHECK=1`) a plugin call may run for up to two minutes:
/// the check assembles each new kernel with `ptxas` inside whatever flush a plugin's call
/// starts (its reads, a full window), and a plugin's deadline counts that time too. Under
/// the test suite's load on a 2-core machine, one `div` that flushed 80 Jacobi steps ran past
/// the default 10 s.
pub fn numeric(pieces: u64) -> Numeric {
    let mut config = Config {
        threads: 2,
        pieces,
        ..Config::from_env()
    };
    if config.ptx_check {
        let two_minutes = std::time::Duration::from_secs(120);
        config.plugin_limits.time = config.plugin_limits.time.max(two_minutes);
    }
    numeric_with(config)
}

/// The numeric plugin in a fresh runtime configured by `config`.
pub fn numeric_with(config: Config) -> Numeric {
    let rt = Runtime::new(config).expect("the runtime starts");
    Numeric::new(rt, weft_plugin_artifacts::NUMERIC).expect("the numeric plugin loads")
}

/// The numeric and sparse plugins in one fresh runtime configured by `config`.
pub fn plugins_with(config: Config) -> (Numeric, Sparse) {
    let np = numeric_with(config);
    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE).expect("the sparse plugin loads");
    (np, sp)
}

/// Checks that `got` and `want` have the same length and that every element satisfies
/// `|got - want| <= atol + rtol * |want|` (NaNs must match NaNs). On failure, panics naming
/// `what`, the number of bad elements and the worst one.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: {} elements, the reference has {}",
        got.len(),
        want.len()
    );
    let mut bad = 0usize;
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        if !ok {
            bad += 1;
            let excess = if g.is_nan() {
                f64::INFINITY
            } else {
                (g - w).abs() / (atol + rtol * w.abs())
            };
            if worst.is_none_or(|(_, e)| excess > e) {
                worst = Some((i, excess));
            }
        }
    }
    if let Some((i, _)) = worst {
        panic!(
            "{what}: {bad} of {} elements differ beyond atol {atol:e} + rtol {rtol:e}; worst at \
             [{i}]: got {:e}, want {:e} (difference {:e})",
            got.len(),
            got[i],
            want[i],
            (got[i] - want[i]).abs()
        );
    }
}

/// `n` values uniform in `[lo, hi)` from a linear congruential generator seeded with `seed`:
/// deterministic test data, independent of the plugins' random numbers.
pub fn uniform_data(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// The largest absolute difference between two equally long slices (0 for empty ones).
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_values_pass() {
        assert_close(
            "x",
            &[1.0, 2.0, f64::NAN],
            &[1.0 + 1e-12, 2.0, f64::NAN],
            1e-9,
            0.0,
        );
        assert_eq!(max_abs_diff(&[1.0, 5.0], &[1.5, 5.0]), 0.5);
    }

    #[test]
    #[should_panic(expected = "1 of 2 elements differ")]
    fn far_values_fail() {
        assert_close("x", &[1.0, 2.0], &[1.0, 2.1], 1e-9, 1e-9);
    }
}
