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

/// Long lines: pairs of runs longer than a pass's chunk, whose points find their start by
/// halving the merge path; every dtype, one and two threads, against the standard library's
/// stable sort.
#[test]
fn long_lines_sort_stably_on_any_threads() {
    let n = 20_011usize;
    let mut v = values(n, 9);
    for i in (5..n).step_by(997) {
        v[i] = f64::NAN;
    }
    let mut want: Vec<usize> = (0..n).collect();
    want.sort_by(|&i, &j| before(v[i], v[j]));
    let want_values: Vec<f64> = want.iter().map(|&i| v[i]).collect();
    let ints: Vec<i64> = v
        .iter()
        .map(|x| if x.is_nan() { 9 } else { (x * 2.0) as i64 })
        .collect();
    let mut want_ints = ints.clone();
    want_ints.sort();
    for threads in [1, 2] {
        let np = weft_tests::numeric_with(weft::Config {
            threads,
            ..weft::Config::from_env()
        });
        let a = np.from_vec(&[n as u64], &v);
        let order = a.argsort(Some(0)).expect("argsorts");
        let got: Vec<usize> = order
            .to_vec_of::<i64>()
            .expect("reads")
            .into_iter()
            .map(|x| x as usize)
            .collect();
        assert_eq!(got, want, "argsort at {threads} threads");
        let sorted = a.sort(None).expect("sorts").to_vec().expect("reads");
        assert!(same(&sorted, &want_values), "sort at {threads} threads");
        let single = a.astype(DType::F32).sort(None).expect("sorts");
        let want32: Vec<f64> = want_values.iter().map(|&x| f64::from(x as f32)).collect();
        let got32: Vec<f64> = single
            .to_vec_of::<f32>()
            .expect("reads")
            .into_iter()
            .map(f64::from)
            .collect();
        assert!(same(&got32, &want32), "f32 sort at {threads} threads");
        let i = np.from_slice(&[n as u64], &ints);
        assert_eq!(
            i.sort(None)
                .expect("sorts")
                .to_vec_of::<i64>()
                .expect("reads"),
            want_ints
        );
        let flags: Vec<bool> = v.iter().map(|x| *x > 0.5).collect();
        let mut want_flags: Vec<usize> = (0..n).collect();
        want_flags.sort_by_key(|&i| flags[i]);
        let got_flags: Vec<usize> = np
            .from_slice(&[n as u64], &flags)
            .argsort(None)
            .expect("argsorts bools")
            .to_vec_of::<i64>()
            .expect("reads")
            .into_iter()
            .map(|x| x as usize)
            .collect();
        assert_eq!(got_flags, want_flags, "bool argsort at {threads} threads");
        let narrow = i.astype(DType::I32).sort(None).expect("sorts");
        let want_narrow: Vec<i32> = want_ints.iter().map(|&x| x as i32).collect();
        assert_eq!(narrow.to_vec_of::<i32>().expect("reads"), want_narrow);
        // Two rows of one long line each, and many short rows (a pass's points split over
        // the rows rather than the chunks).
        let two = np.from_vec(&[2, (n / 2) as u64], &v[..2 * (n / 2)]);
        let got = two.sort(Some(-1)).expect("sorts").to_vec().expect("reads");
        for r in 0..2 {
            let line = &v[r * (n / 2)..(r + 1) * (n / 2)];
            let mut w = line.to_vec();
            w.sort_by(|a, b| before(*a, *b));
            assert!(same(&got[r * (n / 2)..(r + 1) * (n / 2)], &w), "row {r}");
        }
        let many = np.from_vec(&[(n / 7) as u64, 7], &v[..7 * (n / 7)]);
        let got = many.argsort(Some(1)).expect("argsorts");
        let got = got.to_vec_of::<i64>().expect("reads");
        for r in 0..n / 7 {
            let line = &v[r * 7..(r + 1) * 7];
            let want: Vec<i64> = reference_argsort(line)
                .into_iter()
                .map(|x| x as i64)
                .collect();
            assert_eq!(&got[r * 7..(r + 1) * 7], &want[..], "row {r}");
        }
    }
}

/// `unique_counts` against counting runs of a sorted copy written out.
#[test]
fn unique_counts_count_each_run() {
    let np = weft_tests::numeric(2);
    let v: Vec<i64> = weft_tests::uniform_data(5000, 21, 0.0, 40.0)
        .into_iter()
        .map(|x| x as i64)
        .collect();
    let (u, c) = np
        .from_slice(&[5000], &v)
        .unique_counts()
        .expect("unique with counts");
    let mut sorted = v.clone();
    sorted.sort();
    let (mut want_u, mut want_c) = (Vec::new(), Vec::new());
    for x in sorted {
        if want_u.last() == Some(&x) {
            *want_c.last_mut().expect("a count") += 1;
        } else {
            want_u.push(x);
            want_c.push(1i64);
        }
    }
    assert_eq!(u.to_vec_of::<i64>().expect("reads"), want_u);
    assert_eq!(c.to_vec_of::<i64>().expect("reads"), want_c);
    let f = np.from_vec(&[6], &[2.0, f64::NAN, -0.0, 0.0, f64::NAN, 2.0]);
    let (u, c) = f.unique_counts().expect("unique with counts");
    let u = u.to_vec().expect("reads");
    assert_eq!(u.len(), 3, "{u:?}");
    assert_eq!(
        u[0].to_bits(),
        (-0.0f64).to_bits(),
        "the first of the zeros"
    );
    assert_eq!(u[1], 2.0);
    assert!(u[2].is_nan());
    assert_eq!(c.to_vec_of::<i64>().expect("reads"), vec![2, 2, 2]);
    let (u, c) = np
        .from_vec(&[1], &[4.0])
        .unique_counts()
        .expect("one element");
    assert_eq!(
        (
            u.to_vec().expect("reads"),
            c.to_vec_of::<i64>().expect("reads")
        ),
        (vec![4.0], vec![1])
    );
}

/// Empty lines and lines of one element: copies, and zero positions.
#[test]
fn empty_and_single_lines_sort_as_they_are() {
    let np = weft_tests::numeric(2);
    for shape in [[0u64, 5], [3, 0], [4, 1]] {
        let n = (shape[0] * shape[1]) as usize;
        let v = values(n, 11);
        let a = np.from_vec(&shape, &v);
        for axis in [Some(0), Some(-1), None] {
            let sorted = a.sort(axis).expect("sorts");
            let order = a.argsort(axis).expect("argsorts");
            let want_shape = if axis.is_none() {
                vec![n as u64]
            } else {
                shape.to_vec()
            };
            assert_eq!(
                sorted.shape().expect("a shape"),
                want_shape,
                "{shape:?} {axis:?}"
            );
            assert_eq!(
                order.shape().expect("a shape"),
                want_shape,
                "{shape:?} {axis:?}"
            );
        }
        // Lines of one element along the last axis: the same elements, positions zero.
        let last = a.sort(Some(-1)).expect("sorts").to_vec().expect("reads");
        let positions = a
            .argsort(Some(-1))
            .expect("argsorts")
            .to_vec_of::<i64>()
            .expect("reads");
        if shape[1] == 1 {
            assert!(same(&last, &v), "{shape:?}");
            assert!(positions.iter().all(|&p| p == 0), "{shape:?}");
        }
        assert_eq!(last.len(), n);
    }
    let (u, c) = np
        .from_vec(&[0], &[])
        .unique_counts()
        .expect("empty unique");
    assert_eq!(
        (
            u.to_vec().expect("reads").len(),
            c.to_vec_of::<i64>().expect("reads").len()
        ),
        (0, 0)
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
