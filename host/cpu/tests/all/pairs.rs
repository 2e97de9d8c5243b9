//! Scalar `for` loops that run two iterations per trip (a short read-only body whose loads
//! at the induction value are checked before the loop, as a CSR row's): every row length,
//! odd and even, gives the plain loop's values in its order, and a bad index in either
//! iteration of a trip, or in the first iteration of an odd count, faults naming the store.

#![allow(clippy::unwrap_used)]

use crate::loops::{random_csr, spmv_kernel, spmv_reference};
use crate::util::*;
use weft_cpu::Error;
use weft_ir::{BinaryOp, DType, Privilege};

/// `y[i] = fold of acc * 3 + a[j]` over `j` in `ptr[i]..ptr[i + 1]`, from `i`, in wrapping
/// `i64` arithmetic: every reordering of the iterations changes the result.
fn horner_kernel() -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let ptr = kb.store(DType::I64, 1, Privilege::Read);
    let a = kb.store(DType::I64, 1, Privilege::Read);
    let y = kb.store(DType::I64, 1, Privilege::Write);
    let one = kb.i64(1);
    let three = kb.i64(3);
    kb.parallel(y, 1, |kb, idx| {
        let i = idx[0];
        let lo = kb.load(ptr, &[i]);
        let i1 = kb.add(i, one);
        let hi = kb.load(ptr, &[i1]);
        let out = kb.for_loop(lo, hi, &[i], |kb, j, c| {
            let t = kb.bin(BinaryOp::Mul, c[0], three);
            let v = kb.load(a, &[j]);
            vec![kb.add(t, v)]
        });
        kb.store_to(y, &[i], out[0]);
    });
    kb.finish("test.horner")
}

/// The rows' pointers: row `r` has `r % 23` entries, and every eleventh row 100 more.
fn pointers(rows: usize) -> Vec<i64> {
    let mut ptr = vec![0i64];
    for r in 0..rows {
        let len = r % 23 + if r % 11 == 10 { 100 } else { 0 };
        ptr.push(ptr[r] + len as i64);
    }
    ptr
}

fn horner_reference(ptr: &[i64], a: &[i64]) -> Vec<i64> {
    (0..ptr.len() - 1)
        .map(|i| {
            (ptr[i] as usize..ptr[i + 1] as usize)
                .fold(i as i64, |acc, j| acc.wrapping_mul(3).wrapping_add(a[j]))
        })
        .collect()
}

#[test]
fn rows_of_every_length_give_the_plain_loops_values_in_order() {
    let k = compile(&horner_kernel());
    assert!(k.paired_loops() >= 1);
    for (rows, threads) in [(1usize, 1usize), (46, 1), (5000, 2)] {
        let mut ptr = pointers(rows);
        let n = *ptr.last().unwrap() as usize;
        let mut a: Vec<i64> = (0..n as i64)
            .map(|j| j.wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as i64) >> 3)
            .collect();
        let want = horner_reference(&ptr, &a);
        let mut y = vec![0i64; rows];
        let views = [
            dense(&mut ptr, &[rows as i64 + 1]),
            dense(&mut a, &[n as i64]),
            dense(&mut y, &[rows as i64]),
        ];
        run_on(&k, &views, &[], threads).unwrap();
        assert_eq!(y, want, "{rows} rows, {threads} threads");
    }
}

#[test]
fn csr_products_are_paired_and_keep_their_bits() {
    let k = compile(&spmv_kernel());
    assert!(k.paired_loops() >= 1);
    for (rows, threads) in [(37usize, 1usize), (20_000, 2)] {
        let mut m = random_csr(rows, 500, rows as u64 + 5);
        let mut x: Vec<f64> = (0..m.ncols).map(|i| (i as f64 * 0.7).cos()).collect();
        let want = spmv_reference(&m, &x);
        let mut y = vec![f64::NAN; rows];
        let (np, nc) = (m.ptr.len() as i64, m.col.len() as i64);
        let views = [
            dense(&mut m.ptr, &[np]),
            dense(&mut m.col, &[nc]),
            dense(&mut m.val, &[nc]),
            dense(&mut x, &[500]),
            dense(&mut y, &[rows as i64]),
        ];
        run_on(&k, &views, &[], threads).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(&want), "{rows} rows");
    }
}

#[test]
fn a_bad_column_in_either_iteration_of_a_trip_faults() {
    let k = compile(&spmv_kernel());
    // Row 0 has 4 entries (two trips), row 1 has 5 (one alone, then two trips).
    for (entry, bad) in [(0usize, 9i64), (1, -1), (4, 9), (5, 100), (8, -3)] {
        let mut ptr = vec![0i64, 4, 9];
        let mut col: Vec<i64> = (0..9).map(|j| j % 9).collect();
        col[entry] = bad;
        let mut val = vec![1.0f64; 9];
        let mut x = vec![2.0f64; 9];
        let mut y = vec![0.0f64; 2];
        let views = [
            dense(&mut ptr, &[3]),
            dense(&mut col, &[9]),
            dense(&mut val, &[9]),
            dense(&mut x, &[9]),
            dense(&mut y, &[2]),
        ];
        match run_on(&k, &views, &[], 1) {
            Err(Error::KernelFault { kernel, message }) => assert!(
                kernel == "test.spmv" && message.contains("store parameter 3 (dim 0)"),
                "entry {entry}: {kernel}: {message}"
            ),
            other => panic!("entry {entry}: expected a fault, got {other:?}"),
        }
    }
}
