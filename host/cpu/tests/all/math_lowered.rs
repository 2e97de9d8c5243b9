//! The math-lowering pass's expansions compiled by the CPU back end: every math function, in
//! `f64` and `f32`, on 10^5 points each, against Rust's functions (and `erf`'s reference).

#![allow(clippy::unwrap_used)]

use crate::math_cases;
use crate::math_cases::{ALL, F, Rng, ulps32, ulps64};
use crate::util::*;
use weft_cpu::CpuBackend;
use weft_ir::passes::math::{has_math_functions, lower_math};
use weft_ir::{DType, Kernel};

/// `math_cases::kernel(f, t)`, lowered.
fn kernel(f: F, t: DType) -> Kernel {
    let lowered = lower_math(&math_cases::kernel(f, t));
    assert!(!has_math_functions(&lowered));
    lowered
}

fn run64(be: &mut CpuBackend, f: F, xs: &mut [f64], ys: &mut [f64]) -> Vec<f64> {
    let k = be.compile(&kernel(f, DType::F64)).unwrap();
    let n = xs.len() as i64;
    let mut out = vec![0.0; xs.len()];
    let views = [dense(xs, &[n]), dense(ys, &[n]), dense(&mut out, &[n])];
    run_on(&k, &views, &[], 2).unwrap();
    out
}

fn run32(be: &mut CpuBackend, f: F, xs: &mut [f32], ys: &mut [f32]) -> Vec<f32> {
    let k = be.compile(&kernel(f, DType::F32)).unwrap();
    let n = xs.len() as i64;
    let mut out = vec![0.0; xs.len()];
    let views = [dense(xs, &[n]), dense(ys, &[n]), dense(&mut out, &[n])];
    run_on(&k, &views, &[], 2).unwrap();
    out
}

/// The reference for the `f64` expansions (`math_cases::reference64`, with the CPU back
/// end's `erf` reference).
fn want64(f: F, x: f64, y: f64) -> f64 {
    math_cases::reference64(f, x, y, weft_cpu::math::erf)
}

/// The reference for the `f32` expansions.
fn want32(f: F, x: f32, y: f32) -> f32 {
    math_cases::reference32(f, x, y, weft_cpu::math::erf)
}

const N: usize = 100_000;

/// Half the points on a uniform grid over `[lo, hi]`, half random in it.
fn points(rng: &mut Rng, lo: f64, hi: f64) -> Vec<f64> {
    let grid = (0..N / 2).map(|i| lo + (hi - lo) * i as f64 / (N / 2 - 1) as f64);
    let random: Vec<f64> = (0..N / 2).map(|_| rng.uniform(lo, hi)).collect();
    grid.chain(random).collect()
}

/// The arguments for `f` in `f64`: `x` (and `y` for pow).
fn args(f: F, rng: &mut Rng) -> (Vec<f64>, Vec<f64>) {
    match f {
        F::Exp => (points(rng, -708.0, 709.0), vec![0.0; N]),
        // log: uniform in the exponent over (0, 1e300].
        F::Log => (
            points(rng, -690.0, 690.8)
                .into_iter()
                .map(f64::exp)
                .collect(),
            vec![0.0; N],
        ),
        F::Sin | F::Cos => (points(rng, -1e5, 1e5), vec![0.0; N]),
        F::Tanh => (points(rng, -25.0, 25.0), vec![0.0; N]),
        F::Erf => (points(rng, -7.0, 7.0), vec![0.0; N]),
        F::Pow => {
            // a > 0 and |b·ln a| < 700.
            let mut a = vec![];
            let mut b = vec![];
            for _ in 0..N {
                let l = rng.uniform(-700.0, 700.0);
                a.push(l.exp());
                b.push(rng.uniform(-700.0, 700.0) / l.abs().max(1e-3));
            }
            (a, b)
        }
        F::Asin | F::Acos | F::Atanh => (points(rng, -1.0, 1.0), vec![0.0; N]),
        F::Atan | F::Asinh => (points(rng, -50.0, 50.0), vec![0.0; N]),
        F::Sinh | F::Cosh => (points(rng, -710.4, 710.4), vec![0.0; N]),
        F::Acosh => (points(rng, 1.0, 1e4), vec![0.0; N]),
        F::Atan2 => (points(rng, -1e3, 1e3), points(rng, -1e3, 1e3)),
    }
}

#[test]
fn f64_expansions_match_std_on_100k_points() {
    let mut be = CpuBackend::new().unwrap();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut failures = vec![];
    for f in ALL {
        let (mut xs, mut ys) = args(f, &mut rng);
        let got = run64(&mut be, f, &mut xs, &mut ys);
        let mut worst = (0.0, 0.0, 0.0);
        for i in 0..N {
            let (x, y) = (xs[i], ys[i]);
            let err = match f {
                F::Erf => {
                    let want = weft_cpu::math::erf(x);
                    let d = (got[i] - want).abs();
                    // In units of 1e-16 relative, floored at 1e-16 absolute near 0.
                    if d == 0.0 {
                        0.0
                    } else {
                        d / (want.abs() * 1e-16).max(1e-32)
                    }
                }
                _ => ulps64(got[i], want64(f, x, y)),
            };
            if err > worst.0 {
                worst = (err, x, y);
            }
        }
        let bound = if f == F::Erf { 10.0 } else { 4.0 };
        println!(
            "f64 {f:?}: worst {} at ({:e}, {:e})",
            worst.0, worst.1, worst.2
        );
        if worst.0 > bound {
            failures.push(format!(
                "{f:?}: {} at ({:e}, {:e})",
                worst.0, worst.1, worst.2
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn f32_expansions_match_std_on_100k_points() {
    let mut be = CpuBackend::new().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut failures = vec![];
    for f in ALL {
        let (xs, ys): (Vec<f64>, Vec<f64>) = match f {
            F::Exp => (points(&mut rng, -103.0, 88.7), vec![0.0; N]),
            F::Log => (
                points(&mut rng, -103.0, 88.7)
                    .into_iter()
                    .map(f64::exp)
                    .collect(),
                vec![0.0; N],
            ),
            F::Sin | F::Cos => (points(&mut rng, -1e5, 1e5), vec![0.0; N]),
            F::Tanh => (points(&mut rng, -12.0, 12.0), vec![0.0; N]),
            F::Erf => (points(&mut rng, -5.0, 5.0), vec![0.0; N]),
            F::Pow => {
                let mut a = vec![];
                let mut b = vec![];
                for _ in 0..N {
                    let l = rng.uniform(-85.0, 85.0);
                    a.push(l.exp());
                    b.push(rng.uniform(-85.0, 85.0) / l.abs().max(1e-3));
                }
                (a, b)
            }
            F::Asin | F::Acos | F::Atanh => (points(&mut rng, -1.0, 1.0), vec![0.0; N]),
            F::Atan | F::Asinh => (points(&mut rng, -50.0, 50.0), vec![0.0; N]),
            F::Sinh | F::Cosh => (points(&mut rng, -89.4, 89.4), vec![0.0; N]),
            F::Acosh => (points(&mut rng, 1.0, 1e4), vec![0.0; N]),
            F::Atan2 => (points(&mut rng, -1e3, 1e3), points(&mut rng, -1e3, 1e3)),
        };
        let mut xs: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        let mut ys: Vec<f32> = ys.iter().map(|&y| y as f32).collect();
        let got = run32(&mut be, f, &mut xs, &mut ys);
        let mut worst = (0.0, 0.0f32, 0.0f32);
        for i in 0..N {
            let (x, y) = (xs[i], ys[i]);
            let want = want32(f, x, y);
            let err = ulps32(got[i], want);
            if err > worst.0 {
                worst = (err, x, y);
            }
        }
        println!(
            "f32 {f:?}: worst {} at ({:e}, {:e})",
            worst.0, worst.1, worst.2
        );
        if worst.0 > 4.0 {
            failures.push(format!(
                "{f:?}: {} at ({:e}, {:e})",
                worst.0, worst.1, worst.2
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn special_values_through_the_back_end() {
    let mut be = CpuBackend::new().unwrap();
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.0,
        3.0,
        5e-324,
        -5e-324,
        1e-310,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        709.79,
        -745.2,
        1e300,
    ];
    let same = |got: f64, want: f64| {
        if want.is_nan() || want.is_infinite() || want == 0.0 {
            (want.is_nan() && got.is_nan()) || got.to_bits() == want.to_bits()
        } else {
            ulps64(got, want) <= 4.0
        }
    };
    let mut failures = vec![];
    for f in ALL {
        let (mut xs, mut ys) = if matches!(f, F::Pow | F::Atan2) {
            let mut a = vec![];
            let mut b = vec![];
            for &x in &specials {
                for &y in &specials {
                    a.push(x);
                    b.push(y);
                }
            }
            (a, b)
        } else {
            (specials.to_vec(), vec![0.0; specials.len()])
        };
        let got = run64(&mut be, f, &mut xs, &mut ys);
        for i in 0..xs.len() {
            let (x, y) = (xs[i], ys[i]);
            if matches!(f, F::Sin | F::Cos) && x.is_finite() && x.abs() > 1e5 {
                continue;
            }
            let want = want64(f, x, y);
            if !same(got[i], want) {
                failures.push(format!("{f:?}({x:e}, {y:e}) = {:e}, want {want:e}", got[i]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn black_scholes_lowered_matches_the_calls() {
    // A call price: S·N(d1) - K·e^(-rT)·N(d2), N(x) = (1 + erf(x/√2))/2.
    let src = black_scholes_ir(false, false);
    let k = weft_ir::text::parse(&src).unwrap();
    let lowered = lower_math(&k);
    assert!(has_math_functions(&k) && !has_math_functions(&lowered));
    let mut be = CpuBackend::new().unwrap();
    let calls = be.compile(&k).unwrap();
    let expanded = be.compile(&lowered).unwrap();
    let mut rng = Rng(42);
    let n = 100_000;
    let mut s: Vec<f64> = (0..n).map(|_| rng.uniform(5.0, 30.0)).collect();
    let mut kk: Vec<f64> = (0..n).map(|_| rng.uniform(1.0, 100.0)).collect();
    let mut t: Vec<f64> = (0..n).map(|_| rng.uniform(0.25, 10.0)).collect();
    let scalars = [weft_ir::Scalar::F64(0.02), weft_ir::Scalar::F64(0.3)];
    let mut outs = vec![];
    for c in [&calls, &expanded] {
        let mut out = vec![0.0f64; n];
        let m = n as i64;
        let views = [
            dense(&mut s, &[m]),
            dense(&mut kk, &[m]),
            dense(&mut t, &[m]),
            dense(&mut out, &[m]),
        ];
        run_on(c, &views, &scalars, 2).unwrap();
        outs.push(out);
    }
    for i in 0..n {
        let (a, b) = (outs[0][i], outs[1][i]);
        // Prices are differences of products, so compare against the larger term.
        let scale = s[i].max(kk[i]);
        assert!((a - b).abs() <= 1e-14 * scale, "{i}: {a} vs {b}");
    }
}
