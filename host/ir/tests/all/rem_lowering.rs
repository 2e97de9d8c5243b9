//! Float `rem` lowered to integer arithmetic and a loop (`weft_ir::passes::rem`) against
//! Rust's `%` (C's `fmod`), bit for bit, on special values (zeros, infinities, NaN,
//! subnormals, extremes) and random ones, for `f64` and `f32`, through the reference
//! interpreter.

use proptest::prelude::*;
use weft_ir::interp::{Arg, Storage, View, run_with_limit};
use weft_ir::passes::rem::{has_float_rem, lower_float_rem};
use weft_ir::{DType, Scalar, text, validate};

fn kernel(t: &str) -> weft_ir::Kernel {
    text::parse(&format!(
        "kernel @rem(%x: store<{t}, 1, read>, %y: store<{t}, 1, read>, %r: store<{t}, 1, write>) {{
  parallel %r (%i) {{
    %a = load %x[%i]
    %b = load %y[%i]
    %c = rem %a, %b
    store %r[%i], %c
  }}
}}"
    ))
    .expect("the kernel parses")
}

/// The lowered kernel's remainders of the pairs `xs[i], ys[i]`.
fn lowered(t: DType, xs: Vec<Scalar>, ys: Vec<Scalar>) -> Vec<Scalar> {
    let k = kernel(t.name());
    assert!(has_float_rem(&k));
    let low = lower_float_rem(&k);
    assert!(!has_float_rem(&low), "a float rem is left");
    validate(&low).expect("the lowered kernel validates");
    let n = xs.len();
    let mut storages = vec![
        Storage { dtype: t, data: xs },
        Storage { dtype: t, data: ys },
        Storage::zeros(t, n),
    ];
    let args: Vec<Arg> = (0..3)
        .map(|s| Arg::Store(View::dense(s, &[n as i64])))
        .collect();
    run_with_limit(&low, &args, &mut storages, u64::MAX).expect("the lowered kernel runs");
    storages.pop().expect("the result").data
}

/// Checks the lowered kernel's remainders of every pair against Rust's `%` on the same type:
/// the same bits, or NaN where `%` gives NaN (a NaN's payload is unspecified).
fn check_pairs(t: DType, pairs: &[(Scalar, Scalar)]) {
    let got = lowered(
        t,
        pairs.iter().map(|p| p.0).collect(),
        pairs.iter().map(|p| p.1).collect(),
    );
    for (&(x, y), g) in pairs.iter().zip(got) {
        let want = match (x, y) {
            (Scalar::F64(a), Scalar::F64(b)) => Scalar::F64(a % b),
            (Scalar::F32(a), Scalar::F32(b)) => Scalar::F32(a % b),
            _ => panic!("not a float pair: {x:?} {y:?}"),
        };
        if want.as_f64().is_nan() {
            assert!(g.as_f64().is_nan(), "rem({x:?}, {y:?}) = {g:?}, want NaN");
        } else {
            assert_eq!(g, want, "rem({x:?}, {y:?})");
        }
    }
}

/// Every ordered pair of `values`.
fn all_pairs(values: &[Scalar]) -> Vec<(Scalar, Scalar)> {
    values
        .iter()
        .flat_map(|&x| values.iter().map(move |&y| (x, y)))
        .collect()
}

fn specials() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        3.5,
        -7.25,
        1e300,
        -1e-300,
        f64::MAX,
        f64::MIN_POSITIVE,
        5e-324,
        -1e-310,
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        std::f64::consts::PI,
        1e16,
        123456789.125,
    ]
}

#[test]
fn f64_special_values_match_fmod() {
    let s: Vec<Scalar> = specials().into_iter().map(Scalar::F64).collect();
    check_pairs(DType::F64, &all_pairs(&s));
}

#[test]
fn f32_special_values_match_fmod() {
    let s: Vec<Scalar> = specials()
        .iter()
        .map(|&v| v as f32)
        .chain([1e-45, 3.4e38])
        .map(Scalar::F32)
        .collect();
    check_pairs(DType::F32, &all_pairs(&s));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_bits_match_fmod(bits in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..32)) {
        let pairs: Vec<(Scalar, Scalar)> = bits
            .iter()
            .map(|&(a, b)| (Scalar::F64(f64::from_bits(a)), Scalar::F64(f64::from_bits(b))))
            .collect();
        check_pairs(DType::F64, &pairs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn moderate_values_match_fmod(pairs in proptest::collection::vec((-1e6f64..1e6, -1e3f64..1e3), 1..32)) {
        let pairs: Vec<(Scalar, Scalar)> =
            pairs.iter().map(|&(x, y)| (Scalar::F64(x), Scalar::F64(y))).collect();
        check_pairs(DType::F64, &pairs);
    }
}
