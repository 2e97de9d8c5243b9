//! NumPy's array-building pieces in the facade (`triu`, `tril`, `meshgrid`, `mgrid`,
//! `repeat`, `tile`, `cov`, `empty`, random integers and `choice`), against references
//! written out by hand or computed in plain Rust, with one piece and with three.

use weft::numeric::Indexing;
use weft::{Config, Numeric};
use weft_ir::DType;

fn numeric(pieces: u64) -> Numeric {
    weft_tests::numeric_with(Config {
        pieces,
        threads: 2,
        component_cache: None,
        ..Config::default()
    })
}

fn both(f: impl Fn(&Numeric)) {
    for pieces in [1, 3] {
        f(&numeric(pieces));
    }
}

#[test]
fn triangles_keep_the_diagonals_asked_for() {
    both(|np| {
        let (rows, cols) = (4usize, 5usize);
        let values: Vec<f64> = (0..rows * cols).map(|v| v as f64 + 1.0).collect();
        let a = np.from_f64s(&[rows as u64, cols as u64], &values, DType::F64);
        for k in [-2i64, -1, 0, 1, 3] {
            let upper: Vec<f64> = (0..rows * cols)
                .map(|p| {
                    let (i, j) = ((p / cols) as i64, (p % cols) as i64);
                    if j - i >= k { values[p] } else { 0.0 }
                })
                .collect();
            let lower: Vec<f64> = (0..rows * cols)
                .map(|p| {
                    let (i, j) = ((p / cols) as i64, (p % cols) as i64);
                    if j - i <= k { values[p] } else { 0.0 }
                })
                .collect();
            assert_eq!(a.triu(k).to_vec().unwrap(), upper, "triu k = {k}");
            assert_eq!(a.tril(k).to_vec().unwrap(), lower, "tril k = {k}");
        }
        // A stack of matrices: each matrix's triangle; integers stay integers.
        let stack = np.arange(0.0, 18.0, 1.0, DType::I64).reshape(&[2, 3, 3]);
        let t = stack.tril(0);
        assert_eq!(t.dtype().unwrap(), DType::I64);
        let want: Vec<f64> = (0..18)
            .map(|p| if p % 3 <= (p / 3) % 3 { p as f64 } else { 0.0 })
            .collect();
        assert_eq!(t.to_vec().unwrap(), want);
        let err = np
            .ones(&[3], DType::F64)
            .triu(0)
            .check()
            .unwrap_err()
            .to_string();
        assert!(err.contains("triu") && err.contains("(3,)"), "{err}");
    });
}

#[test]
fn meshgrid_and_mgrid_lay_out_coordinates_as_numpy_does() {
    both(|np| {
        let x = np.from_f64s(&[3], &[1.0, 2.0, 3.0], DType::F64);
        let y = np.from_f64s(&[2], &[10.0, 20.0], DType::F64);
        // "xy": shape (len y, len x).
        let g = np.meshgrid(&[&x, &y], Indexing::Xy);
        assert_eq!(g[0].shape().unwrap(), vec![2, 3]);
        assert_eq!(g[0].to_vec().unwrap(), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        assert_eq!(
            g[1].to_vec().unwrap(),
            vec![10.0, 10.0, 10.0, 20.0, 20.0, 20.0]
        );
        // "ij": shape (len x, len y).
        let g = np.meshgrid(&[&x, &y], Indexing::Ij);
        assert_eq!(g[0].shape().unwrap(), vec![3, 2]);
        assert_eq!(g[0].to_vec().unwrap(), vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
        assert_eq!(
            g[1].to_vec().unwrap(),
            vec![10.0, 20.0, 10.0, 20.0, 10.0, 20.0]
        );
        // The grids are copies: writing one leaves its input alone.
        g[0].assign(0.0).unwrap();
        assert_eq!(x.to_vec().unwrap(), vec![1.0, 2.0, 3.0]);
        // mgrid[0:3, 1:7:2]: shape (2, 3, 3).
        let m = np.mgrid(&[(0, 3, 1), (1, 7, 2)]);
        assert_eq!(m.shape().unwrap(), vec![2, 3, 3]);
        assert_eq!(m.dtype().unwrap(), DType::I64);
        let mut want = vec![];
        for k in 0..2 {
            for i in 0..3 {
                for j in 0..3 {
                    want.push(if k == 0 {
                        i as f64
                    } else {
                        1.0 + 2.0 * j as f64
                    });
                }
            }
        }
        assert_eq!(m.to_vec().unwrap(), want);
        let err = np.mgrid(&[(0, 3, 0)]).check().unwrap_err().to_string();
        assert!(err.contains("mgrid") && err.contains("step"), "{err}");
    });
}

#[test]
fn repeat_and_tile_copy_as_numpy_does() {
    both(|np| {
        let a = np.from_f64s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], DType::F64);
        let flat = a.repeat(2, None);
        assert_eq!(flat.shape().unwrap(), vec![12]);
        assert_eq!(
            flat.to_vec().unwrap(),
            vec![1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 6.0]
        );
        let rows = a.repeat(2, Some(0));
        assert_eq!(rows.shape().unwrap(), vec![4, 3]);
        assert_eq!(
            rows.to_vec().unwrap(),
            vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]
        );
        let cols = a.repeat(3, Some(-1));
        assert_eq!(cols.shape().unwrap(), vec![2, 9]);
        let want: Vec<f64> = (0..18)
            .map(|p| ((p / 9) * 3 + (p % 9) / 3 + 1) as f64)
            .collect();
        assert_eq!(cols.to_vec().unwrap(), want);
        // tile(a, (2, 2)) and tile with more reps than dimensions.
        let t = a.tile(&[2, 2]);
        assert_eq!(t.shape().unwrap(), vec![4, 6]);
        let want: Vec<f64> = (0..24)
            .map(|p| {
                let (i, j) = ((p / 6) % 2, (p % 6) % 3);
                (i * 3 + j + 1) as f64
            })
            .collect();
        assert_eq!(t.to_vec().unwrap(), want);
        let v = np.from_f64s(&[2], &[7.0, 8.0], DType::F64);
        let t = v.tile(&[2, 1, 3]);
        assert_eq!(t.shape().unwrap(), vec![2, 1, 6]);
        assert_eq!(t.to_vec().unwrap(), [7.0, 8.0].repeat(6));
        let err = a.repeat(2, Some(2)).check().unwrap_err().to_string();
        assert!(err.contains("axis"), "{err}");
        // Counts past what a shape can hold are errors, not overflows.
        let err = a.repeat(u64::MAX, None).check().unwrap_err().to_string();
        assert!(err.contains("repeat") && err.contains("overflow"), "{err}");
        let err = a.tile(&[u64::MAX / 2, 1]).check().unwrap_err().to_string();
        assert!(err.contains("tile") && err.contains("overflow"), "{err}");
    });
}

/// The covariance of the rows, in plain Rust.
fn covariance(rows: &[Vec<f64>], ddof: f64) -> Vec<f64> {
    let n = rows[0].len() as f64;
    let means: Vec<f64> = rows.iter().map(|r| r.iter().sum::<f64>() / n).collect();
    let mut out = vec![];
    for (a, ma) in rows.iter().zip(&means) {
        for (b, mb) in rows.iter().zip(&means) {
            let s: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
            out.push(s / (n - ddof));
        }
    }
    out
}

#[test]
fn cov_matches_a_plain_rust_covariance() {
    both(|np| {
        let rows: Vec<Vec<f64>> = (0..3)
            .map(|r| {
                (0..7)
                    .map(|c| ((r * 7 + c) as f64 * 0.37).sin() * 3.0)
                    .collect()
            })
            .collect();
        let flat: Vec<f64> = rows.concat();
        let m = np.from_f64s(&[3, 7], &flat, DType::F64);
        let close = |got: Vec<f64>, want: Vec<f64>| {
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-13 * (1.0 + w.abs()),
                    "{got:?} vs {want:?}"
                );
            }
        };
        close(m.cov().to_vec().unwrap(), covariance(&rows, 1.0));
        close(
            m.cov_with(true, 0).to_vec().unwrap(),
            covariance(&rows, 0.0),
        );
        // rowvar = false: the columns of the transpose are the same variables.
        close(
            m.t().copy().cov_with(false, 1).to_vec().unwrap(),
            covariance(&rows, 1.0),
        );
        // A vector: its variance, as a 0-d array.
        let v = np.from_f64s(&[7], &rows[0], DType::F64);
        let c = v.cov();
        assert!(c.shape().unwrap().is_empty());
        close(c.to_vec().unwrap(), covariance(&rows[..1], 1.0));
    });
}

#[test]
fn random_integers_and_choice_are_seeded_in_range_and_independent_of_pieces() {
    let draw = |np: &Numeric| {
        let ints = np.random_integers(&[1000], -3, 5, 11, DType::I64);
        assert_eq!(ints.dtype().unwrap(), DType::I64);
        let pool = np.from_f64s(&[4], &[2.0, 4.0, 8.0, 16.0], DType::F64);
        let picked = np.choice(&pool, &[500], 12);
        (ints.to_vec().unwrap(), picked.to_vec().unwrap())
    };
    let (one, three) = (draw(&numeric(1)), draw(&numeric(3)));
    assert_eq!(one, three, "the draws depend on the partitioning");
    let (ints, picked) = one;
    assert!(
        ints.iter()
            .all(|&v| (-3.0..5.0).contains(&v) && v.fract() == 0.0)
    );
    // Every value in the range shows up in 1000 draws.
    for v in -3..5 {
        assert!(ints.contains(&f64::from(v)), "{v} never drawn");
    }
    assert!(picked.iter().all(|v| [2.0, 4.0, 8.0, 16.0].contains(v)));
    for v in [2.0, 4.0, 8.0, 16.0] {
        assert!(picked.contains(&v), "{v} never chosen");
    }
    // Another seed, other draws.
    let np = numeric(1);
    let other = np.random_integers(&[1000], -3, 5, 12, DType::I64);
    assert_ne!(other.to_vec().unwrap(), ints);
    let err = np
        .random_integers(&[3], 5, 5, 1, DType::I64)
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("random_integers") && err.contains("high"),
        "{err}"
    );
    let err = np
        .random_integers(&[3], 0, 5, 1, DType::F64)
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("random_integers") && err.contains("f64"),
        "{err}"
    );
}

#[test]
fn empty_has_the_shape_and_dtype_asked_for() {
    let np = numeric(1);
    let e = np.empty(&[2, 3], DType::F32);
    assert_eq!(e.shape().unwrap(), vec![2, 3]);
    assert_eq!(e.dtype().unwrap(), DType::F32);
    assert_eq!(e.to_vec().unwrap().len(), 6);
}

#[test]
fn typed_host_data_goes_in_and_out_exactly_in_every_dtype() {
    let np = numeric(3);
    // Values f64 cannot hold exactly, and the extremes of each type.
    let i64s = [i64::MIN, -(1 << 53) - 1, 0, 1 << 60, i64::MAX, 7];
    let a = np.from_slice(&[2, 3], &i64s);
    assert_eq!(a.dtype().unwrap(), DType::I64);
    assert_eq!(a.to_vec_of::<i64>().unwrap(), i64s);
    let i32s = [i32::MIN, -1, 0, i32::MAX];
    assert_eq!(np.from_slice(&[4], &i32s).to_vec_of::<i32>().unwrap(), i32s);
    let f32s = [f32::MIN_POSITIVE, -0.0, 1.0e30, f32::EPSILON];
    let got = np.from_slice(&[2, 2], &f32s).to_vec_of::<f32>().unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&f32s));
    let bools = [true, false, false, true, true];
    assert_eq!(
        np.from_slice(&[5], &bools).to_vec_of::<bool>().unwrap(),
        bools
    );
    let f64s = [0.1, -2.5e300, 5e-324];
    assert_eq!(np.from_slice(&[3], &f64s).to_vec_of::<f64>().unwrap(), f64s);
    // Arithmetic on them keeps their type: i64 + 1 stays exact.
    let plus = &np.from_slice(&[1], &[(1i64 << 60) + 1]) + 1;
    assert_eq!(plus.to_vec_of::<i64>().unwrap(), [(1i64 << 60) + 2]);
    // A count that does not fill the shape, and a type that is not the array's.
    let err = np
        .from_slice(&[2, 2], &[1i32, 2, 3])
        .check()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("from_slice") && err.contains("(2, 2)"),
        "{err}"
    );
    let err = a.to_vec_of::<f64>().unwrap_err().to_string();
    assert!(err.contains("i64") && err.contains("f64"), "{err}");
}

#[test]
fn save_and_load_keep_every_dtype_exactly() {
    let np = numeric(1);
    let dir = std::env::temp_dir().join(format!("weft-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let arrays = [
        (
            "i64",
            np.from_slice(&[3], &[i64::MIN, (1 << 53) + 1, -5]),
            "<i8",
        ),
        ("i32", np.from_slice(&[2, 1], &[i32::MAX, -9]), "<i4"),
        ("f32", np.from_slice(&[2], &[0.1f32, -3.5]), "<f4"),
        ("f64", np.from_slice(&[], &[std::f64::consts::PI]), "<f8"),
        ("bool", np.from_slice(&[3], &[true, false, true]), "|b1"),
        ("u8", np.from_slice(&[3], &[0u8, 200, 255]), "|u1"),
        ("u16", np.from_slice(&[2], &[65_535u16, 1]), "<u2"),
        ("u32", np.from_slice(&[2], &[u32::MAX, 7]), "<u4"),
        ("u64", np.from_slice(&[2], &[u64::MAX, 1 << 63]), "<u8"),
    ];
    for (name, a, descr) in &arrays {
        let path = dir.join(format!("{name}.npy"));
        a.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let header = String::from_utf8_lossy(&bytes[..64.min(bytes.len())]).into_owned();
        assert!(header.contains(descr), "{name}: {header}");
        let back = np.load(&path).unwrap();
        assert_eq!(back.dtype().unwrap(), a.dtype().unwrap(), "{name}");
        assert_eq!(back.shape().unwrap(), a.shape().unwrap(), "{name}");
        let same = match a.dtype().unwrap() {
            DType::I64 => back.to_vec_of::<i64>().unwrap() == a.to_vec_of::<i64>().unwrap(),
            DType::I32 => back.to_vec_of::<i32>().unwrap() == a.to_vec_of::<i32>().unwrap(),
            DType::F32 => back.to_vec_of::<f32>().unwrap() == a.to_vec_of::<f32>().unwrap(),
            DType::F64 => back.to_vec_of::<f64>().unwrap() == a.to_vec_of::<f64>().unwrap(),
            DType::Bool => back.to_vec_of::<bool>().unwrap() == a.to_vec_of::<bool>().unwrap(),
            DType::U8 => back.to_vec_of::<u8>().unwrap() == a.to_vec_of::<u8>().unwrap(),
            DType::U16 => back.to_vec_of::<u16>().unwrap() == a.to_vec_of::<u16>().unwrap(),
            DType::U32 => back.to_vec_of::<u32>().unwrap() == a.to_vec_of::<u32>().unwrap(),
            DType::U64 => back.to_vec_of::<u64>().unwrap() == a.to_vec_of::<u64>().unwrap(),
        };
        assert!(same, "{name} changed through a file");
    }
    let err = np.load(dir.join("missing.npy")).unwrap_err().to_string();
    assert!(err.contains("missing.npy"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
