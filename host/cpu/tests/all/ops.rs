//! Every operator on every type, through compiled kernels, against plain Rust.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::Error;
use weft_cpu::{CpuBackend, StoreView};
use weft_ir::{BinaryOp, CmpOp, DType, Privilege, Scalar, UnaryOp};

/// A column of values of one type, as stored (bool as one byte).
#[derive(Clone, Debug)]
enum Col {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<u8>),
}

impl Col {
    fn zeros(dt: DType, n: usize) -> Col {
        match dt {
            DType::F32 => Col::F32(vec![0.0; n]),
            DType::F64 => Col::F64(vec![0.0; n]),
            DType::I32 => Col::I32(vec![0; n]),
            DType::I64 => Col::I64(vec![0; n]),
            DType::Bool => Col::Bool(vec![0; n]),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }

    fn from(dt: DType, xs: &[Scalar]) -> Col {
        let mut c = Col::zeros(dt, xs.len());
        for (i, x) in xs.iter().enumerate() {
            match (&mut c, *x) {
                (Col::F32(v), Scalar::F32(x)) => v[i] = x,
                (Col::F64(v), Scalar::F64(x)) => v[i] = x,
                (Col::I32(v), Scalar::I32(x)) => v[i] = x,
                (Col::I64(v), Scalar::I64(x)) => v[i] = x,
                (Col::Bool(v), Scalar::Bool(x)) => v[i] = u8::from(x),
                _ => panic!("type mismatch"),
            }
        }
        c
    }

    fn len(&self) -> usize {
        match self {
            Col::F32(v) => v.len(),
            Col::F64(v) => v.len(),
            Col::I32(v) => v.len(),
            Col::I64(v) => v.len(),
            Col::Bool(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> Scalar {
        match self {
            Col::F32(v) => Scalar::F32(v[i]),
            Col::F64(v) => Scalar::F64(v[i]),
            Col::I32(v) => Scalar::I32(v[i]),
            Col::I64(v) => Scalar::I64(v[i]),
            Col::Bool(v) => {
                assert!(v[i] <= 1, "bool stored as {}", v[i]);
                Scalar::Bool(v[i] != 0)
            }
        }
    }

    fn view(&mut self) -> StoreView {
        let n = self.len() as i64;
        match self {
            Col::F32(v) => dense(v, &[n]),
            Col::F64(v) => dense(v, &[n]),
            Col::I32(v) => dense(v, &[n]),
            Col::I64(v) => dense(v, &[n]),
            Col::Bool(v) => dense(v, &[n]),
        }
    }
}

fn samples(dt: DType) -> Vec<Scalar> {
    let f = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        2.5,
        3.0,
        0.5,
        7.25,
        -3.75,
        1e300,
        -1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    match dt {
        DType::F32 => f.iter().map(|&x| Scalar::F32(x as f32)).collect(),
        DType::F64 => f.iter().map(|&x| Scalar::F64(x)).collect(),
        DType::I32 => [0, 1, -1, 2, -7, 13, 100, -100, i32::MIN, i32::MAX]
            .iter()
            .map(|&x| Scalar::I32(x))
            .collect(),
        DType::I64 => [0, 1, -1, 2, -7, 13, 1 << 40, -(1 << 40), i64::MIN, i64::MAX]
            .iter()
            .map(|&x| Scalar::I64(x))
            .collect(),
        DType::Bool => vec![Scalar::Bool(false), Scalar::Bool(true)],
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unreachable!("storage types hold no values")
        }
    }
}

fn same(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => same_f32(x, y),
        (Scalar::F64(x), Scalar::F64(y)) => same_f64(x, y),
        _ => a == b,
    }
}

fn fmin64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() | b.to_bits())
    } else {
        a.min(b)
    }
}
fn fmax64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        f64::from_bits(a.to_bits() & b.to_bits())
    } else {
        a.max(b)
    }
}
fn fmin32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() | b.to_bits())
    } else {
        a.min(b)
    }
}
fn fmax32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        f32::from_bits(a.to_bits() & b.to_bits())
    } else {
        a.max(b)
    }
}

/// The reference semantics of a binary operator; `None` where it is not defined.
fn ref_binary(op: BinaryOp, a: Scalar, b: Scalar) -> Option<Scalar> {
    use BinaryOp::*;
    Some(match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => Scalar::F64(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Rem => x % y,
            Min => fmin64(x, y),
            Max => fmax64(x, y),
            Pow => x.powf(y),
            Atan2 => x.atan2(y),
            And | Or | Xor | Shl | Shr => return None,
        }),
        (Scalar::F32(x), Scalar::F32(y)) => Scalar::F32(match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Rem => x % y,
            Min => fmin32(x, y),
            Max => fmax32(x, y),
            Pow => x.powf(y),
            Atan2 => x.atan2(y),
            And | Or | Xor | Shl | Shr => return None,
        }),
        (Scalar::I32(x), Scalar::I32(y)) => Scalar::I32(match op {
            Add => x.wrapping_add(y),
            Sub => x.wrapping_sub(y),
            Mul => x.wrapping_mul(y),
            Div => x
                .checked_div(y)
                .unwrap_or(if y == 0 { 0 } else { x.wrapping_neg() }),
            Rem => x.checked_rem(y).unwrap_or(0),
            Min => x.min(y),
            Max => x.max(y),
            And => x & y,
            Or => x | y,
            Xor => x ^ y,
            Shl => x.wrapping_shl(y as u32),
            Shr => (x as u32).wrapping_shr(y as u32) as i32,
            Pow | Atan2 => return None,
        }),
        (Scalar::I64(x), Scalar::I64(y)) => Scalar::I64(match op {
            Add => x.wrapping_add(y),
            Sub => x.wrapping_sub(y),
            Mul => x.wrapping_mul(y),
            Div => x
                .checked_div(y)
                .unwrap_or(if y == 0 { 0 } else { x.wrapping_neg() }),
            Rem => x.checked_rem(y).unwrap_or(0),
            Min => x.min(y),
            Max => x.max(y),
            And => x & y,
            Or => x | y,
            Xor => x ^ y,
            Shl => x.wrapping_shl(y as u32),
            Shr => (x as u64).wrapping_shr(y as u32) as i64,
            Pow | Atan2 => return None,
        }),
        (Scalar::Bool(x), Scalar::Bool(y)) => Scalar::Bool(match op {
            And | Min => x & y,
            Or | Max => x | y,
            Xor => x ^ y,
            _ => return None,
        }),
        _ => unreachable!(),
    })
}

/// The reference semantics of a unary operator: the IR's interpreter, but for `erf`, whose
/// CPU shim is fdlibm's (the interpreter's is a series of its own).
fn ref_unary(op: UnaryOp, a: Scalar) -> Option<Scalar> {
    let erf = weft_cpu::math::erf;
    match (op, a) {
        (UnaryOp::Erf, Scalar::F64(x)) => Some(Scalar::F64(erf(x))),
        (UnaryOp::Erf, Scalar::F32(x)) => Some(Scalar::F32(erf(f64::from(x)) as f32)),
        _ => weft_ir::interp::unary(op, a),
    }
}

fn ref_cmp(op: CmpOp, a: Scalar, b: Scalar) -> bool {
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
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => go(op, x, y),
        (Scalar::F64(x), Scalar::F64(y)) => go(op, x, y),
        (Scalar::I32(x), Scalar::I32(y)) => go(op, x, y),
        (Scalar::I64(x), Scalar::I64(y)) => go(op, x, y),
        (Scalar::Bool(x), Scalar::Bool(y)) => go(op, x, y),
        _ => unreachable!(),
    }
}

fn ref_cast(to: DType, a: Scalar) -> Scalar {
    let from_i64 = |x: i64| match to {
        DType::F32 => Scalar::F32(x as f32),
        DType::F64 => Scalar::F64(x as f64),
        DType::I32 => Scalar::I32(x as i32),
        DType::I64 => Scalar::I64(x),
        DType::Bool => Scalar::Bool(x != 0),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unreachable!("storage types hold no values")
        }
    };
    match a {
        Scalar::I32(x) => from_i64(i64::from(x)),
        Scalar::I64(x) => from_i64(x),
        Scalar::Bool(x) => from_i64(i64::from(x)),
        Scalar::F64(x) => match to {
            DType::F32 => Scalar::F32(x as f32),
            DType::F64 => Scalar::F64(x),
            DType::I32 => Scalar::I32(x as i32),
            DType::I64 => Scalar::I64(x as i64),
            DType::Bool => Scalar::Bool(x != 0.0),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        },
        Scalar::F32(x) => match to {
            DType::F32 => Scalar::F32(x),
            DType::F64 => Scalar::F64(f64::from(x)),
            DType::I32 => Scalar::I32(x as i32),
            DType::I64 => Scalar::I64(x as i64),
            DType::Bool => Scalar::Bool(x != 0.0),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        },
    }
}

/// Compiles and runs `out[i] = f(a[i], b[i], c[i])` (inputs of the given types) on the columns.
fn elementwise(
    be: &mut CpuBackend,
    name: &str,
    ins: &mut [Col],
    in_types: &[DType],
    out_type: DType,
    f: impl FnOnce(&mut Kb, &[weft_ir::ValueId]) -> weft_ir::ValueId,
) -> weft_cpu::Result<Col> {
    let n = ins[0].len();
    let mut kb = Kb::new();
    let params: Vec<u32> = in_types
        .iter()
        .map(|&t| kb.store(t, 1, Privilege::Read))
        .collect();
    let out = kb.store(out_type, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, idx| {
        let xs: Vec<_> = params.iter().map(|&p| kb.load(p, &[idx[0]])).collect();
        let r = f(kb, &xs);
        kb.store_to(out, &[idx[0]], r);
    });
    let k = be.compile(&kb.finish(name))?;
    let mut result = Col::zeros(out_type, n);
    let mut views: Vec<StoreView> = ins.iter_mut().map(|c| c.view()).collect();
    views.push(result.view());
    run(&k, &views, &[])?;
    Ok(result)
}

fn pairs(dt: DType) -> (Vec<Scalar>, Vec<Scalar>) {
    let s = samples(dt);
    let mut a = vec![];
    let mut b = vec![];
    for &x in &s {
        for &y in &s {
            a.push(x);
            b.push(y);
        }
    }
    (a, b)
}

#[test]
fn binary_ops_on_every_type() {
    let mut be = CpuBackend::new().unwrap();
    let mut checked = 0;
    for dt in DType::VALUES {
        let (a, b) = pairs(dt);
        for op in BinaryOp::ALL {
            let defined = ref_binary(op, a[0], b[0]).is_some();
            let mut ins = [Col::from(dt, &a), Col::from(dt, &b)];
            let got = elementwise(&mut be, "bin", &mut ins, &[dt, dt], dt, |kb, x| {
                kb.bin(op, x[0], x[1])
            });
            if !defined {
                assert!(
                    matches!(got, Err(Error::Compile { .. })),
                    "{} on {dt} should not compile",
                    op.name()
                );
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{} on {dt}: {e}", op.name()));
            for i in 0..a.len() {
                let want = ref_binary(op, a[i], b[i]).unwrap();
                assert!(
                    same(got.get(i), want),
                    "{:?} {} {:?} = {:?}, want {want:?}",
                    a[i],
                    op.name(),
                    b[i],
                    got.get(i)
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 9 + 9 + 12 + 12 + 5);
}

#[test]
fn integer_division_by_zero_is_zero_and_min_over_minus_one_wraps() {
    let mut be = CpuBackend::new().unwrap();
    for op in [BinaryOp::Div, BinaryOp::Rem] {
        let a = [7i64, -7, 0, i64::MIN, i64::MIN, 5];
        let b = [0i64, 0, 0, -1, 0, -1];
        let mut ins = [Col::I64(a.to_vec()), Col::I64(b.to_vec())];
        let got = elementwise(
            &mut be,
            "div0",
            &mut ins,
            &[DType::I64; 2],
            DType::I64,
            |kb, x| kb.bin(op, x[0], x[1]),
        )
        .unwrap();
        let Col::I64(got) = got else { unreachable!() };
        let want: Vec<i64> = if op == BinaryOp::Div {
            vec![0, 0, 0, i64::MIN, 0, -5]
        } else {
            vec![0, 0, 0, 0, 0, 0]
        };
        assert_eq!(got, want, "{}", op.name());
    }
}

#[test]
fn unary_ops_on_every_type() {
    let mut be = CpuBackend::new().unwrap();
    let mut checked = 0;
    for dt in DType::VALUES {
        let a = samples(dt);
        for op in UnaryOp::ALL {
            let defined = ref_unary(op, a[0]).is_some();
            let mut ins = [Col::from(dt, &a)];
            let got = elementwise(&mut be, "un", &mut ins, &[dt], dt, |kb, x| kb.un(op, x[0]));
            if !defined {
                assert!(
                    matches!(got, Err(Error::Compile { .. })),
                    "{} on {dt} should not compile",
                    op.name()
                );
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{} on {dt}: {e}", op.name()));
            for (i, &x) in a.iter().enumerate() {
                let want = ref_unary(op, x).unwrap();
                assert!(
                    same(got.get(i), want),
                    "{}({x:?}) = {:?}, want {want:?}",
                    op.name(),
                    got.get(i)
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 19 + 19 + 3 + 3 + 1);
}

#[test]
fn math_functions_on_ordinary_arguments() {
    // Beyond the edge samples: a sweep where the functions do real work.
    let mut be = CpuBackend::new().unwrap();
    let xs: Vec<f64> = (0..2001).map(|i| -10.0 + f64::from(i) * 0.01).collect();
    for op in UnaryOp::ALL.into_iter().filter(|op| op.is_math()) {
        let mut ins = [Col::F64(xs.clone())];
        let got = elementwise(
            &mut be,
            "math",
            &mut ins,
            &[DType::F64],
            DType::F64,
            |kb, x| kb.un(op, x[0]),
        )
        .unwrap();
        for (i, &x) in xs.iter().enumerate() {
            let want = ref_unary(op, Scalar::F64(x)).unwrap();
            assert!(same(got.get(i), want), "{}({x})", op.name());
        }
    }
    // pow and fmod on a grid.
    let (mut a, mut b) = (vec![], vec![]);
    for i in 0..50 {
        for j in 0..50 {
            a.push(f64::from(i) * 0.37 - 3.0);
            b.push(f64::from(j) * 0.21 - 5.0);
        }
    }
    for op in [BinaryOp::Pow, BinaryOp::Rem] {
        let mut ins = [Col::F64(a.clone()), Col::F64(b.clone())];
        let got = elementwise(
            &mut be,
            "pow",
            &mut ins,
            &[DType::F64; 2],
            DType::F64,
            |kb, x| kb.bin(op, x[0], x[1]),
        )
        .unwrap();
        for i in 0..a.len() {
            let want = ref_binary(op, Scalar::F64(a[i]), Scalar::F64(b[i])).unwrap();
            assert!(same(got.get(i), want), "{} {} {}", a[i], op.name(), b[i]);
        }
    }
}

#[test]
fn comparisons_on_every_type() {
    let mut be = CpuBackend::new().unwrap();
    for dt in DType::VALUES {
        let (a, b) = pairs(dt);
        for op in CmpOp::ALL {
            let mut ins = [Col::from(dt, &a), Col::from(dt, &b)];
            let got = elementwise(&mut be, "cmp", &mut ins, &[dt, dt], DType::Bool, |kb, x| {
                kb.cmp(op, x[0], x[1])
            })
            .unwrap();
            for i in 0..a.len() {
                let want = Scalar::Bool(ref_cmp(op, a[i], b[i]));
                assert_eq!(got.get(i), want, "{:?} {} {:?}", a[i], op.name(), b[i]);
            }
        }
    }
}

#[test]
fn casts_between_every_pair_of_types() {
    let mut be = CpuBackend::new().unwrap();
    for from in DType::VALUES {
        let mut a = samples(from);
        // Values that round, saturate or truncate.
        match from {
            DType::F64 => {
                a.extend([2.7, -2.7, 3e9, -3e9, 1e19, -1e19, 16777217.0].map(Scalar::F64))
            }
            DType::F32 => a.extend([2.7f32, -2.7, 3e9, -3e9, 1e19, -1e19].map(Scalar::F32)),
            DType::I64 => {
                a.extend([(1i64 << 53) + 1, 5_000_000_000, -5_000_000_001].map(Scalar::I64))
            }
            DType::I32 => a.extend([16_777_217i32].map(Scalar::I32)),
            DType::Bool => {}
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
        for to in DType::VALUES {
            let mut ins = [Col::from(from, &a)];
            let got = elementwise(&mut be, "cast", &mut ins, &[from], to, |kb, x| {
                kb.cast(to, x[0])
            })
            .unwrap();
            for (i, &x) in a.iter().enumerate() {
                let want = ref_cast(to, x);
                assert!(
                    same(got.get(i), want),
                    "cast {x:?} to {to}: {:?}, want {want:?}",
                    got.get(i)
                );
            }
        }
    }
}

#[test]
fn select_on_every_type() {
    let mut be = CpuBackend::new().unwrap();
    for dt in DType::VALUES {
        let (a, b) = pairs(dt);
        let c: Vec<Scalar> = (0..a.len()).map(|i| Scalar::Bool(i % 3 == 0)).collect();
        let mut ins = [
            Col::from(DType::Bool, &c),
            Col::from(dt, &a),
            Col::from(dt, &b),
        ];
        let got = elementwise(
            &mut be,
            "sel",
            &mut ins,
            &[DType::Bool, dt, dt],
            dt,
            |kb, x| kb.select(x[0], x[1], x[2]),
        )
        .unwrap();
        for i in 0..a.len() {
            let want = if i % 3 == 0 { a[i] } else { b[i] };
            assert!(same(got.get(i), want));
        }
    }
}

/// `a * b + c` rounded once and rounded twice, for one float type.
fn fma_reference(a: Scalar, b: Scalar, c: Scalar) -> (Scalar, Scalar) {
    match (a, b, c) {
        (Scalar::F64(x), Scalar::F64(y), Scalar::F64(z)) => {
            (Scalar::F64(x.mul_add(y, z)), Scalar::F64(x * y + z))
        }
        (Scalar::F32(x), Scalar::F32(y), Scalar::F32(z)) => {
            (Scalar::F32(x.mul_add(y, z)), Scalar::F32(x * y + z))
        }
        _ => panic!("fma of {a:?}, {b:?}, {c:?}"),
    }
}

#[test]
fn fma_rounds_once_on_floats_and_is_refused_on_integers() {
    let mut be = CpuBackend::new().unwrap();
    for dt in DType::VALUES {
        let (mut a, mut b) = pairs(dt);
        let mut c: Vec<Scalar> = a.iter().rev().copied().collect();
        if dt.is_float() {
            // `(1 + e)(1 - e) - 1` is `-e^2` exactly, and 0 when the product is rounded first
            // (`e^2` below half an ulp of 1).
            let ks = if dt == DType::F32 {
                [13, 17, 20]
            } else {
                [27, 30, 40]
            };
            for k in ks {
                let e = (0.5f64).powi(k);
                let cast = |x: f64| match dt {
                    DType::F32 => Scalar::F32(x as f32),
                    _ => Scalar::F64(x),
                };
                a.push(cast(1.0 + e));
                b.push(cast(1.0 - e));
                c.push(cast(-1.0));
            }
        }
        let mut ins = [Col::from(dt, &a), Col::from(dt, &b), Col::from(dt, &c)];
        let got = elementwise(&mut be, "fma", &mut ins, &[dt, dt, dt], dt, |kb, x| {
            kb.fma(x[0], x[1], x[2])
        });
        if !dt.is_float() {
            assert!(
                matches!(got, Err(Error::Compile { .. })),
                "fma on {dt} should not compile"
            );
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("fma on {dt}: {e}"));
        let mut fused = 0;
        for i in 0..a.len() {
            let (want, twice) = fma_reference(a[i], b[i], c[i]);
            assert!(
                same(got.get(i), want),
                "fma({:?}, {:?}, {:?}) = {:?}, want {want:?}",
                a[i],
                b[i],
                c[i],
                got.get(i)
            );
            fused += usize::from(!same(want, twice));
        }
        assert!(
            fused >= 2,
            "{dt}: only {fused} cases tell one rounding from two"
        );
    }
}

#[test]
fn constants_and_scalar_parameters_of_every_type() {
    let mut be = CpuBackend::new().unwrap();
    for dt in DType::VALUES {
        for &s in &samples(dt) {
            // out[0] = const; out[1] = scalar param; out[2] = param computed at top level
            // (recomputed inside the loop); all through a select on the index.
            let mut kb = Kb::new();
            let p = kb.scalar(dt);
            let out = kb.store(dt, 1, Privilege::Write);
            let pv = kb.param(p);
            let cv = kb.c(s);
            kb.parallel(out, 1, |kb, idx| {
                let zero = kb.i64(0);
                let is0 = kb.cmp(CmpOp::Eq, idx[0], zero);
                let v = kb.select(is0, cv, pv);
                kb.store_to(out, &[idx[0]], v);
            });
            let k = be.compile(&kb.finish("consts")).unwrap();
            let mut col = Col::zeros(dt, 2);
            run(&k, &[col.view()], &[s]).unwrap();
            assert!(same(col.get(0), s), "const {s:?}");
            assert!(same(col.get(1), s), "param {s:?}");
        }
    }
}

#[test]
fn loaded_bools_are_normalised() {
    // A byte other than 0 or 1 in a bool store reads as true, and `not` of it is false.
    let mut be = CpuBackend::new().unwrap();
    let mut ins = [Col::Bool(vec![0, 1, 2, 255])];
    let got = elementwise(
        &mut be,
        "norm",
        &mut ins,
        &[DType::Bool],
        DType::Bool,
        |kb, x| kb.un(UnaryOp::Not, x[0]),
    )
    .unwrap();
    let Col::Bool(v) = got else { unreachable!() };
    assert_eq!(v, vec![1, 0, 0, 0]);
}

#[test]
fn bitcasts_keep_every_bit() {
    let mut be = CpuBackend::new().unwrap();
    let f64s: Vec<f64> = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]
    .into_iter()
    .chain(
        [
            0x7ff8_0000_0000_0001u64,
            0xfff0_0000_dead_beef,
            0x7ff0_0000_0000_0001,
        ]
        .map(f64::from_bits),
    )
    .collect();
    let i64s: Vec<i64> = f64s.iter().map(|x| x.to_bits() as i64).collect();
    let f32s: Vec<f32> = [
        0.0f32,
        -0.0,
        1.0,
        -2.5,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        f32::INFINITY,
    ]
    .into_iter()
    .chain([0x7fc0_0001u32, 0xff80_1234, 0x7f80_0001].map(f32::from_bits))
    .collect();
    let i32s: Vec<i32> = f32s.iter().map(|x| x.to_bits() as i32).collect();

    let run1 = |be: &mut CpuBackend, from: DType, to: DType, col: Col| {
        let mut ins = [col];
        elementwise(be, "bitcast", &mut ins, &[from], to, |kb, x| {
            kb.op(weft_ir::Op::Bitcast(to, x[0]))
        })
        .unwrap()
    };
    let Col::I64(got) = run1(&mut be, DType::F64, DType::I64, Col::F64(f64s.clone())) else {
        unreachable!()
    };
    assert_eq!(got, i64s);
    let Col::F64(got) = run1(&mut be, DType::I64, DType::F64, Col::I64(i64s.clone())) else {
        unreachable!()
    };
    let bits: Vec<u64> = got.iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, f64s.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let Col::I32(got) = run1(&mut be, DType::F32, DType::I32, Col::F32(f32s.clone())) else {
        unreachable!()
    };
    assert_eq!(got, i32s);
    let Col::F32(got) = run1(&mut be, DType::I32, DType::F32, Col::I32(i32s.clone())) else {
        unreachable!()
    };
    let bits: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, f32s.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    // A type as itself.
    let Col::I64(got) = run1(&mut be, DType::I64, DType::I64, Col::I64(i64s.clone())) else {
        unreachable!()
    };
    assert_eq!(got, i64s);
    // Pairs of different sizes do not compile.
    for (from, to) in [
        (DType::F64, DType::I32),
        (DType::F32, DType::F64),
        (DType::Bool, DType::I32),
    ] {
        let mut ins = [Col::zeros(from, 1)];
        let got = elementwise(&mut be, "bad", &mut ins, &[from], to, |kb, x| {
            kb.op(weft_ir::Op::Bitcast(to, x[0]))
        });
        assert!(matches!(got, Err(Error::Compile { .. })), "{from} -> {to}");
    }
}

#[test]
fn shifts_take_the_amount_modulo_the_width() {
    let mut be = CpuBackend::new().unwrap();
    let vals = [1i64, -1, 0x1234_5678_9abc_def0, i64::MIN, i64::MAX, 0];
    let amounts = [0i64, 1, 3, 31, 32, 33, 63, 64, 65, 127, -1, -63, i64::MIN];
    let mut a = vec![];
    let mut b = vec![];
    for &x in &vals {
        for &y in &amounts {
            a.push(x);
            b.push(y);
        }
    }
    for op in [BinaryOp::Shl, BinaryOp::Shr] {
        let mut ins = [Col::I64(a.clone()), Col::I64(b.clone())];
        let Col::I64(got) = elementwise(
            &mut be,
            "shift64",
            &mut ins,
            &[DType::I64; 2],
            DType::I64,
            |kb, x| kb.bin(op, x[0], x[1]),
        )
        .unwrap() else {
            unreachable!()
        };
        for i in 0..a.len() {
            let s = (b[i] & 63) as u32;
            let want = if op == BinaryOp::Shl {
                ((a[i] as u64) << s) as i64
            } else {
                ((a[i] as u64) >> s) as i64
            };
            assert_eq!(got[i], want, "{} {} {}", a[i], op.name(), b[i]);
        }
        let a32: Vec<i32> = a.iter().map(|&x| x as i32 ^ (x >> 32) as i32).collect();
        let b32: Vec<i32> = b.iter().map(|&x| x as i32).collect();
        let mut ins = [Col::I32(a32.clone()), Col::I32(b32.clone())];
        let Col::I32(got) = elementwise(
            &mut be,
            "shift32",
            &mut ins,
            &[DType::I32; 2],
            DType::I32,
            |kb, x| kb.bin(op, x[0], x[1]),
        )
        .unwrap() else {
            unreachable!()
        };
        for i in 0..a32.len() {
            let s = (b32[i] & 31) as u32;
            let want = if op == BinaryOp::Shl {
                ((a32[i] as u32) << s) as i32
            } else {
                ((a32[i] as u32) >> s) as i32
            };
            assert_eq!(got[i], want, "{} {} {}", a32[i], op.name(), b32[i]);
        }
    }
}
