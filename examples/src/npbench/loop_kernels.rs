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

/// A complex value in the IR: its real and imaginary parts.
type Pair = (weft_ir::builder::Value, weft_ir::builder::Value);

/// `x * y` of complex values, as NumPy multiplies them: `(ac - bd) + (ad + bc)i`.
fn complex_mul(b: &mut weft_ir::builder::BodyBuilder, x: Pair, y: Pair) -> Pair {
    let (ac, bd) = (
        b.binary(BinaryOp::Mul, x.0, y.0),
        b.binary(BinaryOp::Mul, x.1, y.1),
    );
    let (ad, bc) = (
        b.binary(BinaryOp::Mul, x.0, y.1),
        b.binary(BinaryOp::Mul, x.1, y.0),
    );
    (
        b.binary(BinaryOp::Sub, ac, bd),
        b.binary(BinaryOp::Add, ad, bc),
    )
}

/// `x + y` of complex values.
fn complex_add(b: &mut weft_ir::builder::BodyBuilder, x: Pair, y: Pair) -> Pair {
    (
        b.binary(BinaryOp::Add, x.0, y.0),
        b.binary(BinaryOp::Add, x.1, y.1),
    )
}

/// NPBench's `scattering_self_energies`, its eight loops in one kernel over the arrays' real
/// and imaginary parts (`float64`): `neigh_idx` (`int32`), `dH`, `G`, `D`, then `Sigma`
/// (read and written), each as a pair of parts. For each `(k, E, q, w <= E, i, j, a, b)`:
/// `Sigma[k, E, a] += (G[k, E - w, n] @ dH[a, b, i]) @ (dH[a, b, j] * D[q, w, a, b, i, j])`
/// with `n = neigh_idx[a, b]`, for `norb` x `norb` blocks (`norb` fixed when the kernel is
/// built: a row of `Sigma`'s block is `norb` running sums carried through the loop over
/// `t`). Grouped as NumPy groups it (each product's sums first, then added to `Sigma`), each
/// summed in index order from zero: within rounding of NumPy's BLAS products, not its bits.
/// Only the columns are unrolled: unrolled over whole 4 x 4 blocks the kernel took about
/// 0.4 s to compile.
pub fn scattering_self_energies_kernel(norb: u32) -> Kernel {
    let mut k = KernelBuilder::new(format!("scattering_self_energies.{norb}"));
    let neigh = k.store(DType::I32, 2, Privilege::Read);
    let part = |k: &mut KernelBuilder, rank: u32, privilege: Privilege| {
        (
            k.store(DType::F64, rank, privilege),
            k.store(DType::F64, rank, privilege),
        )
    };
    let dh = part(&mut k, 5, Privilege::Read);
    let g = part(&mut k, 5, Privilege::Read);
    let d = part(&mut k, 6, Privilege::Read);
    let sigma = part(&mut k, 5, Privilege::ReadWrite);
    let b = k.body();
    let (zero, one) = (b.const_i64(0), b.const_i64(1));
    let ext = |b: &mut weft_ir::builder::BodyBuilder, s, dim| b.extent(s, dim);
    let (nk, ne) = (ext(b, g.0, 0), ext(b, g.0, 1));
    let (nq, nw) = (ext(b, d.0, 0), ext(b, d.0, 1));
    let (ni, nj) = (ext(b, d.0, 4), ext(b, d.0, 5));
    let (na, nb) = (ext(b, neigh, 0), ext(b, neigh, 1));
    let norbs = ext(b, g.0, 4);
    let fzero = b.const_f64(0.0);
    let cols: Vec<_> = (0..i64::from(norb)).map(|v| b.const_i64(v)).collect();
    let load = |b: &mut weft_ir::builder::BodyBuilder, p: (_, _), at: &[_]| -> Pair {
        (b.load(p.0, at), b.load(p.1, at))
    };
    b.for_loop(zero, nk, &[], |b, kk, _| {
        b.for_loop(zero, ne, &[], |b, e, _| {
            let e1 = b.binary(BinaryOp::Add, e, one);
            let w_end = b.binary(BinaryOp::Min, nw, e1);
            b.for_loop(zero, nq, &[], |b, q, _| {
                b.for_loop(zero, w_end, &[], |b, w, _| {
                    let ew = b.binary(BinaryOp::Sub, e, w);
                    b.for_loop(zero, ni, &[], |b, i, _| {
                        b.for_loop(zero, nj, &[], |b, j, _| {
                            b.for_loop(zero, na, &[], |b, a, _| {
                                b.for_loop(zero, nb, &[], |b, bb, _| {
                                    let n = b.load(neigh, &[a, bb]);
                                    let n = b.cast(DType::I64, n);
                                    let dd = load(b, d, &[q, w, a, bb, i, j]);
                                    b.for_loop(zero, norbs, &[], |b, row, _| {
                                        // Sigma's row `row`: one running sum per column,
                                        // over `t`.
                                        let init = vec![fzero; 2 * cols.len()];
                                        let acc = b.for_loop(zero, norbs, &init, |b, t, acc| {
                                            // dHG[row, t]: G[k, E - w, n] @ dH[a, b, i].
                                            let zeros = [fzero, fzero];
                                            let dhg =
                                                b.for_loop(zero, norbs, &zeros, |b, s, sum| {
                                                    let x = load(b, g, &[kk, ew, n, row, s]);
                                                    let y = load(b, dh, &[a, bb, i, s, t]);
                                                    let p = complex_mul(b, x, y);
                                                    let sum = complex_add(b, (sum[0], sum[1]), p);
                                                    vec![sum.0, sum.1]
                                                });
                                            let mut next = Vec::with_capacity(acc.len());
                                            for (c, &col) in cols.iter().enumerate() {
                                                // dHD[t, col]: dH[a, b, j] * D[q, w, a, b, i, j].
                                                let h = load(b, dh, &[a, bb, j, t, col]);
                                                let dhd = complex_mul(b, h, dd);
                                                let p = complex_mul(b, (dhg[0], dhg[1]), dhd);
                                                let sum = (acc[2 * c], acc[2 * c + 1]);
                                                let sum = complex_add(b, sum, p);
                                                next.extend([sum.0, sum.1]);
                                            }
                                            next
                                        });
                                        for (c, &col) in cols.iter().enumerate() {
                                            let at = [kk, e, a, row, col];
                                            let old = load(b, sigma, &at);
                                            let sum = (acc[2 * c], acc[2 * c + 1]);
                                            let new = complex_add(b, old, sum);
                                            b.store(sigma.0, &at, new.0);
                                            b.store(sigma.1, &at, new.1);
                                        }
                                        vec![]
                                    });
                                    vec![]
                                });
                                vec![]
                            });
                            vec![]
                        });
                        vec![]
                    });
                    vec![]
                });
                vec![]
            });
            vec![]
        });
        vec![]
    });
    k.finish()
}

/// `|z|` as the facade's `ComplexArray::abs` computes it (NumPy's scaled formula): the larger
/// part `m` times `sqrt((n / m)^2 + 1)`, `n` the smaller; `m` itself where `n` is zero or `m`
/// infinite, and infinity where either part is.
fn complex_abs(b: &mut weft_ir::builder::BodyBuilder, z: Pair) -> weft_ir::builder::Value {
    use weft_ir::UnaryOp;
    let (x, y) = (b.unary(UnaryOp::Abs, z.0), b.unary(UnaryOp::Abs, z.1));
    let (m, n) = (b.binary(BinaryOp::Max, x, y), b.binary(BinaryOp::Min, x, y));
    let ratio = b.binary(BinaryOp::Div, n, m);
    let square = b.binary(BinaryOp::Mul, ratio, ratio);
    let one = b.const_f64(1.0);
    let inside = b.binary(BinaryOp::Add, square, one);
    let root = b.unary(UnaryOp::Sqrt, inside);
    let scaled = b.binary(BinaryOp::Mul, m, root);
    let (inf, zero) = (b.const_f64(f64::INFINITY), b.const_f64(0.0));
    let n_zero = b.cmp(CmpOp::Eq, n, zero);
    let m_inf = b.cmp(CmpOp::Eq, m, inf);
    let exact = b.select(n_zero, n_zero, m_inf);
    let finite = b.select(exact, m, scaled);
    let x_inf = b.cmp(CmpOp::Eq, x, inf);
    let y_inf = b.cmp(CmpOp::Eq, y, inf);
    let infinite = b.select(x_inf, x_inf, y_inf);
    b.select(infinite, inf, finite)
}

/// NPBench's `mandelbrot2` per point: over the grid of `N` (`int64`, `xn` x `yn`, written)
/// and `Z`'s parts (`float64`, written), `c = X[x] + Y[y] i` (`X`, `Y` the `linspace`s) and
/// `z = z * z + c` from zero for at most `maxiter` (`int64` scalar) steps; the first step
/// `k` (from 0) where `|z| > horizon` (`float64` scalar) writes `N = k + 1` and `Z = z`, and
/// the point stops; points that never pass it keep 0. NumPy's program compresses the
/// points still going after every step; here each point stops by itself: its steps run in
/// blocks of 8, a block of none once it has stopped, so a point costs what NumPy spends on
/// it. The same arithmetic in the same order as NumPy's (`z * z` as `(a a - b b) + (a b +
/// b a) i`), so the same bits where `|z|` is NumPy's (the facade's scaled formula, within
/// two units in the last place of `hypot`).
pub fn mandelbrot2_kernel() -> Kernel {
    let mut k = KernelBuilder::new("mandelbrot2");
    let xs = k.store(DType::F64, 1, Privilege::Read);
    let ys = k.store(DType::F64, 1, Privilege::Read);
    let n_out = k.store(DType::I64, 2, Privilege::Write);
    let zr_out = k.store(DType::F64, 2, Privilege::Write);
    let zi_out = k.store(DType::F64, 2, Privilege::Write);
    let maxiter = k.scalar(DType::I64);
    let horizon = k.scalar(DType::F64);
    let b = k.body();
    b.parallel(n_out, |b, at| {
        let c = (b.load(xs, &[at[0]]), b.load(ys, &[at[1]]));
        let (zero, one, eight) = (b.const_i64(0), b.const_i64(1), b.const_i64(8));
        let fzero = b.const_f64(0.0);
        let seven = b.const_i64(7);
        let padded = b.binary(BinaryOp::Add, maxiter, seven);
        let blocks = b.binary(BinaryOp::Div, padded, eight);
        // Carried: z (2), the step count written (0 while going), the z written (2).
        let init = [fzero, fzero, zero, fzero, fzero];
        let done = b.for_loop(zero, blocks, &init, |b, blk, s| {
            let first = b.binary(BinaryOp::Mul, blk, eight);
            let left = b.binary(BinaryOp::Sub, maxiter, first);
            let len = b.binary(BinaryOp::Min, left, eight);
            let going = b.cmp(CmpOp::Eq, s[2], zero);
            let len = b.select(going, len, zero);
            b.for_loop(zero, len, s, |b, j, s| {
                let going = b.cmp(CmpOp::Eq, s[2], zero);
                let z = (s[0], s[1]);
                let sq = complex_mul(b, z, z);
                let next = complex_add(b, sq, c);
                let size = complex_abs(b, next);
                let out = b.cmp(CmpOp::Gt, size, horizon);
                let escaped = b.select(going, out, going);
                let step = b.binary(BinaryOp::Add, first, j);
                let count = b.binary(BinaryOp::Add, step, one);
                vec![
                    b.select(going, next.0, s[0]),
                    b.select(going, next.1, s[1]),
                    b.select(escaped, count, s[2]),
                    b.select(escaped, next.0, s[3]),
                    b.select(escaped, next.1, s[4]),
                ]
            })
        });
        b.store(n_out, at, done[2]);
        b.store(zr_out, at, done[3]);
        b.store(zi_out, at, done[4]);
    });
    k.finish()
}
