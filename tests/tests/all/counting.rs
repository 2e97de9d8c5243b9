//! `bincount`, `histogram` and `add_at` against plain-Rust counting written out: bins found
//! by comparing with the edges, sums in element order, repeated indices added each time.

use weft_ir::DType;

#[test]
fn bincount_counts_and_sums_weights_in_order() {
    let np = weft_tests::numeric(2);
    let positions: Vec<i64> = (0..500).map(|i| (i * 7919 % 13) as i64).collect();
    let weights = weft_tests::uniform_data(500, 5, -1.0, 1.0);
    let p = np.from_slice(&[500], &positions);
    let counts = p.bincount(None, 0).expect("counts");
    assert_eq!(counts.dtype().expect("a dtype"), DType::I64);
    let mut want = vec![0i64; 13];
    positions.iter().for_each(|&i| want[i as usize] += 1);
    assert_eq!(counts.to_vec_of::<i64>().expect("reads"), want);
    let sums = p
        .bincount(Some(&np.from_vec(&[500], &weights)), 20)
        .expect("sums")
        .to_vec()
        .expect("reads");
    let mut want = vec![0.0f64; 20];
    positions
        .iter()
        .zip(&weights)
        .for_each(|(&i, &w)| want[i as usize] += w);
    assert_eq!(sums, want, "sums in element order, minlength 20");
    let e = np
        .from_slice(&[2], &[1i64, -1])
        .bincount(None, 0)
        .expect_err("negative");
    assert!(e.to_string().contains("negative"), "{e}");
    let e = np
        .from_slice(&[1, 2], &[1i64, 2])
        .bincount(None, 0)
        .expect_err("2-d");
    assert!(e.to_string().contains("bincount"), "{e}");
    let e = np
        .from_slice(&[2], &[0i64, 1])
        .bincount(Some(&np.from_vec(&[3], &[1.0, 2.0, 3.0])), 0)
        .expect_err("lengths");
    assert!(e.to_string().contains("same length"), "{e}");
}

/// The bin of `x` by its edges (the last bin holds its right edge).
fn bin_by_edges(x: f64, edges: &[f64]) -> Option<usize> {
    let n = edges.len() - 1;
    if x < edges[0] || x > edges[n] {
        return None;
    }
    if x == edges[n] {
        return Some(n - 1);
    }
    (0..n).find(|&i| edges[i] <= x && x < edges[i + 1])
}

#[test]
fn histograms_bin_by_their_edges() {
    let np = weft_tests::numeric(2);
    let n = 20_000;
    let values = weft_tests::uniform_data(n, 8, -3.0, 5.0);
    let weights = weft_tests::uniform_data(n, 9, 0.0, 2.0);
    let a = np.from_vec(&[100, 200], &values);
    for (bins, range) in [(37u64, None), (10, Some((-1.0, 1.0))), (1, None)] {
        let (hist, edges) = a.histogram(bins, range, None).expect("a histogram");
        let e = edges.to_vec().expect("edges");
        assert_eq!(e.len() as u64, bins + 1);
        let (lo, hi) = range.unwrap_or_else(|| {
            values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                    (l.min(x), h.max(x))
                })
        });
        assert_eq!((e[0], e[bins as usize]), (lo, hi), "the outer edges");
        let mut want = vec![0i64; bins as usize];
        values
            .iter()
            .filter_map(|&x| bin_by_edges(x, &e))
            .for_each(|i| want[i] += 1);
        assert_eq!(
            hist.to_vec_of::<i64>().expect("counts"),
            want,
            "{bins} bins over {range:?}"
        );
        let (sums, _) = a
            .histogram(bins, range, Some(&np.from_vec(&[100, 200], &weights)))
            .expect("weighted");
        let mut want = vec![0.0f64; bins as usize];
        values.iter().zip(&weights).for_each(|(&x, &w)| {
            if let Some(i) = bin_by_edges(x, &e) {
                want[i] += w;
            }
        });
        assert_eq!(sums.to_vec().expect("sums"), want, "weighted, {bins} bins");
    }
    // One value: NumPy widens the range by a half on each side.
    let (hist, edges) = np
        .from_vec(&[3], &[2.0, 2.0, 2.0])
        .histogram(2, None, None)
        .expect("a histogram");
    assert_eq!(edges.to_vec().expect("edges"), vec![1.5, 2.0, 2.5]);
    assert_eq!(hist.to_vec_of::<i64>().expect("counts"), vec![0, 3]);
    let e = a
        .histogram(4, Some((1.0, 0.0)), None)
        .expect_err("a reversed range");
    assert!(e.to_string().contains("range"), "{e}");
    let e = np
        .from_vec(&[3], &[1.0, f64::NAN, 2.0])
        .histogram(4, None, None)
        .expect_err("a NaN in the data");
    assert!(e.to_string().contains("not finite"), "{e}");
}

#[test]
fn add_at_adds_each_repeated_index() {
    let np = weft_tests::numeric(2);
    let base = weft_tests::uniform_data(12, 3, -1.0, 1.0);
    let a = np.from_vec(&[3, 4], &base);
    let idx = [0i64, 5, 5, -1, 11, 0, 0];
    let vals = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
    a.add_at(&np.from_slice(&[7], &idx), &np.from_vec(&[7], &vals))
        .expect("adds");
    let mut want = base.clone();
    for (&i, &v) in idx.iter().zip(&vals) {
        let at = if i < 0 { (i + 12) as usize } else { i as usize };
        want[at] += v;
    }
    assert_eq!(a.to_vec().expect("reads"), want);
    // Integers wrap; a scalar broadcasts.
    let ints = np.from_slice(&[3], &[i64::MAX, 0, 1]);
    ints.add_at(&np.from_slice(&[3], &[0i64, 2, 2]), 1i64)
        .expect("adds");
    assert_eq!(
        ints.to_vec_of::<i64>().expect("reads"),
        vec![i64::MIN, 0, 3]
    );
    let e = a
        .add_at(&np.from_slice(&[1], &[12i64]), 1.0)
        .expect_err("out of range");
    assert!(e.to_string().contains("out of bounds"), "{e}");
}

#[test]
fn assign_at_stores_through_index_arrays_the_last_value_staying() {
    let np = weft_tests::numeric(2);
    let base = weft_tests::uniform_data(20, 4, -1.0, 1.0);
    let a = np.from_vec(&[4, 5], &base);
    let rows = [0i64, 3, -1, 2, 0];
    let cols = [1i64, 4, 4, 0, 1];
    let vals = [10.0, 20.0, 30.0, 40.0, 50.0];
    a.assign_at(
        &[&np.from_slice(&[5], &rows), &np.from_slice(&[5], &cols)],
        &np.from_vec(&[5], &vals),
    )
    .expect("assigns");
    let mut want = base.clone();
    for ((&r, &c), &v) in rows.iter().zip(&cols).zip(&vals) {
        let r = if r < 0 { r + 4 } else { r } as usize;
        want[r * 5 + c as usize] = v;
    }
    assert_eq!(
        a.to_vec().expect("reads"),
        want,
        "(0, 1) named twice keeps 50"
    );
    // A scalar, and a column index that broadcasts against a column of row indices.
    let ints = np.from_slice(&[3, 3], &[0i64; 9]);
    ints.assign_at(
        &[
            &np.from_slice(&[2, 1], &[0i64, 2]),
            &np.from_slice(&[2], &[1i64, 2]),
        ],
        7i64,
    )
    .expect("assigns");
    assert_eq!(
        ints.to_vec_of::<i64>().expect("reads"),
        vec![0, 7, 7, 0, 0, 0, 0, 7, 7]
    );
    // Complex arrays store both parts.
    let z = np.complex_zeros(&[2, 2], DType::F64);
    z.assign_at(
        &[&np.from_slice(&[1], &[1i64]), &np.from_slice(&[1], &[0i64])],
        weft::Complex::new(1.5, -2.0),
    )
    .expect("assigns");
    let got: Vec<(f64, f64)> = z
        .to_vec()
        .expect("reads")
        .into_iter()
        .map(|c| (c.re, c.im))
        .collect();
    assert_eq!(got, vec![(0.0, 0.0), (0.0, 0.0), (1.5, -2.0), (0.0, 0.0)]);
    let one = np.from_slice(&[1], &[0i64]);
    let e = a
        .assign_at(&[&one], 1.0)
        .expect_err("one index for two dimensions");
    assert!(e.to_string().contains("one per dimension"), "{e}");
    let e = a
        .assign_at(&[&one, &np.from_slice(&[1], &[5i64])], 1.0)
        .expect_err("column 5 of 5");
    assert!(e.to_string().contains("out of bounds for axis 1"), "{e}");
    let e = a
        .assign_at(&[&one, &np.from_vec(&[1], &[1.0])], 1.0)
        .expect_err("a float index");
    assert!(e.to_string().contains("integer"), "{e}");
}
