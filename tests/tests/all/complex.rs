//! Complex arrays (`ComplexArray`) against plain-Rust complex arithmetic written out with
//! NumPy's formulas (bit for bit where the formula is the same sequence of roundings), the
//! math functions against Rust's `hypot`, `exp`, `cos` and `sin` within rounding, the views,
//! masks, products and linear algebra against their definitions, and `.npy` files.

use weft::{Complex, ComplexArray, Ix, Numeric, Range};
use weft_ir::DType;

type C = (f64, f64);

fn cmul(a: C, b: C) -> C {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// NumPy's complex division (Smith's method with its branches).
fn cdiv(a: C, b: C) -> C {
    let (ar, ai) = (b.0.abs(), b.1.abs());
    if ar >= ai {
        if ar == 0.0 && ai == 0.0 {
            return (a.0 / ar, a.1 / ar);
        }
        let rat = b.1 / b.0;
        let scl = 1.0 / (b.0 + b.1 * rat);
        ((a.0 + a.1 * rat) * scl, (a.1 - a.0 * rat) * scl)
    } else {
        let rat = b.0 / b.1;
        let scl = 1.0 / (b.1 + b.0 * rat);
        ((a.0 * rat + a.1) * scl, (a.1 * rat - a.0) * scl)
    }
}

/// NumPy's integer power: 1, 2 and 3 by products, others by repeated squaring.
fn cpowi(a: C, n: i32) -> C {
    match n {
        0 => (1.0, 0.0),
        1 => a,
        2 => cmul(a, a),
        3 => cmul(cmul(a, a), a),
        _ => {
            let (mut left, mut p, mut acc) = (n.unsigned_abs(), a, None::<C>);
            loop {
                if left & 1 == 1 {
                    acc = Some(acc.map_or(p, |x| cmul(x, p)));
                }
                left >>= 1;
                if left == 0 {
                    break;
                }
                p = cmul(p, p);
            }
            let acc = acc.unwrap_or((1.0, 0.0));
            if n < 0 { cdiv((1.0, 0.0), acc) } else { acc }
        }
    }
}

fn values(n: usize, seed: u64) -> Vec<f64> {
    weft_tests::uniform_data(n, seed, -2.0, 2.0)
}

/// A complex array of `shape` from `pairs`, and the pairs.
fn upload(np: &Numeric, shape: &[u64], pairs: &[C]) -> ComplexArray {
    let re: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let im: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    ComplexArray::from_parts(np.from_slice(shape, &re), np.from_slice(shape, &im))
        .expect("parts of one shape")
}

fn pairs(n: usize, seed: u64) -> Vec<C> {
    values(n, seed)
        .into_iter()
        .zip(values(n, seed + 1000))
        .collect()
}

fn read(z: &ComplexArray) -> Vec<C> {
    z.to_vec()
        .expect("reads")
        .into_iter()
        .map(|c| (c.re, c.im))
        .collect()
}

/// Bit-for-bit equality (NaNs equal to NaNs).
fn same_bits(what: &str, got: &[C], want: &[C]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
        assert!(
            same(g.0, w.0) && same(g.1, w.1),
            "{what}: element {i} is {g:?}, NumPy's formula gives {w:?}"
        );
    }
}

fn close(what: &str, got: &[C], want: &[C], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want
        .iter()
        .fold(1e-300f64, |m, w| m.max(w.0.abs()).max(w.1.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let d = (g.0 - w.0).abs().max((g.1 - w.1).abs()) / scale;
        assert!(d <= tol, "{what}: element {i} is {g:?}, want {w:?} ({d:e})");
    }
}

#[test]
fn arithmetic_follows_numpys_formulas_bit_for_bit() {
    let np = weft_tests::numeric(2);
    let n = 257;
    let a = pairs(n, 1);
    let mut b = pairs(n, 2);
    // Divisors with a zero, with the imaginary part larger, and purely imaginary.
    b[3] = (0.0, 0.0);
    b[4] = (0.25, 3.0);
    b[5] = (0.0, -1.5);
    let real: Vec<f64> = values(n, 3)
        .into_iter()
        .enumerate()
        .map(|(i, v)| if i == 7 { 0.0 } else { v })
        .collect();
    let (za, zb) = (upload(&np, &[n as u64], &a), upload(&np, &[n as u64], &b));
    let r = np.from_slice(&[n as u64], &real);
    let each = |f: &dyn Fn(usize) -> C| (0..n).map(f).collect::<Vec<C>>();
    same_bits(
        "a + b",
        &read(&(&za + &zb)),
        &each(&|i| (a[i].0 + b[i].0, a[i].1 + b[i].1)),
    );
    same_bits(
        "a - b",
        &read(&(&za - &zb)),
        &each(&|i| (a[i].0 - b[i].0, a[i].1 - b[i].1)),
    );
    same_bits("a * b", &read(&(&za * &zb)), &each(&|i| cmul(a[i], b[i])));
    same_bits("a / b", &read(&(&za / &zb)), &each(&|i| cdiv(a[i], b[i])));
    same_bits(
        "a * real",
        &read(&(&za * &r)),
        &each(&|i| (a[i].0 * real[i], a[i].1 * real[i])),
    );
    same_bits(
        "a / real (a real zero among them)",
        &read(&(&za / &r)),
        &each(&|i| {
            if real[i] == 0.0 {
                (a[i].0 / 0.0, a[i].1 / 0.0)
            } else {
                (a[i].0 * (1.0 / real[i]), a[i].1 * (1.0 / real[i]))
            }
        }),
    );
    let c = Complex::new(0.75, -1.25);
    same_bits(
        "a * c",
        &read(&(&za * c)),
        &each(&|i| cmul(a[i], (c.re, c.im))),
    );
    for d in [
        Complex::new(0.75, -1.25),
        Complex::new(2.0, 0.5),
        Complex::new(3.0, 0.0),
    ] {
        same_bits(
            &format!("a / {d:?}"),
            &read(&(&za / d)),
            &each(&|i| {
                if d.im == 0.0 {
                    (a[i].0 * (1.0 / d.re), a[i].1 * (1.0 / d.re))
                } else {
                    cdiv(a[i], (d.re, d.im))
                }
            }),
        );
    }
    same_bits("-a", &read(&-&za), &each(&|i| (-a[i].0, -a[i].1)));
    same_bits("conj", &read(&za.conj()), &each(&|i| (a[i].0, -a[i].1)));
    for k in [-3, -2, 0, 1, 2, 3, 4, 5, 7] {
        same_bits(
            &format!("a ** {k}"),
            &read(&za.powi(k)),
            &each(&|i| cpowi(a[i], k)),
        );
    }
    // `x * 1j` and `x + z`: a real array promoted.
    let x = np.from_slice(&[n as u64], &real);
    same_bits(
        "x * 1j",
        &read(&(&x * Complex::I)),
        &each(&|i| cmul((real[i], 0.0), (0.0, 1.0))),
    );
    same_bits(
        "x + a",
        &read(&(&x + &za)),
        &each(&|i| (real[i] + a[i].0, 0.0 + a[i].1)),
    );
}

#[test]
fn magnitude_angle_and_exp_agree_with_rusts_functions() {
    let np = weft_tests::numeric(2);
    let mut a = pairs(300, 11);
    a[0] = (0.0, 0.0);
    a[1] = (3.0, 4.0);
    a[2] = (1e300, 1e300);
    a[3] = (1e-300, -1e-300);
    a[4] = (f64::INFINITY, 1.0);
    a[5] = (-2.5, 0.0);
    let z = upload(&np, &[300], &a);
    let abs = z.abs().to_vec().expect("reads");
    for (i, (&g, w)) in abs.iter().zip(&a).enumerate() {
        let want = w.0.hypot(w.1);
        assert!(
            g == want || ((g - want) / want).abs() <= 4.5e-16,
            "abs of element {i} {w:?}: {g} against hypot's {want}"
        );
    }
    assert_eq!(abs[1], 5.0, "|3 + 4i|");
    let angle = z.angle().to_vec().expect("reads");
    for (g, w) in angle.iter().zip(&a) {
        assert!((g - w.1.atan2(w.0)).abs() <= 1e-15, "angle of {w:?}");
    }
    let small = pairs(300, 12);
    let e = read(&upload(&np, &[300], &small).exp());
    let want: Vec<C> = small
        .iter()
        .map(|w| (w.0.exp() * w.1.cos(), w.0.exp() * w.1.sin()))
        .collect();
    close("exp", &e, &want, 1e-15);
    // A zero imaginary part stays exactly zero.
    let real_exp = read(&upload(&np, &[2], &[(1.0, 0.0), (-700.0, 0.0)]).exp());
    assert_eq!(real_exp[0].1.to_bits(), 0.0f64.to_bits());
    assert_eq!(real_exp[1].1.to_bits(), 0.0f64.to_bits());
}

#[test]
fn views_masks_and_sums_act_on_both_parts() {
    let np = weft_tests::numeric(2);
    let a = pairs(24, 21);
    let z = upload(&np, &[4, 6], &a);
    let at = |r: usize, c: usize| a[r * 6 + c];
    // A slice and a transpose.
    let s = read(&z.slice(&[Range::new(1, 3), Range::new(2, 5)]));
    let want: Vec<C> = (1..3)
        .flat_map(|r| (2..5).map(move |c| (r, c)))
        .map(|(r, c)| at(r, c))
        .collect();
    same_bits("z[1:3, 2:5]", &s, &want);
    let t = read(&z.t());
    let want: Vec<C> = (0..6)
        .flat_map(|c| (0..4).map(move |r| (r, c)))
        .map(|(r, c)| at(r, c))
        .collect();
    same_bits("z.T", &t, &want);
    // Sums of each part.
    let total = z.sum().item().expect("0-d");
    let want = a.iter().fold((0.0, 0.0), |s, p| (s.0 + p.0, s.1 + p.1));
    assert!((total.re - want.0).abs() < 1e-13 && (total.im - want.1).abs() < 1e-13);
    let rows = read(&z.sum_axis(1));
    let want: Vec<C> = (0..4)
        .map(|r| (0..6).fold((0.0, 0.0), |s, c| (s.0 + at(r, c).0, s.1 + at(r, c).1)))
        .collect();
    close("z.sum(axis=1)", &rows, &want, 1e-15);
    // Assignment through a mask of compressed values: z[m] = z[m] ** 2 + 1j.
    let m = z.abs().lt(1.5);
    let inside = z.masked(&m).expect("masked");
    let updated = inside.powi(2) + Complex::I;
    z.assign_masked(&m, &updated).expect("assigns");
    let want: Vec<C> = a
        .iter()
        .map(|&p| {
            if p.0.hypot(p.1) < 1.5 {
                let s = cmul(p, p);
                (s.0, s.1 + 1.0)
            } else {
                p
            }
        })
        .collect();
    same_bits("z[m] = z[m]**2 + 1j", &read(&z), &want);
    // A scalar through a mask, and a view written through its real part.
    z.assign_where(&m, Complex::new(9.0, -9.0))
        .expect("assigns");
    z.index(&[Ix::At(0)]).re().assign(-1.0).expect("assigns");
    let got = read(&z);
    for (i, (g, p)) in got.iter().zip(&a).enumerate() {
        let want = if i < 6 {
            -1.0
        } else if p.0.hypot(p.1) < 1.5 {
            9.0
        } else {
            p.0
        };
        assert_eq!(g.0, want, "element {i}'s real part");
    }
}

#[test]
fn complex_builds_by_broadcasting_and_names_bad_shapes() {
    let np = weft_tests::numeric(2);
    let x = np.linspace(-1.0, 1.0, 5, DType::F64);
    let y = np.linspace(0.0, 2.0, 3, DType::F64);
    // NumPy's `C = X + Y[:, None] * 1j`.
    let c = &x + &(&y.expand_dims(1) * Complex::I);
    assert_eq!(c.shape().expect("a shape"), vec![3, 5]);
    let got = read(&c);
    let (xs, ys) = (x.to_vec().expect("x"), y.to_vec().expect("y"));
    for r in 0..3 {
        for k in 0..5 {
            assert_eq!(got[r * 5 + k], (xs[k], ys[r]), "C[{r}, {k}]");
        }
    }
    // A real operand that widens the shape widens the imaginary part too.
    let wide = np.complex_zeros(&[3, 1], DType::F64) - &x;
    assert_eq!(wide.shape().expect("a shape"), vec![3, 5]);
    assert_eq!(wide.im().shape().expect("a shape"), vec![3, 5]);
    let same = np.complex(&y.expand_dims(1), &x);
    assert_eq!(same.shape().expect("a shape"), vec![3, 5]);
    let bad = np.complex(&x, &y);
    let e = bad.check().expect_err("5 and 3 do not broadcast");
    assert!(e.to_string().contains("could not be broadcast"), "{e}");
    let zeros = np.complex_zeros(&[2, 2], DType::F32);
    assert_eq!(zeros.dtype().expect("a dtype"), DType::F32);
    let e = np
        .complex_zeros(&[2], DType::I64)
        .check()
        .expect_err("no integer complex");
    assert!(e.to_string().contains("complex_zeros"), "{e}");
}

/// `a @ b` written out.
fn reference_matmul(a: &[C], b: &[C], n: usize, k: usize, m: usize) -> Vec<C> {
    (0..n * m)
        .map(|ij| {
            let (i, j) = (ij / m, ij % m);
            (0..k).fold((0.0, 0.0), |s, l| {
                let p = cmul(a[i * k + l], b[l * m + j]);
                (s.0 + p.0, s.1 + p.1)
            })
        })
        .collect()
}

#[test]
fn products_solve_and_inverse_meet_their_definitions() {
    let np = weft_tests::numeric(2);
    let (n, k, m) = (7usize, 5usize, 3usize);
    let (a, b) = (pairs(n * k, 31), pairs(k * m, 32));
    let (za, zb) = (
        upload(&np, &[n as u64, k as u64], &a),
        upload(&np, &[k as u64, m as u64], &b),
    );
    close(
        "a @ b",
        &read(&za.matmul(&zb)),
        &reference_matmul(&a, &b, n, k, m),
        1e-14,
    );
    for order in [1usize, 2, 6, 33, 70] {
        let s = pairs(order * order, 40 + order as u64);
        let rhs = pairs(order * 2, 50 + order as u64);
        let zs = upload(&np, &[order as u64, order as u64], &s);
        let zr = upload(&np, &[order as u64, 2], &rhs);
        let x = zs.solve(&zr).expect("solves");
        close(
            &format!("a @ solve(a, b), order {order}"),
            &read(&zs.matmul(&x)),
            &rhs,
            1e-12,
        );
        let v = zs
            .solve(&upload(&np, &[order as u64], &rhs[..order]))
            .expect("a vector");
        assert_eq!(v.shape().expect("a shape"), vec![order as u64]);
        let inv = zs.inv().expect("inverts");
        let eye: Vec<C> = (0..order * order)
            .map(|i| {
                if i / order == i % order {
                    (1.0, 0.0)
                } else {
                    (0.0, 0.0)
                }
            })
            .collect();
        close(
            &format!("inv(a) @ a, order {order}"),
            &read(&inv.matmul(&zs)),
            &eye,
            1e-12,
        );
    }
    // Singular: the second row is i times the first.
    let singular = upload(
        &np,
        &[2, 2],
        &[(1.0, 2.0), (3.0, -1.0), (-2.0, 1.0), (1.0, 3.0)],
    );
    let e = singular.inv().expect_err("singular");
    assert!(e.to_string().contains("Singular matrix"), "{e}");
    let e = za.inv().expect_err("not square");
    assert!(e.to_string().contains("must be square"), "{e}");
    let e = upload(&np, &[2, 2], &a[..4])
        .solve(&upload(&np, &[3], &a[..3]))
        .expect_err("3 rows for order 2");
    assert!(e.to_string().contains("linalg.solve"), "{e}");
}

#[test]
fn npy_files_hold_complex128_and_complex64() {
    let np = weft_tests::numeric(2);
    let dir = std::env::temp_dir().join(format!("weft-complex-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let a = pairs(6, 61);
    let z = upload(&np, &[2, 3], &a);
    let path = dir.join("z.npy");
    z.save(&path).expect("saves");
    let file = weft::npy::read(&path).expect("reads the file");
    assert_eq!(file.shape, vec![2, 3]);
    match &file.data {
        weft::npy::NpyData::C128(v) => {
            let got: Vec<C> = v.iter().map(|p| (p[0], p[1])).collect();
            same_bits("the file's pairs", &got, &a);
        }
        other => panic!("not complex128: {}", other.descr()),
    }
    let back = np.load_complex(&path).expect("loads");
    same_bits("loaded", &read(&back), &a);
    let e = np.load(&path).expect_err("complex through load");
    assert!(e.to_string().contains("load_complex"), "{e}");
    let single = z.astype(DType::F32);
    let path32 = dir.join("z32.npy");
    single.save(&path32).expect("saves");
    let back32 = np.load_complex(&path32).expect("loads");
    assert_eq!(back32.dtype().expect("a dtype"), DType::F32);
    let want: Vec<C> = a
        .iter()
        .map(|p| (f64::from(p.0 as f32), f64::from(p.1 as f32)))
        .collect();
    same_bits("complex64", &read(&back32), &want);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn scalars_follow_the_same_formulas() {
    for (i, &a) in pairs(40, 71).iter().enumerate() {
        let b = pairs(40, 72)[i];
        let (ca, cb) = (Complex::new(a.0, a.1), Complex::new(b.0, b.1));
        let prod = ca * cb;
        assert_eq!((prod.re, prod.im), cmul(a, b), "{a:?} * {b:?}");
        let quot = ca / cb;
        assert_eq!((quot.re, quot.im), cdiv(a, b), "{a:?} / {b:?}");
        for k in [-3, -1, 0, 1, 2, 3, 6] {
            let p = ca.powi(k);
            assert_eq!((p.re, p.im), cpowi(a, k), "{a:?} ** {k}");
        }
    }
    let inf = Complex::new(1.0, -1.0) / Complex::new(0.0, 0.0);
    assert!(inf.re.is_infinite() && inf.im.is_infinite(), "{inf:?}");
    assert_eq!(Complex::new(3.0, -4.0).abs(), 5.0);
}

#[test]
fn edge_cases_keep_one_dtype_and_numpys_infinities() {
    let np = weft_tests::numeric(2);
    // complex64 plus an int64 array is complex128 in both parts.
    let z = np.complex_zeros(&[2], DType::F32) + &np.from_slice(&[2], &[1i64, 2]);
    assert_eq!(z.re().dtype().expect("a dtype"), DType::F64);
    assert_eq!(z.im().dtype().expect("a dtype"), DType::F64);
    z.check().expect("one dtype");
    // from_real copies: writing the complex array leaves the real one.
    let x = np.from_vec(&[2], &[1.0, 2.0]);
    let w = ComplexArray::from_real(&x);
    w.assign(Complex::I).expect("assigns");
    assert_eq!(x.to_vec().expect("reads"), vec![1.0, 2.0]);
    // A zero divisor with a negative zero imaginary part, as NumPy: infinities.
    let q = read(&(upload(&np, &[1], &[(1.0, 1.0)]) / Complex::new(0.0, -0.0)));
    assert!(q[0].0.is_infinite() && q[0].1.is_infinite(), "{q:?}");
    // |inf + nan i| is inf, as hypot's.
    let m = upload(
        &np,
        &[2],
        &[(f64::INFINITY, f64::NAN), (f64::NAN, -f64::INFINITY)],
    )
    .abs()
    .to_vec()
    .expect("reads");
    assert_eq!(m, vec![f64::INFINITY, f64::INFINITY]);
}

fn cconj(a: C) -> C {
    (a.0, -a.1)
}

fn csub(a: C, b: C) -> C {
    (a.0 - b.0, a.1 - b.1)
}

/// The determinant by Gaussian elimination with partial pivoting (by `|re| + |im|`),
/// written out.
fn reference_det(a: &[C], n: usize) -> C {
    let mut m = a.to_vec();
    let mut det = (1.0, 0.0);
    for j in 0..n {
        let p = (j..n)
            .max_by(|&x, &y| {
                let mag = |c: C| c.0.abs() + c.1.abs();
                mag(m[x * n + j]).total_cmp(&mag(m[y * n + j]))
            })
            .expect("a row");
        if p != j {
            for c in 0..n {
                m.swap(j * n + c, p * n + c);
            }
            det = (-det.0, -det.1);
        }
        let pivot = m[j * n + j];
        det = cmul(det, pivot);
        for r in j + 1..n {
            let f = cdiv(m[r * n + j], pivot);
            for c in j..n {
                m[r * n + c] = csub(m[r * n + c], cmul(f, m[j * n + c]));
            }
        }
    }
    det
}

/// A Hermitian positive-definite matrix: `b b^H + n I`.
fn hermitian(n: usize, seed: u64) -> Vec<C> {
    let b = pairs(n * n, seed);
    (0..n * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            let s = (0..n).fold((0.0, 0.0), |s, l| {
                let p = cmul(b[i * n + l], cconj(b[j * n + l]));
                (s.0 + p.0, s.1 + p.1)
            });
            if i == j { (s.0 + n as f64, 0.0) } else { s }
        })
        .collect()
}

/// The Cholesky factor by the column algorithm, written out.
fn reference_cholesky(a: &[C], n: usize) -> Vec<C> {
    let mut l = vec![(0.0, 0.0); n * n];
    for j in 0..n {
        let d = (0..j).fold(a[j * n + j].0, |s, k| {
            s - (l[j * n + k].0 * l[j * n + k].0 + l[j * n + k].1 * l[j * n + k].1)
        });
        let pivot = d.sqrt();
        l[j * n + j] = (pivot, 0.0);
        for i in j + 1..n {
            let s = (0..j).fold(a[i * n + j], |s, k| {
                csub(s, cmul(l[i * n + k], cconj(l[j * n + k])))
            });
            l[i * n + j] = (s.0 / pivot, s.1 / pivot);
        }
    }
    l
}

/// LAPACK's `zgeqr2` and `zung2r` written out (`zlarfg`'s reflectors without its rescaling):
/// `Q` (`m` x `k`) and `R` (`k` x `n`).
fn reference_qr(a: &[C], m: usize, n: usize) -> (Vec<C>, Vec<C>) {
    let k = m.min(n);
    let mut r = a.to_vec();
    let mut q: Vec<C> = (0..m * m)
        .map(|i| {
            if i / m == i % m {
                (1.0, 0.0)
            } else {
                (0.0, 0.0)
            }
        })
        .collect();
    for j in 0..k {
        let alpha = r[j * n + j];
        let largest = (j + 1..m).fold(0.0f64, |a, i| {
            a.max(r[i * n + j].0.abs()).max(r[i * n + j].1.abs())
        });
        if largest == 0.0 && alpha.1 == 0.0 {
            continue;
        }
        let norm_scale = largest.max(alpha.0.abs()).max(alpha.1.abs());
        let sq = |x: f64| (x / norm_scale) * (x / norm_scale);
        let sum: f64 = (j + 1..m)
            .map(|i| sq(r[i * n + j].0) + sq(r[i * n + j].1))
            .sum();
        let size = norm_scale * (sq(alpha.0) + sq(alpha.1) + sum).sqrt();
        // Fortran's `SIGN`, as LAPACK's reflectors take it: `-0.0` is negative.
        let beta = if alpha.0.is_sign_positive() {
            -size
        } else {
            size
        };
        let tau = ((beta - alpha.0) / beta, -alpha.1 / beta);
        let scale = csub(alpha, (beta, 0.0));
        let mut v = vec![(1.0, 0.0)];
        v.extend((j + 1..m).map(|i| cdiv(r[i * n + j], scale)));
        r[j * n + j] = (beta, 0.0);
        for i in j + 1..m {
            r[i * n + j] = v[i - j];
        }
        for c in j + 1..n {
            let w = (j..m).fold((0.0, 0.0), |s, i| {
                let p = cmul(cconj(v[i - j]), r[i * n + c]);
                (s.0 + p.0, s.1 + p.1)
            });
            let f = cmul(cconj(tau), w);
            for i in j..m {
                r[i * n + c] = csub(r[i * n + c], cmul(v[i - j], f));
            }
        }
        for row in 0..m {
            let u = (j..m).fold((0.0, 0.0), |s, i| {
                let p = cmul(q[row * m + i], v[i - j]);
                (s.0 + p.0, s.1 + p.1)
            });
            let f = cmul(u, tau);
            for i in j..m {
                q[row * m + i] = csub(q[row * m + i], cmul(f, cconj(v[i - j])));
            }
        }
    }
    let q_k: Vec<C> = (0..m * k).map(|ij| q[(ij / k) * m + ij % k]).collect();
    let r_k: Vec<C> = (0..k * n)
        .map(|ij| {
            let (i, c) = (ij / n, ij % n);
            if c >= i { r[i * n + c] } else { (0.0, 0.0) }
        })
        .collect();
    (q_k, r_k)
}

#[test]
fn det_cholesky_qr_and_norms_meet_references_written_out() {
    let np = weft_tests::numeric(2);
    for order in [1usize, 3, 70] {
        let a = pairs(order * order, 60 + order as u64);
        let za = upload(&np, &[order as u64, order as u64], &a);
        let det = read(&za.det().expect("a determinant"));
        close(
            &format!("det, order {order}"),
            &det,
            &[reference_det(&a, order)],
            1e-12,
        );
        let h = hermitian(order, 70 + order as u64);
        let zh = upload(&np, &[order as u64, order as u64], &h);
        let l = zh.cholesky().expect("positive definite");
        close(
            &format!("cholesky, order {order}"),
            &read(&l),
            &reference_cholesky(&h, order),
            1e-12,
        );
        close(
            &format!("L @ L^H, order {order}"),
            &read(&l.matmul(&l.conj().t())),
            &h,
            1e-12,
        );
    }
    let singular = upload(
        &np,
        &[2, 2],
        &[(1.0, 2.0), (3.0, -1.0), (-2.0, 1.0), (1.0, 3.0)],
    );
    assert_eq!(
        read(&singular.det().expect("a determinant")),
        vec![(0.0, 0.0)]
    );
    let empty = upload(&np, &[0, 0], &[]);
    assert_eq!(
        read(&empty.det().expect("the empty product")),
        vec![(1.0, 0.0)]
    );
    let e = upload(
        &np,
        &[2, 2],
        &[(1.0, 0.0), (2.0, 1.0), (2.0, -1.0), (1.0, 0.0)],
    )
    .cholesky()
    .expect_err("not positive definite");
    assert!(e.to_string().contains("not positive definite"), "{e}");
    for (m, n) in [(7usize, 4usize), (3, 5), (70, 70), (1, 3)] {
        let a = pairs(m * n, 80 + (m * n) as u64);
        let (q, r) = upload(&np, &[m as u64, n as u64], &a)
            .qr()
            .expect("factors");
        let (want_q, want_r) = reference_qr(&a, m, n);
        close(&format!("Q of {m}x{n}"), &read(&q), &want_q, 1e-12);
        close(&format!("R of {m}x{n}"), &read(&r), &want_r, 1e-12);
        close(
            &format!("Q @ R of {m}x{n}"),
            &read(&q.matmul(&r)),
            &a,
            1e-12,
        );
        let k = m.min(n);
        assert!(
            read(&r)
                .iter()
                .enumerate()
                .all(|(i, c)| i % n != i / n || c.1 == 0.0),
            "R's diagonal is real"
        );
        let eye: Vec<C> = (0..k * k)
            .map(|i| {
                if i / k == i % k {
                    (1.0, 0.0)
                } else {
                    (0.0, 0.0)
                }
            })
            .collect();
        close(
            &format!("Q^H Q of {m}x{n}"),
            &read(&q.conj().t().matmul(&q)),
            &eye,
            1e-12,
        );
    }
    // Edge columns: a zero column (not reflected), `-0.0` on the diagonal (negative, as
    // LAPACK's `SIGN` takes it), a tiny entry below the diagonal (reflected: its square
    // underflows, the scaled norm does not) and huge entries (no overflow); each element
    // against the reference relative to its own size.
    let fixtures: [(&str, [C; 4]); 4] = [
        (
            "zero column",
            [(0.0, 0.0), (1.0, 0.0), (0.0, 0.0), (2.0, 1.0)],
        ),
        (
            "-0.0 diagonal",
            [(-0.0, 0.0), (1.0, 0.0), (1.0, 0.0), (1.0, 0.0)],
        ),
        ("tiny", [(0.0, 0.0), (1.0, 0.0), (1e-300, 0.0), (1.0, 0.0)]),
        ("huge", [(1e200, 0.0), (1.0, 0.0), (1e200, 0.0), (2.0, 0.0)]),
    ];
    for (what, a) in fixtures {
        let (q, r) = upload(&np, &[2, 2], &a).qr().expect("factors");
        let (want_q, want_r) = reference_qr(&a, 2, 2);
        for (got, want) in [(read(&q), want_q), (read(&r), want_r)] {
            for (g, w) in got.iter().zip(&want) {
                let size = w.0.abs().max(w.1.abs()).max(1e-320);
                assert!(
                    (g.0 - w.0).abs() <= 1e-14 * size && (g.1 - w.1).abs() <= 1e-14 * size,
                    "{what}: {got:?} against {want:?}"
                );
                assert!(g.0.is_finite() && g.1.is_finite(), "{what}: {got:?}");
            }
        }
    }
    let (_, r) = upload(&np, &[2, 2], &fixtures[1].1).qr().expect("factors");
    assert!(
        read(&r)[0].0 > 0.0,
        "-0.0 counts as negative: beta is positive"
    );
    let (_, r) = upload(&np, &[2, 2], &fixtures[2].1).qr().expect("factors");
    assert_eq!(read(&r)[0], (-1e-300, 0.0), "the tiny entry is reflected");
    // Order 330: the rest after the first block updated in two strips of rows (256 and 10);
    // and `complex64`, factored in `f64` on the host block by block, within its precision.
    let h = hermitian(330, 97);
    let l = upload(&np, &[330, 330], &h)
        .cholesky()
        .expect("positive definite");
    close(
        "cholesky, order 330",
        &read(&l),
        &reference_cholesky(&h, 330),
        1e-12,
    );
    let h = hermitian(70, 98);
    let z = upload(&np, &[70, 70], &h).astype(DType::F32);
    let l = z.cholesky().expect("positive definite");
    assert_eq!(l.dtype().expect("a dtype"), DType::F32);
    let rounded: Vec<C> = h
        .iter()
        .map(|c| (f64::from(c.0 as f32), f64::from(c.1 as f32)))
        .collect();
    close(
        "cholesky, complex64",
        &read(&l),
        &reference_cholesky(&rounded, 70),
        1e-5,
    );
    // Cholesky reads the lower triangle and the diagonal's real part only.
    let order = 6;
    let h = hermitian(order, 95);
    let mut messy = h.clone();
    for i in 0..order {
        messy[i * order + i].1 = 5.0;
        for j in i + 1..order {
            messy[i * order + j] = (f64::NAN, f64::NAN);
        }
    }
    let l = upload(&np, &[order as u64, order as u64], &messy)
        .cholesky()
        .expect("reads the lower triangle");
    close(
        "cholesky of the lower triangle",
        &read(&l),
        &reference_cholesky(&h, order),
        1e-12,
    );
    // Norms: of the magnitudes, and the 2-norm as NumPy computes it.
    let v = pairs(40, 90);
    let zv = upload(&np, &[40], &v);
    let mags: Vec<f64> = v.iter().map(|c| c.0.hypot(c.1)).collect();
    let two = v.iter().map(|c| c.0 * c.0 + c.1 * c.1).sum::<f64>().sqrt();
    let one_norm: f64 = mags.iter().sum();
    let inf_norm = mags.iter().cloned().fold(0.0, f64::max);
    for (ord, want) in [
        (weft::numeric::NormOrd::Default, two),
        (weft::numeric::NormOrd::P(2.0), two),
        (weft::numeric::NormOrd::P(1.0), one_norm),
        (weft::numeric::NormOrd::Inf, inf_norm),
    ] {
        let got = zv.norm_ord(ord).expect("a norm").to_vec().expect("reads")[0];
        assert!(
            (got - want).abs() <= 1e-13 * want,
            "{ord:?}: {got} against {want}"
        );
    }
    let zm = upload(&np, &[5, 8], &v);
    let row_sums: Vec<f64> = (0..5)
        .map(|i| mags[i * 8..(i + 1) * 8].iter().sum())
        .collect();
    let got = zm
        .norm_ord(weft::numeric::NormOrd::Inf)
        .expect("a norm")
        .to_vec()
        .expect("reads")[0];
    let want = row_sums.iter().cloned().fold(0.0, f64::max);
    assert!(
        (got - want).abs() <= 1e-13 * want,
        "inf norm of a matrix: {got} against {want}"
    );
    // The 2-norm of a random matrix is at most its Frobenius norm and at least that over
    // the square root of its rank; both hold with the singular values' sum of squares.
    let s = zm
        .singular_values()
        .expect("singular values")
        .to_vec()
        .expect("reads");
    let frobenius: f64 = v[..40].iter().map(|c| c.0 * c.0 + c.1 * c.1).sum();
    let squares: f64 = s.iter().map(|x| x * x).sum();
    assert_eq!(s.len(), 5);
    assert!((squares - frobenius).abs() <= 1e-12 * frobenius, "{s:?}");
    assert!(s.windows(2).all(|w| w[0] >= w[1]), "descending: {s:?}");
}

/// `U diag(s) V^H` for unitary `U` (`m` x `k` columns of the `m`-point DFT) and `V` (the
/// `n`-point DFT times phases, `k = n`), row-major: a complex matrix whose singular values
/// are `s`.
fn with_singular_values(m: usize, s: &[f64]) -> Vec<C> {
    let n = s.len();
    let tau = std::f64::consts::TAU;
    let u = |i: usize, j: usize| {
        let t = -tau * (i * j) as f64 / m as f64;
        (t.cos() / (m as f64).sqrt(), t.sin() / (m as f64).sqrt())
    };
    let v = |l: usize, j: usize| {
        let t = -tau * (l * j) as f64 / n as f64 + 0.3 * j as f64;
        (t.cos() / (n as f64).sqrt(), t.sin() / (n as f64).sqrt())
    };
    let mut a = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        for l in 0..n {
            for (j, &sj) in s.iter().enumerate() {
                let (ur, ui) = u(i, j);
                let (vr, vi) = v(l, j);
                // u * s * conj(v)
                a[i * n + l].0 += sj * (ur * vr + ui * vi);
                a[i * n + l].1 += sj * (ui * vr - ur * vi);
            }
        }
    }
    a
}

#[test]
fn complex_singular_values_and_the_norms_they_give() {
    use weft::numeric::NormOrd;
    let np = weft_tests::numeric(2);
    let want = [3.5, 2.0, 0.75, 0.1];
    let a = with_singular_values(7, &want);
    let tall = upload(&np, &[7, 4], &a);
    // The wide matrix: the transpose, whose singular values are the same.
    let t: Vec<C> = (0..4)
        .flat_map(|l| (0..7).map(|i| a[i * 4 + l]).collect::<Vec<_>>())
        .collect();
    let wide = upload(&np, &[4, 7], &t);
    for z in [&tall, &wide] {
        let got = z.singular_values().expect("singular values");
        assert_eq!(got.dtype().expect("a dtype"), DType::F64);
        let got = got.to_vec().expect("reads");
        assert_eq!(got.len(), 4);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-13 * want[0], "{got:?} against {want:?}");
        }
        for (ord, w) in [
            (NormOrd::P(2.0), 3.5),
            (NormOrd::P(-2.0), 0.1),
            (NormOrd::Nuc, want.iter().sum::<f64>()),
        ] {
            let g = z.norm_ord(ord).expect("a norm").item().expect("0-d");
            assert!(
                (g - w).abs() <= 1e-13 * w.max(1.0),
                "{ord:?}: {g} against {w}"
            );
        }
    }
    // complex64 gives float32 values, NumPy's type.
    let single = tall
        .astype(DType::F32)
        .singular_values()
        .expect("singular values");
    assert_eq!(single.dtype().expect("a dtype"), DType::F32);
    let got = single.astype(DType::F64).to_vec().expect("reads");
    assert!((got[0] - 3.5).abs() < 1e-5, "{got:?}");
    // A vector has no singular values; the error says so as NumPy does.
    let e = upload(&np, &[3], &pairs(3, 5))
        .singular_values()
        .expect_err("one dimension");
    assert!(e.to_string().contains("1-dimensional array given"), "{e}");
}

/// `|z|` as the facade computes it (NumPy's scaled formula): the larger part times
/// `sqrt(1 + r^2)`, `r` the ratio of the smaller to the larger.
fn reference_abs(z: C) -> f64 {
    let (x, y) = (z.0.abs(), z.1.abs());
    let (m, n) = (x.max(y), x.min(y));
    if x == f64::INFINITY || y == f64::INFINITY {
        f64::INFINITY
    } else if n == 0.0 || m == f64::INFINITY {
        m
    } else {
        let r = n / m;
        m * (r * r + 1.0).sqrt()
    }
}

/// NPBench's Mandelbrot step, `I = abs(Z) < 2; N[I] = n; Z[I] = Z[I]**2 + C[I]`, on one
/// piece and three: the same bits as the step written out here, and no count or position is
/// read from a store on the way (the compressions are never carried out, `a[m] = f(a[m])`
/// being `where(m, f(a), a)`).
#[test]
fn masked_updates_match_the_loop_and_never_compress() {
    for pieces in [1, 3] {
        let np = crate::numpy_views::numeric_in_pieces(pieces);
        let (rows, cols) = (9usize, 13usize);
        let c_host = pairs(rows * cols, 77);
        let c = upload(&np, &[rows as u64, cols as u64], &c_host);
        let z = c.copy();
        let n = np.zeros(&[rows as u64, cols as u64], DType::I64);
        let (mut z_want, mut n_want) = (c_host.clone(), vec![0.0; rows * cols]);
        z.check().expect("uploads");
        let before = np.runtime(|rt| rt.stats().bytes_read);
        for it in 0..6i64 {
            let inside = z.abs().lt(2.0);
            n.assign_where(&inside, it).expect("assigns");
            let next =
                z.masked(&inside).expect("masked").powi(2) + &c.masked(&inside).expect("masked");
            z.assign_masked(&inside, &next).expect("assigns");
            for ((zw, nw), cw) in z_want.iter_mut().zip(&mut n_want).zip(&c_host) {
                if reference_abs(*zw) < 2.0 {
                    *nw = it as f64;
                    let sq = cmul(*zw, *zw);
                    *zw = (sq.0 + cw.0, sq.1 + cw.1);
                }
            }
        }
        z.check().expect("runs");
        n.check().expect("runs");
        assert_eq!(
            np.runtime(|rt| rt.stats().bytes_read),
            before,
            "{pieces} pieces: nothing read before the results"
        );
        same_bits("Z after six steps", &read(&z), &z_want);
        assert_eq!(n.to_vec().expect("reads"), n_want, "{pieces} pieces: N");
    }
}
