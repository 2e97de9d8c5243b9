//! Every numeric op through the real host and plugin, against plain-Rust references.
//!
//! Each test runs twice: with one point per launch, and with arrays split into 3 tiles, so
//! that results are shown not to depend on partitioning.

use weft::numeric::{BinaryOp, Reduction, UnaryOp};
use weft::{Array, Config, Ix, Numeric, Range};
use weft_ir::DType;

fn numeric(pieces: u64) -> Numeric {
    let config = Config {
        pieces,
        threads: 2,
        component_cache: None,
        ..Config::default()
    };
    weft_tests::numeric_with(config)
}

/// Runs `f` with one piece and with three.
fn both(f: impl Fn(&Numeric)) {
    for pieces in [1, 3] {
        f(&numeric(pieces));
    }
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w}");
    }
}

use weft_tests::uniform_data as data;

type Bin = fn(f64, f64) -> f64;
type Cmp = fn(f64, f64) -> bool;
type Un = fn(f64) -> f64;
/// A named element-wise method of [`Array`].
type Method = fn(&Array) -> Array;

fn arr(np: &Numeric, shape: &[u64], v: &[f64]) -> Array {
    np.from_f64s(shape, v, DType::F64)
}

#[test]
fn creation() {
    both(|np| {
        close(
            &np.zeros(&[5], DType::F64).to_vec().unwrap(),
            &[0.0; 5],
            0.0,
        );
        close(
            &np.ones(&[2, 3], DType::F32).to_vec().unwrap(),
            &[1.0; 6],
            0.0,
        );
        close(
            &np.full(&[4], 2.5, DType::F64).to_vec().unwrap(),
            &[2.5; 4],
            0.0,
        );
        close(
            &np.arange(1.0, 2.0, 0.25, DType::F64).to_vec().unwrap(),
            &[1.0, 1.25, 1.5, 1.75],
            1e-15,
        );
        close(
            &np.arange(0.0, 5.0, 1.0, DType::I64).to_vec().unwrap(),
            &[0.0, 1.0, 2.0, 3.0, 4.0],
            0.0,
        );
        close(
            &np.linspace(0.0, 1.0, 5, DType::F64).to_vec().unwrap(),
            &[0.0, 0.25, 0.5, 0.75, 1.0],
            1e-15,
        );
        close(
            &np.linspace(3.0, 9.0, 1, DType::F64).to_vec().unwrap(),
            &[3.0],
            0.0,
        );
        close(
            &np.from_f64s(&[3], &[1.7, -2.2, 0.0], DType::I64)
                .to_vec()
                .unwrap(),
            &[1.0, -2.0, 0.0],
            0.0,
        );
        close(
            &np.from_f64s(&[3], &[1.0, 0.0, 2.0], DType::Bool)
                .to_vec()
                .unwrap(),
            &[1.0, 0.0, 1.0],
            0.0,
        );
    });
}

#[test]
fn random_is_seeded_in_range_and_independent_of_partitioning() {
    let one = numeric(1)
        .random_uniform(&[1000], -2.0, 3.0, 42, DType::F64)
        .to_vec()
        .unwrap();
    let three = numeric(3)
        .random_uniform(&[1000], -2.0, 3.0, 42, DType::F64)
        .to_vec()
        .unwrap();
    assert_eq!(one, three);
    assert!(one.iter().all(|&x| (-2.0..3.0).contains(&x)));
    let mean = one.iter().sum::<f64>() / one.len() as f64;
    assert!((mean - 0.5).abs() < 0.2, "mean {mean}");
    let other = numeric(1)
        .random_uniform(&[1000], -2.0, 3.0, 43, DType::F64)
        .to_vec()
        .unwrap();
    assert_ne!(one, other);
}

#[test]
fn binary_ops_against_reference() {
    both(|np| {
        let a = data(37, 1, 0.5, 4.0);
        let b = data(37, 2, 0.5, 4.0);
        let (x, y) = (arr(np, &[37], &a), arr(np, &[37], &b));
        let cases: [(BinaryOp, Bin); 7] = [
            (BinaryOp::Add, |p, q| p + q),
            (BinaryOp::Sub, |p, q| p - q),
            (BinaryOp::Mul, |p, q| p * q),
            (BinaryOp::Div, |p, q| p / q),
            (BinaryOp::Pow, f64::powf),
            (BinaryOp::Minimum, f64::min),
            (BinaryOp::Maximum, f64::max),
        ];
        for (op, f) in cases {
            let want: Vec<f64> = a.iter().zip(&b).map(|(&p, &q)| f(p, q)).collect();
            close(&x.binary(op, &y).to_vec().unwrap(), &want, 1e-14);
            // With a scalar on either side.
            let want: Vec<f64> = a.iter().map(|&p| f(p, 1.5)).collect();
            close(&x.binary(op, 1.5).to_vec().unwrap(), &want, 1e-14);
        }
        let cmps: [(BinaryOp, Cmp); 6] = [
            (BinaryOp::Equal, |p, q| p == q),
            (BinaryOp::NotEqual, |p, q| p != q),
            (BinaryOp::Less, |p, q| p < q),
            (BinaryOp::LessEqual, |p, q| p <= q),
            (BinaryOp::Greater, |p, q| p > q),
            (BinaryOp::GreaterEqual, |p, q| p >= q),
        ];
        for (op, f) in cmps {
            let r = x.binary(op, &y);
            assert_eq!(r.dtype().unwrap(), DType::Bool);
            let want: Vec<f64> = a
                .iter()
                .zip(&b)
                .map(|(&p, &q)| f64::from(u8::from(f(p, q))))
                .collect();
            close(&r.to_vec().unwrap(), &want, 0.0);
        }
        // Operators and scalars on the left.
        let want: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(&p, &q)| 2.0 - p * q / (q + 1.0))
            .collect();
        close(
            &(2.0 - &x * &y / (&y + 1.0)).to_vec().unwrap(),
            &want,
            1e-14,
        );
        let want: Vec<f64> = a.iter().map(|&p| -p).collect();
        close(&(-&x).to_vec().unwrap(), &want, 0.0);
    });
}

#[test]
fn logical_ops_on_bools() {
    both(|np| {
        let p = [1.0, 1.0, 0.0, 0.0];
        let q = [1.0, 0.0, 1.0, 0.0];
        let (x, y) = (
            np.from_f64s(&[4], &p, DType::Bool),
            np.from_f64s(&[4], &q, DType::Bool),
        );
        close(
            &x.binary(BinaryOp::LogicalAnd, &y).to_vec().unwrap(),
            &[1.0, 0.0, 0.0, 0.0],
            0.0,
        );
        close(
            &x.binary(BinaryOp::LogicalOr, &y).to_vec().unwrap(),
            &[1.0, 1.0, 1.0, 0.0],
            0.0,
        );
        close(
            &x.unary(UnaryOp::LogicalNot).to_vec().unwrap(),
            &[0.0, 0.0, 1.0, 1.0],
            0.0,
        );
    });
}

#[test]
fn unary_ops_against_reference() {
    both(|np| {
        let a = data(29, 3, 0.1, 2.0);
        let x = arr(np, &[29], &a);
        let cases: [(UnaryOp, Un); 8] = [
            (UnaryOp::Neg, |v| -v),
            (UnaryOp::Abs, f64::abs),
            (UnaryOp::Sqrt, f64::sqrt),
            (UnaryOp::Exp, f64::exp),
            (UnaryOp::Log, f64::ln),
            (UnaryOp::Sin, f64::sin),
            (UnaryOp::Cos, f64::cos),
            (UnaryOp::Tanh, f64::tanh),
        ];
        for (op, f) in cases {
            let want: Vec<f64> = a.iter().map(|&v| f(v)).collect();
            close(&x.unary(op).to_vec().unwrap(), &want, 1e-14);
        }
        // erf against a series independent of the host's implementation.
        let want: Vec<f64> = a.iter().map(|&v| erf_series(v)).collect();
        close(&x.erf().to_vec().unwrap(), &want, 1e-13);
        let neg = arr(np, &[3], &[-3.0, -1.0, -0.5]);
        let want: Vec<f64> = [-3.0, -1.0, -0.5].iter().map(|&v| erf_series(v)).collect();
        close(&neg.erf().to_vec().unwrap(), &want, 1e-13);
    });
}

/// The inverse trigonometric functions, `arctan2` and the hyperbolic functions with their
/// inverses, against Rust's functions (the inverse hyperbolic ones against their logarithmic
/// definitions, accurate on these arguments), in `f64` and `f32`, fused and each alone.
#[test]
fn inverse_trigonometric_and_hyperbolic_functions_against_reference() {
    both(|np| {
        let a = data(41, 5, -0.99, 0.99);
        let b = data(41, 6, -3.0, 3.0);
        let (x, y) = (arr(np, &[41], &a), arr(np, &[41], &b));
        let cases: [(Method, Un); 8] = [
            (Array::arcsin, f64::asin),
            (Array::arccos, f64::acos),
            (Array::arctan, f64::atan),
            (Array::sinh, f64::sinh),
            (Array::cosh, f64::cosh),
            (Array::arcsinh, |v| {
                v.signum() * (v.abs() + (v * v + 1.0).sqrt()).ln()
            }),
            (Array::arccosh, |v| {
                let w = v.abs() + 1.5;
                (w + (w * w - 1.0).sqrt()).ln()
            }),
            (Array::arctanh, |v| 0.5 * ((1.0 + v) / (1.0 - v)).ln()),
        ];
        for (i, (f, r)) in cases.into_iter().enumerate() {
            // arccosh takes |x| + 1.5, in its domain.
            let (arg, want): (Array, Vec<f64>) = if i == 6 {
                (&x.abs() + 1.5, a.iter().map(|&v| r(v)).collect())
            } else {
                (x.copy(), a.iter().map(|&v| r(v)).collect())
            };
            close(&f(&arg).to_vec().unwrap(), &want, 1e-13);
            // In f32: within f32's precision of the f64 reference.
            let arg32 = arg.astype(DType::F32);
            let got32 = f(&arg32);
            assert_eq!(got32.dtype().unwrap(), DType::F32);
            close(&got32.to_vec().unwrap(), &want, 1e-6);
        }
        // arctan2 over all four quadrants, against an array and a scalar.
        let want: Vec<f64> = a.iter().zip(&b).map(|(&p, &q)| p.atan2(q)).collect();
        close(&x.arctan2(&y).to_vec().unwrap(), &want, 1e-15);
        let want: Vec<f64> = b.iter().map(|&q| q.atan2(-0.5)).collect();
        close(&y.arctan2(-0.5).to_vec().unwrap(), &want, 1e-15);
        // One fused expression, against the same built from the references.
        let fused = &(&x.arcsin() * &y.sinh()) + &x.arctanh().cosh();
        let want: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(&p, &q)| p.asin() * q.sinh() + (0.5 * ((1.0 + p) / (1.0 - p)).ln()).cosh())
            .collect();
        close(&fused.to_vec().unwrap(), &want, 1e-13);
        // Outside their domains: NaN, and infinities at the poles, as NumPy gives.
        let edge = arr(np, &[4], &[2.0, -1.0, 1.0, 0.5]);
        let got = edge.arcsin().to_vec().unwrap();
        assert!(
            got[0].is_nan() && got[1] == -std::f64::consts::FRAC_PI_2,
            "{got:?}"
        );
        let got = edge.arctanh().to_vec().unwrap();
        assert!(got[0].is_nan() && got[1] == f64::NEG_INFINITY && got[2] == f64::INFINITY);
        assert!(edge.arccosh().to_vec().unwrap()[3].is_nan());
        // Integers are taken as f64, as NumPy's `np.arctan` does; bools are refused.
        let i = np.from_f64s(&[3], &[1.0, -2.0, 0.0], DType::I64);
        assert_eq!(i.arctan().dtype().unwrap(), DType::F64);
        close(
            &i.arctan().to_vec().unwrap(),
            &[1f64.atan(), (-2f64).atan(), 0.0],
            1e-15,
        );
        let flags = np.from_f64s(&[2], &[1.0, 0.0], DType::Bool);
        let err = flags.arctan2(&flags).check().unwrap_err().to_string();
        assert!(err.contains("arctan2"), "{err}");
    });
}

/// NumPy's bitwise operators on `i64`, `i32` and bool arrays, against Rust's, with NumPy's
/// results for shift amounts from the bit width on (`<<` gives 0, `>>` is arithmetic).
#[test]
fn bitwise_operators_against_reference() {
    both(|np| {
        let a: Vec<i64> = vec![5, -8, 12, 0, -1, i64::MIN, 1 << 40];
        let b: Vec<i64> = vec![3, 2, 10, 7, 70, 63, 64];
        let af: Vec<f64> = a.iter().map(|&v| v as f64).collect();
        let bf: Vec<f64> = b.iter().map(|&v| v as f64).collect();
        let (x, y) = (
            np.from_f64s(&[7], &af, DType::I64),
            np.from_f64s(&[7], &bf, DType::I64),
        );
        let want = |f: fn(i64, i64) -> i64| -> Vec<f64> {
            a.iter().zip(&b).map(|(&p, &q)| f(p, q) as f64).collect()
        };
        let shl = |p: i64, q: i64| if q >= 64 { 0 } else { p << q };
        let shr = |p: i64, q: i64| p >> q.min(63);
        assert_eq!((&x & &y).to_vec().unwrap(), want(|p, q| p & q));
        assert_eq!((&x | &y).to_vec().unwrap(), want(|p, q| p | q));
        assert_eq!((&x ^ &y).to_vec().unwrap(), want(|p, q| p ^ q));
        assert_eq!((&x << &y).to_vec().unwrap(), want(shl));
        assert_eq!((&x >> &y).to_vec().unwrap(), want(shr));
        assert_eq!((!&x).to_vec().unwrap(), want(|p, _| !p));
        assert_eq!(x.left_shift(3).to_vec().unwrap(), want(|p, _| p << 3));
        assert_eq!(x.right_shift(1).to_vec().unwrap(), want(|p, _| p >> 1));
        // One fused expression.
        let fused = &(&(&x & &y) ^ &(&x << 1)) >> 1;
        assert_eq!(fused.dtype().unwrap(), DType::I64);
        assert_eq!(
            fused.to_vec().unwrap(),
            want(|p, q| ((p & q) ^ (p << 1)) >> 1)
        );
        // i32: the width is 32.
        let a32: Vec<i32> = vec![-7, 9, 1 << 30, -1];
        let b32: Vec<i32> = vec![1, 31, 32, 40];
        let x32 = np.from_f64s(
            &[4],
            &a32.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            DType::I32,
        );
        let y32 = np.from_f64s(
            &[4],
            &b32.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            DType::I32,
        );
        let w32 = |f: fn(i32, i32) -> i32| -> Vec<f64> {
            a32.iter()
                .zip(&b32)
                .map(|(&p, &q)| f64::from(f(p, q)))
                .collect()
        };
        assert_eq!(
            (&x32 << &y32).to_vec().unwrap(),
            w32(|p, q| if q >= 32 { 0 } else { p << q })
        );
        assert_eq!((&x32 >> &y32).to_vec().unwrap(), w32(|p, q| p >> q.min(31)));
        assert_eq!((&x32 ^ &y32).dtype().unwrap(), DType::I32);
        // Bools: logical, as NumPy's.
        let p = np.from_f64s(&[4], &[1.0, 1.0, 0.0, 0.0], DType::Bool);
        let q = np.from_f64s(&[4], &[1.0, 0.0, 1.0, 0.0], DType::Bool);
        assert_eq!((&p & &q).to_vec().unwrap(), vec![1.0, 0.0, 0.0, 0.0]);
        assert_eq!((&p | &q).to_vec().unwrap(), vec![1.0, 1.0, 1.0, 0.0]);
        assert_eq!((&p ^ &q).to_vec().unwrap(), vec![0.0, 1.0, 1.0, 0.0]);
        assert_eq!((!&p).to_vec().unwrap(), vec![0.0, 0.0, 1.0, 1.0]);
        assert_eq!((&p ^ &q).dtype().unwrap(), DType::Bool);
        // Floats are refused, naming the operator; shifts refuse bools.
        let f = np.ones(&[2], DType::F64);
        let err = (&f & &f).check().unwrap_err().to_string();
        assert!(
            err.contains("bitwise-and") && err.contains("integer"),
            "{err}"
        );
        let err = (&p << &q).check().unwrap_err().to_string();
        assert!(
            err.contains("left-shift") && err.contains("integer"),
            "{err}"
        );
        let err = f.invert().check().unwrap_err().to_string();
        assert!(err.contains("invert"), "{err}");
    });
}

/// erf by its Taylor series (converges for the small arguments used here).
fn erf_series(x: f64) -> f64 {
    let mut sum: f64 = 0.0;
    let mut term = x;
    let mut n = 0.0;
    while term.abs() > 1e-18 * sum.abs().max(1e-300) || n < 3.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
        if n > 200.0 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn f32_and_integer_dtypes() {
    both(|np| {
        let a = np.from_f64s(&[4], &[1.5, 2.5, -3.5, 4.0], DType::F32);
        let r = (&a * &a).to_vec().unwrap();
        close(&r, &[2.25, 6.25, 12.25, 16.0], 1e-6);
        assert_eq!((&a * 2.0).dtype().unwrap(), DType::F32);
        let i = np.from_f64s(&[4], &[7.0, -7.0, 9.0, 0.0], DType::I64);
        // NumPy's `/` is true division, in f64, with a float or an integer scalar.
        close(&(&i / 2.0).to_vec().unwrap(), &[3.5, -3.5, 4.5, 0.0], 0.0);
        close(&(&i / 2).to_vec().unwrap(), &[3.5, -3.5, 4.5, 0.0], 0.0);
        assert_eq!((&i / 2).dtype().unwrap(), DType::F64);
        close(
            &(&i / 0.0).to_vec().unwrap(),
            &[f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NAN],
            0.0,
        );
        // An integer scalar keeps an integer array's type; a float one makes it f64.
        assert_eq!((&i * 3).dtype().unwrap(), DType::I64);
        close(&(&i * 3).to_vec().unwrap(), &[21.0, -21.0, 27.0, 0.0], 0.0);
        assert_eq!((&i * 0.5).dtype().unwrap(), DType::F64);
        close(&i.sum().to_vec().unwrap(), &[9.0], 0.0);
        close(
            &a.astype(DType::I64).to_vec().unwrap(),
            &[1.0, 2.0, -3.0, 4.0],
            0.0,
        );
        close(
            &i.astype(DType::F64).to_vec().unwrap(),
            &[7.0, -7.0, 9.0, 0.0],
            0.0,
        );
    });
}

#[test]
fn select_where() {
    both(|np| {
        let a = data(20, 4, -1.0, 1.0);
        let x = arr(np, &[20], &a);
        let r = x.gt(0.0).select(&x, 0.0);
        let want: Vec<f64> = a.iter().map(|&v| if v > 0.0 { v } else { 0.0 }).collect();
        close(&r.to_vec().unwrap(), &want, 0.0);
    });
}

#[test]
fn reductions_against_reference() {
    both(|np| {
        let a = data(101, 5, 0.5, 1.5);
        let b = data(101, 6, -1.0, 1.0);
        let (x, y) = (arr(np, &[101], &a), arr(np, &[101], &b));
        let sum: f64 = a.iter().sum();
        close(&[x.sum().item().unwrap()], &[sum], 1e-13);
        close(
            &[x.reduce(Reduction::Prod).item().unwrap()],
            &[a.iter().product()],
            1e-12,
        );
        close(
            &[x.min().item().unwrap()],
            &[a.iter().copied().fold(f64::INFINITY, f64::min)],
            0.0,
        );
        close(
            &[x.max().item().unwrap()],
            &[a.iter().copied().fold(f64::NEG_INFINITY, f64::max)],
            0.0,
        );
        let dot: f64 = a.iter().zip(&b).map(|(p, q)| p * q).sum();
        close(&[x.dot(&y).item().unwrap()], &[dot], 1e-12);
        let norm = b.iter().map(|v| v * v).sum::<f64>().sqrt();
        close(&[y.norm().item().unwrap()], &[norm], 1e-13);
        assert!(
            x.sum().shape().unwrap().is_empty(),
            "reductions give 0-d arrays"
        );
        // A 2-D reduction.
        let m = arr(np, &[7, 3], &data(21, 7, 0.0, 1.0));
        close(
            &[m.sum().item().unwrap()],
            &[data(21, 7, 0.0, 1.0).iter().sum()],
            1e-13,
        );
    });
}

#[test]
fn zero_d_arrays_broadcast_against_arrays() {
    both(|np| {
        let a = data(10, 8, 0.0, 1.0);
        let x = arr(np, &[10], &a);
        let s = x.sum();
        let want: Vec<f64> = a.iter().map(|v| v / a.iter().sum::<f64>()).collect();
        close(&(&x / &s).to_vec().unwrap(), &want, 1e-14);
    });
}

#[test]
fn dense_linear_algebra() {
    both(|np| {
        let (m, n, k) = (7usize, 5usize, 4usize);
        let a = data(m * n, 9, -1.0, 1.0);
        let v = data(n, 10, -1.0, 1.0);
        let b = data(n * k, 11, -1.0, 1.0);
        let am = arr(np, &[m as u64, n as u64], &a);
        let want: Vec<f64> = (0..m)
            .map(|i| (0..n).map(|j| a[i * n + j] * v[j]).sum())
            .collect();
        close(
            &am.matvec(&arr(np, &[n as u64], &v)).to_vec().unwrap(),
            &want,
            1e-14,
        );
        let want: Vec<f64> = (0..m * k)
            .map(|ij| {
                (0..n)
                    .map(|l| a[(ij / k) * n + l] * b[l * k + ij % k])
                    .sum()
            })
            .collect();
        close(
            &am.matmul(&arr(np, &[n as u64, k as u64], &b))
                .to_vec()
                .unwrap(),
            &want,
            1e-14,
        );
        let want: Vec<f64> = (0..n.min(m)).map(|i| a[i * n + i]).collect();
        close(&am.diag().to_vec().unwrap(), &want, 0.0);
        let d = arr(np, &[3], &[1.0, 2.0, 3.0]).diag();
        assert_eq!(d.shape().unwrap(), vec![3, 3]);
        close(
            &d.to_vec().unwrap(),
            &[1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0],
            0.0,
        );
    });
}

#[test]
fn views_slices_and_aliasing() {
    both(|np| {
        let n = 6usize;
        let g: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
        let grid = arr(np, &[n as u64, n as u64], &g);
        let center = grid.slice(&[Range::new(1, -1), Range::new(1, -1)]);
        let north = grid.slice(&[Range::new(0, -2), Range::new(1, -1)]);
        assert_eq!(center.shape().unwrap(), vec![4, 4]);
        let want: Vec<f64> = (1..n - 1)
            .flat_map(|i| (1..n - 1).map(move |j| (i * n + j) as f64))
            .collect();
        close(&center.to_vec().unwrap(), &want, 0.0);
        // center + north reads two aliasing views of one storage.
        let want: Vec<f64> = (1..n - 1)
            .flat_map(|i| (1..n - 1).map(move |j| ((i * n + j) + ((i - 1) * n + j)) as f64))
            .collect();
        close(&(&center + &north).to_vec().unwrap(), &want, 0.0);
        // Writing through a view changes the parent.
        center.assign(-1.0).unwrap();
        let after = grid.to_vec().unwrap();
        for i in 0..n {
            for j in 0..n {
                let inside = (1..n - 1).contains(&i) && (1..n - 1).contains(&j);
                let want = if inside { -1.0 } else { (i * n + j) as f64 };
                assert_eq!(after[i * n + j], want, "({i},{j})");
            }
        }
        // Overlapping in-place copy behaves like NumPy: v[1:] = v[:-1].
        let v = arr(np, &[5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
        v.slice(&[Range::new(1, 5)])
            .assign(&v.slice(&[Range::new(0, 4)]))
            .unwrap();
        close(&v.to_vec().unwrap(), &[1.0, 1.0, 2.0, 3.0, 4.0], 0.0);
        // Open and negative bounds, and empty slices.
        let w = arr(np, &[5], &[0.0, 1.0, 2.0, 3.0, 4.0]);
        let tail = w.slice(&[Range::from(-2)]);
        close(&tail.to_vec().unwrap(), &[3.0, 4.0], 0.0);
        assert_eq!(w.slice(&[Range::new(3, 1)]).shape().unwrap(), vec![0]);
        // A copy does not alias.
        let c = w.copy();
        w.assign(7.0).unwrap();
        close(&c.to_vec().unwrap(), &[0.0, 1.0, 2.0, 3.0, 4.0], 0.0);
    });
}

#[test]
fn shape_and_dtype_errors_are_clear() {
    let np = numeric(1);
    let a = np.zeros(&[3, 4], DType::F64);
    let b = np.zeros(&[4], DType::F64);
    let bad = np.zeros(&[3], DType::F64);
    let err = (&a + &bad).check().unwrap_err().to_string();
    assert!(
        err.contains("numeric")
            && err.contains("add")
            && err.contains("could not be broadcast together with shapes (3,4) (3,)"),
        "{err}"
    );
    // Mixed float types promote, as in NumPy.
    let f = np.zeros(&[4], DType::F32);
    assert_eq!((&b * &f).dtype().unwrap(), DType::F64);
    let i = np.zeros(&[4], DType::I64);
    // A float operator takes integers as f64, as NumPy's `np.sqrt`; a bool one refuses them.
    assert_eq!(i.sqrt().dtype().unwrap(), DType::F64);
    let err = i.logical_not().check().unwrap_err().to_string();
    assert!(err.contains("logical-not") && err.contains("bool"), "{err}");
    let err = a
        .matvec(&np.zeros(&[3], DType::F64))
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("matvec"), "{err}");
    let err = b
        .slice(&[Range::all(), Range::all()])
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("slice"), "{err}");
    // An error poisons what is built on it, and the runtime keeps working.
    let poisoned = (&a + &bad) * 2.0;
    assert!(poisoned.check().is_err());
    close(&(&b + 1.0).to_vec().unwrap(), &[1.0; 4], 0.0);
}

#[test]
fn dropped_arrays_free_their_storage() {
    let np = numeric(1);
    let keep = np.ones(&[1000], DType::F64);
    keep.to_vec().unwrap();
    let (_, before) = np.runtime(|rt| rt.memory());
    for _ in 0..20 {
        let t = &keep * 2.0 + 1.0;
        t.sum().item().unwrap();
    }
    let (stores, after) = np.runtime(|rt| rt.memory());
    assert_eq!(
        after, before,
        "temporaries were freed ({stores} stores alive)"
    );
}

/// `x - x.max(axis=-1, keepdims=True)` (a softmax's first step) and `min` over the last axis,
/// for rows short and long and for few rows and many: exact reductions over trailing axes
/// take the per-row loops when there are rows enough, and the maxima are read through a view
/// broadcast along the rows; every element equals the host's, bit for bit.
#[test]
fn last_axis_reductions_and_their_broadcasts_equal_the_host() {
    both(|np| {
        for (rows, cols) in [(300usize, 70usize), (80, 3000), (20, 5000), (1, 9)] {
            let values = data(rows * cols, rows as u64, -3.0, 3.0);
            let x = np.from_vec(&[rows as u64, cols as u64], &values);
            let row = |i: usize| &values[i * cols..(i + 1) * cols];
            let maxima: Vec<f64> = (0..rows)
                .map(|i| row(i).iter().copied().fold(f64::NEG_INFINITY, f64::max))
                .collect();
            let minima: Vec<f64> = (0..rows)
                .map(|i| row(i).iter().copied().fold(f64::INFINITY, f64::min))
                .collect();
            let m = x.reduce_axes(Reduction::Max, Some(&[-1]), true);
            assert_eq!(m.shape().unwrap(), vec![rows as u64, 1]);
            assert_eq!(m.to_vec().unwrap(), maxima, "{rows} x {cols} max");
            let lo = x.reduce_axes(Reduction::Min, Some(&[1]), false);
            assert_eq!(lo.to_vec().unwrap(), minima, "{rows} x {cols} min");
            let shifted = (&x - &m).to_vec().unwrap();
            let want: Vec<f64> = (0..rows * cols)
                .map(|k| values[k] - maxima[k / cols])
                .collect();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
            assert_eq!(bits(&shifted), bits(&want), "{rows} x {cols} x - max");
        }
    });
}

/// `A @ x` for a wide matrix stored by rows: with rows enough it takes the row products (each
/// row in the lane order of `fold_lanes`, so its bits are the host's lane-order sums); with
/// few rows it goes by columns. Both agree with the plain sum.
/// `X.T @ B` for a tall `X` stored by rows, a long inner dimension and a small product (as in
/// k-means' `onehot.T @ x`) is launched over the rows: each element is the element tree of
/// its contributions, blocks of 4096 rows folded in row order, the blocks added. The bits are
/// those on one piece and three, fused with the producer of `B` and not, and a transpose that
/// is not stored by rows (or a short inner dimension) still gives the row products' answer.
#[test]
fn transposed_tall_products_add_outer_products_by_rows() {
    let (k, m, n) = (5000usize, 3usize, 4usize);
    let x = data(k * m, 11, -1.0, 1.0);
    let b = data(k * n, 12, -1.0, 1.0);
    let tree = |r: usize, j: usize| {
        let fold = |rows: std::ops::Range<usize>| {
            rows.fold(0.0f64, |acc, i| acc + x[i * m + r] * (2.0 * b[i * n + j]))
        };
        fold(0..4096) + fold(4096..k)
    };
    let want: Vec<f64> = (0..m)
        .flat_map(|r| (0..n).map(move |j| (r, j)))
        .map(|(r, j)| tree(r, j))
        .collect();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    for fusion in [true, false] {
        both(|np| {
            np.runtime(|rt| rt.set_fusion(fusion)).unwrap();
            let xs = np.from_vec(&[k as u64, m as u64], &x);
            // `2 * B`: an element-wise producer the product may fuse with.
            let bs = np.from_vec(&[k as u64, n as u64], &b) * 2.0;
            let got = xs.t().matmul(&bs).to_vec().unwrap();
            assert_eq!(bits(&got), bits(&want), "fusion {fusion}");
            // `X` stored by columns: its transpose is not stored by rows.
            let columns = np.from_vec(&[m as u64, k as u64], &transpose(&x, k, m));
            let got = columns.matmul(&bs).to_vec().unwrap();
            close(&got, &want, 1e-12);
        });
    }
}

/// The `(cols, rows)` row-major transpose of a `(rows, cols)` row-major matrix.
fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| a[r * cols + c]))
        .collect()
}

#[test]
fn wide_products_stored_by_rows_take_the_row_products() {
    both(|np| {
        for (m, n) in [(100usize, 300usize), (10, 300)] {
            let a = data(m * n, m as u64, -1.0, 1.0);
            let x = data(n, 7, -1.0, 1.0);
            let got = np
                .from_vec(&[m as u64, n as u64], &a)
                .matvec(&np.from_vec(&[n as u64], &x))
                .to_vec()
                .unwrap();
            let lanes = |i: usize| {
                let row = &a[i * n..(i + 1) * n];
                let mut p = [0.0f64; 8];
                for q in 0..n / 8 {
                    for (k, acc) in p.iter_mut().enumerate() {
                        *acc += row[q * 8 + k] * x[q * 8 + k];
                    }
                }
                let tail: f64 = (n / 8 * 8..n).fold(0.0, |t, j| t + row[j] * x[j]);
                (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) + tail
            };
            let want: Vec<f64> = (0..m).map(lanes).collect();
            if m >= 64 {
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
                assert_eq!(bits(&got), bits(&want), "{m} x {n}: row products");
            } else {
                close(&got, &want, 1e-12);
            }
        }
    });
}

/// A reduction of a 0-d array (`x.sum().sum()`) is its one element, for every reduction and
/// dtype (the CPU back end once indexed past a 0-d store's missing dimensions).
#[test]
fn reductions_of_a_0d_array_give_its_element() {
    both(|np| {
        for dtype in [DType::F64, DType::F32, DType::I64] {
            let x = np.from_f64s(&[4], &[3.0, -1.0, 2.0, 5.0], dtype);
            for (op, want) in [
                (Reduction::Sum, 9.0),
                (Reduction::Prod, -30.0),
                (Reduction::Min, -1.0),
                (Reduction::Max, 5.0),
            ] {
                let once = x.reduce(op);
                assert_eq!(once.shape().ok(), Some(vec![]), "{op:?} {dtype:?}");
                let again = once.reduce(op).reduce(op);
                assert_eq!(again.item().ok(), Some(want), "{op:?} {dtype:?}");
            }
        }
    });
}

/// Products with no rows, no columns or no terms, as NumPy gives them: an empty result, or
/// zeros (the sum of no terms), with `A` stored by rows and through a transpose.
#[test]
fn empty_products_are_empty_or_zero() {
    both(|np| {
        for (m, k, n) in [(0usize, 5usize, 20usize), (20, 5, 0), (3, 0, 4), (0, 0, 0)] {
            let a = data(m * k, 3, -1.0, 1.0);
            let b = data(k * n, 4, -1.0, 1.0);
            let bm = np.from_vec(&[k as u64, n as u64], &b);
            let by_rows = np.from_vec(&[m as u64, k as u64], &a);
            let by_columns = np.from_vec(&[k as u64, m as u64], &transpose(&a, m, k)).t();
            for am in [by_rows, by_columns] {
                let c = am.matmul(&bm);
                assert_eq!(
                    c.shape().unwrap(),
                    vec![m as u64, n as u64],
                    "{m}x{k} @ {k}x{n}"
                );
                let got = c.to_vec().unwrap();
                assert_eq!(got, vec![0.0; m * n], "{m}x{k} @ {k}x{n}");
            }
        }
    });
}

/// A loop that reads a small transposed column broadcast over its rows (`x.T - x`, NPBench's
/// `nbody`: the launch packs `x.T` dense, so the loop runs in vector code) gives the bits of
/// the same arithmetic written out, and an update of the array the column is cut from reads
/// the column's old values, as NumPy's does.
#[test]
fn a_broadcast_transposed_column_gives_the_bits_of_the_loop_written_out() {
    let np = weft_tests::numeric(2);
    let n = 37usize;
    let all = Ix::Slice(Range::all());
    let vals: Vec<f64> = (0..n * 3)
        .map(|i| ((i * 7919) % 101) as f64 / 13.0 - 3.0)
        .collect();
    let pos = np.from_vec(&[n as u64, 3], &vals);
    for c in 0..3usize {
        let x = pos.index(&[all, Ix::Slice(Range::new(c as i64, c as i64 + 1))]);
        let d = &x.t() - &x;
        let r = &(&(&d * &d) + 0.01).sqrt() * 2.0;
        let got = r.to_vec().expect("reads");
        for i in 0..n {
            for j in 0..n {
                let dd = vals[j * 3 + c] - vals[i * 3 + c];
                let want = (dd * dd + 0.01).sqrt() * 2.0;
                assert_eq!(
                    got[i * n + j].to_bits(),
                    want.to_bits(),
                    "column {c} ({i}, {j})"
                );
            }
        }
    }
    // `a += a[:, 0:1].T`: every element takes the first column's old value of its column.
    let square: Vec<f64> = (0..n * n).map(|i| (i % 17) as f64 * 0.25 - 1.0).collect();
    let mut a = np.from_vec(&[n as u64, n as u64], &square);
    let first = a.index(&[all, Ix::Slice(Range::new(0, 1))]).t();
    a += &first;
    let got = a.to_vec().expect("reads");
    for i in 0..n {
        for j in 0..n {
            let want = square[i * n + j] + square[j * n];
            assert_eq!(got[i * n + j].to_bits(), want.to_bits(), "({i}, {j})");
        }
    }
}
