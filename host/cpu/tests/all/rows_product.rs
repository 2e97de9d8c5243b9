//! The canonical product by rows (`weft_ir::product::matmul_rows`), whose whole blocks of
//! points run through a register-tiled routine, gives the bits of the same kernel run by its
//! compiled code: the control is the kernel with its product's operands swapped (the same
//! bits, since a rounded product does not depend on its operands' order), which the back end
//! does not recognize. Shapes cover full and partial tiles, several blocks with split first
//! and last blocks (views that start off a block boundary), strided columns, both float
//! types, one and two threads, and special values.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CompiledKernel, StoreView};
use weft_ir::builder::KernelBuilder;
use weft_ir::{DType, Kernel, Privilege, ReduceOp};

/// The canonical kernel's body with `B[i, j] * X[i, r]` for `X[i, r] * B[i, j]`.
fn control(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new("rows.control");
    let rows = k.store(dtype, 1, Privilege::Read);
    let xm = k.store(dtype, 2, Privilege::Read);
    let bm = k.store(dtype, 2, Privilege::Read);
    let c = k.store(dtype, 2, Privilege::Reduce(ReduceOp::Sum));
    let m = k.extent(xm, 1);
    let n = k.extent(bm, 1);
    k.parallel(rows, |b, idx| {
        let i = idx[0];
        let lo = b.const_i64(0);
        b.for_loop(lo, m, &[], |b, r, _| {
            let xir = b.load(xm, &[i, r]);
            let lo = b.const_i64(0);
            b.for_loop(lo, n, &[], |b, j, _| {
                let bij = b.load(bm, &[i, j]);
                let p = b.mul(bij, xir);
                b.reduce(c, &[r, j], p);
                vec![]
            });
            vec![]
        });
    });
    k.finish_validated().unwrap()
}

/// Deterministic values with a spread of magnitudes (so that sums round), and a special
/// value (NaN, an infinity, a signed zero) one time in `special` (never if 0).
fn values(n: usize, seed: u64, special: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if special != 0 && s.is_multiple_of(special) {
                return [f64::NAN, f64::INFINITY, -0.0][i % 3];
            }
            ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * (1 << (s % 20)) as f64
        })
        .collect()
}

/// Runs `k` on `p` points (the views starting at global row `origin`) of `X` (`p x m`, each
/// row `xstep` elements apart along its columns) and `B` (`p x n`), into a `C` of `m x n`
/// that starts at `init`; returns `C`'s bits.
#[allow(clippy::too_many_arguments)]
fn run_rows<T: Copy + Default>(
    k: &CompiledKernel,
    (p, m, n): (usize, usize, usize),
    origin: i64,
    xstep: usize,
    special: u64,
    threads: usize,
    of: impl Fn(f64) -> T,
    bits: impl Fn(T) -> u64,
) -> Vec<u64> {
    let mut x: Vec<T> = values(p * m * xstep, 1 + p as u64, special)
        .into_iter()
        .map(&of)
        .collect();
    let mut b: Vec<T> = values(p * n, 2 + n as u64, special)
        .into_iter()
        .map(&of)
        .collect();
    let mut c: Vec<T> = values(m * n, 3, 0).into_iter().map(&of).collect();
    let mut rows: Vec<T> = vec![T::default(); p];
    let view = |ptr: *mut T, extents: Vec<i64>, strides: Vec<i64>| StoreView {
        ptr: ptr.cast(),
        origin: vec![origin; 1]
            .into_iter()
            .chain(std::iter::repeat_n(0, extents.len() - 1))
            .collect(),
        extents,
        strides,
    };
    let stores = [
        view(rows.as_mut_ptr(), vec![p as i64], vec![1]),
        view(
            x.as_mut_ptr(),
            vec![p as i64, m as i64],
            vec![(m * xstep) as i64, xstep as i64],
        ),
        view(b.as_mut_ptr(), vec![p as i64, n as i64], vec![n as i64, 1]),
        dense(&mut c, &[m as i64, n as i64]),
    ];
    run_on(k, &stores, &[], threads).unwrap();
    c.iter().map(|&v| bits(v)).collect()
}

fn canonical_bits(v: u64, is_nan: bool) -> u64 {
    if is_nan { u64::MAX } else { v }
}

#[test]
fn whole_blocks_through_the_routine_give_the_compiled_codes_bits() {
    // Points: less than a block, two blocks and a part, a first block split by the origin.
    let shapes = [
        (100, 8, 8, 0),
        (4096 * 2 + 700, 9, 13, 0),
        (4096 * 2 + 700, 64, 32, 300),
        (5000, 4, 8, 4095),
        (4096, 3, 5, 0),
    ];
    for dtype in [DType::F64, DType::F32] {
        let canonical = compile(&weft_ir::product::matmul_rows("rows", dtype).finish());
        let plain = compile(&control(dtype));
        for &(p, m, n, origin) in &shapes {
            for (xstep, special, threads) in [(1, 0, 1), (1, 7, 2), (2, 0, 2)] {
                let run = |k: &CompiledKernel| match dtype {
                    DType::F32 => run_rows(
                        k,
                        (p, m, n),
                        origin,
                        xstep,
                        special,
                        threads,
                        |v| v as f32,
                        |v: f32| canonical_bits(u64::from(v.to_bits()), v.is_nan()),
                    ),
                    _ => run_rows(
                        k,
                        (p, m, n),
                        origin,
                        xstep,
                        special,
                        threads,
                        |v| v,
                        |v: f64| canonical_bits(v.to_bits(), v.is_nan()),
                    ),
                };
                assert_eq!(
                    run(&canonical),
                    run(&plain),
                    "{dtype} p={p} m={m} n={n} origin={origin} xstep={xstep} special={special} \
                     threads={threads}"
                );
            }
        }
    }
}

#[test]
fn a_product_by_rows_that_reads_past_its_views_faults_as_the_compiled_code_does() {
    // `C` has fewer columns than `B`: the kernel's `C[r, j]` leaves `C`, so the routine
    // declines and the compiled code names the fault.
    let canonical = compile(&weft_ir::product::matmul_rows("rows", DType::F64).finish());
    let plain = compile(&control(DType::F64));
    let (p, m, n) = (4096 * 2, 4, 8);
    let run = |k: &CompiledKernel| {
        let mut rows = vec![0.0f64; p];
        let mut x = vec![1.0f64; p * m];
        let mut b = vec![1.0f64; p * n];
        let mut c = vec![0.0f64; m * (n - 1)];
        let stores = [
            dense(&mut rows, &[p as i64]),
            dense(&mut x, &[p as i64, m as i64]),
            dense(&mut b, &[p as i64, n as i64]),
            dense(&mut c, &[m as i64, (n - 1) as i64]),
        ];
        run_on(k, &stores, &[], 2).unwrap_err().to_string()
    };
    let got = run(&canonical);
    let want = run(&plain).replace("rows.control", "rows");
    assert_eq!(got, want);
    assert!(got.contains("rows"), "{got}");
}
