//! Searching, masks, integer indexing, running sums, joining and stacked products against
//! NumPy itself, with the harness of `numpy_views` (one piece and three), plus their errors
//! and the normal generator's independence of the partitioning.

use weft::{Array, Ix, Range};
use weft_ir::DType;

use crate::numpy_views::{Case, Inputs, all, check_against_numpy, numeric_in_pieces, s};

fn ints(x: &Inputs, values: &[f64], shape: &[u64]) -> Array {
    x.m.numeric().from_f64s(shape, values, DType::I64)
}

fn ok(r: weft::Result<Array>) -> Array {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// A 3 x 4 matrix with ties, NaNs first and later in a row, and a column of NaN after numbers.
fn ties_and_nans(x: &Inputs) -> Array {
    let nan = f64::NAN;
    let values = [
        2.0, 1.0, 1.0, 5.0, nan, 0.0, nan, -1.0, 3.0, nan, -1.0, -1.0,
    ];
    x.m.numeric().from_vec(&[3, 4], &values)
}

/// `X = a.copy(); X[m] = f(X[m]); r = X`, through [`Array::assign_masked`].
fn update_masked(a: &Array, m: &Array, f: impl Fn(Array) -> Array) -> Array {
    let out = a.copy();
    let values = f(ok(out.masked(m)));
    out.assign_masked(m, &values)
        .map(|()| out)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn cases() -> Vec<Case> {
    vec![
        ("np.argmax(M)", |x| x.m.argmax(None)),
        ("np.argmin(M.T)", |x| x.m.t().argmin(None)),
        ("np.argmax(A, axis=1)", |x| x.a.argmax(Some(1))),
        ("np.argmin(B, axis=0)", |x| x.b.argmin(Some(0))),
        ("np.argmax(B % 2.0 == 0.0, axis=1)", |x| {
            // B is integral: B % 2 == 0 where B - 2 * trunc(B / 2) == 0.
            let half = (&x.b / 2.0).astype(DType::I64).astype(DType::F64);
            (&x.b - half * 2.0).eq(0.0).argmax(Some(1))
        }),
        ("np.argmax(np.array([1.0, np.nan, 3.0, np.nan]))", |x| {
            x.m.numeric()
                .from_vec(&[4], &[1.0, f64::NAN, 3.0, f64::NAN])
                .argmax(None)
        }),
        ("np.argmin(I, axis=-1)", |x| x.i.argmin(Some(-1))),
        ("np.argmin(np.sin(A), axis=1)", |x| {
            x.a.sin().argmin(Some(1))
        }),
        (
            "np.argmin(np.array([[2.0, 1.0, 1.0, 5.0], [np.nan, 0.0, np.nan, -1.0], \
             [3.0, np.nan, -1.0, -1.0]]), axis=1)",
            |x| ties_and_nans(x).argmin(Some(1)),
        ),
        (
            "np.argmax(np.array([[2.0, 1.0, 1.0, 5.0], [np.nan, 0.0, np.nan, -1.0], \
             [3.0, np.nan, -1.0, -1.0]]), axis=0)",
            |x| ties_and_nans(x).argmax(Some(0)),
        ),
        ("np.any(M > 2.0, axis=0)", |x| {
            x.m.gt(2.0).any(Some(&[0]), false)
        }),
        ("np.all(M > -3.5)", |x| x.m.gt(-3.5).all(None, false)),
        ("np.all(A, axis=(0, 2), keepdims=True)", |x| {
            x.a.all(Some(&[0, 2]), true)
        }),
        ("np.any(E, axis=1)", |x| x.e.any(Some(&[1]), false)),
        ("np.all(E, axis=0)", |x| x.e.all(Some(&[0]), false)),
        ("np.cumsum(A, axis=1)", |x| x.a.cumsum(Some(1))),
        ("np.cumsum(M)", |x| x.m.cumsum(None)),
        ("np.cumsum(I, axis=0)", |x| x.i.cumsum(Some(0))),
        ("np.cumsum(M[::-1, ::2], axis=-1)", |x| {
            x.m.index(&[
                Ix::Slice(Range::all().step(-1)),
                Ix::Slice(Range::all().step(2)),
            ])
            .cumsum(Some(-1))
        }),
        ("np.cumsum(v)", |x| x.v.cumsum(Some(0))),
        ("np.cumsum(B, axis=0)", |x| x.b.cumsum(Some(0))),
        ("np.cumsum(E, axis=0)", |x| x.e.cumsum(Some(0))),
        ("np.take(M, np.array([4, 0, -1]), axis=0)", |x| {
            x.m.take(&ints(x, &[4.0, 0.0, -1.0], &[3]), Some(0))
        }),
        ("np.take(A, np.array([[3, 0], [1, 1]]), axis=2)", |x| {
            x.a.take(&ints(x, &[3.0, 0.0, 1.0, 1.0], &[2, 2]), Some(2))
        }),
        ("np.take(M, np.array([29, 0, 7]))", |x| {
            x.m.take(&ints(x, &[29.0, 0.0, 7.0], &[3]), None)
        }),
        (
            "np.take(M.T, np.array([1, 2], dtype=np.int32), axis=1)",
            |x| {
                let idx = x.m.numeric().from_f64s(&[2], &[1.0, 2.0], DType::I32);
                x.m.t().take(&idx, Some(1))
            },
        ),
        ("M[M > 1.0]", |x| ok(x.m.masked(&x.m.gt(1.0)))),
        ("np.sum(M[M > 1.0])", |x| ok(x.m.masked(&x.m.gt(1.0))).sum()),
        ("np.prod(M[M > 1.0])", |x| {
            ok(x.m.masked(&x.m.gt(1.0))).prod()
        }),
        ("np.mean(A[A < 0.0])", |x| {
            ok(x.a.masked(&x.a.lt(0.0))).mean()
        }),
        ("np.mean(F[F > 0.7])", |x| {
            ok(x.f.masked(&x.f.gt(0.7))).mean()
        }),
        ("np.sum(F[F > 0.7])", |x| ok(x.f.masked(&x.f.gt(0.7))).sum()),
        ("np.mean(I[I != 2])", |x| {
            ok(x.i.masked(&x.i.ne(2.0))).mean()
        }),
        ("np.sum(I[I != 2])", |x| ok(x.i.masked(&x.i.ne(2.0))).sum()),
        ("np.sum(I)", |x| x.i.sum()),
        ("np.prod(I, axis=1)", |x| {
            x.i.reduce_axes(weft::numeric::Reduction::Prod, Some(&[1]), false)
        }),
        ("np.cumsum(I)", |x| x.i.cumsum(None)),
        ("np.sum(M > 0.0, axis=0)", |x| {
            x.m.gt(0.0)
                .reduce_axes(weft::numeric::Reduction::Sum, Some(&[0]), false)
        }),
        ("np.sum((M > 0.0)[M < 1.0])", |x| {
            ok(x.m.gt(0.0).masked(&x.m.lt(1.0))).sum()
        }),
        ("np.mean(I.astype(np.uint8)[I > 0])", |x| {
            ok(x.i.astype(DType::U8).masked(&x.i.gt(0.0))).mean()
        }),
        ("np.sum(I.astype(np.uint16)[I > 0])", |x| {
            ok(x.i.astype(DType::U16).masked(&x.i.gt(0.0))).sum()
        }),
        ("A[:, 1][A[:, 1] < -1.0]", |x| {
            let col = x.a.index(&[all(), Ix::At(1)]);
            ok(col.masked(&col.lt(-1.0)))
        }),
        ("np.nonzero(M > 1.0)[1]", |x| {
            x.m.gt(1.0)
                .nonzero()
                .map(|mut p| p.swap_remove(1))
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("np.nonzero(v)[0]", |x| {
            x.v.nonzero()
                .map(|mut p| p.swap_remove(0))
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("np.flatnonzero(A > 0.5)", |x| x.a.gt(0.5).flatnonzero()),
        ("np.flatnonzero(I)", |x| x.i.flatnonzero()),
        ("np.nonzero(A > 0.0)[0]", |x| {
            ok(x.a.gt(0.0).nonzero().map(|mut p| p.swap_remove(0)))
        }),
        ("np.nonzero(A > 0.0)[2]", |x| {
            ok(x.a.gt(0.0).nonzero().map(|mut p| p.swap_remove(2)))
        }),
        ("np.nonzero(M > 100.0)[1]", |x| {
            ok(x.m.gt(100.0).nonzero().map(|mut p| p.swap_remove(1)))
        }),
        (
            "X = M.copy(); X[X > 1.0] = np.sqrt(X[X > 1.0]); r = X",
            |x| update_masked(&x.m, &x.m.gt(1.0), |v| v.sqrt()),
        ),
        (
            "X = A.copy(); m = A < 0.0; X[m] = X[m] * 2.0 + 1.0; r = X",
            |x| update_masked(&x.a, &x.a.lt(0.0), |v| v * 2.0 + 1.0),
        ),
        (
            "X = M.copy(); X[M > 100.0] = X[M > 100.0] * 2.0; r = X",
            |x| update_masked(&x.m, &x.m.gt(100.0), |v| v * 2.0),
        ),
        ("X = M.copy(); X[X > 1.0] = 0.5; r = X", |x| {
            let out = x.m.copy();
            out.assign_where(&out.gt(1.0), 0.5)
                .map(|()| out)
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("X = M.copy(); np.copyto(X, v, where=M < 0.0); r = X", |x| {
            let out = x.m.copy();
            out.assign_where(&x.m.lt(0.0), &x.v)
                .map(|()| out)
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        ("np.concatenate([M, M[:2]], axis=0)", |x| {
            let top = x.m.index(&[s(0, 2)]);
            x.m.numeric().concatenate(&[&x.m, &top], 0)
        }),
        ("np.concatenate([A, A[:, :1]], axis=1)", |x| {
            let first = x.a.index(&[all(), s(0, 1)]);
            x.a.numeric().concatenate(&[&x.a, &first], 1)
        }),
        ("np.concatenate([I, F], axis=-1)", |x| {
            x.i.numeric().concatenate(&[&x.i, &x.f], -1)
        }),
        ("np.stack([v, v * 2.0])", |x| {
            let twice = &x.v * 2.0;
            x.v.numeric().stack(&[&x.v, &twice], 0)
        }),
        ("np.stack([M, M], axis=2)", |x| {
            x.m.numeric().stack(&[&x.m, &x.m], 2)
        }),
        ("np.tensordot(A, M[:4, :3], axes=([2], [0]))", |x| {
            x.a.tensordot(&x.m.index(&[s(0, 4), s(0, 3)]), (2, 0))
        }),
        ("np.tensordot(M[:3], A, axes=([0], [1]))", |x| {
            x.m.index(&[s(0, 3)]).tensordot(&x.a, (0, 1))
        }),
        ("A @ M[:4, :2]", |x| {
            x.a.matmul(&x.m.index(&[s(0, 4), s(0, 2)]))
        }),
        ("A @ v[:4]", |x| x.a.matmul(&x.v.index(&[s(0, 4)]))),
        ("v[:3] @ A", |x| x.v.index(&[s(0, 3)]).matmul(&x.a)),
        ("M[:3, :2] @ A[:, :2, :]", |x| {
            x.m.index(&[s(0, 3), s(0, 2)])
                .matmul(&x.a.index(&[all(), s(0, 2)]))
        }),
        ("A.transpose(0, 2, 1) @ M[:3, :2]", |x| {
            x.a.permute(&[0, 2, 1])
                .matmul(&x.m.index(&[s(0, 3), s(0, 2)]))
        }),
        ("A[:, 1:, :] @ M[:4, ::2]", |x| {
            x.a.index(&[all(), s(1, 3)])
                .matmul(&x.m.index(&[s(0, 4), Ix::Slice(Range::all().step(2))]))
        }),
        ("A.transpose(0, 2, 1) @ A", |x| {
            x.a.permute(&[0, 2, 1]).matmul(&x.a)
        }),
    ]
}

#[test]
fn searching_indexing_joining_and_stacked_products_match_numpy() {
    check_against_numpy(&cases());
}

#[test]
fn errors_name_the_operation_and_the_problem() {
    let np = weft_tests::numeric(1);
    let m = np.zeros(&[3, 4], DType::F64);
    let e = m.argmax(Some(2)).check().unwrap_err().to_string();
    assert!(
        e.contains("axis 2 is out of bounds for array of dimension 2"),
        "{e}"
    );
    let empty = np.zeros(&[0], DType::F64);
    let e = empty.argmin(None).check().unwrap_err().to_string();
    assert!(
        e.contains("attempt to get argmin of an empty sequence"),
        "{e}"
    );
    let e = np
        .concatenate(&[&m, &np.zeros(&[3, 5], DType::F64)], 0)
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "along dimension 1, the array at index 0 has size 4 and the array at index 1 has size 5"
        ),
        "{e}"
    );
    let e = np.stack(&[&m, &m.t()], 0).check().unwrap_err().to_string();
    assert!(
        e.contains("all input arrays must have the same shape"),
        "{e}"
    );
    let e = m.tensordot(&m, (0, 0)).check();
    assert!(e.is_ok(), "(3,4) with (3,4) over axis 0 is fine");
    let e = m.tensordot(&m, (1, 0)).check().unwrap_err().to_string();
    assert!(e.contains("shape-mismatch for sum"), "{e}");
    let floats = np.zeros(&[2], DType::F64);
    let e = m.take(&floats, Some(0)).check().unwrap_err().to_string();
    assert!(e.contains("take") && e.contains("integer type"), "{e}");
    let e = m
        .matmul(&np.zeros(&[2, 5, 3], DType::F64))
        .check()
        .unwrap_err()
        .to_string();
    assert!(e.contains("mismatch in its core dimension"), "{e}");
    // Two matrices and a matrix and a vector, as NumPy's `@` words it.
    for other in [np.zeros(&[5, 2], DType::F64), np.zeros(&[5], DType::F64)] {
        let e = m.matmul(&other).check().unwrap_err().to_string();
        assert!(
            e.contains(
                "Input operand 1 has a mismatch in its core dimension 0, with gufunc \
                 signature (n?,k),(k,m?)->(n?,m?) (size 5 is different from 4)"
            ),
            "{e}"
        );
    }
    // An assignment whose shapes do not broadcast at all, as NumPy words it.
    let e = m
        .index(&[Ix::Slice(Range::new(0, 2))])
        .assign(&np.zeros(&[4, 3], DType::F64))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("could not broadcast input array from shape (4,3) into shape (2,4)"),
        "{e}"
    );
    let e = m
        .masked(&np.zeros(&[3], DType::Bool))
        .unwrap_err()
        .to_string();
    assert!(e.contains("boolean index did not match"), "{e}");
    // Compressed values of the wrong length, as NumPy words it; the array is untouched.
    let e = m
        .assign_masked(&m.eq(0.0), &np.ones(&[3], DType::F64))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cannot assign 3 input values to the 12 output values"),
        "{e}"
    );
    // A position out of range is an error when the gather runs, and nothing breaks.
    let idx = np.from_f64s(&[2], &[1.0, 7.0], DType::I64);
    let gathered = np.arange(0.0, 5.0, 1.0, DType::F64).take(&idx, None);
    assert!(gathered.to_vec().is_err(), "position 7 of 5 elements");
    assert_eq!((&m + 1.0).sum().item().unwrap(), 12.0);
}

#[test]
fn normal_numbers_do_not_depend_on_the_partitioning_and_are_normal() {
    let n = 200_000u64;
    let mut runs = Vec::new();
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        let z = np
            .random_normal(&[n], 1.5, 2.0, 7, DType::F64)
            .to_vec()
            .unwrap();
        let (u1, u2) = np.random_normal_sources(&[n], 7, DType::F64);
        let (u1, u2) = (u1.to_vec().unwrap(), u2.to_vec().unwrap());
        // Box-Muller recomputed on the host from the same uniforms.
        for k in (0..n as usize).step_by(997) {
            let want = 1.5
                + 2.0
                    * (-2.0 * (1.0 - u1[k]).ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * u2[k]).cos();
            assert!((z[k] - want).abs() < 1e-9 * want.abs().max(1.0), "z[{k}]");
        }
        let f32s = np.random_normal(&[1000], 0.0, 1.0, 7, DType::F32);
        assert_eq!(f32s.dtype().unwrap(), DType::F32);
        runs.push(z);
    }
    assert_eq!(runs[0], runs[1], "one piece and three give the same bits");
    let z = &runs[0];
    let mean = z.iter().sum::<f64>() / n as f64;
    let var = z.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    assert!((mean - 1.5).abs() < 0.02, "mean {mean}");
    assert!((var.sqrt() - 2.0).abs() < 0.02, "std {}", var.sqrt());
    // About 68.3% within one standard deviation.
    let inside = z.iter().filter(|v| (*v - 1.5).abs() < 2.0).count() as f64 / n as f64;
    assert!((inside - 0.6827).abs() < 0.01, "{inside}");
}

#[test]
fn errors_name_the_applications_source_line() {
    let np = weft_tests::numeric(1);
    let a = np.zeros(&[10, 2], DType::F64);
    let b = np.zeros(&[8], DType::F64);
    let here = |line: u32| format!("{}:{line}:", file!());

    // An operation that fails at once: the error names the line of the operator.
    let line = line!() + 1;
    let sum = &a + &b;
    let e = sum.check().unwrap_err().to_string();
    assert!(e.contains("could not be broadcast together"), "{e}");
    assert!(e.contains(&here(line)), "{e}");
    // An array poisoned by it passes the same error (and line) on.
    let e = (sum * 2.0).to_vec().unwrap_err().to_string();
    assert!(e.contains(&here(line)), "{e}");

    // A composed operation names the application's line, not the facade's.
    let line = line!() + 1;
    let joined = np.concatenate(&[&a, &b], 0);
    let e = joined.check().unwrap_err().to_string();
    assert!(e.contains(&here(line)), "{e}");

    // An error that surfaces later, at a read, names the call that asked for the work.
    let idx = np.from_f64s(&[2], &[1.0, 7.0], DType::I64);
    let source = np.arange(0.0, 5.0, 1.0, DType::F64);
    let line = line!() + 1;
    let gathered = source.take(&idx, None);
    let doubled = &gathered * 2.0;
    let e = doubled.to_vec().unwrap_err().to_string();
    // (The gather may run fused with its neighbours; the error lists every call's line.)
    let sites = e.split("(from the call at ").nth(1).unwrap_or_default();
    assert!(sites.contains(&here(line)), "{e}");

    // The host keeps working, and later errors name their own lines.
    assert_eq!((&a + 1.0).sum().item().unwrap(), 20.0);
    let line = line!() + 1;
    let e = a.sum_axis(5).check().unwrap_err().to_string();
    assert!(e.contains(&here(line)), "{e}");
}

/// `a[mask]`, `flatnonzero`, `nonzero` and `a[m] = f(a[m])` run on the back end: of all the
/// bytes they touch, only each count (8 bytes) is read out of a store, on one piece or three,
/// and `a[m] = f(a[m])` reads none (it never compresses); the results equal positions computed
/// here.
#[test]
fn masks_and_positions_are_found_on_the_back_end() {
    let n = 100_000u64;
    let want: Vec<f64> = (0..n).filter(|p| p % 7 == 0).map(|p| p as f64).collect();
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        let read = || np.runtime(|rt| rt.stats().bytes_read);
        let x = np.arange(0.0, n as f64, 1.0, DType::F64);
        let mask = (&x % 7.0).eq(0.0);
        mask.check().unwrap_or_else(|e| panic!("{e}"));
        let before = read();
        let picked = ok(x.masked(&mask));
        let flat = mask.flatnonzero();
        let coords = mask
            .reshape(&[100, 1000])
            .nonzero()
            .unwrap_or_else(|e| panic!("{e}"));
        let twice = ok(x.masked(&mask)) * 2.0;
        x.assign_masked(&mask, &twice)
            .unwrap_or_else(|e| panic!("{e}"));
        for a in [&picked, &flat, &coords[0], &coords[1]] {
            assert_eq!(a.shape().unwrap(), [want.len() as u64], "{pieces} pieces");
        }
        x.check().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read() - before,
            3 * 8,
            "{pieces} pieces: only the counts of `x[mask]`, `flatnonzero` and `nonzero`"
        );
        assert_eq!(picked.to_vec().unwrap(), want, "{pieces} pieces: a[mask]");
        assert_eq!(flat.to_vec().unwrap(), want, "{pieces} pieces: flatnonzero");
        let rows: Vec<f64> = want.iter().map(|p| (p / 1000.0).floor()).collect();
        let cols: Vec<f64> = want.iter().map(|p| p % 1000.0).collect();
        assert_eq!(coords[0].to_vec().unwrap(), rows, "{pieces} pieces: rows");
        assert_eq!(
            coords[1].to_vec().unwrap(),
            cols,
            "{pieces} pieces: columns"
        );
        let updated: Vec<f64> = (0..n)
            .map(|p| if p % 7 == 0 { 2.0 * p as f64 } else { p as f64 })
            .collect();
        assert_eq!(
            x.to_vec().unwrap(),
            updated,
            "{pieces} pieces: a[m] = 2 a[m]"
        );
    }
}

/// A mask's positions are kept for the next compression through it, and found again once
/// anything writes the mask: an assignment to it, to a view of it, or a step of
/// `Numeric::repeat`.
#[test]
fn a_masks_positions_follow_its_changes() {
    let np = numeric_in_pieces(1);
    let read = || np.runtime(|rt| rt.stats().bytes_read);
    let x = np.arange(0.0, 20.0, 1.0, DType::F64);
    let y = &x * 10.0;
    let mask = x.lt(5.0);
    let first = |v: &Array| ok(v.masked(&mask)).to_vec().unwrap();
    assert_eq!(first(&x), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    let before = read();
    let again = ok(y.masked(&mask));
    again.check().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        read(),
        before,
        "an unchanged mask's count is not read again"
    );
    assert_eq!(again.to_vec().unwrap(), vec![0.0, 10.0, 20.0, 30.0, 40.0]);
    mask.assign(&x.ge(17.0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first(&x), vec![17.0, 18.0, 19.0], "after an assignment");
    mask.index(&[Ix::Slice(Range::new(0, 2))])
        .assign(&np.ones(&[2], DType::Bool))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        first(&x),
        vec![0.0, 1.0, 17.0, 18.0, 19.0],
        "after a view's assignment"
    );
    np.repeat(3, |_| mask.assign(&mask.logical_not()))
        .unwrap_or_else(|e| panic!("{e}"));
    let flipped: Vec<f64> = (2..17).map(f64::from).collect();
    assert_eq!(first(&x), flipped, "after repeated steps");
    // Another mask with the same elements: its own positions.
    let other = x.lt(3.0);
    other.assign(&x.gt(18.0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok(y.masked(&other)).to_vec().unwrap(), vec![190.0]);
}

/// `a[m]` is compressed late (`numeric/compressed.rs`): what it selected and the values it
/// took are those of when it was asked for, whatever is written to the array or the mask
/// after; an assignment back through a mask written since takes the compressed values in
/// order, as NumPy does; compressions through different masks, or beside ordinary arrays,
/// combine as compressed arrays.
#[test]
fn late_compressions_keep_what_they_selected() {
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        let x = np.arange(0.0, 20.0, 1.0, DType::F64);
        let m = x.lt(5.0);
        let picked = ok(x.masked(&m));
        let doubled = ok(x.masked(&m)) * 2.0;
        let as_ints = ok(x.masked(&m)).astype(DType::I64);
        x.assign(&(&x * 100.0)).unwrap_or_else(|e| panic!("{e}"));
        m.assign(&x.ge(0.0)).unwrap_or_else(|e| panic!("{e}"));
        let first: Vec<f64> = (0..5).map(f64::from).collect();
        assert_eq!(
            picked.to_vec().unwrap(),
            first,
            "{pieces}: x[m] before both writes"
        );
        assert_eq!(as_ints.dtype().unwrap(), DType::I64);
        assert_eq!(as_ints.shape().unwrap(), [5]);
        let twice: Vec<f64> = first.iter().map(|v| v * 2.0).collect();
        assert_eq!(doubled.to_vec().unwrap(), twice, "{pieces}: x[m] * 2");

        // z[m] = f(z[m]) where m changed in between: the values go, in order, to the new
        // mask's positions (NumPy's semantics), not f of the elements the new mask selects.
        let z = np.arange(0.0, 20.0, 1.0, DType::F64);
        let mask = z.lt(5.0);
        let values = ok(z.masked(&mask)) * 2.0 + 1.0;
        mask.assign(&z.ge(15.0)).unwrap_or_else(|e| panic!("{e}"));
        z.assign_masked(&mask, &values)
            .unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<f64> = (0..20)
            .map(|p| {
                if p >= 15 {
                    2.0 * f64::from(p - 15) + 1.0
                } else {
                    f64::from(p)
                }
            })
            .collect();
        assert_eq!(
            z.to_vec().unwrap(),
            want,
            "{pieces}: assigned through a new mask"
        );
        // ... and with a count that no longer matches, NumPy's error; the array is untouched.
        let w = np.arange(0.0, 20.0, 1.0, DType::F64);
        let fewer = ok(w.masked(&w.lt(3.0)));
        let e = w.assign_masked(&w.lt(4.0), &fewer).unwrap_err().to_string();
        assert!(
            e.contains("cannot assign 3 input values to the 4 output"),
            "{e}"
        );
        let kept: Vec<f64> = (0..20).map(f64::from).collect();
        assert_eq!(
            w.to_vec().unwrap(),
            kept,
            "{pieces}: untouched after the error"
        );

        // Two masks with the same count, and a compressed array beside an ordinary one.
        let y = np.arange(0.0, 20.0, 1.0, DType::F64);
        let low = ok(y.masked(&y.lt(4.0)));
        let high = ok(y.masked(&y.ge(16.0)));
        let sum = &low + &high;
        assert_eq!(
            sum.to_vec().unwrap(),
            vec![16.0, 18.0, 20.0, 22.0],
            "{pieces}"
        );
        let plus = &low + &np.from_vec(&[4], &[10.0, 20.0, 30.0, 40.0]);
        assert_eq!(
            plus.to_vec().unwrap(),
            vec![10.0, 21.0, 32.0, 43.0],
            "{pieces}"
        );
        let chosen = low.gt(1.5).select(&low, -1.0);
        assert_eq!(
            chosen.to_vec().unwrap(),
            vec![-1.0, -1.0, 2.0, 3.0],
            "{pieces}"
        );
        let e = (&low + &ok(y.masked(&y.lt(3.0))))
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("(4,)") && e.contains("(3,)"), "{e}");

        // Sums, products and means reduce without compressing, as compressed ones do; an
        // empty mask's mean is NaN, as NumPy's.
        let before = np.runtime(|rt| rt.stats().bytes_read);
        let late = ok(y.masked(&y.gt(12.5)));
        let (sum, prod, mean) = (late.sum(), late.prod(), late.mean());
        let empty = ok(y.masked(&y.lt(-1.0))).mean();
        for r in [&sum, &prod, &mean, &empty] {
            r.check().unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(
            np.runtime(|rt| rt.stats().bytes_read),
            before,
            "{pieces}: no count"
        );
        let kept: Vec<f64> = (13..20).map(f64::from).collect();
        assert_eq!(sum.item().unwrap(), kept.iter().sum::<f64>(), "{pieces}");
        assert_eq!(
            prod.item().unwrap(),
            kept.iter().product::<f64>(),
            "{pieces}"
        );
        assert_eq!(mean.item().unwrap(), 16.0, "{pieces}");
        assert!(empty.item().unwrap().is_nan(), "{pieces}: mean of nothing");

        // The elements a masked assignment leaves out keep their bits: an `int64` past 2^53
        // given `float64` values, a float scalar truncated into integers (NumPy's casts).
        let wide = np.from_slice(&[3], &[(1i64 << 53) + 1, 2, -(1i64 << 60) - 3]);
        let pick = np.from_slice(&[3], &[false, true, false]);
        let halves = ok(wide.masked(&pick)) * 0.5;
        wide.assign_masked(&pick, &halves)
            .unwrap_or_else(|e| panic!("{e}"));
        let kept = [(1i64 << 53) + 1, 1, -(1i64 << 60) - 3];
        assert_eq!(wide.to_vec_of::<i64>().unwrap(), kept, "{pieces}");
        wide.assign_where(&pick, 2.7)
            .unwrap_or_else(|e| panic!("{e}"));
        let kept = [(1i64 << 53) + 1, 2, -(1i64 << 60) - 3];
        assert_eq!(wide.to_vec_of::<i64>().unwrap(), kept, "{pieces}");

        // Once compressed, a small compression of a large array holds nothing of it.
        let big = np.arange(0.0, 1e6, 1.0, DType::F64);
        let few = ok(big.masked(&big.lt(10.0)));
        assert_eq!(few.shape().unwrap(), [10], "{pieces}");
        drop(big);
        np.runtime(|rt| rt.flush())
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, bytes) = np.runtime(|rt| rt.memory());
        assert!(
            bytes < 4_000_000,
            "{pieces}: {bytes} bytes held after compressing"
        );
        assert_eq!(
            few.to_vec().unwrap(),
            (0..10).map(f64::from).collect::<Vec<_>>()
        );

        // An error of a deferred operation names the application's line.
        let small = np.arange(0.0, 10.0, 1.0, DType::U8);
        let line = line!() + 1;
        let shifted = &ok(small.masked(&small.lt(5.0))) + (-1i64);
        let e = shifted.check().unwrap_err().to_string();
        assert!(e.contains("out of bounds for uint8"), "{e}");
        assert!(e.contains(&format!("{}:{line}:", file!())), "{e}");
    }
}

/// `flatnonzero` walks only the chunks of the mask that hold a true element: masks that are
/// empty, full, sparse (true every 997th element, or in one ring of positions), or true only
/// at the very first or very last element, at lengths around the chunk size and past many
/// chunks, give the positions computed here, with one piece and with three.
/// A named mask: whether position `p` of `n` is true.
type Pattern = (&'static str, fn(u64, u64) -> bool);

#[test]
fn sparse_masks_give_every_position() {
    let patterns: [Pattern; 6] = [
        ("none", |_, _| false),
        ("all", |_, _| true),
        ("every 997th", |p, _| p % 997 == 3),
        ("a ring", |p, _| (p * p) % 100_003 < 40),
        ("first", |p, _| p == 0),
        ("last", |p, n| p + 1 == n),
    ];
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        for n in [1u64, 63, 64, 65, 129, 4_097, 100_003] {
            for (name, pattern) in patterns {
                let bits: Vec<bool> = (0..n).map(|p| pattern(p, n)).collect();
                let want: Vec<i64> = (0..n as i64).filter(|&p| bits[p as usize]).collect();
                let mask = np.from_slice(&[n], &bits);
                let got = mask
                    .flatnonzero()
                    .to_vec_of::<i64>()
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(got, want, "{name}, n = {n}, {pieces} pieces");
            }
        }
    }
}

/// `take` with a position out of range fails when the gather runs, in NumPy's words (the
/// index the caller gave, the axis and its size), whichever code path ran the gather: one
/// element at a time, vector code over thousands, fused with its consumers, in one piece or
/// three. The host keeps running.
#[test]
fn take_out_of_range_says_what_numpy_says() {
    for pieces in [1, 3] {
        let np = numeric_in_pieces(pieces);
        let says = |got: weft::Result<Vec<f64>>, want: &str| {
            let e = got.expect_err(want).to_string();
            assert!(e.contains(want), "{pieces} pieces: {e}");
            assert!(e.contains("numeric.take"), "names the operation: {e}");
        };
        let five = np.arange(0.0, 5.0, 1.0, DType::F64);
        let idx = np.from_f64s(&[3], &[1.0, 7.0, 2.0], DType::I64);
        says(
            five.take(&idx, None).to_vec(),
            "index 7 is out of bounds for axis 0 with size 5",
        );
        // A negative position counts from the end; past `-5` it is named as given.
        let idx = np.from_f64s(&[3], &[-1.0, -7.0, 2.0], DType::I64);
        says(
            five.take(&idx, None).to_vec(),
            "index -7 is out of bounds for axis 0 with size 5",
        );
        let idx = np.from_f64s(&[2], &[-5.0, 4.0], DType::I64);
        assert_eq!(five.take(&idx, None).to_vec().unwrap(), vec![0.0, 4.0]);
        // Along the second axis of a matrix, with 32-bit positions.
        let m = np.arange(0.0, 12.0, 1.0, DType::F64).reshape(&[3, 4]);
        let idx = np.from_f64s(&[2], &[1.0, 4.0], DType::I32);
        says(
            m.take(&idx, Some(1)).to_vec(),
            "index 4 is out of bounds for axis 1 with size 4",
        );
        // Thousands of positions (vector code), the first bad one named, and the same
        // gather fused between an element-wise producer and a sum.
        let big = np.arange(0.0, 5000.0, 1.0, DType::F64);
        let idx = (&np.arange(0.0, 3000.0, 1.0, DType::F64) * 2.0).astype(DType::I64);
        let want = "index 5000 is out of bounds for axis 0 with size 5000";
        says(big.take(&idx, None).to_vec(), want);
        let fused = (&(&big + 1.0).take(&idx, None) * 2.0).sum();
        says(fused.to_vec(), want);
        // Nothing broke.
        assert_eq!((&big * 2.0).sum().item().unwrap(), 4999.0 * 5000.0);
    }
}
