//! `sort`, `argsort` and `unique` against plain-Rust sorts written out (NaN last, equal
//! elements in their order), along every axis, in every dtype, and NumPy's axis errors.

use weft::Ix;
use weft_ir::DType;

/// NumPy's order: NaN after every number.
fn before(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => a.partial_cmp(&b).expect("numbers"),
    }
}

/// A stable argsort by insertion, written out.
fn reference_argsort(line: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = Vec::new();
    for i in 0..line.len() {
        let at = idx
            .iter()
            .position(|&j| before(line[i], line[j]) == std::cmp::Ordering::Less)
            .unwrap_or(idx.len());
        idx.insert(at, i);
    }
    idx
}

/// Values with ties, a NaN, and both zeros.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut v: Vec<f64> = weft_tests::uniform_data(n, seed, -4.0, 4.0)
        .into_iter()
        .map(|x| (x * 2.0).round() / 2.0)
        .collect();
    if n > 3 {
        v[1] = f64::NAN;
        v[2] = -0.0;
        v[3] = 0.0;
    }
    v
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn sort_and_argsort_follow_numpys_order_along_each_axis() {
    let np = weft_tests::numeric(2);
    let (r, c) = (5usize, 37usize);
    let v = values(r * c, 3);
    let a = np.from_vec(&[r as u64, c as u64], &v);
    // Along the last axis (NumPy's default).
    let order = a.argsort(Some(-1)).expect("argsorts");
    assert_eq!(order.dtype().expect("a dtype"), DType::I64);
    let got = order.to_vec().expect("reads");
    let sorted = a.sort(Some(-1)).expect("sorts").to_vec().expect("reads");
    for row in 0..r {
        let line = &v[row * c..(row + 1) * c];
        let want = reference_argsort(line);
        let got_row: Vec<usize> = got[row * c..(row + 1) * c]
            .iter()
            .map(|&x| x as usize)
            .collect();
        assert_eq!(got_row, want, "argsort of row {row}");
        let want_values: Vec<f64> = want.iter().map(|&i| line[i]).collect();
        assert!(
            same(&sorted[row * c..(row + 1) * c], &want_values),
            "sort of row {row}"
        );
    }
    // Along the first axis: each column.
    let by_column = a.sort(Some(0)).expect("sorts").to_vec().expect("reads");
    let order0 = a
        .argsort(Some(0))
        .expect("argsorts")
        .to_vec()
        .expect("reads");
    for col in 0..c {
        let line: Vec<f64> = (0..r).map(|i| v[i * c + col]).collect();
        let want = reference_argsort(&line);
        for (i, &w) in want.iter().enumerate() {
            assert_eq!(order0[i * c + col] as usize, w, "argsort of column {col}");
            assert!(same(&[by_column[i * c + col]], &[line[w]]), "column {col}");
        }
    }
    // Flattened.
    let flat = a.sort(None).expect("sorts");
    assert_eq!(flat.shape().expect("a shape"), vec![(r * c) as u64]);
    let want: Vec<f64> = reference_argsort(&v).into_iter().map(|i| v[i]).collect();
    assert!(same(&flat.to_vec().expect("reads"), &want), "flattened");
    // A middle axis of three, and a view.
    let cube = np.from_vec(&[3, 4, 5], &values(60, 4));
    let mid = cube.sort(Some(1)).expect("sorts");
    assert_eq!(mid.shape().expect("a shape"), vec![3, 4, 5]);
    let got = mid.to_vec().expect("reads");
    let src = values(60, 4);
    for i in 0..3 {
        for k in 0..5 {
            let line: Vec<f64> = (0..4).map(|j| src[i * 20 + j * 5 + k]).collect();
            let want: Vec<f64> = reference_argsort(&line)
                .into_iter()
                .map(|x| line[x])
                .collect();
            let line_got: Vec<f64> = (0..4).map(|j| got[i * 20 + j * 5 + k]).collect();
            assert!(same(&line_got, &want), "cube[{i}, :, {k}]");
        }
    }
    let row = a.index(&[Ix::At(2)]).sort(Some(-1)).expect("a view sorts");
    let want: Vec<f64> = reference_argsort(&v[2 * c..3 * c])
        .into_iter()
        .map(|i| v[2 * c + i])
        .collect();
    assert!(same(&row.to_vec().expect("reads"), &want), "a row view");
}

#[test]
fn integers_and_bools_sort_exactly_and_unique_collapses_ties() {
    let np = weft_tests::numeric(2);
    let big = [i64::MAX, -3, 7, i64::MIN, 7, 0, -3];
    let a = np.from_slice(&[7], &big);
    let sorted = a
        .sort(Some(-1))
        .expect("sorts")
        .to_vec_of::<i64>()
        .expect("reads");
    let mut want = big.to_vec();
    want.sort();
    assert_eq!(sorted, want);
    assert_eq!(
        a.argsort(None)
            .expect("argsorts")
            .to_vec_of::<i64>()
            .expect("reads"),
        vec![3, 1, 6, 5, 2, 4, 0],
        "ties keep their order"
    );
    let u = a
        .unique()
        .expect("unique")
        .to_vec_of::<i64>()
        .expect("reads");
    assert_eq!(u, vec![i64::MIN, -3, 0, 7, i64::MAX]);
    let small = np.from_slice(&[2, 3], &[5i32, -1, 5, 2, 2, -8]);
    assert_eq!(
        small
            .unique()
            .expect("unique")
            .to_vec_of::<i32>()
            .expect("reads"),
        vec![-8, -1, 2, 5]
    );
    let flags = np.from_slice(&[4], &[true, false, true, false]);
    assert_eq!(
        flags
            .sort(Some(0))
            .expect("sorts")
            .to_vec_of::<bool>()
            .expect("reads"),
        vec![false, false, true, true]
    );
    // Floats: NaNs count as one, last; -0.0 and 0.0 are one value.
    let f = np.from_vec(&[6], &[2.0, f64::NAN, -0.0, 0.0, f64::NAN, -1.5]);
    let u = f.unique().expect("unique").to_vec().expect("reads");
    assert_eq!(u.len(), 4, "{u:?}");
    assert_eq!(&u[..3], &[-1.5, -0.0, 2.0]);
    assert!(u[3].is_nan());
    let single = np.from_slice(&[], &[3.5f32]);
    assert_eq!(
        single.unique().expect("unique").to_vec().expect("reads"),
        vec![3.5]
    );
}

#[test]
fn bad_axes_are_numpys_errors() {
    let np = weft_tests::numeric(2);
    let a = np.from_vec(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let e = a.sort(Some(2)).expect_err("axis 2 of a matrix");
    assert!(e.to_string().contains("out of bounds"), "{e}");
    let e = np
        .from_vec(&[], &[1.0])
        .argsort(Some(0))
        .expect_err("a 0-d array has no axis");
    assert!(e.to_string().contains("dimension 0"), "{e}");
}
