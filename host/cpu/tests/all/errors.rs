//! Faults and mismatches: out-of-bounds indices stop a kernel with an error (never a crash),
//! mismatched arguments and invalid IR are refused.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::CpuBackend;
use weft_cpu::Error;
use weft_ir::{DType, Privilege, ReduceOp, Scalar};

/// y[i] = x[idx[i]]
fn gather() -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let idx = kb.store(DType::I64, 1, Privilege::Read);
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(y, 1, |kb, i| {
        let j = kb.load(idx, &[i[0]]);
        let v = kb.load(x, &[j]);
        kb.store_to(y, &[i[0]], v);
    });
    kb.finish("test.gather")
}

fn fault_message(r: weft_cpu::Result<()>) -> String {
    match r {
        Err(Error::KernelFault { kernel, message }) => format!("{kernel}: {message}"),
        other => panic!("expected a kernel fault, got {other:?}"),
    }
}

#[test]
fn out_of_bounds_computed_index_is_a_fault() {
    let k = compile(&gather());
    let mut x = vec![1.0, 2.0, 3.0];
    for (bad, threads) in [(3i64, 1usize), (-1, 1), (i64::MAX, 2), (i64::MIN, 2)] {
        let n = 100_000usize;
        let mut idx: Vec<i64> = (0..n as i64).map(|i| i % 3).collect();
        idx[77_777] = bad;
        let mut y = vec![0.0; n];
        let views = [
            dense(&mut idx, &[n as i64]),
            dense(&mut x, &[3]),
            dense(&mut y, &[n as i64]),
        ];
        let msg = fault_message(run_on(&k, &views, &[], threads));
        assert!(
            msg.contains("test.gather") && msg.contains("store parameter 1 (dim 0)"),
            "{msg}"
        );
    }
    // The kernel still runs after a fault.
    let mut idx = vec![2i64, 0];
    let mut y = vec![0.0; 2];
    run(
        &k,
        &[
            dense(&mut idx, &[2]),
            dense(&mut x, &[3]),
            dense(&mut y, &[2]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y, vec![3.0, 1.0]);
}

#[test]
fn out_of_bounds_in_the_second_dimension() {
    // y[i] = a[i, i + 1]: checked on dim 1 only (dim 0 is proven).
    let mut kb = Kb::new();
    let a = kb.store(DType::F32, 2, Privilege::Read);
    let y = kb.store(DType::F32, 1, Privilege::Write);
    kb.parallel(y, 1, |kb, i| {
        let one = kb.i64(1);
        let j = kb.add(i[0], one);
        let v = kb.load(a, &[i[0], j]);
        kb.store_to(y, &[i[0]], v);
    });
    let k = compile(&kb.finish("test.diag"));
    let mut av = vec![0.0f32; 16];
    let mut yv = vec![0.0f32; 4];
    let msg = fault_message(run(
        &k,
        &[dense(&mut av, &[4, 4]), dense(&mut yv, &[4])],
        &[],
    ));
    assert!(msg.contains("store parameter 0 (dim 1)"), "{msg}");
    // On a 4x5 view every index is in bounds.
    let mut av = vec![1.0f32; 20];
    run(&k, &[dense(&mut av, &[4, 5]), dense(&mut yv, &[4])], &[]).unwrap();
}

#[test]
fn loop_index_past_a_smaller_store_is_a_fault() {
    // y[i] = x[i] with the loop over y, which is longer than x: the proof fails at run time.
    let mut kb = Kb::new();
    let x = kb.store(DType::I32, 1, Privilege::Read);
    let y = kb.store(DType::I32, 1, Privilege::Write);
    kb.parallel(y, 1, |kb, i| {
        let v = kb.load(x, &[i[0]]);
        kb.store_to(y, &[i[0]], v);
    });
    let k = compile(&kb.finish("test.copy"));
    let mut xv = vec![1i32; 10];
    let mut yv = vec![0i32; 11];
    let msg = fault_message(run(
        &k,
        &[dense(&mut xv, &[10]), dense(&mut yv, &[11])],
        &[],
    ));
    assert!(msg.contains("store parameter 0 (dim 0)"), "{msg}");
    assert!(yv.iter().all(|&v| v == 0), "nothing ran");
    // Longer input is fine.
    let mut xv = vec![1i32; 12];
    run(&k, &[dense(&mut xv, &[12]), dense(&mut yv, &[11])], &[]).unwrap();
    assert!(yv.iter().all(|&v| v == 1));
}

#[test]
fn out_of_bounds_in_top_level_code_and_reductions() {
    // A top-level load at a scalar index, and a reduction at a computed index.
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let h = kb.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    let p = kb.scalar(DType::I64);
    let pi = kb.param(p);
    let v = kb.load(x, &[pi]);
    kb.parallel(x, 1, |kb, i| {
        let two = kb.i64(2);
        let j = kb.mul(i[0], two);
        kb.reduce(h, &[j], ReduceOp::Sum, v);
    });
    let k = compile(&kb.finish("test.toplevel_oob"));
    let mut xv = vec![1.0; 8];
    let mut hv = vec![0.0; 16];
    let msg = fault_message(run(
        &k,
        &[dense(&mut xv, &[8]), dense(&mut hv, &[16])],
        &[Scalar::I64(8)],
    ));
    assert!(msg.contains("store parameter 0 (dim 0)"), "{msg}");
    let mut hv = vec![0.0; 14];
    let msg = fault_message(run(
        &k,
        &[dense(&mut xv, &[8]), dense(&mut hv, &[14])],
        &[Scalar::I64(7)],
    ));
    assert!(msg.contains("store parameter 1 (dim 0)"), "{msg}");
    let mut hv = vec![0.0; 16];
    run(
        &k,
        &[dense(&mut xv, &[8]), dense(&mut hv, &[16])],
        &[Scalar::I64(7)],
    )
    .unwrap();
    assert_eq!(hv.iter().sum::<f64>(), 8.0);
}

#[test]
fn mismatched_arguments_are_refused() {
    let k = compile(&gather());
    let mut idx = vec![0i64; 2];
    let mut x = vec![0.0; 2];
    let mut y = vec![0.0; 2];
    let views = |idx: &mut Vec<i64>, x: &mut Vec<f64>, y: &mut Vec<f64>| {
        vec![dense(idx, &[2]), dense(x, &[2]), dense(y, &[2])]
    };
    // Too few stores.
    let v = views(&mut idx, &mut x, &mut y);
    let msg = fault_message(run(&k, &v[..2], &[]));
    assert!(msg.contains("expected 3 store arguments, got 2"), "{msg}");
    // An extra scalar.
    let msg = fault_message(run(&k, &v, &[Scalar::F64(1.0)]));
    assert!(msg.contains("scalar arguments"), "{msg}");
    // Wrong rank.
    let mut v2 = views(&mut idx, &mut x, &mut y);
    v2[1] = dense(&mut x, &[1, 2]);
    let msg = fault_message(run(&k, &v2, &[]));
    assert!(msg.contains("rank"), "{msg}");
    // Strides of the wrong length.
    let mut v3 = views(&mut idx, &mut x, &mut y);
    v3[2].strides = vec![];
    assert!(matches!(run(&k, &v3, &[]), Err(Error::KernelFault { .. })));
    // A negative extent.
    let mut v4 = views(&mut idx, &mut x, &mut y);
    v4[1].extents = vec![-1];
    let msg = fault_message(run(&k, &v4, &[]));
    assert!(msg.contains("negative extent"), "{msg}");

    // Scalar types.
    let mut kb = Kb::new();
    let out = kb.store(DType::F64, 1, Privilege::Write);
    let p = kb.scalar(DType::F64);
    let pv = kb.param(p);
    kb.parallel(out, 1, |kb, i| kb.store_to(out, &[i[0]], pv));
    let k = compile(&kb.finish("test.scalar"));
    let mut o = vec![0.0; 3];
    let msg = fault_message(run(&k, &[dense(&mut o, &[3])], &[Scalar::F32(1.0)]));
    assert!(msg.contains("is f32, expected f64"), "{msg}");
    let msg = fault_message(run(&k, &[dense(&mut o, &[3])], &[]));
    assert!(msg.contains("expected 1 scalar arguments, got 0"), "{msg}");
    run(&k, &[dense(&mut o, &[3])], &[Scalar::F64(2.5)]).unwrap();
    assert_eq!(o, vec![2.5; 3]);
}

#[test]
fn invalid_ir_is_a_compile_error() {
    let mut be = CpuBackend::new().unwrap();
    // Adding an f64 to an i64.
    let mut kb = Kb::new();
    let out = kb.store(DType::F64, 1, Privilege::Write);
    let a = kb.f64(1.0);
    let b = kb.i64(1);
    let c = kb.add(a, b);
    kb.parallel(out, 1, |kb, i| kb.store_to(out, &[i[0]], c));
    let err = be.compile(&kb.finish("test.bad_types")).unwrap_err();
    assert!(
        matches!(&err, Error::Compile { kernel, .. } if kernel == "test.bad_types"),
        "{err}"
    );
    // Storing through a read-only parameter.
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let one = kb.f64(1.0);
    kb.parallel(x, 1, |kb, i| kb.store_to(x, &[i[0]], one));
    assert!(matches!(
        be.compile(&kb.finish("test.readonly")),
        Err(Error::Compile { .. })
    ));
    // A value used outside its loop.
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::ReadWrite);
    let mut leaked = None;
    kb.parallel(x, 1, |kb, i| {
        leaked = Some(kb.load(x, &[i[0]]));
    });
    let leaked = leaked.unwrap();
    kb.parallel(x, 1, |kb, i| kb.store_to(x, &[i[0]], leaked));
    assert!(matches!(
        be.compile(&kb.finish("test.scope")),
        Err(Error::Compile { .. })
    ));
    // The backend still compiles good kernels afterwards.
    be.compile(&gather()).unwrap();
}

/// y[i] = sum of v[j] for j in lo[i]..hi[i]: the checks of `v[j]` are made once per row, before
/// its loop; a range past `v` still faults on `v`, an empty range with wild bounds does not.
fn row_sums() -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let lo = kb.store(DType::I64, 1, Privilege::Read);
    let hi = kb.store(DType::I64, 1, Privilege::Read);
    let v = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(y, 1, |kb, i| {
        let a = kb.load(lo, &[i[0]]);
        let b = kb.load(hi, &[i[0]]);
        let zero = kb.f64(0.0);
        let sum = kb.for_loop(a, b, &[zero], |kb, j, acc| {
            let x = kb.load(v, &[j]);
            vec![kb.add(acc[0], x)]
        });
        kb.store_to(y, &[i[0]], sum[0]);
    });
    kb.finish("test.row_sums")
}

#[test]
fn loop_indexed_accesses_are_checked_once_per_loop() {
    let k = compile(&row_sums());
    let mut v = vec![1.0, 2.0, 3.0, 4.0];
    // (row starts, row ends, the sums or a fault)
    type Case = (Vec<i64>, Vec<i64>, Option<Vec<f64>>);
    let cases: [Case; 5] = [
        (vec![0, 1, 4], vec![1, 4, 4], Some(vec![1.0, 9.0, 0.0])),
        // Empty ranges never touch `v`, whatever their bounds.
        (vec![9, -5, 2], vec![9, -7, 1], Some(vec![0.0, 0.0, 0.0])),
        // Past the end, before the start, and both.
        (vec![0, 2, 0], vec![1, 5, 1], None),
        (vec![-1, 0, 0], vec![1, 0, 0], None),
        (vec![i64::MIN, 0, 0], vec![i64::MAX, 0, 0], None),
    ];
    for (mut a, mut b, want) in cases {
        let mut y = vec![-1.0; 3];
        let views = [
            dense(&mut a, &[3]),
            dense(&mut b, &[3]),
            dense(&mut v, &[4]),
            dense(&mut y, &[3]),
        ];
        let result = run(&k, &views, &[]);
        match want {
            Some(want) => {
                result.unwrap();
                assert_eq!(y, want);
            }
            None => {
                let msg = fault_message(result);
                assert!(msg.contains("store parameter 2 (dim 0)"), "{msg}");
            }
        }
    }
}

#[test]
fn a_constant_index_every_point_uses_is_checked_once_and_only_when_points_run() {
    // y[i] = t[i, 1] (a constant index at the top of the point's body: checked once per
    // launch), plus t[i, 3] read in a `for` loop of `n` iterations (checked where it runs).
    let mut kb = Kb::new();
    let t = kb.store(DType::F64, 2, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    let n = kb.scalar(DType::I64);
    let nv = kb.param(n);
    kb.parallel(y, 1, |kb, i| {
        let one = kb.i64(1);
        let a = kb.load(t, &[i[0], one]);
        let zero = kb.i64(0);
        let s = kb.for_loop(zero, nv, &[a], |kb, _, acc| {
            let three = kb.i64(3);
            let b = kb.load(t, &[i[0], three]);
            vec![kb.add(acc[0], b)]
        });
        kb.store_to(y, &[i[0]], s[0]);
    });
    let k = compile(&kb.finish("test.const_index"));
    for threads in [1, 2] {
        // Rows of 2: index 1 is in bounds; the loop never runs, so index 3 is never read.
        let mut tv: Vec<f64> = (0..200).map(f64::from).collect();
        let mut yv = vec![0.0; 100];
        let stores = [dense(&mut tv, &[100, 2]), dense(&mut yv, &[100])];
        run_on(&k, &stores, &[Scalar::I64(0)], threads).unwrap();
        assert!(yv.iter().enumerate().all(|(i, &v)| v == (2 * i + 1) as f64));
        // The loop runs: index 3 of a row of 2 faults where it is read.
        let msg = fault_message(run_on(&k, &stores, &[Scalar::I64(1)], threads));
        assert!(msg.contains("store parameter 0 (dim 1)"), "{msg}");
        // Rows of 1: index 1 faults, named as the compiled check names it.
        let mut tv = vec![1.0; 100];
        let stores = [dense(&mut tv, &[100, 1]), dense(&mut yv, &[100])];
        let msg = fault_message(run_on(&k, &stores, &[Scalar::I64(0)], threads));
        assert!(msg.contains("test.const_index"), "{msg}");
        assert!(msg.contains("store parameter 0 (dim 1)"), "{msg}");
        // No points: nothing is read, nothing faults.
        let (mut tv, mut yv) = (Vec::<f64>::new(), Vec::<f64>::new());
        let stores = [dense(&mut tv, &[0, 1]), dense(&mut yv, &[0])];
        run_on(&k, &stores, &[Scalar::I64(0)], threads).unwrap();
    }
}
