//! Loops through compiled kernels: CSR SpMV, dense matvec, strided stencils, several parallel
//! loops, nested sequential loops, top-level sequential code.

#![allow(clippy::unwrap_used)]

use crate::util::*;
use weft_cpu::StoreView;
use weft_ir::{BinaryOp, CmpOp, DType, Privilege, Scalar};

/// A small deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn f64(&mut self) -> f64 {
        (self.next() % 1_000_000) as f64 / 1_000_000.0 - 0.5
    }
}

pub(crate) struct Csr {
    pub(crate) ptr: Vec<i64>,
    pub(crate) col: Vec<i64>,
    pub(crate) val: Vec<f64>,
    pub(crate) ncols: usize,
}

pub(crate) fn random_csr(rows: usize, ncols: usize, seed: u64) -> Csr {
    let mut r = Lcg(seed);
    let mut ptr = vec![0i64];
    let mut col = vec![];
    let mut val = vec![];
    for _ in 0..rows {
        let nnz = (r.next() % 9) as usize; // some rows are empty
        for _ in 0..nnz {
            col.push((r.next() % ncols as u64) as i64);
            val.push(r.f64());
        }
        ptr.push(col.len() as i64);
    }
    Csr {
        ptr,
        col,
        val,
        ncols,
    }
}

pub(crate) fn spmv_kernel() -> weft_ir::Kernel {
    let mut kb = Kb::new();
    let ptr = kb.store(DType::I64, 1, Privilege::Read);
    let col = kb.store(DType::I64, 1, Privilege::Read);
    let val = kb.store(DType::F64, 1, Privilege::Read);
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    let one = kb.i64(1);
    let zero = kb.f64(0.0);
    kb.parallel(y, 1, |kb, idx| {
        let i = idx[0];
        let lo = kb.load(ptr, &[i]);
        let i1 = kb.add(i, one);
        let hi = kb.load(ptr, &[i1]);
        let sum = kb.for_loop(lo, hi, &[zero], |kb, j, c| {
            let cj = kb.load(col, &[j]);
            let a = kb.load(val, &[j]);
            let xv = kb.load(x, &[cj]);
            let p = kb.mul(a, xv);
            vec![kb.add(c[0], p)]
        });
        kb.store_to(y, &[i], sum[0]);
    });
    kb.finish("test.spmv")
}

pub(crate) fn spmv_reference(m: &Csr, x: &[f64]) -> Vec<f64> {
    (0..m.ptr.len() - 1)
        .map(|i| {
            let mut s = 0.0;
            for j in m.ptr[i] as usize..m.ptr[i + 1] as usize {
                s += m.val[j] * x[m.col[j] as usize];
            }
            s
        })
        .collect()
}

#[test]
fn csr_spmv() {
    let k = compile(&spmv_kernel());
    for (rows, threads) in [(1usize, 1usize), (37, 1), (50_000, 2)] {
        let mut m = random_csr(rows, 1000, rows as u64);
        let mut x: Vec<f64> = (0..m.ncols).map(|i| (i as f64).sin()).collect();
        let want = spmv_reference(&m, &x);
        let mut y = vec![f64::NAN; rows];
        let (np, nc) = (m.ptr.len() as i64, m.col.len() as i64);
        let views = [
            dense(&mut m.ptr, &[np]),
            dense(&mut m.col, &[nc]),
            dense(&mut m.val, &[nc]),
            dense(&mut x, &[1000]),
            dense(&mut y, &[rows as i64]),
        ];
        run_on(&k, &views, &[], threads).unwrap();
        assert_eq!(y, want, "{rows} rows");
    }
}

#[test]
fn dense_matvec() {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 2, Privilege::Read);
    let x = kb.store(DType::F64, 1, Privilege::Read);
    let y = kb.store(DType::F64, 1, Privilege::Write);
    let n = kb.extent(a, 1);
    let z = kb.i64(0);
    let zero = kb.f64(0.0);
    kb.parallel(y, 1, |kb, idx| {
        let s = kb.for_loop(z, n, &[zero], |kb, j, c| {
            let aij = kb.load(a, &[idx[0], j]);
            let xj = kb.load(x, &[j]);
            let p = kb.mul(aij, xj);
            vec![kb.add(c[0], p)]
        });
        kb.store_to(y, &[idx[0]], s[0]);
    });
    let k = compile(&kb.finish("test.matvec"));
    let (m, n) = (300usize, 77usize);
    let mut r = Lcg(7);
    let mut am: Vec<f64> = (0..m * n).map(|_| r.f64()).collect();
    let mut xv: Vec<f64> = (0..n).map(|_| r.f64()).collect();
    let want: Vec<f64> = (0..m)
        .map(|i| (0..n).fold(0.0, |s, j| s + am[i * n + j] * xv[j]))
        .collect();
    let mut y = vec![0.0; m];
    let views = [
        dense(&mut am, &[m as i64, n as i64]),
        dense(&mut xv, &[n as i64]),
        dense(&mut y, &[m as i64]),
    ];
    run_on(&k, &views, &[], 2).unwrap();
    assert_eq!(y, want);
}

/// A view of the sub-rectangle at (r0, c0) with `extents` of a row-major buffer of width `w`.
fn sub(buf: &mut [f64], w: usize, r0: usize, c0: usize, extents: [i64; 2]) -> StoreView {
    let start = r0 * w + c0;
    let last = start + (extents[0] as usize - 1) * w + extents[1] as usize - 1;
    assert!(last < buf.len());
    StoreView {
        ptr: buf[start..].as_mut_ptr().cast(),
        extents: extents.to_vec(),
        strides: vec![w as i64, 1],
        origin: vec![r0 as i64, c0 as i64],
    }
}

#[test]
fn stencil_on_strided_sub_views() {
    // out[i,j] = g[i+1,j+1]*-4 + g[i,j+1] + g[i+2,j+1] + g[i+1,j] + g[i+1,j+2], where g is the
    // padded input: both views are sub-rectangles of larger buffers.
    let mut kb = Kb::new();
    let g = kb.store(DType::F64, 2, Privilege::Read);
    let out = kb.store(DType::F64, 2, Privilege::Write);
    let one = kb.i64(1);
    let two = kb.i64(2);
    let m4 = kb.f64(-4.0);
    kb.parallel(out, 2, |kb, idx| {
        let (i, j) = (idx[0], idx[1]);
        let i1 = kb.add(i, one);
        let j1 = kb.add(j, one);
        let i2 = kb.add(i, two);
        let j2 = kb.add(j, two);
        let c = kb.load(g, &[i1, j1]);
        let n = kb.load(g, &[i, j1]);
        let s = kb.load(g, &[i2, j1]);
        let w = kb.load(g, &[i1, j]);
        let e = kb.load(g, &[i1, j2]);
        let mut acc = kb.mul(c, m4);
        for v in [n, s, w, e] {
            acc = kb.add(acc, v);
        }
        kb.store_to(out, &[i, j], acc);
    });
    let k = compile(&kb.finish("test.stencil"));

    let (h, w) = (123usize, 45usize);
    let (bw_in, bw_out) = (60usize, 50usize);
    let mut input: Vec<f64> = (0..200 * bw_in)
        .map(|i| ((i * 7919) % 1000) as f64)
        .collect();
    let mut output = vec![-1.0; 200 * bw_out];
    let (r0, c0) = (5usize, 3usize);
    let (q0, d0) = (40usize, 2usize);
    let views = [
        sub(&mut input, bw_in, r0, c0, [h as i64 + 2, w as i64 + 2]),
        sub(&mut output, bw_out, q0, d0, [h as i64, w as i64]),
    ];
    run_on(&k, &views, &[], 2).unwrap();
    let at = |i: usize, j: usize| input[(r0 + i) * bw_in + c0 + j];
    for r in 0..200 {
        for c in 0..bw_out {
            let got = output[r * bw_out + c];
            let inside = (q0..q0 + h).contains(&r) && (d0..d0 + w).contains(&c);
            if inside {
                let (i, j) = (r - q0, c - d0);
                let mut want = at(i + 1, j + 1) * -4.0;
                for v in [
                    at(i, j + 1),
                    at(i + 2, j + 1),
                    at(i + 1, j),
                    at(i + 1, j + 2),
                ] {
                    want += v;
                }
                assert_eq!(got, want, "({i},{j})");
            } else {
                assert_eq!(got, -1.0, "outside the view at ({r},{c})");
            }
        }
    }
}

#[test]
fn transposed_view() {
    // out (a column-major view) = in transposed.
    let mut kb = Kb::new();
    let a = kb.store(DType::I32, 2, Privilege::Read);
    let out = kb.store(DType::I32, 2, Privilege::Write);
    kb.parallel(out, 2, |kb, idx| {
        let v = kb.load(a, &[idx[1], idx[0]]);
        kb.store_to(out, &[idx[0], idx[1]], v);
    });
    let k = compile(&kb.finish("test.transpose"));
    let (m, n) = (17usize, 29usize);
    let mut a: Vec<i32> = (0..(m * n) as i32).collect();
    let mut o = vec![0i32; m * n];
    let out_view = StoreView {
        ptr: o.as_mut_ptr().cast(),
        extents: vec![n as i64, m as i64],
        strides: vec![1, n as i64],
        origin: vec![0, 0],
    };
    run(&k, &[dense(&mut a, &[m as i64, n as i64]), out_view], &[]).unwrap();
    for i in 0..n {
        for j in 0..m {
            // out[i, j] lives at i + j*n and equals a[j, i].
            assert_eq!(o[i + j * n], a[j * n + i]);
        }
    }
}

#[test]
fn several_parallel_loops_run_in_order() {
    // t[i] = 2*a[i]; then b[i] = t[n-1-i] + 1: the second loop reads what other chunks of the
    // first wrote, so it needs the barrier.
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let t = kb.store(DType::F64, 1, Privilege::ReadWrite);
    let b = kb.store(DType::F64, 1, Privilege::Write);
    let two = kb.f64(2.0);
    let onef = kb.f64(1.0);
    let n = kb.extent(t, 0);
    let one = kb.i64(1);
    let nm1 = kb.bin(BinaryOp::Sub, n, one);
    kb.parallel(t, 1, |kb, idx| {
        let v = kb.load(a, &[idx[0]]);
        let v = kb.mul(v, two);
        kb.store_to(t, &[idx[0]], v);
    });
    kb.parallel(b, 1, |kb, idx| {
        let r = kb.bin(BinaryOp::Sub, nm1, idx[0]);
        let v = kb.load(t, &[r]);
        let v = kb.add(v, onef);
        kb.store_to(b, &[idx[0]], v);
    });
    let k = compile(&kb.finish("test.two_loops"));
    assert_eq!(k.parallel_loops(), 2);
    let n = 200_000usize;
    let mut av: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut tv = vec![0.0; n];
    let mut bv = vec![0.0; n];
    let views = [
        dense(&mut av, &[n as i64]),
        dense(&mut tv, &[n as i64]),
        dense(&mut bv, &[n as i64]),
    ];
    run_on(&k, &views, &[], 2).unwrap();
    for (i, &v) in bv.iter().enumerate() {
        assert_eq!(v, 2.0 * (n - 1 - i) as f64 + 1.0);
    }
}

#[test]
fn nested_for_loops_with_several_carried_values() {
    // out[i] = (sum over j < i%7, k < j of j*k, number of such pairs); a loop with lo > hi runs
    // zero times and gives back its initial values.
    let mut kb = Kb::new();
    let out = kb.store(DType::I64, 2, Privilege::Write);
    let seven = kb.i64(7);
    let z = kb.i64(0);
    let five = kb.i64(5);
    let neg = kb.i64(-3);
    kb.parallel(out, 2, |kb, idx| {
        let i = idx[0];
        let m = kb.bin(BinaryOp::Rem, i, seven);
        let r = kb.for_loop(z, m, &[z, z], |kb, j, c| {
            kb.for_loop(z, j, &[c[0], c[1]], |kb, kk, c2| {
                let p = kb.mul(j, kk);
                let s = kb.add(c2[0], p);
                let one = kb.i64(1);
                let n = kb.add(c2[1], one);
                vec![s, n]
            })
        });
        // Zero-trip loop: 5..-3.
        let zt = kb.for_loop(five, neg, &[r[0]], |kb, j, c| vec![kb.add(c[0], j)]);
        let one = kb.i64(1);
        let is_count = kb.cmp(CmpOp::Eq, idx[1], one);
        let v = kb.select(is_count, r[1], zt[0]);
        kb.store_to(out, &[i, idx[1]], v);
    });
    let k = compile(&kb.finish("test.nested"));
    let n = 50usize;
    let mut o = vec![-1i64; n * 2];
    run(&k, &[dense(&mut o, &[n as i64, 2])], &[]).unwrap();
    for i in 0..n {
        let (mut s, mut c) = (0i64, 0i64);
        for j in 0..(i % 7) as i64 {
            for kk in 0..j {
                s += j * kk;
                c += 1;
            }
        }
        assert_eq!((o[2 * i], o[2 * i + 1]), (s, c), "row {i}");
    }
}

#[test]
fn extent_and_origin() {
    let mut kb = Kb::new();
    let out = kb.store(DType::I64, 2, Privilege::Write);
    kb.parallel(out, 2, |kb, idx| {
        let o0 = kb.origin(out, 0);
        let o1 = kb.origin(out, 1);
        let e0 = kb.extent(out, 0);
        let e1 = kb.extent(out, 1);
        let g0 = kb.add(o0, idx[0]);
        let g1 = kb.add(o1, idx[1]);
        let k1000 = kb.i64(1000);
        let k1000000 = kb.i64(1_000_000);
        let a = kb.mul(g0, k1000);
        let b = kb.mul(e0, k1000000);
        let k100m = kb.i64(100_000_000);
        let c = kb.mul(e1, k100m);
        let v = kb.add(a, g1);
        let v = kb.add(v, b);
        let v = kb.add(v, c);
        kb.store_to(out, &[idx[0], idx[1]], v);
    });
    let k = compile(&kb.finish("test.origin"));
    let mut o = vec![0i64; 12];
    let mut view = dense(&mut o, &[3, 4]);
    view.origin = vec![10, 20];
    run(&k, &[view], &[]).unwrap();
    for i in 0..3 {
        for j in 0..4 {
            let want = (10 + i) * 1000 + 20 + j + 3 * 1_000_000 + 4 * 100_000_000;
            assert_eq!(o[(i * 4 + j) as usize], want);
        }
    }
}

/// A loop nest with a `for` loop runs in one of three copies: every origin it reads zero with
/// unit strides, unit strides, or the general one. Each gives the kernel's values: origins
/// zero and not, strides unit and not, read inside the `for` loop (as a CSR row shifts its
/// columns by `origin(x, 0)`) and outside it.
#[test]
fn a_loop_nest_with_for_loops_reads_its_origins_on_every_copy() {
    let mut kb = Kb::new();
    let x = kb.store(DType::I64, 1, Privilege::Read);
    let out = kb.store(DType::I64, 1, Privilege::Write);
    kb.parallel(out, 1, |kb, idx| {
        let z = kb.i64(0);
        let four = kb.i64(4);
        let n = kb.bin(BinaryOp::Rem, idx[0], four);
        let ox = kb.origin(x, 0);
        let sum = kb.for_loop(z, n, &[z], |kb, j, acc| {
            // x's global index `ox + j`, shifted back by the origin to a local one.
            let g = kb.add(ox, j);
            let local = kb.bin(BinaryOp::Sub, g, ox);
            let v = kb.load(x, &[local]);
            let v = kb.add(v, ox);
            vec![kb.add(acc[0], v)]
        });
        let oo = kb.origin(out, 0);
        let k1000 = kb.i64(1000);
        let shifted = kb.mul(oo, k1000);
        let v = kb.add(sum[0], shifted);
        kb.store_to(out, &[idx[0]], v);
    });
    let k = compile(&kb.finish("test.origin_copies"));
    let rows = 37i64;
    for (x_origin, out_origin) in [(0i64, 0i64), (5, 0), (0, 7), (3, 9)] {
        for step in [1i64, 2] {
            let mut xs: Vec<i64> = (0..8 * step).map(|v| v * 10 + 1).collect();
            let mut xv = dense(&mut xs, &[8 * step]);
            xv.extents = vec![8];
            xv.strides = vec![step];
            xv.origin = vec![x_origin];
            let mut o = vec![-1i64; (rows * step) as usize];
            let mut ov = dense(&mut o, &[rows * step]);
            ov.extents = vec![rows];
            ov.strides = vec![step];
            ov.origin = vec![out_origin];
            run(&k, &[xv, ov], &[]).unwrap();
            for i in 0..rows {
                let want: i64 = (0..i % 4)
                    .map(|j| (j * step) * 10 + 1 + x_origin)
                    .sum::<i64>()
                    + out_origin * 1000;
                assert_eq!(
                    o[(i * step) as usize],
                    want,
                    "row {i}, origins ({x_origin}, {out_origin}), stride {step}"
                );
            }
        }
    }
}

#[test]
fn top_level_loads_and_loops_feed_parallel_loops() {
    // n = cfg[0]; total = sum of cfg (a top-level for loop); scale = param * 2 (pure, recomputed);
    // out[i] = (total + n) as f64 * scale + i.
    let mut kb = Kb::new();
    let cfg = kb.store(DType::I64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 1, Privilege::Write);
    let p = kb.scalar(DType::F64);
    let z = kb.i64(0);
    let n = kb.load(cfg, &[z]);
    let len = kb.extent(cfg, 0);
    let total = kb.for_loop(z, len, &[z], |kb, j, c| {
        let v = kb.load(cfg, &[j]);
        vec![kb.add(c[0], v)]
    });
    let pv = kb.param(p);
    let two = kb.f64(2.0);
    let scale = kb.mul(pv, two);
    let t = kb.add(total[0], n);
    let tf = kb.cast(DType::F64, t);
    let base = kb.mul(tf, scale);
    kb.parallel(out, 1, |kb, idx| {
        let fi = kb.cast(DType::F64, idx[0]);
        let v = kb.add(base, fi);
        kb.store_to(out, &[idx[0]], v);
    });
    let k = compile(&kb.finish("test.toplevel"));
    let mut c = vec![4i64, 5, 6];
    let mut o = vec![0.0; 40_000];
    run_on(
        &k,
        &[dense(&mut c, &[3]), dense(&mut o, &[40_000])],
        &[Scalar::F64(0.25)],
        2,
    )
    .unwrap();
    for (i, &v) in o.iter().enumerate() {
        assert_eq!(v, 19.0 * 0.5 + i as f64);
    }
}

#[test]
fn three_dimensional_loops_and_chunking() {
    let mut kb = Kb::new();
    let out = kb.store(DType::I32, 3, Privilege::Write);
    kb.parallel(out, 3, |kb, idx| {
        let h = kb.i64(1_000_000);
        let t = kb.i64(1000);
        let a = kb.mul(idx[0], h);
        let b = kb.mul(idx[1], t);
        let v = kb.add(a, b);
        let v = kb.add(v, idx[2]);
        let v = kb.cast(DType::I32, v);
        kb.store_to(out, &[idx[0], idx[1], idx[2]], v);
    });
    let k = compile(&kb.finish("test.3d"));
    for shape in [[3usize, 4, 5], [5, 1, 40_000], [1, 1, 1], [70, 300, 2]] {
        let n = shape.iter().product();
        let mut o = vec![-1i32; n];
        let ext = shape.map(|s| s as i64);
        run_on(&k, &[dense(&mut o, &ext)], &[], 2).unwrap();
        for i in 0..shape[0] {
            for j in 0..shape[1] {
                for l in 0..shape[2] {
                    let at = (i * shape[1] + j) * shape[2] + l;
                    assert_eq!(o[at] as usize, i * 1_000_000 + j * 1000 + l, "{shape:?}");
                }
            }
        }
    }
}

#[test]
fn empty_stores_run_nothing() {
    let k = compile(&spmv_kernel());
    let mut ptr = vec![0i64];
    let mut none_i: Vec<i64> = vec![];
    let mut none_f: Vec<f64> = vec![];
    let mut x = vec![1.0];
    let mut y: Vec<f64> = vec![];
    let views = [
        dense(&mut ptr, &[1]),
        dense(&mut none_i, &[0]),
        dense(&mut none_f, &[0]),
        dense(&mut x, &[1]),
        dense(&mut y, &[0]),
    ];
    run(&k, &views, &[]).unwrap();
}

#[test]
fn rank_zero_parallel_loop() {
    let mut kb = Kb::new();
    let a = kb.store(DType::F64, 1, Privilege::Read);
    let out = kb.store(DType::F64, 0, Privilege::Write);
    let z = kb.i64(0);
    let n = kb.extent(a, 0);
    let zero = kb.f64(0.0);
    kb.parallel(out, 0, |kb, _| {
        let s = kb.for_loop(z, n, &[zero], |kb, j, c| {
            let v = kb.load(a, &[j]);
            vec![kb.add(c[0], v)]
        });
        kb.store_to(out, &[], s[0]);
    });
    let k = compile(&kb.finish("test.rank0"));
    let mut av = vec![1.5, 2.5, 3.0];
    let mut o = 0.0f64;
    run(&k, &[dense(&mut av, &[3]), scalar_view(&mut o)], &[]).unwrap();
    assert_eq!(o, 7.0);
}
