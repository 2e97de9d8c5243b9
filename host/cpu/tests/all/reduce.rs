//! Reductions: every operator on every type, to a 0-d store and to vectors (in place and
//! through chunk buffers), and independence from the number of threads.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_ir::{DType, Privilege, ReduceOp};

/// Values of one type as f64 (exactly representable in every type used).
fn values(n: usize, dt: DType, op: ReduceOp, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 33) % 1000;
            match op {
                // Products stay exact and in range: mostly 1 and -1, a few 2 and 0.5 pairs.
                ReduceOp::Prod if dt.is_int() => {
                    if r < 400 {
                        -1.0
                    } else {
                        1.0
                    }
                }
                ReduceOp::Prod => match r {
                    0..=2 => 2.0,
                    3..=5 => 0.5,
                    6..=400 => -1.0,
                    _ => 1.0,
                },
                _ => r as f64 - 500.0,
            }
        })
        .collect()
}

fn fold_ref(op: ReduceOp, init: f64, xs: &[f64]) -> f64 {
    xs.iter().fold(init, |a, &x| match op {
        ReduceOp::Sum => a + x,
        ReduceOp::Prod => a * x,
        ReduceOp::Min => a.min(x),
        ReduceOp::Max => a.max(x),
    })
}

/// Typed buffer helpers: store f64 values as `dt`, read them back as f64.
fn encode(dt: DType, xs: &[f64]) -> Vec<u8> {
    let mut out = vec![];
    for &x in xs {
        match dt {
            DType::F32 => out.extend((x as f32).to_ne_bytes()),
            DType::F64 => out.extend(x.to_ne_bytes()),
            DType::I32 => out.extend((x as i32).to_ne_bytes()),
            DType::I64 => out.extend((x as i64).to_ne_bytes()),
            DType::Bool => out.push(u8::from(x != 0.0)),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        }
    }
    out
}

fn decode(dt: DType, b: &[u8]) -> Vec<f64> {
    b.chunks(dt.size())
        .map(|c| match dt {
            DType::F32 => f64::from(f32::from_ne_bytes(c.try_into().unwrap())),
            DType::F64 => f64::from_ne_bytes(c.try_into().unwrap()),
            DType::I32 => f64::from(i32::from_ne_bytes(c.try_into().unwrap())),
            DType::I64 => i64::from_ne_bytes(c.try_into().unwrap()) as f64,
            DType::Bool => f64::from(c[0]),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                unreachable!("storage types hold no values")
            }
        })
        .collect()
}

/// A byte buffer with 8-byte alignment holding `bytes`.
struct Aligned(Vec<u64>, usize);
impl Aligned {
    fn new(bytes: &[u8]) -> Aligned {
        let mut v = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: `v` holds at least `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast(), bytes.len())
        };
        Aligned(v, bytes.len())
    }
    fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
    fn bytes(&self) -> Vec<u8> {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.1).to_vec() }
    }
}

fn valid(dt: DType, op: ReduceOp) -> bool {
    dt != DType::Bool || matches!(op, ReduceOp::Min | ReduceOp::Max)
}

fn bool_values(n: usize, seed: u64, density: u64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            f64::from(u8::from((s >> 33) % 100 < density))
        })
        .collect()
}

#[test]
fn every_reduction_to_a_scalar() {
    let n = 40_000usize; // several chunks
    for dt in DType::VALUES {
        for op in ReduceOp::ALL {
            if !valid(dt, op) {
                continue;
            }
            let mut kb = Kb::new();
            let x = kb.store(dt, 1, Privilege::Read);
            let out = kb.store(dt, 0, Privilege::Reduce(op));
            kb.parallel(x, 1, |kb, idx| {
                let v = kb.load(x, &[idx[0]]);
                kb.reduce(out, &[], op, v);
            });
            let k = compile(&kb.finish("test.reduce0"));
            let cases: Vec<Vec<f64>> = if dt == DType::Bool {
                vec![bool_values(n, 1, 50), bool_values(n, 2, 0), vec![1.0; n]]
            } else {
                vec![values(n, dt, op, 3)]
            };
            for xs in cases {
                for init in [3.0, 0.0] {
                    let init = if dt == DType::Bool {
                        f64::from(u8::from(init != 0.0))
                    } else {
                        init
                    };
                    for threads in [1, 2] {
                        let mut xb = Aligned::new(&encode(dt, &xs));
                        let mut ob = Aligned::new(&encode(dt, &[init]));
                        let views = [
                            weft_cpu::StoreView::dense(xb.ptr(), &[n as i64]),
                            weft_cpu::StoreView::dense(ob.ptr(), &[]),
                        ];
                        run_on(&k, &views, &[], threads).unwrap();
                        let got = decode(dt, &ob.bytes())[0];
                        let want = if dt == DType::Bool {
                            let any = xs.iter().any(|&v| v != 0.0);
                            let all = xs.iter().all(|&v| v != 0.0);
                            let i = init != 0.0;
                            f64::from(u8::from(match op {
                                ReduceOp::Max => i || any,
                                _ => i && all,
                            }))
                        } else {
                            fold_ref(op, init, &xs)
                        };
                        assert_eq!(
                            got,
                            want,
                            "{} on {dt}, init {init}, {threads} threads",
                            op.name()
                        );
                    }
                }
            }
        }
    }
}

/// Reduces an m x n matrix along rows (`y[i] op= a[i,j]`, in place) or columns
/// (`y[j] op= a[i,j]`, through chunk buffers).
fn matrix_reduction(dt: DType, op: ReduceOp, by_row: bool, m: usize, n: usize, threads: usize) {
    let mut kb = Kb::new();
    let a = kb.store(dt, 2, Privilege::Read);
    let y = kb.store(dt, 1, Privilege::Reduce(op));
    kb.parallel(a, 2, |kb, idx| {
        let v = kb.load(a, &[idx[0], idx[1]]);
        let at = if by_row { idx[0] } else { idx[1] };
        kb.reduce(y, &[at], op, v);
    });
    let k = compile(&kb.finish("test.reduce_vec"));
    let xs = if dt == DType::Bool {
        bool_values(m * n, 9, 97)
    } else {
        values(m * n, dt, op, 5)
    };
    let len = if by_row { m } else { n };
    let init: Vec<f64> = (0..len)
        .map(|i| {
            if dt == DType::Bool {
                f64::from(u8::from(i % 2 == 0))
            } else {
                (i % 3) as f64
            }
        })
        .collect();
    let mut ab = Aligned::new(&encode(dt, &xs));
    let mut yb = Aligned::new(&encode(dt, &init));
    let views = [
        weft_cpu::StoreView::dense(ab.ptr(), &[m as i64, n as i64]),
        weft_cpu::StoreView::dense(yb.ptr(), &[len as i64]),
    ];
    run_on(&k, &views, &[], threads).unwrap();
    let got = decode(dt, &yb.bytes());
    for t in 0..len {
        let line: Vec<f64> = if by_row {
            xs[t * n..(t + 1) * n].to_vec()
        } else {
            (0..m).map(|i| xs[i * n + t]).collect()
        };
        let want = if dt == DType::Bool {
            let i = init[t] != 0.0;
            f64::from(u8::from(match op {
                ReduceOp::Max => i || line.iter().any(|&v| v != 0.0),
                _ => i && line.iter().all(|&v| v != 0.0),
            }))
        } else {
            fold_ref(op, init[t], &line)
        };
        assert_eq!(
            got[t],
            want,
            "{} on {dt}, by_row {by_row}, element {t}",
            op.name()
        );
    }
}

#[test]
fn every_reduction_to_a_vector() {
    for dt in DType::VALUES {
        for op in ReduceOp::ALL {
            if !valid(dt, op) {
                continue;
            }
            for by_row in [true, false] {
                // 2000 x 30: several chunks of 546 rows.
                matrix_reduction(dt, op, by_row, 2000, 30, 2);
                matrix_reduction(dt, op, by_row, 3, 5, 1);
            }
        }
    }
}

#[test]
fn histogram_with_computed_indices() {
    let mut kb = Kb::new();
    let bins = kb.store(DType::I64, 1, Privilege::Read);
    let h = kb.store(DType::I32, 1, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(bins, 1, |kb, idx| {
        let b = kb.load(bins, &[idx[0]]);
        let one = kb.c(weft_ir::Scalar::I32(1));
        kb.reduce(h, &[b], ReduceOp::Sum, one);
    });
    let k = compile(&kb.finish("test.hist"));
    let n = 100_000usize;
    let mut b: Vec<i64> = (0..n).map(|i| ((i * i) % 17) as i64).collect();
    let mut hist = vec![10i32; 17];
    run_on(
        &k,
        &[dense(&mut b, &[n as i64]), dense(&mut hist, &[17])],
        &[],
        2,
    )
    .unwrap();
    let mut want = vec![10i32; 17];
    for &x in &b {
        want[x as usize] += 1;
    }
    assert_eq!(hist, want);
}

/// A big f64 sum, dot product and column sums give the same bits on 1, 2 and 3 threads.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let n = 1 << 20;
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Read);
    let sum = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let dot = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let mx = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Max));
    kb.parallel(x, 1, |kb, idx| {
        let a = kb.load(x, &[idx[0]]);
        let b = kb.load(y, &[idx[0]]);
        kb.reduce(sum, &[], ReduceOp::Sum, a);
        let p = kb.mul(a, b);
        kb.reduce(dot, &[], ReduceOp::Sum, p);
        kb.reduce(mx, &[], ReduceOp::Max, p);
    });
    let k = compile(&kb.finish("test.dot"));
    let mut s = 12345u64;
    let mut rnd = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1e3
    };
    let mut xv: Vec<f64> = (0..n).map(|_| rnd()).collect();
    let mut yv: Vec<f64> = (0..n).map(|_| rnd()).collect();
    let mut results = vec![];
    for threads in [1, 2, 3] {
        let (mut a, mut b, mut c) = (0.0f64, 0.0f64, f64::NEG_INFINITY);
        let views = [
            dense(&mut xv, &[n as i64]),
            dense(&mut yv, &[n as i64]),
            scalar_view(&mut a),
            scalar_view(&mut b),
            scalar_view(&mut c),
        ];
        run_on(&k, &views, &[], threads).unwrap();
        results.push((a.to_bits(), b.to_bits(), c.to_bits()));
        // And close to a plain sequential sum.
        let plain: f64 = xv.iter().sum();
        assert!((a - plain).abs() <= 1e-9 * xv.iter().map(|v| v.abs()).sum::<f64>());
        let dotp: f64 = xv.iter().zip(&yv).map(|(p, q)| p * q).sum();
        assert!(
            (b - dotp).abs() <= 1e-9 * xv.iter().zip(&yv).map(|(p, q)| (p * q).abs()).sum::<f64>()
        );
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "{results:?}");

    // Column sums of a random matrix (chunk buffers).
    let (m, nc) = (5000usize, 64usize);
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let cs = kb.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(a, 2, |kb, idx| {
        let v = kb.load(a, &[idx[0], idx[1]]);
        kb.reduce(cs, &[idx[1]], ReduceOp::Sum, v);
    });
    let k = compile(&kb.finish("test.colsum"));
    let mut am: Vec<f64> = (0..m * nc).map(|_| rnd()).collect();
    let mut outs = vec![];
    for threads in [1, 2, 3] {
        let mut c = vec![0.0f64; nc];
        run_on(
            &k,
            &[
                dense(&mut am, &[m as i64, nc as i64]),
                dense(&mut c, &[nc as i64]),
            ],
            &[],
            threads,
        )
        .unwrap();
        outs.push(c.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    assert!(outs.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn scalar_reduction_inside_a_sequential_loop() {
    // total += a[i, j] for j in a for loop inside the parallel loop: the accumulator lives in a
    // register across the loop.
    let mut kb = Kb::new();
    let a = kb.store(DType::I64, 2, Privilege::Read);
    let total = kb.store(DType::I64, 0, Privilege::Reduce(ReduceOp::Sum));
    let rows = kb.store(DType::I64, 1, Privilege::Read);
    let z = kb.i64(0);
    let n = kb.extent(a, 1);
    kb.parallel(rows, 1, |kb, idx| {
        let r = kb.load(rows, &[idx[0]]);
        kb.for_loop(z, n, &[], |kb, j, _| {
            let v = kb.load(a, &[r, j]);
            kb.reduce(total, &[], ReduceOp::Sum, v);
            vec![]
        });
    });
    let k = compile(&kb.finish("test.loopreduce"));
    let (m, n) = (40usize, 1000usize);
    let mut av: Vec<i64> = (0..(m * n) as i64).collect();
    let mut rv: Vec<i64> = (0..50_000).map(|i| (i * 7) % m as i64).collect();
    let mut t = 5i64;
    run_on(
        &k,
        &[
            dense(&mut av, &[m as i64, n as i64]),
            scalar_view(&mut t),
            dense(&mut rv, &[50_000]),
        ],
        &[],
        2,
    )
    .unwrap();
    let want: i64 = 5 + rv
        .iter()
        .map(|&r| {
            (0..n as i64)
                .map(|j| av[r as usize * n + j as usize])
                .sum::<i64>()
        })
        .sum::<i64>();
    assert_eq!(t, want);
}

/// A dot product fused into a CSR product (`dot += y[i] p[i]` after row `i`'s loop), whose
/// steps combine aligned groups of eight rows in registers: the canonical bits (computed
/// here from the definition, `weft_ir::reduction::canonical`) for row counts around the
/// group, the chunk and the slice sizes, on sub-views whose origin is not a multiple of
/// eight (a point task of a partitioned loop), scalar and vector code, 1 and 2 threads.
#[test]
fn a_dot_fused_into_csr_rows_keeps_the_canonical_order() {
    use weft_ir::reduction::canonical;
    let mut kb = Kb::new();
    let ptr = kb.store(DType::I64, 1, Privilege::Read);
    let col = kb.store(DType::I64, 1, Privilege::Read);
    let val = kb.store(DType::F64, 1, Privilege::Read);
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    let dot = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(y, 1, |kb, i| {
        let o = kb.origin(y, 0);
        let row = kb.add(o, i[0]);
        let one = kb.i64(1);
        let next = kb.add(row, one);
        let lo = kb.load(ptr, &[row]);
        let hi = kb.load(ptr, &[next]);
        let zero = kb.f64(0.0);
        let sum = kb.for_loop(lo, hi, &[zero], |kb, j, acc| {
            let c = kb.load(col, &[j]);
            let v = kb.load(val, &[j]);
            let xc = kb.load(x, &[c]);
            let t = kb.mul(v, xc);
            vec![kb.add(acc[0], t)]
        })[0];
        kb.store_to(y, &[i[0]], sum);
        let xi = kb.load(x, &[row]);
        let t = kb.mul(sum, xi);
        kb.reduce(dot, &[], ReduceOp::Sum, t);
    });
    let k = kb.finish("reduce.csr_dot");
    let mut be = weft_cpu::CpuBackend::new().unwrap();
    let vector = be.compile(&k).unwrap();
    be.set_simd(false);
    let scalar = be.compile(&k).unwrap();
    assert_eq!(vector.grouped_loops(), 1, "the CSR rows are grouped");
    assert_eq!(scalar.grouped_loops(), 1);
    for (rows, origin) in [
        (1usize, 0usize),
        (7, 0),
        (8, 0),
        (9, 3),
        (100, 5),
        (4096 + 13, 0),
        (10_001, 11),
        (40_003, 6),
    ] {
        let total = rows + origin;
        // Row r holds the columns r - 1, r, r + 1 that exist, with mixed magnitudes.
        let mut ptrs = vec![0i64];
        let (mut cols, mut vals) = (Vec::new(), Vec::new());
        for r in 0..total {
            for c in r.saturating_sub(1)..(r + 2).min(total) {
                cols.push(c as i64);
                let big = if (r * 7 + c) % 5 == 0 { 1e9 } else { 1.0 };
                vals.push(big * (((r * 31 + c * 17) % 97) as f64 - 48.0) / 7.0);
            }
            ptrs.push(cols.len() as i64);
        }
        let mut xs: Vec<f64> = (0..total)
            .map(|r| ((r * 13) % 101) as f64 / 3.0 - 16.0)
            .collect();
        // The row products, in order, and the canonical sum of their dots with x over the
        // view (the rows before the origin contribute nothing).
        let ys: Vec<f64> = (0..total)
            .map(|r| {
                let (a, b) = (ptrs[r] as usize, ptrs[r + 1] as usize);
                (a..b).fold(0.0, |s, j| s + vals[j] * xs[cols[j] as usize])
            })
            .collect();
        let want = canonical(ReduceOp::Sum, DType::F64, &[total as u64], &|p| {
            let r = p[0] as usize;
            weft_ir::Scalar::F64(if r < origin { -0.0 } else { ys[r] * xs[r] })
        });
        let Some(weft_ir::Scalar::F64(want)) = want else {
            panic!("no canonical sum")
        };
        let want = 0.5 + want;
        for c in [&vector, &scalar] {
            for threads in [1, 2] {
                let mut out = vec![0.0f64; total];
                let mut d = 0.5f64;
                let mut y_view = dense(&mut out, &[total as i64]);
                // The sub-view of rows `origin..total`.
                // SAFETY: `origin < total` elements into `out`.
                y_view.ptr = unsafe { y_view.ptr.cast::<f64>().add(origin) }.cast();
                y_view.extents = vec![rows as i64];
                y_view.origin = vec![origin as i64];
                let n = ptrs.len() as i64;
                let nnz = cols.len() as i64;
                run_on(
                    c,
                    &[
                        dense(&mut ptrs, &[n]),
                        dense(&mut cols, &[nnz]),
                        dense(&mut vals, &[nnz]),
                        dense(&mut xs, &[total as i64]),
                        y_view,
                        scalar_view(&mut d),
                    ],
                    &[],
                    threads,
                )
                .unwrap();
                assert_eq!(
                    d.to_bits(),
                    want.to_bits(),
                    "{rows} rows from {origin}, {threads} threads: {d} vs {want}"
                );
                for r in origin..total {
                    assert_eq!(out[r].to_bits(), ys[r].to_bits(), "row {r}");
                }
            }
        }
    }
}

/// Float sums into 0-d stores keep the canonical order on the harder shapes: a point that
/// reduces several times (in a `for` loop: its contribution is that loop's fold), beside a
/// max in a register in the same loop, over rank-2 loops whose rows cross the chunk size.
/// Scalar and vector code, 1 and 2 threads: the bits of the reference interpreter (which
/// computes the order's definition).
#[test]
fn float_sums_with_several_reductions_per_point_keep_the_canonical_order() {
    use weft_ir::interp::{self, Arg, Storage, View};
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let sum = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let top = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Max));
    kb.parallel(a, 2, |kb, i| {
        let x = kb.load(a, &[i[0], i[1]]);
        kb.reduce(sum, &[], ReduceOp::Sum, x);
        kb.reduce(top, &[], ReduceOp::Max, x);
        let lo = kb.i64(0);
        let hi = kb.i64(3);
        kb.for_loop(lo, hi, &[], |kb, j, _| {
            let jf = kb.cast(DType::F64, j);
            let y = kb.mul(x, jf);
            kb.reduce(sum, &[], ReduceOp::Sum, y);
            vec![]
        });
    });
    let k = kb.finish("reduce.canonical_for");
    let mut be = weft_cpu::CpuBackend::new().unwrap();
    let vector = be.compile(&k).unwrap();
    be.set_simd(false);
    let scalar = be.compile(&k).unwrap();
    for (rows, cols) in [(3usize, 7usize), (5, 9000), (40, 1)] {
        let n = rows * cols;
        let xs: Vec<f64> = values(n, DType::F64, ReduceOp::Sum, rows as u64)
            .iter()
            .enumerate()
            .map(|(i, v)| v * 1e-3 + if i % 3 == 0 { 1e12 } else { 0.0 })
            .collect();
        let ext = [rows as i64, cols as i64];
        let mut want = Storage::from_f64(DType::F64, &[0.25]);
        let mut storages = vec![
            Storage::from_f64(DType::F64, &xs),
            want.clone(),
            Storage::from_f64(DType::F64, &[f64::NEG_INFINITY]),
        ];
        let args = [
            Arg::Store(View::dense(0, &ext)),
            Arg::Store(View::dense(1, &[])),
            Arg::Store(View::dense(2, &[])),
        ];
        interp::run(&k, &args, &mut storages).unwrap();
        want = storages[1].clone();
        let want = want.to_f64()[0];
        for c in [&vector, &scalar] {
            for threads in [1, 2] {
                let mut av = xs.clone();
                let (mut s, mut t) = (0.25f64, f64::NEG_INFINITY);
                run_on(
                    c,
                    &[
                        dense(&mut av, &ext),
                        scalar_view(&mut s),
                        scalar_view(&mut t),
                    ],
                    &[],
                    threads,
                )
                .unwrap();
                assert_eq!(
                    s.to_bits(),
                    want.to_bits(),
                    "{rows}x{cols}, {threads} threads"
                );
                assert_eq!(t, xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
            }
        }
    }
}

/// Two float sums fused into a vectorized loop (`z = x + a y; d += x y; q += z z`, `a` a 0-d
/// store: the shape of BiCGSTAB's `x`/`r` update with its two dots), whose vector steps combine each aligned
/// group of eight points in registers (in the wide bodies by shuffles, in the 128-bit code
/// lane by lane) and store one node per group: the canonical bits on every path this CPU
/// has, for lengths around the group, the 128-bit and wide steps and the launcher's slices,
/// on sub-views whose origin is not a multiple of eight, 1 and 2 threads; and an `x` whose
/// stride is two elements, which takes the scalar grouping.
#[test]
fn dots_in_a_vector_loop_keep_the_canonical_order_on_every_path() {
    use weft_cpu::SimdPath;
    use weft_ir::reduction::canonical;
    let mut kb = Kb::new();
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Read);
    let z = kb.store(DType::F64, 1, Privilege::Write);
    let d = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let q = kb.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let a = kb.store(DType::F64, 0, Privilege::Read);
    kb.parallel(z, 1, |kb, i| {
        let xi = kb.load(x, &[i[0]]);
        let yi = kb.load(y, &[i[0]]);
        let av = kb.load(a, &[]);
        let ay = kb.mul(av, yi);
        let zi = kb.add(xi, ay);
        kb.store_to(z, &[i[0]], zi);
        let t = kb.mul(xi, yi);
        kb.reduce(d, &[], ReduceOp::Sum, t);
        let s = kb.mul(zi, zi);
        kb.reduce(q, &[], ReduceOp::Sum, s);
    });
    let k = kb.finish("reduce.vector_dots");
    let mut be = weft_cpu::CpuBackend::new().unwrap();
    let paths = be.compiler().available_paths();
    eprintln!("paths checked: {paths:?}");
    let compiled: Vec<(SimdPath, weft_cpu::CompiledKernel)> = paths
        .iter()
        .map(|&path| {
            be.compiler().set_path(path).unwrap();
            let c = be.compile(&k).unwrap();
            let vector = path != SimdPath::Scalar;
            assert_eq!(c.grouped_loops(), usize::from(vector), "grouped on {path}");
            assert_eq!(c.avx2_loops(), usize::from(path == SimdPath::Avx2));
            assert_eq!(c.avx512_loops(), usize::from(path == SimdPath::Avx512));
            (path, c)
        })
        .collect();
    // Mixed magnitudes, so that another order of the sums shows in their bits.
    let value = |i: usize, salt: usize| {
        let big = if (i * 7 + salt).is_multiple_of(5) {
            1e9
        } else {
            1.0
        };
        big * (((i * 31 + salt * 17) % 97) as f64 - 48.0) / 7.0
    };
    for (len, origin, stride) in [
        (1usize, 0usize, 1usize),
        (7, 0, 1),
        (8, 0, 1),
        (9, 3, 1),
        (15, 1, 1),
        (16, 0, 1),
        (17, 7, 1),
        (31, 2, 1),
        (32, 0, 1),
        (33, 5, 1),
        (63, 9, 1),
        (100, 5, 1),
        (4096 + 13, 0, 1),
        (4096 + 29, 3, 1),
        (10_001, 11, 1),
        (40_003, 6, 1),
        (100, 5, 2),
        (10_001, 3, 2),
    ] {
        let total = len + origin;
        let mut xs: Vec<f64> = (0..total * stride).map(|i| value(i, 1)).collect();
        let mut ys: Vec<f64> = (0..total).map(|i| value(i, 2)).collect();
        let xval: Vec<f64> = (0..total).map(|r| xs[r * stride]).collect();
        let xv = |r: usize| xval[r];
        // The canonical sums over the view (the points before the origin contribute nothing).
        let sum = |f: &dyn Fn(usize) -> f64| {
            let got = canonical(ReduceOp::Sum, DType::F64, &[total as u64], &|p| {
                let r = p[0] as usize;
                weft_ir::Scalar::F64(if r < origin { -0.0 } else { f(r) })
            });
            let Some(weft_ir::Scalar::F64(s)) = got else {
                panic!("no canonical sum")
            };
            s
        };
        let want_d = 0.5 + sum(&|r| xv(r) * ys[r]);
        let alpha = -0.75f64;
        let zval: Vec<f64> = (0..total).map(|r| xv(r) + alpha * ys[r]).collect();
        let want_q = -1.5 + sum(&|r| zval[r] * zval[r]);
        for (path, c) in &compiled {
            for threads in [1, 2] {
                let mut zs = vec![0.0f64; total];
                let (mut dv, mut qv, mut av) = (0.5f64, -1.5f64, alpha);
                let sub = |v: weft_cpu::StoreView, step: usize| {
                    let mut v = v;
                    // SAFETY: `origin < total` elements (of `step`) into the buffer.
                    v.ptr = unsafe { v.ptr.cast::<f64>().add(origin * step) }.cast();
                    v.extents = vec![len as i64];
                    v.strides = vec![step as i64];
                    v.origin = vec![origin as i64];
                    v
                };
                let nx = xs.len() as i64;
                run_on(
                    c,
                    &[
                        sub(dense(&mut xs, &[nx]), stride),
                        sub(dense(&mut ys, &[total as i64]), 1),
                        sub(dense(&mut zs, &[total as i64]), 1),
                        scalar_view(&mut dv),
                        scalar_view(&mut qv),
                        scalar_view(&mut av),
                    ],
                    &[],
                    threads,
                )
                .unwrap();
                let what =
                    format!("{len} from {origin}, stride {stride}, {path}, {threads} threads");
                assert_eq!(
                    dv.to_bits(),
                    want_d.to_bits(),
                    "d, {what}: {dv} vs {want_d}"
                );
                assert_eq!(
                    qv.to_bits(),
                    want_q.to_bits(),
                    "q, {what}: {qv} vs {want_q}"
                );
                for r in origin..total {
                    assert_eq!(zs[r].to_bits(), zval[r].to_bits(), "z[{r}], {what}");
                }
            }
        }
    }
}

/// An `f32` dot product in a vectorized loop (four lanes a vector, so two vectors a group of
/// eight): the canonical bits on every path, for lengths around the group and the step, on
/// sub-views whose origin is not a multiple of eight, 1 and 2 threads.
#[test]
fn an_f32_dot_in_a_vector_loop_keeps_the_canonical_order() {
    use weft_cpu::SimdPath;
    use weft_ir::reduction::canonical;
    let mut kb = Kb::new();
    let x = kb.store(DType::F32, 1, Privilege::Read);
    let y = kb.store(DType::F32, 1, Privilege::Read);
    let d = kb.store(DType::F32, 0, Privilege::Reduce(ReduceOp::Sum));
    kb.parallel(x, 1, |kb, i| {
        let xi = kb.load(x, &[i[0]]);
        let yi = kb.load(y, &[i[0]]);
        let t = kb.mul(xi, yi);
        kb.reduce(d, &[], ReduceOp::Sum, t);
    });
    let k = kb.finish("reduce.vector_dot_f32");
    let mut be = weft_cpu::CpuBackend::new().unwrap();
    let compiled: Vec<(SimdPath, weft_cpu::CompiledKernel)> = be
        .compiler()
        .available_paths()
        .into_iter()
        .map(|path| {
            be.compiler().set_path(path).unwrap();
            let c = be.compile(&k).unwrap();
            let vector = path != SimdPath::Scalar;
            assert_eq!(c.grouped_loops(), usize::from(vector), "grouped on {path}");
            (path, c)
        })
        .collect();
    let value = |i: usize, salt: usize| {
        let big = if (i * 3 + salt).is_multiple_of(7) {
            3e5
        } else {
            1.0
        };
        big * (((i * 29 + salt * 13) % 89) as f32 - 44.0) / 9.0
    };
    for (len, origin) in [
        (1usize, 0usize),
        (7, 1),
        (8, 0),
        (12, 4),
        (17, 3),
        (100, 5),
        (5000, 7),
    ] {
        let total = len + origin;
        let mut xs: Vec<f32> = (0..total).map(|i| value(i, 1)).collect();
        let mut ys: Vec<f32> = (0..total).map(|i| value(i, 2)).collect();
        let got = canonical(ReduceOp::Sum, DType::F32, &[total as u64], &|p| {
            let r = p[0] as usize;
            weft_ir::Scalar::F32(if r < origin { -0.0 } else { xs[r] * ys[r] })
        });
        let Some(weft_ir::Scalar::F32(want)) = got else {
            panic!("no canonical sum")
        };
        let want = 0.25 + want;
        for (path, c) in &compiled {
            for threads in [1, 2] {
                let mut dv = 0.25f32;
                let sub = |v: weft_cpu::StoreView| {
                    let mut v = v;
                    // SAFETY: `origin < total` elements into the buffer.
                    v.ptr = unsafe { v.ptr.cast::<f32>().add(origin) }.cast();
                    v.extents = vec![len as i64];
                    v.origin = vec![origin as i64];
                    v
                };
                run_on(
                    c,
                    &[
                        sub(dense(&mut xs, &[total as i64])),
                        sub(dense(&mut ys, &[total as i64])),
                        scalar_view(&mut dv),
                    ],
                    &[],
                    threads,
                )
                .unwrap();
                assert_eq!(
                    dv.to_bits(),
                    want.to_bits(),
                    "{len} from {origin}, {path}, {threads} threads: {dv} vs {want}"
                );
            }
        }
    }
}
