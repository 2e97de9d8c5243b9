//! Plain-Rust reference implementations of the example applications, independent of Weft.

use std::f64::consts::PI;

/// The error function, from its everywhere-convergent series of positive terms (Abramowitz
/// and Stegun 7.1.6), good to a few ulps relative: the IR interpreter's. Weft's CPU back end
/// computes `erf` otherwise (fdlibm's algorithm, or the math lowering's rational fits), so the
/// series is independent of what the examples run.
pub use weft_ir::interp::erf;

/// The standard normal CDF through [`erf`]: `(1 + erf(d / sqrt(2))) / 2`.
pub fn cnd_erf(d: f64) -> f64 {
    0.5 * (1.0 + erf(d / 2f64.sqrt()))
}

/// The standard normal CDF by the 5-term polynomial of the CUDA SDK sample (Abramowitz and
/// Stegun 26.2.17), reflected for positive `d`.
pub fn cnd_poly(d: f64) -> f64 {
    let k = 1.0 / (1.0 + 0.2316419 * d.abs());
    let poly = k
        * (0.31938153
            + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))));
    let c = (-0.5 * d * d).exp() / (2.0 * PI).sqrt() * poly;
    if d > 0.0 { 1.0 - c } else { c }
}

/// Black-Scholes prices of European options: returns `(call, put)`. `poly` picks
/// [`cnd_poly`] over [`cnd_erf`].
pub fn black_scholes(
    s: &[f64],
    x: &[f64],
    t: &[f64],
    r: f64,
    v: f64,
    poly: bool,
) -> (Vec<f64>, Vec<f64>) {
    assert!(
        s.len() == x.len() && x.len() == t.len(),
        "input lengths differ"
    );
    let cnd = if poly { cnd_poly } else { cnd_erf };
    let mut call = Vec::with_capacity(s.len());
    let mut put = Vec::with_capacity(s.len());
    for i in 0..s.len() {
        let (s, x, t) = (s[i], x[i], t[i]);
        let vol_sqrt_t = v * t.sqrt();
        let d1 = ((s / x).ln() + (r + v * v / 2.0) * t) / vol_sqrt_t;
        let d2 = d1 - vol_sqrt_t;
        let discounted_strike = x * (-r * t).exp();
        call.push(s * cnd(d1) - discounted_strike * cnd(d2));
        put.push(discounted_strike * cnd(-d2) - s * cnd(-d1));
    }
    (call, put)
}

/// `sweeps` Jacobi sweeps of the 5-point stencil on a row-major `(n+2) x (n+2)` grid: each
/// interior point becomes `0.2 * (itself + its four neighbours)`, all computed from the
/// previous sweep's grid; the boundary is left as it is.
pub fn stencil(grid: &[f64], n: usize, sweeps: usize) -> Vec<f64> {
    let w = n + 2;
    assert_eq!(grid.len(), w * w, "grid is not (n+2) x (n+2)");
    let mut cur = grid.to_vec();
    let mut next = cur.clone();
    for _ in 0..sweeps {
        for i in 1..=n {
            for j in 1..=n {
                let at = |r: usize, c: usize| cur[r * w + c];
                next[i * w + j] =
                    0.2 * (at(i, j) + at(i - 1, j) + at(i, j + 1) + at(i, j - 1) + at(i + 1, j));
            }
        }
        std::mem::swap(&mut cur, &mut next);
    }
    cur
}

/// `A x` for a row-major `n x n` matrix.
pub fn matvec(a: &[f64], x: &[f64]) -> Vec<f64> {
    let n = x.len();
    assert_eq!(a.len(), n * n, "matrix is not n x n");
    a.chunks_exact(n)
        .map(|row| row.iter().zip(x).map(|(a, x)| a * x).sum())
        .collect()
}

/// The 2-norm.
pub fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// `iters` Jacobi steps for `A x = b` from `x0`: `x_i <- (b_i - sum_{j != i} A_ij x_j) / A_ii`.
pub fn jacobi(a: &[f64], b: &[f64], x0: &[f64], iters: usize) -> Vec<f64> {
    let n = b.len();
    assert_eq!(a.len(), n * n, "matrix is not n x n");
    assert_eq!(x0.len(), n, "x0 has the wrong length");
    let mut x = x0.to_vec();
    for _ in 0..iters {
        let next: Vec<f64> = (0..n)
            .map(|i| {
                let off: f64 = (0..n)
                    .filter(|&j| j != i)
                    .map(|j| a[i * n + j] * x[j])
                    .sum();
                (b[i] - off) / a[i * n + i]
            })
            .collect();
        x = next;
    }
    x
}

/// `|A x - b| / |b|`.
pub fn relative_residual(a: &[f64], b: &[f64], x: &[f64]) -> f64 {
    let ax = matvec(a, x);
    let r: Vec<f64> = ax.iter().zip(b).map(|(p, q)| p - q).collect();
    norm(&r) / norm(b)
}

/// `C = A @ B` for row-major `a` (`m x k`) and `b` (`k x n`) in the canonical product's order
/// (`weft_ir::product`), written out here independently: each element's terms in blocks of
/// 1,024 (the last one cut short), each block one chain of `fma`s from zero in increasing
/// `k`, the blocks' sums combined by the aligned pairwise tree as its recursion (the left
/// subtree takes the largest power of two of blocks below the count). Every operation is
/// rounded to `f32` when `single`.
pub fn canonical_product(
    a: &[f64],
    b: &[f64],
    (m, k, n): (usize, usize, usize),
    single: bool,
) -> Vec<f64> {
    const BLOCK: usize = 1024;
    fn tree(sums: &[f64], single: bool) -> f64 {
        match sums {
            [] => 0.0,
            [one] => *one,
            _ => {
                let half = 1usize << (usize::BITS - 1 - (sums.len() - 1).leading_zeros());
                let (l, r) = (tree(&sums[..half], single), tree(&sums[half..], single));
                if single {
                    f64::from(l as f32 + r as f32)
                } else {
                    l + r
                }
            }
        }
    }
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let sums: Vec<f64> = (0..k)
                .step_by(BLOCK)
                .map(|lo| {
                    let terms = lo..(lo + BLOCK).min(k);
                    if single {
                        let s = terms.fold(0.0f32, |s, p| {
                            (a[i * k + p] as f32).mul_add(b[p * n + j] as f32, s)
                        });
                        f64::from(s)
                    } else {
                        terms.fold(0.0, |s, p| a[i * k + p].mul_add(b[p * n + j], s))
                    }
                })
                .collect();
            c[i * n + j] = tree(&sums, single);
        }
    }
    c
}

/// `y = A @ x` for a row-major `a` (`m x k`) in the order of a product by parts
/// (`weft_ir::matvec`), written out here independently: each row cut into eight parts of
/// `k / 8` terms rounded up to a multiple of 8 (the last cut at `k`); each part's terms in
/// eight interleaved running sums (term `p` of the part into sum `p mod 8`, the terms after
/// the last whole group of eight into a ninth), combined as
/// `((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))` and then plus the ninth; the eight
/// parts' sums combined the same way. Each term is a rounded product, added with a rounding.
pub fn matvec_by_parts(a: &[f64], x: &[f64], (m, k): (usize, usize)) -> Vec<f64> {
    fn eight(s: &[f64]) -> f64 {
        ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    }
    let width = k.div_ceil(8).div_ceil(8) * 8;
    (0..m)
        .map(|i| {
            let row = &a[i * k..(i + 1) * k];
            let parts: Vec<f64> = (0..8)
                .map(|j| {
                    let lo = (j * width).min(k);
                    let hi = (lo + width).min(k);
                    let whole = lo + (hi - lo) / 8 * 8;
                    let mut sums = [0.0f64; 8];
                    for p in lo..whole {
                        sums[(p - lo) % 8] += row[p] * x[p];
                    }
                    let tail = (whole..hi).fold(0.0, |s, p| s + row[p] * x[p]);
                    eight(&sums) + tail
                })
                .collect();
            eight(&parts)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from CPython's `math.erf` (correctly rounded).
    #[test]
    fn erf_matches_known_values() {
        let table = [
            (0.0, 0.0),
            (1e-10, 1.1283791670955126e-10),
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (3.0, 0.9999779095030014),
            (4.0, 0.9999999845827421),
            (5.0, 0.9999999999984626),
        ];
        for (x, want) in table {
            for (x, want) in [(x, want), (-x, -want)] {
                let got = erf(x);
                assert!(
                    (got - want).abs() <= 4.0 * f64::EPSILON * want.abs().max(1e-300),
                    "erf({x}) = {got:e}, want {want:e}"
                );
            }
        }
        assert_eq!(erf(7.0), 1.0);
        assert_eq!(erf(-30.0), -1.0);
        assert!(erf(f64::NAN).is_nan());
    }

    #[test]
    fn cnd_forms_agree_to_the_polynomials_accuracy() {
        for i in -800..=800 {
            let d = f64::from(i) / 100.0;
            let (e, p) = (cnd_erf(d), cnd_poly(d));
            assert!(
                (e - p).abs() < 7.5e-8,
                "cnd({d}): erf form {e}, polynomial {p}"
            );
        }
        assert_eq!(cnd_erf(0.0), 0.5);
    }

    #[test]
    fn black_scholes_known_price_and_parity() {
        // S = 100, X = 100, T = 1, r = 0.05, v = 0.2: call 10.4506, put 5.5735 (Hull).
        let (c, p) = black_scholes(&[100.0], &[100.0], &[1.0], 0.05, 0.2, false);
        assert!(
            (c[0] - 10.450_583_572_185_565).abs() < 1e-9,
            "call {}",
            c[0]
        );
        assert!((p[0] - 5.573_526_022_256_971).abs() < 1e-9, "put {}", p[0]);
        let parity = 100.0 - 100.0 * (-0.05f64).exp();
        assert!((c[0] - p[0] - parity).abs() < 1e-12);
    }

    #[test]
    fn stencil_keeps_the_boundary_and_averages() {
        // 1x1 interior: the centre becomes 0.2 * (c + 4 neighbours).
        let g = [9.0, 1.0, 9.0, 2.0, 5.0, 3.0, 9.0, 4.0, 9.0];
        let out = stencil(&g, 1, 1);
        assert_eq!(out[4], 0.2 * (5.0 + 1.0 + 3.0 + 2.0 + 4.0));
        for i in [0, 1, 2, 3, 5, 6, 7, 8] {
            assert_eq!(out[i], g[i]);
        }
        // A constant grid is a fixed point.
        assert!(
            stencil(&[0.5; 25], 3, 4)
                .iter()
                .all(|&v| (v - 0.5).abs() < 1e-15)
        );
    }

    #[test]
    fn jacobi_converges_on_a_dominant_system() {
        let a = [4.0, 1.0, 0.0, 1.0, 5.0, 2.0, 0.0, 2.0, 6.0];
        let b = [1.0, 2.0, 3.0];
        let x = jacobi(&a, &b, &[0.0; 3], 100);
        assert!(relative_residual(&a, &b, &x) < 1e-13);
    }
}
