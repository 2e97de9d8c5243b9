//! `for` loops whose carried values form lanes (`BodyBuilder::fold_lanes`) compiled as 128-bit
//! vectors: the same bits as the scalar code for every operator and element type, on rows of
//! every length around the lane and block boundaries, with special values (NaN, signed zeros,
//! infinities, subnormals); views whose last stride is not one element take the scalar code;
//! an index out of bounds faults as in the scalar code; and a row sum equals a plain-Rust
//! reference of the lane order. The same holds for the loops whose bulk runs in wide bodies
//! (AVX2 and AVX-512, where the CPU has them): eight `f64` lanes at a time.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CompiledKernel, CpuBackend, SimdPath, StoreView};
use weft_ir::builder::{BodyBuilder, FOLD_LANES, KernelBuilder, StoreParam, Value};
use weft_ir::{DType, Kernel, Privilege, ReduceOp};

/// The skeleton of this file's row kernels: `y[i] = row(b, i, n, a, x)` for each row `i`
/// of `a` (`(m, n)` of `from`), `x` (`n`) and `y` (`m`) of `dtype`.
fn rows_kernel(
    name: String,
    (dtype, from): (DType, DType),
    row: impl FnOnce(&mut BodyBuilder, Value, Value, StoreParam, StoreParam) -> Value,
) -> Kernel {
    let mut k = KernelBuilder::new(name);
    let a = k.store(from, 2, Privilege::Read);
    let x = k.store(dtype, 1, Privilege::Read);
    let y = k.store(dtype, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let r = row(b, i[0], n, a, x);
        b.store(y, i, r);
    });
    k.finish_validated().unwrap()
}

/// `y[i] = op over j of term(a[i, j], x[j])`, the term a product for sums and products and
/// `a[i, j]` itself for `min` and `max`; `cast` converts `a`'s elements (of type `from`) to
/// `dtype` first.
fn row_kernel(op: ReduceOp, dtype: DType, from: DType) -> Kernel {
    let name = format!("rows.{}.{dtype}.{from}", op.name());
    rows_kernel(name, (dtype, from), |b, i, n, a, x| {
        let lo = b.const_i64(0);
        b.fold_lanes(op, dtype, lo, n, |b, j| {
            let v = b.load(a, &[i, j]);
            let v = if from == dtype { v } else { b.cast(dtype, v) };
            match op {
                ReduceOp::Sum | ReduceOp::Prod => {
                    let xj = b.load(x, &[j]);
                    b.mul(v, xj)
                }
                ReduceOp::Min | ReduceOp::Max => v,
            }
        })
    })
}

/// Compiles `k` with the 128-bit vector lowering (asserting that `lanes` loops run as lanes)
/// and without.
fn both(k: &Kernel, lanes: usize) -> (CompiledKernel, CompiledKernel) {
    let mut be = CpuBackend::new().unwrap();
    assert!(be.simd(), "this test needs a CPU with 128-bit vectors");
    be.compiler().set_path(SimdPath::Sse).unwrap();
    let v = be.compile(k).unwrap();
    be.set_simd(false);
    let s = be.compile(k).unwrap();
    assert_eq!(v.lane_loops(), lanes, "lane loops of {}", k.name);
    assert_eq!(v.wide_lane_loops(), 0);
    assert_eq!(s.lane_loops(), 0);
    // Each row loop runs two rows at a time beside 128-bit vectors; the scalar code, one.
    assert_eq!(v.jammed_loops(), lanes, "jammed loops of {}", k.name);
    assert_eq!(s.jammed_loops(), 0);
    (v, s)
}

/// `k` compiled on every wide path this CPU has (AVX2, AVX-512), asserting that `wide` of
/// its lane loops run their bulk in wide bodies.
fn wide_paths(k: &Kernel, wide: usize) -> Vec<(SimdPath, CompiledKernel)> {
    let mut be = CpuBackend::new().unwrap();
    let paths: Vec<SimdPath> = be
        .compiler()
        .available_paths()
        .into_iter()
        .filter(|p| matches!(p, SimdPath::Avx2 | SimdPath::Avx512))
        .collect();
    eprintln!("{}: wide paths checked: {paths:?}", k.name);
    paths
        .into_iter()
        .map(|path| {
            be.compiler().set_path(path).unwrap();
            let c = be.compile(k).unwrap();
            assert_eq!(c.wide_lane_loops(), wide, "{} on {path}", k.name);
            assert_eq!(c.jammed_loops(), 1, "jammed loops of {} on {path}", k.name);
            (path, c)
        })
        .collect()
}

/// Rows of the matrices that fault: a jam of four rows (wide bodies) or two (128-bit vectors)
/// and rows left to run one at a time.
const ROWS: usize = 6;

/// Deterministic values of `dt` as bits: specials and a spread of ordinary values, small
/// enough that products and sums of integers wrap only sometimes.
fn values(dt: DType, count: usize, seed: u64, with_specials: bool) -> Vec<u64> {
    let sp = specials(dt);
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..count)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if with_specials && dt.is_float() && state.is_multiple_of(5) {
                return sp[i % sp.len()];
            }
            let m = (state >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0;
            match dt {
                DType::F64 => m.to_bits(),
                DType::F32 => u64::from((m as f32).to_bits()),
                DType::I64 => (state >> 3) as i64 as u64,
                DType::I32 => u64::from((state >> 5) as u32),
                DType::Bool => state & 1,
                DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                    unreachable!("storage types hold no values")
                }
            }
        })
        .collect()
}

/// A buffer of `bits`, each element of `dt` in native byte order, 8-byte aligned.
fn buffer(dt: DType, bits: &[u64]) -> Vec<u64> {
    let mut bytes = Vec::with_capacity(bits.len() * dt.size());
    for b in bits {
        bytes.extend_from_slice(&b.to_le_bytes()[..dt.size()]);
    }
    let mut out = vec![0u64; bytes.len().div_ceil(8).max(1)];
    for (i, byte) in bytes.iter().enumerate() {
        out[i / 8] |= u64::from(*byte) << (8 * (i % 8));
    }
    out
}

/// Element `i` of a buffer of `dt` as bits, NaNs made canonical (the IR leaves their payload
/// and sign unspecified).
fn element(dt: DType, buf: &[u64], i: usize) -> u64 {
    let size = dt.size();
    let mut b = [0u8; 8];
    for (k, byte) in b.iter_mut().enumerate().take(size) {
        let at = i * size + k;
        *byte = (buf[at / 8] >> (8 * (at % 8))) as u8;
    }
    let bits = u64::from_le_bytes(b);
    match dt {
        DType::F64 if f64::from_bits(bits).is_nan() => f64::NAN.to_bits(),
        DType::F32 if f32::from_bits(bits as u32).is_nan() => u64::from(f32::NAN.to_bits()),
        _ => bits,
    }
}

/// The inputs [`run_rows`] draws.
#[derive(Clone, Copy, Debug)]
enum Inputs {
    /// Special values (NaN, infinities, signed zeros, subnormals) one time in five: then
    /// every long row's result is one.
    Specials,
    /// Ordinary values only.
    Plain,
}

/// Runs `k` on an `m x n` matrix `a` (of `from`) and a vector `x` of `n` (of `dt`), with
/// `a` seen through a view whose last stride is `step` elements, both drawn as `inputs`
/// says; returns `y` as bits.
fn run_rows(
    inputs: Inputs,
    k: &CompiledKernel,
    (dt, from): (DType, DType),
    (m, n, step): (usize, usize, usize),
    threads: usize,
) -> weft_cpu::Result<Vec<u64>> {
    let specials = matches!(inputs, Inputs::Specials);
    let mut a = buffer(
        from,
        &values(from, m * n * step, (m * 31 + n) as u64, specials),
    );
    let mut x = buffer(dt, &values(dt, n, (n * 17 + m) as u64 + 1, specials));
    let mut y = vec![0u64; (m * dt.size()).div_ceil(8).max(1)];
    let a_view = StoreView {
        ptr: a.as_mut_ptr().cast(),
        extents: vec![m as i64, n as i64],
        strides: vec![(n * step) as i64, step as i64],
        origin: vec![0, 0],
    };
    let x_view = StoreView::dense(x.as_mut_ptr().cast(), &[n as i64]);
    let y_view = StoreView::dense(y.as_mut_ptr().cast(), &[m as i64]);
    run_on(k, &[a_view, x_view, y_view], &[], threads)?;
    Ok((0..m).map(|i| element(dt, &y, i)).collect())
}

/// Row lengths around every lane and block boundary (and every step of a wide body, two
/// blocks), and a long one with a tail.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=4 * FOLD_LANES + 3).collect();
    v.extend([63, 64, 65, 1003]);
    v
}

/// Asserts that `k` gives the bits of `scalar` on rows of every length of [`lengths`], few
/// and many, on one and two threads, with and without special values.
fn same_rows(k: &CompiledKernel, scalar: &CompiledKernel, types: (DType, DType), what: &str) {
    for n in lengths() {
        // Rows jam four or two at a time: 3 leaves a row or all three to the rest, 8 none.
        for (m, threads) in [(3, 1), (8, 1), (37, 2)] {
            for inputs in [Inputs::Specials, Inputs::Plain] {
                let got = run_rows(inputs, k, types, (m, n, 1), threads).unwrap();
                let want = run_rows(inputs, scalar, types, (m, n, 1), 1).unwrap();
                assert_eq!(
                    got, want,
                    "{what}: {inputs:?} n={n} m={m} threads={threads}"
                );
            }
        }
    }
}

#[test]
fn row_reductions_in_lanes_give_the_scalar_bits() {
    let cases = [
        (DType::F64, DType::F64),
        (DType::F32, DType::F32),
        (DType::I64, DType::I64),
        (DType::I32, DType::I32),
        (DType::F64, DType::I64),
        (DType::F32, DType::I32),
    ];
    for (dt, from) in cases {
        for op in ReduceOp::ALL {
            let k = row_kernel(op, dt, from);
            let (v, s) = both(&k, 1);
            same_rows(&v, &s, (dt, from), &k.name);
        }
    }
}

/// `y[i]` = the sum of `a[i, j] * x[j]` over `j` with each term added by `fma`
/// (`BodyBuilder::fold_lanes_fma`, the dense product's order).
fn fma_row_kernel(dtype: DType) -> Kernel {
    rows_kernel(
        format!("rows.fma.{dtype}"),
        (dtype, dtype),
        |b, i, n, a, x| {
            let lo = b.const_i64(0);
            b.fold_lanes_fma(dtype, lo, n, |b, j| (b.load(a, &[i, j]), b.load(x, &[j])))
        },
    )
}

#[test]
fn fma_rows_in_lanes_give_the_scalar_bits_and_the_rust_lane_order() {
    for dt in [DType::F64, DType::F32] {
        let k = fma_row_kernel(dt);
        let (v, s) = both(&k, 1);
        same_rows(&v, &s, (dt, dt), &k.name);
        // The wide bodies take `fma` on `f64` lanes (`vfmadd...pd`), where the CPU has the
        // FMA instructions; `f32` lanes keep the 128-bit code.
        let wide = usize::from(dt == DType::F64 && std::arch::is_x86_feature_detected!("fma"));
        for (path, w) in wide_paths(&k, wide) {
            same_rows(&w, &s, (dt, dt), &format!("{} on {path}", k.name));
        }
    }
    // Against the order written out with Rust's `mul_add`, on values whose sums differ when
    // products are rounded first (checked below), so the test fails if a lowering does: the
    // 128-bit lanes and every wide path.
    let k = fma_row_kernel(DType::F64);
    let (v, _) = both(&k, 1);
    let wide = usize::from(std::arch::is_x86_feature_detected!("fma"));
    let mut compiled = vec![("128-bit".to_string(), v)];
    compiled.extend(
        wide_paths(&k, wide)
            .into_iter()
            .map(|(p, c)| (p.to_string(), c)),
    );
    for (path, v) in &compiled {
        rows_match_rust_mul_add(v, path);
    }
}

/// Checks the rows of `fma_row_kernel(F64)`, compiled as `v` (on `path`), against the lane
/// order written out with Rust's `mul_add`.
fn rows_match_rust_mul_add(v: &CompiledKernel, path: &str) {
    let (m, n) = (5, 203);
    let mut a: Vec<f64> = values(DType::F64, m * n, 7, false)
        .into_iter()
        .map(f64::from_bits)
        .collect();
    let mut x: Vec<f64> = values(DType::F64, n, 11, false)
        .into_iter()
        .map(f64::from_bits)
        .collect();
    let y = run_f64_rows(v, &mut a, &mut x);
    let mut rounded_twice_differs = false;
    for (i, got) in y.iter().enumerate() {
        let row = &a[i * n..(i + 1) * n];
        let blocks = n / FOLD_LANES;
        let mut s = [0.0f64; FOLD_LANES];
        for q in 0..blocks {
            for (l, acc) in s.iter_mut().enumerate() {
                let j = q * FOLD_LANES + l;
                *acc = row[j].mul_add(x[j], *acc);
            }
        }
        let tail = (blocks * FOLD_LANES..n).fold(0.0f64, |acc, j| row[j].mul_add(x[j], acc));
        let want = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail;
        assert_eq!(got.to_bits(), want.to_bits(), "row {i} on {path}");
        let terms: Vec<f64> = (0..n).map(|j| row[j] * x[j]).collect();
        rounded_twice_differs |= lane_sum(&terms).to_bits() != want.to_bits();
    }
    assert!(rounded_twice_differs, "no row tells one rounding from two");
}

#[test]
fn a_view_with_a_wider_last_stride_takes_the_scalar_code_with_the_same_bits() {
    for dt in [DType::F64, DType::F32] {
        let k = row_kernel(ReduceOp::Sum, dt, dt);
        let (v, s) = both(&k, 1);
        for n in [0, 7, 8, 9, 33] {
            let got = run_rows(Inputs::Specials, &v, (dt, dt), (5, n, 3), 2).unwrap();
            let want = run_rows(Inputs::Specials, &s, (dt, dt), (5, n, 3), 1).unwrap();
            assert_eq!(got, want, "{dt} n={n}");
        }
    }
}

/// Runs a row kernel of `f64` on `a` (`x.len()` columns) and `x` at two threads: `y`.
fn run_f64_rows(k: &CompiledKernel, a: &mut [f64], x: &mut [f64]) -> Vec<f64> {
    let (m, n) = (a.len() / x.len(), x.len());
    let mut y = vec![0.0f64; m];
    let stores = [
        dense(a, &[m as i64, n as i64]),
        dense(x, &[n as i64]),
        dense(&mut y, &[m as i64]),
    ];
    run_on(k, &stores, &[], 2).unwrap();
    y
}

#[test]
fn a_matvec_row_in_lanes_equals_the_lane_order_written_in_rust() {
    let k = row_kernel(ReduceOp::Sum, DType::F64, DType::F64);
    let (v, _) = both(&k, 1);
    let (m, n) = (9, 1003);
    let mut a: Vec<f64> = (0..m * n)
        .map(|i| ((i * 7919) % 1013) as f64 / 97.0 - 5.0)
        .collect();
    let mut x: Vec<f64> = (0..n).map(|j| 1.0 / (j as f64 + 1.5)).collect();
    let y = run_f64_rows(&v, &mut a, &mut x);
    for (i, got) in y.iter().enumerate() {
        let terms: Vec<f64> = (0..n).map(|j| a[i * n + j] * x[j]).collect();
        assert_eq!(got.to_bits(), lane_sum(&terms).to_bits(), "row {i}");
    }
}

#[test]
fn an_index_past_the_end_in_a_lane_loop_faults_as_the_scalar_code_does() {
    // `x` is shorter than `a`'s rows: the lanes read past its end.
    let k = row_kernel(ReduceOp::Sum, DType::F64, DType::F64);
    let (v, s) = both(&k, 1);
    for n in [8, 13, 40] {
        let mut a = vec![1.0f64; ROWS * n];
        let mut x = vec![1.0f64; n - 3];
        let mut y = vec![0.0f64; ROWS];
        let stores = |a: &mut Vec<f64>, x: &mut Vec<f64>, y: &mut Vec<f64>| {
            [
                dense(a, &[ROWS as i64, n as i64]),
                dense(x, &[(n - 3) as i64]),
                dense(y, &[ROWS as i64]),
            ]
        };
        let got = run_on(&v, &stores(&mut a, &mut x, &mut y), &[], 2).unwrap_err();
        let want = run_on(&s, &stores(&mut a, &mut x, &mut y), &[], 1).unwrap_err();
        assert_eq!(got.to_string(), want.to_string(), "n={n}");
        assert!(got.to_string().contains("rows.sum.f64.f64"), "{got}");
    }
}

/// `y[i] = sum over j of f(a[i, j], x[j])` with every operation lanes take on `dt`, so each
/// one's vector form is checked against the scalar code (operand order included).
fn mixed_kernel(dt: DType) -> Kernel {
    use weft_ir::{BinaryOp as B, UnaryOp as U};
    rows_kernel(format!("rows.mixed.{dt}"), (dt, dt), |b, i, n, a, x| {
        let lo = b.const_i64(0);
        b.fold_lanes(ReduceOp::Sum, dt, lo, n, |b, j| {
            let u = b.load(a, &[i, j]);
            let v = b.load(x, &[j]);
            let c = b.const_of(dt, 3.0);
            let d = b.binary(B::Sub, u, v);
            let e = b.binary(B::Min, d, c);
            let f = b.binary(B::Max, e, v);
            if dt.is_float() {
                let g = b.binary(B::Div, f, b.binary(B::Add, u, c));
                let h = b.unary(U::Sqrt, b.unary(U::Abs, g));
                b.unary(U::Neg, b.binary(B::Sub, h, u))
            } else {
                let g = b.binary(B::Xor, b.binary(B::And, f, u), b.binary(B::Or, v, c));
                let h = b.unary(U::Abs, b.unary(U::Neg, g));
                b.binary(B::Mul, b.unary(U::Not, h), c)
            }
        })
    })
}

#[test]
fn every_lane_operation_gives_the_scalar_bits() {
    for dt in [DType::F64, DType::F32, DType::I64, DType::I32] {
        let k = mixed_kernel(dt);
        let (v, s) = both(&k, 1);
        for n in lengths() {
            let got = run_rows(Inputs::Specials, &v, (dt, dt), (4, n, 1), 2).unwrap();
            let want = run_rows(Inputs::Specials, &s, (dt, dt), (4, n, 1), 1).unwrap();
            assert_eq!(got, want, "{} n={n}", k.name);
            let got = run_rows(Inputs::Plain, &v, (dt, dt), (4, n, 1), 2).unwrap();
            let want = run_rows(Inputs::Plain, &s, (dt, dt), (4, n, 1), 1).unwrap();
            assert_eq!(got, want, "{} plain n={n}", k.name);
        }
    }
}

#[test]
fn a_negative_index_in_a_lane_loop_faults_as_the_scalar_code_does() {
    // The row sums start at column -3: the first block's lowest index is below 0.
    let mut k = KernelBuilder::new("rows.from_minus_three");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let lo = b.const_i64(-3);
        let r = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
            b.load(a, &[i[0], j])
        });
        b.store(y, i, r);
    });
    let k = k.finish_validated().unwrap();
    let (v, s) = both(&k, 1);
    for n in [8usize, 13, 40] {
        let mut av = vec![1.0f64; ROWS * n];
        let mut yv = vec![0.0f64; ROWS];
        let stores = |a: &mut Vec<f64>, y: &mut Vec<f64>| {
            [dense(a, &[ROWS as i64, n as i64]), dense(y, &[ROWS as i64])]
        };
        let got = run_on(&v, &stores(&mut av, &mut yv), &[], 2).unwrap_err();
        let want = run_on(&s, &stores(&mut av, &mut yv), &[], 1).unwrap_err();
        assert_eq!(got.to_string(), want.to_string(), "n={n}");
        assert!(got.to_string().contains("rows.from_minus_three"), "{got}");
    }
}

#[test]
fn row_reductions_in_wide_lanes_give_the_scalar_bits() {
    let cases = [
        (DType::F64, DType::F64),
        (DType::F32, DType::F32),
        (DType::I64, DType::I64),
        (DType::F64, DType::I64),
    ];
    for (dt, from) in cases {
        for op in ReduceOp::ALL {
            let k = row_kernel(op, dt, from);
            // Wide bodies take `f64` lanes (casts and other types keep the 128-bit code).
            let takes = dt == DType::F64 && from == DType::F64;
            let (_, s) = both(&k, 1);
            for (path, w) in wide_paths(&k, usize::from(takes)) {
                same_rows(&w, &s, (dt, from), &format!("{} on {path}", k.name));
                // A wider last stride takes the scalar code.
                let got = run_rows(Inputs::Specials, &w, (dt, from), (5, 40, 3), 2).unwrap();
                let want = run_rows(Inputs::Specials, &s, (dt, from), (5, 40, 3), 1).unwrap();
                assert_eq!(got, want, "{} on {path}: a stride of 3", k.name);
            }
        }
    }
}

/// `y[i] = sum over j of f(a[i, j], x[j])` with `add`, `sub`, `mul`, `div`, `min` and `max`
/// in both operand orders, a constant and a uniform value computed before the loop (`i + 0.5`), and
/// sixteen products live at once (so an AVX2 body spills registers).
fn wide_arith_kernel() -> Kernel {
    let mut k = KernelBuilder::new("rows.wide_arith");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let x = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let lo = b.const_i64(0);
        let half = b.const_of(DType::F64, 0.5);
        let u = b.add(b.cast(DType::F64, i[0]), half);
        let r = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
            let p = b.load(a, &[i[0], j]);
            let q = b.load(x, &[j]);
            let c = b.const_of(DType::F64, 3.0);
            let d = b.sub(p, q);
            let e = b.div(b.mul(d, c), b.add(q, u));
            let f = b.sub(u, b.div(c, e));
            let f = b.max(b.min(f, p), b.min(q, f));
            let terms: Vec<_> = (0..16)
                .map(|t| {
                    let w = b.const_of(DType::F64, 1.0 + t as f64 / 8.0);
                    b.mul(b.add(f, w), b.sub(p, w))
                })
                .collect();
            terms.into_iter().fold(f, |acc, t| b.add(acc, t))
        });
        b.store(y, i, r);
    });
    k.finish_validated().unwrap()
}

#[test]
fn every_wide_lane_operation_gives_the_scalar_bits() {
    for k in [wide_arith_kernel(), mixed_kernel(DType::F64)] {
        wide_bits(&k);
    }
}

/// `k` (a row kernel of `f64`) on every wide path, against the 128-bit and scalar code.
fn wide_bits(k: &Kernel) {
    let (v, s) = both(k, 1);
    for (path, w) in wide_paths(k, 1) {
        for n in lengths() {
            for inputs in [Inputs::Specials, Inputs::Plain] {
                let got = run_rows(inputs, &w, (DType::F64, DType::F64), (4, n, 1), 2).unwrap();
                let narrow = run_rows(inputs, &v, (DType::F64, DType::F64), (4, n, 1), 2).unwrap();
                let want = run_rows(inputs, &s, (DType::F64, DType::F64), (4, n, 1), 1).unwrap();
                assert_eq!(got, want, "{} on {path}: n={n}", k.name);
                assert_eq!(narrow, want, "{} on sse: n={n}", k.name);
            }
        }
    }
}

#[test]
fn an_index_out_of_bounds_in_a_wide_lane_loop_faults_as_the_scalar_code_does() {
    // `x` is shorter than `a`'s rows: the first block is in bounds and a later one is not,
    // or the first is not. At n = 208 and 416 the wide body would run every block, with no
    // 128-bit iterations after it to fault: it must not start.
    let k = row_kernel(ReduceOp::Sum, DType::F64, DType::F64);
    let (_, s) = both(&k, 1);
    for (path, w) in wide_paths(&k, 1) {
        let cases = [
            (8, 3),
            (13, 3),
            (40, 3),
            (200, 3),
            (208, 150),
            (416, 5),
            (3000, 1),
        ];
        for (n, short) in cases {
            let mut a = vec![1.0f64; ROWS * n];
            let mut x = vec![1.0f64; n - short];
            let mut y = vec![0.0f64; ROWS];
            let stores = |a: &mut Vec<f64>, x: &mut Vec<f64>, y: &mut Vec<f64>| {
                [
                    dense(a, &[ROWS as i64, n as i64]),
                    dense(x, &[(n - short) as i64]),
                    dense(y, &[ROWS as i64]),
                ]
            };
            let got = run_on(&w, &stores(&mut a, &mut x, &mut y), &[], 2).unwrap_err();
            let want = run_on(&s, &stores(&mut a, &mut x, &mut y), &[], 1).unwrap_err();
            assert_eq!(got.to_string(), want.to_string(), "{path}: n={n}");
        }
    }
    // The row sums start at column -3: the first iteration's check fails before any call.
    let mut k = KernelBuilder::new("rows.wide_from_minus_three");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let lo = b.const_i64(-3);
        let r = b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
            let v = b.load(a, &[i[0], j]);
            b.mul(v, v)
        });
        b.store(y, i, r);
    });
    let k = k.finish_validated().unwrap();
    let (_, s) = both(&k, 1);
    for (path, w) in wide_paths(&k, 1) {
        for n in [8usize, 40, 300] {
            let mut av = vec![1.0f64; ROWS * n];
            let mut yv = vec![0.0f64; ROWS];
            let stores = |a: &mut Vec<f64>, y: &mut Vec<f64>| {
                [dense(a, &[ROWS as i64, n as i64]), dense(y, &[ROWS as i64])]
            };
            let got = run_on(&w, &stores(&mut av, &mut yv), &[], 2).unwrap_err();
            let want = run_on(&s, &stores(&mut av, &mut yv), &[], 1).unwrap_err();
            assert_eq!(got.to_string(), want.to_string(), "{path}: n={n}");
        }
    }
}
