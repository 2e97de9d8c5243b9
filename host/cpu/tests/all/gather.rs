//! CSR rows written in the lane order (`BodyBuilder::fold_lanes`, as the `sparse` plugin's
//! SpMV writes them), whose lanes gather `x[crd[j]]`: every SIMD path runs them as lanes and
//! gives the scalar code's bits, with `i32` and `i64` column indices, rows of every length
//! around the lane and block boundaries, special values, and 1 and 2 threads; the bits
//! equal a plain-Rust reference of the lane order; and a column out of range (in the lanes'
//! blocks or in the tail, past the end or negative) faults as the scalar code does. Long rows
//! run their bulk in the wide bodies on the AVX2 and AVX-512 paths (one `vgatherqpd` per
//! vector); a property test runs random matrices, a bad column among them or not, on every
//! path.

#![allow(clippy::unwrap_used)]

use crate::loops::Csr;
use crate::util::*;
use proptest::prelude::*;
use weft_cpu::{CompiledKernel, CpuBackend, SimdPath, StoreView};
use weft_ir::builder::{FOLD_LANES, KernelBuilder};
use weft_ir::{DType, Kernel, Privilege, ReduceOp, Scalar};

/// `y[i] = sum over row i of vals[j] * x[crd[j] - origin(x)]` in the lane order,
/// the row's entries `ptr[i]..ptr[i + 1]`, its column indices of type `index`.
fn csr_kernel(index: DType) -> Kernel {
    csr_lanes(format!("csr_lanes.{index}"), index, false)
}

/// [`csr_kernel`]'s product named `name`; if `row_of_x`, `x` has two dimensions and the
/// product reads `x[s, crd[j]]`, `s` a scalar argument.
fn csr_lanes(name: String, index: DType, row_of_x: bool) -> Kernel {
    let mut k = KernelBuilder::new(name);
    let ptr = k.store(index, 1, Privilege::Read);
    let crd = k.store(index, 1, Privilege::Read);
    let vals = k.store(DType::F64, 1, Privilege::Read);
    let x = k.store(DType::F64, if row_of_x { 2 } else { 1 }, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let s = row_of_x.then(|| k.scalar(DType::I64));
    k.parallel(y, |b, i| {
        let one = b.const_i64(1);
        let next = b.add(i[0], one);
        let lo = b.load(ptr, &[i[0]]);
        let lo = b.cast(DType::I64, lo);
        let hi = b.load(ptr, &[next]);
        let hi = b.cast(DType::I64, hi);
        let x0 = s.is_none().then(|| b.origin(x, 0));
        let sum = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, hi, |b, j| {
            let c = b.load(crd, &[j]);
            let c = b.cast(DType::I64, c);
            let a = b.load(vals, &[j]);
            let xc = match (s, x0) {
                (Some(s), _) => b.load(x, &[s, c]),
                (None, Some(x0)) => {
                    let c = b.sub(c, x0);
                    b.load(x, &[c])
                }
                (None, None) => unreachable!("x's origin is read when there is no row"),
            };
            b.mul(a, xc)
        });
        b.store(y, i, sum);
    });
    k.finish_validated().unwrap()
}

/// `rows` rows whose lengths cycle through every length up to `4 FOLD_LANES + 3`, and a
/// few long ones; values include every special value.
fn matrix(rows: usize, ncols: usize, seed: u64) -> Csr {
    let lens: Vec<usize> = (0..rows)
        .map(|r| {
            if r % 11 == 10 {
                // Long rows: their bulk runs in the wide bodies where the CPU has them.
                60 + (r % 7) * 23
            } else {
                r % (4 * FOLD_LANES + 4)
            }
        })
        .collect();
    random_csr(&lens, ncols, 7, seed)
}

/// Rows of lengths `lens` at random columns of `0..ncols` (xorshift from `seed`), with
/// values in `[-4, 4)` and, one entry in `special_every`, a special value.
fn random_csr(lens: &[usize], ncols: usize, special_every: u64, seed: u64) -> Csr {
    let sp = specials(DType::F64);
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ptr, mut col, mut val) = (vec![0i64], vec![], vec![]);
    for &len in lens {
        for _ in 0..len {
            let s = next();
            col.push((s % ncols as u64) as i64);
            val.push(if s % special_every == 0 {
                f64::from_bits(sp[(s >> 8) as usize % sp.len()])
            } else {
                (s >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0
            });
        }
        ptr.push(col.len() as i64);
    }
    Csr {
        ptr,
        col,
        val,
        ncols,
    }
}

/// An index buffer of `dt` (`i32` or `i64`) holding `v`.
fn indices(dt: DType, v: &[i64]) -> Vec<u64> {
    match dt {
        DType::I64 => v.iter().map(|&x| x as u64).collect(),
        _ => {
            let mut out = vec![0u64; v.len().div_ceil(2).max(1)];
            for (k, &x) in v.iter().enumerate() {
                let w = u64::from(x as i32 as u32);
                out[k / 2] |= w << (32 * (k % 2));
            }
            out
        }
    }
}

/// Runs `k` on `m` with `x`; returns `y`'s bits, or the error.
fn run(
    k: &CompiledKernel,
    index: DType,
    m: &Csr,
    x: &[f64],
    threads: usize,
) -> weft_cpu::Result<Vec<u64>> {
    run_at(k, index, m, (x, 0), threads)
}

/// [`run`] with `x`'s view at global origin `.1` (the matrix's columns are global).
fn run_at(
    k: &CompiledKernel,
    index: DType,
    m: &Csr,
    (x, x_origin): (&[f64], i64),
    threads: usize,
) -> weft_cpu::Result<Vec<u64>> {
    let rows = m.ptr.len() - 1;
    let mut ptr = indices(index, &m.ptr);
    let mut col = indices(index, &m.col);
    let mut val = m.val.clone();
    let mut x = x.to_vec();
    let mut y = vec![f64::NAN; rows];
    let mut x_view = dense(&mut x, &[m.ncols as i64]);
    x_view.origin = vec![x_origin];
    let views = [
        StoreView::dense(ptr.as_mut_ptr().cast(), &[m.ptr.len() as i64]),
        StoreView::dense(col.as_mut_ptr().cast(), &[m.col.len() as i64]),
        dense(&mut val, &[m.val.len() as i64]),
        x_view,
        dense(&mut y, &[rows as i64]),
    ];
    run_on(k, &views, &[], threads)?;
    Ok(y.iter().map(|v| v.to_bits()).collect())
}

/// `k` compiled on every SIMD path this CPU has, with the count of its lane loops.
fn every_path(k: &Kernel) -> Vec<(SimdPath, CompiledKernel)> {
    let mut be = CpuBackend::new().unwrap();
    be.compiler()
        .available_paths()
        .into_iter()
        .map(|path| {
            be.compiler().set_path(path).unwrap();
            (path, be.compile(k).unwrap())
        })
        .collect()
}

#[test]
fn csr_rows_gather_in_lanes_with_the_scalar_bits_and_the_lane_order() {
    for index in [DType::I32, DType::I64] {
        let k = csr_kernel(index);
        let paths = every_path(&k);
        let scalar = &paths[0].1;
        assert_eq!(paths[0].0, SimdPath::Scalar);
        assert_eq!(scalar.lane_loops(), 0);
        let m = matrix(173, 301, 7);
        let x: Vec<f64> = (0..m.ncols)
            .map(|j| {
                let sp = specials(DType::F64);
                if j % 13 == 0 {
                    f64::from_bits(sp[j % sp.len()])
                } else {
                    1.0 / (j as f64 + 0.75)
                }
            })
            .collect();
        let want = run(scalar, index, &m, &x, 1).unwrap();
        // The scalar code computes the lane order, as written in Rust here.
        for (i, &got) in want.iter().enumerate() {
            let (a, b) = (m.ptr[i] as usize, m.ptr[i + 1] as usize);
            let terms: Vec<f64> = (a..b).map(|j| m.val[j] * x[m.col[j] as usize]).collect();
            let r = lane_sum(&terms);
            assert!(
                got == r.to_bits() || (r.is_nan() && f64::from_bits(got).is_nan()),
                "{index}: row {i}"
            );
        }
        for (path, c) in &paths[1..] {
            // The row's blocks run as lanes gathering `x`, the bulk of long rows in a wide
            // body on the AVX2 and AVX-512 paths.
            assert_eq!(c.lane_loops(), 1, "{index} on {path}");
            let wide = matches!(path, SimdPath::Avx2 | SimdPath::Avx512);
            assert_eq!(c.wide_lane_loops(), usize::from(wide), "{index} on {path}");
            for threads in [1, 2] {
                let got = run(c, index, &m, &x, threads).unwrap();
                assert_eq!(got, want, "{index} on {path}, {threads} threads");
            }
        }
    }
}

#[test]
fn a_column_out_of_range_in_a_gathering_row_faults_as_the_scalar_code_does() {
    for index in [DType::I32, DType::I64] {
        let k = csr_kernel(index);
        let paths = every_path(&k);
        // Row 3 has 21 entries: two blocks of eight and a tail of five. Row 7 has 150:
        // eighteen blocks, which run in the wide bodies on the AVX2 and AVX-512 paths (nine
        // steps of two blocks), and a tail of six.
        let (mut ptr, mut col, mut val) = (vec![0i64], vec![], vec![]);
        for r in 0..12usize {
            let n = match r {
                3 => 21,
                7 => 150,
                _ => r % 5,
            };
            for e in 0..n {
                col.push(((r * 7 + e * 3) % 50) as i64);
                val.push(1.0 + e as f64);
            }
            ptr.push(col.len() as i64);
        }
        let m = Csr {
            ptr,
            col,
            val,
            ncols: 50,
        };
        let x = vec![0.5f64; m.ncols];
        let short = m.ptr[3] as usize;
        let long = m.ptr[7] as usize;
        let cases = [
            (short + 5, 50i64),
            (short + 9, -1),
            (short + 15, 1 << 20),
            (short + 18, 50),
            (short + 20, -7),
            // In the wide bodies' first step, later steps, the last step's last lane, and
            // the tail after them.
            (long, 50),
            (long + 3, -1),
            (long + 8 * 5 + 6, i64::from(i32::MIN)),
            (long + 8 * 9 + 1, i64::from(i32::MAX)),
            (long + 8 * 17 + 2, -2),
            (long + 8 * 18 - 1, 51),
            (long + 147, 1 << 30),
        ];
        for (at, bad) in cases {
            let mut bad_m = Csr {
                ptr: m.ptr.clone(),
                col: m.col.clone(),
                val: m.val.clone(),
                ncols: m.ncols,
            };
            bad_m.col[at] = bad;
            let want = run(&paths[0].1, index, &bad_m, &x, 1).unwrap_err();
            assert!(want.to_string().contains("csr_lanes"), "{index}: {want}");
            for (path, c) in &paths[1..] {
                for threads in [1, 2] {
                    let got = run(c, index, &bad_m, &x, threads).unwrap_err();
                    assert_eq!(
                        got.to_string(),
                        want.to_string(),
                        "{index} on {path}: column {bad} at entry {at}"
                    );
                }
            }
        }
    }
}

/// `y[i] = sum over row i of vals[j] * x[s, crd[j]]` in the lane order, `s` a scalar
/// argument: the gathered row is the same in every iteration, chosen at run time.
fn csr_row_of_x_kernel() -> Kernel {
    csr_lanes("csr_lanes.row_of_x".into(), DType::I32, true)
}

#[test]
fn a_gather_from_a_row_chosen_at_run_time_keeps_the_bits_and_faults_on_a_bad_row() {
    let k = csr_row_of_x_kernel();
    let paths = every_path(&k);
    let m = matrix(120, 97, 11);
    let xrows = 3usize;
    let x: Vec<f64> = (0..xrows * m.ncols)
        .map(|e| 1.0 / (e as f64 + 1.5) - 0.25)
        .collect();
    let go = |c: &CompiledKernel, m: &Csr, s: i64, threads: usize| -> weft_cpu::Result<Vec<u64>> {
        let rows = m.ptr.len() - 1;
        let mut ptr = indices(DType::I32, &m.ptr);
        let mut col = indices(DType::I32, &m.col);
        let mut val = m.val.clone();
        let mut x = x.clone();
        let mut y = vec![f64::NAN; rows];
        let views = [
            StoreView::dense(ptr.as_mut_ptr().cast(), &[m.ptr.len() as i64]),
            StoreView::dense(col.as_mut_ptr().cast(), &[m.col.len() as i64]),
            dense(&mut val, &[m.val.len() as i64]),
            dense(&mut x, &[xrows as i64, m.ncols as i64]),
            dense(&mut y, &[rows as i64]),
        ];
        run_on(c, &views, &[Scalar::I64(s)], threads)?;
        Ok(y.iter().map(|v| v.to_bits()).collect())
    };
    let scalar = &paths[0].1;
    for s in 0..xrows as i64 {
        let want = go(scalar, &m, s, 1).unwrap();
        for (i, &got) in want.iter().enumerate() {
            let (a, b) = (m.ptr[i] as usize, m.ptr[i + 1] as usize);
            let terms: Vec<f64> = (a..b)
                .map(|j| m.val[j] * x[s as usize * m.ncols + m.col[j] as usize])
                .collect();
            let r = lane_sum(&terms);
            assert!(
                got == r.to_bits() || (r.is_nan() && f64::from_bits(got).is_nan()),
                "row {i} of x's row {s}"
            );
        }
        for (path, c) in &paths[1..] {
            let wide = matches!(path, SimdPath::Avx2 | SimdPath::Avx512);
            assert_eq!(c.wide_lane_loops(), usize::from(wide), "{path}");
            for threads in [1, 2] {
                assert_eq!(go(c, &m, s, threads).unwrap(), want, "{path}: x's row {s}");
            }
        }
    }
    // One row of 128 entries, sixteen blocks: every block runs in the wide bodies where the
    // CPU has them, so only the check before the call finds a bad row of `x`.
    let one = Csr {
        ptr: vec![0, 128],
        col: (0..128).map(|j| (j * 5 % m.ncols) as i64).collect(),
        val: (0..128).map(|j| j as f64 - 60.5).collect(),
        ncols: m.ncols,
    };
    for bad in [xrows as i64, -1, i64::MAX] {
        let want = go(scalar, &one, bad, 1).unwrap_err().to_string();
        assert!(want.contains("csr_lanes.row_of_x"), "{want}");
        for (path, c) in &paths[1..] {
            let got = go(c, &one, bad, 2).unwrap_err().to_string();
            assert_eq!(got, want, "{path}: x's row {bad}");
        }
    }
}

/// Random rows (`lens`) at columns and values from `seed` (a special value now and then),
/// `x`'s view at global origin `x_origin` (the columns shifted by it), with `bad` written
/// over one column if given: every path, on 1 and 2 threads, gives the scalar code's bits,
/// or its error.
fn random_rows_match_the_scalar_code(
    index: DType,
    lens: &[usize],
    (ncols, x_origin): (usize, i64),
    bad: Option<(usize, i64)>,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut m = random_csr(lens, ncols, 31, seed);
    for c in &mut m.col {
        *c += x_origin;
    }
    if let Some((at, v)) = bad
        && !m.col.is_empty()
    {
        let k = at % m.col.len();
        m.col[k] = v;
    }
    let x: Vec<f64> = (0..ncols)
        .map(|j| (j as f64 * 0.37 + (seed % 1000) as f64).sin() * 300.0)
        .collect();
    let paths = every_path(&csr_kernel(index));
    let want = run_at(&paths[0].1, index, &m, (&x, x_origin), 1).map_err(|e| e.to_string());
    for (path, c) in &paths[1..] {
        for threads in [1, 2] {
            let got = run_at(c, index, &m, (&x, x_origin), threads).map_err(|e| e.to_string());
            prop_assert_eq!(&got, &want, "{} on {}, {} threads", index, path, threads);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_csr_rows_in_the_lane_order_give_the_scalar_bits_on_every_path(
        i64_columns in any::<bool>(),
        lens in prop::collection::vec(0usize..260, 1..10),
        ncols in 1usize..700,
        x_origin in prop::sample::select(vec![0i64, 1, 37, 1 << 20]),
        bad in prop::option::weighted(
            0.4,
            (any::<usize>(), prop::sample::select(vec![-1i64, -9, 700, 1 << 20, i64::from(i32::MIN)])),
        ),
        seed in any::<u64>(),
    ) {
        let index = if i64_columns { DType::I64 } else { DType::I32 };
        random_rows_match_the_scalar_code(index, &lens, (ncols, x_origin), bad, seed)?;
    }
}
