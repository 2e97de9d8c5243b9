//! Singular values alone (NumPy's `svd(a, compute_uv=False)`, and the matrix 2-norm, `-2`
//! norm and nuclear norm), on the host, as LAPACK finds them: Householder reflections
//! reduce the matrix to an upper bidiagonal one (Golub and Kahan, `4 m n^2 - 4 n^3 / 3`
//! flops, each reflection applied a row at a time, contiguous in the row-major matrix), and
//! the bidiagonal `B`'s singular values are the non-negative eigenvalues of the symmetric
//! tridiagonal matrix of order `2n` with a zero diagonal and `d0, e0, d1, e1, ...` beside it
//! (the Golub-Kahan form of `[[0, B^T], [B, 0]]`), found by implicit QL steps with
//! Wilkinson's shift. Both stages are backward stable: each value is within a small multiple
//! of `eps ||a||` of the exact one, LAPACK's bound (the one-sided Jacobi of `svd.rs` is
//! more accurate in the smallest values of a graded matrix and about 20-200 times slower;
//! `svd` with vectors still uses it).

/// QL steps per eigenvalue before giving up (a handful converge in practice).
const MAX_STEPS: usize = 60;

/// The bidiagonal form of `a` (`m` x `n`, row-major, `m >= n`, overwritten): its diagonal
/// (`n`) and superdiagonal (`n - 1`) up to the signs, which do not change singular values.
fn bidiagonalize(a: &mut [f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut d = vec![0.0; n];
    let mut e = vec![0.0; n.saturating_sub(1)];
    let mut v = vec![0.0; m];
    let mut w = vec![0.0; n];
    for k in 0..n {
        // From the left: zero column k below the diagonal.
        let len = m - k;
        for (i, vi) in v[..len].iter_mut().enumerate() {
            *vi = a[(k + i) * n + k];
        }
        if let Some((alpha, beta)) = reflector(&mut v[..len]) {
            d[k] = alpha;
            // w[j] = v . a[k.., j] for the columns right of k, a row at a time.
            w[k + 1..].iter_mut().for_each(|x| *x = 0.0);
            for (i, &vi) in v[..len].iter().enumerate() {
                let row = &a[(k + i) * n..(k + i + 1) * n];
                for (wj, &x) in w[k + 1..].iter_mut().zip(&row[k + 1..]) {
                    *wj += vi * x;
                }
            }
            for (i, &vi) in v[..len].iter().enumerate() {
                let row = &mut a[(k + i) * n..(k + i + 1) * n];
                let f = beta * vi;
                for (x, &wj) in row[k + 1..].iter_mut().zip(&w[k + 1..]) {
                    *x -= f * wj;
                }
            }
        } else {
            d[k] = 0.0;
        }
        if k + 1 >= n {
            break;
        }
        // From the right: zero row k right of the superdiagonal.
        let mut u: Vec<f64> = a[k * n + k + 1..(k + 1) * n].to_vec();
        if let Some((alpha, beta)) = reflector(&mut u) {
            e[k] = alpha;
            for i in k + 1..m {
                let row = &mut a[i * n + k + 1..(i + 1) * n];
                let s: f64 = row.iter().zip(&u).map(|(x, y)| x * y).sum();
                let f = beta * s;
                for (x, &uj) in row.iter_mut().zip(&u) {
                    *x -= f * uj;
                }
            }
        } else {
            e[k] = 0.0;
        }
    }
    (d, e)
}

/// Turns `x` into the Householder vector `v` (`v[0] = 1`) of `I - beta v v^T`, which maps
/// `x` to `(alpha, 0, ...)`, and returns `(alpha, beta)`; `None` where `x` is zero (the
/// reflection is the identity). With `v[0] = 1`, `|v[i]| <= 1`: no product overflows or
/// underflows for entries near either end of the range.
fn reflector(x: &mut [f64]) -> Option<(f64, f64)> {
    let scale = x.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    if scale == 0.0 || !scale.is_finite() {
        return None;
    }
    let norm = scale
        * x.iter()
            .map(|v| (v / scale) * (v / scale))
            .sum::<f64>()
            .sqrt();
    let alpha = if x[0] > 0.0 { -norm } else { norm };
    // `|x[0] - alpha| >= norm`, the two of opposite signs.
    let head = x[0] - alpha;
    x[0] = 1.0;
    x[1..].iter_mut().for_each(|v| *v /= head);
    let vv: f64 = x.iter().map(|v| v * v).sum();
    Some((alpha, 2.0 / vv))
}

/// The eigenvalues of the symmetric tridiagonal matrix with diagonal `d` and off-diagonal
/// `e` (`e[i]` beside `d[i]` and `d[i + 1]`; as long as `d`, its last entry unused), by
/// implicit QL steps with Wilkinson's shift; `None` if one does not converge.
fn tridiagonal_eigenvalues(mut d: Vec<f64>, mut e: Vec<f64>) -> Option<Vec<f64>> {
    let n = d.len();
    for l in 0..n {
        let mut steps = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= f64::EPSILON * dd || e[m] == 0.0 {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            steps += 1;
            if steps > MAX_STEPS {
                return None;
            }
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = g.hypot(1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0f64, 1.0f64, 0.0f64);
            let mut underflow = false;
            let mut i = m;
            while i > l {
                i -= 1;
                let f = s * e[i];
                let b = c * e[i];
                r = f.hypot(g);
                e[i + 1] = r;
                if r == 0.0 {
                    // The rotation underflowed: deflate here and go round again.
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    underflow = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
            }
            if underflow {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        }
    }
    Some(d)
}

/// The singular values of `a` (`m` x `n`, row-major), descending; `None` if the iteration
/// does not converge. `a` holds finite numbers.
pub(super) fn singular_values(a: &[f64], m: usize, n: usize) -> Option<Vec<f64>> {
    // The wider matrix's transpose has the same values.
    let (mut work, rows, cols) = if m >= n {
        (a.to_vec(), m, n)
    } else {
        let t = (0..n)
            .flat_map(|j| (0..m).map(move |i| a[i * n + j]))
            .collect();
        (t, n, m)
    };
    if cols == 0 {
        return Some(Vec::new());
    }
    let (d, e) = bidiagonalize(&mut work, rows, cols);
    // The Golub-Kahan tridiagonal form: zero diagonal, d0, e0, d1, e1, ... beside it.
    let order = 2 * cols;
    let mut off = vec![0.0; order];
    for k in 0..cols {
        off[2 * k] = d[k];
        if k + 1 < cols {
            off[2 * k + 1] = e[k];
        }
    }
    let mut values = tridiagonal_eigenvalues(vec![0.0; order], off)?;
    values.sort_by(|x, y| y.total_cmp(x));
    values.truncate(cols);
    Some(values.into_iter().map(f64::abs).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic matrix of `m x n` values in [-1, 1).
    fn matrix(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut z = seed;
        (0..m * n)
            .map(|_| {
                z = z
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((z >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    fn close(got: &[f64], want: &[f64], scale: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-13 * scale, "{got:?} against {want:?}");
        }
    }

    #[test]
    fn values_agree_with_jacobi_on_tall_wide_and_square_matrices() {
        for (m, n) in [(1, 1), (1, 6), (6, 1), (7, 4), (4, 7), (30, 30), (45, 20)] {
            let a = matrix(m, n, (m * 100 + n) as u64);
            let got = singular_values(&a, m, n).expect("converges");
            let (want, scale) = if m >= n {
                let (_, s, _) = super::super::svd::jacobi_svd(&a, m, n);
                let top = s[0];
                (s, top)
            } else {
                let t: Vec<f64> = (0..n)
                    .flat_map(|j| (0..m).map(|i| a[i * n + j]).collect::<Vec<_>>())
                    .collect();
                let (_, s, _) = super::super::svd::jacobi_svd(&t, n, m);
                let top = s[0];
                (s, top)
            };
            close(&got, &want, scale);
        }
    }

    #[test]
    fn known_values_zeros_and_extreme_scales() {
        // diag(3, 2, 0) with its rows and columns permuted and signs flipped.
        let a = [0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0];
        close(&singular_values(&a, 3, 3).unwrap(), &[3.0, 2.0, 0.0], 3.0);
        // Rank one: u v^T has the one value |u| |v|.
        let (u, v) = ([1.0, 2.0, 2.0], [3.0, 4.0]);
        let a: Vec<f64> = u
            .iter()
            .flat_map(|x| v.iter().map(move |y| x * y))
            .collect();
        close(&singular_values(&a, 3, 2).unwrap(), &[15.0, 0.0], 15.0);
        assert_eq!(singular_values(&[0.0; 6], 2, 3).unwrap(), vec![0.0, 0.0]);
        // Huge and tiny entries: no overflow in the norms, no underflow to zero.
        for scale in [1e300, 1e-300] {
            let a: Vec<f64> = matrix(5, 3, 9).iter().map(|x| x * scale).collect();
            let base = singular_values(&matrix(5, 3, 9), 5, 3).unwrap();
            let got = singular_values(&a, 5, 3).unwrap();
            for (g, b) in got.iter().zip(&base) {
                assert!(
                    (g / scale - b).abs() <= 1e-13 * base[0],
                    "{got:?} at {scale}"
                );
            }
        }
    }
}
