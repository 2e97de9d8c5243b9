//! Reductions are reproducible: `sum`, `prod`, `dot` and `norm` of 1-d and 2-d arrays (a `dot`
//! of at most `SMALL_DOT` elements in the lane order, by `fma`),
//! sums and products over axes whose result is small, and the products of a wide matrix with a
//! vector (`X.T @ r`, through `vecmat_rows`, and `A @ x` for a wide `A`, through `vecmat`:
//! each element an element tree over the long dimension, blocks of 4096 points folded in
//! order and the blocks by the canonical tree) give
//! the bits of the canonical order (`weft_ir::reduction::canonical`, an independent
//! recursive implementation of the definition) for 1 and 2 threads, 1 and 3 pieces and every
//! SIMD path this CPU runs, on lengths that are not multiples of any lane count, that cross
//! the CPU back end's chunks, and empty arrays. Sparse products give the bits of their
//! matrix's `weft::RowOrder` on every such configuration: those of a plain-Rust loop of each
//! order.

use weft::{Config, Ix, Range, RowOrder, SimdPath};
use weft_examples::csr_rows::{Csr32, Row, product, row_lanes, row_sequential};
use weft_ir::reduction::canonical;
use weft_ir::{DType, ReduceOp, Scalar};

/// Values whose sums and products depend on the order: mixed magnitudes and signs.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut h = seed | 1;
    (0..n)
        .map(|_| {
            h = h
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mag = [1e-3, 1.0, 3.5, 1e5, 1e11][(h >> 40) as usize % 5];
            let frac = ((h >> 20) % 1000) as f64 / 999.0;
            let sign = if (h >> 60) & 1 == 0 { 1.0 } else { -1.0 };
            sign * mag * (0.5 + frac)
        })
        .collect()
}

/// Factors near one, so that long products stay finite and still depend on the order.
fn factors(n: usize, seed: u64) -> Vec<f64> {
    values(n, seed)
        .iter()
        .map(|x| 1.0 + (x.abs().fract() - 0.5) * 1e-3)
        .collect()
}

/// `init op (the canonical reduction of value(point))` over `shape`, as f64 bits.
fn reference(op: ReduceOp, init: f64, shape: &[u64], value: &dyn Fn(&[u64]) -> f64) -> u64 {
    let tree = canonical(op, DType::F64, shape, &|p| Scalar::F64(value(p)));
    match tree {
        Some(Scalar::F64(t)) => match op {
            ReduceOp::Prod => (init * t).to_bits(),
            _ => (init + t).to_bits(),
        },
        _ => init.to_bits(),
    }
}

/// `numeric`'s `SMALL_DOT`: the longest vectors whose `dot` one point folds in the lane order.
const SMALL_DOT: u64 = 16 * 1024;

/// A short `dot` in the lane order with fused multiply-adds (`weft_ir`'s `fold_lanes_fma`):
/// partial `k` takes term `k` of each whole block of eight by one `fma` from `+0.0`, the
/// partials meet in the tree `((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))`, and the
/// tail, folded the same way on its own, is added last.
fn lane_fma_dot(xs: &[f64], ys: &[f64]) -> f64 {
    let whole = xs.len() / 8 * 8;
    let mut p = [0.0f64; 8];
    for (block_x, block_y) in xs[..whole].chunks(8).zip(ys[..whole].chunks(8)) {
        for k in 0..8 {
            p[k] = block_x[k].mul_add(block_y[k], p[k]);
        }
    }
    let tail = xs[whole..]
        .iter()
        .zip(&ys[whole..])
        .fold(0.0f64, |t, (x, y)| x.mul_add(*y, t));
    (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) + tail
}

const SHAPES: [&[u64]; 10] = [
    &[0],
    &[1],
    &[7],
    &[1000],
    &[16_384],
    &[16_384 + 77],
    &[70_001],
    &[37, 61],
    &[3, 20_000],
    &[2, 0],
];

/// Every reduction of every shape, as bits, run with `config`; checked against the
/// canonical order.
fn run(config: Config) -> Vec<u64> {
    let label = format!(
        "threads {}, pieces {}, simd {:?}",
        config.threads, config.pieces, config.simd
    );
    let np = weft_tests::numeric_with(config);
    let mut out = Vec::new();
    for (k, shape) in SHAPES.iter().enumerate() {
        let n: u64 = shape.iter().product();
        let n = n as usize;
        let flat = |p: &[u64]| -> usize {
            p.iter()
                .zip(shape.iter())
                .fold(0u64, |a, (&c, &e)| a * e + c) as usize
        };
        let xs = values(n, 11 + k as u64);
        let ys = values(n, 97 + k as u64);
        let fs = factors(n, 5 + k as u64);
        let a = np.from_vec(shape, &xs);
        let b = np.from_vec(shape, &ys);
        let f = np.from_vec(shape, &fs);
        let got_sum = a.sum().to_vec().expect("sum")[0].to_bits();
        let got_prod = f.prod().to_vec().expect("prod")[0].to_bits();
        let want_sum = reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)]);
        let want_prod = reference(ReduceOp::Prod, 1.0, shape, &|p| fs[flat(p)]);
        assert_eq!(got_sum, want_sum, "sum of {shape:?} ({label})");
        assert_eq!(got_prod, want_prod, "prod of {shape:?} ({label})");
        out.extend([got_sum, got_prod]);
        if shape.len() == 1 {
            let got_dot = a.dot(&b).to_vec().expect("dot")[0].to_bits();
            let got_norm = a.norm().to_vec().expect("norm")[0].to_bits();
            let want_dot = if n as u64 <= SMALL_DOT {
                lane_fma_dot(&xs, &ys).to_bits()
            } else {
                reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)] * ys[flat(p)])
            };
            let sq = reference(ReduceOp::Sum, 0.0, shape, &|p| xs[flat(p)] * xs[flat(p)]);
            let want_norm = f64::from_bits(sq).sqrt().to_bits();
            assert_eq!(got_dot, want_dot, "dot of {shape:?} ({label})");
            // Through a view with a stride of two elements (not a unit stride): the same bits.
            let spread: Vec<f64> = xs.iter().flat_map(|&x| [x, -1.0]).collect();
            let every_other = np
                .from_vec(&[2 * n as u64], &spread)
                .index(&[Ix::Slice(Range::all().step(2))]);
            let got_strided = every_other.dot(&b).to_vec().expect("dot")[0].to_bits();
            assert_eq!(got_strided, want_dot, "strided dot of {shape:?} ({label})");
            assert_eq!(got_norm, want_norm, "norm of {shape:?} ({label})");
            out.extend([got_dot, got_norm]);
        }
        // Fused with the element-wise work that feeds it: the same bits.
        let fused = (&a * 2.0 + &b).sum().to_vec().expect("fused sum")[0].to_bits();
        let want = reference(ReduceOp::Sum, 0.0, shape, &|p| {
            xs[flat(p)] * 2.0 + ys[flat(p)]
        });
        assert_eq!(fused, want, "fused sum of {shape:?} ({label})");
        out.push(fused);
    }
    out.extend(axis_reductions(&np, &label));
    out.extend(small_axis_reductions(&np, &label));
    out.extend(wide_products(&np, &label));
    out
}

/// `init + ` an element tree's reduction of `value(i)` for `i < n`
/// (`weft_ir::reduction::ELEMENT_BLOCK_LEVEL`): aligned blocks of 4096 points, each summed in
/// order from `-0.0`, the blocks combined by the canonical tree.
fn element_tree_sum(n: u64, value: &dyn Fn(u64) -> f64) -> u64 {
    let block = 1u64 << weft_ir::reduction::ELEMENT_BLOCK_LEVEL;
    let blocks: Vec<f64> = (0..n.div_ceil(block))
        .map(|b| (b * block..((b + 1) * block).min(n)).fold(-0.0, |a, i| a + value(i)))
        .collect();
    reference(ReduceOp::Sum, 0.0, &[blocks.len() as u64], &|p| {
        blocks[p[0] as usize]
    })
}

/// Tall `(n, d)` matrices: `X.T @ r` reads `X` by rows (`vecmat_rows`); the `(d, n)` matrix
/// with the same values, stored wide, gives `A @ x` by columns (`vecmat`).
const TALL: [(u64, u64); 4] = [(9, 2), (1000, 7), (16_384 + 77, 3), (70_001, 2)];

fn wide_products(np: &weft::Numeric, label: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for (k, &(n, d)) in TALL.iter().enumerate() {
        let (nu, du) = (n as usize, d as usize);
        let xs = values(nu * du, 500 + k as u64);
        let rs = values(nu, 600 + k as u64);
        let bs = values(nu, 700 + k as u64);
        let x = np.from_vec(&[n, d], &xs);
        let r = np.from_vec(&[n], &rs);
        let b = np.from_vec(&[n], &bs);
        // The same matrix stored wide: a[c, i] = x[i, c].
        let wide: Vec<f64> = (0..du)
            .flat_map(|c| (0..nu).map(move |i| (i, c)))
            .map(|(i, c)| xs[i * du + c])
            .collect();
        let a = np.from_vec(&[d, n], &wide);
        let by_rows = x.t().matvec(&r).to_vec().expect("X.T @ r");
        let by_columns = a.matvec(&r).to_vec().expect("A @ r");
        // Fused with the element-wise task that makes the vector.
        let fused = x
            .t()
            .matvec(&(&r * 2.0 + &b))
            .to_vec()
            .expect("X.T @ (2r + b)");
        for c in 0..du {
            let want = element_tree_sum(n, &|i| xs[i as usize * du + c] * rs[i as usize]);
            let want_fused = element_tree_sum(n, &|i| {
                let i = i as usize;
                xs[i * du + c] * (rs[i] * 2.0 + bs[i])
            });
            let at = format!("({n}, {d}), element {c} ({label})");
            assert_eq!(by_rows[c].to_bits(), want, "X.T @ r of {at}");
            assert_eq!(by_columns[c].to_bits(), want, "A @ r of {at}");
            assert_eq!(fused[c].to_bits(), want_fused, "X.T @ (2r + b) of {at}");
            out.extend([want, want_fused]);
        }
    }
    out
}

/// Axis reductions whose result is smaller than what each element reduces, of inputs of more
/// than 65,536 elements (the plan that reduces in `treeblocks` levels): each element is
/// `init op` the canonical tree of its reduced sub-box, the innermost reduced dimension
/// first.
const AXES: [(&[u64], &[i64]); 5] = [
    (&[10_000, 7], &[0]),
    (&[7, 10_000], &[1]),
    (&[32_768 + 77, 3], &[0]),
    (&[40, 3, 550], &[0, 2]),
    (&[330, 2, 170], &[2, 0]),
];

/// Axis reductions of several axes whose result is smaller than what each element reduces,
/// of inputs of at most 65,536 elements (one task over the result: NPBench's `conv2d` sums
/// `(8, 5, 5, 3, 8)` products over three axes): each element folds its reduced sub-box into
/// the identity in row-major order, one value after another.
const SMALL_AXES: [(&[u64], &[i64]); 3] = [
    (&[8, 5, 5, 3, 8], &[1, 2, 3]),
    (&[33, 2, 17], &[2, 0]),
    (&[40, 3, 50], &[0, 2]),
];

/// The sums and products of [`SMALL_AXES`], against the row-major folds written out.
fn small_axis_reductions(np: &weft::Numeric, label: &str) -> Vec<u64> {
    use weft::numeric::Reduction;
    let mut out = Vec::new();
    for (k, &(shape, axes)) in SMALL_AXES.iter().enumerate() {
        let n = shape.iter().product::<u64>() as usize;
        let (xs, fs) = (values(n, 500 + k as u64), factors(n, 600 + k as u64));
        let rank = shape.len();
        let gone: Vec<usize> = (0..rank)
            .filter(|d| {
                axes.iter()
                    .any(|&a| (a + rank as i64) as usize % rank == *d)
            })
            .collect();
        let kept: Vec<usize> = (0..rank).filter(|d| !gone.contains(d)).collect();
        let got_sum = np
            .from_vec(shape, &xs)
            .reduce_axes(Reduction::Sum, Some(axes), false)
            .to_vec()
            .expect("sum");
        let got_prod = np
            .from_vec(shape, &fs)
            .reduce_axes(Reduction::Prod, Some(axes), false)
            .to_vec()
            .expect("prod");
        // Every element of the input, row-major: its result element and its order.
        let mut want_sum = vec![0.0f64; got_sum.len()];
        let mut want_prod = vec![1.0f64; got_prod.len()];
        let mut coords = vec![0u64; rank];
        // Elements of the input in the order each result element meets them: the reduced
        // dimensions' row-major order, whatever the kept ones.
        let mut order: Vec<(usize, u64, usize)> = Vec::with_capacity(n);
        for flat in 0..n {
            let mut rest = flat as u64;
            for d in (0..rank).rev() {
                coords[d] = rest % shape[d];
                rest /= shape[d];
            }
            let element = kept.iter().fold(0u64, |a, &d| a * shape[d] + coords[d]) as usize;
            let within = gone.iter().fold(0u64, |a, &d| a * shape[d] + coords[d]);
            order.push((element, within, flat));
        }
        order.sort_unstable();
        for &(element, _, flat) in &order {
            want_sum[element] += xs[flat];
            want_prod[element] *= fs[flat];
        }
        for e in 0..got_sum.len() {
            assert_eq!(
                got_sum[e].to_bits(),
                want_sum[e].to_bits(),
                "sum over {axes:?} of {shape:?}, element {e} ({label})"
            );
            assert_eq!(
                got_prod[e].to_bits(),
                want_prod[e].to_bits(),
                "prod over {axes:?} of {shape:?}, element {e} ({label})"
            );
            out.extend([want_sum[e].to_bits(), want_prod[e].to_bits()]);
        }
    }
    out
}

fn axis_reductions(np: &weft::Numeric, label: &str) -> Vec<u64> {
    use weft::numeric::Reduction;
    let mut out = Vec::new();
    for (k, &(shape, axes)) in AXES.iter().enumerate() {
        let n = shape.iter().product::<u64>() as usize;
        let xs = values(n, 300 + k as u64);
        let fs = factors(n, 400 + k as u64);
        let flat = |p: &[u64]| -> usize {
            p.iter()
                .zip(shape.iter())
                .fold(0u64, |a, (&c, &e)| a * e + c) as usize
        };
        let gone: Vec<usize> = axes
            .iter()
            .map(|&a| if a < 0 { a + shape.len() as i64 } else { a } as usize)
            .collect();
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !gone.contains(d)).collect();
        let mut sorted_gone = gone.clone();
        sorted_gone.sort_unstable();
        let sub: Vec<u64> = sorted_gone.iter().map(|&d| shape[d]).collect();
        let kept_shape: Vec<u64> = kept.iter().map(|&d| shape[d]).collect();
        let a = np.from_vec(shape, &xs);
        let f = np.from_vec(shape, &fs);
        let got_sum = a
            .reduce_axes(Reduction::Sum, Some(axes), false)
            .to_vec()
            .expect("sum");
        let got_prod = f
            .reduce_axes(Reduction::Prod, Some(axes), false)
            .to_vec()
            .expect("prod");
        let elements: usize = kept_shape.iter().product::<u64>() as usize;
        assert_eq!(got_sum.len(), elements);
        for e in 0..elements {
            // The element's kept coordinates, row-major.
            let mut rest = e as u64;
            let mut coords = vec![0u64; shape.len()];
            for (&d, &ext) in kept.iter().zip(&kept_shape).rev() {
                coords[d] = rest % ext;
                rest /= ext;
            }
            let at = |p: &[u64], c: &mut Vec<u64>| {
                for (&d, &x) in sorted_gone.iter().zip(p) {
                    c[d] = x;
                }
                flat(c)
            };
            let mut c1 = coords.clone();
            let want_sum = reference(ReduceOp::Sum, 0.0, &sub, &|p| xs[at(p, &mut c1.clone())]);
            let want_prod = reference(ReduceOp::Prod, 1.0, &sub, &|p| fs[at(p, &mut c1.clone())]);
            c1.clear();
            assert_eq!(
                got_sum[e].to_bits(),
                want_sum,
                "sum over {axes:?} of {shape:?}, element {e} ({label})"
            );
            assert_eq!(
                got_prod[e].to_bits(),
                want_prod,
                "prod over {axes:?} of {shape:?}, element {e} ({label})"
            );
            out.extend([want_sum, want_prod]);
        }
    }
    out
}

fn config(threads: usize, pieces: u64, simd: Option<SimdPath>) -> Config {
    Config {
        threads,
        pieces,
        simd,
        component_cache: None,
        ..Config::default()
    }
}

#[test]
fn reductions_give_the_canonical_bits_on_any_threads_pieces_and_path() {
    let base = run(config(1, 1, None));
    for (threads, pieces) in [(2, 1), (1, 3), (2, 3)] {
        assert!(run(config(threads, pieces, None)) == base);
    }
    let mut paths = 0;
    for path in SimdPath::ALL {
        if weft::Runtime::new(config(2, 3, Some(path))).is_ok() {
            assert!(run(config(2, 3, Some(path))) == base, "{path}");
            paths += 1;
        }
    }
    assert!(paths >= 2, "scalar and 128-bit code run everywhere");
}

/// `dot(p, A @ p)` for 2-D Poisson matrices of both index types: past `SMALL_DOT` unknowns the
/// product fuses with the dot, whose contributions the CSR rows combine eight at a time in
/// registers. The bits of the canonical order of `p[i] q[i]` (with `q` as the run computed
/// it; the lane order by `fma` for `SMALL_DOT` unknowns or fewer) on every configuration
/// `config` gives.
fn sparse_dots(config: Config) -> Vec<u64> {
    let (np, sp) = weft_tests::plugins_with(config);
    let mut out = Vec::new();
    for (g, index) in [
        (1, DType::I32),
        (3, DType::I64),
        (67, DType::I32),
        (130, DType::I64),
    ] {
        let a = sp.poisson2d(g, DType::F64, index).expect("poisson2d");
        let n = g * g;
        let ps = values(n as usize, g);
        let p = np.from_vec(&[n], &ps);
        let q = a.matvec(&p);
        let got = p.dot(&q).to_vec().expect("dot")[0].to_bits();
        let qs = q.to_vec().expect("q");
        let want = if n <= SMALL_DOT {
            lane_fma_dot(&ps, &qs).to_bits()
        } else {
            reference(ReduceOp::Sum, 0.0, &[n], &|i| {
                ps[i[0] as usize] * qs[i[0] as usize]
            })
        };
        assert_eq!(got, want, "dot(p, A p) for g = {g}, {index} indices");
        out.push(got);
    }
    out
}

#[test]
fn a_dot_fused_into_a_sparse_product_gives_the_canonical_bits_everywhere() {
    let base = sparse_dots(config(1, 1, None));
    for (threads, pieces) in [(2, 1), (1, 3), (2, 3)] {
        assert!(sparse_dots(config(threads, pieces, None)) == base);
    }
    for path in SimdPath::ALL {
        if weft::Runtime::new(config(2, 3, Some(path))).is_ok() {
            assert!(sparse_dots(config(2, 3, Some(path))) == base, "{path}");
        }
    }
}

#[test]
fn the_canonical_order_is_not_the_sequential_one() {
    // The test above would pass for a sequential sum only if the orders agreed.
    let xs = values(1000, 14);
    let sequential: f64 = xs.iter().fold(0.0, |a, &x| a + x);
    let want = reference(ReduceOp::Sum, 0.0, &[1000], &|p| xs[p[0] as usize]);
    assert_ne!(sequential.to_bits(), want);
}

/// Rows of lengths `lens` at pseudo-random columns of `0..cols`, values from [`values`].
fn csr_with_lengths(lens: &[usize], cols: usize, seed: u64) -> Csr32 {
    let nnz: usize = lens.iter().sum();
    let val = values(nnz, seed);
    let mut h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let col = (0..nnz)
        .map(|_| {
            h ^= h << 13;
            h ^= h >> 7;
            h ^= h << 17;
            (h % cols as u64) as i32
        })
        .collect();
    let mut ptr = vec![0i32];
    for &len in lens {
        let last = ptr.last().copied().unwrap_or(0);
        ptr.push(last + len as i32);
    }
    Csr32 { ptr, col, val }
}

/// `A x` through the `sparse` plugin, each row summed in `order`, with `i32` and `i64`
/// indices, as bits, asserting that each equals `row`'s plain-Rust loop bit for bit.
fn sparse_products(
    config: &Config,
    a: &Csr32,
    cols: usize,
    (order, row): (RowOrder, Row),
    label: &str,
) -> Vec<u64> {
    let (np, sp) = weft_tests::plugins_with(config.clone());
    let rows = a.ptr.len() - 1;
    let xs = values(cols, 5);
    let mut want = vec![0.0; rows];
    product(a, &xs, &mut want, row, 7);
    let ints = |v: &[i32]| v.iter().map(|&k| f64::from(k)).collect::<Vec<f64>>();
    let x = np.from_vec(&[cols as u64], &xs);
    let mut out = Vec::new();
    for index in [DType::I32, DType::I64] {
        let m = sp
            .from_csr_arrays(
                (rows as u64, cols as u64),
                &np.from_vec(&[rows as u64 + 1], &ints(&a.ptr)).astype(index),
                &np.from_vec(&[a.col.len() as u64], &ints(&a.col))
                    .astype(index),
                &np.from_vec(&[a.val.len() as u64], &a.val),
            )
            .expect("a valid CSR matrix")
            .with_row_order(order);
        assert_eq!(m.row_order(), order);
        // Matrices of the same pattern keep the order; a new pattern starts sequential.
        assert_eq!(m.scale(2.0).expect("scale").row_order(), order);
        let other = m.with_index_type(DType::I64).expect("i64 indices");
        assert_eq!(other.row_order(), order);
        let t = m.transpose().expect("transpose");
        assert_eq!(t.row_order(), RowOrder::Sequential);
        let y = m.matvec(&x).to_vec().expect("A x");
        assert_eq!(y.len(), rows);
        for (r, (got, want)) in y.iter().zip(&want).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "row {r} of {rows} ({} entries), {index} indices, {label}",
                a.ptr[r + 1] - a.ptr[r]
            );
        }
        out.extend(y.iter().map(|v| v.to_bits()));
    }
    out
}

#[test]
fn sparse_rows_sum_in_their_row_order_on_any_threads_pieces_and_path() {
    // Rows of many lengths: empty, shorter than a block of eight (where the orders agree),
    // not a multiple of eight, long enough for the wide bodies.
    let lens: Vec<usize> = (0..23)
        .map(|r| match r % 6 {
            0 => 0,
            1 => r % 8,
            _ => 9 + (r * 137) % 900,
        })
        .collect();
    let cols = 3001;
    let a = csr_with_lengths(&lens, cols, 3);
    // The orders differ on these rows, so the test tells them apart.
    let xs = values(cols, 5);
    let rows = lens.len();
    let (mut seq, mut lanes) = (vec![0.0; rows], vec![0.0; rows]);
    product(&a, &xs, &mut seq, row_sequential, 7);
    product(&a, &xs, &mut lanes, row_lanes, 7);
    assert!(
        seq.iter()
            .zip(&lanes)
            .any(|(s, l)| s.to_bits() != l.to_bits())
    );

    for order in [
        (RowOrder::Sequential, row_sequential as Row),
        (RowOrder::Lanes, row_lanes as Row),
    ] {
        let base = sparse_products(&config(1, 1, None), &a, cols, order, "1 thread");
        for (threads, pieces) in [(2, 1), (1, 3), (2, 3)] {
            let label = format!("{:?}, {threads} threads, {pieces} pieces", order.0);
            let got = sparse_products(&config(threads, pieces, None), &a, cols, order, &label);
            assert!(got == base, "{label}");
        }
        let mut paths = 0;
        for path in SimdPath::ALL {
            if weft::Runtime::new(config(2, 3, Some(path))).is_ok() {
                let label = format!("{:?}, {path}", order.0);
                let got = sparse_products(&config(2, 3, Some(path)), &a, cols, order, &label);
                assert!(got == base, "{label}");
                paths += 1;
            }
        }
        assert!(paths >= 2, "scalar and 128-bit code run everywhere");
    }
}
