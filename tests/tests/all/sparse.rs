//! The sparse plugin through the real host: every operation against the plain-Rust CSR
//! reference (`weft_examples::sparse_reference`), with 1 and 3 pieces, both value types and
//! both index types; bad input; and fusion with the numeric plugin.

use weft::{Config, CsrMatrix, Numeric, Runtime, Sparse};
use weft_examples::sparse_reference::Csr;
use weft_ir::DType;
use weft_tests::assert_close;

fn plugins(fusion: bool, pieces: u64) -> (Numeric, Sparse) {
    let config = Config {
        fusion,
        pieces,
        threads: 2,
        component_cache: None,
        explain: true,
        ..Config::default()
    };
    weft_tests::plugins_with(config)
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random COO triplets on `rows` x `cols`: some rows empty, some entries repeated.
fn random_coo(rows: u64, cols: u64, seed: u64) -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let mut rng = Rng(seed);
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rows {
        if i % 4 == 1 {
            continue; // an empty row
        }
        for _ in 0..rng.below(6) {
            let j = rng.below(cols);
            let x = rng.unit() * 2.0 - 1.0;
            r.push(i);
            c.push(j);
            v.push(x);
            if rng.below(3) == 0 {
                r.push(i);
                c.push(j);
                v.push(0.5); // a duplicate, summed
            }
        }
    }
    (r, c, v)
}

fn reference(rows: u64, cols: u64, (r, c, v): &(Vec<u64>, Vec<u64>, Vec<f64>)) -> Csr {
    let r: Vec<usize> = r.iter().map(|&x| x as usize).collect();
    let c: Vec<usize> = c.iter().map(|&x| x as usize).collect();
    Csr::from_coo(rows as usize, cols as usize, &r, &c, v).expect("valid triplets")
}

/// `pos` as SciPy's `indptr`.
fn indptr(m: &CsrMatrix) -> Vec<usize> {
    let pos = m.pos().to_vec().expect("pos reads");
    let mut out = vec![0usize];
    for row in pos.chunks(2) {
        assert_eq!(
            row[0] as usize,
            *out.last().expect("indptr starts with 0"),
            "rows are contiguous"
        );
        out.push(row[1] as usize);
    }
    out
}

fn check_structure(what: &str, got: &CsrMatrix, want: &Csr) {
    assert_eq!(got.shape(), (want.rows as u64, want.cols as u64), "{what}");
    assert_eq!(indptr(got), want.indptr, "{what}: row pointers");
    let crd: Vec<usize> = got
        .crd()
        .to_vec()
        .expect("crd reads")
        .iter()
        .map(|&x| x as usize)
        .collect();
    assert_eq!(crd, want.indices, "{what}: columns");
}

const CASES: [(DType, DType, u64); 4] = [
    (DType::F64, DType::I64, 1),
    (DType::F64, DType::I32, 3),
    (DType::F32, DType::I64, 3),
    (DType::F32, DType::I32, 1),
];

fn tol(v: DType) -> f64 {
    if v == DType::F32 { 1e-5 } else { 1e-13 }
}

#[test]
fn every_operation_matches_the_reference_on_random_matrices() {
    for (v, i, pieces) in CASES {
        let (np, sp) = plugins(true, pieces);
        let (rows, cols) = (37u64, 23u64);
        let coo = random_coo(rows, cols, 11);
        let want = reference(rows, cols, &coo);
        let a = sp
            .from_triplets((rows, cols), (&coo.0, &coo.1, &coo.2), v, i)
            .unwrap();
        let what = format!("{v} values, {i} indices, {pieces} pieces");
        check_structure(&what, &a, &want);
        assert_close(&what, &a.vals().to_vec().unwrap(), &want.data, tol(v), 1e-6);

        // SpMV.
        let xs: Vec<f64> = (0..cols).map(|k| (k as f64 * 0.37).sin()).collect();
        let x = np.from_f64s(&[cols], &xs, v);
        let mut y = vec![0.0; rows as usize];
        want.spmv(&xs, &mut y);
        assert_close(&what, &a.matvec(&x).to_vec().unwrap(), &y, tol(v), 1e-6);

        // Diagonal, scaling, sums, dense form, transpose.
        assert_close(
            &what,
            &a.diagonal().to_vec().unwrap(),
            &want.diagonal(),
            tol(v),
            1e-6,
        );
        let scaled = a.scale(-2.5).unwrap();
        assert_close(
            &what,
            &scaled.to_dense().to_vec().unwrap(),
            &want.scale(-2.5).to_dense(),
            tol(v),
            1e-6,
        );
        let sum = a.add(&scaled).unwrap();
        assert_close(
            &what,
            &sum.to_dense().to_vec().unwrap(),
            &want.add(&want.scale(-2.5)).unwrap().to_dense(),
            tol(v),
            1e-6,
        );
        assert_close(
            &what,
            &a.to_dense().to_vec().unwrap(),
            &want.to_dense(),
            tol(v),
            1e-6,
        );
        let t = a.transpose().unwrap();
        let wt = want.transpose();
        check_structure(&format!("{what}, transposed"), &t, &wt);
        assert_close(&what, &t.vals().to_vec().unwrap(), &wt.data, tol(v), 1e-6);
        assert_eq!(
            t.diagonal().to_vec().unwrap().len(),
            cols.min(rows) as usize
        );
    }
}

#[test]
fn the_column_hull_holds_every_column_of_every_run_of_rows() {
    let (_np, sp) = plugins(true, 3);
    for (seed, (rows, cols)) in [(3u64, (37u64, 23u64)), (5, (12, 40)), (8, (50, 7))] {
        let coo = random_coo(rows, cols, seed);
        let want = reference(rows, cols, &coo);
        for i in [DType::I32, DType::I64] {
            let a = sp
                .from_triplets((rows, cols), (&coo.0, &coo.1, &coo.2), DType::F64, i)
                .unwrap();
            let hull = a.column_hull().unwrap();
            assert_eq!(hull.shape().unwrap(), vec![rows, 2]);
            assert_eq!(hull.dtype().unwrap(), i);
            let h: Vec<i64> = hull.to_vec().unwrap().iter().map(|&v| v as i64).collect();
            for r in 1..rows as usize {
                assert!(
                    h[2 * r] >= h[2 * r - 2],
                    "starts decrease at row {r}: {h:?}"
                );
                assert!(
                    h[2 * r + 1] >= h[2 * r - 1],
                    "ends decrease at row {r}: {h:?}"
                );
            }
            // Exactly the hull the export defines: each end one past the greatest column of
            // the rows so far, each start the least column of the rows from here on, never
            // past the row's end.
            let n = rows as usize;
            let row_cols = |r: usize| want.indices[want.indptr[r]..want.indptr[r + 1]].iter();
            let mut exact = vec![0i64; 2 * n];
            let mut reach = 0i64;
            for r in 0..n {
                reach = row_cols(r).fold(reach, |m, &c| m.max(c as i64 + 1));
                exact[2 * r + 1] = reach;
            }
            let mut least = cols as i64;
            for r in (0..n).rev() {
                least = row_cols(r).fold(least, |m, &c| m.min(c as i64));
                exact[2 * r] = least.min(exact[2 * r + 1]);
            }
            assert_eq!(h, exact, "{i} indices, seed {seed}");
            for first in 0..rows as usize {
                for last in first..rows as usize {
                    let (start, end) = (h[2 * first], h[2 * last + 1]);
                    for r in first..=last {
                        for k in want.indptr[r]..want.indptr[r + 1] {
                            let c = want.indices[k] as i64;
                            assert!(
                                start <= c && c < end,
                                "rows {first}..={last} reach column {c}, outside {start}..{end}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn poisson_generators_match_the_reference() {
    for (v, i, pieces) in CASES {
        let (_, sp) = plugins(true, pieces);
        for g in [1u64, 2, 5, 8] {
            let what = format!("poisson2d({g}), {v}, {i}, {pieces} pieces");
            let a = sp.poisson2d(g, v, i).unwrap();
            let want = Csr::poisson2d(g as usize);
            check_structure(&what, &a, &want);
            assert_close(&what, &a.vals().to_vec().unwrap(), &want.data, 0.0, 0.0);
        }
        for g in [1u64, 2, 4] {
            let what = format!("poisson3d({g}), {v}, {i}, {pieces} pieces");
            let a = sp.poisson3d(g, v, i).unwrap();
            let want = Csr::poisson3d(g as usize);
            check_structure(&what, &a, &want);
            assert_close(&what, &a.vals().to_vec().unwrap(), &want.data, 0.0, 0.0);
        }
    }
}

#[test]
fn csr_arrays_are_taken_as_given_and_checked() {
    let (np, sp) = plugins(true, 1);
    let indptr = np.from_f64s(&[4], &[0.0, 2.0, 2.0, 3.0], DType::I64);
    let indices = np.from_f64s(&[3], &[1.0, 0.0, 2.0], DType::I64);
    let data = np.from_f64s(&[3], &[1.0, 2.0, 3.0], DType::F64);
    let a = sp
        .from_csr_arrays((3, 3), &indptr, &indices, &data)
        .unwrap();
    let dense = a.to_dense().to_vec().unwrap();
    assert_eq!(dense, vec![2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0]);

    let bad_ptr = np.from_f64s(&[4], &[0.0, 2.0, 1.0, 3.0], DType::I64);
    let e = sp
        .from_csr_arrays((3, 3), &bad_ptr, &indices, &data)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sparse") && e.contains("from-csr-arrays") && e.contains("not monotone"),
        "{e}"
    );

    // Indices of the other index type are converted to `indptr`'s; `data` keeps its type.
    for (ptr_type, index_type) in [(DType::I32, DType::I64), (DType::I64, DType::I32)] {
        let indptr = np.from_f64s(&[4], &[0.0, 2.0, 2.0, 3.0], ptr_type);
        let indices = np.from_f64s(&[3], &[1.0, 0.0, 2.0], index_type);
        let data = np.from_f64s(&[3], &[1.5, 2.5, 3.5], DType::F32);
        let a = sp
            .from_csr_arrays((3, 3), &indptr, &indices, &data)
            .unwrap();
        assert_eq!(a.crd().dtype().unwrap(), ptr_type);
        assert_eq!(a.crd().to_vec().unwrap(), vec![1.0, 0.0, 2.0]);
        assert_eq!(a.dtype().unwrap(), DType::F32);
        assert_eq!(a.vals().to_vec().unwrap(), vec![1.5, 2.5, 3.5]);
        let dense = a.to_dense().to_vec().unwrap();
        assert_eq!(dense, vec![2.5, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.5]);

        // A column outside the matrix, in either index type: the entry is named.
        for bad in [-1.0, 3.0] {
            let indices = np.from_f64s(&[3], &[1.0, 0.0, bad], index_type);
            let e = sp
                .from_csr_arrays((3, 3), &indptr, &indices, &data)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("from-csr-arrays")
                    && e.contains(&format!("column index {bad} of entry 2 is outside 0..3")),
                "{e}"
            );
        }
        // Columns and values of different lengths.
        let short = np.from_f64s(&[2], &[1.5, 2.5], DType::F32);
        let e = sp
            .from_csr_arrays((3, 3), &indptr, &indices, &short)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lengths 3 and 2"), "{e}");
    }
}

#[test]
fn bad_input_is_a_clear_error_and_the_host_keeps_running() {
    let (np, sp) = plugins(true, 1);
    // An index out of range in COO.
    let e = sp
        .from_triplets(
            (3, 3),
            (&[0, 3], &[0, 1], &[1.0, 2.0]),
            DType::F64,
            DType::I64,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("from-coo") && e.contains("axis 0 index 3 exceeds matrix dimension 3 (entry 1)"),
        "{e}"
    );
    // A negative row, and a column inside the matrix that 32-bit indices cannot hold.
    let (r, c) = (
        np.from_f64s(&[2], &[0.0, -1.0], DType::I32),
        np.from_f64s(&[2], &[0.0, 1.0], DType::I32),
    );
    let e = sp
        .from_coo((3, 3), &r, &c, &np.ones(&[2], DType::F64), DType::I32)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("from-coo") && e.contains("negative axis 0 index: -1 (entry 1)"),
        "{e}"
    );
    let wide = 1u64 << 32;
    let e = sp
        .from_triplets(
            (2, wide),
            (&[0, 1], &[1, (1 << 31) + 5], &[1.0, 2.0]),
            DType::F64,
            DType::I32,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("from-coo") && e.contains("2147483653 does not fit i32"),
        "{e}"
    );
    let m = sp
        .from_triplets(
            (2, wide),
            (&[1, 1], &[(1 << 31) + 5, 3], &[1.0, 2.0]),
            DType::F64,
            DType::I64,
        )
        .expect("64-bit indices hold any column");
    assert_eq!(m.nnz().expect("nnz"), 2);
    // Triplets of different lengths.
    let e = sp
        .from_triplets((3, 3), (&[0, 1], &[0], &[1.0, 2.0]), DType::F64, DType::I64)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lengths"), "{e}");
    // Entries outside the matrix, in SciPy's words, in either index type: a row past the
    // end, a column past the end, a negative column.
    let outside = [
        (
            (&[0u64, 7][..], &[1u64, 2][..]),
            "axis 0 index 7 exceeds matrix dimension 3 (entry 1)",
        ),
        (
            (&[0, 1][..], &[1, 9][..]),
            "axis 1 index 9 exceeds matrix dimension 4 (entry 1)",
        ),
    ];
    for index_type in [DType::I32, DType::I64] {
        for ((rows, cols), want) in outside {
            let e = sp
                .from_triplets((3, 4), (rows, cols, &[1.0, 2.0]), DType::F64, index_type)
                .unwrap_err()
                .to_string();
            assert!(e.contains("from-coo") && e.contains(want), "{e}");
        }
    }
    let negative = np.from_f64s(&[2], &[0.0, -1.0], DType::I64);
    let e = sp
        .from_coo(
            (3, 4),
            &np.from_f64s(&[2], &[0.0, 1.0], DType::I64),
            &negative,
            &np.ones(&[2], DType::F64),
            DType::I64,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("negative axis 1 index: -1 (entry 1)"), "{e}");
    // A vector of the wrong length.
    let a = sp.poisson2d(3, DType::F64, DType::I64).unwrap();
    let x = np.ones(&[8], DType::F64);
    let e = a.matvec(&x).check().unwrap_err().to_string();
    assert!(
        e.contains("spmv")
            && e.contains("dimension mismatch with signature (n,k=9),(k=8,1?)->(n,1?)"),
        "{e}"
    );
    // Shapes print as NumPy prints them.
    let e = a
        .add(&sp.poisson2d(2, DType::F64, DType::I64).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("inconsistent shapes (9, 9) and (4, 4)"), "{e}");
    // Different patterns.
    let b = sp
        .from_triplets((9, 9), (&[0], &[0], &[1.0]), DType::F64, DType::I64)
        .unwrap();
    let e = a.add(&b).unwrap_err().to_string();
    assert!(e.contains("add") && e.contains("differ"), "{e}");
    let c = sp.poisson2d(3, DType::F64, DType::I64).unwrap();
    assert!(a.add(&c).is_ok(), "equal patterns in other stores add");
    // The host still works.
    let y = a.matvec(&np.ones(&[9], DType::F64));
    assert_eq!(y.sum().item().unwrap(), 12.0);
}

/// `q = A @ p` followed by `dot(p, q)`: one fused task whose kernel's provenance names both
/// plugins, with the same result as unfused.
#[test]
fn spmv_fuses_with_the_dot_product_after_it() {
    let mut results = Vec::new();
    for fusion in [true, false] {
        let (np, sp) = plugins(fusion, 1);
        // Past `numeric`'s `SMALL_DOT` (16,384) elements, the dot product is a reduction over
        // the vector's points, which the SpMV's loop can carry.
        let a = sp.poisson2d(130, DType::F64, DType::I64).unwrap();
        let p = np.random_uniform(&[130 * 130], 0.0, 1.0, 3, DType::F64);
        np.runtime(|rt| rt.flush()).unwrap();
        np.runtime(|rt| rt.take_explanations());
        let before = np.runtime(|rt| rt.stats()).exec.tasks_executed;
        let q = a.matvec(&p);
        let pq = p.dot(&q).item().unwrap();
        let ran = np.runtime(|rt| rt.stats()).exec.tasks_executed - before;
        let text = np.runtime(|rt| rt.take_explanations()).join("");
        if fusion {
            assert!(
                text.contains("sparse.spmv") && text.contains("numeric.dot"),
                "explain shows both plugins:\n{text}"
            );
            assert!(
                text.contains("loop 2 fused into loop 1"),
                "the SpMV loop and the dot loop become one loop:\n{text}"
            );
            assert_eq!(ran, 1, "SpMV and dot ran as one task\n{text}");
        } else {
            assert_eq!(ran, 2, "unfused: each ran alone");
        }
        let reference = {
            let want = Csr::poisson2d(130);
            let ps = p.to_vec().unwrap();
            let mut qs = vec![0.0; 130 * 130];
            want.spmv(&ps, &mut qs);
            ps.iter().zip(&qs).map(|(a, b)| a * b).sum::<f64>()
        };
        assert!(
            (pq - reference).abs() <= 1e-12 * reference.abs(),
            "{pq} vs {reference}"
        );
        results.push((pq, q.to_vec().unwrap()));
    }
    assert_eq!(
        results[0].1, results[1].1,
        "fused SpMV equals unfused bit for bit"
    );
    assert!((results[0].0 - results[1].0).abs() <= 1e-12 * results[1].0.abs());
}

#[test]
fn matrix_market_files_load_into_the_plugin() {
    let dir = std::env::temp_dir().join(format!("weft-sparse-mm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n3 3 4\n1 1 2.0\n2 1 -1.0\n3 3 5.5\n3 2 0.25\n",
    )
    .unwrap();
    let (_, sp) = plugins(true, 1);
    let a = sp
        .from_matrix_market(&path, DType::F64, DType::I32)
        .unwrap();
    let dense = a.to_dense().to_vec().unwrap();
    assert_eq!(dense, vec![2.0, -1.0, 0.0, -1.0, 0.0, 0.25, 0.0, 0.25, 5.5]);
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 1.0\n",
    )
    .unwrap();
    let e = sp
        .from_matrix_market(&path, DType::F64, DType::I32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 3"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_index_type_can_be_narrowed_and_widened() {
    let (np, sp) = plugins(true, 3);
    let a = sp.poisson2d(6, DType::F64, DType::I64).unwrap();
    let x = np.from_f64s(
        &[36],
        &(0..36).map(f64::from).collect::<Vec<_>>(),
        DType::F64,
    );
    let narrow = a.with_index_type(DType::I32).unwrap();
    assert_eq!(narrow.pos().dtype().unwrap(), DType::I32);
    assert_eq!(narrow.crd().dtype().unwrap(), DType::I32);
    assert_eq!(
        narrow.matvec(&x).to_vec().unwrap(),
        a.matvec(&x).to_vec().unwrap()
    );
    let wide = narrow.with_index_type(DType::I64).unwrap();
    assert_eq!(wide.crd().to_vec().unwrap(), a.crd().to_vec().unwrap());
    let e = a.with_index_type(DType::F32).unwrap_err().to_string();
    assert!(e.contains("i32 or i64"), "{e}");
}

/// The sparse plugin through the dynamic call API (no typed bindings), as an application that
/// does not link its interface would call it: a Poisson matrix comes back as a record of three
/// store handles, and a product of it runs.
#[test]
fn the_dynamic_api_reaches_the_sparse_plugin() {
    let config = Config {
        threads: 2,
        component_cache: None,
        ..Config::default()
    };
    let mut rt = Runtime::new(config).unwrap();
    let sp = rt.load(weft_plugin_artifacts::SPARSE).unwrap();
    run_dynamic(&mut rt, sp);
    // Lending handles for the calls kept nothing alive: once the application has dropped its
    // values, every store is gone.
    rt.flush().unwrap();
    assert_eq!(rt.memory().0, 0, "stores left alive");
}

fn run_dynamic(rt: &mut Runtime, sp: weft::PluginId) {
    use weft::Value;
    let np = rt
        .load(weft_plugin_artifacts::NUMERIC)
        .expect("the call runs");
    let out = rt
        .call(
            sp,
            "weft:plugin/sparse@0.1.0#poisson2d",
            &[
                Value::U64(3),
                Value::Enum("f64".into()),
                Value::Enum("i32".into()),
            ],
        )
        .expect("the call runs");
    let Some(Value::Result(Ok(Some(csr)))) = out.first() else {
        panic!("expected a matrix, got {out:?}");
    };
    let Value::Record(fields) = csr.as_ref() else {
        panic!("expected a record, got {csr:?}");
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .expect("the field exists")
    };
    assert!(matches!(field("rows"), Value::U64(9)));
    let ones = rt
        .call(
            np,
            "weft:plugin/numeric@0.1.0#ones",
            &[Value::List(vec![Value::U64(9)]), Value::Enum("f64".into())],
        )
        .expect("the call runs");
    let Some(Value::Result(Ok(Some(x)))) = ones.first() else {
        panic!("expected an array, got {ones:?}");
    };
    let hull = rt
        .call(
            sp,
            "weft:plugin/sparse@0.1.0#column-hull",
            &[field("pos"), field("crd"), Value::U64(9)],
        )
        .expect("the call runs");
    let Some(Value::Result(Ok(Some(hull)))) = hull.first() else {
        panic!("expected a store, got {hull:?}");
    };
    let y = rt
        .call(
            sp,
            "weft:plugin/sparse@0.1.0#spmv",
            &[
                field("pos"),
                field("crd"),
                field("vals"),
                Value::U64(9),
                x.as_ref().clone(),
                hull.as_ref().clone(),
                Value::Enum("sequential".into()),
            ],
        )
        .expect("the call runs");
    let Some(Value::Result(Ok(Some(y)))) = y.first() else {
        panic!("expected a vector, got {y:?}");
    };
    let Value::Store(h) = y.as_ref() else {
        panic!("expected a store, got {y:?}");
    };
    let bytes = rt.read_bytes(h).expect("the call runs");
    let got: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    // Row sums of the 5-point Laplacian on 3x3: corners 2, edges 1, center 0.
    assert_eq!(got, vec![2.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 2.0]);
}

/// `from_coo` on triplets in no order (rows interleaved, columns unsorted, duplicates far
/// apart): the rows group, each row's columns sort, and duplicates sum in input order, so the
/// arrays equal the reference's bit for bit, for both index types.
#[test]
fn from_coo_of_shuffled_triplets_equals_the_reference_bit_for_bit() {
    let (_np, sp) = plugins(true, 1);
    // Short rows (sorted by insertion in the plugin), then long ones with many duplicates
    // (more than 32 entries a row: sorted by a merge sort).
    let (rows, cols) = (301u64, 97u64);
    shuffled_from_coo_equals_the_reference(&sp, rows, cols, random_coo(rows, cols, 29));
    let mut rng = Rng(37);
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..6u64 {
        for _ in 0..20 + 15 * i {
            r.push(i);
            c.push(rng.below(24));
            // Magnitudes 1 and 1e16 apart: every order of a sum has its own bits.
            v.push((rng.unit() * 2.0 - 1.0) * [1.0, 1e16][rng.below(2) as usize]);
        }
    }
    shuffled_from_coo_equals_the_reference(&sp, 6, 24, (r, c, v));
}

#[test]
fn from_coo_in_column_order_over_many_row_blocks_equals_the_reference() {
    let (_np, sp) = plugins(true, 1);
    // PageRank's triplets: out-edges node by node, so each row's columns arrive in order
    // (the plugin only checks and moves such a row), and a duplicate edge repeats a column
    // (that row is sorted and merged). 5,000 rows: the plugin stages entries in blocks of
    // 1,024 rows, so five blocks, the last one partial.
    let (rows, cols) = (5000u64, 700u64);
    let mut rng = Rng(41);
    let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
    for src in 0..cols {
        for _ in 0..rng.below(30) {
            let dst = rng.below(rows);
            let copies = if rng.below(8) == 0 { 2 } else { 1 };
            for _ in 0..copies {
                r.push(dst);
                c.push(src);
                v.push((rng.unit() * 2.0 - 1.0) * [1.0, 1e16][rng.below(2) as usize]);
            }
        }
    }
    from_coo_equals_the_reference(&sp, rows, cols, &(r, c, v), "column-ordered triplets");
}

/// `from_coo` of the triplets `coo` in a shuffled order has the reference's structure and
/// bits (duplicates summed in the shuffled order), with 32- and 64-bit indices.
fn shuffled_from_coo_equals_the_reference(
    sp: &Sparse,
    rows: u64,
    cols: u64,
    (mut r, mut c, mut v): (Vec<u64>, Vec<u64>, Vec<f64>),
) {
    let mut rng = Rng(31);
    for k in (1..r.len()).rev() {
        let j = rng.below(k as u64 + 1) as usize;
        r.swap(k, j);
        c.swap(k, j);
        v.swap(k, j);
    }
    from_coo_equals_the_reference(sp, rows, cols, &(r, c, v), "shuffled triplets");
}

/// `from_coo` of the triplets `coo`, in their order, has the reference's structure and bits
/// (duplicates summed in that order), with 32- and 64-bit indices.
fn from_coo_equals_the_reference(
    sp: &Sparse,
    rows: u64,
    cols: u64,
    coo: &(Vec<u64>, Vec<u64>, Vec<f64>),
    name: &str,
) {
    let want = reference(rows, cols, coo);
    for i in [DType::I32, DType::I64] {
        let a = sp
            .from_triplets((rows, cols), (&coo.0, &coo.1, &coo.2), DType::F64, i)
            .unwrap_or_else(|e| panic!("{e}"));
        let what = format!("{name}, {i} indices");
        check_structure(&what, &a, &want);
        let got: Vec<u64> = a
            .vals()
            .to_vec()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let want_bits: Vec<u64> = want.data.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want_bits, "{what}: values");
    }
}

/// Scaling by a diagonal on either side (`diags(d) @ A`, `A @ diags(d)`), new values on the
/// same pattern (`with_data`) and sums over everything and over each axis, against the
/// plain-Rust reference's dense form, with 1 and 3 pieces and both value and index types.
#[test]
fn diagonal_scaling_new_values_and_axis_sums_match_the_reference() {
    for (v, i, pieces) in CASES {
        let (np, sp) = plugins(true, pieces);
        let (rows, cols) = (37u64, 23u64);
        let coo = random_coo(rows, cols, 5);
        let want = reference(rows, cols, &coo);
        let dense = want.to_dense();
        let n = cols as usize;
        let a = sp
            .from_triplets((rows, cols), (&coo.0, &coo.1, &coo.2), v, i)
            .unwrap();
        let what = format!("{v} values, {i} indices, {pieces} pieces");

        let dr: Vec<f64> = (0..rows).map(|r| 0.5 + (r as f64 * 0.7).cos()).collect();
        let by_rows = a.scale_rows(&np.from_f64s(&[rows], &dr, v)).unwrap();
        check_structure(&format!("{what}, rows scaled"), &by_rows, &want);
        let want_rows: Vec<f64> = dense
            .iter()
            .enumerate()
            .map(|(k, x)| x * dr[k / n])
            .collect();
        let got = by_rows.to_dense().to_vec().unwrap();
        assert_close(&what, &got, &want_rows, tol(v), 1e-6);

        let dc: Vec<f64> = (0..cols).map(|c| -1.0 + (c as f64 * 0.3).sin()).collect();
        let by_cols = a.scale_columns(&np.from_f64s(&[cols], &dc, v)).unwrap();
        check_structure(&format!("{what}, columns scaled"), &by_cols, &want);
        let want_cols: Vec<f64> = dense
            .iter()
            .enumerate()
            .map(|(k, x)| x * dc[k % n])
            .collect();
        let got = by_cols.to_dense().to_vec().unwrap();
        assert_close(&what, &got, &want_cols, tol(v), 1e-6);

        let doubled = a.with_data(&(a.vals() * 2.0)).unwrap();
        check_structure(&format!("{what}, new data"), &doubled, &want);
        let twice: Vec<f64> = dense.iter().map(|x| 2.0 * x).collect();
        let got = doubled.to_dense().to_vec().unwrap();
        assert_close(&what, &got, &twice, tol(v), 1e-6);

        let total: f64 = dense.iter().sum();
        let got = a.sum(None).unwrap().item().unwrap();
        assert_close(&what, &[got], &[total], tol(v), 1e-6);
        let per_col: Vec<f64> = (0..n)
            .map(|c| dense.iter().skip(c).step_by(n).sum())
            .collect();
        let per_row: Vec<f64> = dense.chunks(n).map(|r| r.iter().sum()).collect();
        for (axis, want_sums) in [(0, &per_col), (-2, &per_col), (1, &per_row), (-1, &per_row)] {
            let got = a.sum(Some(axis)).unwrap().to_vec().unwrap();
            assert_close(
                &format!("{what}, axis {axis}"),
                &got,
                want_sums,
                tol(v),
                1e-6,
            );
        }
    }
}

/// A diagonal of the wrong length or type, data that does not fit the pattern and an axis a
/// matrix does not have are errors that name the operation and the problem, and the host
/// keeps running.
#[test]
fn bad_diagonals_data_and_axes_are_clear_errors() {
    let (np, sp) = plugins(true, 1);
    let a = sp.poisson2d(4, DType::F64, DType::I64).unwrap();
    let text = |e: weft::Error| e.to_string();
    let e = text(a.scale_rows(&np.ones(&[15], DType::F64)).unwrap_err());
    assert!(
        e.contains("scale-rows") && e.contains("one value per row (16)"),
        "{e}"
    );
    let e = text(a.scale_columns(&np.ones(&[16], DType::F32)).unwrap_err());
    assert!(
        e.contains("scale-columns") && e.contains("a f64 vector"),
        "{e}"
    );
    let e = text(a.with_data(&np.ones(&[3], DType::F64)).unwrap_err());
    assert!(
        e.contains("with-data") && e.contains("one value per stored entry"),
        "{e}"
    );
    let e = text(a.sum(Some(2)).unwrap_err());
    assert!(
        e.contains("axis 2 is out of bounds for array of dimension 2"),
        "{e}"
    );
    // Each names the application's line, whether the facade or the plugin found the problem.
    let line = line!() + 1;
    let e = text(a.scale_rows(&np.ones(&[15], DType::F64)).unwrap_err());
    assert!(e.contains(&format!("(at {}:{line}:", file!())), "{e}");
    let line = line!() + 1;
    let e = text(a.sum(Some(7)).unwrap_err());
    assert!(e.contains(&format!("(at {}:{line}:", file!())), "{e}");
    let line = line!() + 1;
    let e = text(np.ones(&[3], DType::F64).item().unwrap_err());
    assert!(
        e.contains("can only convert an array of size 1 to a scalar")
            && e.contains(&format!("(at {}:{line}:", file!())),
        "{e}"
    );
    let total: f64 = Csr::poisson2d(4).to_dense().iter().sum();
    assert_eq!(a.sum(None).unwrap().item().unwrap(), total);
}
