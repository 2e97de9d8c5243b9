//! Kernels an application writes itself (`Numeric::run_kernel`): loops over elements as one
//! task with a sequential loop inside, against plain-Rust loops and the same programs
//! written with NumPy-style operations; errors that name the kernel and the argument.

use weft::{Array, DType, Numeric};
use weft_examples::npbench::loop_kernels::crc16_kernel;
use weft_ir::builder::KernelBuilder;
use weft_ir::{BinaryOp, Kernel, Privilege, Scalar};

/// CRC-16 as NPBench's Python loop computes it.
fn crc16_reference(data: &[u8], poly: i64) -> i64 {
    let mut crc: i64 = 0xFFFF;
    for &byte in data {
        let mut b = i64::from(byte);
        for _ in 0..8 {
            crc = if (crc & 1) ^ (b & 1) != 0 {
                (crc >> 1) ^ poly
            } else {
                crc >> 1
            };
            b >>= 1;
        }
    }
    let crc = !crc & 0xFFFF;
    ((crc << 8) | ((crc >> 8) & 0xFF)) & 0xFFFF
}

/// A recurrence along the rows of a matrix (`a[i, j] = (a[i, j - 1] + a[i, j]) / 2` for
/// `j` from 1, Seidel's update written along one axis), in place.
fn row_recurrence_kernel() -> Kernel {
    let mut k = KernelBuilder::new("rows.halve");
    let a = k.store(DType::F64, 2, Privilege::ReadWrite);
    let b = k.body();
    let (zero, one) = (b.const_i64(0), b.const_i64(1));
    let (rows, cols) = (b.extent(a, 0), b.extent(a, 1));
    let half = b.const_f64(0.5);
    b.for_loop(zero, rows, &[], |b, i, _| {
        b.for_loop(one, cols, &[], |b, j, _| {
            let left = b.binary(BinaryOp::Sub, j, one);
            let prev = b.load(a, &[i, left]);
            let here = b.load(a, &[i, j]);
            let sum = b.binary(BinaryOp::Add, prev, here);
            let v = b.binary(BinaryOp::Mul, sum, half);
            b.store(a, &[i, j], v);
            vec![]
        });
        vec![]
    });
    k.finish()
}

fn bytes(np: &Numeric, values: &[u8]) -> Array {
    np.from_slice(&[values.len() as u64], values)
}

#[test]
fn crc16_runs_as_one_task_and_matches_the_loop() {
    for pieces in [1, 3] {
        let np = weft_tests::numeric(pieces);
        let kernel = crc16_kernel();
        for len in [0usize, 1, 7, 1000, 100_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
            let out = np.zeros(&[], DType::I64);
            np.run_kernel(&kernel, &[&bytes(&np, &data), &out], &[Scalar::I64(0x8408)])
                .expect("runs");
            assert_eq!(
                out.to_vec_of::<i64>().expect("reads"),
                vec![crc16_reference(&data, 0x8408)],
                "{len} bytes, {pieces} pieces"
            );
        }
        // One kernel compiled for every length: its content does not depend on them.
        let compiled = np.runtime(|rt| rt.stats().exec.kernels_compiled);
        let data = bytes(&np, &[1, 2, 3]);
        let out = np.zeros(&[], DType::I64);
        np.run_kernel(&kernel, &[&data, &out], &[Scalar::I64(0x1021)])
            .expect("runs");
        out.check().expect("ran");
        assert_eq!(np.runtime(|rt| rt.stats().exec.kernels_compiled), compiled);
        assert_eq!(
            out.to_vec_of::<i64>().expect("reads"),
            vec![crc16_reference(&[1, 2, 3], 0x1021)]
        );
    }
}

#[test]
fn a_recurrence_along_rows_matches_the_loop_between_element_wise_work() {
    let np = weft_tests::numeric(3);
    let (rows, cols) = (5usize, 64usize);
    let values = weft_tests::uniform_data(rows * cols, 3, -1.0, 1.0);
    let a = np.from_vec(&[rows as u64, cols as u64], &values);
    // Element-wise work before and after, on the same array.
    a.assign(&(&a * 2.0)).expect("doubles");
    np.run_kernel(&row_recurrence_kernel(), &[&a], &[])
        .expect("runs");
    let got = (&a + 1.0).to_vec().expect("reads");
    let mut want: Vec<f64> = values.iter().map(|x| x * 2.0).collect();
    for i in 0..rows {
        for j in 1..cols {
            want[i * cols + j] = (want[i * cols + j - 1] + want[i * cols + j]) * 0.5;
        }
    }
    let want: Vec<f64> = want.iter().map(|x| x + 1.0).collect();
    assert_eq!(got, want);
}

#[test]
fn bad_kernels_and_arguments_are_clear_errors_and_nothing_runs() {
    let np = weft_tests::numeric(1);
    let kernel = crc16_kernel();
    let data = bytes(&np, &[1, 2, 3]);
    let out = np.zeros(&[], DType::I64);
    let says = |r: weft::Result<()>, words: &[&str]| {
        let e = r.expect_err("refused").to_string();
        for w in words {
            assert!(e.contains(w), "{e}");
        }
    };
    says(
        np.run_kernel(&kernel, &[&data], &[Scalar::I64(1)]),
        &["app.crc16", "takes 2 arrays and 1 scalars, given 1 and 1"],
    );
    says(
        np.run_kernel(&kernel, &[&data, &out], &[]),
        &["app.crc16", "given 2 and 0"],
    );
    let wide = np.zeros(&[3], DType::I64);
    says(
        np.run_kernel(&kernel, &[&wide, &out], &[Scalar::I64(1)]),
        &["array 0 is i64 of shape (3,)", "wants u8 of rank 1"],
    );
    says(
        np.run_kernel(&kernel, &[&data, &out], &[Scalar::F64(1.0)]),
        &["scalar 0 is f64", "wants i64"],
    );
    // Scalars declared before stores are refused (fused kernels keep stores first).
    let mut k = KernelBuilder::new("scalar.first");
    let _ = k.scalar(DType::F64);
    let _ = k.store(DType::F64, 1, Privilege::Write);
    says(
        np.run_kernel(
            &k.finish(),
            &[&np.zeros(&[2], DType::F64)],
            &[Scalar::F64(1.0)],
        ),
        &[
            "app.scalar.first",
            "store parameters before its scalar parameters",
        ],
    );
    // A load of a value never defined: the IR's validation refuses it.
    let mut k = KernelBuilder::new("broken");
    let s = k.store(DType::F64, 1, Privilege::Write);
    let b = k.body();
    let x = b.const_f64(1.0);
    let y = b.const_f64(2.0);
    let _ = y;
    b.store(s, &[x], x);
    says(
        np.run_kernel(&k.finish(), &[&np.zeros(&[2], DType::F64)], &[]),
        &["app.broken"],
    );
    // An index out of bounds while it runs: an error at the read, in NumPy's words.
    let mut k = KernelBuilder::new("past.the.end");
    let s = k.store(DType::F64, 1, Privilege::Write);
    let b = k.body();
    let (zero, n) = (b.const_i64(0), b.extent(s, 0));
    let one = b.const_i64(1);
    let end = b.binary(BinaryOp::Add, n, one);
    b.for_loop(zero, end, &[], |b, i, _| {
        let v = b.const_f64(1.0);
        b.store(s, &[i], v);
        vec![]
    });
    let target = np.zeros(&[4], DType::F64);
    np.run_kernel(&k.finish(), &[&target], &[])
        .expect("submitted");
    let e = target.to_vec().expect_err("faults").to_string();
    assert!(
        e.contains("app.past.the.end")
            && e.contains("index 4 is out of bounds for axis 0 with size 4"),
        "{e}"
    );
    // The host goes on.
    assert_eq!(
        (&data.astype(DType::I64) + 1i64)
            .to_vec_of::<i64>()
            .unwrap(),
        vec![2, 3, 4]
    );
}
