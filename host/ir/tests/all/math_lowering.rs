//! The math-lowering pass: structure (validity, idempotence, untouched operations) and accuracy
//! of the expansions, run through a small IR interpreter and compared with Rust's functions.

#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use crate::common::Gen;
use crate::math_cases;
use math_cases::{ALL, F, Rng, kernel, ulps32, ulps64};
use proptest::prelude::*;
use weft_ir::builder::KernelBuilder;
use weft_ir::passes::math::{has_math_functions, is_math_function, lower_math};
use weft_ir::{
    BinaryOp, CmpOp, DType, Inst, Kernel, Op, Privilege, UnaryOp, ValueId, text, validate,
};

// ---------------------------------------------------------------------------------------------
// An interpreter for elementwise kernels
// ---------------------------------------------------------------------------------------------

/// Runs `kernel`, whose body is top-level pure instructions and parallel loops over rank-1
/// stores, on stores given as columns of bits (one column per store parameter).
struct Interp {
    regs: Vec<u64>,
    types: validate::Types,
}

fn f64_of(b: u64) -> f64 {
    f64::from_bits(b)
}
fn f32_of(b: u64) -> f32 {
    f32::from_bits(b as u32)
}

fn fmin<T: PartialOrd + Copy>(a: T, b: T, nan: bool, or_bits: impl Fn() -> T) -> Option<T> {
    if nan {
        None
    } else if a == b {
        Some(or_bits())
    } else if a < b {
        Some(a)
    } else {
        Some(b)
    }
}

impl Interp {
    fn new(k: &Kernel) -> Interp {
        Interp {
            regs: vec![0; k.value_bound() as usize],
            types: validate(k).unwrap(),
        }
    }

    fn ty(&self, v: ValueId) -> DType {
        self.types.of(v)
    }

    fn get(&self, v: ValueId) -> u64 {
        self.regs[v.0 as usize]
    }

    fn binary(&self, op: BinaryOp, t: DType, a: u64, b: u64) -> u64 {
        use BinaryOp::*;
        match t {
            DType::F64 => {
                let (x, y) = (f64_of(a), f64_of(b));
                let nan = x.is_nan() || y.is_nan();
                let r = match op {
                    Add => x + y,
                    Sub => x - y,
                    Mul => x * y,
                    Div => x / y,
                    Rem => x % y,
                    Min => fmin(x, y, nan, || f64_of(a | b)).unwrap_or(f64::NAN),
                    Max => fmin(-x, -y, nan, || -f64_of(a & b)).map_or(f64::NAN, |v| -v),
                    Pow => x.powf(y),
                    _ => panic!("{op:?} on f64"),
                };
                r.to_bits()
            }
            DType::F32 => {
                let (x, y) = (f32_of(a), f32_of(b));
                let nan = x.is_nan() || y.is_nan();
                let r = match op {
                    Add => x + y,
                    Sub => x - y,
                    Mul => x * y,
                    Div => x / y,
                    Rem => x % y,
                    Min => fmin(x, y, nan, || f32_of(a | b)).unwrap_or(f32::NAN),
                    Max => fmin(-x, -y, nan, || -f32_of(a & b)).map_or(f32::NAN, |v| -v),
                    Pow => x.powf(y),
                    _ => panic!("{op:?} on f32"),
                };
                u64::from(r.to_bits())
            }
            DType::I64 => {
                let (x, y) = (a as i64, b as i64);
                (match op {
                    Add => x.wrapping_add(y),
                    Sub => x.wrapping_sub(y),
                    Mul => x.wrapping_mul(y),
                    Min => x.min(y),
                    Max => x.max(y),
                    And => x & y,
                    Or => x | y,
                    Xor => x ^ y,
                    Shl => x.wrapping_shl(y as u32),
                    Shr => (x as u64).wrapping_shr(y as u32) as i64,
                    _ => panic!("{op:?} on i64"),
                }) as u64
            }
            DType::I32 => {
                let (x, y) = (a as u32 as i32, b as u32 as i32);
                u64::from(
                    (match op {
                        Add => x.wrapping_add(y),
                        Sub => x.wrapping_sub(y),
                        Mul => x.wrapping_mul(y),
                        Min => x.min(y),
                        Max => x.max(y),
                        And => x & y,
                        Or => x | y,
                        Xor => x ^ y,
                        Shl => x.wrapping_shl(y as u32),
                        Shr => (x as u32).wrapping_shr(y as u32) as i32,
                        _ => panic!("{op:?} on i32"),
                    }) as u32,
                )
            }
            DType::Bool => match op {
                And | Min => a & b,
                Or | Max => a | b,
                Xor => a ^ b,
                _ => panic!("{op:?} on bool"),
            },
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    fn unary(&self, op: UnaryOp, t: DType, a: u64) -> u64 {
        use UnaryOp::*;
        match t {
            DType::F64 => {
                let x = f64_of(a);
                (match op {
                    Neg => -x,
                    Abs => x.abs(),
                    Sqrt => x.sqrt(),
                    Floor => x.floor(),
                    Ceil => x.ceil(),
                    _ => panic!("{op:?} left in a lowered kernel"),
                })
                .to_bits()
            }
            DType::F32 => {
                let x = f32_of(a);
                u64::from(
                    (match op {
                        Neg => -x,
                        Abs => x.abs(),
                        Sqrt => x.sqrt(),
                        Floor => x.floor(),
                        Ceil => x.ceil(),
                        _ => panic!("{op:?} left in a lowered kernel"),
                    })
                    .to_bits(),
                )
            }
            DType::I64 => match op {
                Neg => (a as i64).wrapping_neg() as u64,
                Not => !a,
                _ => panic!("{op:?} on i64"),
            },
            DType::I32 => match op {
                Neg => u64::from((a as u32 as i32).wrapping_neg() as u32),
                Not => u64::from(!(a as u32)),
                _ => panic!("{op:?} on i32"),
            },
            DType::Bool => a ^ 1,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    fn cmp(&self, op: CmpOp, t: DType, a: u64, b: u64) -> bool {
        fn go<T: PartialOrd>(op: CmpOp, x: T, y: T) -> bool {
            match op {
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
            }
        }
        match t {
            DType::F64 => go(op, f64_of(a), f64_of(b)),
            DType::F32 => go(op, f32_of(a), f32_of(b)),
            DType::I64 => go(op, a as i64, b as i64),
            DType::I32 => go(op, a as u32 as i32, b as u32 as i32),
            DType::Bool => go(op, a, b),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    fn cast(from: DType, to: DType, a: u64) -> u64 {
        match (from, to) {
            _ if from == to => a,
            (DType::F32, DType::F64) => f64::from(f32_of(a)).to_bits(),
            (DType::F64, DType::F32) => u64::from((f64_of(a) as f32).to_bits()),
            _ => panic!("cast {from} -> {to} not expected"),
        }
    }

    /// Evaluates a straight-line block; loads and stores go to `cols` at index `i`.
    fn block(&mut self, body: &[Inst], cols: &mut [Vec<u64>], i: usize) {
        for inst in body {
            let r = match &inst.op {
                Op::Const(s) => s.to_bits(),
                Op::Binary(op, a, b) => self.binary(*op, self.ty(*a), self.get(*a), self.get(*b)),
                Op::Unary(op, a) => self.unary(*op, self.ty(*a), self.get(*a)),
                Op::Cmp(op, a, b) => {
                    u64::from(self.cmp(*op, self.ty(*a), self.get(*a), self.get(*b)))
                }
                Op::Select(c, a, b) => {
                    if self.get(*c) != 0 {
                        self.get(*a)
                    } else {
                        self.get(*b)
                    }
                }
                Op::Fma(a, b, c) => match self.ty(*a) {
                    DType::F64 => f64_of(self.get(*a))
                        .mul_add(f64_of(self.get(*b)), f64_of(self.get(*c)))
                        .to_bits(),
                    DType::F32 => u64::from(
                        f32_of(self.get(*a))
                            .mul_add(f32_of(self.get(*b)), f32_of(self.get(*c)))
                            .to_bits(),
                    ),
                    t => panic!("fma of {t}"),
                },
                Op::Cast(t, a) => Self::cast(self.ty(*a), *t, self.get(*a)),
                Op::Bitcast(_, a) => self.get(*a),
                Op::Load(acc) => cols[acc.param as usize][i],
                Op::Store(acc, v) => {
                    cols[acc.param as usize][i] = self.get(*v);
                    continue;
                }
                Op::Parallel(p) => {
                    let n = cols[p.over as usize].len();
                    for j in 0..n {
                        self.regs[p.indices[0].0 as usize] = j as u64;
                        self.block(&p.body, cols, j);
                    }
                    continue;
                }
                other => panic!("interpreter: unsupported {other:?}"),
            };
            self.regs[inst.results[0].0 as usize] = r;
        }
    }
}

/// Runs `kernel` on `cols` (bits), returning the columns afterwards.
fn run(kernel: &Kernel, mut cols: Vec<Vec<u64>>) -> Vec<Vec<u64>> {
    let mut it = Interp::new(kernel);
    it.block(&kernel.body, &mut cols, 0);
    cols
}

// ---------------------------------------------------------------------------------------------
// Kernels and references
// ---------------------------------------------------------------------------------------------

fn ref64(f: F, x: f64, y: f64) -> f64 {
    math_cases::reference64(f, x, y, fdlibm_erf)
}

fn ref32(f: F, x: f32, y: f32) -> f32 {
    math_cases::reference32(f, x, y, fdlibm_erf)
}

/// fdlibm's erf (the reference the CPU back end's `erf` call also uses).
#[allow(clippy::excessive_precision, clippy::unreadable_literal)]
fn fdlibm_erf(x: f64) -> f64 {
    const ERX: f64 = 8.45062911510467529297e-01;
    const EFX8: f64 = 1.02703333676410069053e+00;
    const PP: [f64; 5] = [
        1.28379167095512558561e-01,
        -3.25042107247001499370e-01,
        -2.84817495755985104766e-02,
        -5.77027029648944159157e-03,
        -2.37630166566501626084e-05,
    ];
    const QQ: [f64; 6] = [
        1.0,
        3.97917223959155352819e-01,
        6.50222499887672944485e-02,
        5.08130628187576562776e-03,
        1.32494738004321644526e-04,
        -3.96022827877536812320e-06,
    ];
    const PA: [f64; 7] = [
        -2.36211856075265944077e-03,
        4.14856118683748331666e-01,
        -3.72207876035701323847e-01,
        3.18346619901161753674e-01,
        -1.10894694282396677476e-01,
        3.54783043256182359371e-02,
        -2.16637559486879084300e-03,
    ];
    const QA: [f64; 7] = [
        1.0,
        1.06420880400844228286e-01,
        5.40397917702171048937e-01,
        7.18286544141962662868e-02,
        1.26171219808761642112e-01,
        1.36370839120290507362e-02,
        1.19844998467991074170e-02,
    ];
    const RA: [f64; 8] = [
        -9.86494403484714822705e-03,
        -6.93858572707181764372e-01,
        -1.05586262253232909814e+01,
        -6.23753324503260060396e+01,
        -1.62396669462573470355e+02,
        -1.84605092906711035994e+02,
        -8.12874355063065934246e+01,
        -9.81432934416914548592e+00,
    ];
    const SA: [f64; 9] = [
        1.0,
        1.96512716674392571292e+01,
        1.37657754143519042600e+02,
        4.34565877475229228821e+02,
        6.45387271733267880336e+02,
        4.29008140027567833386e+02,
        1.08635005541779435134e+02,
        6.57024977031928170135e+00,
        -6.04244152148580987438e-02,
    ];
    const RB: [f64; 7] = [
        -9.86494292470009928597e-03,
        -7.99283237680523006574e-01,
        -1.77579549177547519889e+01,
        -1.60636384855821916062e+02,
        -6.37566443368389627722e+02,
        -1.02509513161107724954e+03,
        -4.83519191608651397019e+02,
    ];
    const SB: [f64; 8] = [
        1.0,
        3.03380607434824582924e+01,
        3.25792512996573918826e+02,
        1.53672958608443695994e+03,
        3.19985821950859553908e+03,
        2.55305040643316442583e+03,
        4.74528541206955367215e+02,
        -2.24409524465858183362e+01,
    ];
    fn poly(c: &[f64], x: f64) -> f64 {
        c.iter().rev().fold(0.0, |acc, &ci| acc * x + ci)
    }
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let sign = if x.is_sign_negative() { -1.0 } else { 1.0 };
    if a < 0.84375 {
        if a < 2f64.powi(-28) {
            return 0.125 * (8.0 * x + EFX8 * x);
        }
        let z = x * x;
        return x + x * (poly(&PP, z) / poly(&QQ, z));
    }
    if a >= 6.0 {
        return sign * (1.0 - f64::MIN_POSITIVE);
    }
    if a < 1.25 {
        let s = a - 1.0;
        return sign * (ERX + poly(&PA, s) / poly(&QA, s));
    }
    let s = 1.0 / (a * a);
    let (r, q) = if a < 1.0 / 0.35 {
        (poly(&RA, s), poly(&SA, s))
    } else {
        (poly(&RB, s), poly(&SB, s))
    };
    let z = f64::from_bits(a.to_bits() & 0xffff_ffff_0000_0000);
    let erfc = (-z * z - 0.5625).exp() * ((z - a) * (z + a) + r / q).exp() / a;
    sign * (1.0 - erfc)
}

// ---------------------------------------------------------------------------------------------
// Argument sets
// ---------------------------------------------------------------------------------------------

/// `n` points spread evenly over `[lo, hi]`.
fn sweep(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

/// `n` points spread evenly in `log` over `[lo, hi]` (both positive).
fn log_sweep(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    sweep(lo.ln(), hi.ln(), n)
        .into_iter()
        .map(f64::exp)
        .collect()
}

/// The arguments of the f64 accuracy tests for `f` (x, and y for pow) and the tolerance in ulps.
fn args64(f: F) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ f as u64);
    let mut xs = vec![];
    let mut ys = vec![];
    match f {
        F::Exp => {
            xs.extend(sweep(-708.0, 709.0, 40_000));
            xs.extend(sweep(-1.0, 1.0, 20_000));
            xs.extend(sweep(-745.0, -708.0, 5_000));
            xs.extend(sweep(709.0, 709.78, 2_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-708.0, 709.0)));
        }
        F::Log => {
            xs.extend(log_sweep(1e-300, 1e300, 40_000));
            xs.extend(sweep(0.5, 2.0, 20_000));
            xs.extend(log_sweep(5e-324, 1e-300, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(0.0, 1e3)));
            xs.extend((0..5_000).map(|_| 1.0 + rng.uniform(-1e-8, 1e-8)));
        }
        F::Sin | F::Cos => {
            xs.extend(sweep(-1e5, 1e5, 40_000));
            xs.extend(sweep(-10.0, 10.0, 20_000));
            xs.extend(log_sweep(1e-300, 1e5, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-1e5, 1e5)));
            // Close to multiples of π/2.
            for k in 1..2000 {
                let m = f64::from(k * 31) * std::f64::consts::FRAC_PI_2;
                xs.extend([m, m.next_up(), m.next_down()]);
            }
        }
        F::Tanh => {
            xs.extend(sweep(-25.0, 25.0, 40_000));
            xs.extend(sweep(-1.0, 1.0, 20_000));
            xs.extend(log_sweep(1e-300, 1e3, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-30.0, 30.0)));
        }
        F::Erf => {
            xs.extend(sweep(-7.0, 7.0, 40_000));
            xs.extend(sweep(-1.0, 1.0, 20_000));
            xs.extend(log_sweep(1e-300, 1e3, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-7.0, 7.0)));
        }
        F::Pow => {
            for _ in 0..60_000 {
                let a = (rng.uniform(-700.0, 700.0)).exp();
                let bound = 700.0 / a.ln().abs().max(1e-300);
                let b = rng.uniform(-bound, bound).clamp(-1e300, 1e300);
                xs.push(a);
                ys.push(b);
            }
            for _ in 0..20_000 {
                let a = rng.uniform(0.0, 10.0);
                let b = rng.uniform(-30.0, 30.0);
                xs.push(a);
                ys.push(b);
            }
            // Bases near 1 with huge exponents, and the edge of the log reduction.
            for _ in 0..10_000 {
                let a = 1.0 + rng.uniform(-0.3, 0.42);
                let b = 700.0 / a.ln() * rng.uniform(-1.0, 1.0);
                xs.push(a);
                ys.push(b);
            }
        }
        F::Asin | F::Acos | F::Atanh => {
            xs.extend(sweep(-1.0, 1.0, 40_000));
            // Close to ±1 and to 0.
            let near: Vec<f64> = log_sweep(1e-300, 0.5, 10_000);
            xs.extend(near.iter().flat_map(|&d| [1.0 - d, d - 1.0, d, -d]));
            xs.extend((0..20_000).map(|_| rng.uniform(-1.0, 1.0)));
        }
        F::Atan => {
            xs.extend(sweep(-10.0, 10.0, 40_000));
            xs.extend(log_sweep(1e-300, 1e300, 20_000));
            xs.extend(sweep(2.0, 3.0, 10_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-100.0, 100.0)));
        }
        F::Sinh | F::Cosh => {
            xs.extend(sweep(-710.4, 710.4, 40_000));
            xs.extend(sweep(-2.0, 2.0, 20_000));
            xs.extend(log_sweep(1e-300, 1.0, 5_000));
            xs.extend(sweep(705.0, 710.47, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-30.0, 30.0)));
        }
        F::Asinh => {
            xs.extend(sweep(-10.0, 10.0, 40_000));
            xs.extend(log_sweep(1e-300, 1e300, 20_000));
            xs.extend(sweep(1.5, 2.5, 5_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-1e3, 1e3)));
        }
        F::Acosh => {
            xs.extend(sweep(1.0, 10.0, 40_000));
            xs.extend(log_sweep(1.0, 1e300, 20_000));
            xs.extend(log_sweep(1e-300, 1.0, 10_000).into_iter().map(|d| 1.0 + d));
            xs.extend((0..20_000).map(|_| rng.uniform(1.0, 1e3)));
        }
        F::Atan2 => {
            for _ in 0..60_000 {
                let y = rng.uniform(-300.0, 300.0).exp() * rng.uniform(-1.0, 1.0).signum();
                let x = rng.uniform(-300.0, 300.0).exp() * rng.uniform(-1.0, 1.0).signum();
                xs.push(y);
                ys.push(x);
            }
            for _ in 0..40_000 {
                xs.push(rng.uniform(-10.0, 10.0));
                ys.push(rng.uniform(-10.0, 10.0));
            }
        }
    }
    if ys.is_empty() {
        ys = vec![0.0; xs.len()];
    }
    (xs, ys)
}

/// The worst error of `got` against the reference, with its argument.
fn worst64(f: F, xs: &[f64], ys: &[f64], got: &[f64]) -> (f64, f64, f64) {
    let mut worst = (0.0, 0.0, 0.0);
    for i in 0..xs.len() {
        let want = ref64(f, xs[i], ys[i]);
        let err = if f == F::Erf {
            // erf: relative error in units of 1e-16, floored at 1e-16 absolute near 0.
            let d = (got[i] - want).abs();
            if got[i].is_nan() != want.is_nan() {
                f64::INFINITY
            } else if d == 0.0 || (got[i].is_nan() && want.is_nan()) {
                0.0
            } else {
                d / (want.abs() * 1e-16).max(1e-32)
            }
        } else {
            ulps64(got[i], want)
        };
        if err > worst.0 {
            worst = (err, xs[i], ys[i]);
        }
    }
    worst
}

#[test]
fn f64_functions_are_accurate() {
    let mut report = vec![];
    let mut failures = vec![];
    for f in ALL {
        let (xs, ys) = args64(f);
        let got = run64(f, &xs, &ys);
        let (err, x, y) = worst64(f, &xs, &ys, &got);
        // erf's bound is 1e-15 relative (10 units of 1e-16); the others 4 ulp.
        let bound = if f == F::Erf { 10.0 } else { 4.0 };
        report.push(format!("{f:?}: {err} at ({x:e}, {y:e})"));
        if err > bound {
            failures.push(format!(
                "{f:?}: error {err} > {bound} at x = {x:e}, y = {y:e}"
            ));
        }
    }
    println!(
        "f64 worst errors (ulp; erf in 1e-16 relative):\n{}",
        report.join("\n")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn args32(f: F) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng(0x1234_5678_9abc_def1 ^ f as u64);
    let mut xs: Vec<f32> = vec![];
    let mut ys: Vec<f32> = vec![];
    let sw = |lo: f64, hi: f64, n| sweep(lo, hi, n).into_iter().map(|x| x as f32);
    match f {
        F::Exp => {
            xs.extend(sw(-103.0, 88.7, 40_000));
            xs.extend(sw(-1.0, 1.0, 20_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-103.0, 88.7) as f32));
        }
        F::Log => {
            xs.extend(log_sweep(1e-45, 3e38, 40_000).into_iter().map(|x| x as f32));
            xs.extend(sw(0.5, 2.0, 20_000));
            xs.extend((0..20_000).map(|_| rng.uniform(0.0, 1e3) as f32));
        }
        F::Sin | F::Cos => {
            xs.extend(sw(-1e5, 1e5, 40_000));
            xs.extend(sw(-10.0, 10.0, 20_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-1e5, 1e5) as f32));
        }
        F::Tanh => {
            xs.extend(sw(-12.0, 12.0, 40_000));
            xs.extend(sw(-1.0, 1.0, 20_000));
            xs.extend(log_sweep(1e-40, 1e3, 5_000).into_iter().map(|x| x as f32));
        }
        F::Erf => {
            xs.extend(sw(-5.0, 5.0, 40_000));
            xs.extend(sw(-1.0, 1.0, 20_000));
            xs.extend(log_sweep(1e-40, 1e3, 5_000).into_iter().map(|x| x as f32));
        }
        F::Pow => {
            for _ in 0..60_000 {
                let a = rng.uniform(-85.0, 85.0).exp();
                let bound = 85.0 / a.ln().abs().max(1e-30);
                let b = rng.uniform(-bound, bound).clamp(-1e30, 1e30);
                xs.push(a as f32);
                ys.push(b as f32);
            }
        }
        F::Asin | F::Acos | F::Atanh => {
            xs.extend(sw(-1.0, 1.0, 40_000));
            xs.extend((0..20_000).map(|_| rng.uniform(-1.0, 1.0) as f32));
        }
        F::Atan | F::Asinh => {
            xs.extend(sw(-10.0, 10.0, 40_000));
            xs.extend(log_sweep(1e-40, 3e38, 20_000).into_iter().map(|x| x as f32));
        }
        F::Sinh | F::Cosh => {
            xs.extend(sw(-89.5, 89.5, 40_000));
            xs.extend(sw(-2.0, 2.0, 20_000));
            xs.extend(log_sweep(1e-40, 1.0, 5_000).into_iter().map(|x| x as f32));
        }
        F::Acosh => {
            xs.extend(sw(1.0, 10.0, 40_000));
            xs.extend(log_sweep(1.0, 3e38, 20_000).into_iter().map(|x| x as f32));
        }
        F::Atan2 => {
            for _ in 0..60_000 {
                xs.push((rng.uniform(-80.0, 80.0).exp() * rng.uniform(-1.0, 1.0).signum()) as f32);
                ys.push((rng.uniform(-80.0, 80.0).exp() * rng.uniform(-1.0, 1.0).signum()) as f32);
            }
        }
    }
    if ys.is_empty() {
        ys = vec![0.0; xs.len()];
    }
    (xs, ys)
}

#[test]
fn f32_functions_are_accurate() {
    let mut report = vec![];
    let mut failures = vec![];
    for f in ALL {
        let (xs, ys) = args32(f);
        let got = run32(f, &xs, &ys);
        let mut worst = (0.0, 0.0f32, 0.0f32);
        for i in 0..xs.len() {
            let want = ref32(f, xs[i], ys[i]);
            let err = ulps32(got[i], want);
            if err > worst.0 {
                worst = (err, xs[i], ys[i]);
            }
        }
        report.push(format!(
            "{f:?}: {} at ({:e}, {:e})",
            worst.0, worst.1, worst.2
        ));
        if worst.0 > 4.0 {
            failures.push(format!(
                "{f:?}: error {} ulp at x = {:e}, y = {:e}",
                worst.0, worst.1, worst.2
            ));
        }
    }
    println!("f32 worst errors (ulp):\n{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The number of operations (constants excluded) each expansion has.
fn op_count(f: F, t: DType) -> usize {
    let k = lower_math(&kernel(f, t));
    let Some(Op::Parallel(p)) = k
        .body
        .iter()
        .map(|i| &i.op)
        .find(|o| matches!(o, Op::Parallel(_)))
    else {
        panic!("no loop")
    };
    let loads_stores = if matches!(f, F::Pow | F::Atan2) { 3 } else { 2 };
    p.body
        .iter()
        .filter(|i| !matches!(i.op, Op::Const(_)))
        .count()
        - loads_stores
}

/// Whether `got` matches `want` for a special value: both NaN, or the same bits (so infinities
/// and signed zeros agree), or within 4 ulps for an ordinary finite result.
fn special_ok64(got: f64, want: f64) -> bool {
    if want.is_nan() || want.is_infinite() || want == 0.0 {
        (want.is_nan() && got.is_nan()) || got.to_bits() == want.to_bits()
    } else {
        ulps64(got, want) <= 4.0
    }
}

fn special_ok32(got: f32, want: f32) -> bool {
    if want.is_nan() || want.is_infinite() || want == 0.0 {
        (want.is_nan() && got.is_nan()) || got.to_bits() == want.to_bits()
    } else {
        ulps32(got, want) <= 4.0
    }
}

fn specials64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        0.1,
        1e-300,
        -1e-300,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1e-310,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        709.782712893384,
        709.7827128933841,
        709.79,
        710.0,
        -708.4,
        -745.1332191019411,
        -745.1332191019412,
        -745.2,
        -746.0,
        1000.0,
        -1000.0,
        0.625,
        0.84375,
        6.0,
        20.0,
        1e5,
        1e300,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::PI,
        1.0 + f64::EPSILON,
        1.0 - f64::EPSILON / 2.0,
        2f64.powi(-28),
        2f64.powi(52),
        2f64.powi(53) + 2.0,
    ];
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

fn specials32() -> Vec<f32> {
    let mut v = vec![
        0.0f32,
        -0.0,
        1.0,
        0.5,
        2.0,
        3.0,
        0.1,
        1e-30,
        1e-45,
        1e-40,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
        f32::NAN,
        88.72283,
        88.72284,
        89.0,
        -87.33655,
        -103.27893,
        -103.97208,
        -104.0,
        -200.0,
        0.625,
        0.84375,
        4.0,
        10.0,
        1e5,
        1e30,
        std::f32::consts::FRAC_PI_2,
        1.0 + f32::EPSILON,
    ];
    let neg: Vec<f32> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// A test that every function but `pow` and `atan2` on every special value, and those two on
/// every pair of them, gives what Rust's function gives (`special_ok`), for float type `$t`.
macro_rules! special_values_test {
    ($name:ident, $t:ty, $specials:ident, $run:ident, $reference:ident, $ok:ident) => {
        #[test]
        fn $name() {
            let xs = $specials();
            let mut failures = vec![];
            for f in ALL {
                if matches!(f, F::Pow | F::Atan2) {
                    continue;
                }
                let got = $run(f, &xs, &[]);
                for (i, &x) in xs.iter().enumerate() {
                    if matches!(f, F::Sin | F::Cos) && x.abs() > 1e5 && x.is_finite() {
                        // Documented: NaN from 2^50 on.
                        if x.abs() >= (2.0 as $t).powi(50) && !got[i].is_nan() {
                            failures.push(format!("{f:?}({x:e}) = {:e}, want NaN", got[i]));
                        }
                        continue;
                    }
                    let want = $reference(f, x, 0.0);
                    if !$ok(got[i], want) {
                        failures.push(format!("{f:?}({x:e}) = {:e}, want {want:e}", got[i]));
                    }
                }
            }
            // pow on every pair of specials.
            let (mut a, mut b) = (vec![], vec![]);
            for &x in &xs {
                for &y in &xs {
                    a.push(x);
                    b.push(y);
                }
            }
            let got = $run(F::Atan2, &a, &b);
            for i in 0..a.len() {
                let want = a[i].atan2(b[i]);
                if !$ok(got[i], want) {
                    failures.push(format!(
                        "atan2({:e}, {:e}) = {:e}, want {want:e}",
                        a[i], b[i], got[i]
                    ));
                }
            }
            let got = $run(F::Pow, &a, &b);
            for i in 0..a.len() {
                let want = a[i].powf(b[i]);
                // Beyond |b·ln a| = 745 the result is 0 or inf either way; within it, the
                // accuracy bound holds for a > 0 (negative bases with integer exponents
                // included).
                if !$ok(got[i], want) {
                    failures.push(format!(
                        "pow({:e}, {:e}) = {:e}, want {want:e}",
                        a[i], b[i], got[i]
                    ));
                }
            }
            assert!(
                failures.is_empty(),
                "{} failures:\n{}",
                failures.len(),
                failures.join("\n")
            );
        }
    };
}

special_values_test!(
    f64_special_values,
    f64,
    specials64,
    run64,
    ref64,
    special_ok64
);
special_values_test!(
    f32_special_values,
    f32,
    specials32,
    run32,
    ref32,
    special_ok32
);

// ---------------------------------------------------------------------------------------------
// Structure
// ---------------------------------------------------------------------------------------------

/// Checks that `lowered` is `original` with each math instruction replaced by an expansion
/// that ends with an instruction defining the same result (new values have ids at or above
/// `bound`), and every other instruction unchanged and in place.
fn check_untouched(original: &[Inst], lowered: &[Inst], bound: u32) -> Result<(), String> {
    let kept: Vec<&Inst> = lowered
        .iter()
        .filter(|i| i.results.iter().all(|r| r.0 < bound))
        .collect();
    if kept.len() != original.len() {
        return Err(format!(
            "{} instructions kept for {} original ones",
            kept.len(),
            original.len()
        ));
    }
    for (o, l) in original.iter().zip(kept) {
        match (&o.op, &l.op) {
            (Op::Parallel(a), Op::Parallel(b)) => {
                if a.over != b.over || a.indices != b.indices {
                    return Err("a parallel loop changed".into());
                }
                check_untouched(&a.body, &b.body, bound)?;
            }
            (Op::For(a), Op::For(b)) => {
                if (a.lo, a.hi, a.induction) != (b.lo, b.hi, b.induction)
                    || a.init != b.init
                    || a.carried != b.carried
                    || a.yields != b.yields
                    || o.results != l.results
                {
                    return Err("a for loop changed".into());
                }
                check_untouched(&a.body, &b.body, bound)?;
            }
            (op, _) if is_math_function(op) => {
                if o.results != l.results || is_math_function(&l.op) {
                    return Err(format!(
                        "`{}` was not replaced by an expansion defining its result",
                        text::inst_head(o)
                    ));
                }
            }
            _ => {
                if o != l {
                    return Err(format!(
                        "`{}` became `{}`",
                        text::inst_head(o),
                        text::inst_head(l)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The constants added at the top of the body, then the original top level.
fn check_lowering(k: &Kernel) -> Result<Kernel, String> {
    let l = lower_math(k);
    validate(&l).map_err(|e| format!("{e}\n{}", text::print(&l)))?;
    if has_math_functions(&l) {
        return Err("math left after lowering".into());
    }
    if lower_math(&l) != l {
        return Err("lowering is not idempotent".into());
    }
    if !has_math_functions(k) && l != *k {
        return Err("a kernel without math changed".into());
    }
    let bound = k.value_bound();
    let added = l
        .body
        .iter()
        .take_while(|i| !i.results.is_empty() && i.results.iter().all(|r| r.0 >= bound))
        .count();
    if !l.body[..added].iter().all(|i| matches!(i.op, Op::Const(_))) {
        return Err("the pass added something other than constants at the top".into());
    }
    check_untouched(&k.body, &l.body, bound)?;
    Ok(l)
}

#[test]
fn lowering_keeps_everything_else() {
    let k = text::parse(
        "kernel @bs(%s: store<f64, 1, read>, %out: store<f64, 1, write>, %acc: store<f32, 0, reduce(sum)>, %r: f64) {
           %rate = param %r
           %top = exp %rate
           parallel %out (%i) {
             %x = load %s[%i]
             %l = log %x
             %e = erf %l
             %zero = const i64 0
             %n = const i64 3
             %res = for %j = %zero to %n iter(%a = %e) {
               %t = tanh %a
               %p = pow %t, %x
               %q = add %p, %top
               yield %q
             }
             %f = cast f32 %res
             %g = sin %f
             %h = cos %g
             reduce sum %acc[], %h
             store %out[%i], %res
           }
         }",
    )
    .unwrap();
    let l = check_lowering(&k).unwrap();
    // Every math operation is gone; the loads, loop, casts, reduction and store are there.
    let printed = text::print(&l);
    for op in [
        " exp ", " log ", " erf ", " tanh ", " pow ", " sin ", " cos ",
    ] {
        assert!(!printed.contains(op), "{op} left:\n{printed}");
    }
    for op in ["load", "for", "cast f32", "reduce sum", "store"] {
        assert!(printed.contains(op), "{op} missing");
    }
    // The text form of the lowered kernel round-trips.
    assert_eq!(text::parse(&printed), Ok(weft_ir::renumber(&l)));
}

#[test]
fn kernels_without_math_and_invalid_kernels_are_unchanged() {
    let k = text::parse(
        "kernel @k(%x: store<f64, 1, readwrite>) { parallel %x (%i) { %v = load %x[%i]\n %w = sqrt %v\n store %x[%i], %w } }",
    )
    .unwrap();
    assert_eq!(lower_math(&k), k);
    assert!(!has_math_functions(&k));
    // Invalid: exp of an undefined value.
    let bad = Kernel {
        name: "bad".into(),
        params: vec![],
        body: vec![Inst {
            results: vec![ValueId(0)],
            op: Op::Unary(UnaryOp::Exp, ValueId(7)),
        }],
    };
    assert!(has_math_functions(&bad));
    assert_eq!(lower_math(&bad), bad);
}

#[test]
fn kernels_too_large_to_expand_are_unchanged() {
    // A value id just below the limit leaves no room for the expansion's new values.
    let big = weft_ir::validate::MAX_VALUE_ID - 3;
    let k = Kernel {
        name: "big".into(),
        params: vec![weft_ir::Param::Scalar { dtype: DType::F64 }],
        body: vec![
            Inst {
                results: vec![ValueId(big)],
                op: Op::Param(0),
            },
            Inst {
                results: vec![ValueId(0)],
                op: Op::Unary(UnaryOp::Exp, ValueId(big)),
            },
        ],
    };
    validate(&k).unwrap();
    assert_eq!(lower_math(&k), k);
}

#[test]
fn constants_are_shared_between_expansions() {
    let mut k = KernelBuilder::new("two");
    let x = k.store(DType::F64, 1, Privilege::Read);
    let out = k.store(DType::F64, 1, Privilege::Write);
    k.parallel(out, |b, i| {
        let v = b.load(x, i);
        let e1 = b.erf(v);
        let e2 = b.erf(e1);
        b.store(out, i, e2);
    });
    let one = lower_math(&kernel(F::Erf, DType::F64));
    let two = lower_math(&k.finish());
    let consts = |k: &Kernel| {
        k.body
            .iter()
            .filter(|i| matches!(i.op, Op::Const(_)))
            .count()
    };
    assert_eq!(consts(&one), consts(&two));
}

#[test]
fn operation_counts() {
    // The counts the module documentation quotes (constants excluded).
    let want = [
        (F::Exp, 30, 26),
        (F::Log, 42, 39),
        (F::Sin, 59, 37),
        (F::Cos, 60, 38),
        (F::Tanh, 48, 40),
        (F::Erf, 62, 46),
        (F::Pow, 152, 100),
        (F::Asin, 39, 41),
        (F::Acos, 33, 35),
        (F::Atan, 34, 36),
        (F::Atan2, 76, 79),
        (F::Sinh, 82, 84),
        (F::Cosh, 64, 66),
        (F::Asinh, 75, 77),
        (F::Acosh, 74, 76),
        (F::Atanh, 67, 69),
    ];
    let got: Vec<_> = want
        .iter()
        .map(|&(f, _, _)| (f, op_count(f, DType::F64), op_count(f, DType::F32)))
        .collect();
    assert_eq!(got, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Random valid kernels (with math operations in every kind of block) lower to valid,
    /// math-free kernels that keep every other instruction.
    #[test]
    fn random_kernels_lower_cleanly(choices in prop::collection::vec(any::<u32>(), 0..600)) {
        let k = Gen::new(&choices).kernel();
        prop_assert!(validate(&k).is_ok());
        if let Err(e) = check_lowering(&k) {
            prop_assert!(false, "{}\n{}", e, text::print(&k));
        }
    }
}

fn lowered(f: F, t: DType) -> &'static Kernel {
    static CACHE: OnceLock<Vec<((usize, DType), Kernel)>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        let mut v = vec![];
        for t in [DType::F64, DType::F32] {
            for f in ALL {
                v.push(((f as usize, t), lower_math(&kernel(f, t))));
            }
        }
        v
    });
    &all.iter()
        .find(|(key, _)| *key == (f as usize, t))
        .unwrap()
        .1
}

fn run64(f: F, xs: &[f64], ys: &[f64]) -> Vec<f64> {
    let n = xs.len();
    let cols = vec![
        xs.iter().map(|x| x.to_bits()).collect(),
        if ys.is_empty() {
            vec![0; n]
        } else {
            ys.iter().map(|x| x.to_bits()).collect()
        },
        vec![0; n],
    ];
    run(lowered(f, DType::F64), cols)[2]
        .iter()
        .map(|&b| f64::from_bits(b))
        .collect()
}

fn run32(f: F, xs: &[f32], ys: &[f32]) -> Vec<f32> {
    let n = xs.len();
    let cols = vec![
        xs.iter().map(|x| u64::from(x.to_bits())).collect(),
        if ys.is_empty() {
            vec![0; n]
        } else {
            ys.iter().map(|x| u64::from(x.to_bits())).collect()
        },
        vec![0; n],
    ];
    run(lowered(f, DType::F32), cols)[2]
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect()
}

fn check64(f: F, xs: &[f64], ys: &[f64]) -> Result<(), TestCaseError> {
    let ys = if ys.is_empty() {
        vec![0.0; xs.len()]
    } else {
        ys.to_vec()
    };
    let got = run64(f, xs, &ys);
    let (err, x, y) = worst64(f, xs, &ys, &got);
    let bound = if f == F::Erf { 10.0 } else { 4.0 };
    prop_assert!(err <= bound, "{:?}({:e}, {:e}): error {}", f, x, y, err);
    Ok(())
}

fn check32(f: F, xs: &[f32], ys: &[f32]) -> Result<(), TestCaseError> {
    let ys = if ys.is_empty() {
        vec![0.0; xs.len()]
    } else {
        ys.to_vec()
    };
    let got = run32(f, xs, &ys);
    for i in 0..xs.len() {
        let want = ref32(f, xs[i], ys[i]);
        prop_assert!(
            ulps32(got[i], want) <= 4.0,
            "{:?}({:e}, {:e}) = {:e}, want {:e}",
            f,
            xs[i],
            ys[i],
            got[i],
            want
        );
    }
    Ok(())
}

/// Any float with the sign cleared and the given exponent range, from random bits.
fn positive64(bits: u64) -> f64 {
    f64::from_bits(bits & 0x7fef_ffff_ffff_ffff)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_exp(xs in prop::collection::vec(-708.0f64..709.0, 256), xs32 in prop::collection::vec(-103.0f32..88.7, 256)) {
        check64(F::Exp, &xs, &[])?;
        check32(F::Exp, &xs32, &[])?;
    }

    #[test]
    fn prop_log(bits in prop::collection::vec(any::<u64>(), 256)) {
        let xs: Vec<f64> = bits.iter().map(|&b| positive64(b)).filter(|&x| x <= 1e300).collect();
        check64(F::Log, &xs, &[])?;
        let xs32: Vec<f32> = bits.iter().map(|&b| f32::from_bits((b as u32) & 0x7f7f_ffff)).collect();
        check32(F::Log, &xs32, &[])?;
    }

    #[test]
    fn prop_sin_cos(xs in prop::collection::vec(-1e5f64..1e5, 256), xs32 in prop::collection::vec(-1e5f32..1e5, 256)) {
        check64(F::Sin, &xs, &[])?;
        check64(F::Cos, &xs, &[])?;
        check32(F::Sin, &xs32, &[])?;
        check32(F::Cos, &xs32, &[])?;
    }

    #[test]
    fn prop_tanh_erf(bits in prop::collection::vec(any::<u64>(), 256), xs in prop::collection::vec(-8.0f64..8.0, 256)) {
        let any: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
        let any32: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b as u32)).collect();
        let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        for f in [F::Tanh, F::Erf] {
            check64(f, &any, &[])?;
            check64(f, &xs, &[])?;
            check32(f, &any32, &[])?;
            check32(f, &xs32, &[])?;
        }
    }

    #[test]
    fn prop_inverse_and_hyperbolic(bits in prop::collection::vec(any::<u64>(), 256), xs in prop::collection::vec(-1.0f64..1.0, 256), ws in prop::collection::vec(-30.0f64..30.0, 256)) {
        let any: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
        let any32: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b as u32)).collect();
        let xs32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        let ws32: Vec<f32> = ws.iter().map(|&x| x as f32).collect();
        for f in [F::Asin, F::Acos, F::Atan, F::Sinh, F::Cosh, F::Asinh, F::Acosh, F::Atanh] {
            check64(f, &any, &[])?;
            check64(f, &xs, &[])?;
            check64(f, &ws, &[])?;
            check32(f, &any32, &[])?;
            check32(f, &xs32, &[])?;
            check32(f, &ws32, &[])?;
        }
        // atan2 of random bits against random bits, and of ordinary values.
        let other: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b.rotate_left(17))).collect();
        check64(F::Atan2, &any, &other)?;
        check64(F::Atan2, &xs, &ws)?;
        let other32: Vec<f32> = bits.iter().map(|&b| f32::from_bits((b >> 32) as u32)).collect();
        check32(F::Atan2, &any32, &other32)?;
        check32(F::Atan2, &xs32, &ws32)?;
    }

    #[test]
    fn prop_pow(ls in prop::collection::vec(-700.0f64..700.0, 256), us in prop::collection::vec(-1.0f64..1.0, 256)) {
        // a = e^l, b = u·700/|l|: |b·ln a| < 700.
        let a: Vec<f64> = ls.iter().map(|l| l.exp()).collect();
        let b: Vec<f64> = ls.iter().zip(&us).map(|(l, u)| u * 700.0 / l.abs().max(1e-3)).collect();
        check64(F::Pow, &a, &b)?;
        let a32: Vec<f32> = ls.iter().map(|l| (l / 8.0).exp() as f32).collect();
        let b32: Vec<f32> = ls.iter().zip(&us).map(|(l, u)| (u * 80.0 / (l / 8.0).abs().max(1e-3)) as f32).collect();
        check32(F::Pow, &a32, &b32)?;
    }
}
