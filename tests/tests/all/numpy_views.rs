//! Views, broadcasting, axis reductions, `matmul`'s rules, promotion and in-place operators
//! against NumPy itself: each case is a NumPy statement and the same program through the
//! facade, on the same inputs, with one piece and with three. NumPy runs once for all cases
//! (`python3` with NumPy, which `scripts/test` installs; without it the test fails and says
//! so).

use std::process::Command;

use weft::{Array, Config, Ix, Numeric, Range};
use weft_ir::DType;

/// The inputs, built the same way on both sides.
const SETUP: &str = r#"
import json, sys
import numpy as np
A = np.arange(24.0).reshape(2, 3, 4) * 0.25 - 2.0
M = np.arange(30.0).reshape(5, 6) * 0.5 - 3.0
v = np.arange(6.0) - 2.5
B = (np.arange(3000.0).reshape(1000, 3) % 7.0) - 3.0
E = np.zeros((0, 4))
I = np.arange(6, dtype=np.int32).reshape(2, 3)
L = np.arange(6, dtype=np.int64).reshape(2, 3)
F = (np.arange(6, dtype=np.float32) * 0.5).reshape(2, 3)
"#;

pub(crate) struct Inputs {
    pub(crate) a: Array,
    pub(crate) m: Array,
    pub(crate) v: Array,
    pub(crate) b: Array,
    pub(crate) e: Array,
    pub(crate) i: Array,
    pub(crate) l: Array,
    pub(crate) f: Array,
}

fn inputs(np: &Numeric) -> Inputs {
    let ar = |n: f64, shape: &[i64], dtype: DType| np.arange(0.0, n, 1.0, dtype).reshape(shape);
    Inputs {
        a: ar(24.0, &[2, 3, 4], DType::F64) * 0.25 - 2.0,
        m: ar(30.0, &[5, 6], DType::F64) * 0.5 - 3.0,
        v: np.arange(0.0, 6.0, 1.0, DType::F64) - 2.5,
        b: {
            let x = ar(3000.0, &[1000, 3], DType::F64);
            // x % 7 - 3, with floor: x - 7 * floor(x / 7) - 3 (x >= 0).
            let q = (&x / 7.0).astype(DType::I64).astype(DType::F64);
            x - q * 7.0 - 3.0
        },
        e: np.zeros(&[0, 4], DType::F64),
        i: ar(6.0, &[2, 3], DType::I32),
        l: ar(6.0, &[2, 3], DType::I64),
        f: ar(6.0, &[2, 3], DType::F32) * 0.5,
    }
}

pub(crate) type Case = CaseOn<Inputs>;

/// A NumPy statement and the same program on inputs `I`.
pub(crate) type CaseOn<I> = (&'static str, fn(&I) -> Array);

pub(crate) fn s(start: i64, stop: i64) -> Ix {
    Ix::Slice(Range::new(start, stop))
}

pub(crate) fn all() -> Ix {
    Ix::Slice(Range::all())
}

fn cases() -> Vec<Case> {
    vec![
        ("M[::-1]", |x| {
            x.m.index(&[Ix::Slice(Range::all().step(-1))])
        }),
        ("M[1:4, ::-2]", |x| {
            x.m.index(&[s(1, 4), Ix::Slice(Range::all().step(-2))])
        }),
        ("M[4:0:-3, 5]", |x| {
            x.m.index(&[Ix::Slice(Range::new(4, 0).step(-3)), Ix::At(5)])
        }),
        ("M.T", |x| x.m.t()),
        ("A.transpose(2, 0, 1)", |x| x.a.permute(&[2, 0, 1])),
        ("M[:, 2:3] + v", |x| x.m.index(&[all(), s(2, 3)]) + &x.v),
        ("M + M[0]", |x| &x.m + x.m.index(&[Ix::At(0)])),
        ("A * M[0:3, 0:4]", |x| &x.a * x.m.index(&[s(0, 3), s(0, 4)])),
        ("M[:, None, :] - M[None, 1, :]", |x| {
            x.m.index(&[all(), Ix::NewAxis, all()]) - x.m.index(&[Ix::NewAxis, Ix::At(1), all()])
        }),
        ("M[::-1, ::2] * v[::2]", |x| {
            x.m.index(&[
                Ix::Slice(Range::all().step(-1)),
                Ix::Slice(Range::all().step(2)),
            ]) * x.v.index(&[Ix::Slice(Range::all().step(2))])
        }),
        ("M.T * v[:, None]", |x| {
            x.m.t() * x.v.index(&[all(), Ix::NewAxis])
        }),
        ("np.broadcast_to(v, (3, 6))", |x| x.v.broadcast_to(&[3, 6])),
        ("np.where(M > 0, M, v)", |x| x.m.gt(0.0).select(&x.m, &x.v)),
        ("A.reshape(6, 4)", |x| x.a.reshape(&[6, 4])),
        ("A.T.reshape(4, 6)", |x| x.a.t().reshape(&[4, 6])),
        ("A.reshape(-1)", |x| x.a.reshape(&[-1])),
        ("M.T.reshape(-1)", |x| x.m.t().reshape(&[-1])),
        ("np.expand_dims(v, 0)", |x| x.v.expand_dims(0)),
        ("np.expand_dims(v, -1)", |x| x.v.expand_dims(-1)),
        ("np.squeeze(M[2:3, :])", |x| x.m.index(&[s(2, 3)]).squeeze()),
        ("A.sum(axis=0)", |x| x.a.sum_axis(0)),
        ("A.sum(axis=(0, 2))", |x| {
            x.a.reduce_axes(weft::numeric::Reduction::Sum, Some(&[0, 2]), false)
        }),
        ("A.max(axis=-1, keepdims=True)", |x| {
            x.a.reduce_axes(weft::numeric::Reduction::Max, Some(&[-1]), true)
        }),
        ("A.min(axis=1)", |x| x.a.min_axis(1)),
        ("M.prod(axis=0)", |x| x.m.prod_axis(0)),
        ("A.sum(axis=1, keepdims=True)", |x| {
            x.a.reduce_axes(weft::numeric::Reduction::Sum, Some(&[1]), true)
        }),
        ("A.T.sum(axis=2)", |x| x.a.t().sum_axis(2)),
        ("M.mean(axis=1)", |x| x.m.mean_axes(Some(&[1]), false)),
        ("M.var(axis=0)", |x| x.m.var_axes(Some(&[0]), false, 0)),
        ("M.std()", |x| x.m.std()),
        ("B.sum(axis=0)", |x| x.b.sum_axis(0)),
        ("B.max(axis=1)", |x| x.b.max_axis(1)),
        ("B.T.sum(axis=1)", |x| x.b.t().sum_axis(1)),
        ("M[3:3].sum(axis=0)", |x| x.m.index(&[s(3, 3)]).sum_axis(0)),
        ("E.sum(axis=1)", |x| x.e.sum_axis(1)),
        ("E.sum(axis=0)", |x| x.e.sum_axis(0)),
        ("B.T @ B[:, 0]", |x| {
            x.b.t().matmul(&x.b.index(&[all(), Ix::At(0)]))
        }),
        ("B[:, 1] @ B", |x| {
            x.b.index(&[all(), Ix::At(1)]).matmul(&x.b)
        }),
        // A wide matrix stored by rows (not a transpose): `vecmat` reads its columns.
        ("B.T.copy() @ B[:, 2]", |x| {
            x.b.t().copy().matmul(&x.b.index(&[all(), Ix::At(2)]))
        }),
        ("M.T @ M[:, 0]", |x| {
            x.m.t().matmul(&x.m.index(&[all(), Ix::At(0)]))
        }),
        ("M @ M.T", |x| x.m.matmul(&x.m.t())),
        ("M.T @ M", |x| x.m.t().matmul(&x.m)),
        ("v @ v", |x| x.v.matmul(&x.v)),
        ("I + 0.5", |x| &x.i + 0.5),
        ("I * 3", |x| &x.i * x.i.numeric().full(&[], 3.0, DType::I32)),
        ("I + L", |x| &x.i + &x.l),
        ("F + 1.5", |x| &x.f + 1.5),
        ("F + M[:2, :3]", |x| &x.f + x.m.index(&[s(0, 2), s(0, 3)])),
        ("np.clip(M, -1.0, 2.0)", |x| x.m.clip(-1.0, 2.0)),
        ("np.outer(v, M[1])", |x| x.v.outer(&x.m.index(&[Ix::At(1)]))),
        ("np.outer(M[:2, :2], v[:3])", |x| {
            x.m.index(&[s(0, 2), s(0, 2)]).outer(&x.v.index(&[s(0, 3)]))
        }),
        ("np.eye(4)", |x| x.m.numeric().eye(4, DType::F64)),
        ("np.zeros_like(I)", |x| x.i.zeros_like()),
        ("np.ones_like(F)", |x| x.f.ones_like()),
        ("np.full_like(M, 2.5)", |x| x.m.full_like(2.5)),
        ("X = M.copy(); X[1:, :] += X[:-1, :]; r = X", |x| {
            let out = x.m.copy();
            let mut lower = out.index(&[s(1, 5)]);
            lower += out.index(&[s(0, 4)]);
            out
        }),
        ("X = M.copy(); X[:, 1] = v[:5]; r = X", |x| {
            let out = x.m.copy();
            out.index(&[all(), Ix::At(1)])
                .assign(&x.v.index(&[s(0, 5)]))
                .map(|()| out)
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("X = M.copy(); X[1:4, 1:5] = v[1:5]; r = X", |x| {
            let out = x.m.copy();
            out.index(&[s(1, 4), s(1, 5)])
                .assign(&x.v.index(&[s(1, 5)]))
                .map(|()| out)
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("X = M.copy(); X[:, ::-1] = M; r = X", |x| {
            let out = x.m.copy();
            out.index(&[all(), Ix::Slice(Range::all().step(-1))])
                .assign(&out)
                .map(|()| out)
                .unwrap_or_else(|e| panic!("{e}"))
        }),
    ]
}

/// NumPy's result of each case: shape, dtype name and values.
fn numpy_results(cases: &[Case]) -> Vec<(Vec<u64>, String, Vec<f64>)> {
    let mut program = String::from(SETUP);
    for (expr, _) in cases {
        let stmt = if expr.contains("r = ") {
            expr.to_string()
        } else {
            format!("r = {expr}")
        };
        program.push_str(&format!(
            "{stmt}\nr = np.asarray(r)\nprint(json.dumps([list(r.shape), r.dtype.name, \
             [float(e) for e in r.reshape(-1)]]))\n"
        ));
    }
    python_lines(&program)
        .iter()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let shape = v[0]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("extent"))
                .collect();
            let dtype = v[1].as_str().expect("dtype").to_string();
            let values = v[2]
                .as_array()
                .expect("values")
                .iter()
                .map(|e| e.as_f64().expect("value"))
                .collect();
            (shape, dtype, values)
        })
        .collect()
}

/// The lines `python3 -c program` prints (the program must succeed).
pub(crate) fn python_lines(program: &str) -> Vec<String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(program)
        .output()
        .expect("these tests need python3 with NumPy: run scripts/test, which installs it");
    assert!(
        out.status.success(),
        "NumPy failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub(crate) fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::Bool => "bool",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
    }
}

#[test]
fn views_broadcasting_and_axis_reductions_match_numpy() {
    check_against_numpy(&cases());
}

/// The numeric plugin on two threads, splitting arrays into `pieces` tiles.
pub(crate) fn numeric_in_pieces(pieces: u64) -> Numeric {
    weft_tests::numeric_with(Config {
        pieces,
        threads: 2,
        component_cache: None,
        ..Config::default()
    })
}

/// Runs every case through NumPy and through Weft (one piece, then three) and compares
/// shapes, dtypes and values.
pub(crate) fn check_against_numpy(cases: &[Case]) {
    let want = numpy_results(cases);
    check_cases(cases, &want, inputs, |what, got, values| {
        let got_values = got.to_vec().unwrap_or_else(|e| panic!("{what}: {e}"));
        weft_tests::assert_close(what, &got_values, values, 1e-12, 1e-12);
    });
}

/// Runs `cases` on the inputs `inputs` builds (one piece, then three) and checks each
/// result's shape and dtype against NumPy's in `want`, and its values with `same` (the case's
/// name, the result, NumPy's values).
pub(crate) fn check_cases<I, V>(
    cases: &[CaseOn<I>],
    want: &[(Vec<u64>, String, V)],
    inputs: fn(&Numeric) -> I,
    same: impl Fn(&str, &Array, &V),
) {
    assert_eq!(want.len(), cases.len());
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        let x = inputs(&np);
        for ((expr, make), (shape, dtype, values)) in cases.iter().zip(want) {
            let got = make(&x);
            let what = format!("{expr} ({pieces} pieces)");
            let got_shape = got.shape().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(&got_shape, shape, "{what}: shape");
            let got_dtype = got.dtype().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(numpy_name(got_dtype), dtype, "{what}: dtype");
            same(&what, &got, values);
        }
    }
}

#[test]
fn broadcast_errors_read_like_numpy() {
    let np = weft_tests::numeric(1);
    let a = np.zeros(&[10, 2], DType::F64);
    let b = np.zeros(&[8], DType::F64);
    let e = (&a + &b).check().unwrap_err().to_string();
    assert!(
        e.contains("operands could not be broadcast together with shapes (10,2) (8,)"),
        "{e}"
    );
    // Writing through a broadcast view is refused, and the host keeps working.
    let view = b.broadcast_to(&[3, 8]);
    let e = view.assign(1.0).unwrap_err().to_string();
    assert!(e.contains("broadcast view"), "{e}");
    let e = a.index(&[Ix::At(10)]).check().unwrap_err().to_string();
    assert!(
        e.contains("index 10 is out of bounds for axis 0 with size 10"),
        "{e}"
    );
    let e = a.reshape(&[3, 7]).check().unwrap_err().to_string();
    assert!(
        e.contains("cannot reshape array of size 20 into shape (3,7)"),
        "{e}"
    );
    // An unknown extent that does not divide the size: NumPy's `newaxis`.
    let e = a.reshape(&[3, -1]).check().unwrap_err().to_string();
    assert!(
        e.contains("cannot reshape array of size 20 into shape (3,newaxis)"),
        "{e}"
    );
    let e = a.reshape(&[-1, 2, -1]).check().unwrap_err().to_string();
    assert!(e.contains("can only specify one unknown dimension"), "{e}");
    let e = a.reshape(&[7]).check().unwrap_err().to_string();
    assert!(
        e.contains("cannot reshape array of size 20 into shape (7,)"),
        "{e}"
    );
    let e = a.sum_axis(2).check().unwrap_err().to_string();
    assert!(
        e.contains("axis 2 is out of bounds for array of dimension 2"),
        "{e}"
    );
    assert_eq!((&a + 1.0).sum().item().unwrap(), 20.0);
}

/// An in-place operator on a view whose operand does not broadcast to it fails, as NumPy's
/// raises; the failure is never dropped: the view, its root and the root's other views all
/// return it at their next read, an unrelated array reads as before, and writing the whole
/// root again clears it. For every in-place operator, with one piece and with three.
#[test]
fn a_failed_in_place_operator_on_a_view_poisons_what_it_would_write() {
    type Update = fn(&mut Array, &Array);
    let updates: [(&str, Update); 5] = [
        ("+=", |v, r| *v += r),
        ("-=", |v, r| *v -= r),
        ("*=", |v, r| *v *= r),
        ("/=", |v, r| *v /= r),
        ("%=", |v, r| *v %= r),
    ];
    for pieces in [1, 3] {
        let np = weft_tests::numeric(pieces);
        for (name, update) in updates {
            let root = np.arange(0.0, 12.0, 1.0, DType::F64).reshape(&[3, 4]);
            let other = root.slice(&[Range::new(2, 3), Range::all()]);
            let unrelated = np.ones(&[4], DType::F64);
            let mut view = root.slice(&[Range::new(0, 2), Range::all()]);
            let wrong = np.ones(&[3, 4], DType::F64);
            update(&mut view, &wrong);
            for (what, array) in [
                ("the view", &view),
                ("its root", &root),
                ("a sibling", &other),
            ] {
                let e = array
                    .to_vec()
                    .expect_err(&format!("{name}, {pieces} pieces: {what} reads an error"));
                assert!(
                    e.to_string().contains("could not be broadcast"),
                    "{name}, {pieces} pieces, {what}: {e}"
                );
            }
            assert_eq!(unrelated.to_vec().expect("unrelated"), vec![1.0; 4]);
            root.assign(2.0).expect("the whole root written again");
            assert_eq!(root.to_vec().expect("cured"), vec![2.0; 12], "{name}");
        }
    }
}
