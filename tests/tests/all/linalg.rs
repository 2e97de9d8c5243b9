//! Dense linear algebra (`Array::solve`, `inv`, `det`, `cholesky`) against plain-Rust
//! references of the same algorithms and against the definitions, and NumPy's errors.

use weft::Numeric;
use weft_ir::DType;

/// Values that are not round, from a small linear congruential generator.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// Gaussian elimination with partial pivoting (the first largest magnitude), then back
/// substitution: `x` with `a x = b` for `b` of `m` columns, and `a`'s determinant.
fn reference_solve(a: &[f64], b: &[f64], n: usize, m: usize) -> (Vec<f64>, f64) {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    let mut det = 1.0;
    for k in 0..n {
        let mut p = k;
        for i in k..n {
            if a[i * n + k].abs() > a[p * n + k].abs() {
                p = i;
            }
        }
        if p != k {
            det = -det;
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            for j in 0..m {
                b.swap(k * m + j, p * m + j);
            }
        }
        det *= a[k * n + k];
        for i in k + 1..n {
            let f = a[i * n + k] / a[k * n + k];
            for j in k..n {
                a[i * n + j] -= f * a[k * n + j];
            }
            for j in 0..m {
                b[i * m + j] -= f * b[k * m + j];
            }
        }
    }
    for k in (0..n).rev() {
        for j in 0..m {
            let mut s = b[k * m + j];
            for c in k + 1..n {
                s -= a[k * n + c] * b[c * m + j];
            }
            b[k * m + j] = s / a[k * n + k];
        }
    }
    (b, det)
}

/// The largest difference relative to the largest magnitude of `want`.
fn rel(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()))
        / scale
}

#[test]
fn solve_inv_and_det_agree_with_elimination_written_out() {
    let np = weft_tests::numeric(2);
    for (s, &(n, m)) in [(1usize, 1usize), (2, 1), (5, 3), (17, 1), (40, 4)]
        .iter()
        .enumerate()
    {
        let a = values(n * n, 10 + s as u64);
        let b = values(n * m, 20 + s as u64);
        let (want, want_det) = reference_solve(&a, &b, n, m);
        let (an, bn) = (
            np.from_vec(&[n as u64, n as u64], &a),
            np.from_vec(&[n as u64, m as u64], &b),
        );
        let x = an.solve(&bn).expect("solves").to_vec().expect("reads");
        assert!(rel(&x, &want) < 1e-10, "solve, n = {n}: {}", rel(&x, &want));
        // `a @ x` gives `b` back.
        let back = an
            .matmul(&np.from_vec(&[n as u64, m as u64], &x))
            .to_vec()
            .expect("reads");
        assert!(rel(&back, &b) < 1e-10, "a @ solve(a, b), n = {n}");
        // A vector right-hand side gives a vector.
        let v = an
            .solve(&np.from_vec(&[n as u64], &b[..n]))
            .expect("solves");
        assert_eq!(v.shape().expect("a shape"), vec![n as u64]);
        let (want_v, _) = reference_solve(&a, &b[..n], n, 1);
        assert!(rel(&v.to_vec().expect("reads"), &want_v) < 1e-10);
        // The inverse times the matrix is the identity.
        let inv = an.inv().expect("inverts");
        let eye: Vec<f64> = (0..n * n)
            .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
            .collect();
        let product = inv.matmul(&an).to_vec().expect("reads");
        assert!(rel(&product, &eye) < 1e-9, "inv(a) @ a, n = {n}");
        let det = an.det().expect("a determinant").item().expect("0-d");
        assert!(
            (det - want_det).abs() <= 1e-10 * want_det.abs().max(1e-300),
            "det, n = {n}: {det} against {want_det}"
        );
    }
}

#[test]
fn pivoting_swaps_rows_and_integer_matrices_compute_in_f64() {
    let np = weft_tests::numeric(2);
    // A zero on the diagonal needs a swap; the determinant of a swap is -1.
    let swap = np.from_vec(&[2, 2], &[0.0, 1.0, 1.0, 0.0]);
    let x = swap
        .solve(&np.from_vec(&[2], &[3.0, 5.0]))
        .expect("solves")
        .to_vec()
        .expect("reads");
    assert_eq!(x, vec![5.0, 3.0]);
    assert_eq!(swap.det().expect("det").item().expect("0-d"), -1.0);
    let ints = np
        .from_vec(&[2, 2], &[4.0, 3.0, 6.0, 3.0])
        .astype(DType::I64);
    let inv = ints.inv().expect("inverts");
    assert_eq!(inv.dtype().expect("a dtype"), DType::F64);
    let got = inv.to_vec().expect("reads");
    let want = [-0.5, 0.5, 1.0, -2.0 / 3.0];
    assert!(rel(&got, &want) < 1e-15, "{got:?}");
    // A singular matrix has determinant zero.
    let singular = np.from_vec(&[3, 3], &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0]);
    assert_eq!(singular.det().expect("det").item().expect("0-d"), 0.0);
}

/// `L` with `L L^T = a`, column by column.
fn reference_cholesky(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= l[j * n + k] * l[j * n + k];
        }
        l[j * n + j] = d.sqrt();
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / l[j * n + j];
        }
    }
    l
}

#[test]
fn cholesky_factors_a_positive_definite_matrix() {
    let np = weft_tests::numeric(2);
    // 130 is three blocks of columns (64, 64 and 2).
    for (s, n) in [1usize, 2, 3, 9, 30, 65, 130].into_iter().enumerate() {
        // `M M^T + n I` is symmetric positive definite.
        let m = values(n * n, 30 + s as u64);
        let a: Vec<f64> = (0..n * n)
            .map(|x| {
                let (i, j) = (x / n, x % n);
                let dot: f64 = (0..n).map(|k| m[i * n + k] * m[j * n + k]).sum();
                dot + if i == j { n as f64 } else { 0.0 }
            })
            .collect();
        let an = np.from_vec(&[n as u64, n as u64], &a);
        let l = an.cholesky().expect("factors");
        let got = l.to_vec().expect("reads");
        let want = reference_cholesky(&a, n);
        assert!(
            rel(&got, &want) < 1e-12,
            "cholesky, n = {n}: {}",
            rel(&got, &want)
        );
        // Lower triangular, and `L @ L.T` is `a`.
        for i in 0..n {
            for j in i + 1..n {
                assert_eq!(got[i * n + j], 0.0, "({i}, {j}) above the diagonal");
            }
        }
        let back = l.matmul(&l.t()).to_vec().expect("reads");
        assert!(rel(&back, &a) < 1e-12, "L @ L.T, n = {n}");
    }
}

#[test]
fn bad_matrices_are_numpy_errors_that_name_the_line() {
    let np: Numeric = weft_tests::numeric(2);
    let text = |e: weft::Error| e.to_string();
    let rect = np.from_vec(&[2, 3], &[1.0; 6]);
    let e = text(
        rect.solve(&np.from_vec(&[2], &[1.0, 2.0]))
            .expect_err("not square"),
    );
    assert!(
        e.contains("linalg.solve") && e.contains("must be square") && e.contains("(2, 3)"),
        "{e}"
    );
    assert!(
        e.contains("(at tests/tests/all/linalg.rs:"),
        "the caller's line: {e}"
    );
    let e = text(rect.inv().expect_err("not square"));
    assert!(
        e.contains("linalg.inv") && e.contains("must be square"),
        "{e}"
    );
    let e = text(rect.cholesky().expect_err("not square"));
    assert!(
        e.contains("linalg.cholesky") && e.contains("must be square"),
        "{e}"
    );
    let singular = np.from_vec(&[2, 2], &[1.0, 2.0, 2.0, 4.0]);
    let e = text(
        singular
            .solve(&np.from_vec(&[2], &[1.0, 2.0]))
            .expect_err("singular"),
    );
    assert!(e.contains("Singular matrix"), "{e}");
    let e = text(singular.inv().expect_err("singular"));
    assert!(
        e.contains("linalg.inv") && e.contains("Singular matrix"),
        "{e}"
    );
    let square = np.from_vec(&[2, 2], &[2.0, 1.0, 1.0, 3.0]);
    let e = text(
        square
            .solve(&np.from_vec(&[3], &[1.0; 3]))
            .expect_err("3 rows"),
    );
    assert!(e.contains("right-hand side") && e.contains("(3,)"), "{e}");
    let indefinite = np.from_vec(&[2, 2], &[1.0, 2.0, 2.0, 1.0]);
    let e = text(indefinite.cholesky().expect_err("indefinite"));
    assert!(e.contains("Matrix is not positive definite"), "{e}");
    // The runtime goes on.
    assert_eq!(square.det().expect("det").item().expect("0-d"), 5.0);
}
