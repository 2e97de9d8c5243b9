//! Hand-written plain-Rust versions of the benchmarks' algorithms, as a performance engineer
//! would write them without Weft: one pass per sweep for the stencil (double-buffered), and
//! CG and BiCGSTAB whose vector updates and dot products share passes with the CSR products
//! (32-bit column indices, as the Weft runs use). They run on a rayon pool at the benchmark's
//! thread count; the benchmarks time them beside Weft in the same process.

use rayon::prelude::*;

use crate::sparse_reference::{Csr, dot, ordered_sum};

/// Rows per rayon task.
const ROWS: usize = 1 << 12;

/// `sweeps` sweeps of the 5-point stencil on the `(n+2) x (n+2)` row-major `grid`
/// (`new[i][j] = 0.2 * (c + n + e + w + s)` on the interior, in that order of additions, as
/// the Weft version computes it), double-buffered: each sweep reads one buffer and writes the
/// other in one pass. The result is left in `grid`.
pub fn stencil(grid: &mut Vec<f64>, n: usize, sweeps: usize) {
    let w = n + 2;
    let mut next = grid.clone();
    for _ in 0..sweeps {
        let old: &[f64] = grid;
        next[w..w * (n + 1)]
            .par_chunks_mut(w)
            .enumerate()
            .for_each(|(r, row)| {
                let i = r + 1;
                // Equal-length slices, so the compiler drops the bounds checks and vectorizes.
                let up = &old[(i - 1) * w + 1..(i - 1) * w + 1 + n];
                let mid = &old[i * w..i * w + w];
                let down = &old[(i + 1) * w + 1..(i + 1) * w + 1 + n];
                let (west, center, east) = (&mid[..n], &mid[1..n + 1], &mid[2..n + 2]);
                let out = &mut row[1..n + 1];
                for j in 0..n {
                    let avg = center[j] + up[j] + east[j] + west[j] + down[j];
                    out[j] = 0.2 * avg;
                }
            });
        std::mem::swap(grid, &mut next);
    }
}

/// A CSR matrix with 32-bit column indices and row starts.
#[derive(Clone, Debug)]
pub struct Csr32 {
    indptr: Vec<u32>,
    indices: Vec<u32>,
    data: Vec<f64>,
}

impl Csr32 {
    /// `a` with 32-bit indices, if its indices fit.
    pub fn new(a: &Csr) -> Option<Csr32> {
        let narrow = |v: &[usize]| -> Option<Vec<u32>> {
            v.iter().map(|&i| u32::try_from(i).ok()).collect()
        };
        Some(Csr32 {
            indptr: narrow(&a.indptr)?,
            indices: narrow(&a.indices)?,
            data: a.data.clone(),
        })
    }

    fn row(&self, i: usize, x: &[f64]) -> f64 {
        let (lo, hi) = (self.indptr[i] as usize, self.indptr[i + 1] as usize);
        self.indices[lo..hi]
            .iter()
            .zip(&self.data[lo..hi])
            .map(|(&c, &v)| v * x[c as usize])
            .sum()
    }

    /// `y = A x`, returning `sum(y * with)` from the same pass.
    fn product_dot(&self, x: &[f64], y: &mut [f64], with: &[f64]) -> f64 {
        ordered_sum(y.par_chunks_mut(ROWS).enumerate().map(|(c, ys)| {
            let base = c * ROWS;
            let mut dot = 0.0;
            for (k, yi) in ys.iter_mut().enumerate() {
                *yi = self.row(base + k, x);
                dot += *yi * with[base + k];
            }
            dot
        }))
    }

    /// `y = A x`, returning `(sum(y * s), sum(y * y))` from the same pass.
    fn product_dots(&self, x: &[f64], y: &mut [f64], s: &[f64]) -> (f64, f64) {
        ordered_pair_sum(y.par_chunks_mut(ROWS).enumerate().map(|(c, ys)| {
            let base = c * ROWS;
            let (mut ys_dot, mut yy) = (0.0, 0.0);
            for (k, yi) in ys.iter_mut().enumerate() {
                *yi = self.row(base + k, x);
                ys_dot += *yi * s[base + k];
                yy += *yi * *yi;
            }
            (ys_dot, yy)
        }))
    }
}

/// The sums of `parts` (one pair per chunk) in chunk order, whatever the pool's splitting.
fn ordered_pair_sum(parts: impl IndexedParallelIterator<Item = (f64, f64)>) -> (f64, f64) {
    parts
        .collect::<Vec<_>>()
        .iter()
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// The residual norms of a solve (first `||b||`, then one per iteration) and the seconds each
/// iteration took.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// `||r||` before the first iteration and after each.
    pub residuals: Vec<f64>,
    /// Seconds per iteration.
    pub seconds: Vec<f64>,
}

/// CG from `x = 0` for `iters` iterations.
/// Per iteration: `q = A p` with `p . q`; `x += alpha p`, `r -= alpha q` with `r . r`;
/// `p = r + beta p`: three passes.
pub fn cg(a: &Csr32, b: &[f64], iters: usize) -> History {
    let n = b.len();
    let (mut x, mut r, mut p, mut q) = (vec![0.0; n], b.to_vec(), b.to_vec(), vec![0.0; n]);
    let mut rr = dot(&r, &r);
    let mut h = History {
        residuals: vec![rr.sqrt()],
        seconds: Vec::with_capacity(iters),
    };
    for _ in 0..iters {
        let start = std::time::Instant::now();
        let pq = a.product_dot(&p, &mut q, &p);
        let alpha = rr / pq;
        let rr_new = ordered_sum(
            x.par_chunks_mut(ROWS)
                .zip(r.par_chunks_mut(ROWS))
                .zip(p.par_chunks(ROWS).zip(q.par_chunks(ROWS)))
                .map(|((xs, rs), (ps, qs))| {
                    let mut acc = 0.0;
                    for k in 0..xs.len() {
                        xs[k] += alpha * ps[k];
                        rs[k] -= alpha * qs[k];
                        acc += rs[k] * rs[k];
                    }
                    acc
                }),
        );
        let beta = rr_new / rr;
        p.par_iter_mut()
            .zip(r.par_iter())
            .for_each(|(pi, &ri)| *pi = ri + beta * *pi);
        rr = rr_new;
        h.residuals.push(rr.sqrt());
        h.seconds.push(start.elapsed().as_secs_f64());
    }
    h
}

/// BiCGSTAB from `x = 0` for `iters` iterations.
/// Per iteration: `p = r + beta (p - omega v)`; `v = A p` with `r^ . v`; `s = r - alpha v`;
/// `t = A s` with `t . s` and `t . t`; `x += alpha p + omega s`, `r = s - omega t` with
/// `r^ . r` and `r . r`: five passes.
pub fn bicgstab(a: &Csr32, b: &[f64], iters: usize) -> History {
    let n = b.len();
    let (mut x, mut r, r_hat) = (vec![0.0; n], b.to_vec(), b.to_vec());
    let (mut p, mut v, mut s, mut t) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut rho, mut alpha, mut omega) = (1.0, 1.0, 1.0);
    let mut rho_new = dot(&r_hat, &r);
    let mut h = History {
        residuals: vec![dot(&r, &r).sqrt()],
        seconds: Vec::with_capacity(iters),
    };
    for _ in 0..iters {
        let start = std::time::Instant::now();
        let beta = (rho_new / rho) * (alpha / omega);
        p.par_iter_mut()
            .zip(r.par_iter().zip(v.par_iter()))
            .for_each(|(pi, (&ri, &vi))| *pi = ri + beta * (*pi - omega * vi));
        let rv = a.product_dot(&p, &mut v, &r_hat);
        alpha = rho_new / rv;
        s.par_iter_mut()
            .zip(r.par_iter().zip(v.par_iter()))
            .for_each(|(si, (&ri, &vi))| *si = ri - alpha * vi);
        let (ts, tt) = a.product_dots(&s, &mut t, &s);
        omega = ts / tt;
        let (rr_hat, rr) = ordered_pair_sum(
            x.par_chunks_mut(ROWS)
                .zip(r.par_chunks_mut(ROWS))
                .zip(p.par_chunks(ROWS).zip(s.par_chunks(ROWS)))
                .zip(t.par_chunks(ROWS).zip(r_hat.par_chunks(ROWS)))
                .map(|(((xs, rs), (ps, ss)), (ts, hs))| {
                    let (mut rh, mut rr) = (0.0, 0.0);
                    for k in 0..xs.len() {
                        xs[k] += alpha * ps[k] + omega * ss[k];
                        rs[k] = ss[k] - omega * ts[k];
                        rh += hs[k] * rs[k];
                        rr += rs[k] * rs[k];
                    }
                    (rh, rr)
                }),
        );
        rho = rho_new;
        rho_new = rr_hat;
        h.residuals.push(rr.sqrt());
        h.seconds.push(start.elapsed().as_secs_f64());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse_reference;

    #[test]
    fn the_stencil_is_the_sequential_double_buffered_sweep() {
        let n = 7;
        let w = n + 2;
        let grid: Vec<f64> = (0..w * w).map(|k| ((k * 37) % 11) as f64 / 11.0).collect();
        let mut fast = grid.clone();
        stencil(&mut fast, n, 3);
        let mut slow = grid;
        for _ in 0..3 {
            let old = slow.clone();
            for i in 1..=n {
                for j in 1..=n {
                    let at = |r: usize, c: usize| old[r * w + c];
                    let avg = at(i, j) + at(i - 1, j) + at(i, j + 1) + at(i, j - 1) + at(i + 1, j);
                    slow[i * w + j] = 0.2 * avg;
                }
            }
        }
        assert_eq!(fast, slow);
    }

    #[test]
    fn fused_solvers_follow_the_one_pass_per_operation_ones() {
        let a = Csr::poisson2d(12);
        let b: Vec<f64> = (0..a.rows).map(|i| ((i * 13) % 7) as f64 + 1.0).collect();
        let a32 = Csr32::new(&a).expect("small indices");
        for (fast, slow) in [
            (
                cg(&a32, &b, 10).residuals,
                sparse_reference::cg(&a, &b, 0.0, 10).residuals,
            ),
            (
                bicgstab(&a32, &b, 10).residuals,
                sparse_reference::bicgstab(&a, &b, 0.0, 10).residuals,
            ),
        ] {
            assert_eq!(fast.len(), slow.len());
            for (k, (f, s)) in fast.iter().zip(&slow).enumerate() {
                assert!((f - s).abs() <= 1e-8 * slow[0], "iteration {k}: {f} vs {s}");
            }
        }
    }

    /// Every reduction adds its chunks in order, so the residuals are the same bits on any
    /// number of threads, run after run (the benchmarks compare them across devices bit for
    /// bit). Sizes span several chunks so that rayon has work to split.
    #[test]
    fn the_solvers_give_the_same_bits_on_any_number_of_threads() {
        let a = Csr::poisson2d(150);
        let b: Vec<f64> = (0..a.rows).map(|i| ((i * 13) % 7) as f64 + 1.0).collect();
        let a32 = Csr32::new(&a).expect("small indices");
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| {
                (
                    cg(&a32, &b, 6).residuals,
                    bicgstab(&a32, &b, 6).residuals,
                    sparse_reference::cg(&a, &b, 0.0, 6).residuals,
                    sparse_reference::dot(&b, &b),
                )
            })
        };
        let one = on(1);
        for threads in [2, 3, 4, 4] {
            assert_eq!(on(threads), one, "{threads} threads against one");
        }
    }
}
