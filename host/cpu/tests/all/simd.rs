//! The vector variant of parallel loops (`f64x2`/`i64x2`, `f32x4`/`i32x4`): every vectorizable
//! operation against the scalar code, bit for bit (NaN payloads, signed zeros and infinities
//! included), on every length from 0 to 17 and a large one; views with padded rows, views whose
//! innermost stride is not one element (which must take the scalar code), broadcasts of 0-d
//! stores and scalar parameters, reductions into 0-d stores, loops that must not vectorize, and
//! math-lowered kernels.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::{CompiledKernel, CpuBackend, StoreView};
use weft_ir::passes::math::{has_math_functions, lower_math};
use weft_ir::{BinaryOp, CmpOp, DType, Kernel, Op, Privilege, ReduceOp, Scalar, UnaryOp, ValueId};

/// Lengths every element-wise kernel runs on: 0 to 17 (around every vector and unroll
/// boundary), and one over several chunks of the launcher with an odd remainder.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=17).collect();
    v.push(40_003);
    v
}

/// Runs `k` (`out[i]` from `a`, both `f64` of length `n`) with `a[i] = i`, for every length of
/// [`lengths`], and checks `out[i] == want(i, n)`.
fn check_on_iota(k: &CompiledKernel, want: impl Fn(usize, usize) -> f64) {
    for n in lengths() {
        let mut av: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut o = vec![0.0; n];
        run_on(
            k,
            &[dense(&mut av, &[n as i64]), dense(&mut o, &[n as i64])],
            &[],
            2,
        )
        .unwrap();
        for (i, got) in o.iter().enumerate() {
            assert_eq!(*got, want(i, n), "n = {n}, i = {i}");
        }
    }
}

/// Compiles `k` twice: with the vector lowering (asserting how many loops vectorize) and
/// without.
fn both(k: &Kernel, vectorized: usize) -> (CompiledKernel, CompiledKernel) {
    let mut be = CpuBackend::new().unwrap();
    assert!(be.simd(), "this test needs a CPU with 128-bit vectors");
    let v = be.compile(k).unwrap();
    be.set_simd(false);
    let s = be.compile(k).unwrap();
    assert_eq!(
        v.vectorized_loops(),
        vectorized,
        "vectorized loops of {}",
        k.name
    );
    assert_eq!(s.vectorized_loops(), 0);
    (v, s)
}

/// A buffer of `n` elements of `dt`, 8-byte aligned, filled from `bits` (one u64 per element,
/// truncated to the element's size).
#[derive(Clone)]
struct Buf {
    dt: DType,
    n: usize,
    words: Vec<u64>,
}

impl Buf {
    fn new(dt: DType, bits: &[u64]) -> Buf {
        let n = bits.len();
        let mut words = vec![0u64; (n * dt.size()).div_ceil(8).max(1)];
        let bytes = bytes_mut(&mut words);
        for (i, &b) in bits.iter().enumerate() {
            let s = dt.size();
            bytes[i * s..(i + 1) * s].copy_from_slice(&b.to_le_bytes()[..s]);
        }
        Buf { dt, n, words }
    }

    fn zeros(dt: DType, n: usize) -> Buf {
        Buf::new(dt, &vec![0; n])
    }

    fn view(&mut self) -> StoreView {
        StoreView::dense(self.words.as_mut_ptr().cast(), &[self.n as i64])
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the words are initialised; any byte pattern is a valid u8.
        let all = unsafe {
            std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.words.len() * 8)
        };
        &all[..self.n * self.dt.size()]
    }

    /// Element `i`'s bits.
    fn get(&self, i: usize) -> u64 {
        let s = self.dt.size();
        let mut b = [0u8; 8];
        b[..s].copy_from_slice(&self.bytes()[i * s..(i + 1) * s]);
        u64::from_le_bytes(b)
    }
}

fn bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: a u64 slice is valid as bytes, with the same lifetime.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
}

/// `n` input elements of `dt`: special values (in an order that depends on `seed`, so two
/// inputs pair them up differently) mixed with random ones.
fn inputs(dt: DType, n: usize, seed: u64) -> Vec<u64> {
    let sp = specials(dt);
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..n)
        .map(|i| {
            let r = rng.next();
            if !r.is_multiple_of(3) {
                sp[(i * (seed as usize + 3) + (r >> 40) as usize) % sp.len()]
            } else {
                match dt {
                    DType::F64 => rng.uniform(-100.0, 100.0).to_bits(),
                    DType::F32 => u64::from((rng.uniform(-100.0, 100.0) as f32).to_bits()),
                    DType::I64 => r,
                    DType::I32 => r & 0xffff_ffff,
                    DType::Bool => r & 1,
                    DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                        unreachable!("storage types hold no values")
                    }
                }
            }
        })
        .collect()
}

/// `out[i] = f(a[i], b[i])` over a 1-d loop, with scalar parameters `scalars` (their types).
/// `f` gets the loaded values and the scalar parameters' values and returns the result.
fn elementwise(
    name: &str,
    din: DType,
    dout: DType,
    scalars: &[DType],
    f: impl FnOnce(&mut Kb, ValueId, ValueId, &[ValueId]) -> ValueId,
) -> Kernel {
    let mut kb = Kb::new();
    let a = kb.store(din, 1, Privilege::Read);
    let b = kb.store(din, 1, Privilege::Read);
    let out = kb.store(dout, 1, Privilege::Write);
    let ps: Vec<u32> = scalars.iter().map(|&t| kb.scalar(t)).collect();
    let pv: Vec<ValueId> = ps.iter().map(|&p| kb.param(p)).collect();
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let y = kb.load(b, &[i[0]]);
        let r = f(kb, x, y, &pv);
        kb.store_to(out, &[i[0]], r);
    });
    kb.finish(name)
}

/// Runs the element-wise kernel `k` (vector and scalar) on every length, and asserts the same
/// output bits.
fn same_bits(k: &Kernel, din: DType, dout: DType, scalars: &[Scalar], vectorized: usize) {
    let (vk, sk) = both(k, vectorized);
    for n in lengths() {
        let mut a = Buf::new(din, &inputs(din, n, 1));
        let mut b = Buf::new(din, &inputs(din, n, 2));
        let mut outs = vec![];
        for c in [&vk, &sk] {
            let mut out = Buf::zeros(dout, n);
            run_on(c, &[a.view(), b.view(), out.view()], scalars, 2).unwrap();
            outs.push(out);
        }
        if outs[0].bytes() != outs[1].bytes() {
            let i = (0..n).find(|&i| outs[0].get(i) != outs[1].get(i)).unwrap();
            panic!(
                "{}: n = {n}, element {i}: a = {:#x}, b = {:#x}: vector {:#x}, scalar {:#x}",
                k.name,
                a.get(i),
                b.get(i),
                outs[0].get(i),
                outs[1].get(i)
            );
        }
    }
}

fn int_of(t: DType) -> DType {
    if t == DType::F64 {
        DType::I64
    } else {
        DType::I32
    }
}

/// Each binary operator of `ops`, each unary one of `unary`, and `select(a op b, a, b)` for
/// every comparison, on `t`: the vector code gives the scalar code's bits.
fn same_bits_per_operator(t: DType, ops: &[BinaryOp], unary: &[UnaryOp]) {
    for &op in ops {
        let name = format!("simd.{}.{t}", op.name());
        let k = elementwise(&name, t, t, &[], |kb, x, y, _| kb.bin(op, x, y));
        same_bits(&k, t, t, &[], 1);
    }
    for &op in unary {
        let name = format!("simd.{}.{t}", op.name());
        let k = elementwise(&name, t, t, &[], |kb, x, _, _| kb.un(op, x));
        same_bits(&k, t, t, &[], 1);
    }
    for op in CmpOp::ALL {
        let name = format!("simd.select.{}.{t}", op.name());
        let k = elementwise(&name, t, t, &[], |kb, x, y, _| {
            let c = kb.cmp(op, x, y);
            kb.select(c, x, y)
        });
        same_bits(&k, t, t, &[], 1);
    }
}

#[test]
fn float_operations_match_the_scalar_code_bit_for_bit() {
    for t in [DType::F64, DType::F32] {
        let unary = [
            UnaryOp::Neg,
            UnaryOp::Abs,
            UnaryOp::Sqrt,
            UnaryOp::Floor,
            UnaryOp::Ceil,
        ];
        same_bits_per_operator(t, &FLOAT_BINARY, &unary);
        for op in CmpOp::ALL {
            // The comparison as 0.0 or 1.0.
            let k = elementwise(
                &format!("simd.cmp.{}.{t}", op.name()),
                t,
                t,
                &[],
                |kb, x, y, _| {
                    let c = kb.cmp(op, x, y);
                    kb.cast(t, c)
                },
            );
            same_bits(&k, t, t, &[], 1);
        }
        // Bool logic on comparisons, casts to bool (NaN is true) and to the same-width integer.
        let it = int_of(t);
        let k = elementwise(&format!("simd.bools.{t}"), t, it, &[], |kb, x, y, _| {
            let lt = kb.cmp(CmpOp::Lt, x, y);
            let xb = kb.cast(DType::Bool, x);
            let yb = kb.cast(DType::Bool, y);
            let both = kb.bin(BinaryOp::And, xb, yb);
            let either = kb.bin(BinaryOp::Or, lt, both);
            let nx = kb.un(UnaryOp::Not, either);
            let m = kb.bin(BinaryOp::Xor, nx, xb);
            let mn = kb.bin(BinaryOp::Min, m, lt);
            let mx = kb.bin(BinaryOp::Max, mn, yb);
            let one = kb.cast(it, mx);
            let two = kb.cast(it, lt);
            let sh = kb.c(Scalar::from_bits(it, 1));
            let two = kb.bin(BinaryOp::Shl, two, sh);
            kb.bin(BinaryOp::Or, one, two)
        });
        same_bits(&k, t, it, &[], 1);
        // Bitcasts both ways with integer arithmetic on the bits (as math lowering does).
        let k = elementwise(&format!("simd.bitcast.{t}"), t, t, &[], |kb, x, y, _| {
            let xi = kb.op(Op::Bitcast(it, x));
            let yi = kb.op(Op::Bitcast(it, y));
            let s = kb.c(Scalar::from_bits(it, 7));
            let hi = kb.bin(BinaryOp::Shr, xi, s);
            let lo = kb.bin(BinaryOp::Shl, yi, s);
            let m = kb.bin(BinaryOp::Xor, hi, lo);
            let m = kb.bin(BinaryOp::Add, m, xi);
            let m = kb.bin(BinaryOp::And, m, yi);
            let m = kb.bin(BinaryOp::Or, m, hi);
            kb.op(Op::Bitcast(t, m))
        });
        same_bits(&k, t, t, &[], 1);
        // A select on a scalar parameter (a condition that is the same in every lane).
        let k = elementwise(
            &format!("simd.uniform_select.{t}"),
            t,
            t,
            &[DType::Bool],
            |kb, x, y, p| {
                let s = kb.bin(BinaryOp::Sub, x, y);
                kb.select(p[0], s, x)
            },
        );
        for c in [true, false] {
            same_bits(&k, t, t, &[Scalar::Bool(c)], 1);
        }
    }
}

#[test]
fn integer_operations_match_the_scalar_code() {
    for t in [DType::I64, DType::I32] {
        same_bits_per_operator(
            t,
            &INT_VECTOR_BINARY,
            &[UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Not],
        );
        // Shifts by a scalar parameter (the same amount in every lane), modulo the width.
        for op in [BinaryOp::Shl, BinaryOp::Shr] {
            let k = elementwise(
                &format!("simd.{}.{t}", op.name()),
                t,
                t,
                &[t],
                |kb, x, _, p| kb.bin(op, x, p[0]),
            );
            for amount in [0i64, 1, 5, 31, 32, 33, 63, 64, 70, -1] {
                same_bits(&k, t, t, &[Scalar::from_bits(t, amount as u64)], 1);
            }
        }
        // Integer to bool and back.
        let k = elementwise(&format!("simd.bool.{t}"), t, t, &[], |kb, x, y, _| {
            let xb = kb.cast(DType::Bool, x);
            let yb = kb.cast(DType::Bool, y);
            let z = kb.bin(BinaryOp::Xor, xb, yb);
            kb.cast(t, z)
        });
        same_bits(&k, t, t, &[], 1);
    }
    // Conversions with a vector form: i32 -> f32, i64 -> f64, f32 -> i32 (saturating).
    for (from, to) in [
        (DType::I32, DType::F32),
        (DType::I64, DType::F64),
        (DType::F32, DType::I32),
    ] {
        let k = elementwise(
            &format!("simd.{from}_to_{to}"),
            from,
            to,
            &[],
            |kb, x, _, _| kb.cast(to, x),
        );
        same_bits(&k, from, to, &[], 1);
    }
}

#[test]
fn operations_without_a_vector_form_keep_the_scalar_code() {
    // Each of these runs the scalar code only, with the same results.
    let cases: Vec<(Kernel, DType, DType)> = vec![
        (
            elementwise("scalar.idiv", DType::I64, DType::I64, &[], |kb, x, y, _| {
                kb.bin(BinaryOp::Div, x, y)
            }),
            DType::I64,
            DType::I64,
        ),
        (
            elementwise("scalar.rem", DType::F64, DType::F64, &[], |kb, x, y, _| {
                kb.bin(BinaryOp::Rem, x, y)
            }),
            DType::F64,
            DType::F64,
        ),
        (
            elementwise(
                "scalar.exp_call",
                DType::F64,
                DType::F64,
                &[],
                |kb, x, _, _| kb.un(UnaryOp::Exp, x),
            ),
            DType::F64,
            DType::F64,
        ),
        (
            // f32 and f64 lanes in one loop.
            elementwise(
                "scalar.mixed",
                DType::F32,
                DType::F64,
                &[],
                |kb, x, y, _| {
                    let s = kb.bin(BinaryOp::Add, x, y);
                    kb.cast(DType::F64, s)
                },
            ),
            DType::F32,
            DType::F64,
        ),
        (
            // A shift by a per-element amount.
            elementwise(
                "scalar.shift",
                DType::I64,
                DType::I64,
                &[],
                |kb, x, y, _| kb.bin(BinaryOp::Shl, x, y),
            ),
            DType::I64,
            DType::I64,
        ),
    ];
    for (k, din, dout) in cases {
        same_bits(&k, din, dout, &[], 0);
    }
}

/// `out[i] = a[i]*a[i] + i` (the loop index as a value) on `i64`, and `out[i] = a[i] * s[] + p`
/// with a 0-d store `s` and a scalar parameter `p` (broadcasts) on floats.
#[test]
fn loop_index_values_and_broadcasts() {
    let mut kb = Kb::new();
    let a = kb.store(DType::I64, 1, Privilege::Read);
    let out = kb.store(DType::I64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let sq = kb.mul(x, x);
        let r = kb.add(sq, i[0]);
        kb.store_to(out, &[i[0]], r);
    });
    let k = kb.finish("simd.iota");
    let (vk, _) = both(&k, 1);
    for n in lengths() {
        let av: Vec<i64> = (0..n as i64).map(|i| i * 3 - 7).collect();
        let mut a_buf = av.clone();
        let mut o = vec![0i64; n];
        run_on(
            &vk,
            &[dense(&mut a_buf, &[n as i64]), dense(&mut o, &[n as i64])],
            &[],
            2,
        )
        .unwrap();
        for (i, &x) in av.iter().enumerate() {
            assert_eq!(o[i], x.wrapping_mul(x) + i as i64, "n = {n}, i = {i}");
        }
    }

    for t in [DType::F64, DType::F32] {
        let mut kb = Kb::new();
        let a = kb.store(t, 1, Privilege::Read);
        let s = kb.store(t, 0, Privilege::Read);
        let out = kb.store(t, 1, Privilege::Write);
        let p = kb.scalar(t);
        let pv = kb.param(p);
        kb.parallel(out, 1, |kb, i| {
            let x = kb.load(a, &[i[0]]);
            let sv = kb.load(s, &[]);
            let m = kb.mul(x, sv);
            let r = kb.add(m, pv);
            kb.store_to(out, &[i[0]], r);
        });
        let k = kb.finish(&format!("simd.broadcast.{t}"));
        let (vk, _) = both(&k, 1);
        for n in lengths() {
            let av: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 3.0).collect();
            let want: Vec<f64> = av.iter().map(|x| x * 1.5 + 0.75).collect();
            if t == DType::F64 {
                let (mut a_buf, mut sv, mut o) = (av.clone(), 1.5f64, vec![0.0f64; n]);
                let views = [
                    dense(&mut a_buf, &[n as i64]),
                    scalar_view(&mut sv),
                    dense(&mut o, &[n as i64]),
                ];
                run_on(&vk, &views, &[Scalar::F64(0.75)], 2).unwrap();
                assert_eq!(o, want, "n = {n}");
            } else {
                let mut a_buf: Vec<f32> = av.iter().map(|&x| x as f32).collect();
                let (mut sv, mut o) = (1.5f32, vec![0.0f32; n]);
                let views = [
                    dense(&mut a_buf, &[n as i64]),
                    scalar_view(&mut sv),
                    dense(&mut o, &[n as i64]),
                ];
                run_on(&vk, &views, &[Scalar::F32(0.75)], 2).unwrap();
                let want: Vec<f32> = want.iter().map(|&x| x as f32).collect();
                assert_eq!(o, want, "n = {n}");
            }
        }
    }
}

/// `out[i, j] = a[i, j] * c[j] + r[i]`: a 2-d loop over padded rows (row stride > extent),
/// with a row vector `c` (contiguous in the innermost index) and a column `r` (one value per
/// row), on sub-views that start inside their buffers.
#[test]
fn padded_two_dimensional_views_and_row_and_column_broadcasts() {
    for t in [DType::F64, DType::F32] {
        let mut kb = Kb::new();
        let a = kb.store(t, 2, Privilege::Read);
        let c = kb.store(t, 1, Privilege::Read);
        let r = kb.store(t, 1, Privilege::Read);
        let out = kb.store(t, 2, Privilege::ReadWrite);
        kb.parallel(out, 2, |kb, ij| {
            let x = kb.load(a, ij);
            let cv = kb.load(c, &[ij[1]]);
            let rv = kb.load(r, &[ij[0]]);
            let old = kb.load(out, ij);
            let m = kb.mul(x, cv);
            let s = kb.add(m, rv);
            let s = kb.add(s, old);
            kb.store_to(out, ij, s);
        });
        let k = kb.finish(&format!("simd.padded.{t}"));
        let (vk, _) = both(&k, 1);
        // Rows of 33 f64 elements run one AVX-512 step each, where the CPU has AVX-512, else
        // two AVX2 steps, where it has AVX2 (the default path is the widest).
        let avx512 = t == DType::F64 && CpuBackend::avx512_detected();
        let avx2 = t == DType::F64 && !avx512 && CpuBackend::avx2_detected();
        assert_eq!(vk.avx512_loops(), usize::from(avx512));
        assert_eq!(vk.avx2_loops(), usize::from(avx2));
        for (rows, cols) in [
            (0usize, 5usize),
            (3, 0),
            (1, 1),
            (3, 7),
            (5, 16),
            (4, 17),
            (70, 33),
        ] {
            let (pad_r, pad_c, w) = (2usize, 3usize, cols + 5);
            let h = rows + 4;
            let av: Vec<f64> = (0..h * w).map(|i| (i % 97) as f64 - 40.0).collect();
            let cv: Vec<f64> = (0..cols + 4).map(|j| j as f64 * 0.5 + 1.0).collect();
            let rv: Vec<f64> = (0..rows + 4).map(|i| i as f64 - 2.0).collect();
            let ov: Vec<f64> = (0..h * w).map(|i| (i % 13) as f64).collect();
            let mut want = ov.clone();
            for i in 0..rows {
                for j in 0..cols {
                    let at = (i + pad_r) * w + j + pad_c;
                    want[at] = av[at] * cv[j + 1] + rv[i + 3] + ov[at];
                }
            }
            let sub2 = |p: *mut u8, size: usize| StoreView {
                ptr: p.wrapping_add((pad_r * w + pad_c) * size),
                extents: vec![rows as i64, cols as i64],
                strides: vec![w as i64, 1],
                origin: vec![pad_r as i64, pad_c as i64],
            };
            let sub1 = |p: *mut u8, size: usize, off: usize, n: usize| StoreView {
                ptr: p.wrapping_add(off * size),
                extents: vec![n as i64],
                strides: vec![1],
                origin: vec![off as i64],
            };
            macro_rules! go {
                ($ty:ty) => {{
                    let conv = |v: &[f64]| v.iter().map(|&x| x as $ty).collect::<Vec<$ty>>();
                    let (mut a_b, mut c_b, mut r_b, mut o_b) =
                        (conv(&av), conv(&cv), conv(&rv), conv(&ov));
                    let size = std::mem::size_of::<$ty>();
                    let views = [
                        sub2(a_b.as_mut_ptr().cast(), size),
                        sub1(c_b.as_mut_ptr().cast(), size, 1, cols),
                        sub1(r_b.as_mut_ptr().cast(), size, 3, rows),
                        sub2(o_b.as_mut_ptr().cast(), size),
                    ];
                    run_on(&vk, &views, &[], 2).unwrap();
                    assert_eq!(o_b, conv(&want), "{t} {rows}x{cols}");
                }};
            }
            if t == DType::F64 { go!(f64) } else { go!(f32) }
        }
    }
}

/// A view whose innermost stride is 2 elements (every other element of a buffer) and a
/// transposed view: the compiled loop has a vector variant, but these arguments must run the
/// scalar code (reading adjacent elements would be wrong).
#[test]
fn non_unit_innermost_strides_take_the_scalar_code() {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let two = kb.f64(2.0);
        let r = kb.mul(x, two);
        kb.store_to(out, &[i[0]], r);
    });
    let (vk, _) = both(&kb.finish("simd.strided"), 1);
    for n in lengths() {
        let mut buf: Vec<f64> = (0..2 * n).map(|i| i as f64).collect();
        for (a_stride, o_stride) in [(2i64, 1i64), (1, 2), (2, 2)] {
            let mut o = vec![-1.0f64; 2 * n];
            let views = [
                StoreView {
                    ptr: buf.as_mut_ptr().cast(),
                    extents: vec![n as i64],
                    strides: vec![a_stride],
                    origin: vec![0],
                },
                StoreView {
                    ptr: o.as_mut_ptr().cast(),
                    extents: vec![n as i64],
                    strides: vec![o_stride],
                    origin: vec![0],
                },
            ];
            run_on(&vk, &views, &[], 2).unwrap();
            for (i, got) in o.iter().enumerate() {
                let want = if i % o_stride as usize == 0 && i / (o_stride as usize) < n {
                    2.0 * ((i / o_stride as usize) * a_stride as usize) as f64
                } else {
                    -1.0
                };
                assert_eq!(
                    *got, want,
                    "n = {n}, strides {a_stride}/{o_stride}, i = {i}"
                );
            }
        }
    }

    // out[i, j] = a[j, i]: `a`'s innermost index is the loop's outer one, so it is not a
    // vector access and the loop stays scalar; the same loop over a transposed view of `a`
    // (innermost stride n) is then a plain copy, vectorized for `out` only.
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let out = kb.store(DType::F64, 2, Privilege::Write);
    kb.parallel(out, 2, |kb, ij| {
        let x = kb.load(a, ij);
        kb.store_to(out, ij, x);
    });
    let (vk, _) = both(&kb.finish("simd.transposed"), 1);
    let n = 9usize;
    let mut src: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
    let mut o = vec![0.0f64; n * n];
    let views = [
        StoreView {
            ptr: src.as_mut_ptr().cast(),
            extents: vec![n as i64, n as i64],
            strides: vec![1, n as i64],
            origin: vec![0, 0],
        },
        dense(&mut o, &[n as i64, n as i64]),
    ];
    run_on(&vk, &views, &[], 1).unwrap();
    for i in 0..n {
        for j in 0..n {
            assert_eq!(o[i * n + j], src[j * n + i]);
        }
    }
}

/// Loops that must not vectorize still give the right results: a `for` loop in the body, a
/// computed index, an index on the wrong dimension, a value stored to one element by every
/// iteration.
#[test]
fn loops_that_do_not_vectorize() {
    // out[i] = sum_{k < 3} a[i] * k  (a for loop inside).
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let lo = kb.i64(0);
        let hi = kb.i64(3);
        let z = kb.f64(0.0);
        let r = kb.for_loop(lo, hi, &[z], |kb, k, c| {
            let kf = kb.cast(DType::F64, k);
            let m = kb.mul(x, kf);
            vec![kb.add(c[0], m)]
        });
        kb.store_to(out, &[i[0]], r[0]);
    });
    let (vk, _) = both(&kb.finish("novec.for"), 0);
    check_on_iota(&vk, |i, _| 3.0 * i as f64);

    // out[i] = a[(i + 1) % n] (a computed, checked index).
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let one = kb.i64(1);
        let n = kb.extent(out, 0);
        let j = kb.add(i[0], one);
        let j = kb.bin(BinaryOp::Rem, j, n);
        let x = kb.load(a, &[j]);
        kb.store_to(out, &[i[0]], x);
    });
    let (vk, _) = both(&kb.finish("novec.computed_index"), 0);
    check_on_iota(&vk, |i, n| ((i + 1) % n) as f64);

    // out[i, j] = a[j, i] (the innermost index on a's first dimension: a gather).
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let out = kb.store(DType::F64, 2, Privilege::Write);
    kb.parallel(out, 2, |kb, ij| {
        let x = kb.load(a, &[ij[1], ij[0]]);
        kb.store_to(out, ij, x);
    });
    let (vk, _) = both(&kb.finish("novec.gather"), 0);
    let n = 7usize;
    let mut src: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
    let mut o = vec![0.0; n * n];
    run_on(
        &vk,
        &[
            dense(&mut src, &[n as i64, n as i64]),
            dense(&mut o, &[n as i64, n as i64]),
        ],
        &[],
        1,
    )
    .unwrap();
    for i in 0..n {
        for j in 0..n {
            assert_eq!(o[i * n + j], src[j * n + i]);
        }
    }

    // last[] = a[i]: every iteration writes a different value to the same element, a data
    // race that the validator refuses (the winner would depend on the order of iterations).
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let last = kb.store(DType::F64, 0, Privilege::Write);
    kb.parallel(a, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        kb.store_to(last, &[], x);
    });
    let err = CpuBackend::new()
        .unwrap()
        .compile(&kb.finish("novec.store_one"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("data race"), "{err}");

    // A rank-1 reduction target.

    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let rows = kb.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(a, 2, |kb, ij| {
        let x = kb.load(a, ij);
        kb.reduce(rows, &[ij[0]], ReduceOp::Sum, x);
    });
    let (vk, _) = both(&kb.finish("novec.row_sums"), 0);
    let mut av: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let mut rs = vec![0.0f64; 3];
    run_on(
        &vk,
        &[dense(&mut av, &[3, 4]), dense(&mut rs, &[3])],
        &[],
        1,
    )
    .unwrap();
    assert_eq!(rs, vec![6.0, 22.0, 38.0]);
}

/// A uniform value stored to a 0-d store once per row is vectorizable: every lane would store
/// the same value.
#[test]
fn uniform_store_to_a_zero_d_store() {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    let flag = kb.store(DType::F64, 0, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let one = kb.f64(1.0);
        kb.store_to(flag, &[], one);
        let r = kb.add(x, one);
        kb.store_to(out, &[i[0]], r);
    });
    let (vk, _) = both(&kb.finish("simd.flag"), 1);
    for n in lengths() {
        let mut av: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut o = vec![0.0; n];
        let mut f = 0.0f64;
        run_on(
            &vk,
            &[
                dense(&mut av, &[n as i64]),
                dense(&mut o, &[n as i64]),
                scalar_view(&mut f),
            ],
            &[],
            2,
        )
        .unwrap();
        assert_eq!(f, if n > 0 { 1.0 } else { 0.0 });
        assert!(o.iter().enumerate().all(|(i, &x)| x == i as f64 + 1.0));
    }
}

/// Values for a reduction of `t`, exact in `t`, with every partial result exact too: products
/// of mostly ±1 (and, for floats, a few 2 and 0.5); small integers or quarters otherwise.
fn red_values(n: usize, op: ReduceOp, t: DType, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|_| {
            let r = rng.next() % 1000;
            match (op, t) {
                (ReduceOp::Prod, DType::F64 | DType::F32) => match r {
                    0..=1 => 2.0,
                    2..=3 => 0.5,
                    4..=450 => -1.0,
                    _ => 1.0,
                },
                (ReduceOp::Prod, _) => {
                    if r < 450 {
                        -1.0
                    } else {
                        1.0
                    }
                }
                (_, DType::F64) => r as f64 * 0.75 - 300.0,
                _ => (r % 9) as f64 - 4.0,
            }
        })
        .collect()
}

/// Reductions into a 0-d store, vectorized: the result is within the documented tolerance of
/// an exact reference (here exact: every partial sum is representable), and the same bits for
/// 1 and 2 threads. The vector code sums in a different order than the scalar code (lanes
/// apart, then the lanes, then the remainder), so only `min` and `max` are compared with the
/// scalar code bit for bit.
#[test]
fn reductions_into_zero_d_stores() {
    for t in [DType::F64, DType::F32, DType::I64, DType::I32] {
        for op in ReduceOp::ALL {
            let mut kb = Kb::new();
            let a = kb.store(t, 1, Privilege::Read);
            let acc = kb.store(t, 0, Privilege::Reduce(op));
            kb.parallel(a, 1, |kb, i| {
                let x = kb.load(a, &[i[0]]);
                kb.reduce(acc, &[], op, x);
            });
            let (vk, sk) = both(&kb.finish(&format!("simd.reduce.{}.{t}", op.name())), 1);
            let mut ns = lengths();
            ns.push(100_001);
            for n in ns {
                let xs = red_values(n, op, t, n as u64 + 5);
                let init = 3.0;
                let want = xs.iter().fold(init, |a, &x| match op {
                    ReduceOp::Sum => a + x,
                    ReduceOp::Prod => a * x,
                    ReduceOp::Min => a.min(x),
                    ReduceOp::Max => a.max(x),
                });
                let mut results = vec![];
                for (c, threads) in [(&vk, 1), (&vk, 2), (&sk, 1)] {
                    let mut a_b = Buf::new(t, &encode(t, &xs));
                    let mut r = Buf::new(t, &encode(t, &[init]));
                    let view = StoreView::dense(r.words.as_mut_ptr().cast(), &[]);
                    run_on(c, &[a_b.view(), view], &[], threads).unwrap();
                    results.push(r.get(0));
                }
                assert_eq!(
                    results[0],
                    results[1],
                    "{t} {} n = {n}: 1 vs 2 threads",
                    op.name()
                );
                assert_eq!(decode(t, results[0]), want, "{t} {} n = {n}", op.name());
                if matches!(op, ReduceOp::Min | ReduceOp::Max) || t.is_int() {
                    assert_eq!(
                        results[0],
                        results[2],
                        "{t} {} n = {n}: vs scalar",
                        op.name()
                    );
                }
            }
        }
    }
}

fn encode(t: DType, xs: &[f64]) -> Vec<u64> {
    xs.iter()
        .map(|&x| match t {
            DType::F64 => x.to_bits(),
            DType::F32 => u64::from((x as f32).to_bits()),
            DType::I64 => x as i64 as u64,
            DType::I32 => u64::from(x as i32 as u32),
            DType::Bool => u64::from(x != 0.0),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        })
        .collect()
}

fn decode(t: DType, b: u64) -> f64 {
    match t {
        DType::F64 => f64::from_bits(b),
        DType::F32 => f64::from(f32::from_bits(b as u32)),
        DType::I64 => b as i64 as f64,
        DType::I32 => f64::from(b as u32 as i32),
        DType::Bool => f64::from(u8::from(b != 0)),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unreachable!("storage types hold no values")
        }
    }
}

/// A float sum that rounds: within `n * eps * sum|x|` of the exact sum (the documented bound),
/// the same for 1 and 2 threads, and for a 2-d loop too. Also NaN and -0 behaviour of
/// `min`/`max` reductions, and a bool reduction.
#[test]
fn rounding_sums_and_special_reductions() {
    for t in [DType::F64, DType::F32] {
        let mut kb = Kb::new();
        let a = kb.store(t, 2, Privilege::Read);
        let acc = kb.store(t, 0, Privilege::Reduce(ReduceOp::Sum));
        kb.parallel(a, 2, |kb, ij| {
            let x = kb.load(a, ij);
            let y = kb.mul(x, x);
            kb.reduce(acc, &[], ReduceOp::Sum, y);
        });
        let (vk, _) = both(&kb.finish(&format!("simd.sum2d.{t}")), 1);
        for (rows, cols) in [(1usize, 1usize), (3, 5), (17, 9), (300, 301)] {
            let mut rng = Rng(rows as u64 * 31 + cols as u64);
            let xs: Vec<f64> = (0..rows * cols).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let xs: Vec<f64> = if t == DType::F32 {
                xs.iter().map(|&x| f64::from(x as f32)).collect()
            } else {
                xs
            };
            let exact: f64 = xs.iter().map(|x| x * x).sum();
            let mut got = vec![];
            for threads in [1, 2] {
                let mut a_b = Buf::new(t, &encode(t, &xs));
                let mut r = Buf::new(t, &[0]);
                let views = [
                    StoreView::dense(a_b.words.as_mut_ptr().cast(), &[rows as i64, cols as i64]),
                    StoreView::dense(r.words.as_mut_ptr().cast(), &[]),
                ];
                run_on(&vk, &views, &[], threads).unwrap();
                got.push(r.get(0));
            }
            assert_eq!(got[0], got[1]);
            let eps = if t == DType::F64 {
                f64::EPSILON
            } else {
                f64::from(f32::EPSILON)
            };
            let bound = (rows * cols) as f64 * eps * exact + 1e-300;
            let v = decode(t, got[0]);
            assert!(
                (v - exact).abs() <= bound,
                "{t} {rows}x{cols}: {v} vs {exact}"
            );
        }
    }

    // min/max with NaN and signed zeros: the vector code gives the scalar code's bits.
    for op in [ReduceOp::Min, ReduceOp::Max] {
        let mut kb = Kb::new();
        let a = kb.store(DType::F64, 1, Privilege::Read);
        let acc = kb.store(DType::F64, 0, Privilege::Reduce(op));
        kb.parallel(a, 1, |kb, i| {
            let x = kb.load(a, &[i[0]]);
            kb.reduce(acc, &[], op, x);
        });
        let (vk, sk) = both(&kb.finish(&format!("simd.special.{}", op.name())), 1);
        let cases: Vec<Vec<f64>> = vec![
            vec![0.0, -0.0, 0.0, -0.0, 0.0],
            vec![-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0],
            vec![1.0, 2.0, f64::NAN, 3.0, 4.0, 5.0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, f64::NAN],
            vec![f64::INFINITY, f64::NEG_INFINITY, 1.0],
        ];
        for xs in cases {
            let mut bits = vec![];
            for c in [&vk, &sk] {
                let mut a_b = xs.clone();
                let mut r = match op {
                    ReduceOp::Min => f64::INFINITY,
                    _ => f64::NEG_INFINITY,
                };
                run_on(
                    c,
                    &[dense(&mut a_b, &[xs.len() as i64]), scalar_view(&mut r)],
                    &[],
                    1,
                )
                .unwrap();
                bits.push(r);
            }
            assert!(
                same_f64(bits[0], bits[1]),
                "{}: {xs:?}: {bits:?}",
                op.name()
            );
            assert_eq!(bits[0].is_nan(), xs.iter().any(|x| x.is_nan()));
        }
    }

    // any(a[i] > 0.5) and all(a[i] > -2.0) through bool reductions of comparisons.
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let any = kb.store(DType::Bool, 0, Privilege::Reduce(ReduceOp::Max));
    let all = kb.store(DType::Bool, 0, Privilege::Reduce(ReduceOp::Min));
    kb.parallel(a, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        let h = kb.f64(0.5);
        let m = kb.f64(-2.0);
        let gt = kb.cmp(CmpOp::Gt, x, h);
        let ge = kb.cmp(CmpOp::Gt, x, m);
        kb.reduce(any, &[], ReduceOp::Max, gt);
        kb.reduce(all, &[], ReduceOp::Min, ge);
    });
    let (vk, _) = both(&kb.finish("simd.any_all"), 1);
    for n in lengths() {
        for hot in [None, Some(0), Some(n / 2), Some(n.saturating_sub(1))] {
            let mut xs = vec![0.0f64; n];
            if let Some(h) = hot.filter(|&h| h < n) {
                xs[h] = 1.0;
                xs[n - 1 - h] = -3.0;
            }
            let (mut an, mut al) = (false, true);
            run_on(
                &vk,
                &[
                    dense(&mut xs, &[n as i64]),
                    scalar_view(&mut an),
                    scalar_view(&mut al),
                ],
                &[],
                2,
            )
            .unwrap();
            assert_eq!(an, xs.iter().any(|&x| x > 0.5), "n = {n} {hot:?}");
            assert_eq!(al, xs.iter().all(|&x| x > -2.0), "n = {n} {hot:?}");
        }
    }
}

/// `out[i] = a[i] + t[k]` with `k` a constant, or an index read from a 0-d store: a load the
/// same for a whole row, by an index that is not a loop index (a broadcast view's loads read
/// index 0, see the back end's `splat`), is made by the row's scalar code, so the loop still
/// runs in vectors, with the scalar code's values; an index past `t` still faults.
#[test]
fn uniform_loads_by_indices_that_are_not_loop_indices() {
    for from_store in [false, true] {
        let mut kb = Kb::new();
        let a = kb.store(DType::F64, 1, Privilege::Read);
        let t = kb.store(DType::F64, 1, Privilege::Read);
        let ks = kb.store(DType::I64, 0, Privilege::Read);
        let out = kb.store(DType::F64, 1, Privilege::Write);
        kb.parallel(out, 1, |kb, i| {
            let k = if from_store {
                kb.load(ks, &[])
            } else {
                kb.i64(2)
            };
            let x = kb.load(a, &[i[0]]);
            let y = kb.load(t, &[k]);
            let r = kb.add(x, y);
            kb.store_to(out, &[i[0]], r);
        });
        let (vk, sk) = both(&kb.finish(&format!("simd.uniform.{from_store}")), 1);
        // Runs `compiled` on `a` and `t` with index 2; `out` or the error.
        let run = |compiled: &CompiledKernel, a: &[f64], t: &[f64]| {
            let (mut av, mut tv, mut k) = (a.to_vec(), t.to_vec(), 2i64);
            let mut o = vec![0.0f64; a.len()];
            let views = [
                dense(&mut av, &[a.len() as i64]),
                dense(&mut tv, &[t.len() as i64]),
                scalar_view(&mut k),
                dense(&mut o, &[a.len() as i64]),
            ];
            run_on(compiled, &views, &[], 2).map(|()| o)
        };
        for n in lengths() {
            let av: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 1.0).collect();
            let want: Vec<f64> = av.iter().map(|x| x + 30.25).collect();
            for compiled in [&vk, &sk] {
                let o = run(compiled, &av, &[10.0, 20.0, 30.25]).unwrap();
                assert_eq!(o, want, "n = {n}, index from a store: {from_store}");
            }
        }
        // `t` of two elements: index 2 is past it.
        let err = run(&vk, &[1.0; 9], &[10.0, 20.0]).unwrap_err();
        assert!(err.to_string().contains("out of bounds"), "{err}");
    }
}

/// An out-of-bounds loop extent is caught before the vector code runs, as for the scalar code.
#[test]
fn bounds_are_proven_before_the_vector_code_runs() {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, i| {
        let x = kb.load(a, &[i[0]]);
        kb.store_to(out, &[i[0]], x);
    });
    let (vk, _) = both(&kb.finish("simd.bounds"), 1);
    let mut av = vec![1.0f64; 5];
    let mut o = vec![0.0f64; 9];
    let err = run_on(&vk, &[dense(&mut av, &[5]), dense(&mut o, &[9])], &[], 1).unwrap_err();
    assert!(err.to_string().contains("out of bounds"), "{err}");
    assert!(o.iter().all(|&x| x == 0.0));
}

/// Black-Scholes after math lowering: the vector code gives the scalar code's bits, on
/// ordinary inputs and on special ones, and stays close to the kernel with libm calls.
#[test]
fn black_scholes_lowered_is_identical_to_the_scalar_code() {
    let k = weft_ir::text::parse(&black_scholes_ir(true, true)).unwrap();
    let lowered = lower_math(&k);
    assert!(!has_math_functions(&lowered));
    let (vk, sk) = both(&lowered, 1);
    let avx512 = CpuBackend::avx512_detected();
    assert_eq!(
        vk.avx512_loops(),
        usize::from(avx512),
        "Black-Scholes runs in AVX-512 code where the CPU has it"
    );
    assert_eq!(
        vk.avx2_loops(),
        usize::from(!avx512 && CpuBackend::avx2_detected()),
        "else in AVX2 code where the CPU has it: {:?}",
        vk.wide_refusals()
    );
    let mut be = CpuBackend::new().unwrap();
    let calls = be.compile(&k).unwrap();
    assert_eq!(calls.vectorized_loops(), 0, "libm calls stay scalar");
    for n in [0usize, 1, 2, 3, 4, 5, 7, 9, 17, 20_001] {
        let mut rng = Rng(n as u64 + 11);
        let mut s: Vec<f64> = (0..n).map(|_| rng.uniform(5.0, 30.0)).collect();
        let mut x: Vec<f64> = (0..n).map(|_| rng.uniform(1.0, 100.0)).collect();
        let mut t: Vec<f64> = (0..n).map(|_| rng.uniform(0.25, 10.0)).collect();
        // Special values in the first few options.
        let sp = [0.0, -0.0, f64::INFINITY, f64::NAN, -1.0, 1e-310, 1e300];
        for i in 0..n.min(sp.len() * 3) {
            match i % 3 {
                0 => s[i / 3] = sp[i / 3],
                1 => x[i / 3] = sp[i / 3],
                _ => t[i / 3] = sp[i / 3],
            }
        }
        let mut outs = vec![];
        for c in [&vk, &sk, &calls] {
            let (mut r, mut v) = (0.02f64, 0.3f64);
            let (mut call, mut put) = (vec![0.0f64; n], vec![0.0f64; n]);
            let m = n as i64;
            let views = [
                dense(&mut s, &[m]),
                dense(&mut x, &[m]),
                dense(&mut t, &[m]),
                scalar_view(&mut r),
                scalar_view(&mut v),
                dense(&mut call, &[m]),
                dense(&mut put, &[m]),
            ];
            run_on(c, &views, &[], 2).unwrap();
            outs.push((call, put));
        }
        for i in 0..n {
            for (o, name) in [(0, "call"), (1, "put")] {
                let pick = |k: usize| if o == 0 { outs[k].0[i] } else { outs[k].1[i] };
                assert_eq!(
                    pick(0).to_bits(),
                    pick(1).to_bits(),
                    "{name} {i} of {n}: s {} x {} t {}",
                    s[i],
                    x[i],
                    t[i]
                );
                if i >= sp.len() {
                    let scale = s[i].max(x[i]);
                    assert!((pick(0) - pick(2)).abs() <= 1e-13 * scale, "{name} {i}");
                }
            }
        }
    }
}

/// Every math function, lowered, in f64 and f32: the vector code gives the scalar code's bits
/// (the f32 forms of sin, cos and pow compute in f64, so those loops mix lane widths and stay
/// scalar).
#[test]
fn lowered_math_functions_are_identical_to_the_scalar_code() {
    // The math functions and `sqrt` (`floor` and `ceil` are covered with the other operators).
    let unary: Vec<UnaryOp> = UnaryOp::ALL
        .into_iter()
        .filter(|op| op.is_math() && !matches!(op, UnaryOp::Floor | UnaryOp::Ceil))
        .collect();
    for t in [DType::F64, DType::F32] {
        for &op in &unary {
            let k = elementwise(
                &format!("lowered.{}.{t}", op.name()),
                t,
                t,
                &[],
                |kb, x, _, _| kb.un(op, x),
            );
            let k = lower_math(&k);
            // The f32 forms that compute in f64 mix widths, which the vector path does not.
            let mixed = t == DType::F32
                && !matches!(
                    op,
                    UnaryOp::Sqrt | UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Erf
                );
            same_bits(&k, t, t, &[], usize::from(!mixed));
        }
        let k = elementwise(&format!("lowered.pow.{t}"), t, t, &[], |kb, x, y, _| {
            let d = kb.bin(BinaryOp::Div, x, y);
            kb.bin(BinaryOp::Pow, x, d)
        });
        let k = lower_math(&k);
        same_bits(&k, t, t, &[], usize::from(t == DType::F64));
        // A scalar exponent: the lowered `pow` selects on tests of it (uniform masks), which
        // the wide bodies take as masks of all or no lanes.
        if t == DType::F64 {
            let k = elementwise("lowered.pow.scalar", t, t, &[t], |kb, x, _, p| {
                kb.bin(BinaryOp::Pow, x, p[0])
            });
            let k = lower_math(&k);
            let (vk, _) = both(&k, 1);
            assert_eq!(
                vk.avx512_loops() + vk.avx2_loops(),
                usize::from(CpuBackend::avx2_detected()),
                "a wide body where the CPU has one: {:?}",
                vk.wide_refusals()
            );
            for e in [-1.5, 2.0, 3.0, 0.5, -2.0, 0.0, f64::INFINITY, f64::NAN] {
                same_bits(&k, t, t, &[Scalar::F64(e)], 1);
            }
        }
        let k = elementwise(&format!("lowered.atan2.{t}"), t, t, &[], |kb, x, y, _| {
            let d = kb.bin(BinaryOp::Sub, x, y);
            kb.bin(BinaryOp::Atan2, x, d)
        });
        let k = lower_math(&k);
        same_bits(&k, t, t, &[], usize::from(t == DType::F64));
    }
}

/// Bool stores loaded and stored by the vector code (two or four bytes a vector, any nonzero
/// byte true): a comparison stored as a mask, for each lane width; and a mask loaded from
/// bytes of 0, 1, 2 and 255, combined with a comparison, selecting and stored, against the
/// scalar code, on every length.
#[test]
fn bool_masks_load_and_store_as_vectors() {
    for t in [DType::F64, DType::F32, DType::I64, DType::I32] {
        let k = elementwise(
            &format!("simd.mask.{t}"),
            t,
            DType::Bool,
            &[],
            |kb, x, y, _| kb.cmp(CmpOp::Lt, x, y),
        );
        same_bits(&k, t, DType::Bool, &[], 1);
    }
    for t in [DType::F64, DType::F32] {
        let k = mask_kernel(&format!("simd.mask_load.{t}"), t);
        let (vk, sk) = both(&k, 1);
        for n in lengths() {
            let bytes: Vec<u64> = (0..n).map(|i| [0u64, 1, 2, 255, 0, 7][i % 6]).collect();
            let mut mb = Buf::new(DType::Bool, &bytes);
            let mut xb = Buf::new(t, &inputs(t, n, 3));
            let mut outs = vec![];
            for c in [&vk, &sk] {
                let (mut o, mut o2) = (Buf::zeros(t, n), Buf::zeros(DType::Bool, n));
                run_on(c, &[mb.view(), xb.view(), o.view(), o2.view()], &[], 2).unwrap();
                outs.push((o, o2));
            }
            assert_eq!(
                outs[0].0.bytes(),
                outs[1].0.bytes(),
                "{t}: selected, n = {n}"
            );
            assert_eq!(
                outs[0].1.bytes(),
                outs[1].1.bytes(),
                "{t}: and-ed mask, n = {n}"
            );
            for i in 0..n {
                assert!(outs[0].1.get(i) <= 1, "{t}: a stored bool is 0 or 1");
            }
        }
    }
}
