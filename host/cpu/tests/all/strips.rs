//! Loops cut into segments (the `strips` module) and `for` loops whose iterations reduce into
//! distinct elements of a chunk buffer (the `lower::iterations` module): the same bits as the
//! scalar code, which neither cuts nor vectorizes, and as the reference interpreter, on row
//! counts around the strip and chunk sizes and row lengths around the vector widths, on one
//! and two threads; an index out of bounds in a later segment faults as the scalar code does.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use proptest::prelude::*;
use weft_cpu::{CompiledKernel, CpuBackend, StoreView};
use weft_ir::builder::{BodyBuilder, KernelBuilder, StoreParam, Value};
use weft_ir::interp::{self, Arg, Storage, View};
use weft_ir::{BinaryOp as B, DType, Kernel, Privilege, ReduceOp, UnaryOp as U};

/// A gradient step's row loop, as logistic regression fuses it: `z = a[i, :] @ w` (in lanes),
/// a long straight run on `z` (a polynomial with `min`, `max`, a division, `sqrt`), minus
/// `y[i]`, then `g[r] += a[i, r] * s` for every `r`.
fn gradient_kernel() -> Kernel {
    let mut k = KernelBuilder::new("strips.gradient");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let w = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Read);
    let g = k.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let z = row_dot(b, (a, w), i[0], n);
        let mut t = z;
        for c in [0.5, -1.25, 2.0, 0.75, -0.125] {
            let k = b.const_of(DType::F64, c);
            let lim = b.const_of(DType::F64, 40.0);
            let u = b.binary(B::Min, t, lim);
            let u = b.binary(B::Max, u, b.unary(U::Neg, lim));
            let v = b.binary(B::Mul, u, k);
            let v = b.binary(B::Add, v, u);
            let v = b.binary(B::Mul, v, v);
            let one = b.const_of(DType::F64, 1.0);
            let d = b.binary(B::Add, b.unary(U::Abs, v), one);
            t = b.binary(B::Div, b.unary(U::Sqrt, d), b.binary(B::Add, one, u));
        }
        let yi = b.load(y, &[i[0]]);
        let s = b.binary(B::Sub, t, yi);
        gradient_row(b, (a, g), i[0], s);
    });
    k.finish_validated().unwrap()
}

/// `a[i, :] @ w` in the lane order (`fold_lanes`), over `n` columns.
fn row_dot(b: &mut BodyBuilder, (a, w): (StoreParam, StoreParam), i: Value, n: Value) -> Value {
    let lo = b.const_i64(0);
    b.fold_lanes(ReduceOp::Sum, DType::F64, lo, n, |b, j| {
        let aij = b.load(a, &[i, j]);
        let wj = b.load(w, &[j]);
        b.mul(aij, wj)
    })
}

/// `g[r] += a[i, r] * s` for every `r` of row `i` (the inner loop of `vecmat_rows`).
fn gradient_row(b: &mut BodyBuilder, (a, g): (StoreParam, StoreParam), i: Value, s: Value) {
    let lo = b.const_i64(0);
    let hi = b.extent(a, 1);
    b.for_loop(lo, hi, &[], |b, r, _| {
        let air = b.load(a, &[i, r]);
        let p = b.mul(air, s);
        b.reduce(g, &[r], p);
        vec![]
    });
}

/// `g[r] += a[i, r] * x[i]` for every `r` (numeric's `vecmat_rows`).
fn vecmat_rows_kernel(dt: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("strips.vecmat_rows.{dt}"));
    let a = k.store(dt, 2, Privilege::Read);
    let x = k.store(dt, 1, Privilege::Read);
    let g = k.store(dt, 1, Privilege::Reduce(ReduceOp::Sum));
    k.parallel(x, |b, i| {
        let xi = b.load(x, &[i[0]]);
        gradient_row(b, (a, g), i[0], xi);
    });
    k.finish_validated().unwrap()
}

/// Compiles `k` with the vector lowering and without.
fn both(k: &Kernel) -> (CompiledKernel, CompiledKernel) {
    let mut be = CpuBackend::new().unwrap();
    assert!(be.simd(), "this test needs a CPU with 128-bit vectors");
    let v = be.compile(k).unwrap();
    be.set_simd(false);
    let s = be.compile(k).unwrap();
    (v, s)
}

/// Deterministic inputs with a spread of magnitudes and signs.
fn inputs(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 4.0
        })
        .collect()
}

/// Runs the gradient kernel on `m` rows of `n`, with `a`'s last stride `step` elements;
/// returns `g`'s bits.
fn run_gradient(
    k: &CompiledKernel,
    (m, n, step): (usize, usize, usize),
    threads: usize,
) -> Vec<u64> {
    let mut a = inputs(m * n * step, (m * 7 + n) as u64);
    let mut w = inputs(n, 3);
    let mut y = inputs(m, 5);
    let mut g = vec![0.0f64; n];
    let a_view = StoreView {
        ptr: a.as_mut_ptr().cast(),
        extents: vec![m as i64, n as i64],
        strides: vec![(n * step) as i64, step as i64],
        origin: vec![0, 0],
    };
    let stores = [
        a_view,
        dense(&mut w, &[n as i64]),
        dense(&mut y, &[m as i64]),
        dense(&mut g, &[n as i64]),
    ];
    run_on(k, &stores, &[], threads).unwrap();
    g.iter().map(|v| v.to_bits()).collect()
}

/// Runs `k` in the reference interpreter on dense f64 stores (`(values, extents)` per
/// parameter) and returns store `out`'s bits.
fn interpret(k: &Kernel, stores: Vec<(Vec<f64>, Vec<i64>)>, out: usize) -> Vec<u64> {
    let mut storages = Vec::new();
    let mut args = Vec::new();
    for (i, (values, extents)) in stores.into_iter().enumerate() {
        storages.push(Storage::from_f64(DType::F64, &values));
        args.push(Arg::Store(View::dense(i, &extents)));
    }
    interp::run_with_limit(k, &args, &mut storages, u64::MAX).unwrap();
    storages[out].to_f64().iter().map(|v| v.to_bits()).collect()
}

/// The reference interpreter's `g` for the gradient kernel on `m` rows of `n` (dense).
fn interpreted_gradient(k: &Kernel, m: usize, n: usize) -> Vec<u64> {
    let (mi, ni) = (m as i64, n as i64);
    let stores = vec![
        (inputs(m * n, (m * 7 + n) as u64), vec![mi, ni]),
        (inputs(n, 3), vec![ni]),
        (inputs(m, 5), vec![mi]),
        (vec![0.0; n], vec![ni]),
    ];
    interpret(k, stores, 3)
}

#[test]
fn a_cut_loop_gives_the_bits_of_the_whole_loop_and_of_the_interpreter() {
    let k = gradient_kernel();
    let (v, s) = both(&k);
    assert_eq!(v.cut_loops(), 1, "the row loop is cut");
    assert_eq!(v.vectorized_loops(), 1, "its straight run vectorizes");
    assert_eq!(s.cut_loops(), 0);
    // Row counts around the strip (512 points) and one past a chunk (16384 rows).
    for m in [1, 3, 511, 512, 513, 1500, 16385] {
        for n in [0, 1, 3, 8, 11] {
            let want = run_gradient(&s, (m, n, 1), 1);
            for threads in [1, 2] {
                let got = run_gradient(&v, (m, n, 1), threads);
                assert_eq!(got, want, "m={m} n={n} threads={threads}");
            }
            if m <= 1500 {
                // `g` is an element tree (one block here): the interpreter's order.
                assert_eq!(want, interpreted_gradient(&k, m, n), "m={m} n={n}");
            }
        }
    }
}

#[test]
fn a_cut_loop_over_a_view_with_a_wider_last_stride_gives_the_same_bits() {
    let k = gradient_kernel();
    let (v, s) = both(&k);
    for (m, n) in [(7, 5), (600, 9)] {
        let got = run_gradient(&v, (m, n, 3), 2);
        let want = run_gradient(&s, (m, n, 3), 1);
        assert_eq!(got, want, "m={m} n={n}");
    }
}

#[test]
fn an_index_past_the_end_in_a_later_segment_faults_as_the_whole_loop_does() {
    // `g` is shorter than `a`'s rows: the last segment's reduction reaches past its end.
    let k = gradient_kernel();
    let (v, s) = both(&k);
    let (m, n) = (700, 6);
    let run = |c: &CompiledKernel| {
        let mut a = inputs(m * n, 1);
        let mut w = inputs(n, 2);
        let mut y = inputs(m, 3);
        let mut g = vec![0.0f64; n - 2];
        let stores = [
            dense(&mut a, &[m as i64, n as i64]),
            dense(&mut w, &[n as i64]),
            dense(&mut y, &[m as i64]),
            dense(&mut g, &[(n - 2) as i64]),
        ];
        run_on(c, &stores, &[], 2).unwrap_err().to_string()
    };
    let (got, want) = (run(&v), run(&s));
    assert_eq!(got, want);
    assert!(got.contains("strips.gradient"), "{got}");
}

/// Runs `vecmat_rows` on `m` rows of `n` of `dt`; returns `g` as f64 bits.
fn run_vecmat_rows(
    k: &CompiledKernel,
    dt: DType,
    (m, n): (usize, usize),
    threads: usize,
) -> Vec<u64> {
    let a = inputs(m * n, (m + 31 * n) as u64);
    let x = inputs(m, 11);
    match dt {
        DType::F64 => {
            let (mut a, mut x, mut g) = (a, x, vec![0.5f64; n]);
            let stores = [
                dense(&mut a, &[m as i64, n as i64]),
                dense(&mut x, &[m as i64]),
                dense(&mut g, &[n as i64]),
            ];
            run_on(k, &stores, &[], threads).unwrap();
            g.iter().map(|v| v.to_bits()).collect()
        }
        _ => {
            let mut a: Vec<f32> = a.iter().map(|v| *v as f32).collect();
            let mut x: Vec<f32> = x.iter().map(|v| *v as f32).collect();
            let mut g = vec![0.5f32; n];
            let stores = [
                dense(&mut a, &[m as i64, n as i64]),
                dense(&mut x, &[m as i64]),
                dense(&mut g, &[n as i64]),
            ];
            run_on(k, &stores, &[], threads).unwrap();
            g.iter().map(|v| u64::from(v.to_bits())).collect()
        }
    }
}

#[test]
fn reductions_into_distinct_elements_run_as_vectors_with_the_scalar_bits() {
    for dt in [DType::F64, DType::F32] {
        let k = vecmat_rows_kernel(dt);
        let (v, s) = both(&k);
        assert_eq!(
            v.lane_loops(),
            1,
            "{dt}: the reduction loop runs as vectors"
        );
        assert_eq!(s.lane_loops(), 0);
        for n in (0..=19).chain([63, 64, 65, 1003]) {
            for (m, threads) in [(3, 1), (40, 2)] {
                let got = run_vecmat_rows(&v, dt, (m, n), threads);
                let want = run_vecmat_rows(&s, dt, (m, n), 1);
                assert_eq!(got, want, "{dt} n={n} m={m} threads={threads}");
            }
        }
    }
}

/// The reference interpreter's `g` for `vecmat_rows` (f64) on `m` rows of `n`.
fn interpreted_vecmat_rows(k: &Kernel, m: usize, n: usize) -> Vec<u64> {
    let (mi, ni) = (m as i64, n as i64);
    let stores = vec![
        (inputs(m * n, (m + 31 * n) as u64), vec![mi, ni]),
        (inputs(m, 11), vec![mi]),
        (vec![0.5; n], vec![ni]),
    ];
    interpret(k, stores, 2)
}

#[test]
fn element_trees_give_the_interpreters_bits_across_blocks_and_chunks() {
    // `g` is an element tree (blocks of 4096 rows folded in order, the blocks by the pairwise
    // tree): rows around one block, several, and enough for chunks of whole blocks (at two
    // threads a loop of 40007 rows runs chunks of 4096-row blocks; shorter ones split blocks
    // between chunks, whose rows then meet as loose points).
    let k = vecmat_rows_kernel(DType::F64);
    let (v, s) = both(&k);
    for m in [0, 1, 5, 4095, 4096, 4097, 9000, 40_007] {
        for n in [1, 3, 8, 11] {
            let want = interpreted_vecmat_rows(&k, m, n);
            for threads in [1, 2] {
                assert_eq!(
                    run_vecmat_rows(&v, DType::F64, (m, n), threads),
                    want,
                    "m={m} n={n} t={threads}"
                );
                assert_eq!(
                    run_vecmat_rows(&s, DType::F64, (m, n), threads),
                    want,
                    "scalar m={m} n={n}"
                );
            }
        }
    }
    // Not the sequential order: the test would see a chunk-order fold.
    let (m, n) = (9000, 3);
    let a = inputs(m * n, (m + 31 * n) as u64);
    let x = inputs(m, 11);
    let sequential: Vec<u64> = (0..n)
        .map(|r| {
            (0..m)
                .fold(0.5f64, |g, i| g + a[i * n + r] * x[i])
                .to_bits()
        })
        .collect();
    assert_ne!(sequential, interpreted_vecmat_rows(&k, m, n));
}

#[test]
fn a_register_accumulator_carries_across_the_calls_of_an_element_trees_blocks() {
    // `top[] max= x[i]` (an exact operator: a register accumulator) in the loop that reduces
    // `g` by element trees, whose chunks run a call per 4096-row block: the maximum must see
    // every call's rows, and `g` the interpreter's bits.
    let mut kb = KernelBuilder::new("strips.vecmat_rows_and_max");
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let g = kb.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    let top = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Max));
    kb.parallel(x, |b, i| {
        let xi = b.load(x, &[i[0]]);
        b.reduce(top, &[], xi);
        gradient_row(b, (a, g), i[0], xi);
    });
    let k = kb.finish_validated().unwrap();
    let (v, s) = both(&k);
    // 70001 rows at one thread: chunks of 16384 rows, four block calls each.
    let (m, n) = (70_001usize, 3usize);
    let want_max = inputs(m, 11).into_iter().fold(f64::NEG_INFINITY, f64::max);
    let want_g = {
        let mut storages = vec![
            Storage::from_f64(DType::F64, &inputs(m * n, 5)),
            Storage::from_f64(DType::F64, &inputs(m, 11)),
            Storage::from_f64(DType::F64, &vec![0.0; n]),
            Storage::from_f64(DType::F64, &[f64::NEG_INFINITY]),
        ];
        let args = [
            Arg::Store(View::dense(0, &[m as i64, n as i64])),
            Arg::Store(View::dense(1, &[m as i64])),
            Arg::Store(View::dense(2, &[n as i64])),
            Arg::Store(View::dense(3, &[])),
        ];
        interp::run_with_limit(&k, &args, &mut storages, u64::MAX).unwrap();
        assert_eq!(storages[3].to_f64()[0], want_max);
        storages[2].to_f64()
    };
    for (c, threads) in [(&v, 1), (&v, 2), (&s, 1)] {
        let (mut av, mut xv) = (inputs(m * n, 5), inputs(m, 11));
        let (mut gv, mut tv) = (vec![0.0f64; n], vec![f64::NEG_INFINITY]);
        let stores = [
            dense(&mut av, &[m as i64, n as i64]),
            dense(&mut xv, &[m as i64]),
            dense(&mut gv, &[n as i64]),
            dense(&mut tv, &[]),
        ];
        run_on(c, &stores, &[], threads).unwrap();
        assert_eq!(tv[0], want_max, "threads {threads}");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&gv), bits(&want_g), "threads {threads}");
    }
}

/// One step of a random straight run: an operation on two earlier values of the pool.
#[derive(Clone, Debug)]
struct RunStep {
    op: u8,
    a: usize,
    b: usize,
}

/// A random row loop: a dot product in lanes and a running max in a plain `for` loop, a
/// straight run of `steps` on them, `y[i]` and constants, an optional store of one run value
/// at the loop's index, then `g[r] += a[i, r] * (sum of the run values in uses)`.
fn random_row_kernel(steps: &[RunStep], uses: &[usize], out_at: Option<(usize, usize)>) -> Kernel {
    let mut k = KernelBuilder::new("strips.random");
    let a = k.store(DType::F64, 2, Privilege::Read);
    let w = k.store(DType::F64, 1, Privilege::Read);
    let y = k.store(DType::F64, 1, Privilege::Read);
    let g = k.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    let out = k.store(DType::F64, 1, Privilege::Write);
    let n = k.extent(a, 1);
    k.parallel(y, |b, i| {
        let lo = b.const_i64(0);
        let z = row_dot(b, (a, w), i[0], n);
        let start = b.const_of(DType::F64, -1.0);
        let mx = b.for_loop(lo, n, &[start], |b, j, acc| {
            let aij = b.load(a, &[i[0], j]);
            vec![b.binary(B::Max, acc[0], aij)]
        })[0];
        let yi = b.load(y, &[i[0]]);
        let mut pool = vec![
            z,
            mx,
            yi,
            b.const_of(DType::F64, 0.5),
            b.const_of(DType::F64, -1.5),
        ];
        for (pos, s) in steps.iter().enumerate() {
            let (x, v) = (pool[s.a % pool.len()], pool[s.b % pool.len()]);
            let r = match s.op % 8 {
                0 => b.binary(B::Add, x, v),
                1 => b.binary(B::Sub, x, v),
                2 => b.binary(B::Mul, x, v),
                3 => b.binary(B::Min, x, v),
                4 => b.binary(B::Max, x, v),
                5 => {
                    let one = b.const_of(DType::F64, 1.0);
                    let d = b.binary(B::Add, b.unary(U::Abs, v), one);
                    b.binary(B::Div, x, d)
                }
                6 => b.unary(U::Neg, x),
                _ => b.unary(U::Sqrt, b.unary(U::Abs, x)),
            };
            pool.push(r);
            if let Some((at, which)) = out_at
                && at == pos
            {
                b.store(out, i, pool[which % pool.len()]);
            }
        }
        let terms: Vec<_> = uses
            .iter()
            .map(|u| pool[pool.len() - 1 - u % pool.len()])
            .collect();
        let hi = b.extent(a, 1);
        b.for_loop(lo, hi, &[], |b, r, _| {
            let mut s = terms[0];
            for &t in &terms[1..] {
                s = b.binary(B::Add, s, t);
            }
            let air = b.load(a, &[i[0], r]);
            b.reduce(g, &[r], b.mul(air, s));
            vec![]
        });
    });
    k.finish_validated().unwrap()
}

/// `g` and `out` of a random row kernel on `m` rows of `n`, NaNs made canonical.
fn run_random(k: &CompiledKernel, m: usize, n: usize, threads: usize) -> Vec<u64> {
    let mut a = inputs(m * n, (m * 13 + n) as u64);
    let mut w = inputs(n, 7);
    let mut y = inputs(m, 9);
    let mut g = vec![0.0f64; n];
    let mut out = vec![0.0f64; m];
    let stores = [
        dense(&mut a, &[m as i64, n as i64]),
        dense(&mut w, &[n as i64]),
        dense(&mut y, &[m as i64]),
        dense(&mut g, &[n as i64]),
        dense(&mut out, &[m as i64]),
    ];
    run_on(k, &stores, &[], threads).unwrap();
    g.iter()
        .chain(&out)
        .map(|v| {
            if v.is_nan() {
                f64::NAN.to_bits()
            } else {
                v.to_bits()
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random row loops, cut or not (by the number of values crossing and the run's length):
    /// the vector code gives the scalar code's bits.
    #[test]
    fn random_row_loops_give_the_scalar_bits(
        steps in prop::collection::vec(
            (0u8..8, 0usize..64, 0usize..64).prop_map(|(op, a, b)| RunStep { op, a, b }),
            8..40,
        ),
        uses in prop::collection::vec(0usize..6, 1..4),
        out_at in prop::option::of((0usize..40, 0usize..64)),
    ) {
        let k = random_row_kernel(&steps, &uses, out_at);
        let (v, s) = both(&k);
        prop_assert_eq!(s.cut_loops(), 0);
        for (m, n) in [(5usize, 3usize), (600, 9)] {
            let want = run_random(&s, m, n, 1);
            let got = run_random(&v, m, n, 2);
            prop_assert_eq!(got, want, "m={} n={} cut={}", m, n, v.cut_loops());
        }
    }
}
