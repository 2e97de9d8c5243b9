//! Loops over elements that NPBench's programs write in Python (`crc16`'s bytes and bits),
//! as kernels of the application's own (`Numeric::run_kernel`): one task with the loops
//! inside, instead of a task per element.

use weft_ir::builder::KernelBuilder;
use weft_ir::{BinaryOp, CmpOp, DType, Kernel, Privilege};

/// CRC-16 (NPBench's `crc16`: reflected polynomial `poly`, initial value `0xFFFF`, the
/// result inverted and its bytes swapped) of a `uint8` array into a 0-d `int64` store, one
/// byte after another and eight bit steps a byte, in one loop nest.
pub fn crc16_kernel() -> Kernel {
    let mut k = KernelBuilder::new("crc16");
    let data = k.store(DType::U8, 1, Privilege::Read);
    let out = k.store(DType::I64, 0, Privilege::Write);
    let poly = k.scalar(DType::I64);
    let b = k.body();
    let n = b.extent(data, 0);
    let (zero, eight) = (b.const_i64(0), b.const_i64(8));
    let (one, ff) = (b.const_i64(1), b.const_i64(0xFF));
    let init = b.const_i64(0xFFFF);
    let crc = b.for_loop(zero, n, &[init], |b, i, carried| {
        let byte = b.load(data, &[i]);
        let byte = b.binary(BinaryOp::And, byte, ff);
        let bits = b.for_loop(zero, eight, &[carried[0], byte], |b, _, c| {
            let (crc, byte) = (c[0], c[1]);
            let low = b.binary(BinaryOp::And, crc, one);
            let bit = b.binary(BinaryOp::And, byte, one);
            let differ = b.cmp(CmpOp::Ne, low, bit);
            let shifted = b.binary(BinaryOp::Shr, crc, one);
            let flipped = b.binary(BinaryOp::Xor, shifted, poly);
            let crc = b.select(differ, flipped, shifted);
            let byte = b.binary(BinaryOp::Shr, byte, one);
            vec![crc, byte]
        });
        vec![bits[0]]
    });
    let mask = b.const_i64(0xFFFF);
    let inverted = b.binary(BinaryOp::Xor, crc[0], mask);
    let high = b.binary(BinaryOp::Shl, inverted, eight);
    let low = b.binary(BinaryOp::Shr, inverted, eight);
    let low = b.binary(BinaryOp::And, low, ff);
    let swapped = b.binary(BinaryOp::Or, high, low);
    let result = b.binary(BinaryOp::And, swapped, mask);
    b.store(out, &[], result);
    k.finish()
}

/// NPBench's `seidel_2d` sweeps in place on a `float64` matrix `A` (`steps`, an `int64`
/// scalar, of them): for each inner row `i`, `A[i, 1:-1] += ` the seven neighbours' sum (as
/// NumPy adds them, left to right), then `for j: A[i, j] += A[i, j - 1]; A[i, j] /= 9.0`.
/// Fused into one pass along the row: at column `j` the right-hand side reads `A[i, j + 1]`
/// before the recurrence reaches it, as NumPy's whole-row update does, and every addition
/// happens in NumPy's order, so the bits are NumPy's.
pub fn seidel_2d_kernel() -> Kernel {
    let mut k = KernelBuilder::new("seidel_2d");
    let a = k.store(DType::F64, 2, Privilege::ReadWrite);
    let steps = k.scalar(DType::I64);
    let b = k.body();
    let (zero, one) = (b.const_i64(0), b.const_i64(1));
    let (rows, cols) = (b.extent(a, 0), b.extent(a, 1));
    let sweeps = b.binary(BinaryOp::Sub, steps, one);
    let last_row = b.binary(BinaryOp::Sub, rows, one);
    let last_col = b.binary(BinaryOp::Sub, cols, one);
    let nine = b.const_f64(9.0);
    b.for_loop(zero, sweeps, &[], |b, _, _| {
        b.for_loop(one, last_row, &[], |b, i, _| {
            let (up, down) = (
                b.binary(BinaryOp::Sub, i, one),
                b.binary(BinaryOp::Add, i, one),
            );
            b.for_loop(one, last_col, &[], |b, j, _| {
                let (left, right) = (
                    b.binary(BinaryOp::Sub, j, one),
                    b.binary(BinaryOp::Add, j, one),
                );
                let terms = [
                    (up, left),
                    (up, j),
                    (up, right),
                    (i, right),
                    (down, left),
                    (down, j),
                    (down, right),
                ];
                let mut sum = b.load(a, &[terms[0].0, terms[0].1]);
                for &(r, c) in &terms[1..] {
                    let x = b.load(a, &[r, c]);
                    sum = b.binary(BinaryOp::Add, sum, x);
                }
                let here = b.load(a, &[i, j]);
                let updated = b.binary(BinaryOp::Add, here, sum);
                let before = b.load(a, &[i, left]);
                let chained = b.binary(BinaryOp::Add, updated, before);
                let v = b.binary(BinaryOp::Div, chained, nine);
                b.store(a, &[i, j], v);
                vec![]
            });
            vec![]
        });
        vec![]
    });
    k.finish()
}
