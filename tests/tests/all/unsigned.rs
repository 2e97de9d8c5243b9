//! The unsigned dtypes (`uint8` .. `uint64`) against NumPy itself: wrapping arithmetic,
//! comparisons, `minimum`/`maximum`, remainders, shifts, casts both ways, NumPy's promotion
//! rules, reductions (a sum's `uint64`), positions, sorting, selection and gathers, on edge
//! values (0, the top bit, the largest value of each type), compared element for element as
//! exact integers (floats by their bits), with one piece and with three, on two threads.

use weft::numeric::{BinaryOp, Reduction};
use weft::{Array, Ix, Numeric, Range};
use weft_ir::DType;

use crate::numpy_views::{CaseOn, check_cases, numeric_in_pieces, python_lines};

/// The inputs, built the same way on both sides.
const SETUP: &str = r#"
import json, sys
import numpy as np
a8 = np.array([0, 1, 2, 127, 128, 200, 254, 255], dtype=np.uint8)
s8 = np.arange(8, dtype=np.uint8)
a16 = np.array([0, 1, 255, 256, 1000, 32768, 65534, 65535], dtype=np.uint16)
a32 = np.array([0, 1, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=np.uint32)
a64 = np.array([0, 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1], dtype=np.uint64)
b64 = np.array([2**63, 3, 2**64 - 1, 7, 2**63 + 5, 2**63 - 1, 1, 2**40], dtype=np.uint64)
i64 = np.array([-3, -2, -1, 0, 1, 2, 300, 2**40], dtype=np.int64)
i32 = np.array([-3, -2, -1, 0, 1, 2, 300, 70000], dtype=np.int32)
f32 = np.array([0.5, 1.5, -2.0, 3.25, 100.0, 0.0, 7.0, 8.0], dtype=np.float32)
f64 = np.array([0.0, 1.5, 2.0**53, 2.0**63, 1.5 * 2.0**63, 255.9, 7.0, 65536.0])
idx = np.array([7, 0, 5, 5, 2], dtype=np.int64)
"#;

struct Inputs {
    a8: Array,
    s8: Array,
    a16: Array,
    a32: Array,
    a64: Array,
    b64: Array,
    i64: Array,
    i32: Array,
    f32: Array,
    f64: Array,
    idx: Array,
}

fn inputs(np: &Numeric) -> Inputs {
    Inputs {
        a8: np.from_slice(&[8], &[0u8, 1, 2, 127, 128, 200, 254, 255]),
        s8: np.from_slice(&[8], &[0u8, 1, 2, 3, 4, 5, 6, 7]),
        a16: np.from_slice(&[8], &[0u16, 1, 255, 256, 1000, 32768, 65534, 65535]),
        a32: np.from_slice(
            &[8],
            &[
                0u32,
                1,
                65535,
                65536,
                (1 << 31) - 1,
                1 << 31,
                u32::MAX - 1,
                u32::MAX,
            ],
        ),
        a64: np.from_slice(
            &[8],
            &[
                0u64,
                1,
                1 << 32,
                (1 << 53) + 1,
                (1 << 63) - 1,
                1 << 63,
                u64::MAX - 1,
                u64::MAX,
            ],
        ),
        b64: np.from_slice(
            &[8],
            &[
                1u64 << 63,
                3,
                u64::MAX,
                7,
                (1 << 63) + 5,
                (1 << 63) - 1,
                1,
                1 << 40,
            ],
        ),
        i64: np.from_slice(&[8], &[-3i64, -2, -1, 0, 1, 2, 300, 1 << 40]),
        i32: np.from_slice(&[8], &[-3i32, -2, -1, 0, 1, 2, 300, 70000]),
        f32: np.from_slice(&[8], &[0.5f32, 1.5, -2.0, 3.25, 100.0, 0.0, 7.0, 8.0]),
        f64: np.from_slice(
            &[8],
            &[
                0.0,
                1.5,
                2f64.powi(53),
                2f64.powi(63),
                1.5 * 2f64.powi(63),
                255.9,
                7.0,
                65536.0,
            ],
        ),
        idx: np.from_slice(&[5], &[7i64, 0, 5, 5, 2]),
    }
}

type Case = CaseOn<Inputs>;

fn cases() -> Vec<Case> {
    vec![
        // Wrapping arithmetic, and NumPy's weak Python scalars.
        ("a8 + a8", |x| &x.a8 + &x.a8),
        ("a8 - s8", |x| &x.a8 - &x.s8),
        ("s8 - a8", |x| &x.s8 - &x.a8),
        ("a8 * a8", |x| &x.a8 * &x.a8),
        ("a8 + 100", |x| x.a8.binary(BinaryOp::Add, 100i64)),
        ("a16 * a16", |x| &x.a16 * &x.a16),
        ("a32 * a32 + a32", |x| &(&x.a32 * &x.a32) + &x.a32),
        ("a64 + a64", |x| &x.a64 + &x.a64),
        ("a64 * b64", |x| &x.a64 * &x.b64),
        ("a64 - b64", |x| &x.a64 - &x.b64),
        ("-a8", |x| -&x.a8),
        ("-a64", |x| -&x.a64),
        ("abs(a64)", |x| x.a64.abs()),
        ("~a32", |x| x.a32.invert()),
        ("a16 & 0xff0", |x| x.a16.bitwise_and(0xff0i64)),
        ("a64 ^ b64", |x| x.a64.bitwise_xor(&x.b64)),
        ("a64 | b64", |x| x.a64.bitwise_or(&x.b64)),
        // Orders.
        ("a64 < b64", |x| x.a64.lt(&x.b64)),
        ("a64 > b64", |x| x.a64.gt(&x.b64)),
        ("a64 == b64", |x| x.a64.eq(&x.b64)),
        ("a8 > 100", |x| x.a8.gt(100i64)),
        // A wrapped temporary read by an operation that sees the high bits (the fused kernel
        // must read the stored bits back, not reuse the unwrapped value).
        ("(a8 + a8) < 100", |x| (&x.a8 + &x.a8).lt(100i64)),
        ("(a8 * a8).astype(np.float64)", |x| {
            (&x.a8 * &x.a8).astype(DType::F64)
        }),
        ("(a16 + a16) >> s8.astype(np.uint16)", |x| {
            (&x.a16 + &x.a16).right_shift(&x.s8.astype(DType::U16))
        }),
        ("(a32 * a32) % 1000", |x| &(&x.a32 * &x.a32) % 1000i64),
        ("np.minimum(a64, b64)", |x| x.a64.minimum(&x.b64)),
        ("np.maximum(a64, b64)", |x| x.a64.maximum(&x.b64)),
        ("np.maximum(a8, s8)", |x| x.a8.maximum(&x.s8)),
        ("a64 % b64", |x| &x.a64 % &x.b64),
        ("b64 % a64", |x| &x.b64 % &x.a64),
        ("a32 % (s8.astype(np.uint32) + 1)", |x| {
            &x.a32 % &(x.s8.astype(DType::U32) + 1i64)
        }),
        ("a8 % s8", |x| &x.a8 % &x.s8),
        // Shifts: amounts of the width or more give 0.
        ("a8 << s8", |x| x.a8.left_shift(&x.s8)),
        ("a16 << (s8.astype(np.uint16) * 3)", |x| {
            x.a16.left_shift(&(x.s8.astype(DType::U16) * 3i64))
        }),
        ("a64 >> (s8.astype(np.uint64) * 10)", |x| {
            x.a64.right_shift(&(x.s8.astype(DType::U64) * 10i64))
        }),
        ("a32 >> (s8.astype(np.uint32) * 5)", |x| {
            x.a32.right_shift(&(x.s8.astype(DType::U32) * 5i64))
        }),
        // Casts both ways.
        ("a64.astype(np.float64)", |x| x.a64.astype(DType::F64)),
        ("a64.astype(np.float32)", |x| x.a64.astype(DType::F32)),
        ("b64.astype(np.float64)", |x| x.b64.astype(DType::F64)),
        ("a32.astype(np.float32)", |x| x.a32.astype(DType::F32)),
        ("a8.astype(np.int32)", |x| x.a8.astype(DType::I32)),
        ("a32.astype(np.int32)", |x| x.a32.astype(DType::I32)),
        ("a64.astype(np.int64)", |x| x.a64.astype(DType::I64)),
        ("a64.astype(np.uint8)", |x| x.a64.astype(DType::U8)),
        ("a16.astype(np.uint64)", |x| x.a16.astype(DType::U64)),
        ("a64.astype(np.bool_)", |x| x.a64.astype(DType::Bool)),
        ("i64.astype(np.uint8)", |x| x.i64.astype(DType::U8)),
        ("i32.astype(np.uint16)", |x| x.i32.astype(DType::U16)),
        ("i64.astype(np.uint64)", |x| x.i64.astype(DType::U64)),
        ("f64.astype(np.uint64)", |x| x.f64.astype(DType::U64)),
        // (Floats past the range of `i64` convert as C leaves undefined: not compared.)
        ("f64[5:].astype(np.uint32)", |x| {
            x.f64
                .index(&[Ix::Slice(Range::new(5, 8))])
                .astype(DType::U32)
        }),
        ("(a8 > 100).astype(np.uint8)", |x| {
            x.a8.gt(100i64).astype(DType::U8)
        }),
        // NumPy's promotion.
        ("a8 + i64", |x| &x.a8 + &x.i64),
        ("a16 + i32", |x| &x.a16 + &x.i32),
        ("a32 + i32", |x| &x.a32 + &x.i32),
        ("a64 + i64", |x| &x.a64 + &x.i64),
        ("a8 + f32", |x| &x.a8 + &x.f32),
        ("a32 + f32", |x| &x.a32 + &x.f32),
        ("a16 + a32", |x| &x.a16 + &x.a32),
        ("a8 * a64", |x| &x.a8 * &x.a64),
        ("a8 / (s8 + 1)", |x| &x.a8 / &(&x.s8 + 1i64)),
        ("a64 * 0.5", |x| &x.a64 * 0.5),
        // Reductions.
        ("a8.sum()", |x| x.a8.sum()),
        ("a64.sum()", |x| x.a64.sum()),
        ("a16.prod()", |x| x.a16.prod()),
        ("a64.max()", |x| x.a64.max()),
        ("a64.min()", |x| x.a64.min()),
        ("b64.max()", |x| x.b64.max()),
        ("a8.max()", |x| x.a8.max()),
        ("a32.min()", |x| x.a32.min()),
        ("a64.reshape(2, 4).max(axis=1)", |x| {
            x.a64
                .reshape(&[2, 4])
                .reduce_axes(Reduction::Max, Some(&[1]), false)
        }),
        ("a8.reshape(2, 4).sum(axis=0)", |x| {
            x.a8.reshape(&[2, 4]).sum_axis(0)
        }),
        ("b64.argmax()", |x| x.b64.argmax(None)),
        ("b64.argmin()", |x| x.b64.argmin(None)),
        ("a8.cumsum()", |x| x.a8.cumsum(None)),
        ("a32.mean()", |x| x.a32.mean()),
        // A Python integer out of range is compared exactly (NumPy 2), either side.
        ("a8 > -1", |x| x.a8.gt(-1i64)),
        ("a8 == 256", |x| x.a8.eq(256i64)),
        ("a16 < 70000", |x| x.a16.lt(70_000i64)),
        ("a64 >= -5", |x| x.a64.ge(-5i64)),
        ("a32 != -1", |x| x.a32.ne(-1i64)),
        // The smallest float that holds the values (NumPy's float16 for uint8 is no dtype
        // here: float32), and floor keeping integers.
        ("np.sqrt(a16)", |x| x.a16.sqrt()),
        ("np.floor(a32)", |x| x.a32.floor()),
        ("a64[4:6].mean()", |x| {
            x.a64.index(&[Ix::Slice(Range::new(4, 6))]).mean()
        }),
        ("a8.mean()", |x| x.a8.mean()),
        // Creation in an unsigned dtype.
        ("np.zeros(3, dtype=np.uint16)", |x| {
            x.a8.numeric().zeros(&[3], DType::U16)
        }),
        ("np.full(3, 250, dtype=np.uint8)", |x| {
            x.a8.numeric().full(&[3], 250.0, DType::U8)
        }),
        ("np.arange(2, 9, 3, dtype=np.uint32)", |x| {
            x.a8.numeric().arange(2.0, 9.0, 3.0, DType::U32)
        }),
        ("np.ones((2, 2), dtype=np.uint64)", |x| {
            x.a8.numeric().ones(&[2, 2], DType::U64)
        }),
        // Sorting, selection, views and gathers.
        ("np.sort(b64)", |x| x.b64.sort(None).expect("sorts")),
        ("np.argsort(b64, kind='stable')", |x| {
            x.b64.argsort(None).expect("sorts")
        }),
        ("np.sort(a8[::-1])", |x| {
            x.a8.index(&[Ix::Slice(Range::all().step(-1))])
                .sort(None)
                .expect("sorts")
        }),
        ("np.where(a8 > 100, a8, s8)", |x| {
            x.a8.gt(100i64).select(&x.a8, &x.s8)
        }),
        ("a64[2:6]", |x| x.a64.index(&[Ix::Slice(Range::new(2, 6))])),
        ("a64[idx]", |x| x.a64.take(&x.idx, Some(0))),
        ("a16[idx]", |x| x.a16.take(&x.idx, Some(0))),
    ]
}

/// NumPy's result of each case: shape, dtype name and the elements as text (integers exact).
fn numpy_results(cases: &[Case]) -> Vec<(Vec<u64>, String, Vec<String>)> {
    let mut program = String::from(SETUP);
    program.push_str("np.seterr(all='ignore')\n");
    for (expr, _) in cases {
        program.push_str(&format!(
            "r = np.asarray({expr})\nprint(json.dumps([list(r.shape), r.dtype.name, \
             [repr(e) for e in r.reshape(-1).tolist()]]))\n"
        ));
    }
    python_lines(&program)
        .iter()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect()
}

/// The elements of `a` as text, integers exact, floats as Python's `repr` of them would parse.
fn elements(a: &Array) -> Vec<String> {
    match a.dtype().expect("dtype") {
        DType::U8 => text(a.to_vec_of::<u8>()),
        DType::U16 => text(a.to_vec_of::<u16>()),
        DType::U32 => text(a.to_vec_of::<u32>()),
        DType::U64 => text(a.to_vec_of::<u64>()),
        DType::I64 => text(a.to_vec_of::<i64>()),
        DType::I32 => text(a.to_vec_of::<i32>()),
        DType::Bool => a
            .to_vec_of::<bool>()
            .expect("bools")
            .iter()
            .map(|&b| if b { "True" } else { "False" }.to_string())
            .collect(),
        DType::F32 => text(
            a.to_vec_of::<f32>()
                .map(|v| v.into_iter().map(f64::from).collect::<Vec<_>>()),
        ),
        DType::F64 => text(a.to_vec_of::<f64>()),
    }
}

fn text<T: ToString>(v: weft::Result<Vec<T>>) -> Vec<String> {
    v.expect("elements").iter().map(T::to_string).collect()
}

#[test]
fn unsigned_dtypes_match_numpy() {
    let cases = cases();
    let want = numpy_results(&cases);
    check_cases(&cases, &want, inputs, |what, got, values| {
        let float = got.dtype().is_ok_and(|d| d.is_float());
        let got = elements(got);
        let same = got.len() == values.len()
            && got.iter().zip(values).all(|(g, w)| {
                match (g.parse::<f64>(), w.parse::<f64>()) {
                    // Floats by value (Python and Rust print them differently); integers,
                    // which parse too, compare as text first so that 2^64 - 1 is exact.
                    _ if g == w => true,
                    (Ok(a), Ok(b)) if float => {
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
                    }
                    _ => false,
                }
            });
        assert!(same, "{what}: got {got:?}, NumPy {values:?}");
    });
}

/// Arithmetic with a Python integer outside an unsigned dtype's range fails as NumPy 2's does,
/// naming the operator, and the runtime goes on.
#[test]
fn out_of_range_integers_fail_arithmetic() {
    let np = numeric_in_pieces(1);
    let a = np.from_slice(&[3], &[1u8, 2, 3]);
    for (got, v) in [(&a + 300i64, 300), (a.binary(BinaryOp::Sub, -1i64), -1)] {
        let e = got.check().expect_err("out of range").to_string();
        assert!(
            e.contains(&format!("Python integer {v} out of bounds for uint8")),
            "{e}"
        );
    }
    let ok = (&a + 250i64).to_vec_of::<u8>().expect("in range");
    assert_eq!(ok, vec![251, 252, 253]);
}
