//! Dense linear algebra (`Array::solve`, `inv`, `det`, `cholesky`) against plain-Rust
//! references of the same algorithms and against the definitions, and NumPy's errors.

use weft::Numeric;
use weft_ir::DType;

/// Values in `[-1, 1)` that are not round.
fn values(n: usize, seed: u64) -> Vec<f64> {
    weft_tests::uniform_data(n, seed, -1.0, 1.0)
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
fn panels_of_columns_agree_with_elimination_written_out() {
    // Orders past one panel of 64 columns: pivots that swap rows across panels, the rest of
    // the matrix updated by products, and back substitution by blocks.
    let np = weft_tests::numeric(2);
    for (n, m) in [(65usize, 2usize), (150, 3)] {
        let a = values(n * n, 70 + n as u64);
        let b = values(n * m, 80 + n as u64);
        let (want, want_det) = reference_solve(&a, &b, n, m);
        let an = np.from_vec(&[n as u64, n as u64], &a);
        let x = an
            .solve(&np.from_vec(&[n as u64, m as u64], &b))
            .expect("solves")
            .to_vec()
            .expect("reads");
        assert!(rel(&x, &want) < 1e-10, "solve, n = {n}: {}", rel(&x, &want));
        let det = an.det().expect("a determinant").item().expect("0-d");
        assert!(
            (det - want_det).abs() <= 1e-9 * want_det.abs(),
            "det, n = {n}: {det} against {want_det}"
        );
        let eye: Vec<f64> = (0..n * n)
            .map(|i| if i / n == i % n { 1.0 } else { 0.0 })
            .collect();
        let product = an
            .inv()
            .expect("inverts")
            .matmul(&an)
            .to_vec()
            .expect("reads");
        assert!(rel(&product, &eye) < 1e-9, "inv(a) @ a, n = {n}");
    }
    // A zero pivot in the second panel: the last 30 rows of 100 are zero.
    let n = 100usize;
    let mut a = values(n * n, 90);
    a[70 * n..].iter_mut().for_each(|v| *v = 0.0);
    let an = np.from_vec(&[n as u64, n as u64], &a);
    assert_eq!(an.det().expect("a determinant").item().expect("0-d"), 0.0);
    let e = an
        .solve(&np.from_vec(&[n as u64], &values(n, 91)))
        .expect_err("singular");
    assert!(e.to_string().contains("Singular matrix"), "{e}");
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
    // Empty matrices, as NumPy: an empty solution and inverse, a determinant of 1.
    let empty = np.from_vec(&[0, 0], &[]);
    let x = empty.solve(&np.from_vec(&[0], &[])).expect("solves");
    assert_eq!(x.shape().expect("a shape"), vec![0]);
    assert_eq!(
        empty.inv().expect("inverts").shape().expect("a shape"),
        vec![0, 0]
    );
    assert_eq!(empty.det().expect("det").item().expect("0-d"), 1.0);
    assert_eq!(
        empty.cholesky().expect("factors").shape().expect("a shape"),
        vec![0, 0]
    );
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
    // 130 is three blocks of columns (64, 64 and 2); 400 updates the rest of the matrix after
    // its first block in two strips of rows (256 and 80).
    for (s, n) in [1usize, 2, 3, 9, 30, 65, 130, 400].into_iter().enumerate() {
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
        assert_eq!(
            an.to_vec().expect("reads"),
            a,
            "the input is left as it was"
        );
    }
}

#[test]
fn bad_matrices_are_numpy_errors_that_name_the_line() {
    let np: Numeric = weft_tests::numeric(2);
    // The error of `result` holds every one of `words`.
    let says = |result: weft::Result<weft::Array>, words: &[&str]| -> String {
        let e = result.expect_err("an error").to_string();
        assert!(words.iter().all(|w| e.contains(w)), "{words:?} in {e}");
        e
    };
    let rect = np.from_vec(&[2, 3], &[1.0; 6]);
    let rhs = np.from_vec(&[2], &[1.0, 2.0]);
    let e = says(
        rect.solve(&rhs),
        &["linalg.solve", "must be square", "(2, 3)"],
    );
    assert!(
        e.contains("(at tests/tests/all/linalg.rs:"),
        "the caller's line: {e}"
    );
    says(rect.inv(), &["linalg.inv", "must be square"]);
    says(rect.cholesky(), &["linalg.cholesky", "must be square"]);
    let singular = np.from_vec(&[2, 2], &[1.0, 2.0, 2.0, 4.0]);
    says(singular.solve(&rhs), &["Singular matrix"]);
    says(singular.inv(), &["linalg.inv", "Singular matrix"]);
    let square = np.from_vec(&[2, 2], &[2.0, 1.0, 1.0, 3.0]);
    says(
        square.solve(&np.from_vec(&[3], &[1.0; 3])),
        &["right-hand side", "(3,)"],
    );
    let indefinite = np.from_vec(&[2, 2], &[1.0, 2.0, 2.0, 1.0]);
    says(indefinite.cholesky(), &["Matrix is not positive definite"]);
    // A negative pivot in the second block of columns.
    let mut d = vec![0.0; 100 * 100];
    for i in 0..100 {
        d[i * 100 + i] = if i == 80 { -1.0 } else { 1.0 + i as f64 };
    }
    says(
        np.from_vec(&[100, 100], &d).cholesky(),
        &["Matrix is not positive definite"],
    );
    // The runtime goes on.
    assert_eq!(square.det().expect("det").item().expect("0-d"), 5.0);
}

#[test]
fn norms_of_vectors_and_matrices_are_numpys() {
    use weft::numeric::NormOrd;
    let np = weft_tests::numeric(2);
    let v = [3.0, -4.0, 0.0, 1.5];
    let x = np.from_vec(&[4], &v);
    let norm = |a: &weft::Array, ord| a.norm_ord(ord).expect("a norm").item().expect("0-d");
    let abs: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    let p3 = abs.iter().map(|a| a.powf(3.0)).sum::<f64>().powf(1.0 / 3.0);
    for (ord, want) in [
        (NormOrd::Default, (9.0f64 + 16.0 + 2.25).sqrt()),
        (NormOrd::P(2.0), (9.0f64 + 16.0 + 2.25).sqrt()),
        (NormOrd::P(1.0), 8.5),
        (NormOrd::P(0.0), 3.0),
        (NormOrd::Inf, 4.0),
        (NormOrd::NegInf, 0.0),
        (NormOrd::P(3.0), p3),
    ] {
        let got = norm(&x, ord);
        assert!(
            (got - want).abs() <= 1e-14 * want.max(1.0),
            "{ord:?}: {got} against {want}"
        );
    }
    // [[1, -2, 3], [-4, 5, -6]]: row sums of magnitudes 6 and 15, column sums 5, 7, 9.
    let m = np.from_vec(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    for (ord, want) in [
        (NormOrd::Fro, 91f64.sqrt()),
        (NormOrd::Inf, 15.0),
        (NormOrd::NegInf, 6.0),
        (NormOrd::P(1.0), 9.0),
        (NormOrd::P(-1.0), 5.0),
    ] {
        let got = norm(&m, ord);
        assert!(
            (got - want).abs() <= 1e-14 * want,
            "{ord:?}: {got} against {want}"
        );
    }
    // The 2-norm, the smallest singular value and the nuclear norm: for this matrix, the
    // square roots of the eigenvalues of m^T m.
    let mm = m.to_vec().expect("reads");
    let (rows, cols) = (mm.len() / 3, 3usize);
    assert_eq!(rows * cols, mm.len());
    let mut gram = [[0.0f64; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            gram[i][j] = (0..rows).map(|r| mm[r * 3 + i] * mm[r * 3 + j]).sum();
        }
    }
    let trace: f64 = (0..3).map(|i| gram[i][i]).sum();
    let s = m
        .singular_values()
        .expect("singular values")
        .to_vec()
        .expect("reads");
    let squares: f64 = s.iter().map(|x| x * x).sum();
    assert!(
        (squares - trace).abs() <= 1e-12 * trace,
        "sum of s^2 is the trace of m^T m"
    );
    assert_eq!(norm(&m, NormOrd::P(2.0)), s[0]);
    assert_eq!(norm(&m, NormOrd::P(-2.0)), s[s.len() - 1]);
    let nuc: f64 = s.iter().sum();
    assert!((norm(&m, NormOrd::Nuc) - nuc).abs() <= 1e-14 * nuc);
    let e = x
        .norm_ord(NormOrd::Nuc)
        .expect_err("not a matrix")
        .to_string();
    assert!(e.contains("Invalid norm order"), "{e}");
    let e = x
        .norm_ord(NormOrd::Fro)
        .expect_err("not a matrix")
        .to_string();
    assert!(e.contains("Invalid norm order"), "{e}");
}

/// Householder QR written out, with LAPACK's choice of signs (`R[j, j] = -sign(x0) * |x|`, no
/// reflection of a column with only zeros below its diagonal):
/// `(Q, R)`, `Q` `m` x `k` and `R` `k` x `n`, row-major.
fn reference_qr(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let k = m.min(n);
    let mut r = a.to_vec();
    let mut q: Vec<f64> = (0..m * m)
        .map(|x| if x / m == x % m { 1.0 } else { 0.0 })
        .collect();
    for j in 0..k.min(m - 1) {
        let below: f64 = (j + 1..m).map(|i| r[i * n + j] * r[i * n + j]).sum();
        if below == 0.0 {
            continue;
        }
        let norm = (j..m)
            .map(|i| r[i * n + j] * r[i * n + j])
            .sum::<f64>()
            .sqrt();
        let alpha = if r[j * n + j] >= 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (j..m).map(|i| r[i * n + j]).collect();
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|x| x * x).sum();
        for c in j..n {
            let w: f64 = (j..m).map(|i| v[i - j] * r[i * n + c]).sum();
            for i in j..m {
                r[i * n + c] -= 2.0 / vv * v[i - j] * w;
            }
        }
        for row in 0..m {
            let u: f64 = (j..m).map(|i| q[row * m + i] * v[i - j]).sum();
            for i in j..m {
                q[row * m + i] -= 2.0 / vv * u * v[i - j];
            }
        }
    }
    let q_k = (0..m * k).map(|x| q[(x / k) * m + x % k]).collect();
    let r_k = (0..k * n)
        .map(|x| if x % n < x / n { 0.0 } else { r[x] })
        .collect();
    (q_k, r_k)
}

#[test]
fn qr_gives_orthonormal_columns_and_an_upper_triangle_with_lapacks_signs() {
    let np = weft_tests::numeric(2);
    let shapes = [(1usize, 1usize), (3, 3), (5, 3), (3, 5), (20, 12), (40, 40)];
    for (s, &(m, n)) in shapes.iter().enumerate() {
        let mut a = values(m * n, 50 + s as u64);
        if s == 1 {
            // A zero where the first reflection looks: its sign is `+`.
            a[0] = 0.0;
        }
        let an = np.from_vec(&[m as u64, n as u64], &a);
        let (q, r) = an.qr().expect("factors");
        let k = m.min(n) as u64;
        assert_eq!(q.shape().expect("a shape"), vec![m as u64, k]);
        assert_eq!(r.shape().expect("a shape"), vec![k, n as u64]);
        let (want_q, want_r) = reference_qr(&a, m, n);
        let (got_q, got_r) = (q.to_vec().expect("reads"), r.to_vec().expect("reads"));
        assert!(
            rel(&got_q, &want_q) < 1e-12,
            "Q of {m}x{n}: {}",
            rel(&got_q, &want_q)
        );
        assert!(
            rel(&got_r, &want_r) < 1e-12,
            "R of {m}x{n}: {}",
            rel(&got_r, &want_r)
        );
        for i in 0..k as usize {
            for j in 0..i.min(n) {
                assert_eq!(got_r[i * n + j], 0.0, "R below its diagonal, {m}x{n}");
            }
        }
        let back = q.matmul(&r).to_vec().expect("reads");
        assert!(rel(&back, &a) < 1e-12, "Q @ R of {m}x{n}");
        let qtq = q.t().matmul(&q).to_vec().expect("reads");
        let eye: Vec<f64> = (0..(k * k) as usize)
            .map(|x| {
                if x / k as usize == x % k as usize {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        assert!(rel(&qtq, &eye) < 1e-12, "Q.T @ Q of {m}x{n}");
    }
    // NumPy's signs (`np.linalg.qr` of this matrix has R's diagonal -6.708..., 1.095...,
    // 0.408...): the last row's column is not reflected.
    let (_, r) = np
        .from_vec(&[3, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0])
        .qr()
        .expect("factors");
    let d = r.diag().to_vec().expect("reads");
    let want = [
        -(45f64.sqrt()),
        1.095_445_115_010_332_2,
        0.408_248_290_463_863,
    ];
    assert!(rel(&d, &want) < 1e-12, "{d:?}");
    // A zero column reflects nothing.
    let (q, r) = np
        .from_vec(&[2, 2], &[0.0, 1.0, 0.0, 2.0])
        .qr()
        .expect("factors");
    let back = q.matmul(&r).to_vec().expect("reads");
    assert!(rel(&back, &[0.0, 1.0, 0.0, 2.0]) < 1e-15, "{back:?}");
    let e = np
        .from_vec(&[4], &[1.0; 4])
        .qr()
        .expect_err("a vector")
        .to_string();
    assert!(
        e.contains("linalg.qr") && e.contains("expected a matrix"),
        "{e}"
    );
}

/// `a` (`m` x `n`) times `b` (`n` x `p`), written out.
fn product(a: &[f64], b: &[f64], m: usize, n: usize, p: usize) -> Vec<f64> {
    (0..m * p)
        .map(|ij| (0..n).map(|k| a[ij / p * n + k] * b[k * p + ij % p]).sum())
        .collect()
}

#[test]
fn singular_values_meet_their_definitions() {
    let np = weft_tests::numeric(2);
    for (m, n, rank_one) in [(7usize, 4usize, false), (3, 6, false), (5, 5, true)] {
        let mut a = values(m * n, 40 + m as u64);
        if rank_one {
            // Every row a multiple of the first: rank 1, four zero singular values.
            for r in 1..m {
                for c in 0..n {
                    a[r * n + c] = a[c] * (r as f64 + 0.5);
                }
            }
        }
        let an = np.from_vec(&[m as u64, n as u64], &a);
        // The full factors: orthogonal, square, and the same singular values.
        let (uf, sf, vhf) = an.svd(true).expect("a full SVD");
        assert_eq!(uf.shape().expect("U"), vec![m as u64, m as u64]);
        assert_eq!(vhf.shape().expect("Vh"), vec![n as u64, n as u64]);
        for (q, d) in [(uf.to_vec().expect("U"), m), (vhf.to_vec().expect("Vh"), n)] {
            let qt: Vec<f64> = (0..d * d).map(|i| q[(i % d) * d + i / d]).collect();
            let eye: Vec<f64> = (0..d * d).map(|i| f64::from(i / d == i % d)).collect();
            assert!(
                rel(&product(&qt, &q, d, d, d), &eye) < 1e-13,
                "orthogonal, {d}"
            );
        }
        let (u, s, vh) = an.svd(false).expect("an SVD");
        assert_eq!(sf.to_vec().expect("S"), s.to_vec().expect("S"));
        let k = m.min(n);
        assert_eq!(u.shape().expect("U"), vec![m as u64, k as u64]);
        assert_eq!(vh.shape().expect("Vh"), vec![k as u64, n as u64]);
        let (u, s, vh) = (
            u.to_vec().expect("U"),
            s.to_vec().expect("S"),
            vh.to_vec().expect("Vh"),
        );
        assert!(s.windows(2).all(|w| w[0] >= w[1]), "descending: {s:?}");
        // U diag(s) Vh == a.
        let us: Vec<f64> = (0..m * k).map(|i| u[i] * s[i % k]).collect();
        let back = product(&us, &vh, m, k, n);
        assert!(
            rel(&back, &a) < 1e-13,
            "U S Vh, {m}x{n}: {}",
            rel(&back, &a)
        );
        // Orthonormal columns of U and rows of Vh.
        let ut: Vec<f64> = (0..k * m).map(|i| u[(i % m) * k + i / m]).collect();
        let eye: Vec<f64> = (0..k * k).map(|i| f64::from(i / k == i % k)).collect();
        assert!(
            rel(&product(&ut, &u, k, m, k), &eye) < 1e-13,
            "U^T U, {m}x{n}"
        );
        let v: Vec<f64> = (0..n * k).map(|i| vh[(i % k) * n + i / k]).collect();
        assert!(
            rel(&product(&vh, &v, k, n, k), &eye) < 1e-13,
            "Vh Vh^T, {m}x{n}"
        );
        if rank_one {
            assert!(s[1..].iter().all(|&x| x <= 1e-13 * s[0]), "rank 1: {s:?}");
        }
        // pinv: a @ pinv(a) @ a == a.
        let p = an.pinv(None).expect("a pseudo-inverse");
        let again = an.matmul(&p).matmul(&an).to_vec().expect("reads");
        assert!(rel(&again, &a) < 1e-12, "a pinv(a) a, {m}x{n}");
    }
    // A square invertible matrix: pinv is the inverse.
    let sq = np.from_vec(&[3, 3], &[2.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0]);
    let p = sq.pinv(None).expect("pinv").to_vec().expect("reads");
    let inv = sq.inv().expect("inv").to_vec().expect("reads");
    assert!(rel(&p, &inv) < 1e-13, "pinv of an invertible matrix");
    let e = np
        .from_vec(&[3], &[1.0, 2.0, 3.0])
        .svd(true)
        .expect_err("a vector")
        .to_string();
    assert!(e.contains("two-dimensional"), "{e}");
}

#[test]
fn least_squares_solve_the_normal_equations() {
    let np = weft_tests::numeric(2);
    let (m, n) = (9usize, 3usize);
    let a = values(m * n, 60);
    let b = values(m, 61);
    let an = np.from_vec(&[m as u64, n as u64], &a);
    let (x, residuals, rank, s) = an
        .lstsq(&np.from_vec(&[m as u64], &b))
        .expect("least squares");
    assert_eq!(rank, 3);
    assert_eq!(s.shape().expect("s"), vec![3]);
    // The normal equations a^T a x = a^T b, solved by elimination written out.
    let at: Vec<f64> = (0..n * m).map(|i| a[(i % m) * n + i / m]).collect();
    let ata = product(&at, &a, n, m, n);
    let atb = product(&at, &b, n, m, 1);
    let (want, _) = reference_solve(&ata, &atb, n, 1);
    let got = x.to_vec().expect("x");
    assert!(rel(&got, &want) < 1e-10, "x: {got:?} against {want:?}");
    let fit = product(&a, &got, m, n, 1);
    let ss: f64 = b.iter().zip(&fit).map(|(p, q)| (p - q) * (p - q)).sum();
    let r = residuals.to_vec().expect("residuals");
    assert_eq!(r.len(), 1);
    assert!(
        (r[0] - ss).abs() <= 1e-12 * ss,
        "residual {} against {ss}",
        r[0]
    );
    let e = an
        .lstsq(&np.from_vec(&[4], &[1.0, 2.0, 3.0, 4.0]))
        .expect_err("4 rows for 9")
        .to_string();
    assert!(e.contains("Incompatible dimensions"), "{e}");
}
